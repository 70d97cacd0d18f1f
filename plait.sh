#!/usr/bin/env bash
# plait on a fresh machine (Debian/Ubuntu, Python >= 3.11), in one command:
#
#   ./plait.sh demo     install what is missing, then compile a bundled model for a composite target
#                       (explain the placement, build, run in host simulation and on emulated Cortex-M
#                       cores under QEMU, compare with the reference interpreter)
#   ./plait.sh test     install what is missing, then run the test suite (python -m pytest -n 2)
#   ./plait.sh install  only install
#
# Installs: the apt packages below that are missing (as root with apt-get; otherwise it prints the
# apt line to run and stops), then plait and its test dependencies into a project venv, .venv/ in
# this directory (Debian's system pip refuses installs: PEP 668). The venv is reinstalled only when
# pyproject.toml changed. Afterwards, `. .venv/bin/activate` puts `plait` on your PATH.
set -euo pipefail
cd "$(dirname "$0")"

VENV=.venv
STAMP=$VENV/.plait-installed         # holds the sha256 of the pyproject.toml it was installed from
TARGET="low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"

say() { printf 'plait.sh: %s\n' "$*" >&2; }

# The apt packages that are missing, one per line. gcc: the C backend builds host code with it;
# gcc-arm-none-eabi + libnewlib-arm-none-eabi: the Cortex-M pieces' cross compiler and C library;
# graphviz: `plait explain --graph`; qemu-system-arm + make: firmware runs on emulated Cortex-M boards
# (`plait run --executor aot --on qemu`, docs/embedded.md); python3-venv: Debian's python3 cannot make a
# venv without it.
missing_apt() {
    command -v python3 >/dev/null 2>&1 || echo python3
    command -v gcc >/dev/null 2>&1 || echo gcc
    command -v arm-none-eabi-gcc >/dev/null 2>&1 || echo gcc-arm-none-eabi
    if ! command -v arm-none-eabi-gcc >/dev/null 2>&1 \
        || [ "$(arm-none-eabi-gcc -print-file-name=libc.a)" = libc.a ]; then
        echo libnewlib-arm-none-eabi
    fi
    command -v dot >/dev/null 2>&1 || echo graphviz
    command -v qemu-system-arm >/dev/null 2>&1 || echo qemu-system-arm
    command -v make >/dev/null 2>&1 || echo make
    if ! command -v python3 >/dev/null 2>&1; then
        echo python3-venv
    elif [ ! -x $VENV/bin/python ] && ! python3 -m venv $VENV >/dev/null 2>&1; then
        rm -rf $VENV              # Debian's python3 makes no venv (no ensurepip) without python3-venv
        echo python3-venv
    fi
}

install_apt() {
    local pkgs
    pkgs=$(missing_apt | tr '\n' ' ')
    pkgs=${pkgs% }
    [ -z "$pkgs" ] && return 0
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        local sudo=
        [ "$(id -u)" = 0 ] || sudo="sudo "
        say "missing system packages; install them, then run this again:"
        say "  ${sudo}apt-get install $pkgs"
        exit 1
    fi
    say "installing system packages: $pkgs"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
}

install_venv() {
    local want
    want=$(sha256sum pyproject.toml | cut -d' ' -f1)
    if [ -x $VENV/bin/python ] && [ "$(cat $STAMP 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    if [ ! -x $VENV/bin/python ]; then
        rm -rf $VENV
        python3 -m venv $VENV
    fi
    say "installing plait and its test dependencies into $VENV (pip install -e '.[dev]')"
    $VENV/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
    echo "$want" >$STAMP
}

install() {
    install_apt
    install_venv
    export VIRTUAL_ENV=$PWD/$VENV
    export PATH=$VIRTUAL_ENV/bin:$PATH
}

# The main job on a bundled model: explain, build and run on the composite target, compare.
demo() {
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
    set -x
    python -m plait.testing.onnx_models examples >/dev/null
    plait explain examples/ds_cnn.onnx --target "$TARGET"
    plait run examples/ds_cnn.onnx --target "$TARGET" --seed 0 --output "$out/compiled.npz"
    plait run examples/ds_cnn.onnx --target "$TARGET" --executor aot --on qemu --seed 0 --output "$out/qemu.npz"
    plait run examples/ds_cnn.onnx --seed 0 --output "$out/reference.npz"
    { set +x; } 2>/dev/null
    python - "$out/compiled.npz" "$out/qemu.npz" "$out/reference.npz" <<'EOF'
import sys
import numpy as np
got, qemu, want = (np.load(f) for f in sys.argv[1:4])
diff = max(float(np.max(np.abs(got[k] - want[k]))) for k in want.files)
ok = sorted(got.files) == sorted(want.files) and all(np.allclose(got[k], want[k], rtol=1e-4, atol=1e-5)
                                                      for k in want.files)
same = sorted(qemu.files) == sorted(got.files) and all(np.array_equal(qemu[k], got[k]) for k in got.files)
print(f"{'the same bits' if same else 'NOT THE SAME BITS'} on the emulated Cortex-M cores (QEMU, plain C of the "
      "AOT executor) as in host simulation")
print(f"{'matches' if ok else 'DOES NOT MATCH'} the reference interpreter: max abs diff {diff:.3g} "
      f"(outputs {', '.join(want.files)})")
sys.exit(0 if ok and same else 1)
EOF
}

case "${1:-}" in
    demo) install; demo ;;
    test) shift; install; exec python -m pytest -n 2 "$@" ;;
    install) install ;;
    *) echo "usage: ./plait.sh demo | test [PYTEST ARGS] | install" >&2; exit 2 ;;
esac
