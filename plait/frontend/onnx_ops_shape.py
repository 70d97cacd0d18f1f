"""ONNX converters: shapes and data movement (Shape, Reshape, Slice, Gather, Pad, Expand, ...).

Inputs that plait's operators take as attributes (Reshape's shape, Slice's starts...) must be
known at import time: constants, folded subgraphs, or symbolic shapes where noted.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from plait.frontend.onnx_fold import has_sym, sym_result, sym_values
from plait.frontend.onnx_node import NodeContext, SymDim, SymTensor, Unsupported, plait_dtype, short
from plait.frontend.onnx_registry import Converter, converters
from plait.errors import FrontendError
from plait.ir.op import RelError
from plait.ir.types import ANY_DIM, DTYPES
from plait.op.transform import reshape_target

INT64_MAX = 2**63 - 1


# ---- shapes -----------------------------------------------------------------------------------


def shape(cx: NodeContext) -> object:
    dims = list(cx.shape(0))
    if not all(isinstance(d, int) for d in dims):  # symbolic dims remember where they were read
        src = cx.expr(0)
        dims = [d if isinstance(d, int) else SymDim(d, src, k) for k, d in enumerate(dims)]
    n = len(dims)
    start, end = cx.attr("start", 0), cx.attr("end", n)
    start = min(max(start + n if start < 0 else start, 0), n)
    end = min(max(end + n if end < 0 else end, 0), n)
    return sym_result(np.array(dims[start:end] if start < end else [], dtype=object).reshape(-1))


def size(cx: NodeContext) -> object:
    dims = cx.shape(0)
    if all(isinstance(d, int) for d in dims):
        return np.array(math.prod(dims), dtype=np.int64)
    return SymTensor(np.array(ANY_DIM, dtype=object))


def _check_reshape(cx: NodeContext, target: tuple, in_shape: tuple) -> None:
    """What makes a Reshape invalid ONNX: a dim < -1, two -1s, a 0 past the input's rank, 0 and -1
    together with allowzero=1, or (static shapes) a different element count."""
    ints = [d for d in target if isinstance(d, int)]
    if any(d < -1 for d in ints):
        raise FrontendError(f"shape {short(target)} has a dimension < -1")
    if ints.count(-1) > 1:
        raise FrontendError(f"shape {short(target)} has more than one -1")
    if cx.attr("allowzero", 0):
        if 0 in ints and -1 in ints:
            raise FrontendError(f"shape {short(target)} has both 0 and -1 with allowzero=1")
        return
    if len(ints) == len(target) and all(isinstance(d, int) for d in in_shape):
        try:
            reshape_target(in_shape, ints)
        except RelError as exc:
            raise FrontendError(str(exc).removeprefix("reshape: ")) from None


def reshape(cx: NodeContext) -> object:
    target = tuple(cx.attr("shape")) if cx.version < 5 else cx.sym_ints(1, "shape")
    in_shape = cx.shape(0)
    _check_reshape(cx, target, in_shape)
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


def flatten(cx: NodeContext) -> object:
    r, axis = cx.ndim(0), cx.attr("axis", 1)
    if not -r <= axis <= r:
        raise FrontendError(f"axis {axis} is out of range for rank {r} (Flatten takes [-{r}, {r}])")
    return cx.call("flatten", cx.expr(0), axis=axis + r if axis < 0 else axis)


def _axes_input(cx: NodeContext, index: int, rank: int, attr: str = "axes", since: int = 13) -> tuple[int, ...] | None:
    """Axes given as an attribute (old versions) or as an optional constant input (new ones),
    checked against ``rank`` and normalized."""
    if cx.version < since:
        v = cx.attr(attr, None)
        axes = None if v is None else tuple(v)
    elif not cx.has(index):
        return None
    else:
        axes = cx.ints(index, attr)
    return None if axes is None else cx.axes(axes, rank, attr)


def squeeze(cx: NodeContext) -> object:
    shape = cx.shape(0)
    axes = _axes_input(cx, 1, len(shape))
    for a in axes or ():
        if isinstance(shape[a], int) and shape[a] != 1:
            raise FrontendError(f"axis {a} has size {shape[a]}, not 1: it cannot be squeezed")
    if has_sym(cx):
        vals = sym_values(cx, 0)
        axes_n = axes if axes else tuple(i for i in range(vals.ndim) if vals.shape[i] == 1)
        return sym_result(np.squeeze(vals, axis=axes_n), cx.dtype(0))
    return cx.call("squeeze", cx.expr(0), axes=axes)


def unsqueeze(cx: NodeContext) -> object:
    n_axes = len(cx.attr("axes", ())) if cx.version < 13 else (cx.const(1, "axes").size if cx.has(1) else 0)
    axes = _axes_input(cx, 1, cx.ndim(0) + n_axes)
    if axes is None:
        raise FrontendError("input 'axes' is required")
    if has_sym(cx):
        vals = sym_values(cx, 0)
        return sym_result(np.expand_dims(vals, tuple(sorted(axes))), cx.dtype(0))
    return cx.call("expand_dims", cx.expr(0), axes=axes)


def transpose(cx: NodeContext) -> object:
    perm = cx.attr("perm", None)
    if perm is not None and sorted(perm) != list(range(cx.ndim(0))):
        raise FrontendError(f"perm {short(perm)} is not a permutation of the {cx.ndim(0)} axes")
    return cx.call("transpose", cx.expr(0), axes=None if perm is None else tuple(perm))


def concat(cx: NodeContext) -> object:
    axis = cx.attr("axis", 1 if cx.version < 4 else None)
    if axis is None:
        raise Unsupported("attribute 'axis' is required")
    idx = [i for i in range(len(cx.inputs)) if cx.has(i)]
    if not idx:
        raise FrontendError("needs at least one input")
    axis = cx.axis(axis, cx.ndim(idx[0]))
    if has_sym(cx):
        return sym_result(np.concatenate([sym_values(cx, i) for i in idx], axis=axis), cx.dtype(idx[0]))
    return cx.call("concatenate", *[cx.expr(i) for i in idx], axis=axis)


def split(cx: NodeContext) -> object:
    axis = cx.axis(cx.attr("axis", 0), cx.ndim(0))
    dim = cx.shape(0)[axis]
    n_out = len(cx.node.output)
    equal = False
    if cx.version < 13 and "split" in cx.attrs:
        sections = tuple(cx.attr("split"))
    elif cx.version >= 13 and cx.has(1):
        sections = cx.ints(1, "split")
    else:
        n = cx.attr("num_outputs", n_out)
        if n != n_out or n < 1:
            raise FrontendError(f"num_outputs is {n} but the node has {n_out} outputs")
        if not isinstance(dim, int):  # parts of ceil(dim / n), as Split-18 (the same where older Splits are defined)
            sections, equal = (-1,) * n, True
        elif "num_outputs" in cx.attrs:
            chunk = -(-dim // n)
            sections = tuple(min(chunk, max(dim - chunk * i, 0)) for i in range(n))
        else:
            if dim % n:
                raise FrontendError(f"dimension {dim} does not split into {n} equal parts")
            sections = (dim // n,) * n
    if len(sections) != n_out:
        raise FrontendError(f"split {short(sections)} has {len(sections)} parts but the node has {n_out} outputs")
    if not equal and (any(k < 0 for k in sections) or (isinstance(dim, int) and sum(sections) != dim)):
        raise FrontendError(f"split {short(sections)} does not cut axis {axis} of size {dim}")
    tup = cx.call("split", cx.expr(0), sections=sections, axis=axis)
    return [cx.get(tup, i) for i in range(len(sections))]


def slice_(cx: NodeContext) -> object:
    if cx.version < 10:
        starts, ends = tuple(cx.attr("starts")), tuple(cx.attr("ends"))
        axes = tuple(cx.attr("axes")) if "axes" in cx.attrs else None
        steps = None
    else:
        starts, ends = cx.ints(1, "starts"), cx.ints(2, "ends")
        axes = cx.ints(3, "axes") if cx.has(3) else None
        steps = cx.ints(4, "steps") if cx.has(4) else None
    nd = cx.ndim(0)
    n = len(starts)
    if len(ends) != n or (axes is not None and len(axes) != n) or (steps is not None and len(steps) != n):
        raise FrontendError(f"starts, ends, axes and steps differ in length ({n}, {len(ends)}, "
                            f"{'-' if axes is None else len(axes)}, {'-' if steps is None else len(steps)})")
    axes = cx.axes(axes if axes is not None else range(n), nd)
    if steps is not None and 0 in steps:
        raise FrontendError(f"steps {short(steps)} has a 0")
    if has_sym(cx):
        vals = sym_values(cx, 0)
        index = [slice(None)] * vals.ndim
        for k, a in enumerate(axes):
            index[a] = slice(starts[k], ends[k], steps[k] if steps else 1)
        return sym_result(vals[tuple(index)], cx.dtype(0))
    return cx.call("strided_slice", cx.expr(0), begin=starts, end=ends, strides=steps, axes=axes)


def gather(cx: NodeContext) -> object:
    axis = cx.axis(cx.attr("axis", 0), cx.ndim(0))
    if has_sym(cx):
        vals = sym_values(cx, 0)
        idx = cx.const(1, "indices").astype(np.int64)
        size = vals.shape[axis]
        bad = (idx < -size) | (idx >= size)
        if bad.any():
            raise FrontendError(f"index {int(idx[bad][0])} is out of range for axis {axis} of size {size}")
        idx = np.where(idx < 0, idx + size, idx)
        return sym_result(np.take(vals, idx, axis=axis), cx.dtype(0))
    return cx.call("take", cx.expr(0), cx.expr(1), axis=axis)


def gather_elements(cx: NodeContext) -> object:
    if cx.ndim(1) != cx.ndim(0):
        raise FrontendError(f"indices have rank {cx.ndim(1)}, data rank {cx.ndim(0)}: they must be equal")
    return cx.call("gather_elements", cx.expr(0), cx.expr(1), axis=cx.axis(cx.attr("axis", 0), cx.ndim(0)))


def gather_nd(cx: NodeContext) -> object:
    b = cx.attr("batch_dims", 0)
    if not 0 <= b < min(cx.ndim(0), cx.ndim(1)):
        raise FrontendError(f"batch_dims {b} must be in [0, {min(cx.ndim(0), cx.ndim(1)) - 1}] for data rank "
                            f"{cx.ndim(0)} and indices rank {cx.ndim(1)}")
    m = cx.shape(1)[-1]
    if isinstance(m, int) and not 1 <= m <= cx.ndim(0) - b:
        raise FrontendError(f"the indices' last dimension is {m}, it must be in [1, {cx.ndim(0) - b}]")
    return cx.call("gather_nd", cx.expr(0), cx.expr(1), batch_dims=b)


def expand(cx: NodeContext) -> object:
    """Expand to a shape whose symbolic dims are the input's own (kept: 1 in ``broadcast_to``'s shape) or
    were read by ``Shape`` from one other tensor: that tensor becomes ``broadcast_to``'s like argument and
    gives those dims when the function runs."""
    target = list(cx.sym_ints(1, "shape"))
    in_shape = cx.shape(0)
    if any(isinstance(d, int) and d < 0 for d in target):
        raise FrontendError(f"shape {short(target)} has a negative dimension")
    axes = [-1] * len(target)
    sources: list[Any] = []
    for j in range(1, len(target) + 1):
        d = target[-j]
        if not isinstance(d, str):
            continue
        if j <= len(in_shape) and in_shape[-j] == d and d != ANY_DIM:
            target[-j] = 1  # broadcasting keeps the input's (symbolic) dim
        elif isinstance(d, SymDim):
            if not any(s is d.source for s in sources):
                sources.append(d.source)
            target[-j], axes[-j] = 1, d.axis
        else:
            raise Unsupported(f"shape {target} has a dimension unknown at import time")
    if len(sources) > 1:
        raise Unsupported(f"shape {target} takes symbolic dims from the shapes of {len(sources)} tensors (plait "
                          "takes them from one)")
    if not sources:
        return cx.call("broadcast_to", cx.expr(0), shape=tuple(target))
    return cx.call("broadcast_to", cx.expr(0), sources[0], shape=tuple(target), like_axes=tuple(axes))


def tile(cx: NodeContext) -> object:
    reps = cx.ints(1, "repeats")
    if len(reps) != cx.ndim(0) or any(r < 0 for r in reps):
        raise FrontendError(f"repeats {short(reps)} must be {cx.ndim(0)} values >= 0 (one per axis)")
    return cx.call("tile", cx.expr(0), reps=reps)


def pad(cx: NodeContext) -> object:
    mode = cx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise FrontendError(f"mode '{mode}' is not a Pad mode")
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
            axes = cx.axes(cx.ints(3, "axes"), nd)
            if len(pads) != 2 * len(axes):
                raise FrontendError(f"pads has {len(pads)} values, expected {2 * len(axes)} (2 per axis)")
            full = [0] * (2 * nd)
            for k, a in enumerate(axes):
                full[a], full[a + nd] = pads[k], pads[k + len(axes)]
            pads = tuple(full)
    if len(pads) != 2 * nd:
        raise FrontendError(f"pads has {len(pads)} values, expected {2 * nd} (2 per axis)")
    return cx.call("nn.pad", cx.expr(0), pad_width=pads, pad_value=value, pad_mode=mode)


def constant_of_shape(cx: NodeContext) -> object:
    dims = cx.ints(0, "shape")
    if any(d < 0 for d in dims):
        raise FrontendError(f"shape {short(dims)} has a negative dimension")
    value = cx.attr_array("value").reshape(-1) if "value" in cx.attrs else np.zeros(1, np.float32)
    if value.size != 1:
        raise FrontendError(f"attribute 'value' has {value.size} elements, expected 1")
    return cx.full(dims, value[0], value.dtype.name)


def range_(cx: NodeContext) -> object:
    vals = [cx.const(i, n).reshape(-1) for i, n in enumerate(("start", "limit", "delta"))]
    if any(v.size != 1 for v in vals):
        raise FrontendError("start, limit and delta must be scalars")
    start, limit, delta = (v[0] for v in vals)
    dtype = start.dtype
    if not all(math.isfinite(float(v)) for v in (start, limit, delta)):
        raise FrontendError(f"start {start}, limit {limit} and delta {delta} must be finite")
    if delta == 0:
        raise FrontendError("delta is 0")
    count = math.ceil((float(limit) - float(start)) / float(delta)) if math.isfinite(
        (float(limit) - float(start)) / float(delta)) else math.inf
    if count == math.inf:
        raise FrontendError(f"start {start}, limit {limit} and delta {delta} give an endless range")
    n = max(int(count), 0)
    cx.check_bytes(n * dtype.itemsize, f"Range output ({n} elements)")
    if dtype.kind in "iu":
        return (int(start) + np.arange(n, dtype=np.int64) * int(delta)).astype(dtype)
    return (start + np.arange(n).astype(dtype) * delta).astype(dtype)


def eye_like(cx: NodeContext) -> object:
    shape = cx.static_shape(0, "input")
    if len(shape) != 2:
        raise FrontendError(f"input has rank {len(shape)}, expected 2")
    rows, cols = shape
    dtype = plait_dtype(cx.attr("dtype")) if "dtype" in cx.attrs else cx.dtype(0)
    cx.check_bytes(rows * cols * DTYPES[dtype].itemsize, f"EyeLike output ({rows}x{cols})")
    return np.eye(rows, cols, k=cx.attr("k", 0), dtype=DTYPES[dtype])


def trilu(cx: NodeContext) -> object:
    if cx.has(1) and cx.const(1, "k").size != 1:
        raise FrontendError("k must be a scalar")
    k = int(cx.const(1, "k").reshape(-1)[0]) if cx.has(1) else 0
    shape = cx.shape(0)
    if len(shape) < 2:
        raise FrontendError(f"input has rank {len(shape)}, expected at least 2")
    rows, cols = shape[-2], shape[-1]
    if not (isinstance(rows, int) and isinstance(cols, int)):
        raise Unsupported("the last two dimensions must be static")
    cx.check_bytes(rows * cols, f"Trilu mask ({rows}x{cols})")
    ones = np.ones((rows, cols), dtype=bool)
    mask = np.triu(ones, k) if cx.attr("upper", 1) else np.tril(ones, k)
    return cx.call("where", cx.constant(mask), cx.expr(0), cx.constant(0, cx.dtype(0)))


def one_hot(cx: NodeContext) -> object:
    depth_v, off_on = cx.const(1, "depth").reshape(-1), cx.const(2, "values").reshape(-1)
    if depth_v.size != 1 or off_on.size != 2:
        raise FrontendError(f"depth must be a scalar and values 2 values, got {depth_v.size} and {off_on.size}")
    if not float(depth_v[0]) >= 1:
        raise FrontendError(f"depth is {depth_v[0]}, it must be >= 1")
    depth = int(depth_v[0])
    cx.check_bytes(depth * 8, f"OneHot positions (depth {depth})")
    r = cx.ndim(0)
    axis = cx.axis(cx.attr("axis", -1), r + 1)
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


def depth_to_space(cx: NodeContext) -> object:
    bs, mode = cx.attr("blocksize"), cx.attr("mode", "DCR")
    c, h, w = _chw(cx)
    if bs < 1 or c % (bs * bs):
        raise FrontendError(f"blocksize {bs}: the depth {c} must be a multiple of blocksize * blocksize")
    if mode == "DCR":
        x = cx.reshape(cx.expr(0), (0, bs, bs, c // (bs * bs), h, w))
        x = cx.call("transpose", x, axes=(0, 3, 4, 1, 5, 2))
    elif mode == "CRD":
        x = cx.reshape(cx.expr(0), (0, c // (bs * bs), bs, bs, h, w))
        x = cx.call("transpose", x, axes=(0, 1, 4, 2, 5, 3))
    else:
        raise FrontendError(f"mode '{mode}' is not a DepthToSpace mode")
    return cx.reshape(x, (-1, c // (bs * bs), h * bs, w * bs))


def space_to_depth(cx: NodeContext) -> object:
    bs = cx.attr("blocksize")
    c, h, w = _chw(cx)
    if bs < 1 or h % bs or w % bs:
        raise FrontendError(f"blocksize {bs} must divide the height {h} and the width {w}")
    x = cx.reshape(cx.expr(0), (0, c, h // bs, bs, w // bs, bs))
    x = cx.call("transpose", x, axes=(0, 3, 5, 1, 2, 4))
    return cx.reshape(x, (-1, c * bs * bs, h // bs, w // bs))


def compress(cx: NodeContext) -> object:
    cond = cx.const(1, "condition").reshape(-1).astype(bool)
    x = cx.expr(0)
    if "axis" in cx.attrs:
        axis = cx.axis(cx.attr("axis"), cx.ndim(0))
        dim = cx.shape(0)[axis]
    else:
        x, axis = cx.reshape(x, (-1,)), 0
        dim = x.checked_type.shape[0]
    keep = np.nonzero(cond[:dim] if isinstance(dim, int) else cond)[0].astype(np.int64)
    return cx.call("take", x, cx.constant(keep), axis=axis)


def non_zero(cx: NodeContext) -> object:
    """Folded when X is a constant; else the ``nonzero`` operator (its output's length is known at run time
    only: the VM executor runs it)."""
    if not cx.is_const(0):
        if cx.ndim(0) == 0:
            raise Unsupported("NonZero of a scalar (rank 0) is not supported")
        return cx.call("nonzero", cx.expr(0))
    x = cx.const(0, "X")
    cx.check_bytes(x.size * x.ndim * 8, "NonZero output")
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


CONVERTERS: list[Converter] = [
    *converters(["Shape"], shape, attrs=("start", "end"), ops=()),
    *converters(["Size"], size, ops=()),
    *converters(["Reshape"], reshape, attrs=("shape", "allowzero"), ops=("reshape",)),
    *converters(["Flatten"], flatten, attrs=("axis",), ops=("flatten",)),
    *converters(["Squeeze"], squeeze, attrs=("axes",), ops=("squeeze",)),
    *converters(["Unsqueeze"], unsqueeze, attrs=("axes",), ops=("expand_dims",)),
    *converters(["Transpose"], transpose, attrs=("perm",), ops=("transpose",)),
    *converters(["Concat"], concat, attrs=("axis",), ops=("concatenate",)),
    *converters(["Split"], split, attrs=("axis", "split", "num_outputs"), ops=("split",)),
    *converters(["Slice"], slice_, attrs=("starts", "ends", "axes"), ops=("strided_slice",)),
    *converters(["Gather"], gather, attrs=("axis",), ops=("take",)),
    *converters(["GatherElements"], gather_elements, attrs=("axis",), ops=("gather_elements",)),
    *converters(["GatherND"], gather_nd, attrs=("batch_dims",), ops=("gather_nd",)),
    *converters(["Expand"], expand, ops=("broadcast_to",)),
    *converters(["Tile"], tile, ops=("tile",)),
    *converters(["Pad"], pad, attrs=("mode", "pads", "value"), ops=("nn.pad",)),
    *converters(["ConstantOfShape"], constant_of_shape, attrs=("value",), ops=("broadcast_to",)),
    *converters(["Range"], range_, ops=()),
    *converters(["EyeLike"], eye_like, attrs=("dtype", "k"), ops=()),
    *converters(["Trilu"], trilu, attrs=("upper",), ops=("where",)),
    *converters(["OneHot"], one_hot, attrs=("axis",), ops=("where", "expand_dims", "equal", "less", "add", "cast")),
    *converters(["DepthToSpace"], depth_to_space, attrs=("blocksize", "mode"), ops=("transpose", "reshape")),
    *converters(["SpaceToDepth"], space_to_depth, attrs=("blocksize",), ops=("transpose", "reshape")),
    *converters(["Compress"], compress, attrs=("axis",), ops=("take", "reshape")),
    *converters(["NonZero"], non_zero, ops=("nonzero",)),
]
