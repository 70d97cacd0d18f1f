"""``qnn.fixed_log_softmax`` (plait/op/qnn_log_softmax.py): gemmlowp's log is the natural log to within a
few Q5.26 steps, the ONNX form run by ONNX Runtime and the compiled C give the numpy reference's bits on
rows that reach every branch (every difference 0..255, equal rows, one-element rows, values below
``diff_min``, large scales whose bound is the reverse-scaled log), and the type errors. The reference
itself is checked against TensorFlow Lite Micro through the importer (tests/frontend/test_tflite_math_ops.py).
``OP_CASES`` also runs through the TE compute coverage test and the ONNX export round trip
(tests/op/declared_cases.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from ort_util import run_plait_op
from test_qnn_fixed import _exported, _q

import plait
from plait.errors import TypeInferenceError
from plait.op.qnn_log_softmax import MAX_ROW, log_softmax_params, log_x_for_x_greater_than_or_equal_to_1
from plait.relay import IRModule, call, const, var


def _case(x: np.ndarray, scale: float, axis: int = -1) -> tuple[list[np.ndarray], dict]:
    table, attrs = log_softmax_params(scale)
    return [x, table], dict(attrs, axis=axis)


OP_CASES = {
    "qnn.fixed_log_softmax": [
        _case(_q((2, 10), "int8", 1), 0.0625),
        _case(_q((2, 4, 3), "int8", 2), 0.2, axis=1),
        _case(_q((3, 6), "int8", 3), 1.7),
    ],
}

SCALES = [0.0005, 0.004, 0.0625, 0.3, 1.7, 9.0]


def _rows(n: int = 256) -> np.ndarray:
    rows = [np.arange(n) % 256 - 128, np.full(n, -128), np.full(n, 127)]  # every difference; equal rows
    rows += [np.where(np.arange(n) == k, 127, -128) for k in (0, 97)]  # one maximum, the rest 255 below
    rows += [np.where(np.arange(n) < k, 127, 127 - d) for k, d in ((3, 1), (40, 7), (200, 16), (1, 30))]
    rows += [_q((n,), "int8", seed).astype(np.int64) for seed in range(4)]
    return np.stack(rows).astype(np.int8)


def test_log_is_the_natural_log():
    z = np.unique(np.concatenate([np.arange(1 << 19, (1 << 19) + 3000), np.geomspace(1 << 19, 2**31 - 1, 4000)
                                  .astype(np.int64), [2**31 - 1]]))
    got = log_x_for_x_greater_than_or_equal_to_1(z) / 2.0**26
    np.testing.assert_allclose(got, np.log(z / 2.0**19), atol=8 / 2.0**26)


def test_params_follow_tflite_micro():
    table, attrs = log_softmax_params(0.1)
    # 0.1 * 2**26 = 6710886.4: frexp -> 0.8 * 2**23; the radius floor(31 * 2**26 / 2**23) = 248
    assert attrs["diff_min"] == -248
    assert table.dtype == np.int32 and table.shape == (2, 256)
    assert table[0, 0] == 1 << 19 and table[1, 0] == 0  # exp(0) in Q12.19; a difference of 0
    assert (table[:, 249:] == 0).all() and (np.diff(table[0, :249]) <= 0).all() and (np.diff(table[1, :249]) < 0).all()
    assert table[0, 1] > 0 and table[0, 248] == 0  # exp(-0.1) ... exp(-24.8) rounds to 0 in Q12.19
    m = attrs["reverse_multiplier"] * 2.0 ** attrs["reverse_shift"] / 2**31
    assert abs(m * 0.1 * 2**26 - 1) < 1e-8  # 2**(31 - 23) / multiplier: the input scaling's inverse
    with pytest.raises(ValueError, match=r"input scale 1e-09 x 2\*\*26 is not above 1"):
        log_softmax_params(1e-9)


@pytest.mark.parametrize("scale", SCALES)
def test_log_softmax_onnx_every_branch(scale):
    got, want = _exported("qnn.fixed_log_softmax", *_case(_rows(), scale), const_args=1)
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got, want)
    if scale >= 0.3:  # a maximum far above the rest: log softmax 0 (127) and the lowest (-128) both
        assert (want == -128).any() and (want == 127).any()


def test_log_softmax_onnx_one_element_rows():
    x = _q((4, 1), "int8", 7)
    got, want = _exported("qnn.fixed_log_softmax", *_case(x, 0.1), const_args=1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, np.full((4, 1), 127, np.int8))  # log 1 = 0 is 127


def test_values_below_diff_min_are_the_lowest():
    inputs, attrs = _case(np.array([[127, 127 - 15, 127 - 16, -128]], np.int8), 1.7)
    assert attrs["diff_min"] == -15  # 1.7 * 2**26 = 0.85 * 2**27: floor(31 * 2**26 / 2**27)
    y = run_plait_op("qnn.fixed_log_softmax", inputs, **attrs)
    np.testing.assert_array_equal(y, [[127, -128, -128, -128]])  # below diff_min: not in the sum, the lowest
    assert (inputs[1][:, 16:] == 0).all()
    # the radius is 15.5..31 input steps over the scale: below it the log softmax is under -15.5, which
    # int8 in steps of 1/16 clamps to -128 anyway; only the sum and the bound see diff_min


@pytest.mark.parametrize("scale", [0.004, 1.7])
def test_the_compiled_compute_on_every_branch(scale):
    inputs, attrs = _case(_rows(300), scale)
    x, table = inputs
    mod = IRModule.from_expr(call("qnn.fixed_log_softmax", var("x", x.shape, "int8"), const(table), **attrs))
    (y,) = plait.executor.GraphModule(plait.build(mod, "c"))(x)
    np.testing.assert_array_equal(y, run_plait_op("qnn.fixed_log_softmax", inputs, **attrs))


def _attrs(**kw):
    return dict(log_softmax_params(0.1)[1], axis=-1, **kw)


@pytest.mark.parametrize("inputs,attrs,message", [
    ([_q((2, 3), "uint8"), log_softmax_params(0.1)[0]], _attrs(),
     "qnn.fixed_log_softmax: data: expected int8, got Tensor[(2, 3), uint8]"),
    ([np.int8(3), log_softmax_params(0.1)[0]], _attrs(),
     "qnn.fixed_log_softmax: data: expected at least one dimension, got Tensor[(), int8]"),
    ([_q((2, 3), "int8"), np.zeros(256, np.int32)], _attrs(),
     "qnn.fixed_log_softmax: table: expected int32[2, 256], got Tensor[(256,), int32]"),
    ([_q((1, MAX_ROW + 1), "int8"), log_softmax_params(0.1)[0]], _attrs(),
     f"qnn.fixed_log_softmax: a row of {MAX_ROW + 1} values can overflow TFLite's int32 sum of exps "
     f"(at most {MAX_ROW})"),
    ([_q((2, 3), "int8"), log_softmax_params(0.1)[0]], dict(_attrs(), diff_min=4),
     "qnn.fixed_log_softmax: diff_min 4 is positive"),
    ([_q((2, 3), "int8"), log_softmax_params(0.1)[0]], dict(_attrs(), reverse_shift=2),
     "qnn.fixed_log_softmax: reverse_shift 2 is outside [-31, 0]"),
])
def test_bad_arguments_are_refused_with_the_reason(inputs, attrs, message):
    with pytest.raises(TypeInferenceError, match=re.escape(message)):
        run_plait_op("qnn.fixed_log_softmax", inputs, **attrs)
