"""Relay expressions: immutable graph-level IR nodes.

Nodes are frozen dataclasses compared by *identity* (``==``/``hash``), which is what graph
algorithms want (memo tables keyed by node, shared subexpressions). Structural comparison is
:func:`plait.relay.analysis.structural_equal`; it, like every traversal in plait, is iterative,
so chains of tens of thousands of calls never hit Python's recursion limit.

Type inference caches each node's type on the node (``checked_type``); the cache is not part
of the node's structure and is a pure function of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable, Mapping, Union

import numpy as np

from plait.errors import PlaitError
from plait.ir.attrs import EMPTY, Attrs
from plait.ir.base import BaseFunc
from plait.ir.node import derive_traversal
from plait.ir.op import Op
from plait.op import get_op
from plait.ir.types import Type, tensor_type_of


# str(node) prints with the text printer (plait.relay.text_print.print_expr), which imports this module,
# so this module cannot import it: plait/relay/__init__.py binds it (bind_printer) once it has loaded it,
# and every module of the package is loaded through it.
_printer: Callable[["Expr"], str] | None = None


def bind_printer(print_expr: Callable[["Expr"], str]) -> None:
    """Make ``str(node)`` print with ``print_expr`` (plait/relay/__init__.py calls this)."""
    global _printer
    _printer = print_expr


class Expr:
    """Base class of Relay expressions.

    A node class names its sub-expressions once, in evaluation order, in ``_child_fields``;
    :meth:`_children` and :meth:`_rebuild` are generated from them
    (:func:`plait.ir.node.derive_traversal`, once per class).
    """

    _child_fields: ClassVar[tuple[str, ...]] = ()

    def _children(self) -> tuple["Expr", ...]:
        """Direct sub-expressions, in evaluation order (a call's operator when it is an expression)."""
        return ()

    def _labels(self) -> tuple[str, ...]:
        """A name for each child (``args[1]``, ``body``...)."""
        return ()

    def _rebuild(self, children: tuple["Expr", ...]) -> "Expr":
        """A copy of this node with ``children`` (same length as :meth:`_children`), other fields kept."""
        return self

    @property
    def checked_type(self) -> Type:
        t = self.__dict__.get("_checked_type")
        if t is None:
            raise PlaitError(f"the type of {self!r} is not inferred yet; run plait.relay.infer_type first")
        return t

    @property
    def has_type(self) -> bool:
        return self.__dict__.get("_checked_type") is not None

    def _set_type(self, t: Type) -> None:
        object.__setattr__(self, "_checked_type", t)

    def __str__(self) -> str:
        return _printer(self)  # plait.relay.text_print.print_expr (see bind_printer)


@dataclass(frozen=True, eq=False, repr=False)
class Var(Expr):
    """A variable: a function parameter or a let-bound name. Identity matters, not the name."""

    name_hint: str
    type_annotation: Type | None = None

    def __post_init__(self) -> None:
        if self.type_annotation is not None:
            self._set_type(self.type_annotation)

    def __repr__(self) -> str:
        return f"Var(%{self.name_hint})"


@dataclass(frozen=True, repr=False)
class GlobalVar(Expr):
    """A reference to a function of the enclosing IRModule, by name (compared by name)."""

    name: str

    def __repr__(self) -> str:
        return f"GlobalVar(@{self.name})"


@dataclass(frozen=True, eq=False, repr=False)
class Constant(Expr):
    """A constant tensor. The array is copied and made read-only."""

    data: np.ndarray

    def __post_init__(self) -> None:
        arr = np.array(self.data, copy=True)
        arr.setflags(write=False)
        object.__setattr__(self, "data", arr)
        self._set_type(tensor_type_of(arr))

    def __repr__(self) -> str:
        return f"Constant({self.data.dtype}{list(self.data.shape)})"


@dataclass(frozen=True, eq=False, repr=False)
class Tuple(Expr):
    fields: tuple[Expr, ...]
    _child_fields: ClassVar[tuple[str, ...]] = ("fields",)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))

    def __repr__(self) -> str:
        return f"Tuple({len(self.fields)} fields)"


@dataclass(frozen=True, eq=False, repr=False)
class TupleGetItem(Expr):
    tuple_value: Expr
    index: int
    _child_fields: ClassVar[tuple[str, ...]] = ("tuple_value",)

    def __repr__(self) -> str:
        return f"TupleGetItem(.{self.index})"


@dataclass(frozen=True, eq=False, repr=False)
class Call(Expr):
    """Application of an operator, a global function or a function-valued expression.

    ``attrs`` are the operator's attributes (validated against its schema, defaults filled in).
    ``meta`` holds information about the call site that is not part of the operator's semantics:
    ``name`` (the source model's node name), ``op_type`` (the source op), and later annotations
    such as the piece a call is placed on.
    """

    op: Union[Op, Expr]
    args: tuple[Expr, ...]
    attrs: Attrs = EMPTY
    meta: Attrs = EMPTY
    _child_fields: ClassVar[tuple[str, ...]] = ("op", "args")  # op: a child when it is an expression

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        for a in self.args:
            if not isinstance(a, Expr):
                raise PlaitError(f"call argument {a!r} is not a Relay expression")
        if isinstance(self.op, Op):
            object.__setattr__(self, "attrs", self.op.make_attrs(self.attrs))
        elif not isinstance(self.op, Expr):
            raise PlaitError(f"cannot call {self.op!r}: expected an operator or an expression")
        elif self.attrs:
            object.__setattr__(self, "attrs", Attrs(self.attrs))
        if not isinstance(self.meta, Attrs):
            object.__setattr__(self, "meta", Attrs(self.meta))

    @property
    def op_name(self) -> str:
        """The operator's name, or '@name' for a global function, or '<fn>' otherwise."""
        if isinstance(self.op, Op):
            return self.op.name
        if isinstance(self.op, GlobalVar):
            return "@" + self.op.name
        return "<fn>"

    def __repr__(self) -> str:
        name = self.meta.get("name")
        return f"Call({self.op_name}{f' name={name!r}' if name else ''})"


@dataclass(frozen=True, eq=False, repr=False)
class Let(Expr):
    var: Var
    value: Expr
    body: Expr
    _child_fields: ClassVar[tuple[str, ...]] = ("value", "var", "body")

    def __repr__(self) -> str:
        return f"Let(%{self.var.name_hint})"


@dataclass(frozen=True, eq=False, repr=False)
class If(Expr):
    cond: Expr
    true_branch: Expr
    false_branch: Expr
    _child_fields: ClassVar[tuple[str, ...]] = ("cond", "true_branch", "false_branch")

    def __repr__(self) -> str:
        return "If(...)"


@dataclass(frozen=True, eq=False, repr=False)
class Function(Expr, BaseFunc):
    """A function. Parameters must carry type annotations; ``attrs`` hold e.g. ``Primitive``, ``piece``."""

    params: tuple[Var, ...]
    body: Expr
    ret_type: Type | None = None
    attrs: Attrs = field(default=EMPTY)
    _child_fields: ClassVar[tuple[str, ...]] = ("params", "body")

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        if not isinstance(self.attrs, Attrs):
            object.__setattr__(self, "attrs", Attrs(self.attrs))

    def __repr__(self) -> str:
        return f"Function({len(self.params)} params)"

    def with_attrs(self, **changes: Any) -> "Function":
        """The same function (params, body, inferred type) with ``changes`` merged into its attrs."""
        out = Function(self.params, self.body, self.ret_type, self.attrs.with_(**changes))
        if self.has_type:
            out._set_type(self.checked_type)
        return out


@dataclass(frozen=True, eq=False, repr=False)
class Loop(Expr):
    """A loop with ONNX ``Loop`` semantics.

    ``body`` takes ``(iter: int64 scalar, cond: bool scalar, *state)`` and returns
    ``Tuple(cond, *state, *scan_elems)``. The loop runs while ``iter < trip_count`` (when given) and
    ``cond`` (when given: the initial condition, then each iteration's); ``body``'s condition output is
    ignored when ``cond`` is None. Its value is ``Tuple(*final_state, *scan_outputs)``: the last
    ``num_scan`` outputs of the body stacked on a new axis 0, of length ``"?"`` unless the trip count is
    a constant and ``cond`` is None.
    """

    trip_count: Expr | None
    cond: Expr | None
    init: tuple[Expr, ...]
    body: Function
    num_scan: int = 0
    _child_fields: ClassVar[tuple[str, ...]] = ("trip_count", "cond", "init", "body")

    def __post_init__(self) -> None:
        object.__setattr__(self, "init", tuple(self.init))
        if not isinstance(self.body, Function):
            raise PlaitError(f"the body of a loop must be a Function, got {type(self.body).__name__}")
        if not (isinstance(self.num_scan, int) and self.num_scan >= 0):
            raise PlaitError(f"a loop's num_scan must be an int >= 0, got {self.num_scan!r}")
        if len(self.body.params) != 2 + len(self.init):
            raise PlaitError(f"a loop body takes (iter, cond, *state): {2 + len(self.init)} parameters for "
                             f"{len(self.init)} state values, got {len(self.body.params)}")

    def __repr__(self) -> str:
        return f"Loop({len(self.init)} state, {self.num_scan} scan)"


for _cls in (Tuple, TupleGetItem, Call, Let, If, Loop, Function):
    derive_traversal(_cls, Expr)


# ---- convenience constructors -------------------------------------------------------------


def const(value: Any, dtype: str | None = None) -> Constant:
    return Constant(np.asarray(value, dtype=dtype))


def var(name: str, shape: Iterable = (), dtype: str = "float32") -> Var:
    from plait.ir.types import TensorType

    return Var(name, TensorType(tuple(shape), dtype))


def call(op: str | Op, *args: Expr, meta: Mapping[str, Any] | None = None, **attrs: Any) -> Call:
    """``call("nn.conv2d", x, w, strides=(2, 2))``: build an operator call, validating attrs."""
    the_op = get_op(op) if isinstance(op, str) else op
    return Call(the_op, args, Attrs(attrs), Attrs(meta or {}))
