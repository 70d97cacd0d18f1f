"""``qnn.l2_normalize`` (plait/op/qnn_norm.py): its inverse square root is 1/sqrt to within a few parts in
a million over the int32 range, its ONNX form run by ONNX Runtime gives the numpy reference's bits on
rows that reach every branch (a sum of 0 or 1, small sums whose shift is negative, sums above 2**29),
and its type errors. The reference itself is checked against TensorFlow Lite Micro through the importer
(tests/frontend/test_tflite_math_ops.py). ``OP_CASES`` also runs through the TE compute coverage test and
the ONNX export round trip (tests/op/declared_cases.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from ort_util import run_plait_op
from test_qnn_fixed import _exported, _q

import plait
from plait.errors import TypeInferenceError
from plait.op.qnn_norm import inv_sqrt
from plait.relay import IRModule, call, var

OP_CASES = {
    "qnn.l2_normalize": [
        ([_q((2, 16), "int8", 1)], {"input_zero_point": 3, "axis": -1}),
        ([_q((2, 5, 3), "int8", 2)], {"input_zero_point": -128, "axis": 1}),
        ([np.array([[0, 0, 0], [1, 0, 0], [127, -128, 127]], np.int8)], {"input_zero_point": 0, "axis": -1}),
    ],
}


def test_inv_sqrt_is_one_over_the_square_root():
    v = np.unique(np.concatenate([np.arange(2, 5000), np.geomspace(5000, 2**31 - 1, 5000).astype(np.int64),
                                  [2**29 - 1, 2**29, 2**31 - 1]]))
    m, s = inv_sqrt(v)
    got = m.astype(np.float64) * 2.0 ** s.astype(np.float64) / 2.0**31
    np.testing.assert_allclose(got, 1 / np.sqrt(v.astype(np.float64)), rtol=2e-6)
    m, s = inv_sqrt(np.array([0, 1]))
    np.testing.assert_array_equal(m, [2**31 - 1] * 2)
    np.testing.assert_array_equal(s, [0, 0])


@pytest.mark.parametrize("zp", [0, -128, 37])
def test_l2_normalize_onnx_every_branch(zp):
    n = 1000
    rows = [np.full(n, zp), np.where(np.arange(n) == 5, zp + 1, zp)]  # sums 0 and 1
    rows += [np.where(np.arange(n) < k, zp + 1, zp) for k in (2, 3, 7, 60)]  # small sums: negative shifts
    rows += [np.full(n, 127 if zp < 0 else -128)]  # the largest sums (above 2**24 here)
    rows += [_q((n,), "int8", seed).astype(np.int64) for seed in range(4)]
    x = np.clip(np.stack(rows), -128, 127).astype(np.int8)
    got, want = _exported("qnn.l2_normalize", [x], {"input_zero_point": zp, "axis": -1})
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got, want)


def test_l2_normalize_onnx_sums_above_two_to_the_29():
    x = np.full((2, 9000), 127, np.int8)  # 9000 * 255**2 > 2**29
    x[1, ::2] = -128
    got, want = _exported("qnn.l2_normalize", [x], {"input_zero_point": -128, "axis": -1})
    np.testing.assert_array_equal(got, want)
    mod = IRModule.from_expr(call("qnn.l2_normalize", var("x", x.shape, "int8"), input_zero_point=-128, axis=-1))
    (y,) = plait.executor.GraphModule(plait.build(mod, "c"))(x)  # the TE compute on this branch too
    np.testing.assert_array_equal(y, want)


def test_a_unit_row_is_one():
    y = run_plait_op("qnn.l2_normalize", [np.array([[0, 0, 90, 0]], np.int8)], input_zero_point=0, axis=-1)
    np.testing.assert_array_equal(y, [[0, 0, 127, 0]])  # 1.0 is 128/128: clamped to 127


@pytest.mark.parametrize("inputs,attrs,message", [
    ([_q((2, 3), "int16")], {"input_zero_point": 0}, "qnn.l2_normalize: data: expected int8, got Tensor[(2, 3), int16]"),
    ([_q((2, 3), "int8")], {"input_zero_point": 200}, "qnn.l2_normalize: input_zero_point 200 is outside int8"),
    ([_q((1, 40000), "int8")], {"input_zero_point": 0},
     "qnn.l2_normalize: a row of 40000 values can overflow TFLite's int32 sum of squares (at most 33025)"),
])
def test_bad_arguments_are_refused_with_the_reason(inputs, attrs, message):
    with pytest.raises(TypeInferenceError, match=re.escape(message)):
        run_plait_op("qnn.l2_normalize", inputs, **attrs)
