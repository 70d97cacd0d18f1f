"""ONNX converters whose indices must be known at import time, lowered onto gathers and selects:
ScatterElements / Scatter / ScatterND (every reduction), ReverseSequence, and TopK (k rounds of
argmax/argmin).
"""

from __future__ import annotations

import numpy as np

from plait.frontend.onnx_node import NodeContext, Unsupported
from plait.frontend.onnx_registry import converter
from plait.relay.expr import Expr

_COMBINE = {"add": "add", "mul": "multiply", "max": "maximum", "min": "minimum"}


def _scatter(cx: NodeContext, targets: np.ndarray, reduction: str) -> Expr:
    """Scatter input 2 (updates) into input 0 (data): update element k goes to flat position
    ``targets[k]``; several updates of one position apply in order (``none``: the last wins)."""
    if reduction != "none" and reduction not in _COMBINE:
        raise Unsupported(f"reduction '{reduction}' not supported")
    shape = cx.static_shape(0, "data")
    n = int(np.prod(shape, dtype=np.int64))
    order: list[list[int]] = [[] for _ in range(n)]
    for k, pos in enumerate(targets.reshape(-1).tolist()):
        order[pos].append(k)
    acc = cx.reshape(cx.expr(0), (-1,))
    updates = cx.reshape(cx.expr(2), (-1,))
    layers = max((len(o) for o in order), default=0)
    if reduction == "none":  # only the last update of a position matters
        order = [o[-1:] for o in order]
        layers = min(layers, 1)
    for layer in range(layers):
        index = np.array([o[layer] if len(o) > layer else 0 for o in order], np.int64)
        mask = np.array([len(o) > layer for o in order])
        value = cx.call("take", updates, cx.constant(index), axis=0)
        if reduction != "none":
            value = cx.call(_COMBINE[reduction], acc, value)
        acc = cx.call("where", cx.constant(mask), value, acc)
    return cx.reshape(acc, shape)


@converter("ScatterElements", "Scatter", attrs=("axis", "reduction"))
def scatter_elements(cx: NodeContext) -> object:
    shape = cx.static_shape(0, "data")
    idx = cx.const(1, "indices").astype(np.int64)
    axis = cx.attr("axis", 0) % len(shape)
    idx = np.where(idx < 0, idx + shape[axis], idx)
    coords = list(np.indices(idx.shape))
    coords[axis] = idx
    targets = np.ravel_multi_index(tuple(coords), shape)
    return _scatter(cx, targets, cx.attr("reduction", "none"))


@converter("ScatterND", attrs=("reduction",))
def scatter_nd(cx: NodeContext) -> object:
    shape = cx.static_shape(0, "data")
    idx = cx.const(1, "indices").astype(np.int64)
    q = idx.shape[-1]
    lead = idx.reshape(-1, q)
    lead = np.where(lead < 0, lead + np.array(shape[:q]), lead)
    block = int(np.prod(shape[q:], dtype=np.int64))
    base = np.ravel_multi_index(tuple(lead.T), shape[:q]) * block
    targets = (base[:, None] + np.arange(block)[None, :]).reshape(-1)
    return _scatter(cx, targets, cx.attr("reduction", "none"))


@converter("ReverseSequence", attrs=("batch_axis", "time_axis"))
def reverse_sequence(cx: NodeContext) -> object:
    shape = cx.static_shape(0, "input")
    lens = cx.const(1, "sequence_lens").astype(np.int64)
    b_axis, t_axis = cx.attr("batch_axis", 1), cx.attr("time_axis", 0)
    grid = np.indices(shape)
    t, b = grid[t_axis], grid[b_axis]
    n = lens[b]
    index = np.where(t < n, n - 1 - t, t)
    return cx.call("gather_elements", cx.expr(0), cx.constant(index), axis=t_axis)


@converter("TopK", attrs=("axis", "largest", "sorted"))
def top_k(cx: NodeContext) -> object:
    k = int(cx.const(1, "K").reshape(-1)[0]) if cx.version >= 10 else cx.attr("k")
    shape = cx.shape(0)
    axis = cx.attr("axis", -1) % len(shape)
    dim = shape[axis]
    if not isinstance(dim, int):
        raise Unsupported("the TopK axis must be static")
    if not 0 < k <= dim:
        raise Unsupported(f"k={k} not supported for a dimension of {dim}")
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
