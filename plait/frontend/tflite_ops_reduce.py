"""TFLite converters of reductions and normalizations: MEAN, SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD,
LOG_SOFTMAX, L2_NORMALIZATION.

Float32 as LiteRT's reference kernels define them (within the float tolerance: the summation order
differs): MEAN and SUM over the constant ``axis`` input (negative axes counted from the end, repeated
axes once), ``KeepDims``; LOG_SOFTMAX along the last axis; L2_NORMALIZATION ``x / max(sqrt(sum(x *
x)), 1e-6)`` along the last axis. REDUCE_MAX and REDUCE_MIN of a quantized tensor are exact (the input
and the output share their quantization, as TensorFlow Lite Micro requires); int8 and int16 MEAN and SUM
are TensorFlow Lite Micro's ``QuantizedMeanOrSum``, bit for bit (uint8: the same arithmetic, LiteRT's
reference kernel, bit for bit); int8 L2_NORMALIZATION and LOG_SOFTMAX
are TensorFlow Lite Micro's kernels, bit for bit (``qnn.l2_normalize``, ``qnn.fixed_log_softmax``); the
other quantized forms are refused, naming the operator. Reductions compute in the file's layout (NHWC).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plait.frontend.tflite_context import OpContext, Unsupported, registrar
from plait.frontend.tflite_quant import multipliers, per_tensor, requantize
from plait.op.qnn_log_softmax import MAX_ROW, OUTPUT_SCALE, OUTPUT_ZERO_POINT, log_softmax_params

CONVERTERS: dict[str, Callable[[OpContext], Any]] = {}

_conv = registrar(CONVERTERS)

_REDUCE = {"MEAN": "mean", "SUM": "sum", "REDUCE_MAX": "max", "REDUCE_MIN": "min", "REDUCE_PROD": "prod"}
_EXACT = ("REDUCE_MAX", "REDUCE_MIN")  # quantized: no arithmetic on the values
_MEAN_SUM = {"MEAN": ("int8", "int16", "uint8"), "SUM": ("int8", "int16", "uint8")}  # QuantizedMeanOrSum


def _axes(cx: OpContext, rank: int) -> tuple[int, ...]:
    t = cx.tensor(1)
    if t is not None and 0 in t.shape:  # an empty axes tensor (no buffer bytes): nothing reduced
        return ()
    axes = cx.need_const(1, "the axes").reshape(-1)
    if axes.dtype.kind not in "iu":
        raise Unsupported(f"the axes are {axes.dtype}, expected int32")
    out = []
    for a in axes.tolist():
        if not -rank <= a < rank:
            raise Unsupported(f"axis {a} is out of range for a rank-{rank} input")
        if a % rank not in out:
            out.append(a % rank)
    return tuple(sorted(out))


@_conv(*_REDUCE)
def _reduce(cx: OpContext) -> Any:
    cx.need(2, 2)
    x, y = cx.tensor(0), cx.out()
    op = cx.op.opcode
    quant = x.dtype != "float32"
    if quant:
        if x.dtype not in (("int8", "uint8", "int16") if op in _EXACT else _MEAN_SUM.get(op, ())):
            raise Unsupported(f"{op} of {x.type_name} is not supported yet")
        if y.dtype != x.dtype:
            raise Unsupported(f"{op}: the output is {y.type_name}, the input {x.type_name}")
        if op in _EXACT and per_tensor(x, "the input") != per_tensor(y, "the output"):
            raise Unsupported(f"{op}: the output's quantization must be the input's")
    rank = len(x.shape)
    axes = _axes(cx, rank)
    keep = bool(cx.option("KeepDims", False))
    data = cx.nhwc(0)
    if not axes and not (quant and op in _MEAN_SUM):  # no axis: the input as it is
        return data
    if quant and op in _MEAN_SUM:
        out = _quant_mean_or_sum(cx, data, axes, keep)
    else:
        out = cx.call(_REDUCE[op], data, axis=axes, keepdims=keep)
    if tuple(y.shape) != tuple(int(d) for d in out.checked_type.shape):
        raise Unsupported(f"the output's shape {list(y.shape)} is not the reduction's "
                          f"{list(out.checked_type.shape)}")
    return out


def _quant_mean_or_sum(cx: OpContext, data: Any, axes: tuple[int, ...], keep: bool) -> Any:
    """TensorFlow Lite Micro's ``QuantizedMeanOrSum``: the int32 sum of ``x - zi``, then
    ``MultiplyByQuantizedMultiplier`` by ``si / so`` (MEAN: the multiplier divided by the count ``n``
    through ``(m << k) / n``, ``k = floor(log2 n)`` clamped, and the shift less ``k``) plus ``zo``, clamped."""
    x, y = cx.tensor(0), cx.out()
    si, zi = per_tensor(x, "the input")
    so, zo = per_tensor(y, "the output")
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    (m,), (s,) = multipliers(si, np.array([1.0]), so)
    m, s = int(m), int(s)
    if cx.op.opcode == "MEAN" and n > 0:
        k = min(n.bit_length() - 1, 32, 31 + s)
        m, s = (m << k) // n, s - k
    acc = cx.call("sum", cx.call("cast", data, dtype="int32"), axis=axes, keepdims=keep)
    if zi and n:
        acc = cx.call("subtract", acc, np.array(zi * n, np.int32))
    return requantize(cx, acc, np.array([m]), np.array([s]), zo, y.dtype, 0, so, axis=-1)


def _last_axis_float(cx: OpContext) -> tuple[Any, Any]:
    cx.need(1, 1)
    x = cx.tensor(0)
    if x.dtype != "float32":
        raise Unsupported(f"{cx.op.opcode} of {x.type_name} is not supported yet")
    if not x.shape:
        raise Unsupported(f"{cx.op.opcode} of a scalar")
    return x, cx.nhwc(0)


@_conv("LOG_SOFTMAX")
def _log_softmax(cx: OpContext) -> Any:
    if cx.tensor(0).dtype == "int8":
        return _quant_log_softmax(cx)
    _, data = _last_axis_float(cx)
    return cx.call("nn.log_softmax", data, axis=-1)


def _quant_log_softmax(cx: OpContext) -> Any:
    """TensorFlow Lite Micro's int8 ``LogSoftmax``: ``qnn.fixed_log_softmax`` (plait/op/qnn_log_softmax.py)
    with its table and scalings prepared from the input scale. Its output is in steps of 16/256 with zero
    point 127, which the file must say (TensorFlow Lite Micro checks it)."""
    cx.need(1, 1)
    x, y = cx.tensor(0), cx.out()
    if y.dtype != "int8":
        raise Unsupported(f"LOG_SOFTMAX of INT8 to {y.type_name}")
    xs, _ = per_tensor(x, "the input")
    so, zo = per_tensor(y, "the output")
    if np.float32(so) != np.float32(OUTPUT_SCALE) or zo != OUTPUT_ZERO_POINT:
        raise Unsupported(f"an int8 LOG_SOFTMAX writes steps of 16/256 with zero point 127; the output has "
                          f"scale {so:g} and zero point {zo}")
    if not x.shape:
        raise Unsupported("LOG_SOFTMAX of a scalar")
    depth = int(x.shape[-1])
    if depth > MAX_ROW:
        raise Unsupported(f"an int8 LOG_SOFTMAX over {depth} values can overflow TFLite's int32 sum of exps "
                          f"(at most {MAX_ROW})")
    try:
        table, attrs = log_softmax_params(xs)
    except ValueError as exc:
        raise Unsupported(str(exc)) from None
    return cx.call("qnn.fixed_log_softmax", cx.nhwc(0), table, axis=-1, **attrs)


@_conv("L2_NORMALIZATION")
def _l2_normalization(cx: OpContext) -> Any:
    if cx.option("FusedActivationFunction", 0):
        raise Unsupported("a fused activation on L2_NORMALIZATION is not supported")
    if cx.tensor(0).dtype == "int8":
        return _quant_l2_normalization(cx)
    _, data = _last_axis_float(cx)
    norm = cx.call("sqrt", cx.call("sum", cx.call("multiply", data, data), axis=(-1,), keepdims=True))
    return cx.call("divide", data, cx.call("maximum", norm, np.array(1e-6, np.float32)))



def _quant_l2_normalization(cx: OpContext) -> Any:
    """TensorFlow Lite Micro's int8 ``L2Normalization``: ``qnn.l2_normalize`` (plait/op/qnn_norm.py). Its
    output is in steps of 1/128 with zero point 0, which the file must say (LiteRT checks it; TensorFlow
    Lite Micro assumes it)."""
    cx.need(1, 1)
    x, y = cx.tensor(0), cx.out()
    _, zi = per_tensor(x, "the input")
    if y.dtype != "int8":
        raise Unsupported(f"L2_NORMALIZATION of INT8 to {y.type_name}")
    so, zo = per_tensor(y, "the output")
    if (so, zo) != (1 / 128, 0):
        raise Unsupported(f"an int8 L2_NORMALIZATION writes steps of 1/128 with zero point 0; the output has "
                          f"scale {so:g} and zero point {zo}")
    if not x.shape:
        raise Unsupported("L2_NORMALIZATION of a scalar")
    depth = int(x.shape[-1])
    if depth * 255 * 255 > (1 << 31) - 1:
        raise Unsupported(f"an int8 L2_NORMALIZATION over {depth} values can overflow TFLite's int32 sum")
    return cx.call("qnn.l2_normalize", cx.nhwc(0), input_zero_point=zi, axis=-1)
