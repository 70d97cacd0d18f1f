"""`plait targets`, `plait targets --explain`, and out-of-tree kinds from `plait.backends` entry points.

The test-only plugin package lives in tests/target/plugin_fixture/: a module plus a `.dist-info`
directory (METADATA, entry_points.txt), found by importlib.metadata once the directory is on the path.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from plait.cli import main
from plait.target import PluginError, Target, get_kind, list_kinds
from plait.target.testing import isolated_registry

FIXTURE = Path(__file__).parent / "plugin_fixture"
SEED = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"


def plait(*args: str, path: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path)] + [p for p in [env.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-m", "plait.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def broken_plugin(tmp_path: Path) -> Path:
    (tmp_path / "plait_broken_plugin.py").write_text("raise RuntimeError('no device attached')\n")
    dist = tmp_path / "plait_broken-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plait-broken\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[plait.backends]\nbroken = plait_broken_plugin\n")
    return tmp_path


BROKEN = ("cannot load target plugin 'broken = plait_broken_plugin' (entry point group 'plait.backends'): "
          "RuntimeError: no device attached")


# ---- entry points -----------------------------------------------------------------------------------


def test_plait_targets_lists_a_kind_from_an_entry_point():
    r = plait("targets", path=FIXTURE)
    assert r.returncode == 0, r.stderr
    block = r.stdout.split("\nfakeaccel ", 1)[1].split("\n\n", 1)[0].splitlines()
    assert block == [
        " [device npu, cannot host]  a pretend accelerator (test plugin)",
        "  from: entry point 'fakeaccel' (plait_fakeaccel:FakeAccel)",
        "  options:",
        "    -macs=<int>   default 128  multiply-accumulate units",
        "    -keys=<list>  default npu  dispatch keys, most specific first; the kind's default keys are appended",
        "  hooks: relay_to_runtime, supports",
    ]
    assert "  fakeaccel-256  = fakeaccel -macs=256\n" in r.stdout
    assert "target kinds (5):" in r.stdout  # c, llvm, blas, onnxruntime (in-tree) + the plugin
    # without the plugin on the path, it is not there
    assert "fakeaccel" not in plait("targets").stdout


def test_explain_a_target_using_the_plugin_kind():
    r = plait("targets", "--explain", "host: c; npu: fakeaccel-256 -macs=512", path=FIXTURE)
    assert r.returncode == 0, r.stderr
    npu = r.stdout.split("\npiece 'npu': ", 1)[1].splitlines()
    assert npu[:7] == [
        "fakeaccel-256 -macs=512",
        "  canonical: fakeaccel-256 -macs=512",
        "  spelled out: fakeaccel -macs=512",
        "  kind: fakeaccel [device npu] a pretend accelerator (test plugin)",
        "  options:",
        "    macs = 512                  given",
        "    keys = npu                  default",
    ]
    assert "host: host (the piece called 'host')" in r.stdout


def test_plugins_load_lazily_in_process(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURE))
    monkeypatch.delitem(sys.modules, "plait_fakeaccel", raising=False)
    with isolated_registry():
        assert Target("c -mcpu=cortex-m0").kind_name == "c"  # in-tree names need no plugin
        assert "plait_fakeaccel" not in sys.modules
        t = Target("fakeaccel -macs=64")  # not found in-tree: the entry points load
        assert t.options["macs"] == 64 and t.kind.device_type == "npu"
        assert get_kind("fakeaccel").origin == "entry point 'fakeaccel' (plait_fakeaccel:FakeAccel)"
        assert get_kind("c").origin == "plait"
        names = [k.name for k in list_kinds()]
        assert names == sorted(names) and {"c", "fakeaccel", "llvm"} <= set(names)
        assert Target("fakeaccel-256").facts.clock_mhz.value == 100
    sys.modules.pop("plait_fakeaccel", None)


def test_a_broken_plugin_is_a_clear_error(tmp_path, monkeypatch):
    r = plait("targets", path=broken_plugin(tmp_path))
    assert (r.returncode, r.stdout, r.stderr) == (1, "", f"plait: error: {BROKEN}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with isolated_registry():
        assert Target("cortex-m0").tag == "cortex-m0"  # in-tree names still work
        for _ in range(2):  # the same error every time it is asked for
            with pytest.raises(PluginError) as e:
                Target("accel")
            assert str(e.value) == BROKEN
    sys.modules.pop("plait_broken_plugin", None)


# ---- the listing and --explain, in process ----------------------------------------------------------


def test_plait_targets_lists_kinds_options_tags_and_hooks(capsys):
    assert main(["targets"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("target kinds (")
    for line in [
        "c  [device cpu, can host]  C source compiled by a C compiler (gcc on the host, arm-none-eabi-gcc for Cortex-M)",
        "    -opt-level=<int>   default 2    optimization level passed as -O<n> (one of 0, 1, 2, 3)",
        "    -mattr=<list>  default none  LLVM target features, e.g. +avx2,+fma",
        "  cortex-m7f     = c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard -keys=arm_cpu",
        "                   216 MHz, FPU sp, SIMD 32 bits, RAM 320 KiB, flash 1024 KiB, ~330 mW",
        "  cortex-m0      = c -mcpu=cortex-m0 -keys=arm_cpu",
        "  relay_to_tir     (mod: IRModule, target: Target) -> IRModule or (mod, target, ctx) -> IRModule: replaces "
        "default lowering: Relay functions -> TIR PrimFuncs",
    ]:
        assert line in out.splitlines(), line


def test_explain_the_seed_target(capsys):
    assert main(["targets", "--explain", SEED]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        f"target: {SEED}",
        "canonical: low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 "
        "-mfloat-abi=hard",
        "host: low_power_cpu (the first piece whose kind can run the executor)",
        "pieces: 2",
    ]
    i = lines.index("piece 'inference_cpu': c -mcpu=cortex-m7f")
    assert lines[i + 1:i + 17] == [
        "  canonical: c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard",
        "  kind: c [device cpu] C source compiled by a C compiler (gcc on the host, arm-none-eabi-gcc for Cortex-M)",
        "  note: -mcpu=cortex-m7f read as -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard",
        "  options:",
        "    mcpu       = cortex-m7            given as cortex-m7f, normalized",
        "    march      = ''                   default",
        "    mfpu       = fpv5-sp-d16          normalized",
        "    mfloat-abi = hard                 normalized",
        "    opt-level  = 2                    default",
        "    cc         = ''                   default",
        "    board      = ''                   default",
        "    requantize = ''                   default",
        "    libm       = ''                   default",
        "    int8-dot   = ''                   default",
        "    keys       = arm_cpu,cpu          tag 'cortex-m7f' (matched)",
        lines[i + 16],  # hooks: depends on which backends are loaded
    ]
    assert lines[i + 16].startswith("  hooks: ")
    assert lines[i + 17] == "  facts: from tag 'cortex-m7f', whose options match: mcpu=cortex-m7, march='', " \
                            "mfpu=fpv5-sp-d16"
    assert lines[i + 18].startswith("    clock_mhz  216 MHz      tag cortex-m7f: STM32F746 overview")
    assert lines[i + 22] == "    flash_kb   1024 KiB     tag cortex-m7f: STM32F746NG datasheet (DS10916): 1 MB flash " \
                            "(Zephyr stm32f746g_disco.yaml)"
    assert "piece 'low_power_cpu' (host): c -mcpu=cortex-m0" in lines


def test_explain_errors_are_reported_not_raised(capsys):
    assert main(["targets", "--explain", "a: c; a: llvm"]) == 1
    assert capsys.readouterr().err == "plait: error: composite target: duplicate piece name 'a'\n"
    assert main(["targets", "--explain", "c -mcpu=x -O3"]) == 1
    assert capsys.readouterr().err == \
        "plait: error: target kind 'c' has no option '-O3'; valid options: -board, -cc, -clock-mhz, -flash-kb, " \
        "-fma-bits, -int8-dot, -keys, -libm, -march, -mcpu, -mfloat-abi, -mfpu, -opt-level, -ram-kb, -requantize, -simd-bits\n"


def test_a_mistyped_cpu_stops_plait_run_before_any_work(tmp_path, capsys):
    import onnx

    from plait.testing import onnx_models

    path = tmp_path / "mlp.onnx"
    onnx.save(onnx_models.mlp(), str(path))
    assert main(["run", str(path), "--target", "c -mcpu=cortx-m0"]) == 2
    assert capsys.readouterr().err == (
        "plait: error: target 'c -mcpu=cortx-m0': -mcpu=cortx-m0 is not a CPU that gcc accepts (did you mean "
        "'cortex-m0' or 'cortex-m7' or 'cortex-m4'?); plait also translates cortex-m4f, cortex-m7f, cortex-m33f "
        "(the core with its FPU)\n")


def test_targets_lists_the_fact_options_once_and_explains_the_m55(capsys):
    assert main(["targets"]) == 0
    out = capsys.readouterr().out.splitlines()
    i = out.index("options of every kind (they override the tag's or the measured facts):")
    assert [line.split()[0] for line in out[i + 1:i + 6]] == ["-ram-kb=<int>", "-flash-kb=<int>", "-clock-mhz=<int>",
                                                               "-simd-bits=<int>", "-fma-bits=<int>"]
    assert sum(line.lstrip().startswith("-ram-kb=") for line in out) == 1
    assert main(["targets", "--explain", "c -mcpu=cortex-m55"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  facts: from tag 'cortex-m55', whose options match: mcpu=cortex-m55, march='', mfpu=''" in lines
    assert "    mfloat-abi = hard                 tag 'cortex-m55' (matched)" in lines
    assert "    ram_kb     1024 KiB     tag cortex-m55: Alif Ensemble E7 RTSS-HP: 1 MB DTCM (Alif CMSIS pack " \
           "M55_HP_map.h: DTCM = SRAM3, 1 MB)  (the 6.5 MB of SRAM0/SRAM1 shared with the other cores not counted)" \
           in lines
    assert main(["targets", "--explain", "c -mcpu=cortex-m7f -flash-kb=2048"]) == 0
    assert "    flash_kb   2048 KiB     target option -flash-kb" in capsys.readouterr().out.splitlines()
