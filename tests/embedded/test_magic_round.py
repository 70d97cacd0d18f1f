"""Round half to even by the float32 magic number on a core without VRINT (plait/backends/c/rounding.py):
Cortex-M4F's C has no nearbyintf in its requantizations and gives numpy's rint on ties, near the 2**22 limit
and for NaN/inf (the clamp), on the host simulation and on the emulated core; M7F (VRINTR) keeps nearbyintf."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import plait
from plait import tir
from plait.backends.c.backend import build_c, codegen_c
from plait.backends.c.rounding import MAGIC, round_by_magic
from plait.executor.aot.qemu import QemuModule
from plait.relay import IRModule, call, const, var
from plait.tir import Buffer, For, PrimFunc, Var

HAVE = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None
M4F = "c -mcpu=cortex-m4f"
LIM = 2.0**22 - 1


def _values() -> np.ndarray:
    k = np.arange(-300, 300, dtype=np.float32)
    edges = np.array([LIM, -LIM, LIM - 0.5, -LIM + 0.5, LIM - 1.5, 2**21 + 0.5, -(2**21) - 0.5, 4194302.5, 1e-30,
                      -1e-30, -0.0, 0.49999997, -0.49999997, 0.50000006, 1e9, -1e9, np.inf, -np.inf, np.nan],
                     np.float32)
    rng = np.random.default_rng(2)
    return np.concatenate([k + 0.5, k, k + 0.25, k - 0.75, edges, (rng.standard_normal(1000) * 3000).astype(np.float32),
                           (rng.random(1000) * 2**23 - 2**22).astype(np.float32)]).astype(np.float32)


def _func(n: int) -> PrimFunc:
    A, B = Buffer("A", (n,), "float32"), Buffer("B", (n,), "int32")
    i = Var("i")
    v = tir.cast("int32", tir.nearbyint(tir.min(tir.max(A[i], -LIM), LIM)))
    return PrimFunc((A, B), For(i, 0, n, "serial", B.store((i,), v)), {"global_symbol": "rne", "num_inputs": 1})


def _want(x: np.ndarray) -> np.ndarray:
    return np.rint(np.clip(np.nan_to_num(x, nan=-LIM), -LIM, LIM)).astype(np.int32)


def test_the_rewrite_and_where_it_applies():
    f = _func(8)
    g = round_by_magic(f)
    assert "cast(int32, min(max(A[i], -4.194303e+06), 4.194303e+06) + 1.2582912e+07 - 1.2582912e+07)" in str(g.body)
    wide = Buffer("W", (8,), "float32")  # a bound at 2**22 or beyond: not rounded so
    i = Var("i")
    h = PrimFunc((wide, Buffer("O", (8,), "int32")), For(i, 0, 8, "serial", Buffer("O", (8,), "int32").store(
        (i,), tir.cast("int32", tir.nearbyint(tir.min(tir.max(wide[i], -2.0**22), 2.0**22))))), {})
    assert round_by_magic(h) is h
    assert "nearbyintf" not in codegen_c([f], M4F).source and "1.2582912e+07f" in codegen_c([f], M4F).source
    for t in ("c -mcpu=cortex-m7f", "c -mcpu=cortex-m55", "c"):
        assert "nearbyintf" in codegen_c([f], t).source


def test_interpreter_and_host_simulation_give_rint(tmp_path):
    x = _values()
    f = _func(len(x))
    out = np.zeros(len(x), np.int32)
    tir.evaluate(round_by_magic(f), x, out)
    np.testing.assert_array_equal(out, _want(x))
    lib = build_c([f], M4F, host_simulation=True, cache_dir=tmp_path)
    out2 = np.zeros(len(x), np.int32)
    lib["rne"](x, out2)
    np.testing.assert_array_equal(out2, _want(x))
    assert float(np.float32(MAGIC)) == 1.5 * 2**23


@pytest.mark.skipif(not HAVE, reason="needs qemu-system-arm and arm-none-eabi-gcc")
def test_quantize_on_the_emulated_m4f_rounds_half_to_even(tmp_path):
    x = np.concatenate([np.arange(-130, 130, dtype=np.float32) + 0.5, np.arange(-130, 130, dtype=np.float32) * 0.37,
                        np.array([np.nan, np.inf, -np.inf, -0.0, 0.49999997, -0.5, 127.5, -128.5], np.float32)])
    x = x.reshape(1, -1)
    mod = IRModule.from_expr(call("qnn.quantize", var("x", x.shape, "float32"), const(np.float32(1.0)),
                                  const(np.int8(0))))
    art = plait.build(mod, target=M4F, executor="aot",
                      config={"aot.name": "q", "cc.cache_dir": str(tmp_path), "c.host_simulation": True})
    src = "".join(art.files[s["file"]] for s in art.metadata["sources"] if s["file"].endswith("_ops.c"))
    assert "nearbyintf" not in src and "1.2582912e+07f" in src
    got = QemuModule(art, timeout_s=60)(x=x)
    got = got[0] if isinstance(got, (list, tuple)) else got
    want = np.rint(np.clip(np.nan_to_num(x, nan=-128.0), -128, 127)).astype(np.int8)
    np.testing.assert_array_equal(np.asarray(got), want)
