"""The TFLite fixed-point operators (plait/op/qnn_fixed.py): their ONNX forms run by ONNX Runtime give
the numpy references' bits on the inputs that reach every branch (every difference 0..255, rows of one
value, one-element rows, windows cut by padding, clamps), and their type errors. The references
themselves are checked against TensorFlow Lite Micro through the importer
(tests/frontend/test_tflite_nn_ops.py). ``OP_CASES`` also runs through the TE compute coverage test and
the ONNX export round trip (tests/op/declared_cases.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from ort_util import run_plait_op

from plait.errors import TypeInferenceError
from plait.frontend.onnx_export import to_onnx
from plait.op.qnn_fixed import softmax_exp_table
from plait.relay import IRModule, call, const, run, var
from plait.relay.expr import Function
from plait.testing.ort_reference import reference_session


def _q(shape, dtype, seed=0):
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    return np.random.default_rng(seed).integers(lo, hi + 1, shape).astype(dtype)


def _pool(k, s=(1, 1), p=(0, 0, 0, 0), d=(1, 1), **clamp):
    return {"pool_size": k, "strides": s, "padding": p, "dilation": d, **clamp}


OP_CASES = {
    "qnn.fixed_softmax": [
        ([_q((2, 10), "int8", 1), softmax_exp_table(0.0625)], {"axis": -1}),
        ([_q((2, 4, 3), "int8", 2), softmax_exp_table(0.2)], {"axis": 1}),
        ([_q((3, 6), "uint8", 3), softmax_exp_table(0.011)], {"axis": -1}),
    ],
    "qnn.avg_pool2d": [
        ([_q((1, 3, 6, 7), "int8", 4)], _pool((3, 3), (2, 2), (1, 1, 1, 1))),
        ([_q((2, 2, 5, 5), "uint8", 5)], _pool((2, 3), (1, 2), (0, 1, 1, 0), clamp_min=20, clamp_max=200)),
        ([_q((1, 2, 7, 6), "int16", 6)], _pool((3, 2), (2, 1), (2, 0, 1, 1), (2, 1))),
    ],
}


def _exported(op: str, inputs: list[np.ndarray], attrs: dict, const_args: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(ONNX Runtime's result of the exported call, the reference's); the first ``len(inputs) -
    const_args`` inputs are graph inputs, the rest constants."""
    n = len(inputs) - const_args
    params = [var(f"x{i}", a.shape, a.dtype.name) for i, a in enumerate(inputs[:n])]
    body = call(op, *params, *(const(a) for a in inputs[n:]), **attrs)
    func = Function(tuple(params), body)
    want = run(IRModule.from_expr(func), inputs[:n])
    sess = reference_session(to_onnx(func))
    (got,) = sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), inputs[:n])})
    return got, np.asarray(want)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("scale", [0.004, 0.0625, 0.3, 1.7])
def test_softmax_onnx_every_difference(dtype, scale):
    lo = np.iinfo(dtype).min
    rows = [np.arange(256) + lo, np.full(256, lo), np.full(256, lo + 255)]  # every difference; equal rows
    rows += [np.where(np.arange(256) == k, lo + 255, lo) for k in (0, 97)]  # one large value, the rest far
    rows += [_q((256,), dtype, seed) for seed in range(5)]
    x = np.stack(rows).astype(dtype)
    got, want = _exported("qnn.fixed_softmax", [x, softmax_exp_table(scale)], {"axis": -1}, const_args=1)
    assert got.dtype == want.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)


def test_softmax_onnx_one_element_rows():
    x = _q((4, 1), "int8", 7)
    got, want = _exported("qnn.fixed_softmax", [x, softmax_exp_table(0.1)], {"axis": -1}, const_args=1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, np.full((4, 1), 127, np.int8))  # 1.0 is 256/256: clamped to 127


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16"])
def test_avg_pool_onnx_padding_and_rounding(dtype):
    info = np.iinfo(dtype)
    x = np.stack([_q((2, 9, 8), dtype, 8), np.full((2, 9, 8), info.min), np.full((2, 9, 8), info.max)]).astype(dtype)
    for attrs in (_pool((3, 3), (1, 1), (1, 1, 1, 1)), _pool((4, 2), (3, 2), (3, 1, 0, 1)),
                  _pool((2, 2), (2, 2), (0, 0, 1, 1), (2, 2), clamp_min=int(info.min) + 3, clamp_max=5)):
        got, want = _exported("qnn.avg_pool2d", [x], attrs)
        np.testing.assert_array_equal(got, want)


def test_avg_pool_rounds_half_away_from_zero():
    x = np.array([-3, -2, 1, 2, 3, 4], np.int8).reshape(1, 1, 1, 6)
    (y,) = run_plait_op("qnn.avg_pool2d", [x], **_pool((1, 2), (1, 2)))
    np.testing.assert_array_equal(y.ravel(), [-3, 2, 4])  # -2.5 -> -3, 1.5 -> 2, 3.5 -> 4


@pytest.mark.parametrize("op,inputs,attrs,message", [
    ("qnn.fixed_softmax", [_q((2, 3), "int16"), softmax_exp_table(0.1)], {"axis": -1},
     "fixed_softmax: input: expected int8 or uint8, got Tensor[(2, 3), int16]"),
    ("qnn.fixed_softmax", [_q((2, 3), "int8"), np.zeros(255, np.int32)], {"axis": -1},
     "fixed_softmax: table: expected int32[256], got Tensor[(255,), int32]"),
    ("qnn.avg_pool2d", [_q((1, 1, 4, 4), "int32")], _pool((2, 2)),
     "qnn.avg_pool2d: data: expected int8, uint8 or int16, got Tensor[(1, 1, 4, 4), int32]"),
    ("qnn.avg_pool2d", [_q((1, 1, 4, 4), "int8")], _pool((2, 2), clamp_min=9, clamp_max=3),
     "qnn.avg_pool2d: clamp_min 9 is above clamp_max 3"),
])
def test_bad_arguments_are_refused_with_the_reason(op, inputs, attrs, message):
    with pytest.raises(TypeInferenceError, match=re.escape(message)):
        run_plait_op(op, inputs, **attrs)
