"""Tensor expressions: placeholders, index-lambda computes, reduce axes and reducers.

A :class:`Tensor` is a named n-d array produced by an operation: a :class:`PlaceholderOp` (an input)
or a :class:`ComputeOp` (``te.compute(shape, lambda i, j: expr)``). Indexing a tensor, ``T[i, j]``,
gives a TIR ``BufferLoad`` of the tensor's buffer (:attr:`Tensor.buffer`), so compute bodies are
ordinary TIR expressions; :func:`plait.te.create_prim_func` turns the stages into loop nests,
inlining injective stages and resolving those loads.

A reduction (``te.sum(expr, axis=[k])``, ``te.max``, ``te.min`` or a :func:`comm_reducer`) must be
the whole body of a compute: apply anything after it (a mean's division, a bias) in a second
compute, which ``create_prim_func`` fuses as an epilogue. Reduce axes are TIR variables made by
:func:`reduce_axis`; :func:`axis_range` gives their ``(min, extent)``.

Shapes are tuples of ints (static dimensions) and int64 TIR expressions (symbolic ones, e.g.
``te.size_var("n")``).
"""

from __future__ import annotations

import inspect
import re
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from plait.errors import PlaitError
from plait.ir.attrs import Attrs
from plait.tir import op as _op
from plait.tir.dtype import int_range, is_float, is_int
from plait.tir.expr import BufferLoad, IntImm, PrimExpr, Var, const
from plait.tir.functor import pre_order
from plait.tir.stmt import Buffer


class TEError(PlaitError):
    """A tensor expression is ill-formed (wrong index count, misplaced reduction, ...)."""


def _norm_dim(d: Any, what: str) -> int | PrimExpr:
    if isinstance(d, IntImm):
        return d.value
    if isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)):
        if d < 0:
            raise TEError(f"{what}: dimensions must be >= 0, got {int(d)}")
        return int(d)
    if isinstance(d, str):
        return size_var(d)
    if isinstance(d, PrimExpr) and is_int(d.dtype):
        return d if d.dtype == "int64" else _op.cast("int64", d)
    raise TEError(f"{what}: a dimension must be an int or an integer expression, got {d!r}")


def _norm_shape(shape: Any, what: str) -> tuple[int | PrimExpr, ...]:
    if isinstance(shape, (int, np.integer, PrimExpr, str)):
        shape = (shape,)
    return tuple(_norm_dim(d, what) for d in shape)


_SIZE_VARS: dict[str, Var] = {}


def size_var(name: str) -> Var:
    """The int64 variable for the symbolic dimension ``name`` (one object per name)."""
    v = _SIZE_VARS.get(name)
    if v is None:
        v = _SIZE_VARS[name] = Var(name, "int64")
    return v


def _index(i: Any, what: str) -> PrimExpr:
    if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
        return IntImm(int(i), "int64")
    if isinstance(i, PrimExpr) and is_int(i.dtype):
        return i if i.dtype == "int64" else _op.cast("int64", i)
    raise TEError(f"{what}: an index must be an int or an integer expression, got {i!r}")


# buffer -> tensor, so that a compute body's loads can be traced back to the tensors they read
_TENSOR_OF_BUFFER: "weakref.WeakValueDictionary[int, Tensor]" = weakref.WeakValueDictionary()


class Tensor:
    """An n-d array computed by ``op`` (output number ``value_index`` of it)."""

    def __init__(self, op: "Operation", value_index: int, shape: tuple, dtype: str, name: str):
        self.op = op
        self.value_index = value_index
        self.shape: tuple[int | PrimExpr, ...] = shape
        self.dtype = dtype
        self.name = name
        self.buffer = Buffer(name, shape, dtype)
        _TENSOR_OF_BUFFER[id(self.buffer)] = self

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as ints, or None if a dimension is symbolic."""
        return tuple(self.shape) if all(isinstance(d, int) for d in self.shape) else None  # type: ignore

    def __getitem__(self, indices: Any) -> BufferLoad:
        idx = indices if isinstance(indices, tuple) else (indices,)
        if len(idx) != len(self.shape):
            raise TEError(f"tensor '{self.name}' has {len(self.shape)} dimension(s), indexed with {len(idx)}")
        return BufferLoad(self.buffer, tuple(_index(i, f"tensor '{self.name}'") for i in idx))

    def __call__(self, *indices: Any) -> BufferLoad:
        return self[indices]

    def __repr__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"Tensor({self.name}: ({dims}), {self.dtype})"

    __hash__ = object.__hash__


def tensor_of_buffer(buffer: Buffer) -> Tensor | None:
    """The tensor whose buffer is ``buffer`` (None for buffers TE did not make)."""
    t = _TENSOR_OF_BUFFER.get(id(buffer))
    return t if t is not None and t.buffer is buffer else None


class Operation:
    """Base class: what produces tensors. ``outputs`` are the tensors it makes."""

    name: str
    outputs: tuple[Tensor, ...]

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return ()


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple, dtype: str):
        self.name = name
        self.outputs = (Tensor(self, 0, shape, dtype, name),)

    def __repr__(self) -> str:
        return f"PlaceholderOp({self.name})"


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of ``shape`` and ``dtype``."""
    from plait.tir.dtype import check_dtype

    try:
        check_dtype(dtype, f"placeholder '{name}'")
    except PlaitError as exc:
        raise TEError(str(exc)) from None
    return PlaceholderOp(name, _norm_shape(shape, f"placeholder '{name}'"), dtype).outputs[0]


# ---- reduce axes and reducers ----------------------------------------------------------------------

_AXIS_RANGE: "weakref.WeakKeyDictionary[Var, tuple[PrimExpr, PrimExpr]]" = weakref.WeakKeyDictionary()


def reduce_axis(dom: Any, name: str = "k") -> Var:
    """A reduce axis over ``range(lo, hi)`` (``dom`` is ``(lo, hi)`` or ``hi``): an int64 TIR variable."""
    if isinstance(dom, (tuple, list)):
        if len(dom) != 2:
            raise TEError(f"reduce_axis '{name}': expected (lo, hi), got {dom!r}")
        lo, hi = dom
    else:
        lo, hi = 0, dom
    lo_e, hi_e = _index(lo, f"reduce_axis '{name}'"), _index(hi, f"reduce_axis '{name}'")
    v = Var(name, "int64")
    extent = IntImm(hi_e.value - lo_e.value, "int64") if isinstance(lo_e, IntImm) and isinstance(hi_e, IntImm) \
        else hi_e - lo_e
    if isinstance(extent, IntImm) and extent.value < 0:
        raise TEError(f"reduce_axis '{name}': empty range ({lo}, {hi}) has hi < lo")
    _AXIS_RANGE[v] = (lo_e, extent)
    return v


def axis_range(axis: Var) -> tuple[PrimExpr, PrimExpr]:
    """``(min, extent)`` of a reduce axis made by :func:`reduce_axis`."""
    r = _AXIS_RANGE.get(axis) if isinstance(axis, Var) else None
    if r is None:
        raise TEError(f"{axis!r} is not a reduce axis (make one with te.reduce_axis)")
    return r


@dataclass(frozen=True, eq=False)
class CommReducer:
    """A commutative reducer over tuples of values: ``combine(lhs, rhs) -> tuple`` and
    ``identity(dtypes) -> tuple`` (one element per value). Call it like ``te.sum``:
    ``argmax((k, X[i, k]), axis=k)`` reduces the pair and makes a compute with two outputs."""

    name: str
    combine: Callable[[tuple[PrimExpr, ...], tuple[PrimExpr, ...]], tuple]
    identity: Callable[[tuple[str, ...]], tuple]

    def __call__(self, source: Any, axis: Any, where: Any = None) -> "Reduce":
        srcs = tuple(source) if isinstance(source, (tuple, list)) else (source,)
        exprs = []
        for k, s in enumerate(srcs):
            if isinstance(s, Reduce):
                raise TEError(f"te.{self.name}: nested reductions are not supported (use two computes)")
            if not isinstance(s, PrimExpr):
                raise TEError(f"te.{self.name}: value {k} must be a TIR expression, got {s!r}")
            exprs.append(s)
        axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
        for a in axes:
            axis_range(a)
        if not axes:
            raise TEError(f"te.{self.name}: no reduce axis given")
        cond = None
        if where is not None:
            if not isinstance(where, PrimExpr):
                raise TEError(f"te.{self.name}: 'where' must be a bool TIR expression, got {where!r} (note that "
                              "== on expressions is identity: use tir.eq)")
            cond = where
            if cond.dtype != "bool":
                raise TEError(f"te.{self.name}: 'where' must be a bool expression, got {cond.dtype}")
        return Reduce(self, tuple(exprs), axes, cond)

    def identity_values(self, dtypes: tuple[str, ...]) -> tuple[PrimExpr, ...]:
        vals = tuple(self.identity(dtypes))
        return tuple(_op.convert(v, d, f"te.{self.name} identity") for v, d in zip(vals, dtypes))

    def combine_values(self, lhs: tuple[PrimExpr, ...], rhs: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        out = self.combine(lhs, rhs)
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(out) != len(lhs):
            raise TEError(f"reducer '{self.name}' combines {len(lhs)} value(s) into {len(out)}")
        return tuple(_op.convert(v, l.dtype, f"reducer '{self.name}'") for v, l in zip(out, lhs))


class Reduce:
    """A reduction: the whole body of a compute. Not an expression: arithmetic on it is an error."""

    def __init__(self, combiner: CommReducer, source: tuple[PrimExpr, ...], axis: tuple[Var, ...],
                 condition: PrimExpr | None):
        self.combiner, self.source, self.axis, self.condition = combiner, source, axis, condition

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(s.dtype for s in self.source)

    def _misuse(self, *_: Any) -> Any:
        raise TEError(f"te.{self.combiner.name}(...) must be the whole body of a compute; apply further "
                      "arithmetic in a second te.compute (it is fused as an epilogue)")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _misuse
    __neg__ = __lt__ = __le__ = __gt__ = __ge__ = __getitem__ = _misuse

    def __repr__(self) -> str:
        return f"Reduce({self.combiner.name}, axes={[a.name for a in self.axis]})"


def comm_reducer(combine: Callable, identity: Callable, name: str = "reduce") -> CommReducer:
    """Make a reducer; see :class:`CommReducer`."""
    return CommReducer(name, combine, identity)


def _lowest(dtype: str) -> Any:
    return -np.inf if is_float(dtype) else int_range(dtype)[0]


def _highest(dtype: str) -> Any:
    return np.inf if is_float(dtype) else int_range(dtype)[1]


def _zero(dtype: str) -> Any:
    return 0.0 if is_float(dtype) else False if dtype == "bool" else 0


def _one(dtype: str) -> Any:
    return 1.0 if is_float(dtype) else True if dtype == "bool" else 1


sum = comm_reducer(lambda a, b: (a[0] + b[0],), lambda d: (_zero(d[0]),), "sum")  # noqa: A001
prod = comm_reducer(lambda a, b: (a[0] * b[0],), lambda d: (_one(d[0]),), "prod")
max = comm_reducer(lambda a, b: (_op.max(a[0], b[0]),), lambda d: (_lowest(d[0]),), "max")  # noqa: A001
min = comm_reducer(lambda a, b: (_op.min(a[0], b[0]),), lambda d: (_highest(d[0]),), "min")  # noqa: A001


def _arg_combine(better: Callable[[PrimExpr, PrimExpr], PrimExpr]) -> Callable:
    def combine(a: tuple, b: tuple) -> tuple:
        # (index, value); the first index wins ties: take b only if strictly better, or equal with a smaller index
        take = _op.logical_or(better(b[1], a[1]), _op.logical_and(_op.eq(b[1], a[1]), b[0] < a[0]))
        return (_op.select(take, b[0], a[0]), _op.select(take, b[1], a[1]))
    return combine


argmax = comm_reducer(_arg_combine(_op.gt), lambda d: (_highest(d[0]), _lowest(d[1])), "argmax")
"""``argmax((index, value), axis=k)``: two outputs (index of the first maximum, the maximum)."""
argmin = comm_reducer(_arg_combine(_op.lt), lambda d: (_highest(d[0]), _highest(d[1])), "argmin")


# ---- compute ----------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"[^A-Za-z0-9_]")


class ComputeOp(Operation):
    """A stage: ``body[v](*axis)`` for each output ``v`` over the iteration space ``shape``.

    ``axis`` are the int64 variables of the spatial dimensions; ``body`` is a tuple of expressions,
    or a single :class:`Reduce` (``reduce_axis`` lists its axes). ``op_name`` / ``pattern`` are what
    ``create_prim_func`` puts in the stage's loop annotations (set by lowering with :func:`annotate`).
    """

    def __init__(self, name: str, tag: str, attrs: Attrs, axis: tuple[Var, ...], shape: tuple,
                 body: tuple[PrimExpr, ...] | Reduce, checks: tuple["Check", ...] = ()):
        self.name, self.tag, self.attrs = name, tag, attrs
        self.axis, self.shape, self.body = axis, shape, body
        self.checks = checks
        self.op_name: str | None = None
        self.pattern: str | None = None
        dtypes = body.dtypes if isinstance(body, Reduce) else tuple(b.dtype for b in body)
        n = len(dtypes)
        self.outputs = tuple(Tensor(self, k, shape, d, name if n == 1 else f"{name}.v{k}")
                             for k, d in enumerate(dtypes))
        self._inputs = self._find_inputs()

    @property
    def is_reduction(self) -> bool:
        return isinstance(self.body, Reduce)

    @property
    def reduce_axis(self) -> tuple[Var, ...]:
        return self.body.axis if isinstance(self.body, Reduce) else ()

    def exprs(self) -> tuple[PrimExpr, ...]:
        """Every expression of the body (sources, condition, reduce-axis ranges)."""
        if isinstance(self.body, Reduce):
            extra = (self.body.condition,) if self.body.condition is not None else ()
            rng = tuple(e for a in self.body.axis for e in axis_range(a))
            return self.body.source + extra + rng
        return self.body

    def _find_inputs(self) -> tuple[Tensor, ...]:
        out: dict[Tensor, None] = {}
        for e in self.exprs() + tuple(c.cond for c in self.checks):
            for n in pre_order(e):
                if isinstance(n, BufferLoad):
                    t = tensor_of_buffer(n.buffer)
                    if t is None:
                        raise TEError(f"compute '{self.name}' loads buffer '{n.buffer.name}', which is not a "
                                      "tensor's buffer (index te tensors: T[i, j])")
                    out.setdefault(t, None)
        return tuple(out)

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return self._inputs

    def __repr__(self) -> str:
        return f"ComputeOp({self.name})"


@dataclass(frozen=True, eq=False)
class Check:
    """A run-time check of a stage's inputs: ``cond`` (over ``axis``) must hold at every index of
    ``shape``, else the function stops and returns ``status`` (:mod:`plait.ir.status`). Build it with
    :func:`check`; pass it to :func:`compute` with ``checks=``."""

    axis: tuple[Var, ...]
    shape: tuple
    cond: PrimExpr
    status: int


def check(shape: Any, fcond: Callable[..., Any], status: int, name: str = "check") -> Check:
    """A :class:`Check` that ``fcond(*indices)`` (a bool expression over the inputs) holds at every
    index of ``shape``. The generated code tests it in a serial loop of its own, before the stage
    that carries it runs."""
    shp = _norm_shape(shape, f"check '{name}'")
    axis = tuple(Var(n, "int64") for n in _axis_names(fcond, len(shp)))
    cond = fcond(*axis)
    if not isinstance(cond, PrimExpr) or cond.dtype != "bool":
        raise TEError(f"check '{name}': the condition must be a bool TIR expression, got {cond!r}")
    if isinstance(status, bool) or not isinstance(status, int) or status < 1:
        raise TEError(f"check '{name}': status must be an int >= 1, got {status!r}")
    return Check(axis, shp, cond, status)


def _axis_names(fcompute: Callable, ndim: int) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if len(params) == ndim and all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        return [p.name for p in params]
    return [f"ax{k}" for k in range(ndim)]


def compute(shape: Any, fcompute: Callable[..., Any], name: str = "compute", tag: str = "",
            attrs: Mapping[str, Any] | None = None, checks: Sequence[Check] = ()) -> Any:
    """A stage computing ``fcompute(*indices)`` at every index of ``shape``.

    ``fcompute`` takes one int64 variable per dimension and returns an expression (or a Python
    number... of float32/int64), a tuple of expressions (several outputs), or a reduction. Returns
    the output :class:`Tensor`, or a list of tensors for several outputs. ``tag`` and ``attrs`` are
    free-form information for schedules; ``attrs={"inline": False}`` keeps an injective stage from
    being inlined into its consumers. ``checks`` (:func:`check`) are run-time conditions on the
    inputs that must hold before the stage runs (an index in range, ...).
    """
    if not isinstance(name, str) or not name:
        raise TEError(f"compute: name must be a non-empty str, got {name!r}")
    shp = _norm_shape(shape, f"compute '{name}'")
    names = _axis_names(fcompute, len(shp))
    axis = tuple(Var(n, "int64") for n in names)
    body = fcompute(*axis)
    if isinstance(body, Reduce):
        norm: tuple[PrimExpr, ...] | Reduce = body
    else:
        items = tuple(body) if isinstance(body, (tuple, list)) else (body,)
        if not items:
            raise TEError(f"compute '{name}': the body has no value")
        out = []
        for k, b in enumerate(items):
            if isinstance(b, Reduce):
                raise TEError(f"compute '{name}': a reduction must be the whole body of a compute "
                              "(one te.sum/max/min or a comm_reducer call over a tuple)")
            out.append(const(b) if isinstance(b, (int, float, bool, np.number, np.bool_)) else b)
            if not isinstance(out[-1], PrimExpr):
                raise TEError(f"compute '{name}': value {k} must be a TIR expression, got {b!r}")
        norm = tuple(out)
    for c in checks:
        if not isinstance(c, Check):
            raise TEError(f"compute '{name}': checks must be te.check(...) results, got {c!r}")
    op = ComputeOp(name, tag, Attrs(attrs or {}), axis, shp, norm, tuple(checks))
    return op.outputs[0] if len(op.outputs) == 1 else list(op.outputs)


def annotate(outputs: Iterable[Tensor], inputs: Sequence[Tensor], op_name: str, pattern: str | None = None) -> None:
    """Set ``op_name`` on every stage between ``inputs`` and ``outputs`` that has none yet; the
    stages producing ``outputs`` get ``pattern`` (the others: ``reduction`` or ``injective``)."""
    stop = {t.op for t in inputs}
    outs = list(outputs)
    final = {t.op for t in outs}
    for op in _stages(outs, stop):
        if isinstance(op, ComputeOp) and op.op_name is None:
            op.op_name = op_name
            if op in final and pattern is not None:
                op.pattern = pattern


def _stages(outputs: Sequence[Tensor], stop: set | None = None) -> list[Operation]:
    """Operations reachable from ``outputs`` (not crossing ``stop``), producers first."""
    stop = stop or set()
    order: list[Operation] = []
    seen: set[Operation] = set()
    stack: list[tuple[Operation, bool]] = [(t.op, False) for t in reversed(list(outputs))]
    while stack:
        op, expanded = stack.pop()
        if expanded:
            order.append(op)
            continue
        if op in seen:
            continue
        seen.add(op)
        stack.append((op, True))
        if op not in stop:
            stack.extend((t.op, False) for t in reversed(op.input_tensors) if t.op not in seen)
    return order


def stage_name(name: str) -> str:
    """``name`` made into an identifier (for loop variable names)."""
    s = _NAME_RE.sub("_", name) or "stage"
    return "_" + s if s[0].isdigit() else s
