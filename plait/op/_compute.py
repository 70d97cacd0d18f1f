"""Helpers shared by the operators' TE computes: static shapes, broadcasting, compute dtypes, stage names.

Conventions every compute follows:

- shapes are static (lowering runs after shapes are known); a symbolic dimension raises a
  :class:`ComputeError` naming the operator;
- float16 formulas are evaluated in float32 and rounded once at the end (as the numpy references
  do): :func:`up` widens a value to the compute dtype, :func:`down` rounds the result back;
- stages are named ``T_<op>`` (``T_nn_conv2d``) and tagged with the operator name, so that the
  loop annotations name the operator even before lowering calls :func:`plait.te.annotate`.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from plait import tir
from plait.ir.numeric import cast_array
from plait.ir.types import TensorType, TupleType, Type
from plait.te.tensor import TEError, Tensor, compute, comm_reducer
from plait.tir.dtype import int_range, is_float, is_int, is_uint
from plait.tir.expr import PrimExpr


class ComputeError(TEError):
    """An operator's compute cannot be built for these types or attributes."""


__all__ = [
    "ComputeError", "bcast_dims", "bcast_index", "cdtype", "clamp", "down", "elementwise", "highest", "is_float",
    "is_int", "is_uint", "lowest", "make", "max_reducer", "min_reducer", "nan_max", "nan_min", "out_tensor_type",
    "scalar_const", "shape_of", "stage", "static_shape", "tir", "up",
]


def static_shape(shape: Sequence[Any], op: str, what: str = "shape") -> tuple[int, ...]:
    """``shape`` as ints; raises for symbolic dimensions."""
    out = []
    for d in shape:
        if not isinstance(d, int):
            dims = "(" + ", ".join(str(x) for x in shape) + ("," if len(shape) == 1 else "") + ")"
            raise ComputeError(f"{op}: {what} {dims} has a symbolic dimension "
                               f"'{d}': lowering needs static shapes")
        out.append(d)
    return tuple(out)


def out_tensor_type(out_type: Type, op: str, index: int | None = None) -> tuple[tuple[int, ...], str]:
    """(static shape, dtype) of the result type (field ``index`` of a tuple result)."""
    t = out_type.fields[index] if isinstance(out_type, TupleType) and index is not None else out_type
    if not isinstance(t, TensorType):
        raise ComputeError(f"{op}: expected a tensor result type, got {t}")
    return static_shape(t.shape, op, "result shape"), t.dtype


def shape_of(t: Tensor, op: str) -> tuple[int, ...]:
    return static_shape(t.shape, op, f"input '{t.name}' shape")


_NAME_RE = re.compile(r"[^A-Za-z0-9_]")


def stage(op: str, suffix: str = "") -> str:
    """The stage name of operator ``op`` (``nn.conv2d`` -> ``T_nn_conv2d``), with an optional suffix."""
    return "T_" + _NAME_RE.sub("_", op) + (f"_{suffix}" if suffix else "")


def make(op: str, shape: Sequence[int], fcompute: Callable[..., Any], suffix: str = "",
         inline: bool = True, checks: Sequence[Any] = ()) -> Any:
    """``te.compute`` named and tagged after ``op`` (``checks``: run-time checks, ``te.check``)."""
    attrs = None if inline else {"inline": False}
    return compute(tuple(shape), fcompute, name=stage(op, suffix), tag=op, attrs=attrs, checks=checks)


def bcast_index(t: Tensor, idx: Sequence[PrimExpr], op: str = "") -> tuple[Any, ...]:
    """The index of ``t`` read at output index ``idx`` under numpy broadcasting (size-1 dims -> 0)."""
    return bcast_dims(shape_of(t, op), idx)


def bcast_dims(shape: Sequence[int], idx: Sequence[PrimExpr]) -> tuple[Any, ...]:
    """The index into an array of ``shape`` (aligned right) broadcast to index ``idx``."""
    off = len(idx) - len(shape)
    return tuple(0 if d == 1 else idx[off + k] for k, d in enumerate(shape))


# ---- dtypes --------------------------------------------------------------------------------------


def cdtype(dtype: str) -> str:
    """The dtype a formula is evaluated in: float32 for float16, else ``dtype``."""
    return "float32" if dtype == "float16" else dtype


def up(e: PrimExpr) -> PrimExpr:
    """``e`` in its compute dtype (float16 -> float32)."""
    return tir.cast("float32", e) if e.dtype == "float16" else e


def down(e: PrimExpr, dtype: str) -> PrimExpr:
    """``e`` rounded to the result dtype."""
    return tir.cast(dtype, e)


def scalar_const(value: Any, dtype: str) -> PrimExpr:
    """The attribute ``value`` converted to ``dtype`` as the references convert it
    (:func:`plait.ir.numeric.cast_array`; a TIR immediate: a float too large for a float dtype
    becomes inf, one beyond an integer dtype saturates)."""
    v = cast_array(value, dtype)[()]
    return tir.const(bool(v) if dtype == "bool" else float(v) if is_float(dtype) else int(v), dtype)


def lowest(dtype: str) -> Any:
    return float("-inf") if is_float(dtype) else int_range(dtype)[0]


def highest(dtype: str) -> Any:
    return float("inf") if is_float(dtype) else int_range(dtype)[1]


def nan_max(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``numpy.maximum``: NaN propagates from either side (floats); plain max otherwise."""
    if is_float(a.dtype):
        return tir.select(tir.logical_or(tir.isnan(a), a > b), a, b)
    return tir.max(a, b)


def nan_min(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``numpy.minimum``: NaN propagates from either side (floats); plain min otherwise."""
    if is_float(a.dtype):
        return tir.select(tir.logical_or(tir.isnan(a), a < b), a, b)
    return tir.min(a, b)


# reducers with numpy's NaN propagation (te.max / te.min drop a NaN that is followed by a number)
max_reducer = comm_reducer(lambda a, b: (nan_max(a[0], b[0]),), lambda d: (lowest(d[0]),), "max")
min_reducer = comm_reducer(lambda a, b: (nan_min(a[0], b[0]),), lambda d: (highest(d[0]),), "min")


def clamp(e: PrimExpr, lo: Any, hi: Any) -> PrimExpr:
    """``min(max(e, lo), hi)`` for integer index expressions."""
    return tir.min(tir.max(e, lo), hi)


def elementwise(op: str, inputs: Sequence[Tensor], out_type: Type,
                fn: Callable[..., PrimExpr]) -> Tensor:
    """A broadcasting elementwise stage: ``fn(*loaded values)`` at every output index."""
    shape, dtype = out_tensor_type(out_type, op)

    def body(*i: PrimExpr) -> PrimExpr:
        vals = [x[bcast_index(x, i, op)] for x in inputs]
        return tir.cast(dtype, fn(*vals))

    return make(op, shape, body)
