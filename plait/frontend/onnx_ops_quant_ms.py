"""ONNX converters of the ``com.microsoft`` operators ONNX Runtime's quantizer writes (QOperator form).

- ``QGemm`` (quantized output, ``alpha`` 1, no ``transA``) -> ``qnn.dense`` / ``qnn.matmul`` + int32
  bias + ``qnn.requantize`` (the scale ``a_scale * b_scale / y_scale`` in float32, as QLinearConv's);
- ``QLinearAdd``, ``QLinearMul``, ``QLinearSigmoid``, ``QLinearLeakyRelu``, ``QLinearSoftmax``,
  ``QLinearConcat``, ``QLinearAveragePool``, ``QLinearGlobalAveragePool``: ONNX Runtime computes
  these in float between a dequantize and a quantize (lookup tables of float results, or float
  sums); so does plait: ``qnn.dequantize``, the float operator, ``qnn.quantize``. Results may differ
  from ONNX Runtime's by one step where a float result lands on a rounding tie.

Only these operators of the ``com.microsoft`` domain are accepted; ``channels_last`` layouts are not.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from plait.frontend.onnx_node import NodeContext, Unsupported, value_type
from plait.frontend.onnx_ops_nn import avg_pool
from plait.frontend.onnx_ops_quant import _requantize, _scalar_zp
from plait.frontend.onnx_registry import Converter, converters
from plait.op.qnn_elem import (
    add_attrs, global_avg_pool_scale, leaky_relu32, lookup_table, mlas_logistic, mul_attrs, softmax_multiplier,
    softmax_table,
)
from plait.relay.expr import Expr
from plait.tir.dtype import int_range

MS = "com.microsoft"


def _dq(cx: NodeContext, x: int, s: int, z: int) -> Expr:
    """Input ``x`` dequantized with scale input ``s`` and zero point input ``z`` (optional)."""
    zp = cx.expr(z) if cx.has(z) else cx.constant(0, cx.dtype(x))
    return cx.call("qnn.dequantize", cx.expr(x), cx.expr(s), zp, axis=1)


def _q(cx: NodeContext, y: Expr, s: int, z: int, out: str) -> Expr:
    zp = cx.expr(z) if cx.has(z) else cx.constant(0, out)
    return cx.call("qnn.quantize", y, cx.expr(s), zp, axis=1)


def _no_channels_last(cx: NodeContext) -> None:
    if cx.attr("channels_last", 0):
        raise Unsupported("channels_last not supported")


def _one(shape: tuple) -> bool:
    return all(isinstance(d, int) for d in shape) and int(np.prod(shape)) == 1


def _binary(op: str) -> Callable[[NodeContext], object]:
    """QLinearAdd / QLinearMul: ``qnn.add`` / ``qnn.mul`` (MLAS's arithmetic) when the scales and zero
    points are constants, one per tensor, and the shapes are equal or one operand has one element;
    otherwise dequantize, the float operator, quantize."""

    def convert(cx: NodeContext) -> object:
        dt = cx.dtype(0)
        p = (_scalar(cx, 1, "A_scale", "float32"), _scalar(cx, 2, "A_zero_point", dt),
             _scalar(cx, 4, "B_scale", "float32"), _scalar(cx, 5, "B_zero_point", dt),
             _scalar(cx, 6, "C_scale", "float32"), _scalar(cx, 7, "C_zero_point", dt))
        sa, sb = cx.shape(0), cx.shape(3)
        fits = sa == sb or _one(sb) and len(sb) <= len(sa) or _one(sa) and len(sa) <= len(sb)
        if None in p or not fits or cx.dtype(3) != dt:
            return _q(cx, cx.call(op, _dq(cx, 0, 1, 2), _dq(cx, 3, 4, 5)), 6, 7, dt)
        if op == "add":
            return cx.call("qnn.add", cx.expr(0), cx.expr(3), **add_attrs(*p))  # type: ignore[arg-type]
        return cx.call("qnn.mul", cx.expr(0), cx.expr(3), **mul_attrs(*p))  # type: ignore[arg-type]

    return convert


def _unary(fn: Callable[[NodeContext, Expr], Expr]) -> Callable[[NodeContext], object]:
    """X, X_scale, X_zero_point, Y_scale, Y_zero_point: ``Q(fn(DQ(X)))``."""

    def convert(cx: NodeContext) -> object:
        _no_channels_last(cx)
        return _q(cx, fn(cx, _dq(cx, 0, 1, 2)), 3, 4, cx.dtype(0))

    return convert


def _scalar(cx: NodeContext, i: int, what: str, dtype: str) -> float | int | None:
    """Input ``i`` as one constant number (a zero point that is not given is 0); None when it is
    computed at run time or has several values."""
    if not cx.has(i):
        return 0 if dtype != "float32" else None
    if not cx.is_const(i) or cx.dtype(i) != dtype or np.size(cx.const(i, what)) != 1:
        return None
    v = cx.const(i, what).reshape(())
    return float(v) if dtype == "float32" else int(v)


def _table_params(cx: NodeContext) -> tuple[float, int, float, int] | None:
    """(x_scale, x_zero_point, y_scale, y_zero_point) of a QLinear unary operator when all are
    constants, one per tensor (then ONNX Runtime computes it with a table built once)."""
    dt = cx.dtype(0)
    p = (_scalar(cx, 1, "X_scale", "float32"), _scalar(cx, 2, "X_zero_point", dt),
         _scalar(cx, 3, "Y_scale", "float32"), _scalar(cx, 4, "Y_zero_point", dt))
    return None if None in p else p  # type: ignore[return-value]


def _lookup(fn: Callable[[NodeContext], Callable[[np.ndarray], np.ndarray]],
            float_op: Callable[[NodeContext, Expr], Expr]) -> Callable[[NodeContext], object]:
    """QLinearSigmoid / QLinearLeakyRelu: ``qnn.lookup`` of a table computed now as ONNX Runtime
    computes it; with run-time scales, the float form."""

    def convert(cx: NodeContext) -> object:
        _no_channels_last(cx)
        p = _table_params(cx)
        if p is None:
            return _unary(float_op)(cx)
        dt = cx.dtype(0)
        table = lookup_table(fn(cx), dt, p[0], int(p[1]), p[2], int(p[3]), dt)
        return cx.call("qnn.lookup", cx.expr(0), cx.constant(table))

    return convert


def _softmax(cx: NodeContext, x: Expr) -> Expr:
    nd = value_type(x).ndim
    axis = cx.axis(cx.attr("axis", -1), nd)
    if cx.attr("opset", 13) < 13 and axis != nd - 1:
        raise Unsupported("QLinearSoftmax with opset < 13 semantics on an axis other than the last not supported")
    return cx.call("nn.softmax", x, axis=axis)


def qlinear_softmax(cx: NodeContext) -> object:
    """``qnn.softmax`` (ONNX Runtime's table of exp) when the scales and the output zero point are
    constants and the softmax length is static; otherwise the float form."""
    p = _table_params(cx)
    nd = cx.ndim(0)
    axis = cx.axis(cx.attr("axis", -1), nd)
    n = cx.shape(0)[axis]
    if p is None or not isinstance(n, int) or n == 0:
        return _unary(_softmax)(cx)
    if cx.attr("opset", 13) < 13 and axis != nd - 1:
        raise Unsupported("QLinearSoftmax with opset < 13 semantics on an axis other than the last not supported")
    return cx.call("qnn.softmax", cx.expr(0), cx.constant(softmax_table(p[0], n)), axis=axis,
                   multiplier=softmax_multiplier(p[2]), zero_point=int(p[3]))


def _avg_pool(cx: NodeContext, x: Expr) -> Expr:
    attrs = {k: v for k, v in cx.attrs.items() if k != "channels_last"}
    inner = NodeContext(cx.node, [x], attrs, cx.version, cx.opset, cx.meta, cx._constant, budget=cx.budget)
    return avg_pool(inner)  # type: ignore[return-value]


def qlinear_avg_pool(cx: NodeContext) -> object:
    """ONNX Runtime computes QLinearAveragePool in float: the dequantized window summed, divided by the
    count, then ``nearbyint(y / y_scale + y_zero_point)`` saturated (its own rounding, the zero point
    added before it); so does plait."""
    _no_channels_last(cx)
    p = _table_params(cx)
    if p is None:
        return _unary(_avg_pool)(cx)
    dt = cx.dtype(0)
    lo, hi = int_range(dt)
    y = cx.call("divide", _avg_pool(cx, _dq(cx, 0, 1, 2)), cx.constant(np.float32(p[2]), "float32"))
    y = cx.call("round", cx.call("add", y, cx.constant(float(p[3]), "float32")))
    return cx.cast(cx.call("clip", y, a_min=float(lo), a_max=float(hi)), dt)


def _global_avg_pool(cx: NodeContext, x: Expr) -> Expr:
    if value_type(x).ndim != 4:
        raise Unsupported(f"QLinearGlobalAveragePool of a rank-{value_type(x).ndim} input not supported")
    return cx.call("nn.global_avg_pool2d", x)


def qlinear_global_avg_pool(cx: NodeContext) -> object:
    """MLAS's arithmetic when the scales and zero points are constants: the int32 sum over H, W minus
    ``H * W * x_zero_point``, requantized with ``x_scale / (y_scale * H * W)`` (qnn.requantize);
    otherwise dequantize, float pooling, quantize."""
    _no_channels_last(cx)
    p = _table_params(cx)
    shape = cx.shape(0)
    if p is None or len(shape) != 4 or not all(isinstance(d, int) for d in shape[2:]):
        return _unary(_global_avg_pool)(cx)
    count = int(shape[2] * shape[3])
    acc = cx.call("sum", cx.cast(cx.expr(0), "int32"), axis=(2, 3), keepdims=True)
    if p[1]:
        acc = cx.call("add", acc, cx.constant(np.array(-count * int(p[1]), np.int32)))
    scale = cx.constant(np.array(global_avg_pool_scale(p[0], p[2], count), np.float32))
    return cx.call("qnn.requantize", acc, scale, zero_point=int(p[3]), out_dtype=cx.dtype(0))


def qlinear_concat(cx: NodeContext) -> object:
    """Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input."""
    n = len(cx.inputs) - 2
    if n < 3 or n % 3:
        raise Unsupported(f"expected Y_scale, Y_zero_point and triples (X, X_scale, X_zero_point), got {len(cx.inputs)} "
                          "inputs")
    axis = cx.axis(cx.attr("axis"), cx.ndim(2))
    dt = cx.dtype(2)
    ys, yz = _scalar(cx, 0, "Y_scale", "float32"), _scalar(cx, 1, "Y_zero_point", dt)
    params = [(_scalar(cx, 3 + 3 * k, "X_scale", "float32"), _scalar(cx, 4 + 3 * k, "X_zero_point", dt))
              for k in range(n // 3)]
    constant = ys is not None and yz is not None and all(None not in p for p in params)
    if not constant or any(cx.dtype(2 + 3 * k) != dt for k in range(n // 3)):
        xs = [_dq(cx, 2 + 3 * k, 3 + 3 * k, 4 + 3 * k) for k in range(n // 3)]
        return _q(cx, cx.call("concatenate", *xs, axis=axis), 0, 1, dt)
    parts = []  # ONNX Runtime's QLinearConcat: each input through the table of Q(DQ(x)), or copied
    for k, (s, z) in enumerate(params):
        x = cx.expr(2 + 3 * k)
        if s != ys or z != yz:
            table = lookup_table(lambda v: v, dt, s, int(z), ys, int(yz), dt)  # type: ignore[arg-type]
            x = cx.call("qnn.lookup", x, cx.constant(table))
        parts.append(x)
    return cx.call("concatenate", *parts, axis=axis)


def qgemm(cx: NodeContext) -> object:
    """A, a_scale, a_zp, B, b_scale, b_zp, C (int32), y_scale, y_zp."""
    if not cx.has(7):
        raise Unsupported("QGemm with a float output (no y_scale) not supported")
    if cx.attr("transA", 0) or cx.attr("alpha", 1.0) != 1.0:
        raise Unsupported("QGemm with transA or alpha != 1 not supported")
    za, zb, zy = _scalar_zp(cx, 2, "a_zero_point"), _scalar_zp(cx, 5, "b_zero_point"), _scalar_zp(cx, 8, "y_zero_point")
    if None in (za, zb, zy) or any(cx.dtype(i) != "float32" for i in (1, 4, 7)):
        raise Unsupported("QGemm needs constant zero points (one per tensor) and float32 scales")
    op = "qnn.dense" if cx.attr("transB", 0) else "qnn.matmul"
    names = ("input_zero_point", "kernel_zero_point") if op == "qnn.dense" else ("a_zero_point", "b_zero_point")
    acc = cx.call(op, cx.expr(0), cx.expr(3), **{names[0]: za, names[1]: zb})
    if cx.has(6):
        acc = cx.call("add", acc, cx.expr(6))
    b_scale = cx.expr(4) if value_type(cx.expr(4)).ndim else cx.reshape(cx.expr(4), (1,))
    a_scale, y_scale = (cx.reshape(cx.expr(i), ()) if cx.ndim(i) else cx.expr(i) for i in (1, 7))
    scale = cx.call("divide", cx.call("multiply", a_scale, b_scale), y_scale)
    out = cx.dtype(8) if cx.has(8) else "uint8"
    return _requantize(cx, acc, scale, int(zy), out, 1)


_POOL = ("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides", "channels_last")


def _ms(op_types: list[str], fn: Callable[[NodeContext], object], **kw: object) -> list[Converter]:
    return converters(op_types, fn, domain=MS, **kw)  # type: ignore[arg-type]


_FLOAT = ("qnn.dequantize", "qnn.quantize")

CONVERTERS: list[Converter] = [
    *_ms(["QGemm"], qgemm, attrs=("alpha", "transA", "transB"),
         ops=("qnn.dense", "qnn.requantize", "qnn.matmul", "add", "multiply", "divide", "reshape")),
    *_ms(["QLinearAdd"], _binary("add"), ops=("qnn.add", "add") + _FLOAT),
    *_ms(["QLinearMul"], _binary("multiply"), ops=("qnn.mul", "multiply") + _FLOAT),
    *_ms(["QLinearSigmoid"], _lookup(lambda cx: mlas_logistic, lambda cx, x: cx.call("sigmoid", x)),
         ops=("qnn.lookup", "sigmoid") + _FLOAT),
    *_ms(["QLinearLeakyRelu"], _lookup(lambda cx: leaky_relu32(cx.attr("alpha", 0.01)),
                                       lambda cx, x: cx.call("nn.leaky_relu", x, alpha=cx.attr("alpha", 0.01))),
         attrs=("alpha",), ops=("qnn.lookup", "nn.leaky_relu") + _FLOAT),
    *_ms(["QLinearSoftmax"], qlinear_softmax, attrs=("axis", "opset"), ops=("qnn.softmax", "nn.softmax") + _FLOAT),
    *_ms(["QLinearConcat"], qlinear_concat, attrs=("axis",), ops=("concatenate", "qnn.lookup") + _FLOAT),
    *_ms(["QLinearAveragePool"], qlinear_avg_pool, attrs=_POOL,
         ops=("nn.avg_pool2d", "squeeze", "divide", "add", "round", "clip", "cast") + _FLOAT),
    *_ms(["QLinearGlobalAveragePool"], qlinear_global_avg_pool, attrs=("channels_last",),
         ops=("sum", "cast", "add", "qnn.requantize", "nn.global_avg_pool2d") + _FLOAT),
]
