"""TFLite converters of the indexing, resizing and tensor-making operators: GATHER,
RESIZE_NEAREST_NEIGHBOR, RESIZE_BILINEAR, SHAPE, FILL, ZEROS_LIKE, CAST, ARG_MAX, ARG_MIN.

Resizes compute their source positions at import, with TFLite's arithmetic (float32 scales and
coordinates; the integer ``scale_10`` arithmetic of ``ResizeBilinearInteger`` for int8 and int16), and
gather with ``take``; they read a channels-first value directly and keep it channels-first.
RESIZE_BILINEAR of float32 and uint8 is ``reference_ops::ResizeBilinear`` operation by operation
(``in * (1 - dy) * (1 - dx)`` and the three other terms, summed in the kernel's order; uint8 adds 0.5
and truncates): each float32 operation is computed in float64 and rounded to float32, which gives the
float32 result exactly and leaves the C compiler no multiply-add to contract into an FMA, so the
results equal LiteRT's bit for bit. int8 and int16 are ``ResizeBilinearInteger`` (TensorFlow Lite
Micro's): int64 sums of 10-bit weights, divided by 2**20 rounding half away from zero (TFLite's
default double rounding, not ``TFLITE_SINGLE_ROUNDING``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plait.frontend.tflite_context import OpContext, Unsupported, Val, registrar
from plait.frontend.tflite_ops_shape import axis_of, check_dtypes, const_ints, same_quant
from plait.ir.types import TensorType
from plait.relay.expr import Constant, Expr
from plait.relay.infer import infer_expr

CONVERTERS: dict[str, Callable[[OpContext], Any]] = {}
F32 = np.float32


_conv = registrar(CONVERTERS)


def constant(value: np.ndarray) -> Expr:
    c = Constant(np.ascontiguousarray(value))
    infer_expr(c)
    return c


# ---- gather -------------------------------------------------------------------------------------


@_conv("GATHER")
def _gather(cx: OpContext) -> Any:
    """TFLite GATHER (``gather.cc``): ``params[B..., P..., indices[B..., I...], R...]`` along ``Axis``
    with ``BatchDims`` leading batch dimensions (``batch_dims <= axis``); int32 or int64 indices."""
    cx.need(2, 2)
    check_dtypes(cx, [0])
    same_quant(cx, [0])
    x, idx = cx.tensor(0), cx.tensor(1)
    if idx.dtype not in ("int32", "int64"):
        raise Unsupported(f"GATHER's indices must be int32 or int64, got {idx.type_name}")
    rank, irank = len(x.shape), len(idx.shape)
    axis = axis_of(cx.option("Axis", 0), rank)
    b = cx.option("BatchDims", 0)
    b = b + irank if b < 0 else b
    if not 0 <= b <= min(axis, irank) or x.shape[:b] != idx.shape[:b]:
        raise Unsupported(f"batch_dims {cx.option('BatchDims', 0)} does not fit axis {axis} and the shapes "
                          f"{list(x.shape)} and {list(idx.shape)}")
    c = cx.const(1)
    if c is not None and (np.any(c < 0) or np.any(c >= x.shape[axis])):
        raise Unsupported(f"GATHER index out of range for dimension {axis} of size {x.shape[axis]}")
    data, ind = cx.nhwc(0), cx.nhwc(1)
    if b == 0:
        return cx.call("take", data, ind, axis=axis)
    # batch_dims > 0: bring the axis next to the batch dims, gather_nd with one-entry index tuples,
    # then move the dims between batch and axis back in front of the gathered ones
    front = list(range(b)) + [axis] + [d for d in range(b, rank) if d != axis]
    if front != list(range(rank)):
        data = cx.call("transpose", data, axes=tuple(front))
    ind = cx.call("reshape", ind, newshape=tuple(idx.shape) + (1,))
    y = cx.call("gather_nd", data, ind, batch_dims=b)  # [B, I, P(b..axis-1), R]
    n_i, n_p = irank - b, axis - b
    if n_p:
        order = (list(range(b)) + list(range(b + n_i, b + n_i + n_p)) + list(range(b, b + n_i))
                 + list(range(b + n_i + n_p, b + n_i + rank - b - 1)))
        y = cx.call("transpose", y, axes=tuple(order))
    return y


# ---- resizing -----------------------------------------------------------------------------------


def _resize_setup(cx: OpContext) -> tuple[Val, tuple[int, int], int, int, bool, bool]:
    cx.need(2, 2)
    x = cx.tensor(0)
    if len(x.shape) != 4:
        raise Unsupported(f"expected a 4-D NHWC input, got {list(x.shape)}")
    size = const_ints(cx, 1, "the output size")
    if len(size) != 2 or min(size) < 1:
        raise Unsupported(f"the output size must be 2 positive ints, got {size}")
    align, half = bool(cx.option("AlignCorners", False)), bool(cx.option("HalfPixelCenters", False))
    if align and half:
        raise Unsupported("align_corners and half_pixel_centers together (TFLite refuses them)")
    v = cx.val(0)
    return v, (x.shape[1], x.shape[2]), size[0], size[1], align, half


def nearest_indices(n_in: int, n_out: int, align: bool, half: bool) -> np.ndarray:
    """``GetNearestNeighbor`` of every output position (float32 arithmetic)."""
    scale = F32(n_in - 1) / F32(n_out - 1) if align and n_out > 1 else F32(n_in) / F32(n_out)
    pos = (np.arange(n_out, dtype=F32) + F32(0.5 if half else 0.0)) * scale
    idx = np.sign(pos) * np.floor(np.abs(pos) + F32(0.5)) if align else np.floor(pos)
    idx = np.minimum(idx.astype(np.int64), n_in - 1)
    return (np.maximum(idx, 0) if half else idx).astype(np.int32)


@_conv("RESIZE_NEAREST_NEIGHBOR")
def _resize_nearest(cx: OpContext) -> Any:
    """TFLite RESIZE_NEAREST_NEIGHBOR (``reference_ops::ResizeNearestNeighbor``), every dtype."""
    check_dtypes(cx, [0], ("float32", "int8", "uint8", "int16", "int32", "int64"))
    same_quant(cx, [0])
    v, (h, w), oh, ow, align, half = _resize_setup(cx)
    ah, aw = (2, 3) if v.nchw else (1, 2)
    y = cx.call("take", v.expr, nearest_indices(h, oh, align, half), axis=ah)
    return Val(cx.call("take", y, nearest_indices(w, ow, align, half), axis=aw), v.nchw)


def bilinear_float_taps(n_in: int, n_out: int, align: bool, half: bool) -> tuple[np.ndarray, ...]:
    """(i0, i1, 1 - d, d) per output position: ``ComputeInterpolationValues`` in float32."""
    scale = F32(n_in - 1) / F32(n_out - 1) if align and n_out > 1 else F32(n_in) / F32(n_out)
    pos = np.arange(n_out, dtype=F32)
    v = (pos + F32(0.5)) * scale - F32(0.5) if half else pos * scale
    i0 = np.maximum(np.floor(v).astype(np.int64), 0)
    i1 = np.minimum(np.ceil(v).astype(np.int64), n_in - 1)
    d = (v - i0.astype(F32)).astype(F32)
    return i0.astype(np.int32), i1.astype(np.int32), (F32(1) - d).astype(F32), d


def bilinear_int_taps(n_in: int, n_out: int, align: bool, half: bool) -> tuple[np.ndarray, ...]:
    """(i0, i1, 1024 - d, d) per output position: ``ComputeInterpolationValuesInteger`` (C division
    truncates toward zero)."""
    if align and n_out > 1:
        scale = ((1 << 10) * (n_in - 1) + (n_out - 1) // 2) // (n_out - 1)
    else:
        scale = ((1 << 10) * n_in + n_out // 2) // n_out
    pos = np.arange(n_out, dtype=np.int64)
    v = pos * scale + scale // 2 - (1 << 9) if half else pos * scale
    i0 = np.maximum(np.trunc(v / 1024).astype(np.int64), 0)
    i1 = np.minimum(np.trunc((v + 1023) / 1024).astype(np.int64), n_in - 1)
    d = v - 1024 * i0
    return i0.astype(np.int32), i1.astype(np.int32), 1024 - d, d


@_conv("RESIZE_BILINEAR")
def _resize_bilinear(cx: OpContext) -> Any:
    """TFLite RESIZE_BILINEAR: float32 and uint8 ``reference_ops::ResizeBilinear``, int8 and int16
    ``reference_ops::ResizeBilinearInteger`` (TensorFlow Lite Micro's)."""
    check_dtypes(cx, [0], ("float32", "int8", "uint8", "int16"))
    same_quant(cx, [0])
    v, (h, w), oh, ow, align, half = _resize_setup(cx)
    dtype = cx.tensor(0).dtype
    ah, aw = (2, 3) if v.nchw else (1, 2)
    integer = dtype in ("int8", "int16")
    taps = bilinear_int_taps if integer else bilinear_float_taps
    y0, y1, wy0, wy1 = taps(h, oh, align, half)
    x0, x1, wx0, wx1 = taps(w, ow, align, half)

    def col(a: np.ndarray, axis: int) -> np.ndarray:
        shape = [1, 1, 1, 1]
        shape[axis] = a.size
        return a.reshape(shape)

    rows = [cx.call("take", v.expr, y0, axis=ah), cx.call("take", v.expr, y1, axis=ah)]
    corners = [(cx.call("take", rows[r], xs, axis=aw), r, c) for c, xs in enumerate((x0, x1)) for r in (0, 1)]
    wy, wx = (wy0, wy1), (wx0, wx1)
    if integer:
        total: Expr | None = None
        for g, r, c in corners:
            term = cx.call("multiply", cx.call("cast", g, dtype="int64"), col(wy[r], ah) * col(wx[c], aw))
            total = term if total is None else cx.call("add", total, term)
        # (o + (o > 0 ? 2**19 : -2**19)) / 2**20, truncated: half away from zero
        mag = cx.call("right_shift", cx.call("add", cx.call("abs", total), np.array(1 << 19, np.int64)),
                      np.array(20, np.int64))
        return Val(cx.call("cast", cx.call("multiply", cx.call("sign", total), mag), dtype=dtype), v.nchw)
    # float32 operations, each computed in float64 and rounded to float32: the float32 result exactly
    # (float64 has more than 2 * 24 + 2 bits), and no multiply-add the C compiler could contract
    def f32(op: str, a: Expr, b: Expr | np.ndarray) -> Expr:
        b64 = b.astype(np.float64) if isinstance(b, np.ndarray) else cx.call("cast", b, dtype="float64")
        return cx.call("cast", cx.call(op, cx.call("cast", a, dtype="float64"), b64), dtype="float32")

    acc: Expr | None = None
    for g, r, c in corners:  # (y0, x0), (y1, x0), (y0, x1), (y1, x1): the kernel's order
        term = f32("multiply", f32("multiply", g, col(wy[r], ah)), col(wx[c], aw))
        acc = term if acc is None else f32("add", acc, term)
    if dtype == "float32":
        return Val(acc, v.nchw)
    acc = f32("add", acc, np.array(0.5, F32))  # uint8: + 0.5, then static_cast (truncation)
    return Val(cx.call("cast", acc, dtype=dtype), v.nchw)


# ---- making tensors -----------------------------------------------------------------------------


@_conv("SHAPE")
def _shape(cx: OpContext) -> Any:
    """TFLite SHAPE: the input's (static) shape as ``OutType`` (int32 or int64)."""
    cx.need(1, 1)
    y = cx.out()
    if y.dtype not in ("int32", "int64"):
        raise Unsupported(f"SHAPE to {y.type_name} is not supported (int32 and int64 are)")
    return constant(np.array(cx.tensor(0).shape, y.dtype))


@_conv("FILL")
def _fill(cx: OpContext) -> Any:
    """TFLite FILL: inputs (dims, value); constant dims; the value's dtype (and quantization)."""
    cx.need(2, 2)
    check_dtypes(cx, [1], ("float32", "int8", "int16", "int32", "int64", "bool", "uint8"))
    same_quant(cx, [1])
    dims = const_ints(cx, 0, "the dims")
    if len(cx.tensor(1).shape) != 0 and cx.tensor(1).shape != (1,):
        raise Unsupported(f"FILL's value must be a scalar, got shape {list(cx.tensor(1).shape)}")
    if tuple(dims) != tuple(cx.out().shape):
        raise Unsupported(f"dims {dims} differ from the output's shape {list(cx.out().shape)}")
    c = cx.const(1)
    if c is not None:
        return constant(np.full(tuple(dims), c.reshape(-1)[0], c.dtype))
    value = cx.call("reshape", cx.nhwc(1), newshape=())
    return cx.call("broadcast_to", value, shape=tuple(dims))


@_conv("ZEROS_LIKE")
def _zeros_like(cx: OpContext) -> Any:
    """TFLite ZEROS_LIKE: zeros of the input's shape and dtype (raw zeros, even when quantized)."""
    cx.need(1, 1)
    check_dtypes(cx, [0], ("float32", "int8", "int16", "int32", "int64", "uint8", "bool"))
    x = cx.tensor(0)
    return constant(np.zeros(x.shape, x.dtype))


_CAST_DTYPES = ("float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "bool")


@_conv("CAST")
def _cast(cx: OpContext) -> Any:
    """TFLite CAST (``static_cast`` of each element; quantization parameters ignored, as TFLite does)."""
    cx.need(1, 1)
    x, y = cx.tensor(0), cx.out()
    for t in (x, y):
        if t.dtype not in _CAST_DTYPES:
            raise Unsupported(f"CAST of {x.type_name} to {y.type_name} is not supported")
    v = cx.val(0)
    if x.dtype == y.dtype:
        return v
    return Val(cx.call("cast", v.expr, dtype=y.dtype), v.nchw)


@_conv("ARG_MAX", "ARG_MIN")
def _arg_min_max(cx: OpContext) -> Any:
    """TFLite ARG_MAX / ARG_MIN (``reference_ops::ArgMinMax``): the first index of the extreme value
    along a constant axis, as ``OutputType`` (int32 or int64)."""
    cx.need(2, 2)
    x, y = cx.tensor(0), cx.out()
    if x.dtype not in ("float32", "int8", "uint8", "int16", "int32", "int64"):
        raise Unsupported(f"{cx.op.opcode} of {x.type_name} is not supported")
    if y.dtype not in ("int32", "int64"):
        raise Unsupported(f"{cx.op.opcode} to {y.type_name} is not supported (int32 and int64 are)")
    axes = const_ints(cx, 1, "the axis")
    if len(axes) != 1:
        raise Unsupported(f"{cx.op.opcode} takes one axis, got {axes}")
    axis = axis_of(axes[0], len(x.shape))
    op = "argmax" if cx.op.opcode == "ARG_MAX" else "argmin"
    r = cx.call(op, cx.nhwc(0), axis=axis, keepdims=False)
    t = r.checked_type
    if isinstance(t, TensorType) and t.dtype != y.dtype:
        r = cx.call("cast", r, dtype=y.dtype)
    return r
