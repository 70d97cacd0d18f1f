"""ONNX converters: shapes and data movement (Shape, Reshape, Slice, Gather, Pad, Expand, ...).

Inputs that plait's operators take as attributes (Reshape's shape, Slice's starts...) must be
known at import time: constants, folded subgraphs, or symbolic shapes where noted.
"""

from __future__ import annotations

import math

import numpy as np

from plait.frontend.onnx_fold import has_sym, sym_result, sym_values
from plait.frontend.onnx_node import NodeContext, SymTensor, Unsupported, plait_dtype
from plait.frontend.onnx_registry import converter
from plait.ir.types import ANY_DIM, DTYPES

INT64_MAX = 2**63 - 1


def _axis(axis: int, ndim: int, what: str = "axis") -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise Unsupported(f"{what} {axis} out of range for rank {ndim}")
    return axis + ndim if axis < 0 else axis


# ---- shapes -----------------------------------------------------------------------------------


@converter("Shape", attrs=("start", "end"))
def shape(cx: NodeContext) -> object:
    dims = list(cx.shape(0))
    n = len(dims)
    start, end = cx.attr("start", 0), cx.attr("end", n)
    start = min(max(start + n if start < 0 else start, 0), n)
    end = min(max(end + n if end < 0 else end, 0), n)
    return sym_result(np.array(dims[start:end] if start < end else [], dtype=object).reshape(-1))


@converter("Size")
def size(cx: NodeContext) -> object:
    dims = cx.shape(0)
    if all(isinstance(d, int) for d in dims):
        return np.array(math.prod(dims), dtype=np.int64)
    return SymTensor(np.array(ANY_DIM, dtype=object))


@converter("Reshape", attrs=("shape", "allowzero"))
def reshape(cx: NodeContext) -> object:
    target = tuple(cx.attr("shape")) if cx.version < 5 else cx.sym_ints(1, "shape")
    in_shape = cx.shape(0)
    if isinstance(cx.value(0), SymTensor) and has_sym(cx):
        vals = sym_values(cx, 0)
        dims = [vals.shape[i] if d == 0 else d for i, d in enumerate(target)]
        return sym_result(vals.reshape([int(d) for d in dims]), cx.dtype(0))
    new: list[int] = []
    for i, d in enumerate(target):
        if isinstance(d, str):
            same = i < len(in_shape) and in_shape[i] == d and d != ANY_DIM
            new.append(0 if same else -1)
        else:
            new.append(d)
    if new.count(-1) > 1:
        raise Unsupported(f"shape {list(target)} has more than one unknown dimension")
    if cx.attr("allowzero", 0) and 0 in target:
        if any(d == 0 and not (i < len(in_shape) and in_shape[i] == 0) for i, d in enumerate(target)):
            raise Unsupported("allowzero=1 with a zero in the shape")
    return cx.reshape(cx.expr(0), new)


@converter("Flatten", attrs=("axis",))
def flatten(cx: NodeContext) -> object:
    return cx.call("flatten", cx.expr(0), axis=cx.attr("axis", 1))


def _axes_input(cx: NodeContext, index: int, attr: str = "axes", since: int = 13) -> tuple[int, ...] | None:
    """Axes given as an attribute (old versions) or as an optional constant input (new ones)."""
    if cx.version < since:
        v = cx.attr(attr, None)
        return None if v is None else tuple(v)
    if not cx.has(index):
        return None
    return cx.ints(index, attr)


@converter("Squeeze", attrs=("axes",))
def squeeze(cx: NodeContext) -> object:
    axes = _axes_input(cx, 1)
    if has_sym(cx):
        vals = sym_values(cx, 0)
        nd = vals.ndim
        axes_n = tuple(a % nd for a in axes) if axes else tuple(i for i in range(nd) if vals.shape[i] == 1)
        return sym_result(np.squeeze(vals, axis=axes_n), cx.dtype(0))
    return cx.call("squeeze", cx.expr(0), axes=axes)


@converter("Unsqueeze", attrs=("axes",))
def unsqueeze(cx: NodeContext) -> object:
    axes = _axes_input(cx, 1)
    if axes is None:
        raise Unsupported("input 'axes' is required")
    if has_sym(cx):
        vals = sym_values(cx, 0)
        nd = vals.ndim + len(axes)
        return sym_result(np.expand_dims(vals, tuple(sorted(a % nd for a in axes))), cx.dtype(0))
    return cx.call("expand_dims", cx.expr(0), axes=axes)


@converter("Transpose", attrs=("perm",))
def transpose(cx: NodeContext) -> object:
    perm = cx.attr("perm", None)
    return cx.call("transpose", cx.expr(0), axes=None if perm is None else tuple(perm))


@converter("Concat", attrs=("axis",))
def concat(cx: NodeContext) -> object:
    axis = cx.attr("axis", 1 if cx.version < 4 else None)
    if axis is None:
        raise Unsupported("attribute 'axis' is required")
    idx = [i for i in range(len(cx.inputs)) if cx.has(i)]
    if has_sym(cx):
        return sym_result(np.concatenate([sym_values(cx, i) for i in idx], axis=axis), cx.dtype(idx[0]))
    return cx.call("concatenate", *[cx.expr(i) for i in idx], axis=axis)


@converter("Split", attrs=("axis", "split", "num_outputs"))
def split(cx: NodeContext) -> object:
    axis = cx.attr("axis", 0)
    dim = cx.shape(0)[_axis(axis, cx.ndim(0))]
    if cx.version < 13 and "split" in cx.attrs:
        sections = tuple(cx.attr("split"))
    elif cx.version >= 13 and cx.has(1):
        sections = cx.ints(1, "split")
    else:
        n = cx.attr("num_outputs", len(cx.node.output))
        if not isinstance(dim, int):
            raise Unsupported("splitting a symbolic dimension into equal parts")
        if "num_outputs" in cx.attrs:
            chunk = -(-dim // n)
            sections = tuple(min(chunk, max(dim - chunk * i, 0)) for i in range(n))
        else:
            if dim % n:
                raise Unsupported(f"dimension {dim} does not split into {n} equal parts")
            sections = (dim // n,) * n
    tup = cx.call("split", cx.expr(0), sections=sections, axis=axis)
    return [cx.get(tup, i) for i in range(len(sections))]


@converter("Slice", attrs=("starts", "ends", "axes"))
def slice_(cx: NodeContext) -> object:
    if cx.version < 10:
        starts, ends = tuple(cx.attr("starts")), tuple(cx.attr("ends"))
        axes = tuple(cx.attr("axes")) if "axes" in cx.attrs else None
        steps = None
    else:
        starts, ends = cx.ints(1, "starts"), cx.ints(2, "ends")
        axes = cx.ints(3, "axes") if cx.has(3) else None
        steps = cx.ints(4, "steps") if cx.has(4) else None
    if has_sym(cx):
        vals = sym_values(cx, 0)
        index = [slice(None)] * vals.ndim
        for k, a in enumerate(axes if axes is not None else range(len(starts))):
            index[a % vals.ndim] = slice(starts[k], ends[k], steps[k] if steps else 1)
        return sym_result(vals[tuple(index)], cx.dtype(0))
    return cx.call("strided_slice", cx.expr(0), begin=starts, end=ends, strides=steps, axes=axes)


@converter("Gather", attrs=("axis",))
def gather(cx: NodeContext) -> object:
    axis = cx.attr("axis", 0)
    if has_sym(cx):
        vals = sym_values(cx, 0)
        a = _axis(axis, vals.ndim)
        idx = cx.const(1, "indices").astype(np.int64)
        idx = np.where(idx < 0, idx + vals.shape[a], idx)
        return sym_result(np.take(vals, idx, axis=a), cx.dtype(0))
    return cx.call("take", cx.expr(0), cx.expr(1), axis=axis)


@converter("GatherElements", attrs=("axis",))
def gather_elements(cx: NodeContext) -> object:
    return cx.call("gather_elements", cx.expr(0), cx.expr(1), axis=cx.attr("axis", 0))


@converter("GatherND", attrs=("batch_dims",))
def gather_nd(cx: NodeContext) -> object:
    return cx.call("gather_nd", cx.expr(0), cx.expr(1), batch_dims=cx.attr("batch_dims", 0))


@converter("Expand")
def expand(cx: NodeContext) -> object:
    target = list(cx.sym_ints(1, "shape"))
    in_shape = cx.shape(0)
    for j in range(1, len(target) + 1):
        d = target[-j]
        if isinstance(d, str):
            if j <= len(in_shape) and in_shape[-j] == d and d != ANY_DIM:
                target[-j] = 1  # broadcasting keeps the input's (symbolic) dim
            else:
                raise Unsupported(f"shape {target} has a dimension unknown at import time")
    return cx.call("broadcast_to", cx.expr(0), shape=tuple(target))


@converter("Tile")
def tile(cx: NodeContext) -> object:
    return cx.call("tile", cx.expr(0), reps=cx.ints(1, "repeats"))


@converter("Pad", attrs=("mode", "pads", "value"))
def pad(cx: NodeContext) -> object:
    mode = cx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise Unsupported(f"mode '{mode}' not supported")
    nd = cx.ndim(0)
    if cx.version < 11:
        pads, value = tuple(cx.attr("pads")), float(cx.attr("value", 0.0))
    else:
        pads = cx.ints(1, "pads")
        value = 0.0
        if cx.has(2):
            v = cx.const(2, "constant_value").reshape(-1)
            value = float(v[0]) if v.size else 0.0
        if cx.has(3):
            axes = [_axis(a, nd) for a in cx.ints(3, "axes")]
            full = [0] * (2 * nd)
            for k, a in enumerate(axes):
                full[a], full[a + nd] = pads[k], pads[k + len(axes)]
            pads = tuple(full)
    return cx.call("nn.pad", cx.expr(0), pad_width=pads, pad_value=value, pad_mode=mode)


@converter("ConstantOfShape", attrs=("value",))
def constant_of_shape(cx: NodeContext) -> object:
    dims = cx.ints(0, "shape")
    value = cx.attr_array("value").reshape(-1) if "value" in cx.attrs else np.zeros(1, np.float32)
    return np.full(dims, value[0] if value.size else 0, dtype=value.dtype)


@converter("Range")
def range_(cx: NodeContext) -> object:
    start, limit, delta = (cx.const(i, n).reshape(-1)[0] for i, n in enumerate(("start", "limit", "delta")))
    dtype = start.dtype
    n = max(int(math.ceil((float(limit) - float(start)) / float(delta))), 0)
    if dtype.kind in "iu":
        return (int(start) + np.arange(n, dtype=np.int64) * int(delta)).astype(dtype)
    return (start + np.arange(n).astype(dtype) * delta).astype(dtype)


@converter("EyeLike", attrs=("dtype", "k"))
def eye_like(cx: NodeContext) -> object:
    rows, cols = cx.static_shape(0, "input")
    dtype = plait_dtype(cx.attr("dtype")) if "dtype" in cx.attrs else cx.dtype(0)
    return np.eye(rows, cols, k=cx.attr("k", 0), dtype=DTYPES[dtype])


@converter("Trilu", attrs=("upper",))
def trilu(cx: NodeContext) -> object:
    k = int(cx.const(1, "k").reshape(-1)[0]) if cx.has(1) else 0
    shape = cx.shape(0)
    rows, cols = shape[-2], shape[-1]
    if not (isinstance(rows, int) and isinstance(cols, int)):
        raise Unsupported("the last two dimensions must be static")
    ones = np.ones((rows, cols), dtype=bool)
    mask = np.triu(ones, k) if cx.attr("upper", 1) else np.tril(ones, k)
    return cx.call("where", cx.constant(mask), cx.expr(0), cx.constant(0, cx.dtype(0)))


@converter("OneHot", attrs=("axis",))
def one_hot(cx: NodeContext) -> object:
    depth = int(cx.const(1, "depth").reshape(-1)[0])
    off_on = cx.const(2, "values").reshape(-1)
    r = cx.ndim(0)
    axis = _axis(cx.attr("axis", -1), r + 1)
    idx = cx.cast(cx.expr(0), "int64")
    idx = cx.call("where", cx.call("less", idx, cx.constant(0, "int64")),
                  cx.call("add", idx, cx.constant(depth, "int64")), idx)
    idx = cx.call("expand_dims", idx, axes=(axis,))
    positions = np.arange(depth, dtype=np.int64).reshape((depth,) + (1,) * (r - axis))
    hit = cx.call("equal", idx, cx.constant(positions))
    return cx.call("where", hit, cx.constant(off_on[1]), cx.constant(off_on[0]))


def _chw(cx: NodeContext) -> tuple[int, int, int]:
    shape = cx.shape(0)
    if len(shape) != 4 or not all(isinstance(d, int) for d in shape[1:]):
        raise Unsupported(f"expects a 4-D input with static C, H, W, got shape {shape}")
    return shape[1], shape[2], shape[3]  # type: ignore[return-value]


@converter("DepthToSpace", attrs=("blocksize", "mode"))
def depth_to_space(cx: NodeContext) -> object:
    bs, mode = cx.attr("blocksize"), cx.attr("mode", "DCR")
    c, h, w = _chw(cx)
    if mode == "DCR":
        x = cx.reshape(cx.expr(0), (0, bs, bs, c // (bs * bs), h, w))
        x = cx.call("transpose", x, axes=(0, 3, 4, 1, 5, 2))
    elif mode == "CRD":
        x = cx.reshape(cx.expr(0), (0, c // (bs * bs), bs, bs, h, w))
        x = cx.call("transpose", x, axes=(0, 1, 4, 2, 5, 3))
    else:
        raise Unsupported(f"mode '{mode}' not supported")
    return cx.reshape(x, (-1, c // (bs * bs), h * bs, w * bs))


@converter("SpaceToDepth", attrs=("blocksize",))
def space_to_depth(cx: NodeContext) -> object:
    bs = cx.attr("blocksize")
    c, h, w = _chw(cx)
    x = cx.reshape(cx.expr(0), (0, c, h // bs, bs, w // bs, bs))
    x = cx.call("transpose", x, axes=(0, 3, 5, 1, 2, 4))
    return cx.reshape(x, (-1, c * bs * bs, h // bs, w // bs))


@converter("Compress", attrs=("axis",))
def compress(cx: NodeContext) -> object:
    cond = cx.const(1, "condition").reshape(-1).astype(bool)
    x = cx.expr(0)
    if "axis" in cx.attrs:
        axis = _axis(cx.attr("axis"), cx.ndim(0))
        dim = cx.shape(0)[axis]
    else:
        x, axis = cx.reshape(x, (-1,)), 0
        dim = x.checked_type.shape[0]
    keep = np.nonzero(cond[:dim] if isinstance(dim, int) else cond)[0].astype(np.int64)
    return cx.call("take", x, cx.constant(keep), axis=axis)


@converter("NonZero")
def non_zero(cx: NodeContext) -> object:
    x = cx.const(0, "X (the output's shape depends on its values)")
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)
