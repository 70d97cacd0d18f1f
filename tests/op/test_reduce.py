"""Reductions, argmax/argmin, softmax/log_softmax, cumsum: references vs ONNX Runtime, relations, errors."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from ort_util import assert_close, run_onnx_node, run_plait_op

from plait.errors import TypeInferenceError
from plait.ir import OpPattern, TensorType
from plait.op import get_op
from plait.relay import IRModule, call, infer_type, var

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

FLOATS = ["float16", "float32", "float64"]


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def sample(rng: np.random.Generator, shape: tuple, dtype: str, lo: float = -10, hi: float = 10) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)
    return rng.uniform(lo, hi, shape).astype(dtype)


# shape, plait axis, keepdims
REDUCE_CASES = [
    ((2, 3, 4), None, True), ((2, 3, 4), None, False), ((2, 3, 4), (1,), True), ((2, 3, 4), (-1,), False),
    ((2, 3, 4), (0, 2), True), ((2, 3, 4), (2, 0), False), ((5,), (0,), False), ((), None, True),
    ((0, 3), (0,), True), ((3, 0), (1,), False), ((1, 1), (0, 1), False),
]
ONNX_REDUCE = {
    "sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin", "prod": "ReduceProd",
    "sum_square": "ReduceSumSquare", "l1_norm": "ReduceL1", "l2_norm": "ReduceL2",
    "log_sum": "ReduceLogSum", "log_sum_exp": "ReduceLogSumExp",
}
ARITH_DTYPES = ["int32", "int64"] + FLOATS
REDUCE_DTYPES = {
    "sum": ARITH_DTYPES, "mean": ARITH_DTYPES, "prod": ARITH_DTYPES, "sum_square": ARITH_DTYPES,
    "l1_norm": ARITH_DTYPES, "l2_norm": ARITH_DTYPES,
    "max": ["int8", "int32", "int64", "uint8"] + FLOATS, "min": ["int8", "int32", "int64", "uint8"] + FLOATS,
    "log_sum": FLOATS, "log_sum_exp": FLOATS,
}


def bounds(op: str, dtype: str) -> tuple[float, float]:
    if op == "log_sum":
        return 0.1, 10
    if op == "prod":
        return -3, 3
    return (0, 20) if dtype.startswith("u") else (-10, 10)


@pytest.mark.parametrize("op", list(ONNX_REDUCE))
def test_reduce(op):
    for dtype in REDUCE_DTYPES[op]:
        rng = rng_for(op, dtype)
        for shape, axis, keepdims in REDUCE_CASES:
            x = sample(rng, shape, dtype, *bounds(op, dtype))
            got = run_plait_op(op, [x], axis=axis, keepdims=keepdims)
            onnx_inputs = [x] if axis is None else [x, np.array(axis, np.int64)]
            (want,) = run_onnx_node(ONNX_REDUCE[op], onnx_inputs, {"keepdims": int(keepdims)}, opset=18)
            assert_close(got, want)


def test_reduce_nan_and_inf():
    x = np.array([[1.0, np.nan, 3.0], [np.inf, 2.0, -1.0]], np.float32)
    for op in ("sum", "log_sum_exp", "l1_norm"):
        for axis in ((0,), (1,)):
            got = run_plait_op(op, [x], axis=axis)
            (want,) = run_onnx_node(ONNX_REDUCE[op], [x, np.array(axis)], {}, opset=18)
            assert_close(got, want)
    # max/min propagate NaN (as the ONNX reference does; ONNX Runtime does so only along some axes)
    assert_close(run_plait_op("max", [x], axis=(1,), keepdims=False), np.array([np.nan, np.inf], np.float32))
    assert_close(run_plait_op("min", [x], axis=(0,), keepdims=False), np.array([1, np.nan, -1], np.float32))


def test_log_sum_exp_is_stable():
    x = np.array([[1000.0, 1000.0], [-1000.0, -np.inf]], np.float32)
    assert_close(run_plait_op("log_sum_exp", [x], axis=(1,), keepdims=False),
                 np.array([1000 + np.log(2), -1000], np.float32))
    assert_close(run_plait_op("log_sum_exp", [np.full((3,), -np.inf, np.float32)]), np.array([-np.inf], np.float32))


def test_reduce_integer_semantics():
    x = np.array([[-7, 2], [7, -2], [127, 127]], np.int8)
    np.testing.assert_array_equal(run_plait_op("mean", [x[:2]], axis=(1,), keepdims=False), [-2, 2])  # truncates
    np.testing.assert_array_equal(run_plait_op("sum", [x], axis=(1,), keepdims=False), [-5, 5, -2])  # wraps
    np.testing.assert_array_equal(run_plait_op("max", [np.zeros((0, 2), np.int8)], axis=(0,)), [[-128, -128]])
    np.testing.assert_array_equal(run_plait_op("l2_norm", [np.array([3, 4, 1], np.int32)]), [5])  # sqrt(26)


def test_reduce_empty_axes_is_identity():
    x = sample(rng_for("noop"), (2, 3), "float32")
    for op in ("sum", "max", "l1_norm"):
        assert_close(run_plait_op(op, [x], axis=()), np.abs(x) if op == "l1_norm" else x)


@pytest.mark.parametrize("op,onnx_op", [("argmax", "ArgMax"), ("argmin", "ArgMin")])
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"] + FLOATS)
def test_arg_reduce(op, onnx_op, dtype):
    rng = rng_for(op, dtype)
    for shape, axes in [((2, 3, 4), (0, 1, 2, -1)), ((5,), (0, -1)), ((1, 1), (0, 1)), ((3, 2), (0, 1))]:
        x = sample(rng, shape, dtype, 0, 3)  # few distinct values: ties
        for axis in axes:
            for keepdims in (True, False):
                for last in (False, True):
                    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": last}
                    got = run_plait_op(op, [x], **attrs)
                    (want,) = run_onnx_node(onnx_op, [x], {k: int(v) for k, v in attrs.items()}, opset=18)
                    assert_close(got, want)


def test_argmax_ties():
    x = np.array([1, 3, 0, 3, 2], np.float32)
    assert run_plait_op("argmax", [x], keepdims=False) == 1
    assert run_plait_op("argmax", [x], keepdims=False, select_last_index=True) == 3
    assert run_plait_op("argmin", [x], select_last_index=True).tolist() == [2]


@pytest.mark.parametrize("op,onnx_op", [("nn.softmax", "Softmax"), ("nn.log_softmax", "LogSoftmax")])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax(op, onnx_op, dtype):
    rng = rng_for(op, dtype)
    for shape, axes in [((2, 3, 4), (-1, 0, 1, 2)), ((5,), (0,)), ((1, 1), (-1,)), ((0, 3), (1,)), ((2, 0), (0,))]:
        x = sample(rng, shape, dtype, -10, 10)
        for axis in axes:
            got = run_plait_op(op, [x], axis=axis)
            (want,) = run_onnx_node(onnx_op, [x], {"axis": axis}, opset=18)
            assert_close(got, want)
    x = np.array([[1000, 999, -1000], [-np.inf, 0, 1], [-1e4, -1e4, -1e4]], dtype)
    got = run_plait_op(op, [x])
    (want,) = run_onnx_node(onnx_op, [x], {}, opset=18)
    assert_close(got, want)
    assert np.isfinite(got[[0, 2]]).all()


@pytest.mark.parametrize("dtype", ["int32", "int64"] + FLOATS)
def test_cumsum(dtype):
    rng = rng_for("cumsum", dtype)
    for shape, axes in [((2, 3, 4), (0, 1, 2, -1)), ((5,), (0,)), ((1, 1), (-2,)), ((0, 3), (0, 1))]:
        x = sample(rng, shape, dtype)
        for axis in axes:
            for exclusive in (False, True):
                for reverse in (False, True):
                    got = run_plait_op("cumsum", [x], axis=axis, exclusive=exclusive, reverse=reverse)
                    (want,) = run_onnx_node("CumSum", [x, np.array(axis, np.int64)],
                                            {"exclusive": int(exclusive), "reverse": int(reverse)}, opset=18)
                    assert_close(got, want)


def test_cumsum_exclusive_reverse_values():
    x = np.array([1, 2, 3, 4], np.int32)
    assert run_plait_op("cumsum", [x], axis=0).tolist() == [1, 3, 6, 10]
    assert run_plait_op("cumsum", [x], axis=0, exclusive=True).tolist() == [0, 1, 3, 6]
    assert run_plait_op("cumsum", [x], axis=0, reverse=True).tolist() == [10, 9, 7, 4]
    assert run_plait_op("cumsum", [x], axis=0, exclusive=True, reverse=True).tolist() == [9, 7, 4, 0]


# ---- relations, patterns, costs --------------------------------------------------------------


def infer(expr) -> TensorType:
    return infer_type(IRModule.from_expr(expr))["main"].body.checked_type


def test_reduce_rel_symbolic():
    x = var("x", ("n", "m", 3))
    assert infer(call("sum", x, axis=(1,))) == TensorType(("n", 1, 3), "float32")
    assert infer(call("max", x, axis=(-1, 0), keepdims=False)) == TensorType(("m",), "float32")
    assert infer(call("mean", x)) == TensorType((1, 1, 1), "float32")
    assert infer(call("prod", x, keepdims=False)) == TensorType((), "float32")
    assert infer(call("sum", var("s", ()))) == TensorType((), "float32")
    assert infer(call("argmax", x, axis=1)) == TensorType(("n", 1, 3), "int64")
    assert infer(call("argmin", var("i", (4, "k"), "int8"), axis=-1, keepdims=False)) == TensorType((4,), "int64")
    assert infer(call("nn.softmax", x)) == TensorType(("n", "m", 3), "float32")
    assert infer(call("cumsum", var("i", ("n", 2), "int32"), axis=0)) == TensorType(("n", 2), "int32")


def test_patterns_and_costs():
    for name in ("sum", "mean", "max", "l2_norm", "log_sum_exp", "argmax", "argmin"):
        assert get_op(name).pattern == OpPattern.REDUCTION, name
    for name in ("nn.softmax", "nn.log_softmax", "cumsum"):
        assert get_op(name).pattern == OpPattern.OPAQUE, name
    op = get_op("sum")
    x, out = TensorType((2, 3, 4), "float32"), TensorType((2, 1, 4), "float32")
    cost = op.cost((x,), out, op.make_attrs({"axis": (1,)}))
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (24, 96, 32)
    assert op.make_attrs() == {"axis": None, "keepdims": True}
    assert get_op("argmax").make_attrs() == {"axis": 0, "keepdims": True, "select_last_index": False}
    assert get_op("cumsum").make_attrs({"axis": 1}) == {"axis": 1, "exclusive": False, "reverse": False}


def _mismatch(op: str, types: str, msg: str) -> str:
    return f"type mismatch in @main: call (operator '{op}') with argument types ({types}): {msg}"


@pytest.mark.parametrize("expr,message", [
    (lambda: call("sum", var("x", (2, 3)), axis=(2,)),
     _mismatch("sum", "Tensor[(2, 3), float32]", "axis: expected a value in [-2, 1], got 2")),
    (lambda: call("mean", var("x", (2, 3)), axis=(0, -2)),
     _mismatch("mean", "Tensor[(2, 3), float32]", "axis: expected distinct axes, got (0, -2)")),
    (lambda: call("sum", var("x", (2,), "bool")),
     _mismatch("sum", "Tensor[(2,), bool]", "argument: expected a numeric tensor, got Tensor[(2,), bool]")),
    (lambda: call("log_sum_exp", var("x", (2,), "int32")),
     _mismatch("log_sum_exp", "Tensor[(2,), int32]",
               "argument: expected a floating-point tensor, got Tensor[(2,), int32]")),
    (lambda: call("argmax", var("x", (2, 3)), axis=-3),
     _mismatch("argmax", "Tensor[(2, 3), float32]", "axis: expected a value in [-2, 1], got -3")),
    (lambda: call("argmin", var("x", ())),
     _mismatch("argmin", "Tensor[(), float32]", "axis: expected a tensor of rank >= 1, got a scalar (axis 0)")),
    (lambda: call("argmax", var("x", (2, 0)), axis=1),
     _mismatch("argmax", "Tensor[(2, 0), float32]", "axis: expected a non-empty axis, got axis 1 of size 0")),
    (lambda: call("nn.softmax", var("x", (2, 3), "int64")),
     _mismatch("nn.softmax", "Tensor[(2, 3), int64]",
               "argument: expected a floating-point tensor, got Tensor[(2, 3), int64]")),
    (lambda: call("nn.log_softmax", var("x", ("n", 3)), axis=2),
     _mismatch("nn.log_softmax", "Tensor[(n, 3), float32]", "axis: expected a value in [-2, 1], got 2")),
    (lambda: call("cumsum", var("x", (4,)), axis=1),
     _mismatch("cumsum", "Tensor[(4,), float32]", "axis: expected a value in [-1, 0], got 1")),
])
def test_rel_errors(expr, message):
    with pytest.raises(TypeInferenceError) as exc:
        infer(expr())
    assert str(exc.value) == message
