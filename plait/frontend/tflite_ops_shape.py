"""TFLite converters of the shape and data-movement operators: CONCATENATION, SPLIT, SPLIT_V, PACK,
UNPACK, PAD, PADV2, MIRROR_PAD, TRANSPOSE, STRIDED_SLICE, SLICE.

They move values without arithmetic, so every dtype is exact. Quantized tensors (int8, uint8, int16)
keep their values: TensorFlow Lite Micro's kernels copy bytes and require (CONCATENATION) or assume
the inputs and outputs to share scale and zero point, so differing quantization is refused rather
than silently copied (LiteRT's requantizing uint8 CONCATENATION is not followed). Shapes, axes,
paddings, begins, ends and strides must be constants. A channels-first value stays channels-first
through CONCATENATION (when every input is) and is read directly by TRANSPOSE; the others read the
file's layout.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from plait.frontend.tflite_context import OpContext, TO_NCHW, TO_NHWC, Unsupported, Val, registrar
from plait.frontend.tflite_quant import ACTIVATIONS, QUANT_DTYPES
from plait.relay.expr import Expr

CONVERTERS: dict[str, Callable[[OpContext], Any]] = {}
INT_MIN = -(2**31)


_conv = registrar(CONVERTERS)


# ---- shared -------------------------------------------------------------------------------------

MOVE_DTYPES = ("float32", "int8", "uint8", "int16", "int32", "int64", "bool")


def check_dtypes(cx: OpContext, inputs: Sequence[int], dtypes: Sequence[str] = MOVE_DTYPES) -> None:
    """Every listed input and every output has one dtype among ``dtypes``."""
    ts = [cx.tensor(i) for i in inputs] + [cx.out(j) for j in range(len(cx.op.outputs))]
    first = ts[0]
    for t in ts:
        if t is None:
            continue
        if t.dtype not in dtypes:
            raise Unsupported(f"{cx.op.opcode} of {t.type_name} ({t.label()}) is not supported")
        if t.dtype != first.dtype:
            raise Unsupported(f"{t.label()} is {t.type_name}, {first.label()} {first.type_name}: "
                              f"{cx.op.opcode} does not change the dtype")


def same_quant(cx: OpContext, inputs: Sequence[int]) -> None:
    """A quantized movement: every listed input and every output has the same scale and zero point
    (TFLM copies bytes; it requires this of int8 CONCATENATION)."""
    ts = [cx.tensor(i) for i in inputs] + [cx.out(j) for j in range(len(cx.op.outputs))]
    if ts[0].dtype not in QUANT_DTYPES:
        return
    params = []
    for t in ts:
        q = t.quant
        if q is None or not q.per_tensor:
            what = "no quantization parameters" if q is None else "per-channel quantization"
            raise Unsupported(f"{t.label()} has {what}; a quantized {cx.op.opcode} needs per-tensor ones")
        params.append((np.float32(q.scale[0]), int(q.zero_point[0])))
    for t, p in zip(ts[1:], params[1:]):
        if p != params[0]:
            raise Unsupported(f"{t.label()} has scale {float(p[0])} and zero point {p[1]}, {ts[0].label()} "
                              f"{float(params[0][0])} and {params[0][1]}: a quantized {cx.op.opcode} that "
                              f"requantizes is not supported (TFLite Micro requires equal quantization)")


def const_ints(cx: OpContext, i: int, what: str) -> list[int]:
    """A constant integer input as a flat list."""
    v = cx.need_const(i, what)
    if v.dtype.kind not in "iu":
        raise Unsupported(f"{what} (input {i}) must be integers, got {v.dtype}")
    return [int(a) for a in v.reshape(-1)]


def axis_of(axis: int, rank: int, what: str = "axis") -> int:
    if not -rank <= axis < max(rank, 1):
        raise Unsupported(f"{what} {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def slice_axis(cx: OpContext, x: Expr, axis: int, start: int, stop: int, stride: int = 1) -> Expr:
    """``x[start:stop:stride]`` along ``axis``, with indices already in range (stop -1: before 0)."""
    end = stop if stop >= 0 else INT_MIN
    return cx.call("strided_slice", x, begin=(start,), end=(end,), strides=(stride,), axes=(axis,))


def _shape(e: Expr) -> tuple[int, ...]:
    return tuple(int(d) for d in e.checked_type.shape)


# ---- joining and splitting ----------------------------------------------------------------------


@_conv("CONCATENATION")
def _concatenation(cx: OpContext) -> Any:
    """TFLite CONCATENATION (``reference_ops::Concatenation``): no fused activation (TFLM requires
    NONE), quantized inputs with the output's scale and zero point."""
    n = cx.n_inputs
    if n < 1:
        raise Unsupported("expected at least 1 input")
    check_dtypes(cx, range(n))
    same_quant(cx, range(n))
    fused = cx.option("FusedActivationFunction", 0)
    if fused != 0:
        raise Unsupported(f"a fused activation ({ACTIVATIONS.get(fused, fused)}) on CONCATENATION is not supported")
    rank = len(cx.out().shape)
    axis = axis_of(cx.option("Axis", 0), rank)
    vals = [cx.val(i) for i in range(n)]
    if rank == 4 and all(v.nchw for v in vals):
        return Val(cx.call("concatenate", *[v.expr for v in vals], axis=TO_NCHW.index(axis)), nchw=True)
    return cx.call("concatenate", *[cx.nhwc(v) for v in vals], axis=axis)


def _pieces(cx: OpContext, x: Expr, axis: int, sizes: Sequence[int]) -> list[Expr]:
    out, start = [], 0
    for s in sizes:
        out.append(slice_axis(cx, x, axis, start, start + s))
        start += s
    return out


@_conv("SPLIT")
def _split(cx: OpContext) -> Any:
    """TFLite SPLIT: inputs (axis, value), ``NumSplits`` equal pieces."""
    cx.need(2, 2)
    check_dtypes(cx, [1])
    same_quant(cx, [1])
    shape = cx.tensor(1).shape
    (axis,) = const_ints(cx, 0, "the axis")
    axis = axis_of(axis, len(shape))
    k = cx.option("NumSplits", len(cx.op.outputs))
    if k < 1 or shape[axis] % k or k != len(cx.op.outputs):
        raise Unsupported(f"cannot split dimension {shape[axis]} into {k} equal pieces for "
                          f"{len(cx.op.outputs)} outputs")
    return _pieces(cx, cx.nhwc(1), axis, [shape[axis] // k] * k)


@_conv("SPLIT_V")
def _split_v(cx: OpContext) -> Any:
    """TFLite SPLIT_V: inputs (value, size_splits, axis); one size may be -1 (the rest)."""
    cx.need(3, 3)
    check_dtypes(cx, [0])
    same_quant(cx, [0])
    shape = cx.tensor(0).shape
    sizes = const_ints(cx, 1, "the split sizes")
    (axis,) = const_ints(cx, 2, "the axis")
    axis = axis_of(axis, len(shape))
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = shape[axis] - (sum(sizes) + 1)
    if any(s < 0 for s in sizes) or sum(sizes) != shape[axis] or len(sizes) != len(cx.op.outputs):
        raise Unsupported(f"split sizes {sizes} do not split dimension {shape[axis]} into "
                          f"{len(cx.op.outputs)} outputs")
    return _pieces(cx, cx.nhwc(0), axis, sizes)


@_conv("PACK")
def _pack(cx: OpContext) -> Any:
    """TFLite PACK: ``ValuesCount`` inputs of one shape stacked along a new axis ``Axis``."""
    n = cx.n_inputs
    check_dtypes(cx, range(n))
    same_quant(cx, range(n))
    shape = cx.tensor(0).shape
    axis = axis_of(cx.option("Axis", 0), len(shape) + 1)
    if any(cx.tensor(i).shape != shape for i in range(n)):
        raise Unsupported("PACK's inputs must all have the same shape")
    one = shape[:axis] + (1,) + shape[axis:]
    parts = [cx.call("reshape", cx.nhwc(i), newshape=one) for i in range(n)]
    return parts[0] if n == 1 else cx.call("concatenate", *parts, axis=axis)


@_conv("UNPACK")
def _unpack(cx: OpContext) -> Any:
    """TFLite UNPACK: ``Num`` outputs, the slices of the input along ``Axis`` (that axis removed)."""
    cx.need(1, 1)
    check_dtypes(cx, [0])
    same_quant(cx, [0])
    shape = cx.tensor(0).shape
    axis = axis_of(cx.option("Axis", 0), len(shape))
    if shape[axis] != len(cx.op.outputs):
        raise Unsupported(f"UNPACK of a dimension of {shape[axis]} into {len(cx.op.outputs)} outputs")
    rest = shape[:axis] + shape[axis + 1:]
    x = cx.nhwc(0)
    return [cx.call("reshape", p, newshape=rest) for p in _pieces(cx, x, axis, [1] * shape[axis])]


# ---- padding ------------------------------------------------------------------------------------


def _paddings(cx: OpContext, rank: int) -> list[tuple[int, int]]:
    p = cx.need_const(1, "the paddings")
    if p.dtype.kind not in "iu" or p.shape != (rank, 2):
        raise Unsupported(f"the paddings must be integers of shape [{rank}, 2], got {p.dtype}{list(p.shape)}")
    pads = [(int(a), int(b)) for a, b in p]
    if any(min(a, b) < 0 for a, b in pads):
        raise Unsupported(f"negative paddings {pads} are not supported")
    return pads


@_conv("PAD", "PADV2")
def _pad(cx: OpContext) -> Any:
    """TFLite PAD / PADV2 (``reference_ops::Pad``): PAD fills with 0, or the output's zero point when
    quantized; PADV2 with its third input (a constant scalar of the input's dtype)."""
    cx.need(2, 3 if cx.op.opcode == "PADV2" else 2)
    check_dtypes(cx, [0], ("float32", "int8", "uint8", "int16", "int32", "int64"))
    same_quant(cx, [0, 2] if cx.tensor(2) is not None else [0])  # PADV2's value: the output's quantization
    x, y = cx.tensor(0), cx.out()
    pads = _paddings(cx, len(x.shape))
    value: float = 0.0
    if y.dtype in QUANT_DTYPES and y.quant is not None:
        value = float(y.quant.zero_point[0])
    if cx.op.opcode == "PADV2" and cx.tensor(2) is not None:
        v = cx.need_const(2, "the padding value")
        if v.size != 1 or v.dtype != np.dtype(x.dtype):
            raise Unsupported(f"the padding value must be one {x.dtype}, got {v.dtype}{list(v.shape)}")
        value = float(v.reshape(-1)[0])
    widths = tuple(b for b, _ in pads) + tuple(e for _, e in pads)  # every begin, then every end
    return cx.call("nn.pad", cx.nhwc(0), pad_width=widths, pad_value=value)


def mirror_indices(n: int, before: int, after: int, symmetric: bool) -> np.ndarray:
    """Source index of every padded position along an axis of ``n``: REFLECT mirrors about the edge
    element, SYMMETRIC about the edge (TFLite MIRROR_PAD)."""
    p = np.arange(-before, n + after)
    lo = -p - 1 if symmetric else -p
    hi = 2 * n - 1 - p if symmetric else 2 * (n - 1) - p
    return np.where(p < 0, lo, np.where(p >= n, hi, p)).astype(np.int32)


@_conv("MIRROR_PAD")
def _mirror_pad(cx: OpContext) -> Any:
    """TFLite MIRROR_PAD, ``Mode`` REFLECT (0; pads <= size - 1) or SYMMETRIC (1; pads <= size)."""
    cx.need(2, 2)
    check_dtypes(cx, [0], ("float32", "int8", "uint8", "int16", "int32", "int64"))
    same_quant(cx, [0])
    shape = cx.tensor(0).shape
    pads = _paddings(cx, len(shape))
    mode = cx.option("Mode", 0)
    if mode not in (0, 1):
        raise Unsupported(f"unknown mirror padding mode {mode}")
    symmetric = mode == 1
    x = cx.nhwc(0)
    for axis, (b, e) in enumerate(pads):
        if b == 0 and e == 0:
            continue
        most = shape[axis] if symmetric else shape[axis] - 1
        if max(b, e) > most:
            raise Unsupported(f"{'SYMMETRIC' if symmetric else 'REFLECT'} padding of ({b}, {e}) on dimension "
                              f"{axis} of size {shape[axis]}: at most {most}")
        x = cx.call("take", x, mirror_indices(shape[axis], b, e, symmetric), axis=axis)
    return x


# ---- transposing and slicing --------------------------------------------------------------------


@_conv("TRANSPOSE")
def _transpose(cx: OpContext) -> Any:
    """TFLite TRANSPOSE with a constant permutation; a channels-first input is permuted directly."""
    cx.need(2, 2)
    check_dtypes(cx, [0])
    same_quant(cx, [0])
    rank = len(cx.tensor(0).shape)
    perm = [axis_of(p, rank, "permutation entry") for p in const_ints(cx, 1, "the permutation")]
    if sorted(perm) != list(range(rank)):
        raise Unsupported(f"{perm} is not a permutation of {rank} dimensions")
    v = cx.val(0)
    if v.nchw:
        return cx.call("transpose", v.expr, axes=tuple(TO_NHWC[p] for p in perm))
    return cx.call("transpose", v.expr, axes=tuple(perm)) if perm != list(range(rank)) else v.expr


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(v, hi))


def _start(begin: int, stride: int, size: int, masked: bool) -> int:
    """``StridedSliceStartForAxis``."""
    start = begin + size if begin < 0 else begin
    start = _clamp(start, 0, size) if stride > 0 else _clamp(start, -1, size - 1)
    if masked:
        start = 0 if stride > 0 else size - 1
    return start


def _stop(end: int, stride: int, size: int, start: int, masked: bool, shrink: bool, offset: bool) -> int:
    """``StridedSliceEndForAxis``."""
    if shrink:
        return start if start >= size else start + 1
    if offset:
        end += start
    end = end + size if end < 0 else end
    end = _clamp(end, 0, size) if stride > 0 else _clamp(end, -1, size - 1)
    if masked:
        end = size if stride > 0 else -1
    return end


def _dense_spec(cx: OpContext, shape: tuple[int, ...], n: int) -> list[tuple[str, int]]:
    """LiteRT's expansion of the ellipsis and new axes: each dense axis as ('new', -1),
    ('full', input axis) or ('spec', index into begin/end/strides)."""
    ell, new = cx.option("EllipsisMask", 0), cx.option("NewAxisMask", 0)
    adds = sum(1 for i in range(n) if not (ell >> i) & 1 and (new >> i) & 1)
    if bin(ell).count("1") > 1:
        raise Unsupported("more than one ellipsis in STRIDED_SLICE")
    out: list[tuple[str, int]] = []
    axis = 0
    for i in range(n):
        if (ell >> i) & 1:
            k = len(shape) - sum(1 for j in range(n) if j != i and not (new >> j) & 1 and not (ell >> j) & 1)
            if k < 1:
                raise Unsupported("an ellipsis that stands for no dimension is not supported")
            out += [("full", axis + j) for j in range(k)]
            axis += k
        elif (new >> i) & 1:
            out.append(("new", -1))
        else:
            out.append(("spec", i))
            axis += 1
    while axis < len(shape):
        out.append(("full", axis))
        axis += 1
    if axis != len(shape) or len(out) != len(shape) + adds:
        raise Unsupported(f"the slice spec of {n} entries does not fit an input of rank {len(shape)}")
    return out


@_conv("STRIDED_SLICE")
def _strided_slice(cx: OpContext) -> Any:
    """TFLite STRIDED_SLICE (LiteRT's ``strided_slice.cc`` and ``StridedSlice{Start,End}ForAxis``):
    begin/end masks, shrink_axis, offset (end relative to begin), ellipsis and new axes expanded as
    LiteRT does (TFLite Micro ignores those two masks)."""
    cx.need(4, 4)
    check_dtypes(cx, [0])
    same_quant(cx, [0])
    shape = cx.tensor(0).shape
    begin = const_ints(cx, 1, "begin")
    end = const_ints(cx, 2, "end")
    strides = const_ints(cx, 3, "strides")
    n = len(begin)
    if len(end) != n or len(strides) != n:
        raise Unsupported(f"begin, end and strides have {n}, {len(end)} and {len(strides)} entries")
    if any(s == 0 for s in strides):
        raise Unsupported("a stride of 0")
    bm, em, sm = cx.option("BeginMask", 0), cx.option("EndMask", 0), cx.option("ShrinkAxisMask", 0)
    offset = bool(cx.option("Offset", False))
    x = cx.nhwc(0)
    out_shape: list[int] = []
    axis = 0
    for kind, i in _dense_spec(cx, shape, n):
        if kind == "new":
            out_shape.append(1)
            continue
        size = shape[axis]
        if kind == "spec":
            s = strides[i]
            start = _start(begin[i], s, size, bool((bm >> i) & 1))
            shrink = bool((sm >> i) & 1)
            stop = _stop(end[i], s, size, start, bool((em >> i) & 1), shrink, offset)
            count = max(0, -(-(stop - start) // s)) if s > 0 else max(0, -(-(start - stop) // -s))
            if count == 0 or (shrink and not 0 <= start < size):
                raise Unsupported(f"the slice of dimension {axis} is empty (plait has no empty tensors)")
            if (start, count, s) != (0, size, 1):
                x = slice_axis(cx, x, axis, start, stop, s)
            if not shrink:
                out_shape.append(count)
        else:
            out_shape.append(size)
        axis += 1
    want = cx.out().shape
    if tuple(out_shape) != tuple(want):
        raise Unsupported(f"the slice computes shape {out_shape}, the file declares {list(want)}")
    return cx.call("reshape", x, newshape=tuple(want)) if _shape(x) != tuple(want) else x


@_conv("SLICE")
def _slice(cx: OpContext) -> Any:
    """TFLite SLICE: constant begin and size (size -1: to the end)."""
    cx.need(3, 3)
    check_dtypes(cx, [0])
    same_quant(cx, [0])
    shape = cx.tensor(0).shape
    begin = const_ints(cx, 1, "begin")
    size = const_ints(cx, 2, "size")
    if len(begin) != len(shape) or len(size) != len(shape):
        raise Unsupported(f"begin {begin} and size {size} must have one entry per dimension of {list(shape)}")
    x = cx.nhwc(0)
    for axis, (b, s) in enumerate(zip(begin, size)):
        s = shape[axis] - b if s == -1 else s
        if b < 0 or s < 0 or b + s > shape[axis]:
            raise Unsupported(f"begin {b} and size {s} do not fit dimension {axis} of size {shape[axis]}")
        if (b, s) != (0, shape[axis]):
            x = slice_axis(cx, x, axis, b, b + s)
    return x
