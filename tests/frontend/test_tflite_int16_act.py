"""int16 TFLite activations, softmax and pools (16x8 models) as single-operator models written with plait's
TFLiteWriter: RELU, RELU6, LEAKY_RELU, LOGISTIC and TANH on every one of the 65536 int16 values (a table
at import, ``take``), SOFTMAX (``qnn.softmax16``) and MAX_POOL_2D / AVERAGE_POOL_2D on seeded full-range
inputs, several scales; equal to TensorFlow Lite Micro bit for bit, the compiled C and the numpy
interpreter both. What TensorFlow Lite Micro does not run in int16 (HARD_SWISH) stays refused."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.errors import FrontendError
from plait.frontend.tflite import from_tflite
from plait.frontend.tflite_write import TFLiteWriter
from plait.relay.interpreter import run as interpret

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

O16 = (1 / 32768, 0)  # the output TFLite requires of int16 LOGISTIC, TANH and SOFTMAX
EVERY = np.arange(-32768, 32768).astype(np.int16).reshape(1, 256, 256, 1)


def model(op: str, shape: tuple, qin: tuple, qout: tuple, out_shape: tuple | None = None, **options) -> bytes:
    w = TFLiteWriter()
    x = w.tensor("x", shape, "int16", quant=qin)
    y = w.tensor("y", out_shape or shape, "int16", quant=qout)
    w.op(op, [x], [y], **options)
    return w.finish([x], [y])


def tflm(buf: bytes, x: np.ndarray) -> np.ndarray:
    it = tflm_runtime.Interpreter.from_bytes(buf, arena_size=1 << 21)
    it.set_input(x, 0)
    it.invoke()
    return it.get_output(0)


def check(buf: bytes, x: np.ndarray, distinct: int = 10) -> None:
    want = tflm(buf, x)
    mod = from_tflite(buf)
    (got,) = plait.executor.GraphModule(plait.build(mod, "c"))(x)
    interp = interpret(mod, [x])
    interp = np.asarray(interp[0] if isinstance(interp, (list, tuple)) else interp)
    assert got.dtype == want.dtype == np.int16 and len(np.unique(want)) > distinct
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(interp, want)


ELEMENTWISE = [
    ("RELU", (0.001, 0), (0.001, 0), {}), ("RELU", (0.001, 0), (0.0007, 0), {}), ("RELU", (0.0002, 0), (0.0009, 0), {}),
    ("RELU6", (0.001, 5), (0.001, 5), {}), ("RELU6", (0.0002, -100), (0.0002, -100), {}),
    ("RELU6", (0.00003, 0), (0.00003, 0), {}),
    ("LEAKY_RELU", (0.001, 0), (0.002, 0), {"Alpha": 0.1}), ("LEAKY_RELU", (0.001, 4), (0.0013, -3), {"Alpha": 0.37}),
    ("LEAKY_RELU", (0.0003, -20), (0.0002, 7), {"Alpha": -0.3}), ("LEAKY_RELU", (0.0007, 0), (0.0005, 0), {"Alpha": 1.7}),
] + [("LOGISTIC", (s, 0), O16, {}) for s in (1 / 4096, 1 / 2048, 0.001, 0.0003, 0.00005, 1 / 8192)] + [
    ("TANH", (s, 0), O16, {}) for s in (1 / 4096, 1 / 2048, 1 / 1024, 0.001, 0.0003, 0.00005)] + [
    ("ABS", (0.001, 0), (0.001, 0), {}), ("ABS", (0.001, 0), (0.0013, 0), {}), ("ABS", (0.0002, 0), (0.0001, 0), {})]


@pytest.mark.parametrize("op, qin, qout, options", ELEMENTWISE,
                         ids=[f"{c[0]}-{c[1][0]:.3g}-{c[2][0]:.3g}" for c in ELEMENTWISE])
def test_int16_activations_on_every_value_equal_tflite_micro(op, qin, qout, options):
    check(model(op, EVERY.shape, qin, qout, **options), EVERY)


@pytest.mark.parametrize("scale, beta, depth, spread", [
    (0.001, 1.0, 10, 32768), (0.0003, 1.0, 33, 5000), (0.01, 0.5, 7, 2000), (1 / 4096, 1.0, 100, 32768),
    (0.00005, 2.0, 16, 32768), (0.002, 1.0, 1, 32768)])
def test_int16_softmax_equals_tflite_micro(scale, beta, depth, spread):
    rng = np.random.default_rng(depth)
    x = np.clip(rng.integers(-spread, spread, (40, depth)), -32768, 32767).astype(np.int16)
    check(model("SOFTMAX", x.shape, (scale, 0), O16, Beta=beta), x, distinct=0 if depth == 1 else 10)


POOLS = [("MAX_POOL_2D", 2, 2, 2, 1, 0, (0.001, 0)), ("MAX_POOL_2D", 3, 3, 1, 0, 1, (0.0005, 3)),
         ("AVERAGE_POOL_2D", 2, 2, 2, 1, 0, (0.001, 0)), ("AVERAGE_POOL_2D", 3, 2, 1, 0, 3, (0.0005, -7)),
         ("AVERAGE_POOL_2D", 3, 3, 2, 0, 1, (0.002, 0))]


@pytest.mark.parametrize("op, kh, kw, stride, padding, act, q", POOLS)
def test_int16_pools_equal_tflite_micro(op, kh, kw, stride, padding, act, q):
    n, h, w, c = 2, 9, 10, 3
    oh, ow = ((-(-h // stride), -(-w // stride)) if padding == 0 else
              ((h - kh) // stride + 1, (w - kw) // stride + 1))
    buf = model(op, (n, h, w, c), q, q, (n, oh, ow, c), FilterHeight=kh, FilterWidth=kw, StrideH=stride,
                StrideW=stride, Padding=padding, FusedActivationFunction=act)
    x = np.random.default_rng(kh * 10 + kw).integers(-32768, 32768, (n, h, w, c)).astype(np.int16)
    check(buf, x)


def test_int16_hard_swish_is_refused_as_tflite_micro_does():
    with pytest.raises(FrontendError, match=r"operator 0 \(HARD_SWISH\): HARD_SWISH of INT16 to INT16 is not supported "
                                            r"\(int8 and uint8 to itself is\)$"):
        from_tflite(model("HARD_SWISH", (1, 8), (0.001, 0), (0.001, 0)))


def test_int16_abs_with_a_zero_point_is_refused():
    with pytest.raises(FrontendError, match=r"operator 0 \(ABS\): an int16 ABS needs zero points 0 \(TensorFlow Lite "
                                            r"Micro's is symmetric\); got 3 and 0"):
        from_tflite(model("ABS", (1, 8), (0.001, 3), (0.001, 0)))


def test_int16_relu_with_a_zero_point_is_refused():
    with pytest.raises(FrontendError, match=r"operator 0 \(RELU\): RELU of INT16 needs zero points 0 \(TFLite requires "
                                            r"them\), got input 3 and output 0"):
        from_tflite(model("RELU", (1, 8), (0.001, 3), (0.001, 0)))


def test_int16_logistic_with_another_output_scale_is_refused():
    with pytest.raises(FrontendError, match=r"operator 0 \(LOGISTIC\): LOGISTIC of INT16 needs the output scale 1/32768"):
        from_tflite(model("LOGISTIC", (1, 8), (0.001, 0), (1 / 16384, 0)))


def test_int16_softmax_with_another_output_scale_is_refused():
    with pytest.raises(FrontendError, match=r"operator 0 \(SOFTMAX\): an INT16 softmax's output must have scale "
                                            r"1/32768 and zero point 0"):
        from_tflite(model("SOFTMAX", (1, 8), (0.001, 0), (1 / 256, 0)))
