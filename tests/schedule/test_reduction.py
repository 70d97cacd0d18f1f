"""decompose_reduction, rfactor, cache_write: structure, verification, semantics (TIR interpreter)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as hs

from plait import tir
from plait.schedule import Schedule, ScheduleError, cache_write, decompose_reduction, rfactor
from plait.schedule.reduction import find_combiner
from plait.tir import Allocate, Buffer, For, PrimFunc, Var, seq
from tests.schedule import fixtures as fx
from tests.schedule.test_loops import err, kinds, same


def allocs(f):
    return {n.buffer.name: (n.buffer.static_shape, n.buffer.scope) for n in tir.functor.pre_order(f.body)
            if isinstance(n, Allocate)}


def test_decompose_reduction_expands_the_accumulator():
    f = fx.conv2d(c=2, h=5, w=6, o=4)
    g = decompose_reduction(f, "conv_ow")
    k = kinds(g)
    assert k["conv_ow_init"] == ("serial", 6) and k["conv_ow"] == ("serial", 6) and k["conv_ow_epi"] == ("serial", 6)
    assert allocs(g)["conv_acc"] == ((6, 1), "local")
    same(f, g)
    h = decompose_reduction(g, "conv_oh")  # twice: the accumulator gets both dimensions
    assert allocs(h)["conv_acc"] == ((5, 6, 1), "local")
    same(f, h)


def test_register_tile_of_a_conv_is_exact():
    """The host rule's loop structure, by hand: tile (oc 2 x ow 6) below the reduce loops."""
    f = fx.conv2d(c=3, h=6, w=6, o=4)
    s = Schedule(f)
    s.pad_input("data")
    oo, oi = s.split("conv_oc", [None, 2])
    s.reorder(oo, "conv_oh", oi, "conv_ow")
    s.decompose_reduction("conv_ow")
    s.decompose_reduction(oi)
    s.reorder("conv_ic", "conv_kh", "conv_kw", oi, "conv_ow")
    for loop in ("conv_ow", "conv_ow_init", "conv_ow_epi"):
        s.vectorize(loop)
    text = tir.print_prim_func(tir.simplify(s.func))
    assert "for conv_kw in serial(0, 3):\n" in text and "for conv_ow in vectorized(0, 6):" in text
    assert allocs(s.func)["conv_acc"] == ((2, 6, 1), "local")
    same(f, s.func)


def test_decompose_reduction_errors():
    f = fx.conv2d()
    assert err(decompose_reduction, f, "conv_oc") == (
        "decompose_reduction('conv_oc'): the body of loop 'conv_oc' has no reduction (no statement reads and "
        "writes the same buffer)")
    assert err(decompose_reduction, f, "conv_ic") == \
        "decompose_reduction('conv_ic'): the body of loop 'conv_ic' is only a reduction; nothing to decompose"
    g = decompose_reduction(f, "conv_ow")
    assert err(decompose_reduction, g, "conv_ow") == \
        "decompose_reduction('conv_ow'): the body of loop 'conv_ow' is only a reduction; nothing to decompose"


def test_decompose_reduction_refuses_a_shared_accumulator():
    # acc is shared by all iterations of i: distributing i would change the results
    X, Y = Buffer("x", (4, 3)), Buffer("y", (4,))
    acc = Buffer("acc", (1,), "float32", "global.workspace")
    i, k = Var("i"), Var("k")
    body = Allocate(acc, For(i, 0, 4, "serial", seq(
        acc.store(0, 0.0), For(k, 0, 3, "serial", acc.store(0, acc[0] + X[i, k])), Y.store(i, acc[0]))))
    f = PrimFunc((X, Y), body, {"global_symbol": "rows", "num_inputs": 1})
    assert err(decompose_reduction, f, "i") == (
        "decompose_reduction('i'): buffer 'acc' is shared by the statements across iterations of loop 'i'; "
        "distributing the loop would change the results")


def test_rfactor_sum():
    f = fx.dense(m=2, n=6, k=16)
    s = Schedule(f)
    ko, ki = s.split("dense_k", [None, 4])
    name = s.rfactor(ki)
    assert name == "dense_acc_rf" and allocs(s.func)[name] == ((1, 4), "local")
    s.vectorize(ki)
    same(f, s.func, exact=False)
    with pytest.raises(ScheduleError):
        s.vectorize(ko)


def test_rfactor_with_a_tile_of_outputs():
    f = fx.dense(m=1, n=8, k=16)
    s = Schedule(f)
    s.split("dense_k", [None, 4])
    jo, ji = s.split("dense_j", [None, 4])
    s.decompose_reduction(ji)
    s.rfactor("dense_k_1")
    assert allocs(s.func)["dense_acc_rf"] == ((4, 1, 4), "local")
    s.reorder("dense_k_0", ji)
    s.vectorize("dense_k_1")
    same(f, s.func, exact=False)


def test_rfactor_nan_propagating_max_and_workspace_accumulator():
    f = fx.softmax(rows=3, cols=12)
    s = Schedule(f)
    s.split("max_k", [None, 4])
    s.rfactor("max_k_1")
    s.vectorize("max_k_1")
    same(f, s.func)  # max is exact in any order
    args = fx.inputs_for(f, 1)
    args[0][1, 5] = np.nan
    np.testing.assert_array_equal(fx.run(s.func, args)[0], fx.run(f, args)[0])


def _update(value_fn, init=0.0, dtype="float32"):
    X, Y = Buffer("x", (8,), dtype), Buffer("y", (1,), dtype)
    k = Var("k")
    st = Y.store(0, value_fn(Y[0], X[k]))
    body = seq(Y.store(0, tir.const(init, dtype)), For(k, 0, 8, "serial", st))
    return PrimFunc((X, Y), body, {"global_symbol": "red", "num_inputs": 1}), st


def test_find_combiner():
    nan_max = lambda a, x: tir.select(tir.logical_or(tir.isnan(a), a > x), a, x)  # noqa: E731
    i32 = np.iinfo(np.int32)
    for fn, init, ident, dt in [(lambda a, x: a + x * 2.0, 0.0, 0.0, "float32"), (nan_max, -np.inf, -np.inf, "float32"),
                                (lambda a, x: x * a, 1.0, 1.0, "float32"), (lambda a, x: a * x, 1, 1, "int32"),
                                (lambda a, x: tir.max(a, x), 0, i32.min, "int32"),
                                (lambda a, x: tir.min(x, a), 5, i32.max, "int32"),
                                (lambda a, x: a + x, 0, 0, "int8")]:
        f, st = _update(fn, init, dt)
        c = find_combiner(st, tir.const(init, dt))
        assert c is not None and c.identity.value == ident and c.identity.dtype == dt
    # C's max (a > b ? a : b) is not commutative with NaN: a float max cannot be reassociated exactly
    for fn in (lambda a, x: a - x, lambda a, x: a * 0.5 + x, lambda a, x: x, lambda a, x: a + x + a,
               lambda a, x: tir.max(a, x)):
        f, st = _update(fn)
        assert find_combiner(st) is None
    f, st = _update(lambda a, x: a - x)
    assert err(rfactor, f, "k") == ("rfactor('k'): the store under loop 'k' is not a reduction update "
                                    "`y[...] = F(y[...], x)` with F commutative and associative")


def test_rfactor_keeps_a_non_identity_init():
    f, _ = _update(lambda a, x: a + x, 10.0)
    g = split_rf(f)
    same(f, g, exact=False)


def split_rf(f):
    s = Schedule(f)
    s.split("k", [None, 4])
    s.rfactor("k_1")
    return s.func


def test_rfactor_errors():
    f = fx.conv2d()
    assert err(rfactor, f, "conv_ow") == \
        "rfactor('conv_ow'): loop 'conv_ow' must contain exactly one store (the reduction update), found 3"
    assert err(rfactor, fx.elementwise(), "add_i2") == \
        "rfactor('add_i2'): loop 'add_i2' indexes the accumulator 'y': it is not a reduction loop"


def test_cache_write_accumulates_locally():
    from tests.tir.fixtures import matmul  # C[i, j] = 0; for k: C[i, j] += A[i, k] * B[k, j]

    f = matmul(m=4, n=6, k=5)
    g = cache_write(f, "i", "C")
    assert allocs(g)["C_local"] == ((1, 6), "local")
    text = tir.print_prim_func(g)
    assert "C_ci" not in text  # C is written before it is read: no copy-in
    assert "C[i, C_wb1] = C_local[0, C_wb1]" in text
    same(f, g)
    h = cache_write(f, "j", "C")
    assert allocs(h)["C_local"] == ((1, 1), "local")
    same(f, h)


def test_cache_write_copies_in_when_read_first():
    # y[i] += x[i, k] accumulates onto the caller's values: the local copy must start from them
    X, Y = Buffer("x", (4, 3)), Buffer("y", (4,))
    i, k = Var("i"), Var("k")
    body = For(i, 0, 4, "serial", For(k, 0, 3, "serial", Y.store(i, Y[i] + X[i, k])))
    f = PrimFunc((X, Y), body, {"global_symbol": "acc_in_place", "num_inputs": 1})
    for loop in ("i", "k"):
        g = cache_write(f, loop, "y")
        text = tir.print_prim_func(g)
        assert "y_local[0] = y[i]" in text and "y[i] = y_local[0]" in text
        args = [np.arange(12, dtype="float32").reshape(4, 3), np.array([1, 2, 3, 4], "float32")]
        a1, a2 = [a.copy() for a in args], [a.copy() for a in args]
        tir.evaluate(f, *a1)
        tir.evaluate(g, *a2)
        np.testing.assert_array_equal(a2[1], a1[1])
        np.testing.assert_array_equal(a1[1], [4, 14, 24, 34])


def test_cache_write_errors():
    f = fx.conv2d()
    assert err(cache_write, f, "conv_oc", "nope") == \
        "cache_write('conv_oc', 'nope'): the body of loop 'conv_oc' does not access a buffer 'nope'"
    assert err(cache_write, f, "conv_oc", "data") == "cache_write('conv_oc', 'data'): loop 'conv_oc' does not write buffer 'data'"
    assert err(cache_write, f, "conv_n", "conv_acc") == \
        "cache_write('conv_n', 'conv_acc'): buffer 'conv_acc' is ambiguous or allocated inside loop 'conv_n'"


@settings(max_examples=15, deadline=None)
@given(hs.sampled_from([1, 2, 4, 8]), hs.sampled_from([1, 2, 3, 6]), hs.booleans())
def test_random_dense_rfactor_tiles(kb, jb, tile):
    f = fx.dense(m=2, n=6, k=8)
    s = Schedule(f)
    ko, ki = s.split("dense_k", [None, kb])
    if tile:
        jo, ji = s.split("dense_j", [None, jb])
        s.decompose_reduction(ji)
    s.rfactor(ki)
    s.vectorize(ki)
    same(f, s.func, exact=False)
