"""The AOT directory as C: it builds with its Makefile warning-free under the pedantic flags (host gcc and
arm-none-eabi-gcc for the Cortex-M cores), its objects need nothing but each other, memcpy, libm (and
the compiler's own support library), and the C main of docs/executors.md runs it like the Graph executor."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import plait
from plait.runtime.c_lang import HEADER_NAMES
from plait.executor import GraphModule
from plait.frontend.onnx import from_onnx
from plait.testing import onnx_models

ROOT = Path(__file__).resolve().parents[2]
CPUS = ("cortex-m0", "cortex-m4f", "cortex-m7f", "cortex-m55")
HAVE_ARM = shutil.which("arm-none-eabi-gcc") is not None


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


def small_models():
    """Small enough for a Cortex-M0's RAM: convolutions, dense, softmax, layer norm (expf, sqrtf)."""
    return {"ds_cnn": onnx_models.ds_cnn(channels=8, blocks=1),
            "transformer": onnx_models.transformer_encoder(d_model=8, heads=2, d_ff=16, seq=4)}


def make(d: Path, cc: str | None = None) -> None:
    cmd = ["make", "-s", "-C", str(d)] + ([f"CC={cc}"] if cc else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert (d / f"lib{d.name}.a").is_file() or any(d.glob("lib*.a"))


def undefined_outside(objects: list[Path], nm: str) -> set[str]:
    """Symbols the objects use that none of them defines."""
    defined, used = set(), set()
    for o in objects:
        out = subprocess.run([nm, str(o)], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[-2] == "U":
                used.add(parts[-1])
            elif len(parts) == 3:
                defined.add(parts[2])
    return used - defined


def sections(obj: Path) -> dict[str, int]:
    """Section name -> size of an ARM object file."""
    out = subprocess.run(["arm-none-eabi-objdump", "-h", str(obj)], capture_output=True, text=True, check=True).stdout
    rows = [ln.split() for ln in out.splitlines()]
    return {r[1]: int(r[2], 16) for r in rows if len(r) >= 7 and r[0].isdigit()}


def allowed(sym: str) -> bool:
    """memcpy, libm, and what gcc itself emits: the compiler's support routines (soft float on a Cortex-M0:
    __aeabi_*) and memset/memmove, which gcc requires even of a freestanding environment (it turns a
    zero-filling loop into memset)."""
    return sym in ("memcpy", "memset", "memmove") or sym in HEADER_NAMES or sym.startswith("__") or re.fullmatch(r"_ZGV\w+", sym) is not None


@pytest.mark.skipif(not HAVE_ARM, reason="arm-none-eabi-gcc is not installed")
@pytest.mark.parametrize("cpu", CPUS)
def test_cortex_m_objects_build_with_pedantic_flags(cpu, cache, tmp_path):
    for name, model in small_models().items():
        art = plait.build(from_onnx(model), target=f"c -mcpu={cpu}", executor="aot",
                          config={"cc.cache_dir": cache, "aot.name": name})
        d = art.export(tmp_path / name)
        assert all(s["cc"] == "arm-none-eabi-gcc" and f"-mcpu={cpu.rstrip('f')}" in s["flags"]
                   for s in art.metadata["sources"])
        make(d)
        objects = sorted((d / "build").glob("*.o"))
        assert len(objects) == len(art.metadata["sources"])
        bad = {s for s in undefined_outside(objects, "arm-none-eabi-nm") if not allowed(s)}
        assert bad == set()
        # constants in .rodata (flash), pools in .bss, nothing in .data (RAM initialized from flash)
        consts = sections(d / "build" / f"plait_{name}_constants.o")
        assert sum(n for s, n in consts.items() if s.startswith(".rodata")) >= art.memory["constant_bytes"]
        entry = sections(d / "build" / f"plait_{name}.o")
        assert sum(n for s, n in entry.items() if s.startswith(".bss")) == sum(p["bytes"] for p in art.memory["pools"])
        assert all(n == 0 for o in objects for s, n in sections(o).items() if s.startswith(".data"))


def test_host_directory_builds_with_pedantic_flags(cache, tmp_path):
    art = plait.build(from_onnx(onnx_models.ds_cnn(channels=8, blocks=1)), target="host: c; acc: c",
                      place="Conv=acc", executor="aot", config={"cc.cache_dir": cache, "aot.name": "kws"})
    d = art.export(tmp_path / "kws")
    make(d)
    objects = sorted((d / "build").glob("*.o"))
    assert {s for s in undefined_outside(objects, "nm") if not allowed(s)} == set()
    text = "".join(art.files[s["file"]] for s in art.metadata["sources"])
    assert "malloc" not in text


def docs_main() -> str:
    """The C main of docs/executors.md (the ```c block after 'A C main that runs it')."""
    doc = (ROOT / "docs" / "executors.md").read_text()
    m = re.search(r"A C `main` that runs it.*?```c\n(.*?)```", doc, re.S)
    assert m, "docs/executors.md has no C main"
    return m.group(1)


def test_docs_c_main_runs_the_model_like_the_graph_executor(cache, tmp_path):
    model = onnx_models.mlp(sizes=(8, 16, 4))
    mod = from_onnx(model)
    art = plait.build(mod, executor="aot", config={"cc.cache_dir": cache, "aot.name": "mlp"})
    d = art.export(tmp_path / "mlp")
    make(d)
    main = tmp_path / "main.c"
    main.write_text(docs_main())
    src = docs_main()
    assert len(src.strip().splitlines()) <= 22
    exe = tmp_path / "main"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{d / 'include'}", str(main),
                    str(d / "libplait_mlp.a"), *art.metadata["link_flags"], "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    got = np.array([float(v) for v in out.split()], np.float32)
    x = ((np.arange(8) % 7).astype(np.float32) / np.float32(7)).reshape(1, 8)
    (want,) = GraphModule(plait.build(mod, config={"cc.cache_dir": cache}))(x=x)
    assert np.array_equal(got, want.reshape(-1))
