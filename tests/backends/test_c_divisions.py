"""Integer divisions by constants that loop ranges decide, rewritten before C emission
(plait/backends/c/divisions.py): the reshape/broadcast indices of fused functions become plain
affine indices (no helper call, no gather), and every rewrite keeps TIR's result, checked against
the TIR interpreter on values where the sums are negative, cross blocks, or would wrap."""

from __future__ import annotations

import numpy as np

from plait.backends.c.backend import codegen_c
from plait.backends.c.divisions import simplify_divisions
from plait.tir import Buffer, For, IntImm, PrimFunc, Var
from plait.tir.expr import FloorDiv, FloorMod, TruncDiv, TruncMod
from plait.tir.functor import pre_order

from .conftest import assert_same, run_c, run_ref

DIVS = (FloorDiv, FloorMod, TruncDiv, TruncMod)


def _func(name, out_shape, loops, index, dtype="int64"):
    """out[loop vars] = x[index(*vars)] + 0 for ``loops`` ((min, extent) per output dim)."""
    vs = [Var(f"i{k}", dtype) for k in range(len(loops))]
    X = Buffer("x", (4096,), "int32")
    Y = Buffer("y", out_shape, "int32")
    body = Y.store(tuple(v - lo if lo else v for v, (lo, _) in zip(vs, loops)), X[index(*vs)])
    for v, (lo, n) in reversed(list(zip(vs, loops))):
        body = For(v, IntImm(lo, dtype), IntImm(n, dtype), "serial", body)
    return PrimFunc((X, Y), body, {"global_symbol": name, "num_inputs": 1})


def _divs(f):
    return [n for n in pre_order(f.body) if isinstance(n, DIVS)]


def _check(f, cache_dir):
    x = np.arange(4096, dtype=np.int32) * 7 - 5000
    y = np.zeros(f.params[1].static_shape, np.int32)
    (got,) = run_c([f], [[x, y]], cache_dir)
    assert_same(got, run_ref(f, [x, y]))


def test_a_reshape_index_becomes_affine(cache_dir):
    # a [32, 256] -> [8192] -> [32, 256] round trip: ((i*256 + j) // 256) * 256 + (i*256 + j) % 256
    def index(i, j):
        flat = i * 256 + j
        return FloorDiv(flat, IntImm(256)) * 256 + FloorMod(flat, IntImm(256))

    f = _func("reshape", (8, 256), [(0, 8), (0, 256)], index)
    assert len(_divs(f)) == 2 and _divs(simplify_divisions(f)) == []
    src = codegen_c([f]).source
    assert "plait_c_floor" not in src and "x[i0 * 256 + i1]" in src, src
    _check(f, cache_dir)


def test_a_broadcast_channel_index_and_nested_blocks(cache_dir):
    # floormod((a*4 + b)*16 + c, 64): the a term drops, b*16 + c stays in [0, 64); floordiv(.., 4096) is 0
    def index(a, b, c):
        flat = (a * 4 + b) * 16 + c
        return FloorMod(flat, IntImm(64)) + FloorDiv(flat, IntImm(4096)) * 1000 + TruncDiv(flat, IntImm(16))

    f = _func("bcast", (4, 4, 16), [(0, 4), (0, 4), (0, 16)], index)
    assert _divs(simplify_divisions(f)) == []
    assert "plait_c_" not in codegen_c([f]).source
    _check(f, cache_dir)


def test_negative_ranges_keep_floor_semantics(cache_dir):
    # i in [-5, 5): floordiv(i*4 + j, 4) = i exactly; floormod(i*3 + j, 2) keeps a floor mod of j + i
    def index(i, j):
        a = FloorDiv(i * 4 + j, IntImm(4)) + 10
        b = FloorMod(i * 3 + j, IntImm(2))
        c = TruncMod(i * 4 + j, IntImm(4))  # a negative dividend: a truncating division stays as it is
        return a * 8 + b + c + 100

    f = _func("neg", (10, 4), [(-5, 10), (0, 4)], index)
    kinds = sorted(type(n).__name__ for n in _divs(simplify_divisions(f)))
    assert kinds == ["FloorMod", "TruncMod"]
    _check(f, cache_dir)


def test_a_sum_that_may_wrap_is_left_alone(cache_dir):
    # int32 loop variables: i * 2**28 + j overflows int32 for i >= 8, so x is not the integer sum
    def index(i, j):
        big = i * IntImm(1 << 28, "int32") + j
        return FloorMod(FloorDiv(big, IntImm(1 << 28, "int32")), IntImm(64, "int32")) + FloorMod(
            big, IntImm(1 << 28, "int32"))

    f = _func("wrap", (16, 4), [(0, 16), (0, 4)], index, dtype="int32")
    g = simplify_divisions(f)
    assert any(isinstance(n, FloorDiv) and n.b.value == 1 << 28 for n in _divs(g))
    _check(f, cache_dir)


def test_a_fused_index_pair_is_left_to_the_emitter(cache_dir):
    # x[(f0*192 + f1) // 24, (f0*192 + f1) % 24] over a [24, 24] buffer: a fused loop, read as one
    # linear index; splitting it (f0*8 + f1 // 24, f1 % 24) would put a division in the inner loop
    f0, f1 = Var("f0"), Var("f1")
    X, Y = Buffer("x", (24, 24), "int32"), Buffer("y", (3, 192), "int32")
    flat = f0 * 192 + f1
    body = For(f0, IntImm(0), IntImm(3), "serial", For(f1, IntImm(0), IntImm(192), "serial", Y.store(
        (f0, f1), X[FloorDiv(flat, IntImm(24)), FloorMod(flat, IntImm(24))])))
    f = PrimFunc((X, Y), body, {"global_symbol": "pair", "num_inputs": 1})
    assert len(_divs(simplify_divisions(f))) == 2
    src = codegen_c([f]).source
    assert "/ 24" not in src and "% 24" not in src and "plait_c_floor" not in src, src
    x = np.arange(576, dtype=np.int32).reshape(24, 24) * 3 - 100
    y = np.zeros((3, 192), np.int32)
    (got,) = run_c([f], [[x, y]], cache_dir)
    assert_same(got, run_ref(f, [x, y]))
