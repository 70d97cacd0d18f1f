"""Single-operator TFLite models of the network operators (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
AVERAGE_POOL_2D, MAX_POOL_2D, SOFTMAX) and of ADD, SUB, MUL, written with plait's TFLiteWriter: int8 equal
to TensorFlow Lite Micro bit for bit, uint8 equal to LiteRT's reference kernels, float32 within
1e-5 * max|ref| + 1e-6 of LiteRT; and plait's numpy interpreter agrees with the C."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.frontend.tflite import from_tflite
from plait.frontend.tflite_write import TFLiteWriter
from plait.relay.interpreter import run as interpret

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
lit = pytest.importorskip("ai_edge_litert.interpreter")

LO = {"int8": -128, "uint8": 0}
ACTS = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}


def q(dtype: str, scale: float, zp: int):
    return None if dtype == "float32" else (scale, zp)


def data(rng, shape, dtype: str) -> np.ndarray:
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    lo = LO[dtype]
    return rng.integers(lo, lo + 256, shape).astype(dtype)


def weights(rng, shape, dtype: str, axis: int, per_channel: bool):
    """(values, quant) of a weight tensor: int8 symmetric (per channel along ``axis``), uint8 with a zero point."""
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32) * 0.3, None
    if dtype == "uint8":
        return rng.integers(0, 256, shape).astype(np.uint8), (0.01, 120)
    n = shape[axis] if per_channel else 1
    scales = rng.uniform(0.002, 0.02, n)
    return rng.integers(-127, 128, shape).astype(np.int8), (scales, np.zeros(n, np.int64), axis if per_channel else 0)


def bias(rng, n: int, dtype: str, in_scale: float, wq) -> tuple[np.ndarray, object]:
    if dtype == "float32":
        return rng.standard_normal(n).astype(np.float32), None
    ws = np.asarray(wq[0], np.float64) * np.ones(n)
    return rng.integers(-3000, 3000, n).astype(np.int32), ((in_scale * ws).astype(np.float32), np.zeros(n, np.int64), 0)


def reference(buf: bytes, xs: list[np.ndarray], dtype: str) -> list[np.ndarray]:
    if dtype == "int8":
        it = tflm_runtime.Interpreter.from_bytes(buf)
        for k, x in enumerate(xs):
            it.set_input(x, k)
        it.invoke()
        return [it.get_output(0)]
    li = lit.Interpreter(model_content=buf, experimental_op_resolver_type=lit.OpResolverType.BUILTIN_REF)
    li.allocate_tensors()
    for d, x in zip(li.get_input_details(), xs):
        li.set_tensor(d["index"], x)
    li.invoke()
    return [li.get_tensor(li.get_output_details()[0]["index"])]


def check(buf: bytes, xs: list[np.ndarray], dtype: str) -> None:
    (want,) = reference(buf, xs, dtype)
    mod = from_tflite(buf)
    (got,) = plait.executor.GraphModule(plait.build(mod, "c"))(*xs)
    interp = interpret(mod, list(xs))
    interp = interp[0] if isinstance(interp, (list, tuple)) else interp
    assert got.dtype == want.dtype and got.shape == want.shape
    if dtype == "float32":
        tol = 1e-5 * float(np.abs(want).max()) + 1e-6
        assert float(np.abs(got - want).max()) <= tol
        assert float(np.abs(np.asarray(interp) - want).max()) <= tol
    else:
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.asarray(interp), want)
        assert len(np.unique(want)) > 2  # the case does not saturate


CONV_CASES = [  # (op, padding, stride, dilation, activation, per_channel, depth multiplier)
    ("CONV_2D", 0, 1, 1, "RELU", True, 1), ("CONV_2D", 1, 2, 1, "NONE", True, 1),
    ("CONV_2D", 0, 2, 1, "RELU6", False, 1), ("CONV_2D", 0, 1, 2, "RELU_N1_TO_1", True, 1),
    ("DEPTHWISE_CONV_2D", 0, 1, 1, "RELU", True, 1), ("DEPTHWISE_CONV_2D", 1, 2, 1, "RELU6", True, 1),
    ("DEPTHWISE_CONV_2D", 0, 1, 1, "NONE", True, 2),
]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "float32"])
@pytest.mark.parametrize("op, padding, stride, dil, act, per_channel, mult", CONV_CASES)
def test_convolutions(op, padding, stride, dil, act, per_channel, mult, dtype):
    rng = np.random.default_rng(hash((op, padding, stride, dil, act, mult)) % 2**32)
    n, h, w, c = 1, 9, 8, 3
    w_ = TFLiteWriter()
    x = w_.tensor("x", (n, h, w, c), dtype, quant=q(dtype, 0.05, LO.get(dtype, 0) + 100))
    if op == "CONV_2D":
        o = 5
        kv, kq = weights(rng, (o, 3, 3, c), dtype, 0, per_channel)
    else:
        o = c * mult
        kv, kq = weights(rng, (1, 3, 3, o), dtype, 3, per_channel)
    k = w_.const("k", kv, quant=kq)
    bv, bq = bias(rng, o, dtype, 0.05, kq if kq else (np.ones(1),))
    b = w_.const("b", bv, quant=bq)
    eff = 2 * dil + 1
    oh, ow = ((-(-h // stride), -(-w // stride)) if padding == 0
              else ((h - eff) // stride + 1, (w - eff) // stride + 1))
    y = w_.tensor("y", (n, oh, ow, o), dtype, quant=q(dtype, 0.08, LO.get(dtype, 0) + 60))
    opts = dict(Padding=padding, StrideW=stride, StrideH=stride, FusedActivationFunction=ACTS[act],
                DilationWFactor=dil, DilationHFactor=dil)
    if op == "DEPTHWISE_CONV_2D":
        opts["DepthMultiplier"] = mult
    w_.op(op, [x, k, b], [y], **opts)
    check(w_.finish([x], [y]), [data(rng, (n, h, w, c), dtype)], dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "float32"])
@pytest.mark.parametrize("act, keep, batch", [("NONE", False, 2), ("RELU", False, 1), ("RELU6", True, 3)])
def test_fully_connected(act, keep, batch, dtype):
    rng = np.random.default_rng(batch)
    w_ = TFLiteWriter()
    shape = (batch, 2, 12) if keep else (batch, 24)
    x = w_.tensor("x", shape, dtype, quant=q(dtype, 0.05, LO.get(dtype, 0) + 110))
    kv, kq = weights(rng, (7, shape[-1]), dtype, 0, False)
    k = w_.const("k", kv, quant=kq)
    bv, bq = bias(rng, 7, dtype, 0.05, kq if kq else (np.ones(1),))
    b = w_.const("b", bv, quant=bq)
    out = (batch, 2, 7) if keep else (batch, 7)
    y = w_.tensor("y", out, dtype, quant=q(dtype, 0.1, LO.get(dtype, 0) + 100))
    w_.op("FULLY_CONNECTED", [x, k, b], [y], FusedActivationFunction=ACTS[act], KeepNumDims=keep)
    check(w_.finish([x], [y]), [data(rng, shape, dtype)], dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "float32"])
@pytest.mark.parametrize("op, padding, k, stride, act", [
    ("AVERAGE_POOL_2D", 0, 3, 2, "NONE"), ("AVERAGE_POOL_2D", 1, 2, 2, "RELU"), ("AVERAGE_POOL_2D", 0, 4, 1, "RELU6"),
    ("MAX_POOL_2D", 0, 3, 2, "NONE"), ("MAX_POOL_2D", 1, 2, 1, "RELU")])
def test_pools(op, padding, k, stride, act, dtype):
    rng = np.random.default_rng(k * 10 + stride)
    h, w = 9, 7
    w_ = TFLiteWriter()
    qq = q(dtype, 0.05, LO.get(dtype, 0) + 120)
    x = w_.tensor("x", (2, h, w, 3), dtype, quant=qq)
    oh, ow = ((-(-h // stride), -(-w // stride)) if padding == 0 else ((h - k) // stride + 1, (w - k) // stride + 1))
    y = w_.tensor("y", (2, oh, ow, 3), dtype, quant=qq)
    w_.op(op, [x], [y], Padding=padding, StrideW=stride, StrideH=stride, FilterWidth=k, FilterHeight=k,
          FusedActivationFunction=ACTS[act])
    check(w_.finish([x], [y]), [data(rng, (2, h, w, 3), dtype)], dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "float32"])
@pytest.mark.parametrize("scale, beta", [(0.1, 1.0), (0.02, 1.0), (0.5, 0.5), (0.3, 2.0)])
def test_softmax(scale, beta, dtype):
    rng = np.random.default_rng(int(scale * 100))
    w_ = TFLiteWriter()
    x = w_.tensor("x", (4, 10), dtype, quant=q(dtype, scale, LO.get(dtype, 0) + 128))
    y = w_.tensor("y", (4, 10), dtype, quant=q(dtype, 1 / 256, LO.get(dtype, 0)))
    w_.op("SOFTMAX", [x], [y], Beta=beta)
    xv = data(rng, (4, 10), dtype)
    if dtype == "float32":
        xv = xv * 3
    check(w_.finish([x], [y]), [xv], dtype)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "float32"])
@pytest.mark.parametrize("op, act, b_shape", [("ADD", "NONE", (2, 5, 4, 3)), ("ADD", "RELU", (3,)),
                                              ("SUB", "RELU6", (2, 5, 4, 3)), ("SUB", "NONE", (1, 1, 4, 1)),
                                              ("MUL", "NONE", (2, 5, 4, 3)), ("MUL", "RELU", (5, 1, 1))])
def test_binary(op, act, b_shape, dtype):
    rng = np.random.default_rng(len(b_shape) * 7 + ACTS[act])
    w_ = TFLiteWriter()
    lo = LO.get(dtype, 0)
    a = w_.tensor("a", (2, 5, 4, 3), dtype, quant=q(dtype, 0.05, lo + 120))
    b = w_.tensor("b", b_shape, dtype, quant=q(dtype, 0.12, lo + 100))
    y = w_.tensor("y", (2, 5, 4, 3), dtype, quant=q(dtype, 0.1 if op != "MUL" else 0.3, lo + 128))
    w_.op(op, [a, b], [y], FusedActivationFunction=ACTS[act])
    check(w_.finish([a, b], [y]), [data(rng, (2, 5, 4, 3), dtype), data(rng, b_shape, dtype)], dtype)


def test_a_convolution_after_a_convolution_keeps_channels_first():
    """Two int8 convolutions and an ADD between them: one transpose in, one out (before the output)."""
    rng = np.random.default_rng(0)
    w_ = TFLiteWriter()
    x = w_.tensor("x", (1, 6, 6, 4), "int8", quant=(0.05, 3))
    ts = [x]
    for k in range(2):
        kv, kq = weights(rng, (4, 3, 3, 4), "int8", 0, True)
        bv, bq = bias(rng, 4, "int8", 0.05, kq)
        y = w_.tensor(f"y{k}", (1, 6, 6, 4), "int8", quant=(0.05, 3))
        w_.op("CONV_2D", [ts[-1], w_.const(f"k{k}", kv, quant=kq), w_.const(f"b{k}", bv, quant=bq)], [y],
              Padding=0, StrideW=1, StrideH=1, FusedActivationFunction=1)
        ts.append(y)
    z = w_.tensor("z", (1, 6, 6, 4), "int8", quant=(0.08, 0))
    w_.op("ADD", [ts[1], ts[2]], [z], FusedActivationFunction=0)
    buf = w_.finish([x], [z])
    mod = from_tflite(buf)
    text = str(mod)
    assert text.count("transpose(") == 2
    check(buf, [data(rng, (1, 6, 6, 4), "int8")], "int8")
