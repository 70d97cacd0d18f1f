"""The C of a 32-bit piece copies padded planes without a bounds test per element (plait/tir/partition.py, run
by the c kind's codegen before narrowing); the results are the interpreter's; a host piece's C keeps the test."""

from __future__ import annotations

import numpy as np

from plait import tir
from plait.backends.c.backend import codegen_c, target_prim_funcs
from plait.tir import Buffer, For, PrimFunc, Var

from .conftest import run_c, run_ref

M4F = "c -mcpu=cortex-m4f"


def _pack() -> PrimFunc:
    """A depthwise pack: ``P[yy, f0, c] = in bounds ? int16(X[c, yy - 1, f0 - 1] + 128) : 0`` (pad 1)."""
    X, P = Buffer("X", (4, 6, 5), "int8"), Buffer("P", (8, 7, 4), "int16")
    yy, f0, c = Var("yy"), Var("f0"), Var("c")
    inside = (yy - 1 >= 0) & (yy - 1 < 6) & (f0 - 1 >= 0) & (f0 - 1 < 5)
    val = tir.select(inside, tir.cast("int16", tir.cast("int32", X[c, yy - 1, f0 - 1]) + 128), tir.const(0, "int16"))
    body = For(yy, 0, 8, "serial", For(f0, 0, 7, "serial", For(c, 0, 4, "serial", P.store((yy, f0, c), val))))
    return PrimFunc((X, P), body, {"global_symbol": "pack", "num_inputs": 1})


def test_cortex_m_copies_without_the_test(cache_dir):
    f = _pack()
    body = codegen_c([f], M4F).source.split('PrimFunc "pack"', 1)[1]
    assert "?" not in body and ">= 0" not in body  # no select, no bounds test
    assert body.count("for (int32_t yy") == 3 and body.count("for (int32_t f0") == 5  # border, interior
    assert "?" in codegen_c([f], "c").source.split('PrimFunc "pack"', 1)[1]  # the host's C is what it was
    assert target_prim_funcs([f], "c")[0] is f
    x = np.random.default_rng(2).integers(-128, 128, (4, 6, 5)).astype(np.int8)
    args = [x, np.full((8, 7, 4), -1, np.int16)]
    (got,) = run_c([f], [args], cache_dir, target=M4F, host_simulation=True)
    want = run_ref(f, args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
