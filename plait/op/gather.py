"""Indexing operators (ONNX semantics): take (Gather), gather_elements, gather_nd, one_hot, trilu.

Indices may be negative (they count from the end of their axis). An index outside
[-size, size - 1] is an error: the references raise :class:`InterpreterError` naming it. When the
indices are a constant, the same check runs before any input is seen: each gather operator carries
``check_constant_args``, a function ``(args, arg_types, attrs)`` (``args[i]`` the constant
value of argument i, or None) that raises that same error; the ONNX importer calls it when it
builds the call and ``FoldConstant`` when it meets one, so a model that would fail on every input
fails at import or compile time. Compiled code checks indices known only at run time the same way:
the generated function stops with status :data:`plait.ir.status.INDEX_OUT_OF_RANGE`, which the
executors report as an error (the TE computes below).

TE computes: Negative indices count from the end of their axis. An index outside [-size, size - 1] is an error,
as in the references: each gather stage carries a run-time check (``te.check``) over its indices,
so the generated function stops and returns :data:`plait.ir.status.INDEX_OUT_OF_RANGE` before it
reads anything with them. The positions the stage itself computes are still clamped into the axis,
so no out-of-bounds read can happen even where the check came later than a read (a stage fused as a
reduction's epilogue runs with the reduction).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait.errors import InterpreterError
from plait.ir import status
from plait.ir.attrs import Attrs
from plait.ir.numeric import cast_array
from plait.ir.types import DTYPES
from plait.op._common import (
    AttrSpec, Family, OnnxMap, OpPattern, RelError, TensorType, as_tensor, elementwise_cost, norm_axis,
)
from plait.op._compute import clamp, dims_agree, make, out_tensor_type, scalar_const, shape_checks, shape_of, tir
from plait.op.transform import move_cost, one_tensor, select_cost
from plait.te.tensor import Check, check
from plait.tir.expr import PrimExpr

defop = Family()

INJ = OpPattern.INJECTIVE
_INDEX_DTYPES = ("int32", "int64")


def _indices(t, op: str) -> TensorType:
    t = as_tensor(t, f"{op}: indices")
    if t.dtype not in _INDEX_DTYPES:
        raise RelError(f"{op}: indices: expected int32 or int64, got {t.dtype}")
    return t


def _wrap(idx: np.ndarray, size: int, op: str, axis: int) -> np.ndarray:
    """Negative indices count from the end; out-of-range ones are an error."""
    idx = idx.astype(np.int64)
    bad = (idx < -size) | (idx >= size)
    if bad.any():
        raise InterpreterError(f"{op}: index {int(idx[bad][0])} is out of range for axis {axis} of size {size}")
    return np.where(idx < 0, idx + size, idx)


# ---- take ----------------------------------------------------------------------------------------


def _take_rel(args, attrs):
    x, idx = one_tensor(args, "take"), _indices(args[1], "take")
    if x.ndim == 0:
        raise RelError(f"take: data: expected a tensor of rank >= 1, got {x}")
    axis = norm_axis(attrs["axis"], x.ndim, "take: axis")
    return TensorType(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)


def _take_ref(args, attrs):
    x, idx = args
    axis = norm_axis(attrs["axis"], x.ndim)
    return np.take(x, _wrap(idx, x.shape[axis], "take", axis), axis=axis)


def _take_check(args, types, attrs):
    x, idx = types[0], args[1]
    if idx is not None and x.ndim:
        axis = norm_axis(attrs["axis"], x.ndim)
        _check_static(idx, x.shape[axis], "take", axis)


def _check_static(idx: np.ndarray, size, op: str, axis: int) -> None:
    """The reference's range check on constant indices, when the axis has a static size."""
    if isinstance(size, int):
        _wrap(np.asarray(idx), size, op, axis)


defop("take", rel=_take_rel, ref=_take_ref, cost=select_cost, pattern=INJ, num_inputs=2, attrs=[
    AttrSpec("axis", "int", 0, "the axis of data the indices select along"),
], doc="ONNX Gather: data.shape[:axis] + indices.shape + data.shape[axis+1:]",
      check_constant_args=_take_check)


# ---- gather_elements -----------------------------------------------------------------------------


def _gather_elements_rel(args, attrs):
    x, idx = one_tensor(args, "gather_elements"), _indices(args[1], "gather_elements")
    if x.ndim == 0 or idx.ndim != x.ndim:
        raise RelError(f"gather_elements: indices: expected rank {max(x.ndim, 1)} (as data), got {idx.ndim}")
    axis = norm_axis(attrs["axis"], x.ndim, "gather_elements: axis")
    for k, (d, i) in enumerate(zip(x.shape, idx.shape)):
        if k != axis and isinstance(d, int) and isinstance(i, int) and i > d:
            raise RelError(f"gather_elements: indices: expected size <= {d} at axis {k} (as data), got {i}")
    return TensorType(idx.shape, x.dtype)


def _gather_elements_ref(args, attrs):
    x, idx = args
    axis = norm_axis(attrs["axis"], x.ndim)
    crop = tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(idx.shape))
    return np.take_along_axis(x[crop], _wrap(idx, x.shape[axis], "gather_elements", axis), axis=axis)


def _gather_elements_check(args, types, attrs):
    x, idx = types[0], args[1]
    if idx is not None and x.ndim:
        axis = norm_axis(attrs["axis"], x.ndim)
        _check_static(idx, x.shape[axis], "gather_elements", axis)


defop("gather_elements", rel=_gather_elements_rel, ref=_gather_elements_ref, cost=select_cost, pattern=INJ,
      num_inputs=2, attrs=[AttrSpec("axis", "int", 0, "out[..i..] = data[..indices[..i..]..] at this axis")],
      doc="ONNX GatherElements: the result has the indices' shape",
      check_constant_args=_gather_elements_check)


# ---- gather_nd -----------------------------------------------------------------------------------


def _gather_nd_rel(args, attrs):
    x, idx = one_tensor(args, "gather_nd"), _indices(args[1], "gather_nd")
    b = attrs["batch_dims"]
    if x.ndim == 0 or idx.ndim == 0:
        raise RelError(f"gather_nd: expected data and indices of rank >= 1, got ranks {x.ndim} and {idx.ndim}")
    if not 0 <= b < min(x.ndim, idx.ndim):
        raise RelError(f"gather_nd: batch_dims: expected a value in [0, {min(x.ndim, idx.ndim) - 1}], got {b}")
    m = idx.shape[-1]
    if not isinstance(m, int):
        raise RelError(f"gather_nd: indices: expected a static last dimension, got '{m}'")
    if not 1 <= m <= x.ndim - b:
        raise RelError(f"gather_nd: indices: expected a last dimension in [1, {x.ndim - b}] "
                       f"(data rank {x.ndim} minus batch_dims {b}), got {m}")
    for k in range(b):
        d, i = x.shape[k], idx.shape[k]
        if isinstance(d, int) and isinstance(i, int) and d != i:
            raise RelError(f"gather_nd: batch dimension {k}: expected indices size {d} (as data), got {i}")
    batch = tuple(i if isinstance(i, int) else d for d, i in zip(x.shape[:b], idx.shape[:b]))
    return TensorType(batch + idx.shape[b:-1] + x.shape[b + m:], x.dtype)


def _gather_nd_ref(args, attrs):
    x, idx = args
    b, m = attrs["batch_dims"], idx.shape[-1]
    nb = int(np.prod(x.shape[:b], dtype=np.int64))
    data = x.reshape((nb,) + x.shape[b:])
    flat = idx.reshape(nb, -1, m)
    coords = tuple(_wrap(flat[..., j], x.shape[b + j], "gather_nd", b + j) for j in range(m))
    out = data[(np.arange(nb)[:, None],) + coords]
    return out.reshape(idx.shape[:-1] + x.shape[b + m:])


def _gather_nd_check(args, types, attrs):
    x, idx = types[0], args[1]
    if idx is None or idx.ndim == 0:
        return
    b = attrs["batch_dims"]
    for j in range(idx.shape[-1]):
        if b + j < x.ndim:
            _check_static(idx[..., j], x.shape[b + j], "gather_nd", b + j)


defop("gather_nd", rel=_gather_nd_rel, ref=_gather_nd_ref, cost=select_cost, pattern=INJ, num_inputs=2, attrs=[
    AttrSpec("batch_dims", "int", 0, "leading dims shared by data and indices"),
], doc="ONNX GatherND: indices' last dim indexes data after the batch dims",
      check_constant_args=_gather_nd_check)


# ---- one_hot, trilu ------------------------------------------------------------------------------


def _one_hot_rel(args, attrs):
    idx = as_tensor(args[0], "one_hot: indices")
    if idx.dtype == "bool":
        raise RelError("one_hot: indices: expected a numeric dtype, got bool")
    if attrs["depth"] < 1:
        raise RelError(f"one_hot: expected depth >= 1, got {attrs['depth']}")
    axis = norm_axis(attrs["axis"], idx.ndim + 1, "one_hot: axis")
    return TensorType(idx.shape[:axis] + (attrs["depth"],) + idx.shape[axis:], attrs["dtype"])


def _one_hot_ref(args, attrs):
    (idx,) = args
    depth, dt = attrs["depth"], DTYPES[attrs["dtype"]]
    axis = norm_axis(attrs["axis"], idx.ndim + 1)
    i = cast_array(idx, "int64")  # ONNX casts (truncates) non-integer indices; NaN -> 0, as compiled code
    hot = (np.arange(depth) == np.where(i < 0, i + depth, i)[..., None]) & ((i >= -depth) & (i < depth))[..., None]
    on, off = cast_array(attrs["on_value"], attrs["dtype"]), cast_array(attrs["off_value"], attrs["dtype"])
    return np.moveaxis(np.where(hot, on, off).astype(dt), -1, axis)


defop("one_hot", rel=_one_hot_rel, ref=_one_hot_ref, cost=elementwise_cost(1.0), pattern=INJ, attrs=[
    AttrSpec("depth", "int", doc="number of classes (size of the new axis)"),
    AttrSpec("axis", "int", -1, "position of the new axis in the output"),
    AttrSpec("on_value", "float", 1.0, "value at the index"),
    AttrSpec("off_value", "float", 0.0, "value elsewhere (everywhere, for indices outside [-depth, depth-1])"),
    AttrSpec("dtype", "dtype", "float32", "element type of the result (ONNX: the dtype of `values`)"),
], doc="ONNX OneHot")


def _trilu_rel(args, attrs):
    x = one_tensor(args, "trilu")
    if x.ndim < 2:
        raise RelError(f"trilu: data: expected a tensor of rank >= 2, got {x}")
    return x


defop("trilu", rel=_trilu_rel, cost=move_cost, pattern=INJ,
      ref=lambda args, attrs: (np.triu if attrs["upper"] else np.tril)(args[0], attrs["k"]), attrs=[
          AttrSpec("upper", "bool", True, "keep the upper triangle (j - i >= k), else the lower (j - i <= k)"),
          AttrSpec("k", "int", 0, "diagonal offset"),
      ], doc="ONNX Trilu over the last two dims")


# ---- TE computes ----------------------------------------------------------------------------------


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


@defop.compute("take")
def _take(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    x, idx = inputs
    xs, ish = shape_of(x, "take"), shape_of(idx, "take")
    axis = norm_axis(attrs["axis"], len(xs))
    shape, _ = out_tensor_type(out_type, "take", like=tuple(xs[:axis]) + tuple(ish) + tuple(xs[axis + 1:]))
    ni = len(ish)

    def body(*i: PrimExpr) -> PrimExpr:
        pos = wrap_index(idx[tuple(i[axis:axis + ni])], xs[axis])
        return x[tuple(i[:axis]) + (pos,) + tuple(i[axis + ni:])]

    chk = index_check(ish, lambda *j: idx[j], xs[axis], "take")
    return make("take", shape, body, checks=[chk])


@defop.compute("gather_elements")
def _gather_elements(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    x, idx = inputs
    xs, ish = shape_of(x, "gather_elements"), shape_of(idx, "gather_elements")
    axis = norm_axis(attrs["axis"], len(xs))
    shape, _ = out_tensor_type(out_type, "gather_elements", like=ish)
    # symbolic dims: the indices may not be longer than the data on the other axes (checked when it runs)
    fits = shape_checks("gather_elements", [i <= d for k, (d, i) in enumerate(zip(xs, ish))
                                            if k != axis and not (isinstance(d, int) and isinstance(i, int))])

    def body(*i: PrimExpr) -> PrimExpr:
        pos = wrap_index(idx[i], xs[axis])
        return x[tuple(i[:axis]) + (pos,) + tuple(i[axis + 1:])]

    chk = index_check(ish, lambda *j: idx[j], xs[axis], "gather_elements")
    return make("gather_elements", shape, body, checks=[*fits, chk])


@defop.compute("gather_nd")
def _gather_nd(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    x, idx = inputs
    xs, ish = shape_of(x, "gather_nd"), shape_of(idx, "gather_nd")
    b, m = attrs["batch_dims"], ish[-1]
    shape, _ = out_tensor_type(out_type, "gather_nd", like=tuple(ish[:-1]) + tuple(xs[b + m:]))
    # the batch dims of data and indices must agree when a symbolic dim is among them
    agree = dims_agree("gather_nd", list(zip(xs[:b], ish[:b])))
    nmid = len(ish) - 1 - b  # index dims between the batch dims and the coordinate dim

    def body(*i: PrimExpr) -> PrimExpr:
        batch, mid, rest = tuple(i[:b]), tuple(i[b:b + nmid]), tuple(i[b + nmid:])
        coords = tuple(wrap_index(idx[batch + mid + (j,)], xs[b + j]) for j in range(m))
        return x[batch + coords + rest]

    checks = agree + [index_check(tuple(ish[:-1]), lambda *j, c=c: idx[j + (c,)], xs[b + c], "gather_nd")
                      for c in range(m)]
    return make("gather_nd", shape, body, checks=checks)


@defop.compute("one_hot")
def _one_hot(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (idx,) = inputs
    ish = shape_of(idx, "one_hot")
    depth = attrs["depth"]
    axis = norm_axis(attrs["axis"], len(ish) + 1)
    shape, dtype = out_tensor_type(out_type, "one_hot", like=tuple(ish[:axis]) + (depth,) + tuple(ish[axis:]))
    on, off = scalar_const(attrs["on_value"], dtype), scalar_const(attrs["off_value"], dtype)

    def body(*i: PrimExpr) -> PrimExpr:
        v = tir.cast("int64", idx[tuple(i[:axis]) + tuple(i[axis + 1:])])  # non-integer indices truncate
        hot = tir.all_(v >= -depth, v < depth, tir.eq(tir.select(v < 0, v + depth, v), i[axis]))
        return tir.select(hot, on, off)

    return make("one_hot", shape, body)


@defop.compute("trilu")
def _trilu(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    shape, dtype = out_tensor_type(out_type, "trilu", like=shape_of(x, "trilu"))
    k = attrs["k"]
    zero = scalar_const(0, dtype)

    def body(*i: PrimExpr) -> PrimExpr:
        d = i[-1] - i[-2]
        keep = d >= k if attrs["upper"] else d <= k
        return tir.select(keep, x[i], zero)

    return make("trilu", shape, body)


# ---- ONNX -----------------------------------------------------------------------------------------


def _one_hot_onnx(ex: Any) -> str:
    a = ex.attrs
    values = np.asarray([a["off_value"], a["on_value"]]).astype(DTYPES[a["dtype"]])
    return ex.node("OneHot", [ex.ins[0], ex.const(a["depth"], np.int64, "depth"), ex.const(values, hint="values")],
                   axis=a["axis"])


def _trilu_onnx(ex: Any) -> str:
    return ex.node("Trilu", [ex.ins[0], ex.const(ex.attrs["k"], np.int64, "k")], upper=int(ex.attrs["upper"]))


# imported by the frontend's converters (symbolic shape values, OneHot's depth and values inputs,
# Trilu's k input); exported 1:1 or by code
defop.onnx("take", OnnxMap("Gather", attrs={"axis": "axis"}, convert=False))
defop.onnx("gather_elements", OnnxMap("GatherElements", attrs={"axis": "axis"}, convert=False))
defop.onnx("gather_nd", OnnxMap("GatherND", attrs={"batch_dims": "batch_dims"}, convert=False))
defop.onnx("one_hot", OnnxMap("OneHot", convert=False, export=_one_hot_onnx))
defop.onnx("trilu", OnnxMap("Trilu", convert=False, export=_trilu_onnx))
