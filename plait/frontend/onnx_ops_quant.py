"""ONNX converters of the quantization operators, onto the ``qnn`` operators (docs/quantization.md).

- ``QuantizeLinear`` / ``DequantizeLinear`` -> ``qnn.quantize`` / ``qnn.dequantize`` (scale and
  zero point as given, constants or run-time values). A dequantize of a constant (an int8 weight) is
  never folded: the weight stays int8 and the QDQ pass (plait.relay.passes.qdq) turns the float
  operator it feeds into an integer one.
- ``DynamicQuantizeLinear`` -> the range, scale and zero point as ONNX Runtime computes them, then
  ``qnn.quantize``.
- ``QLinearConv``, ``QLinearMatMul``, ``ConvInteger``, ``MatMulInteger`` -> ``qnn.conv2d`` /
  ``qnn.matmul`` (+ int32 bias ``add``, + ``qnn.requantize`` with QLinearConv's float32 scale
  ``x_scale * w_scale / y_scale``) when their zero points are constants, one per tensor (as ONNX
  Runtime requires); otherwise they are expanded into float arithmetic, as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait.frontend.onnx_node import NodeContext, Unsupported, plait_dtype, value_type
from plait.frontend.onnx_ops_nn import _spatial_rank, conv_window
from plait.frontend.onnx_registry import Converter, converters
from plait.relay.expr import Expr

QUANT_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")


def _zero(cx: NodeContext, i: int, dtype: str) -> Expr:
    """Zero point input ``i``, or a 0 of ``dtype`` shaped as the scale (input 1) when it is not given."""
    if cx.has(i):
        return cx.expr(i)
    shape = cx.shape(1) if cx.attr("block_size", 0) else ()
    if not all(isinstance(d, int) for d in shape):
        raise Unsupported("blocked quantization with a scale of unknown shape and no zero point not supported")
    return cx.constant(np.zeros(shape), dtype)


def _axis(cx: NodeContext) -> dict[str, int]:
    """``axis`` (normalized when the scale is per axis or blocked; unused otherwise) and ``block_size``."""
    block = cx.attr("block_size", 0)
    per_axis = block or (cx.ndim(1) == 1 and cx.shape(1)[0] != 1)
    axis = cx.axis(cx.attr("axis", 1), cx.ndim(0)) if per_axis else 1
    return {"axis": axis, "block_size": block} if block else {"axis": axis}


def dequantize_linear(cx: NodeContext) -> object:
    x = cx.dtype(0)
    if x not in QUANT_DTYPES:
        raise Unsupported(f"dequantizing {x} not supported")
    y = cx.call("qnn.dequantize", cx.expr(0), cx.expr(1), _zero(cx, 2, x), **_axis(cx))
    out = plait_dtype(cx.attr("output_dtype")) if cx.attr("output_dtype", 0) else cx.dtype(1)
    return cx.cast(y, out)


def quantize_linear(cx: NodeContext) -> object:
    if cx.has(2):
        out = cx.dtype(2)
    else:
        out = plait_dtype(cx.attr("output_dtype")) if cx.attr("output_dtype", 0) else "uint8"
    if out not in QUANT_DTYPES:
        raise Unsupported(f"quantizing to {out} not supported")
    x = cx.expr(0) if cx.dtype(0) != "float64" else cx.cast(cx.expr(0), "float32")
    return cx.call("qnn.quantize", x, cx.expr(1), _zero(cx, 2, out), **_axis(cx))


# ---- float expansion (run-time zero points) -------------------------------------------------------


def _dq_float(cx: NodeContext, x: Expr, scale: Expr, zp: Expr | None, axis: int) -> Expr:
    return cx.call("qnn.dequantize", x, scale, zp if zp is not None else cx.constant(0, value_type(x).dtype),
                   axis=axis if value_type(x).ndim else 1)


def _q_float(cx: NodeContext, y: Expr, scale: Expr, zp: Expr, axis: int) -> Expr:
    return cx.call("qnn.quantize", y, scale, zp, axis=axis if value_type(y).ndim else 1)


def _scalar_zp(cx: NodeContext, i: int, what: str) -> int | None:
    """Zero point input ``i`` as one int (0 if absent), or None when it is not a constant or differs
    between channels."""
    if not cx.has(i):
        return 0
    if not cx.is_const(i):
        return None
    v = np.unique(cx.const(i, what).reshape(-1))
    return int(v[0]) if v.size == 1 else None


def _output_scale(cx: NodeContext, xs: int, ws: int, ys: int) -> Expr | None:
    """QLinearConv's per-channel float32 ``x_scale * w_scale / y_scale`` (in that order); None when
    the scales are not float32."""
    if any(cx.dtype(i) != "float32" for i in (xs, ws, ys)):
        return None
    w = cx.expr(ws)
    if value_type(w).ndim == 0:
        w = cx.reshape(w, (1,))
    xy = [cx.reshape(cx.expr(i), ()) if value_type(cx.expr(i)).ndim else cx.expr(i) for i in (xs, ys)]
    return cx.call("divide", cx.call("multiply", xy[0], w), xy[1])


def _requantize(cx: NodeContext, acc: Expr, scale: Expr, zy: int, out: str, axis: int) -> Expr:
    n = value_type(scale).shape[0]
    return cx.call("qnn.requantize", acc, scale, zero_point=zy, out_dtype=out, axis=axis if n != 1 else 1)


# ---- QLinearMatMul, MatMulInteger ---------------------------------------------------------------


def qlinear_matmul(cx: NodeContext) -> object:
    za, zb, zy = _scalar_zp(cx, 2, "a_zero_point"), _scalar_zp(cx, 5, "b_zero_point"), _scalar_zp(cx, 7, "y_zero_point")
    scale = _output_scale(cx, 1, 4, 6)
    if None in (za, zb, zy) or scale is None or cx.dtype(7) not in ("int8", "uint8"):
        a = _dq_float(cx, cx.expr(0), cx.expr(1), cx.expr(2), 0)
        b = _dq_float(cx, cx.expr(3), cx.expr(4), cx.expr(5), -1)
        return _q_float(cx, cx.call("nn.matmul", a, b), cx.expr(6), cx.expr(7), -1)
    acc = cx.call("qnn.matmul", cx.expr(0), cx.expr(3), a_zero_point=za, b_zero_point=zb)
    return _requantize(cx, acc, scale, zy, cx.dtype(7), -1)


def matmul_integer(cx: NodeContext) -> object:
    za, zb = _scalar_zp(cx, 2, "a_zero_point"), _scalar_zp(cx, 3, "b_zero_point")
    if None not in (za, zb):
        return cx.call("qnn.matmul", cx.expr(0), cx.expr(1), a_zero_point=za, b_zero_point=zb)
    a, b = cx.cast(cx.expr(0), "int32"), cx.cast(cx.expr(1), "int32")
    if cx.has(2):
        zpa = cx.cast(cx.expr(2), "int32")
        if value_type(zpa).ndim == 1 and cx.ndim(0) > 1:
            zpa = cx.reshape(zpa, (-1, 1))
        a = cx.call("subtract", a, zpa)
    if cx.has(3):
        b = cx.call("subtract", b, cx.cast(cx.expr(3), "int32"))
    return cx.call("nn.matmul", a, b)


# ---- QLinearConv, ConvInteger ---------------------------------------------------------------------


def _conv_window(cx: NodeContext) -> dict[str, Any]:
    """The 2-D window attributes of a Conv-like node whose inputs 0 and 1 are data and weight."""
    nsp = _spatial_rank(cx, "convolution")
    if nsp != 2:
        raise Unsupported(f"{nsp}-D integer convolution not supported")
    return conv_window(cx, nsp)


def _inner(cx: NodeContext, x: Any, w: Any, b: Any = None) -> NodeContext:
    """The node seen as a Conv of (x, w, b) (same attributes), for the Conv converter's checks."""
    return NodeContext(cx.node, [x, w, b], cx.attrs, cx.version, cx.opset, cx.meta, cx._constant,
                       budget=cx.budget)


def _conv_float(cx: NodeContext, x: Expr, w: Expr, bias: Expr | None) -> Expr:
    from plait.frontend.onnx_ops_nn import conv

    return conv(_inner(cx, x, w, bias))


def conv_integer(cx: NodeContext) -> object:
    zx, zw = _scalar_zp(cx, 2, "x_zero_point"), _scalar_zp(cx, 3, "w_zero_point")
    if None not in (zx, zw):
        window = _conv_window(_inner(cx, cx.value(0), cx.value(1)))
        return cx.call("qnn.conv2d", cx.expr(0), cx.expr(1), input_zero_point=zx, kernel_zero_point=zw, **window)
    # exact in float64: products of 8-bit values summed far below 2**53
    x, w = cx.cast(cx.expr(0), "float64"), cx.cast(cx.expr(1), "float64")
    if cx.has(2):
        x = cx.call("subtract", x, cx.cast(cx.expr(2), "float64"))
    if cx.has(3):
        zpw = cx.cast(cx.expr(3), "float64")
        if value_type(zpw).ndim == 1:
            zpw = cx.reshape(zpw, (-1, 1, 1, 1))
        w = cx.call("subtract", w, zpw)
    return cx.cast(_conv_float(cx, x, w, None), "int32")


def qlinear_conv(cx: NodeContext) -> object:
    zx, zw, zy = _scalar_zp(cx, 2, "x_zero_point"), _scalar_zp(cx, 5, "w_zero_point"), _scalar_zp(cx, 7, "y_zero_point")
    scale = _output_scale(cx, 1, 4, 6)
    if None in (zx, zw, zy) or scale is None or cx.ndim(0) != 4:
        x = _dq_float(cx, cx.expr(0), cx.expr(1), cx.expr(2), 1)
        w = _dq_float(cx, cx.expr(3), cx.expr(4), cx.expr(5), 0)
        bias = None
        if cx.has(8):
            bias = cx.call("multiply", cx.cast(cx.expr(8), "float32"),
                           cx.call("multiply", cx.cast(cx.expr(1), "float32"), cx.cast(cx.expr(4), "float32")))
        return _q_float(cx, _conv_float(cx, x, w, bias), cx.expr(6), cx.expr(7), 1)
    window = _conv_window(_inner(cx, cx.value(0), cx.value(3), cx.inputs[8] if cx.has(8) else None))
    acc = cx.call("qnn.conv2d", cx.expr(0), cx.expr(3), input_zero_point=zx, kernel_zero_point=zw, **window)
    if cx.has(8):
        acc = cx.call("add", acc, cx.reshape(cx.expr(8), (-1, 1, 1)))
    return _requantize(cx, acc, scale, zy, cx.dtype(7), 1)


# ---- DynamicQuantizeLinear --------------------------------------------------------------------


def dynamic_quantize_linear(cx: NodeContext) -> object:
    """ONNX Runtime's arithmetic (``GetQuantizationParameter`` in onnxruntime/core/util/qmath.h): the
    range of ``x`` widened to hold 0, ``scale = (max - min) / 255`` (1 when the range is empty),
    ``zero_point = round_half_even(clip(-min / scale, 0, 255))``, then ``qnn.quantize``. Outputs
    (y uint8, scale, zero_point)."""
    x = cx.expr(0)  # float32: ONNX's schema (the importer checks it)
    axes = tuple(range(cx.ndim(0)))
    zero = cx.constant(0.0, "float32")
    lo = cx.call("minimum", cx.call("min", x, axis=axes, keepdims=False), zero)
    hi = cx.call("maximum", cx.call("max", x, axis=axes, keepdims=False), zero)
    scale = cx.call("where", cx.call("equal", hi, lo), cx.constant(1.0, "float32"),
                    cx.call("divide", cx.call("subtract", hi, lo), cx.constant(255.0, "float32")))
    zp = cx.call("clip", cx.call("subtract", zero, cx.call("divide", lo, scale)), a_min=0.0, a_max=255.0)
    zp = cx.cast(cx.call("round", zp), "uint8")
    return [cx.call("qnn.quantize", x, scale, zp), scale, zp]


_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")

CONVERTERS: list[Converter] = [
    *converters(["DequantizeLinear"], dequantize_linear, attrs=("axis", "block_size", "output_dtype"),
                ops=("qnn.dequantize", "cast")),
    *converters(["QuantizeLinear"], quantize_linear,
                attrs=("axis", "block_size", "output_dtype", "saturate", "precision"), ops=("qnn.quantize", "cast")),
    *converters(["QLinearMatMul"], qlinear_matmul,
                ops=("qnn.matmul", "qnn.requantize", "multiply", "divide", "reshape", "nn.matmul", "qnn.dequantize",
                     "qnn.quantize")),
    *converters(["DynamicQuantizeLinear"], dynamic_quantize_linear, min_version=11,
                ops=("min", "max", "minimum", "maximum", "where", "equal", "divide", "subtract", "clip", "round",
                     "cast", "qnn.quantize")),
    *converters(["MatMulInteger"], matmul_integer, ops=("qnn.matmul", "nn.matmul", "subtract", "cast", "reshape")),
    *converters(["ConvInteger"], conv_integer, attrs=_CONV_ATTRS,
                ops=("qnn.conv2d", "nn.conv2d", "subtract", "cast", "reshape")),
    *converters(["QLinearConv"], qlinear_conv, attrs=_CONV_ATTRS,
                ops=("qnn.conv2d", "qnn.requantize", "add", "multiply", "divide", "reshape", "nn.conv2d",
                     "qnn.dequantize", "qnn.quantize", "cast")),
]
