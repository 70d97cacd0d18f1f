"""``qnn.softmax16`` (plait/op/qnn_softmax16.py): its ONNX form run by ONNX Runtime gives the numpy
reference's bits (full-range rows, equal rows, one large value, one-element rows, several scales), and its
type errors. The reference itself is checked against TensorFlow Lite Micro through the importer
(tests/frontend/test_tflite_int16_act.py). ``OP_CASES`` also runs through the TE compute coverage test
and the ONNX export round trip (tests/op/declared_cases.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from ort_util import run_plait_op

from plait.errors import TypeInferenceError
from plait.frontend.onnx_export import to_onnx
from plait.op.qnn_softmax16 import lut16, softmax16_luts, softmax16_params
from plait.relay import IRModule, call, const, run, var
from plait.relay.expr import Function
from plait.testing.ort_reference import reference_session

TABS = softmax16_luts()


def _q(shape, seed=0, spread=32768):
    r = np.random.default_rng(seed).integers(-spread, spread, shape)
    return np.clip(r, -32768, 32767).astype(np.int16)


def _attrs(scale, beta=1.0, axis=-1):
    m, s = softmax16_params(scale, beta)
    return {"axis": axis, "multiplier": m, "shift": s}


OP_CASES = {
    "qnn.softmax16": [
        ([_q((2, 10), 1), TABS], _attrs(0.001)),
        ([_q((2, 4, 3), 2, 3000), TABS], _attrs(0.0003, axis=1)),
        ([_q((3, 6), 3), TABS], _attrs(1 / 4096, 2.0)),
    ],
}


def _exported(inputs: list[np.ndarray], attrs: dict) -> tuple[np.ndarray, np.ndarray]:
    param = var("x0", inputs[0].shape, "int16")
    func = Function((param,), call("qnn.softmax16", param, const(inputs[1]), **attrs))
    want = run(IRModule.from_expr(func), inputs[:1])
    sess = reference_session(to_onnx(func))
    (got,) = sess.run(None, {sess.get_inputs()[0].name: inputs[0]})
    return got, np.asarray(want)


@pytest.mark.parametrize("scale, beta", [(0.001, 1.0), (0.00005, 2.0), (0.01, 0.5), (1 / 4096, 1.0)])
def test_softmax16_onnx_equals_the_reference(scale, beta):
    rows = [np.arange(-32768, 32768, 256), np.full(256, -32768), np.full(256, 32767),
            np.where(np.arange(256) == 97, 32767, -32768)]
    rows += [_q((256,), seed, spread) for seed, spread in enumerate((32768, 5000, 300, 30))]
    x = np.stack(rows).astype(np.int16)
    got, want = _exported([x, TABS], _attrs(scale, beta))
    assert got.dtype == want.dtype == np.int16
    np.testing.assert_array_equal(got, want)


def test_softmax16_one_element_rows_are_one():
    y = np.asarray(run_plait_op("qnn.softmax16", [_q((4, 1), 7), TABS], **_attrs(0.001)))
    np.testing.assert_array_equal(y, np.full((4, 1), 32767, np.int16))


def test_lut16_interpolates_between_entries():
    lut = np.zeros(513, np.int16)
    lut[256], lut[257] = 100, 228  # slope 128 over 128 steps: one per step
    np.testing.assert_array_equal(lut16(np.array([0, 1, 64, 127, 128]), lut), [100, 101, 164, 227, 228])


@pytest.mark.parametrize("inputs, attrs, message", [
    ([_q((2, 3)).astype(np.int8), TABS], _attrs(0.001), "softmax16: input: expected int16, got Tensor[(2, 3), int8]"),
    ([_q((2, 3)), TABS[:, :512]], _attrs(0.001), "softmax16: tables: expected int16[2, 513], got Tensor[(2, 512), int16]"),
    ([_q((2, 3)), TABS], {"axis": -1, "multiplier": 5, "shift": 0},
     "softmax16: multiplier 5 and shift 0 are not a QuantizeMultiplier result"),
])
def test_bad_arguments_are_refused_with_the_reason(inputs, attrs, message):
    with pytest.raises(TypeInferenceError, match=re.escape(message)):
        run_plait_op("qnn.softmax16", inputs, **attrs)


def test_scales_tflite_cannot_take_are_refused():
    with pytest.raises(ValueError, match=r"too large for TFLite's int16 softmax"):
        softmax16_params(20.0)
