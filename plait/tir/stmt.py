"""TIR statements and PrimFunc.

A :class:`Buffer` (defined in :mod:`plait.tir.expr`, with the expressions that read it) is a dense, row-major array of ``dtype`` with a storage ``scope``; buffers are
compared by identity. A PrimFunc's parameters are buffers and scalar :class:`Var` s; every other
buffer is introduced by an :class:`Allocate` and is live inside its body only.

Statements are frozen dataclasses compared by identity, like expressions. ``SeqStmt`` is kept
flat (a SeqStmt never directly contains a SeqStmt) and has at least two statements: build
sequences with :func:`seq`, which also accepts zero or one statement.
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any, ClassVar, Iterable, Mapping

import numpy as np

from plait.ir.attrs import EMPTY, Attrs
from plait.ir.base import BaseFunc
from plait.tir.errors import TIRError
from plait.tir.expr import Buffer, IntImm, PrimExpr, TIRNode, Var, _as_int_expr, const, tir_node

SCOPES = ("global", "global.workspace", "local")
"""Storage scopes: ``global`` (function parameters), ``global.workspace`` (scratch memory the memory
planner places), ``local`` (registers / stack, small)."""

FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled")


class Stmt(TIRNode):
    """Base class of statements."""

    __hash__ = object.__hash__


@tir_node
class BufferStore(Stmt):
    """``buffer[indices] = value``."""

    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]
    _kind: ClassVar[str] = "buffer_store"
    _child_fields: ClassVar[tuple[str, ...]] = ("indices", "value")

    def __post_init__(self) -> None:
        if not isinstance(self.buffer, Buffer):
            raise TIRError(f"BufferStore: buffer must be a Buffer, got {self.buffer!r}")
        if not isinstance(self.value, PrimExpr):
            raise TIRError(f"BufferStore: value must be a PrimExpr, got {self.value!r}")
        idx = self.indices if isinstance(self.indices, (tuple, list)) else (self.indices,)
        object.__setattr__(self, "indices", tuple(_as_int_expr(i, "int64", "BufferStore: index") for i in idx))





@tir_node
class For(Stmt):
    """``for loop_var in range(min, min + extent)``, run as ``kind`` says.

    ``kind``: ``serial``, ``parallel`` (iterations may run on different threads), ``vectorized``
    (iterations may run in SIMD lanes), ``unrolled``. ``min``/``extent`` ints take the loop
    variable's dtype. ``annotations`` are free-form hints for later passes and codegen.
    """

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: str
    body: Stmt
    annotations: Attrs = field(default=EMPTY)
    _kind: ClassVar[str] = "for"
    _child_fields: ClassVar[tuple[str, ...]] = ("min", "extent", "body")

    def __post_init__(self) -> None:
        if not isinstance(self.loop_var, Var):
            raise TIRError(f"For: loop_var must be a Var, got {self.loop_var!r}")
        d = self.loop_var.dtype
        object.__setattr__(self, "min", _as_int_expr(self.min, d, f"For '{self.loop_var.name}': min"))
        object.__setattr__(self, "extent", _as_int_expr(self.extent, d, f"For '{self.loop_var.name}': extent"))
        if self.kind not in FOR_KINDS:
            raise TIRError(f"For '{self.loop_var.name}': kind must be one of {', '.join(FOR_KINDS)}, got {self.kind!r}")
        if not isinstance(self.body, Stmt):
            raise TIRError(f"For '{self.loop_var.name}': body must be a Stmt, got {self.body!r}")
        if not isinstance(self.annotations, Attrs):
            object.__setattr__(self, "annotations", Attrs(self.annotations))





@tir_node
class IfThenElse(Stmt):
    cond: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None
    _kind: ClassVar[str] = "if_then_else"
    _child_fields: ClassVar[tuple[str, ...]] = ("cond", "then_case", "else_case")

    def __post_init__(self) -> None:
        if not isinstance(self.cond, PrimExpr):
            raise TIRError(f"IfThenElse: cond must be a PrimExpr, got {self.cond!r}")
        for what, s in (("then_case", self.then_case), ("else_case", self.else_case)):
            if not isinstance(s, Stmt) and not (what == "else_case" and s is None):
                raise TIRError(f"IfThenElse: {what} must be a Stmt, got {s!r}")





@tir_node
class SeqStmt(Stmt):
    """Statements run in order. Nested SeqStmts are flattened; use :func:`seq` for < 2 statements."""

    stmts: tuple[Stmt, ...]
    _kind: ClassVar[str] = "seq"
    _child_fields: ClassVar[tuple[str, ...]] = ("stmts",)

    def __post_init__(self) -> None:
        flat: list[Stmt] = []
        for s in self.stmts:
            if isinstance(s, SeqStmt):
                flat.extend(s.stmts)
            elif isinstance(s, Stmt):
                flat.append(s)
            else:
                raise TIRError(f"SeqStmt: expected statements, got {s!r}")
        if len(flat) < 2:
            raise TIRError(f"SeqStmt needs at least 2 statements, got {len(flat)}; use tir.seq(...)")
        object.__setattr__(self, "stmts", tuple(flat))



    def _rebuild(self, children: tuple[TIRNode, ...]) -> TIRNode:
        """Rebuilt through :func:`seq`: children that became sequences are flattened into this one."""
        return seq(*children)  # type: ignore[arg-type]


@tir_node
class Evaluate(Stmt):
    """Evaluate an expression for its side effects (an extern call). ``Evaluate(0)`` is a no-op."""

    value: PrimExpr
    _kind: ClassVar[str] = "evaluate"
    _child_fields: ClassVar[tuple[str, ...]] = ("value",)

    def __post_init__(self) -> None:
        if not isinstance(self.value, PrimExpr):
            object.__setattr__(self, "value", const(self.value))





@tir_node
class AssertStmt(Stmt):
    """A run-time check: if ``cond`` is false, the function stops and returns ``status`` (a code of
    :mod:`plait.ir.status`, >= 1) to its caller. Not allowed inside a vectorized or parallel loop."""

    cond: PrimExpr
    status: int
    _kind: ClassVar[str] = "assert"
    _child_fields: ClassVar[tuple[str, ...]] = ("cond",)

    def __post_init__(self) -> None:
        if not isinstance(self.cond, PrimExpr):
            raise TIRError(f"AssertStmt: cond must be a PrimExpr, got {self.cond!r}")
        if isinstance(self.status, bool) or not isinstance(self.status, (int, np.integer)) \
                or not 1 <= int(self.status) <= 2**31 - 1:
            raise TIRError(f"AssertStmt: status must be an int in [1, 2147483647], got {self.status!r}")
        object.__setattr__(self, "status", int(self.status))





@tir_node
class LetStmt(Stmt):
    """Bind ``var`` to ``value`` in ``body``."""

    var: Var
    value: PrimExpr
    body: Stmt
    _kind: ClassVar[str] = "let_stmt"
    _child_fields: ClassVar[tuple[str, ...]] = ("value", "body")

    def __post_init__(self) -> None:
        if not isinstance(self.var, Var):
            raise TIRError(f"LetStmt: var must be a Var, got {self.var!r}")
        if not isinstance(self.value, PrimExpr):
            raise TIRError(f"LetStmt '{self.var.name}': value must be a PrimExpr, got {self.value!r}")
        if not isinstance(self.body, Stmt):
            raise TIRError(f"LetStmt '{self.var.name}': body must be a Stmt, got {self.body!r}")





@tir_node
class Allocate(Stmt):
    """Allocate ``buffer`` (its scope says where) for the duration of ``body``."""

    buffer: Buffer
    body: Stmt
    _kind: ClassVar[str] = "allocate"
    _child_fields: ClassVar[tuple[str, ...]] = ("body",)

    def __post_init__(self) -> None:
        if not isinstance(self.buffer, Buffer):
            raise TIRError(f"Allocate: buffer must be a Buffer, got {self.buffer!r}")
        if not isinstance(self.body, Stmt):
            raise TIRError(f"Allocate '{self.buffer.name}': body must be a Stmt, got {self.body!r}")





def no_op() -> Evaluate:
    """A statement that does nothing (``pass`` in the text form)."""
    return Evaluate(IntImm(0))


def is_no_op(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, IntImm) and s.value.value == 0 and s.value.dtype == "int64"


def seq(*stmts: Stmt | Iterable[Stmt] | None) -> Stmt:
    """A sequence: flattens nested sequences and lists, skips None; ``seq()`` is a no-op."""
    flat: list[Stmt] = []
    stack: list[Any] = list(reversed(stmts))
    while stack:
        s = stack.pop()
        if s is None:
            continue
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        elif isinstance(s, Stmt):
            flat.append(s)
        elif isinstance(s, (list, tuple)):
            stack.extend(reversed(s))
        else:
            raise TIRError(f"seq: expected statements, got {s!r}")
    if not flat:
        return no_op()
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))


@tir_node
class PrimFunc(TIRNode, BaseFunc):
    """A TIR function: ``params`` (buffers and scalar vars, inputs first, then outputs), ``body``.

    ``attrs``: ``global_symbol`` (the C symbol), ``piece`` (the piece it runs on), ``num_inputs``
    (how many leading buffer params are inputs; with static shapes this gives :attr:`relay_type`).
    """

    params: tuple[Buffer | Var, ...]
    body: Stmt
    attrs: Attrs = field(default=EMPTY)
    _kind: ClassVar[str] = "prim_func"
    _child_fields: ClassVar[tuple[str, ...]] = ("body",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        for p in self.params:
            if not isinstance(p, (Buffer, Var)):
                raise TIRError(f"PrimFunc: parameters must be Buffers or Vars, got {p!r}")
        if not isinstance(self.body, Stmt):
            raise TIRError(f"PrimFunc: body must be a Stmt, got {self.body!r}")
        if not isinstance(self.attrs, Attrs):
            object.__setattr__(self, "attrs", Attrs(self.attrs))

    __hash__ = object.__hash__

    @property
    def name(self) -> str | None:
        g = self.attrs.get("global_symbol")
        return g if isinstance(g, str) else None

    def with_body(self, body: Stmt) -> "PrimFunc":
        return replace(self, body=body)

    def with_attrs(self, attrs: Mapping[str, Any] | None = None, **kwargs: Any) -> "PrimFunc":
        merged = dict(self.attrs)
        merged.update(attrs or {})
        merged.update(kwargs)
        return replace(self, attrs=Attrs(merged))

    @property
    def relay_type(self) -> Any:
        """The Relay ``FuncType`` (inputs -> output or tuple of outputs), or None if unknown.

        Known when ``attrs["num_inputs"]`` is set and every parameter is a buffer whose shape
        entries are immediates, variables (which become symbolic dimensions) or other integer
        expressions of variables (which become ``"?"``). With ``attrs["data_dependent"]`` ``(output,
        count, rows)`` (:mod:`plait.lowering.shape_func`), the count output is left out and the
        trimmed output's last dim is ``"?"``. One output is a tensor unless ``attrs["tuple_output"]`` says the function returns a 1-tuple. Parameters from
        position ``attrs["workspace_param"]`` on (workspace arenas) and the size variables after the
        buffers are not part of the type.
        """
        from plait.ir.types import FuncType, TensorType, TupleType

        n = self.attrs.get("num_inputs")
        params = self.params
        ws = self.attrs.get("workspace_param")  # trailing workspace arenas (plait.memory.workspace) are not outputs
        if isinstance(ws, int) and not isinstance(ws, bool) and 0 <= ws <= len(params):
            params = params[:ws]
        while params and isinstance(params[-1], Var):  # trailing size variables (symbolic extents)
            params = params[:-1]
        if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n < len(params):
            return None
        types = []
        for p in params:
            if not isinstance(p, Buffer):
                return None
            dims: list[int | str] = []
            for d in p.shape:
                if isinstance(d, IntImm):
                    dims.append(d.value)
                elif isinstance(d, Var) and d.name.isidentifier():
                    dims.append(d.name)
                elif isinstance(d, PrimExpr):
                    dims.append("?")  # an expression of size variables (reshape of a symbolic batch...)
                else:
                    return None
            types.append(TensorType(tuple(dims), p.dtype))
        outs = types[n:]
        dd = self.attrs.get("data_dependent")  # plait.lowering.shape_func: an upper bound and its count
        if isinstance(dd, tuple) and len(dd) == 3 and all(isinstance(v, int) for v in dd):
            i, c = dd[0], dd[1]
            if 0 <= i < len(outs) and 0 <= c < len(outs) and i != c:
                trimmed = TensorType((outs[i].shape[0], "?"), outs[i].dtype)
                outs = [trimmed if k == i else t for k, t in enumerate(outs) if k != c]
        single = len(outs) == 1 and not self.attrs.get("tuple_output", False)
        return FuncType(tuple(types[:n]), outs[0] if single else TupleType(tuple(outs)))



