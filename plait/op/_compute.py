"""Helpers shared by the operators' TE computes: static shapes, broadcasting, compute dtypes, stage names.

Conventions every compute follows:

- shapes may be symbolic: :func:`shape_of` and :func:`out_tensor_type` give each dimension as an
  ``int`` (static) or an int64 TIR expression (a symbolic dimension ``"N"`` is the size variable
  ``te.size_var("N")``); computes use them as loop extents and in index arithmetic, and test a
  dimension with :func:`is_one` or ``isinstance(d, int)`` (never ``==`` on an expression). An operator
  that truly needs a static value calls :func:`static_shape`, which raises a :class:`ComputeError`
  naming the operator. A result dimension ``"?"`` (nobody can name it) cannot be built from the type:
  such a compute derives it from its inputs' shapes, or :func:`out_tensor_type` refuses it;
- float16 formulas are evaluated in float32 and rounded once at the end (as the numpy references
  do): :func:`up` widens a value to the compute dtype, :func:`down` rounds the result back;
- stages are named ``T_<op>`` (``T_nn_conv2d``) and tagged with the operator name, so that the
  loop annotations name the operator even before lowering calls :func:`plait.te.annotate`;
- a compute does not see the target, only facts lowering states about it (:func:`compute_fact`:
  ``simd_bits``, the vector width of the machine the code is for; ``narrow_macs``, its 16-bit
  multiply-accumulates per instruction): a compute may pick a form by them (an int8 convolution
  packs its input for dot products only where vectors or SMLAD-style instructions use them, not on a
  Cortex-M0 whose RAM the packed copy would take). Without facts (a compute run outside lowering)
  every fact has its default.
"""

from __future__ import annotations

import contextvars
import re
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

from plait import tir
from plait.ir.numeric import cast_array
from plait.ir.types import ANY_DIM, TensorType, TupleType, Type
from plait.te.tensor import TEError, Tensor, compute, comm_reducer, reduce_axis, size_var
from plait.tir.dtype import int_range, is_float, is_int, is_uint
from plait.tir.expr import PrimExpr


class ComputeError(TEError):
    """An operator's compute cannot be built for these types or attributes."""


__all__ = [
    "ComputeError", "Shape", "bcast_dims", "bcast_index", "bcast_shape", "broadcast_checks", "broadcast_pairs",
    "cdtype", "ceil_div", "clamp", "count_checks", "dim_max", "dim_min", "dims_agree", "down", "elementwise",
    "Rows", "highest", "is_float", "is_int", "is_one", "is_uint", "lowest", "make", "max_reducer", "min_reducer",
    "nan_max",
    "nan_min", "out_tensor_type", "relay_shape", "reshaped_type", "same_dims", "scalar_const", "shape_checks",
    "shape_of", "stage", "static_shape", "tir", "up",
]


_FACTS: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar("plait_compute_facts", default={})


def compute_fact(name: str, default: Any = None) -> Any:
    """A fact lowering stated about the machine the computes being built are for, else ``default``."""
    return _FACTS.get().get(name, default)


@contextmanager
def compute_facts(**facts: Any) -> Iterator[None]:
    """State ``facts`` for the computes built inside (lowering does, per function and target)."""
    token = _FACTS.set({**_FACTS.get(), **facts})
    try:
        yield
    finally:
        _FACTS.reset(token)


def static_shape(shape: Sequence[Any], op: str, what: str = "shape") -> tuple[int, ...]:
    """``shape`` as ints; raises for symbolic dimensions (for operators that need static values)."""
    out = []
    for d in shape:
        if not isinstance(d, int):
            raise ComputeError(f"{op}: {what} {_dims(shape)} has a symbolic dimension "
                               f"'{d}': this operator needs static shapes")
        out.append(d)
    return tuple(out)


Shape = tuple  # of int | PrimExpr: a static dimension or an int64 expression of size variables


def _dims(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(x) for x in shape) + ("," if len(shape) == 1 else "") + ")"


def out_tensor_type(out_type: Type, op: str, index: int | None = None,
                    like: Sequence[Any] | None = None) -> tuple[Shape, str]:
    """(shape, dtype) of the result type (field ``index`` of a tuple result): static dims as ints, a
    symbolic dim ``"N"`` as the size variable ``N``; an unknown dim ``"?"`` is dim ``k`` of ``like``,
    the shape the compute derived from its inputs (ints and int64 expressions: the output length of a
    window over a symbolic axis, a slice's clamped length, ...); without ``like`` it raises."""
    t = out_type.fields[index] if isinstance(out_type, TupleType) and index is not None else out_type
    if not isinstance(t, TensorType):
        raise ComputeError(f"{op}: expected a tensor result type, got {t}")
    if like is not None and len(like) != t.ndim:
        raise ComputeError(f"{op}: the compute's shape {_dims(like)} does not have the rank of the result {t}")
    for d in t.shape:
        if d == ANY_DIM and like is None:
            raise ComputeError(f"{op}: result shape {_dims(t.shape)} has an unknown dimension '?' that the "
                               "inputs' shapes do not give")
    return tuple(d if isinstance(d, int) else like[k] if d == ANY_DIM else size_var(d)  # type: ignore[index]
                 for k, d in enumerate(t.shape)), t.dtype


def dim_min(a: Any, b: Any) -> Any:
    """``min(a, b)`` of two dims or dim expressions (ints stay ints)."""
    return min(a, b) if isinstance(a, int) and isinstance(b, int) else tir.min(a, b)


def dim_max(a: Any, b: Any) -> Any:
    """``max(a, b)`` of two dims or dim expressions (ints stay ints)."""
    return max(a, b) if isinstance(a, int) and isinstance(b, int) else tir.max(a, b)


def ceil_div(a: Any, b: int) -> Any:
    """``ceil(a / b)`` for a dim or dim expression ``a >= 0`` and an int ``b > 0``."""
    return a if b == 1 else -(-a // b) if isinstance(a, int) else (a + (b - 1)) // b


def same_dims(a: Any, b: Any) -> bool:
    """Are the dims ``a`` and ``b`` known to be equal (equal ints, or the same expression)?"""
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    from plait.tir.equal import structural_equal

    return a is b or structural_equal(a, b)


def dims_agree(op: str, pairs: Sequence[tuple[Any, Any]]) -> list[Any]:
    """Run-time checks (``te.check``) that each pair of dims is equal where that is not known when the
    function is built (a symbolic dim against a static one or another symbolic one): the function stops
    with :data:`plait.ir.status.SHAPE_MISMATCH` instead of reading out of bounds."""
    return shape_checks(op, [tir.eq(a, b) for a, b in pairs if not same_dims(a, b)])


def shape_checks(op: str, conds: Sequence[Any]) -> list[Any]:
    """One run-time check (``te.check``) that every condition on the inputs' dims holds, else the function
    stops with :data:`plait.ir.status.SHAPE_MISMATCH` (no check without conditions)."""
    from plait.ir.status import SHAPE_MISMATCH
    from plait.te.tensor import check

    if not conds:
        return []
    return [check((), lambda: tir.all_(*conds), SHAPE_MISMATCH, f"{op}_shapes")]


def shape_of(t: Tensor, op: str) -> Shape:
    """The shape of the tensor ``t`` (ints and int64 expressions; ``op`` is kept for symmetry with
    :func:`static_shape`)."""
    del op
    return tuple(t.shape)


def relay_shape(shape: Shape) -> tuple[int | str, ...]:
    """A TE shape as Relay dims (a size variable -> its name, another expression -> ``"?"``), for the
    helpers shared with type relations (axes normalization, slicing plans...)."""
    from plait.tir.expr import Var

    return tuple(d if isinstance(d, int) else d.name if isinstance(d, Var) else ANY_DIM for d in shape)


def reshaped_type(out_type: Any, in_shape: Sequence[Any], op: str) -> tuple[tuple[Any, ...], str]:
    """The result (shape, dtype) of a reshape of ``in_shape``: one unknown result dim ``"?"`` (a -1 or
    a flatten over a symbolic batch) is the input's element count over the other result dims'."""
    if not isinstance(out_type, TensorType) or list(out_type.shape).count(ANY_DIM) != 1:
        return out_tensor_type(out_type, op)
    k = list(out_type.shape).index(ANY_DIM)
    known, dtype = out_tensor_type(TensorType(tuple(1 if j == k else d for j, d in enumerate(out_type.shape)),
                                              out_type.dtype), op)
    static, rest = 1, 1
    syms = [d for d in in_shape if not isinstance(d, int)]
    rest_syms = []
    for d in in_shape:
        static *= d if isinstance(d, int) else 1
    for j, d in enumerate(known):
        if j == k:
            continue
        if isinstance(d, int):
            rest *= d
        elif any(s is d for s in syms):  # a dim kept (N -> N): cancels out
            syms.remove(next(s for s in syms if s is d))
        else:
            rest_syms.append(d)
    symbolic: Any = None
    for d in syms:
        symbolic = d if symbolic is None else symbolic * d
    if rest_syms or symbolic is None or static % rest:  # the general case: divide at run time
        total: Any = static if symbolic is None else symbolic * static
        for d in rest_syms:
            rest = rest * d
        dim: Any = total // rest
    else:  # (static / rest) * N: no division at run time
        dim = symbolic if static == rest else symbolic * (static // rest)
    return tuple(dim if j == k else d for j, d in enumerate(known)), dtype


def count_checks(op: str, in_shape: Sequence[Any], out_shape: Sequence[Any]) -> list[Any]:
    """The run-time check (:func:`shape_checks`) that a reshape keeps the element count, unless that is known
    when the function is built: the same static product and the same symbolic factors on both sides (a -1
    inferred as ``total // rest`` does not divide when the check fails)."""
    def split(shape: Sequence[Any]) -> tuple[int, list[Any]]:
        static, syms = 1, []
        for d in shape:
            if isinstance(d, int):
                static *= d
            else:
                syms.append(d)
        return static, syms

    (s_in, sym_in), (s_out, sym_out) = split(in_shape), split(out_shape)
    rest = list(sym_out)
    for d in sym_in:
        match = next((k for k, e in enumerate(rest) if same_dims(d, e)), None)
        if match is None:
            break
        del rest[match]
    else:
        if not rest and s_in == s_out:
            return []
    total_in: Any = s_in
    for d in sym_in:
        total_in = total_in * d
    total_out: Any = s_out
    for d in sym_out:
        total_out = total_out * d
    return shape_checks(op, [tir.eq(total_in, total_out)])


def is_one(d: Any) -> bool:
    """Is the dimension ``d`` statically 1 (a symbolic dimension never counts as 1)?"""
    return isinstance(d, int) and d == 1


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


def bcast_shape(shapes: Sequence[Shape]) -> Shape:
    """The numpy broadcast of ``shapes`` (right-aligned; a dim that is not statically 1 wins)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[Any] = [1] * rank
    for s in shapes:
        for k, d in enumerate(s):
            if not is_one(d):
                out[rank - len(s) + k] = d
    return tuple(out)


def bcast_dims(shape: Sequence[Any], idx: Sequence[PrimExpr]) -> tuple[Any, ...]:
    """The index into an array of ``shape`` (aligned right) broadcast to index ``idx`` (a symbolic
    dimension is not broadcast: type inference unified it with the result's)."""
    off = len(idx) - len(shape)
    return tuple(0 if is_one(d) else idx[off + k] for k, d in enumerate(shape))


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


class Rows:
    """The rows of ``x`` along ``axis`` for a row-wise compute (the fixed-point softmaxes, norms): ``shape``
    is a per-row result's (the axis kept as 1), ``n`` a row's length, ``at(i, k)`` the index ``i`` with
    the axis at ``k``; :meth:`max` the int32 row maximum as a stage of its own."""

    def __init__(self, op: str, x: Tensor, shape: Sequence[Any], axis: int):
        self.op, self.x, self.axis = op, x, axis
        self.shape = tuple(1 if k == axis else d for k, d in enumerate(shape))
        self.n = shape[axis]

    def at(self, i: Sequence[Any], k: Any) -> tuple:
        return tuple(i[:self.axis]) + (k,) + tuple(i[self.axis + 1:])

    def max(self) -> Tensor:
        def body(*i: PrimExpr) -> Any:
            r = reduce_axis((0, self.n), "k")
            return max_reducer(tir.cast("int32", self.x[self.at(i, r)]), axis=[r])
        return make(self.op, self.shape, body, "max", inline=False)


def clamp(e: PrimExpr, lo: Any, hi: Any) -> PrimExpr:
    """``min(max(e, lo), hi)`` for integer index expressions."""
    return tir.min(tir.max(e, lo), hi)


def elementwise(op: str, inputs: Sequence[Tensor], out_type: Type,
                fn: Callable[..., PrimExpr]) -> Tensor:
    """A broadcasting elementwise stage: ``fn(*loaded values)`` at every output index (an unknown result
    dim ``"?"`` is the inputs' broadcast dim: an expression of their size variables)."""
    if isinstance(out_type, TensorType) and ANY_DIM in out_type.shape:
        shape, dtype = bcast_shape([x.shape for x in inputs]), out_type.dtype
        if len(shape) != out_type.ndim:  # pragma: no cover - type inference gave this rank
            raise ComputeError(f"{op}: the inputs broadcast to rank {len(shape)}, the result has rank {out_type.ndim}")
    else:
        shape, dtype = out_tensor_type(out_type, op)

    def body(*i: PrimExpr) -> PrimExpr:
        vals = [x[bcast_index(x, i, op)] for x in inputs]
        return tir.cast(dtype, fn(*vals))

    return make(op, shape, body, checks=broadcast_checks(op, [x.shape for x in inputs], shape))


def broadcast_checks(op: str, shapes: Sequence[Shape], out: Shape) -> list[Any]:
    """Run-time checks that every dim of ``shapes`` that is not statically 1 equals the result's dim it
    is aligned with (right-aligned broadcasting): a symbolic dim is never broadcast, so one that differs
    at run time stops the function (:func:`dims_agree`) instead of reading out of bounds."""
    return dims_agree(op, broadcast_pairs(shapes, out))


def broadcast_pairs(shapes: Sequence[Shape], out: Shape) -> list[tuple[Any, Any]]:
    """The (dim, result dim) pairs :func:`broadcast_checks` checks (for :func:`dims_agree` with others)."""
    pairs = []
    for s in shapes:
        off = len(out) - len(s)
        pairs += [(d, out[off + k]) for k, d in enumerate(s) if not is_one(d)]
    return pairs
