"""16x8 TFLite models (int16 activations, int8 weights, int64 or int32 bias): CONV_2D, DEPTHWISE_CONV_2D
and FULLY_CONNECTED written with plait's TFLiteWriter, equal to TensorFlow Lite Micro bit for bit (its
int64 sums and ``MultiplyByQuantizedMultiplier`` with the 16-bit multiplier); the compiled C and the
numpy interpreter both."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.errors import FrontendError
from plait.frontend.tflite import from_tflite
from plait.frontend.tflite_write import TFLiteWriter
from plait.relay.interpreter import run as interpret

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

ACTS = {"NONE": 0, "RELU": 1, "RELU6": 3}
rng = np.random.default_rng(16)


def tflm(buf: bytes, x: np.ndarray) -> np.ndarray:
    it = tflm_runtime.Interpreter.from_bytes(buf)
    it.set_input(x, 0)
    it.invoke()
    return it.get_output(0)


def check(buf: bytes, x: np.ndarray) -> None:
    want = tflm(buf, x)
    mod = from_tflite(buf)
    (got,) = plait.executor.GraphModule(plait.build(mod, "c"))(x)
    interp = interpret(mod, [x])
    interp = np.asarray(interp[0] if isinstance(interp, (list, tuple)) else interp)
    assert got.dtype == want.dtype == np.int16 and len(np.unique(want)) > 10
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(interp, want)


def weights(shape: tuple, axis: int, per_channel: bool, in_scale: float, bias_dtype):
    n = shape[axis] if per_channel else 1
    scales = rng.uniform(0.002, 0.02, n)
    w = rng.integers(-127, 128, shape).astype(np.int8)
    o = shape[axis]
    b = rng.integers(-200000, 200000, o).astype(bias_dtype)
    bq = ((in_scale * scales * np.ones(o)).astype(np.float32), np.zeros(o, np.int64), 0)
    return (w, (scales, np.zeros(n, np.int64), axis if per_channel else 0)), (b, bq)


def x16(shape: tuple) -> np.ndarray:
    return rng.integers(-32768, 32768, shape).astype(np.int16)


@pytest.mark.parametrize("bias_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("op, stride, act, per_channel", [
    ("CONV_2D", 1, "NONE", True), ("CONV_2D", 2, "RELU", False), ("DEPTHWISE_CONV_2D", 1, "RELU6", True),
    ("DEPTHWISE_CONV_2D", 2, "NONE", True)])
def test_16x8_convolutions(op, stride, act, per_channel, bias_dtype):
    n, h, w_, c = 1, 9, 8, 3
    o = 5 if op == "CONV_2D" else c * 2
    wshape, axis = ((o, 3, 3, c), 0) if op == "CONV_2D" else ((1, 3, 3, o), 3)
    w = TFLiteWriter()
    x = w.tensor("x", (n, h, w_, c), "int16", quant=(0.0005, 0))
    (kv, kq), (bv, bq) = weights(wshape, axis, per_channel, 0.0005, bias_dtype)
    k, b = w.const("k", kv, quant=kq), w.const("b", bv, quant=bq)
    y = w.tensor("y", (n, -(-h // stride), -(-w_ // stride), o), "int16", quant=(0.05, 0))
    opts = dict(Padding=0, StrideW=stride, StrideH=stride, FusedActivationFunction=ACTS[act])
    if op == "DEPTHWISE_CONV_2D":
        opts["DepthMultiplier"] = 2
    w.op(op, [x, k, b], [y], **opts)
    buf = w.finish([x], [y])
    if op == "DEPTHWISE_CONV_2D" and bias_dtype == np.int32:  # TFLM reads it as int64: refused
        with pytest.raises(FrontendError, match=r"a 16x8 DEPTHWISE_CONV_2D with an int32 bias"):
            from_tflite(buf)
        return
    check(buf, x16((n, h, w_, c)))


@pytest.mark.parametrize("bias_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("per_channel", [True, False])
def test_16x8_fully_connected(per_channel, bias_dtype):
    w = TFLiteWriter()
    x = w.tensor("x", (2, 40), "int16", quant=(0.0003, 0))
    (kv, kq), (bv, bq) = weights((12, 40), 0, per_channel, 0.0003, bias_dtype)
    k, b = w.const("k", kv, quant=kq), w.const("b", bv, quant=bq)
    y = w.tensor("y", (2, 12), "int16", quant=(0.03, 0))
    w.op("FULLY_CONNECTED", [x, k, b], [y], FusedActivationFunction=0)
    check(w.finish([x], [y]), x16((2, 40)))


def test_16x8_with_a_zero_point_is_refused():
    w = TFLiteWriter()
    x = w.tensor("x", (1, 8), "int16", quant=(0.001, 3))
    (kv, kq), _ = weights((4, 8), 0, False, 0.001, np.int64)
    k = w.const("k", kv, quant=kq)
    y = w.tensor("y", (1, 4), "int16", quant=(0.001, 0))
    w.op("FULLY_CONNECTED", [x, k, -1], [y])
    with pytest.raises(FrontendError, match=r"operator 0 \(FULLY_CONNECTED\): 16x8 needs int8 weights and zero points 0"):
        from_tflite(w.finish([x], [y]))
