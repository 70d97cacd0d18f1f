"""ONNX converters whose indices must be known at import time, lowered onto gathers and selects:
ScatterElements / Scatter / ScatterND (every reduction), ReverseSequence, and TopK (k rounds of
argmax/argmin).
"""

from __future__ import annotations

import math

import numpy as np

from plait.errors import FrontendError
from plait.frontend.onnx_node import NodeContext, Unsupported, short
from plait.frontend.onnx_registry import Converter, converters
from plait.relay.expr import Expr

_COMBINE = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}
#: At most this many updates of one position are applied in sequence (one where per layer).
MAX_LAYERS = 4096


def _scatter(cx: NodeContext, targets: np.ndarray, reduction: str) -> Expr:
    """Scatter input 2 (updates) into input 0 (data): update element k goes to flat position
    ``targets[k]``; several updates of one position apply in order (``none``: the last wins).

    Layer L holds, for each position, its (L+1)-th update: one ``take`` of the updates and one
    ``where`` per layer."""
    if reduction != "none" and reduction not in _COMBINE:
        raise FrontendError(f"reduction '{reduction}' is not one of none, add, mul, max, min")
    shape = cx.static_shape(0, "data")
    n = math.prod(shape)
    k = targets.size
    targets = targets.reshape(-1)
    order = np.argsort(targets, kind="stable")  # updates grouped by position, in their order
    sorted_t = targets[order]
    first = np.searchsorted(sorted_t, sorted_t, side="left")
    rank = np.arange(k) - first  # how many earlier updates hit the same position
    if reduction == "none":  # only the last update of a position matters
        last = np.r_[sorted_t[1:] != sorted_t[:-1], True] if k else np.zeros(0, bool)
        order, sorted_t, rank = order[last], sorted_t[last], np.zeros(int(last.sum()), np.int64)
    layers = int(rank.max()) + 1 if k else 0
    if layers > MAX_LAYERS:
        raise Unsupported(f"{layers} updates of one position (at most {MAX_LAYERS})")
    cx.check_bytes(layers * n * 9, f"{cx.op_type} index tables ({layers} x {n} positions)")
    acc = cx.reshape(cx.expr(0), (-1,))
    updates = cx.reshape(cx.expr(2), (-1,))
    for layer in range(layers):
        sel = rank == layer
        index = np.zeros(n, np.int64)
        index[sorted_t[sel]] = order[sel]
        mask = np.zeros(n, bool)
        mask[sorted_t[sel]] = True
        value = cx.call("take", updates, cx.constant(index), axis=0)
        if reduction != "none":
            value = cx.call(_COMBINE[reduction], acc, value)
        acc = cx.call("where", cx.constant(mask), value, acc)
    return cx.reshape(acc, shape)


def _in_range(idx: np.ndarray, size: int, axis: int) -> np.ndarray:
    """Constant indices of an axis of ``size``, negative ones wrapped; out of range is invalid."""
    bad = (idx < -size) | (idx >= size)
    if bad.any():
        raise FrontendError(f"index {int(idx[bad][0])} is out of range for axis {axis} of size {size}")
    return np.where(idx < 0, idx + size, idx)


def scatter_elements(cx: NodeContext) -> object:
    shape = cx.static_shape(0, "data")
    idx = cx.const(1, "indices").astype(np.int64)
    axis = cx.axis(cx.attr("axis", 0), len(shape))
    if idx.ndim != len(shape) or tuple(cx.shape(2)) != idx.shape:
        raise FrontendError(f"indices {short(idx.shape)} and updates {short(cx.shape(2))} must have one shape, of the "
                            f"data's rank {len(shape)}")
    if any(i > d for k, (i, d) in enumerate(zip(idx.shape, shape)) if k != axis):
        raise FrontendError(f"indices {short(idx.shape)} are larger than the data {short(shape)} off the axis")
    cx.check_bytes(idx.size * 8 * (len(shape) + 1), f"{cx.op_type} positions")
    coords = list(np.indices(idx.shape))
    coords[axis] = _in_range(idx, shape[axis], axis)
    targets = np.ravel_multi_index(tuple(coords), shape)
    return _scatter(cx, targets, cx.attr("reduction", "none"))


def scatter_nd(cx: NodeContext) -> object:
    shape = cx.static_shape(0, "data")
    idx = cx.const(1, "indices").astype(np.int64)
    q = idx.shape[-1] if idx.ndim else 0
    if not 1 <= q <= len(shape):
        raise FrontendError(f"the indices' last dimension is {q}, it must be in [1, {len(shape)}]")
    want = idx.shape[:-1] + tuple(shape[q:])
    if tuple(cx.shape(2)) != want:
        raise FrontendError(f"updates have shape {short(cx.shape(2))}, expected {short(want)}")
    lead = idx.reshape(-1, q)
    lead = np.stack([_in_range(lead[:, j], shape[j], j) for j in range(q)], axis=1)
    block = math.prod(shape[q:])
    cx.check_bytes(lead.shape[0] * block * 8, "ScatterND positions")
    base = np.ravel_multi_index(tuple(lead.T), shape[:q]) * block
    targets = (base[:, None] + np.arange(block)[None, :]).reshape(-1)
    return _scatter(cx, targets, cx.attr("reduction", "none"))


def reverse_sequence(cx: NodeContext) -> object:
    shape = cx.static_shape(0, "input")
    lens = cx.const(1, "sequence_lens").astype(np.int64)
    b_axis, t_axis = cx.attr("batch_axis", 1), cx.attr("time_axis", 0)
    if {b_axis, t_axis} != {0, 1} or len(shape) < 2:
        raise FrontendError(f"batch_axis {b_axis} and time_axis {t_axis} must be 0 and 1 of an input of rank >= 2")
    if lens.shape != (shape[b_axis],) or ((lens < 0) | (lens > shape[t_axis])).any():
        raise FrontendError(f"sequence_lens {short(lens.tolist())} must hold {shape[b_axis]} lengths in "
                            f"[0, {shape[t_axis]}]")
    cx.check_bytes(math.prod(shape) * 8 * len(shape), "ReverseSequence positions")
    grid = np.indices(shape)
    t, b = grid[t_axis], grid[b_axis]
    n = lens[b]
    index = np.where(t < n, n - 1 - t, t)
    return cx.call("gather_elements", cx.expr(0), cx.constant(index), axis=t_axis)


def top_k(cx: NodeContext) -> object:
    if cx.version >= 10 and cx.const(1, "K").size != 1:
        raise FrontendError("K must hold one value")
    k = int(cx.const(1, "K").reshape(-1)[0]) if cx.version >= 10 else cx.attr("k")
    shape = cx.shape(0)
    axis = cx.axis(cx.attr("axis", -1), len(shape))
    dim = shape[axis]
    if not isinstance(dim, int):
        raise Unsupported("the TopK axis must be static")
    if not 0 <= k <= dim:
        raise FrontendError(f"k={k} is out of range for a dimension of {dim}")
    if k == 0 or k > MAX_LAYERS:
        raise Unsupported(f"k={k} not supported (1 to {MAX_LAYERS})")
    cx.check_bytes(dim * 8, f"TopK positions ({dim})")
    largest = bool(cx.attr("largest", 1))
    x = cx.expr(0)
    work = x if cx.dtype(0) in ("float32", "float64") else cx.cast(x, "float64")
    positions = cx.constant(np.arange(dim, dtype=np.int64).reshape((dim,) + (1,) * (len(shape) - 1 - axis)))
    fill = cx.constant(-np.inf if largest else np.inf, work.checked_type.dtype)  # type: ignore[union-attr]
    values, indices = [], []
    for _ in range(k):  # k rounds: pick the best, then mask it out (ties: the lowest index first)
        i = cx.call("argmax" if largest else "argmin", work, axis=axis, keepdims=True)
        values.append(cx.call("gather_elements", x, i, axis=axis))
        indices.append(i)
        work = cx.call("where", cx.call("equal", positions, i), fill, work)
    cat = (lambda parts: parts[0] if len(parts) == 1 else cx.call("concatenate", *parts, axis=axis))
    return [cat(values), cat(indices)]


CONVERTERS: list[Converter] = [
    *converters(["ScatterElements"], scatter_elements, attrs=("axis", "reduction"), ops=("take", "where", "reshape")),
    *converters(["Scatter"], scatter_elements, attrs=("axis", "reduction"), ops=("take", "where", "reshape")),
    *converters(["ScatterND"], scatter_nd, attrs=("reduction",), ops=("take", "where", "reshape")),
    *converters(["ReverseSequence"], reverse_sequence, attrs=("batch_axis", "time_axis"), ops=("gather_elements",)),
    *converters(["TopK"], top_k, attrs=("axis", "largest", "sorted"),
                ops=("where", "argmax", "argmin", "gather_elements", "equal", "concatenate", "cast")),
]
