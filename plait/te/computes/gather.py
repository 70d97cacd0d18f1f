"""Computes of the indexing operators (:mod:`plait.op.gather`): take, gather_elements, gather_nd,
one_hot, trilu.

Negative indices count from the end of their axis. An index outside [-size, size - 1] is an error,
as in the references: each gather stage carries a run-time check (``te.check``) over its indices,
so the generated function stops and returns :data:`plait.ir.status.INDEX_OUT_OF_RANGE` before it
reads anything with them. The positions the stage itself computes are still clamped into the axis,
so no out-of-bounds read can happen even where the check came later than a read (a stage fused as a
reduction's epilogue runs with the reduction).
"""

from __future__ import annotations

from typing import Any

from plait.ir import status
from plait.ir.attrs import Attrs
from plait.op._common import norm_axis
from plait.te.computes._common import clamp, make, out_tensor_type, scalar_const, shape_of, tir
from plait.te.registry import register_compute
from plait.te.tensor import Check, check
from plait.tir.expr import PrimExpr


def wrap_index(v: PrimExpr, size: Any) -> PrimExpr:
    """An index value (any integer dtype) as an int64 position in an axis of ``size``."""
    v = tir.cast("int64", v)
    return clamp(tir.select(v < 0, v + size, v), 0, tir.max(size - 1, 0) if not isinstance(size, int)
                 else max(size - 1, 0))


def in_range(v: PrimExpr, size: Any) -> PrimExpr:
    """Is the index value ``v`` in [-size, size - 1]?"""
    v = tir.cast("int64", v)
    return tir.all_(v >= -size if isinstance(size, int) else v + size >= 0, v < size)


def index_check(shape: Any, index: Any, size: Any, name: str) -> Check:
    """The check that ``index(*i)`` is in range of an axis of ``size`` at every ``i`` of ``shape``."""
    return check(shape, lambda *i: in_range(index(*i), size), status.INDEX_OUT_OF_RANGE, name)


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

    chk = index_check(ish, lambda *j: idx[j], xs[axis], "take")
    return make("take", shape, body, checks=[chk])


@register_compute("gather_elements")
def _gather_elements(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    x, idx = inputs
    xs = shape_of(x, "gather_elements")
    axis = norm_axis(attrs["axis"], len(xs))
    shape, _ = out_tensor_type(out_type, "gather_elements")

    def body(*i: PrimExpr) -> PrimExpr:
        pos = wrap_index(idx[i], xs[axis])
        return x[tuple(i[:axis]) + (pos,) + tuple(i[axis + 1:])]

    chk = index_check(shape_of(idx, "gather_elements"), lambda *j: idx[j], xs[axis], "gather_elements")
    return make("gather_elements", shape, body, checks=[chk])


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

    checks = [index_check(tuple(ish[:-1]), lambda *j, c=c: idx[j + (c,)], xs[b + c], "gather_nd") for c in range(m)]
    return make("gather_nd", shape, body, checks=checks)


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
