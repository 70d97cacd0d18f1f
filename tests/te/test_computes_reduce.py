"""TE computes of reductions, argmax/argmin, softmax and cumsum vs their numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from computes_util import check, lower, rand, rng_for

from plait import tir

# shape, axis, keepdims (the cases of tests/op/test_reduce.py)
REDUCE_CASES = [
    ((2, 3, 4), None, True), ((2, 3, 4), None, False), ((2, 3, 4), (1,), True), ((2, 3, 4), (-1,), False),
    ((2, 3, 4), (0, 2), True), ((2, 3, 4), (2, 0), False), ((5,), (0,), False), ((), None, True),
    ((0, 3), (0,), True), ((3, 0), (1,), False), ((1, 1), (0, 1), False),
]
ARITH = ["int32", "int64", "float32", "float64", "float16"]
DTYPES = {
    "sum": ARITH, "mean": ARITH + ["uint8", "int8"], "prod": ARITH, "sum_square": ARITH, "l1_norm": ARITH,
    "l2_norm": ARITH, "max": ["int8", "int32", "uint8", "float32", "float16"],
    "min": ["int8", "int64", "uint8", "float32", "float64"], "log_sum": ["float32", "float16"],
    "log_sum_exp": ["float32", "float64", "float16"],
}


def _bounds(op, dtype):
    if op == "log_sum":
        return 0.1, 10
    if op == "prod":
        return -3, 3
    return (0, 20) if dtype.startswith("u") else (-10, 10)


@pytest.mark.parametrize("op", list(DTYPES))
def test_reduce(op):
    for dtype in DTYPES[op]:
        for shape, axis, keepdims in REDUCE_CASES:
            x = rand(rng_for(op, dtype, shape, axis), shape, dtype, *_bounds(op, dtype))
            check(op, [x], axis=axis, keepdims=keepdims, rtol=1e-5 if dtype != "float16" else 2e-3)


def test_reduce_int_wraps_and_mean_truncates():
    x = np.array([[100, 100, 100], [-7, 0, 0]], np.int8)
    check("sum", [x], axis=(1,))
    check("mean", [x], axis=(1,))  # -7 / 3 -> -2 (toward zero)


def test_max_min_nan_propagates():
    x = np.array([[1.0, np.nan, 2.0], [np.nan, 1.0, 0.0], [3.0, 1.0, -np.inf]], np.float32)
    for op in ("max", "min"):
        check(op, [x], axis=(1,))
        check(op, [x], axis=None)
    check("log_sum_exp", [np.array([[-np.inf, -np.inf], [np.inf, 0.0]], np.float32)], axis=(1,))


def test_reduction_is_one_nest_with_an_epilogue():
    func, _ = lower("mean", [np.zeros((2, 3), np.float32)], axis=(1,))
    loops = [s for s in tir.pre_order(func.body) if isinstance(s, tir.For) and s.annotations.get("stage")]
    assert [(s.annotations["stage"], s.annotations.get("epilogue")) for s in loops] == [("T_mean", "T_mean_1")]


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8", "float32", "float16", "bool"])
def test_arg(op, dtype):
    rng = rng_for(op, dtype)
    x = rand(rng, (3, 4, 5), dtype, -3, 3)  # small range: many ties
    for axis in (0, 1, -1):
        for keepdims in (True, False):
            for last in (False, True):
                check(op, [x], axis=axis, keepdims=keepdims, select_last_index=last)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_nan_and_inf(op):
    x = np.array([[1.0, np.nan, 2.0, np.nan], [-np.inf, -np.inf, 0.0, 0.0], [np.inf, np.inf, -np.inf, -np.inf]],
                 np.float32)
    for last in (False, True):
        check(op, [x], axis=1, select_last_index=last)


@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_softmax(op, dtype):
    for shape, axis in [((2, 3, 4), -1), ((2, 3, 4), 1), ((5,), 0), ((3, 1), 1)]:
        x = rand(rng_for(op, dtype, shape), shape, dtype, -5, 5)
        check(op, [x], axis=axis)
    x = np.array([[1.0, -np.inf, 2.0], [-np.inf, -np.inf, -np.inf], [np.inf, 1.0, 0.0]], dtype)
    check(op, [x], axis=1)


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "float16"])
def test_cumsum(dtype):
    for shape, axis in [((2, 3, 4), 1), ((5,), 0), ((2, 3), -1), ((0, 3), 1)]:
        x = rand(rng_for("cumsum", dtype, shape), shape, dtype, -5, 5)
        for exclusive in (False, True):
            for reverse in (False, True):
                check("cumsum", [x], axis=axis, exclusive=exclusive, reverse=reverse,
                      rtol=1e-5 if dtype != "float16" else 2e-3)
