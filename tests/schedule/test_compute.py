"""compute_inline, reverse_compute_inline, pad_input."""

from __future__ import annotations

import numpy as np

from plait import tir
from plait.schedule import Schedule, compute_inline, pad_input, reverse_compute_inline
from plait.tir import Allocate, Buffer, For, PrimFunc, Var, seq
from tests.schedule import fixtures as fx
from tests.schedule.test_loops import err, same
from tests.schedule.test_reduction import allocs


def test_compute_inline():
    f = fx.two_stages()
    g = compute_inline(f, "T")
    assert "T" not in allocs(g)
    assert tir.print_prim_func(g).count("for ") == 2
    assert "y[c_i, c_j] = a[c_i, c_j] * 2.0 + 1.0" in tir.print_prim_func(g)
    same(f, g)


def test_compute_inline_into_a_transposed_consumer_with_lets():
    A, Y = Buffer("a", (3, 4)), Buffer("y", (4, 3))
    T = Buffer("T", (3, 4), "float32", "global.workspace")
    i, j, x, y, t = Var("i"), Var("j"), Var("x"), Var("y"), Var("t", "float32")
    body = Allocate(T, seq(
        For(i, 0, 3, "serial", For(j, 0, 4, "serial", T.store((i, j), tir.let(t, A[i, j] * 3.0, t * t)))),
        For(x, 0, 4, "serial", For(y, 0, 3, "serial", Y.store((x, y), T[y, x] + T[y, x])))))
    f = PrimFunc((A, Y), body, {"global_symbol": "tr", "num_inputs": 1})
    g = compute_inline(f, "T")  # two copies of the let: fresh variables, still verifies
    same(f, g)


def test_compute_inline_errors():
    assert err(compute_inline, fx.conv2d(), "data") == \
        "compute_inline('data'): 'data' is a parameter of the function; only allocated buffers can be inlined"
    assert err(compute_inline, fx.softmax(), "T_sum") == (
        "compute_inline('T_sum'): the producer of 'T_sum' must be indexed by its loop variables, one per dimension, "
        "in a perfect loop nest")
    assert err(compute_inline, fx.conv2d(), "nope") == (
        "compute_inline('nope'): no buffer called 'nope' in PrimFunc 'fused_conv2d_add_relu' "
        "(buffers: 'bias', 'conv_acc', 'data', 'out', 'weight')")
    assert err(compute_inline, fx.conv_then_relu(), "T_conv").startswith(
        "compute_inline('T_conv'): the producer of 'T_conv' must be indexed by its loop variables")


def test_compute_inline_of_softmax_exp():
    f = fx.softmax()
    g = compute_inline(f, "T_exp")
    assert "T_exp" not in allocs(g)
    same(f, g)


def test_reverse_compute_inline_moves_the_epilogue_into_the_reduction():
    f = fx.conv_then_relu()
    g = reverse_compute_inline(f, "T_conv")
    assert "T_conv" not in allocs(g)
    text = tir.print_prim_func(g)
    assert "out[cv_n, cv_oc, cv_oh, cv_ow] = max(cv_acc[0], 0.0)" in text
    assert "r_n" not in text
    same(f, g)


def test_reverse_compute_inline_errors():
    assert err(reverse_compute_inline, fx.softmax(), "T_exp") == \
        "reverse_compute_inline('T_exp'): 'T_exp' must be read by exactly one statement, found 2"
    assert err(reverse_compute_inline, fx.conv2d(), "data") == \
        "reverse_compute_inline('data'): 'data' is a parameter of the function"


def test_pad_input():
    f = fx.conv2d(c=2, h=5, w=6, o=3, pad=1)
    g = pad_input(f, "data")
    assert allocs(g)["data_pad"] == ((1, 2, 7, 8), "global.workspace")
    text = tir.print_prim_func(tir.simplify(g))
    assert "select" not in text  # the guard is gone: the padded copy holds the zeros
    assert "data_pad[conv_n, conv_ic, conv_oh + conv_kh, conv_ow + conv_kw]" in text
    same(f, g)


def test_pad_input_strided_and_asymmetric():
    f = fx.conv2d(c=2, h=7, w=6, o=2, k=3, pad=2, stride=2)
    g = pad_input(f, "data")
    # rows: iy = 2*oh + kh - 2 in [-2, 8] -> 2 before, 2 after (h = 7); cols: [-2, 6] -> 2 before, 1 after
    assert allocs(g)["data_pad"] == ((1, 2, 11, 9), "global.workspace")
    same(f, g)
    s = Schedule(f)
    s.pad_input("data")
    s.vectorize("data_copy_3")
    s.vectorize("data_pad_3")
    same(f, s.func)


def test_pad_input_errors():
    assert err(pad_input, fx.matmul(), "A") == \
        "pad_input('A'): no guarded load `select(<index in bounds>, A[...], c)` of 'A' found"
    # a guard that is not exactly "in bounds" is not padding
    X, Y = Buffer("x", (6,)), Buffer("y", (6,))
    i = Var("i")
    f = PrimFunc((X, Y), For(i, 0, 6, "serial", Y.store(i, tir.select(i < 3, X[i], 0.0))),
                 {"global_symbol": "half", "num_inputs": 1})
    assert err(pad_input, f, "x") == "pad_input('x'): no guarded load `select(<index in bounds>, x[...], c)` of 'x' found"


def test_pad_input_max_pool_value():
    X, Y = Buffer("x", (1, 1, 4, 4)), Buffer("y", (1, 1, 2, 2))
    low = float(np.finfo(np.float32).min)
    acc = Buffer("acc", (1,), "float32", "local")
    y, x, ry, rx = Var("y"), Var("x"), Var("ry"), Var("rx")
    iy, ix = y * 2 + ry - 1, x * 2 + rx - 1
    v = tir.select(tir.all_(iy >= 0, iy < 4, ix >= 0, ix < 4), X[0, 0, iy, ix], low)
    body = For(y, 0, 2, "serial", For(x, 0, 2, "serial", Allocate(acc, seq(
        acc.store(0, low), For(ry, 0, 3, "serial", For(rx, 0, 3, "serial", acc.store(0, fx._nan_max(acc[0], v)))),
        Y.store((0, 0, y, x), acc[0])))), {"stage": "pool", "op": "nn.max_pool2d", "pattern": "out_elemwise_fusable"})
    f = PrimFunc((X, Y), body, {"global_symbol": "pool", "num_inputs": 1})
    g = pad_input(f, "x")
    assert allocs(g)["x_pad"] == ((1, 1, 5, 5), "global.workspace")
    args = fx.inputs_for(f)
    args[0] = -np.abs(args[0]) - 1  # all negative: a zero padding would win, the lowest value never does
    np.testing.assert_array_equal(fx.run(g, args)[0], fx.run(f, args)[0])
