"""TFLite converters of the network operators: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
AVERAGE_POOL_2D, MAX_POOL_2D, SOFTMAX.

Each reads float32 or quantized (int8 with per-channel weights, uint8) tensors. Float: ``nn.conv2d``,
``nn.dense``, ``nn.avg_pool2d`` (padding not counted, as TFLite), ``nn.softmax``. Quantized: the exact
int32 sum (``qnn.conv2d`` / ``qnn.dense``, the weights' zero point 0 for int8), plus the int32 bias,
then ``qnn.requantize`` in fixed point (TFLite's multipliers, :mod:`plait.frontend.tflite_quant`)
with the fused activation as its clamp; pools and softmax are TensorFlow Lite Micro's integer
kernels (``qnn.avg_pool2d``, ``qnn.fixed_softmax``; int16: ``qnn.softmax16``, TFLite's ``SoftmaxInt16``;
a max pool is exact on integers). Spatial operators
compute channels-first: their input is a transposed value, their result stays channels-first.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plait.frontend import tflite_ops_hybrid
from plait.frontend.tflite_context import OpContext, Unsupported, Val, registrar
from plait.frontend.tflite_ops import float_activation, same_or_valid
from plait.frontend.tflite_quant import clamp_attrs, multipliers, per_tensor, qparams, requantize
from plait.op.qnn_fixed import softmax_exp_table
from plait.op.qnn_softmax16 import softmax16_luts, softmax16_params

CONVERTERS: dict[str, Callable[[OpContext], Any]] = {}


_conv = registrar(CONVERTERS)


def _is_quant(cx: OpContext, i: int = 0) -> bool:
    t = cx.tensor(i)
    return t is not None and t.dtype in ("int8", "uint8", "int16")


def _window(cx: OpContext, x_shape: tuple, kh: int, kw: int) -> dict[str, Any]:
    sh, sw = cx.option("StrideH", 1), cx.option("StrideW", 1)
    dh, dw = cx.option("DilationHFactor", 1), cx.option("DilationWFactor", 1)
    if min(sh, sw, dh, dw) < 1:
        raise Unsupported(f"strides ({sh}, {sw}) and dilations ({dh}, {dw}) must be >= 1")
    ph = same_or_valid(cx, x_shape[1], kh, sh, dh)
    pw = same_or_valid(cx, x_shape[2], kw, sw, dw)
    return {"strides": (sh, sw), "dilation": (dh, dw), "padding": (ph[0], pw[0], ph[1], pw[1])}


def _bias(cx: OpContext, i: int, n: int, dtype: str) -> np.ndarray | None:
    if cx.tensor(i) is None:
        return None
    b = cx.need_const(i, "the bias")
    if b.dtype != np.dtype(dtype) or b.size != n:
        raise Unsupported(f"the bias is {b.dtype}{list(b.shape)}, expected {dtype}[{n}]")
    return b.reshape(-1)


def _conv_like(cx: OpContext, depthwise: bool) -> Any:
    cx.need(2, 3)
    x, w = cx.tensor(0), cx.tensor(1)
    wv = cx.need_const(1, "the filter")
    if len(x.shape) != 4 or wv.ndim != 4:
        raise Unsupported(f"expected a 4-D input and filter, got {list(x.shape)} and {list(wv.shape)}")
    cin = x.shape[3]
    if depthwise:  # [1, KH, KW, C * M] -> OIHW [C * M, 1, KH, KW], one group per input channel
        if wv.shape[0] != 1 or cin == 0 or wv.shape[3] % cin:
            raise Unsupported(f"depthwise filter {list(wv.shape)} does not fit input channels {cin}")
        weight = np.ascontiguousarray(np.transpose(wv, (3, 0, 1, 2)))
        groups, qaxis = cin, 3
    else:  # OHWI -> OIHW
        if wv.shape[3] == 0 or cin % wv.shape[3]:
            raise Unsupported(f"filter {list(wv.shape)} does not fit input channels {cin}")
        weight = np.ascontiguousarray(np.transpose(wv, (0, 3, 1, 2)))
        groups, qaxis = cin // wv.shape[3], 0
    o = weight.shape[0]
    attrs = dict(_window(cx, x.shape, weight.shape[2], weight.shape[3]), groups=groups)
    fused = cx.option("FusedActivationFunction", 0)
    if x.dtype == "float32" and w.dtype in tflite_ops_hybrid.HYBRID_WEIGHTS:
        return tflite_ops_hybrid.conv(cx, weight, attrs, depthwise, fused)
    data = cx.nchw(0)
    if not _is_quant(cx):
        if x.dtype != "float32" or wv.dtype != np.float32:
            raise Unsupported(f"a {x.type_name} input with a {w.type_name} filter is not supported")
        b = _bias(cx, 2, o, "float32")
        if tflite_ops_hybrid.xnnpack_order(cx, int(np.prod(weight.shape[1:]))):
            return tflite_ops_hybrid.xnnpack_conv(cx, weight, b, attrs, depthwise, fused)
        y = cx.call("nn.conv2d", data, weight, **attrs)
        if b is not None:
            y = cx.call("add", y, b.reshape(1, o, 1, 1))
        return Val(float_activation(cx, y, fused), nchw=True)
    return Val(_quant_conv(cx, data, weight, attrs, qaxis, o, fused), nchw=True)


def _quant_conv(cx: OpContext, data: Any, weight: np.ndarray, attrs: dict, qaxis: int, o: int, fused: int) -> Any:
    x, w, y = cx.tensor(0), cx.tensor(1), cx.out()
    xs, xz = per_tensor(x, "the input")
    ys, yz = per_tensor(y, "the output")
    wq = qparams(w, "the filter")
    if wq.scale.size not in (1, o) or (wq.scale.size > 1 and wq.axis != qaxis):
        raise Unsupported(f"filter scales: {wq.scale.size} along dimension {wq.axis}, expected 1 or {o} along {qaxis}")
    wz = int(wq.zero_point[0])
    if np.any(wq.zero_point != wz):
        raise Unsupported("per-channel filter zero points that differ are not supported")
    if x.dtype == "int16":
        if cx.op.opcode == "DEPTHWISE_CONV_2D" and cx.tensor(2) is not None and cx.tensor(2).dtype == "int32":
            raise Unsupported("a 16x8 DEPTHWISE_CONV_2D with an int32 bias (TensorFlow Lite Micro's takes int64)")
        acc = cx.call("nn.conv2d", _float64(cx, data, x, xz, weight, wz), weight.astype(np.float64), **attrs)
        return _requantize_16x8(cx, acc, (1, o, 1, 1), *multipliers(xs, wq.scale, ys), fused, ys, yz)
    acc = cx.call("qnn.conv2d", data, weight, input_zero_point=xz, kernel_zero_point=wz, **attrs)
    b = _bias(cx, 2, o, "int32")
    if b is not None:
        acc = cx.call("add", acc, b.reshape(1, o, 1, 1))
    mult, shift = multipliers(xs, wq.scale, ys)
    if mult.size == 1 and o > 1:
        mult, shift = mult.reshape(()), shift.reshape(())
    return requantize(cx, acc, mult, shift, yz, y.dtype, fused, ys, axis=1)


@_conv("CONV_2D")
def _conv2d(cx: OpContext) -> Any:
    return _conv_like(cx, depthwise=False)


@_conv("DEPTHWISE_CONV_2D")
def _depthwise(cx: OpContext) -> Any:
    return _conv_like(cx, depthwise=True)


@_conv("FULLY_CONNECTED")
def _fully_connected(cx: OpContext) -> Any:
    cx.need(2, 3)
    x = cx.tensor(0)
    wv = cx.need_const(1, "the weights")
    if cx.option("WeightsFormat", 0) != 0:
        raise Unsupported("shuffled weights formats are not supported")
    if wv.ndim != 2 or wv.shape[1] == 0:
        raise Unsupported(f"expected 2-D weights [O, I], got {list(wv.shape)}")
    o, k = wv.shape
    n = int(np.prod(x.shape)) if x.shape else 1
    if n % k:
        raise Unsupported(f"the input {list(x.shape)} does not hold rows of {k} values")
    flat = cx.call("reshape", cx.nhwc(0), newshape=(n // k, k))
    fused = cx.option("FusedActivationFunction", 0)
    if x.dtype == "float32" and cx.tensor(1).dtype in tflite_ops_hybrid.HYBRID_WEIGHTS:
        y = tflite_ops_hybrid.dense(cx, flat, wv, fused)
    elif not _is_quant(cx):
        if x.dtype != "float32" or wv.dtype != np.float32:
            raise Unsupported(f"a {x.type_name} input with {cx.tensor(1).type_name} weights is not supported")
        b = _bias(cx, 2, o, "float32")
        if tflite_ops_hybrid.xnnpack_order(cx, k):
            y = tflite_ops_hybrid.xnnpack_dense(cx, flat, wv, b, fused)
        else:
            y = cx.call("nn.dense", flat, wv)
            if b is not None:
                y = cx.call("add", y, b)
            y = float_activation(cx, y, fused)
    else:
        y = _quant_dense(cx, flat, wv, o, fused)
    out = cx.out().shape
    return cx.call("reshape", y, newshape=out) if tuple(out) != (n // k, o) else y


def _quant_dense(cx: OpContext, flat: Any, wv: np.ndarray, o: int, fused: int) -> Any:
    x, w, y = cx.tensor(0), cx.tensor(1), cx.out()
    xs, xz = per_tensor(x, "the input")
    ys, yz = per_tensor(y, "the output")
    wq = qparams(w, "the weights")
    if wq.scale.size not in (1, o):
        raise Unsupported(f"{wq.scale.size} weight scales for {o} outputs")
    wz = int(wq.zero_point[0])
    if x.dtype == "int16":
        acc = cx.call("nn.dense", _float64(cx, flat, x, xz, wv, wz), wv.astype(np.float64))
        return _requantize_16x8(cx, acc, (1, o), *multipliers(xs, wq.scale, ys), fused, ys, yz)
    acc = cx.call("qnn.dense", flat, wv, input_zero_point=xz, kernel_zero_point=wz)
    b = _bias(cx, 2, o, "int32")
    if b is not None:
        acc = cx.call("add", acc, b)
    mult, shift = multipliers(xs, wq.scale, ys)
    if mult.size == 1:
        mult, shift = mult.reshape(()), shift.reshape(())
    return requantize(cx, acc, mult, shift, yz, y.dtype, fused, ys, axis=1)


def _float64(cx: OpContext, data: Any, x: Any, xz: int, weight: np.ndarray, wz: int) -> Any:
    """A 16x8 operand in float64, where the products and sums of int16 x int8 values are exact (below
    2**53), after TensorFlow Lite Micro's checks: symmetric activations and weights."""
    if xz != 0 or wz != 0 or weight.dtype != np.int8:
        raise Unsupported(f"16x8 needs int8 weights and zero points 0 (got {weight.dtype}, input {xz}, weights {wz})")
    return cx.call("cast", data, dtype="float64")


def _requantize_16x8(cx: OpContext, acc: Any, shape: tuple, mult: np.ndarray, shift: np.ndarray, fused: int,
                     ys: float, yz: int) -> Any:
    """TFLite's int64 ``MultiplyByQuantizedMultiplier`` of the exact sums (plus the int64 bias): the
    multiplier reduced to 16 bits, ``(acc * m16 + 2**(14 - shift)) >> (15 - shift)``, per channel; then
    the zero point and the fused activation's clamp, as int16. With an int32 bias, TensorFlow Lite Micro
    sums in int32 and requantizes as for int8 (``qnn.requantize`` in fixed point)."""
    o = shape[1]
    if cx.tensor(2) is not None and cx.tensor(2).dtype == "int32":  # an int32 bias: int32 sums, TFLite's
        acc = cx.call("add", cx.call("cast", acc, dtype="int32"), _bias(cx, 2, o, "int32").reshape(shape))
        m, s = (mult, shift) if mult.size > 1 else (mult.reshape(()), shift.reshape(()))
        return requantize(cx, acc, m, s, yz, "int16", fused, ys, axis=1)  # usual fixed point
    acc = cx.call("cast", acc, dtype="int64")
    b = _bias(cx, 2, o, "int64")
    if b is not None:
        acc = cx.call("add", acc, b.reshape(shape))
    m = np.asarray(mult, np.int64).reshape(-1)
    total = 15 - np.asarray(shift, np.int64).reshape(-1)
    m16 = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    if mult.size == 1:
        m16, total = m16.reshape(()), total.reshape(())
    else:
        m16, total = m16.reshape(shape), total.reshape(shape)
    v = cx.call("add", cx.call("multiply", acc, m16), np.left_shift(np.int64(1), total - 1))
    v = cx.call("right_shift", v, total)
    if yz:
        v = cx.call("add", v, np.array(yz, np.int64))
    lo, hi = (c if c is not None else d for c, d in zip(clamp_attrs(fused, ys, yz, "int16").values(), (-32768, 32767)))
    v = cx.call("minimum", cx.call("maximum", v, np.array(lo, np.int64)), np.array(hi, np.int64))
    return cx.call("cast", v, dtype="int16")


def _pool(cx: OpContext, kind: str) -> Any:
    cx.need(1, 1)
    x = cx.tensor(0)
    if len(x.shape) != 4:
        raise Unsupported(f"expected a 4-D input, got {list(x.shape)}")
    kh, kw = cx.option("FilterHeight", 1), cx.option("FilterWidth", 1)
    if min(kh, kw) < 1:
        raise Unsupported(f"filter size ({kh}, {kw}) must be >= 1")
    attrs = _window(cx, x.shape, kh, kw)
    fused = cx.option("FusedActivationFunction", 0)
    data = cx.nchw(0)
    if not _is_quant(cx):
        if x.dtype != "float32":
            raise Unsupported(f"a {x.type_name} input is not supported")
        op = "nn.avg_pool2d" if kind == "avg" else "nn.max_pool2d"
        y = cx.call(op, data, pool_size=(kh, kw), **attrs)
        return Val(float_activation(cx, y, fused), nchw=True)
    xs, xz = per_tensor(x, "the input")
    ys, yz = per_tensor(cx.out(), "the output")
    if (np.float32(xs), xz) != (np.float32(ys), yz):
        raise Unsupported("a quantized pool's input and output must have the same scale and zero point")
    clamp = clamp_attrs(fused, ys, yz, x.dtype)
    if kind == "avg":
        return Val(cx.call("qnn.avg_pool2d", data, pool_size=(kh, kw), **attrs, **clamp), nchw=True)
    y = cx.call("nn.max_pool2d", data, pool_size=(kh, kw), **attrs)
    if clamp["clamp_min"] is not None or clamp["clamp_max"] is not None:
        y = cx.call("clip", y, a_min=clamp["clamp_min"], a_max=clamp["clamp_max"])
    return Val(y, nchw=True)


@_conv("AVERAGE_POOL_2D")
def _avg_pool(cx: OpContext) -> Any:
    return _pool(cx, "avg")


@_conv("MAX_POOL_2D")
def _max_pool(cx: OpContext) -> Any:
    return _pool(cx, "max")


@_conv("SOFTMAX")
def _softmax(cx: OpContext) -> Any:
    cx.need(1, 1)
    x, y = cx.tensor(0), cx.out()
    beta = float(cx.option("Beta", 1.0))
    data = cx.nhwc(0)
    if not _is_quant(cx):
        if x.dtype != "float32":
            raise Unsupported(f"a {x.type_name} input is not supported")
        if beta != 1.0:
            data = cx.call("multiply", data, np.array(beta, np.float32))
        return cx.call("nn.softmax", data, axis=-1)
    if x.dtype not in ("int8", "uint8", "int16") or y.dtype != x.dtype:
        raise Unsupported(f"a {x.type_name} softmax to {y.type_name} is not supported yet (int8, uint8 and int16 "
                          "to themselves are)")
    xs, _ = per_tensor(x, "the input")
    ys, yz = per_tensor(y, "the output")
    if x.dtype == "int16":
        return _softmax16(cx, data, xs, ys, yz, beta)
    lo = -128 if y.dtype == "int8" else 0
    if yz != lo or np.float32(ys) != np.float32(1 / 256):
        raise Unsupported(f"a {y.type_name} softmax's output must have scale 1/256 and zero point {lo} (TFLite's), "
                          f"got {ys} and {yz}")
    try:
        table = softmax_exp_table(xs, beta)
    except ValueError as exc:
        raise Unsupported(str(exc)) from None
    return cx.call("qnn.fixed_softmax", data, table, axis=-1)


def _softmax16(cx: OpContext, data: Any, xs: float, ys: float, yz: int, beta: float) -> Any:
    """TensorFlow Lite Micro's ``SoftmaxInt16`` (``qnn.softmax16``): the output's zero point 0 and scale
    1/32768 within 0.1% (``TF_LITE_ENSURE_NEAR``), the input multiplier of ``scale x beta / (10 / 65535)``."""
    if yz != 0 or abs(np.float32(ys) - np.float32(1 / 32768)) > np.float32(0.001) * np.float32(1 / 32768):
        raise Unsupported(f"an INT16 softmax's output must have scale 1/32768 and zero point 0 (TFLite's), got "
                          f"{ys} and {yz}")
    try:
        mult, shift = softmax16_params(xs, beta)
    except ValueError as exc:
        raise Unsupported(str(exc)) from None
    return cx.call("qnn.softmax16", data, softmax16_luts(), axis=-1, multiplier=mult, shift=shift)
