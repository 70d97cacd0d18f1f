"""Computes of the indexing operators (:mod:`plait.op.gather`): take, gather_elements, gather_nd,
one_hot, trilu.

Negative indices count from the end of their axis. The references raise on an index outside
[-size, size - 1]; generated code cannot raise, so such an index is clamped into the axis (no
out-of-bounds read ever happens; the result for it is unspecified, as in ONNX).
"""

from __future__ import annotations

from typing import Any

from plait.ir.attrs import Attrs
from plait.op._common import norm_axis
from plait.te.computes._common import clamp, make, out_tensor_type, scalar_const, shape_of, tir
from plait.te.registry import register_compute
from plait.tir.expr import PrimExpr


def wrap_index(v: PrimExpr, size: int) -> PrimExpr:
    """An index value (any integer dtype) as an int64 position in an axis of ``size``."""
    v = tir.cast("int64", v)
    return clamp(tir.select(v < 0, v + size, v), 0, max(size - 1, 0))


@register_compute("take")
def _take(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    x, idx = inputs
    xs, ish = shape_of(x, "take"), shape_of(idx, "take")
    axis = norm_axis(attrs["axis"], len(xs))
    shape, _ = out_tensor_type(out_type, "take")
    ni = len(ish)

    def body(*i: PrimExpr) -> PrimExpr:
        pos = wrap_index(idx[tuple(i[axis:axis + ni])], xs[axis])
        return x[tuple(i[:axis]) + (pos,) + tuple(i[axis + ni:])]

    return make("take", shape, body)


@register_compute("gather_elements")
def _gather_elements(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    x, idx = inputs
    xs = shape_of(x, "gather_elements")
    axis = norm_axis(attrs["axis"], len(xs))
    shape, _ = out_tensor_type(out_type, "gather_elements")

    def body(*i: PrimExpr) -> PrimExpr:
        pos = wrap_index(idx[i], xs[axis])
        return x[tuple(i[:axis]) + (pos,) + tuple(i[axis + 1:])]

    return make("gather_elements", shape, body)


@register_compute("gather_nd")
def _gather_nd(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    x, idx = inputs
    xs, ish = shape_of(x, "gather_nd"), shape_of(idx, "gather_nd")
    b, m = attrs["batch_dims"], ish[-1]
    shape, _ = out_tensor_type(out_type, "gather_nd")
    nmid = len(ish) - 1 - b  # index dims between the batch dims and the coordinate dim

    def body(*i: PrimExpr) -> PrimExpr:
        batch, mid, rest = tuple(i[:b]), tuple(i[b:b + nmid]), tuple(i[b + nmid:])
        coords = tuple(wrap_index(idx[batch + mid + (j,)], xs[b + j]) for j in range(m))
        return x[batch + coords + rest]

    return make("gather_nd", shape, body)


@register_compute("one_hot")
def _one_hot(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (idx,) = inputs
    shape, dtype = out_tensor_type(out_type, "one_hot")
    depth = attrs["depth"]
    axis = norm_axis(attrs["axis"], len(shape))
    on, off = scalar_const(attrs["on_value"], dtype), scalar_const(attrs["off_value"], dtype)

    def body(*i: PrimExpr) -> PrimExpr:
        v = tir.cast("int64", idx[tuple(i[:axis]) + tuple(i[axis + 1:])])  # non-integer indices truncate
        hot = tir.all_(v >= -depth, v < depth, tir.eq(tir.select(v < 0, v + depth, v), i[axis]))
        return tir.select(hot, on, off)

    return make("one_hot", shape, body)


@register_compute("trilu")
def _trilu(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    shape, dtype = out_tensor_type(out_type, "trilu")
    k = attrs["k"]
    zero = scalar_const(0, dtype)

    def body(*i: PrimExpr) -> PrimExpr:
        d = i[-1] - i[-2]
        keep = d >= k if attrs["upper"] else d <= k
        return tir.select(keep, x[i], zero)

    return make("trilu", shape, body)
