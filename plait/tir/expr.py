"""TIR expressions: scalar values computed inside PrimFuncs, and the buffers they load from.

Every node is a frozen dataclass compared by *identity* (``==``, ``hash``); structural comparison
is :func:`plait.tir.structural_equal`. Every node has a ``dtype`` (see :mod:`plait.tir.dtype`).

The raw constructors (``Add(a, b)``...) only check that children are expressions, so that any IR,
even ill-typed, can be built, printed and verified. The Python operators on expressions
(``a + b``, ``a < 3``, ``-a``...) and the helpers of :mod:`plait.tir.op` check dtypes and turn Python
numbers into immediates of the other operand's dtype.

Semantics (shared by the interpreter, the simplifier and C codegen):

- integer arithmetic wraps at the dtype's width; ``Div`` is true division and needs floats;
  ``FloorDiv``/``FloorMod`` round toward -inf, ``TruncDiv``/``TruncMod`` toward zero (ints only);
- ``Min(a, b)`` is ``a < b ? a : b`` and ``Max(a, b)`` is ``a > b ? a : b`` (with a NaN operand
  the second operand is the result);
- ``Select``, ``And`` and ``Or`` evaluate lazily like C's ``?:``, ``&&``, ``||``: a ``Select`` may
  guard an out-of-bounds load (padding);
- ``Cast`` follows C: float to int truncates toward zero, anything to bool is ``!= 0``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, TypeVar

import numpy as np

from plait.ir.node import derive_traversal
from plait.tir.dtype import HANDLE, VOID, check_dtype, int_range, is_float, is_int, scalar_type
from plait.tir.errors import TIRError


# What the nodes use from the modules above them: str(node) prints with plait.tir.printer, and the
# Python operators on expressions (and Buffer.store) build with the checked builders of plait.tir.op.
# Both modules import this one, so this one cannot import them; plait/tir/__init__.py binds them
# (bind) once it has loaded them, and every module of the package is loaded through it.
_printer: Callable[["TIRNode"], str] | None = None
_op: Any = None  # the module plait.tir.op


def bind(printer: Callable[["TIRNode"], str], builders: Any) -> None:
    """Bind ``str(node)`` to ``printer`` and the Python operators on expressions to the ``builders``
    module (plait.tir.printer.print_node and plait.tir.op: plait/tir/__init__.py calls this)."""
    global _printer, _op
    _printer, _op = printer, builders


class TIRNode:
    """Base class of every TIR node (expressions, statements, PrimFunc).

    A node class names its child fields once, in evaluation order, in ``_child_fields``; its
    :meth:`_children`, :meth:`_labels` and :meth:`_rebuild` are generated from them and from the
    dataclass fields by :func:`tir_node` (:func:`plait.ir.node.derive_traversal`, once per class).
    """

    _kind: ClassVar[str] = "node"
    _child_fields: ClassVar[tuple[str, ...]] = ()

    def _children(self) -> tuple["TIRNode", ...]:
        """Sub-nodes that traversals visit, in evaluation order (binders excluded)."""
        return ()

    def _labels(self) -> tuple[str, ...]:
        """A name for each child, for error messages (``a``, ``indices[1]``, ``body``...)."""
        return ()

    def _rebuild(self, children: tuple["TIRNode", ...]) -> "TIRNode":
        """A copy of this node with ``children`` (same length as :meth:`_children`)."""
        return self

    def __str__(self) -> str:
        return _printer(self)  # plait.tir.printer.print_node (see bind)

    def __repr__(self) -> str:
        text = str(self)
        if len(text) > 80 or "\n" in text:
            text = text.replace("\n", " ")[:77] + "..."
        return f"{type(self).__name__}({text})"


_NodeClass = TypeVar("_NodeClass", bound=type)


def tir_node(cls: _NodeClass) -> _NodeClass:
    """Make a TIR node class: a frozen dataclass compared by identity, with traversal methods derived
    from its ``_child_fields``."""
    cls = dataclass(frozen=True, eq=False, repr=False)(cls)
    if cls._child_fields:  # type: ignore[attr-defined]
        derive_traversal(cls, TIRNode)
    return cls


class PrimExpr(TIRNode):
    """Base class of expressions. Subclasses have a ``dtype`` field."""

    dtype: str

    def __bool__(self) -> bool:
        raise TIRError(f"a TIR expression has no Python truth value: {self!r} "
                       "(use tir.select / tir.logical_and, or compare nodes with `is`)")

    # Python operator sugar: the checked builders of plait.tir.op (see bind).
    def __add__(self, o: Any) -> "PrimExpr": return _op.add(self, o)
    def __radd__(self, o: Any) -> "PrimExpr": return _op.add(o, self)
    def __sub__(self, o: Any) -> "PrimExpr": return _op.sub(self, o)
    def __rsub__(self, o: Any) -> "PrimExpr": return _op.sub(o, self)
    def __mul__(self, o: Any) -> "PrimExpr": return _op.mul(self, o)
    def __rmul__(self, o: Any) -> "PrimExpr": return _op.mul(o, self)
    def __truediv__(self, o: Any) -> "PrimExpr": return _op.div(self, o)
    def __rtruediv__(self, o: Any) -> "PrimExpr": return _op.div(o, self)
    def __floordiv__(self, o: Any) -> "PrimExpr": return _op.floordiv(self, o)
    def __rfloordiv__(self, o: Any) -> "PrimExpr": return _op.floordiv(o, self)
    def __mod__(self, o: Any) -> "PrimExpr": return _op.floormod(self, o)
    def __rmod__(self, o: Any) -> "PrimExpr": return _op.floormod(o, self)
    def __neg__(self) -> "PrimExpr": return _op.neg(self)
    def __lt__(self, o: Any) -> "PrimExpr": return _op.lt(self, o)
    def __le__(self, o: Any) -> "PrimExpr": return _op.le(self, o)
    def __gt__(self, o: Any) -> "PrimExpr": return _op.gt(self, o)
    def __ge__(self, o: Any) -> "PrimExpr": return _op.ge(self, o)
    # & | ^ ~ are logical on bool expressions and bitwise on integers; << >> shift integers.
    def __and__(self, o: Any) -> "PrimExpr": return _op.and_or_bitwise("&", self, o)
    def __rand__(self, o: Any) -> "PrimExpr": return _op.and_or_bitwise("&", o, self)
    def __or__(self, o: Any) -> "PrimExpr": return _op.and_or_bitwise("|", self, o)
    def __ror__(self, o: Any) -> "PrimExpr": return _op.and_or_bitwise("|", o, self)
    def __xor__(self, o: Any) -> "PrimExpr": return _op.and_or_bitwise("^", self, o)
    def __rxor__(self, o: Any) -> "PrimExpr": return _op.and_or_bitwise("^", o, self)
    def __invert__(self) -> "PrimExpr": return _op.invert(self)
    def __lshift__(self, o: Any) -> "PrimExpr": return _op.shift_left(self, o)
    def __rlshift__(self, o: Any) -> "PrimExpr": return _op.shift_left(o, self)
    def __rshift__(self, o: Any) -> "PrimExpr": return _op.shift_right(self, o)
    def __rrshift__(self, o: Any) -> "PrimExpr": return _op.shift_right(o, self)

    __hash__ = object.__hash__  # identity; ``==`` is identity too (the dataclasses use eq=False)


def _check_child(node: TIRNode, value: object, what: str) -> None:
    if not isinstance(value, PrimExpr):
        raise TIRError(f"{type(node).__name__}: {what} must be a PrimExpr, got {value!r}")


# ---- leaves -------------------------------------------------------------------------------------


@tir_node
class Var(PrimExpr):
    """A scalar variable: a loop variable, a let-bound name or a scalar parameter.

    Identity matters, not the name: two ``Var("i")`` are different variables.
    """

    name: str
    dtype: str = "int64"
    _kind: ClassVar[str] = "var"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TIRError(f"Var: name must be a str, got {self.name!r}")
        check_dtype(self.dtype, f"Var '{self.name}'", allow_handle=True)


@tir_node
class IntImm(PrimExpr):
    """An integer (or bool: 0/1) immediate. The value must fit the dtype."""

    value: int
    dtype: str = "int64"
    _kind: ClassVar[str] = "int_imm"

    def __post_init__(self) -> None:
        check_dtype(self.dtype, "IntImm")
        if not (is_int(self.dtype) or self.dtype == "bool"):
            raise TIRError(f"IntImm: dtype must be an integer or bool dtype, got {self.dtype}")
        v = self.value
        if isinstance(v, (bool, np.bool_)):
            v = int(v)
        if not isinstance(v, (int, np.integer)):
            raise TIRError(f"IntImm: value must be an int, got {v!r}")
        lo, hi = int_range(self.dtype)
        if not lo <= int(v) <= hi:
            raise TIRError(f"IntImm: {int(v)} does not fit in {self.dtype} [{lo}, {hi}]")
        object.__setattr__(self, "value", int(v))


@tir_node
class FloatImm(PrimExpr):
    """A floating-point immediate; the value is rounded to the dtype's precision."""

    value: float
    dtype: str = "float32"
    _kind: ClassVar[str] = "float_imm"

    def __post_init__(self) -> None:
        check_dtype(self.dtype, "FloatImm")
        if not is_float(self.dtype):
            raise TIRError(f"FloatImm: dtype must be a float dtype, got {self.dtype}")
        if isinstance(self.value, (bool, np.bool_)) or not isinstance(self.value, (int, float, np.integer, np.floating)):
            raise TIRError(f"FloatImm: value must be a float, got {self.value!r}")
        try:
            with np.errstate(over="ignore"):
                v = float(scalar_type(self.dtype)(self.value))
        except OverflowError:
            v = math.inf
        if math.isinf(v) and not (isinstance(self.value, (float, np.floating)) and math.isinf(self.value)):
            raise TIRError(f"FloatImm: {self.value!r} overflows {self.dtype}")
        object.__setattr__(self, "value", v)


# ---- binary and unary operators -----------------------------------------------------------------


@tir_node
class BinaryOp(PrimExpr):
    """Base of binary operators; ``symbol`` is the operator's text (``+``) or function name (``min``)."""

    a: PrimExpr
    b: PrimExpr
    dtype: str = field(init=False)
    symbol: ClassVar[str] = "?"
    _child_fields: ClassVar[tuple[str, ...]] = ("a", "b")

    def __post_init__(self) -> None:
        _check_child(self, self.a, "operand a")
        _check_child(self, self.b, "operand b")
        object.__setattr__(self, "dtype", self._result_dtype())

    def _result_dtype(self) -> str:
        return self.a.dtype





class _BoolResult(BinaryOp):
    def _result_dtype(self) -> str:
        return "bool"


class Add(BinaryOp): _kind, symbol = "add", "+"
class Sub(BinaryOp): _kind, symbol = "sub", "-"
class Mul(BinaryOp): _kind, symbol = "mul", "*"
class Div(BinaryOp): _kind, symbol = "div", "/"
class FloorDiv(BinaryOp): _kind, symbol = "floordiv", "//"
class FloorMod(BinaryOp): _kind, symbol = "floormod", "%"
class TruncDiv(BinaryOp): _kind, symbol = "truncdiv", "truncdiv"
class TruncMod(BinaryOp): _kind, symbol = "truncmod", "truncmod"
class Min(BinaryOp): _kind, symbol = "min", "min"
class Max(BinaryOp): _kind, symbol = "max", "max"
class BitwiseAnd(BinaryOp): _kind, symbol = "bitwise_and", "&"
class BitwiseOr(BinaryOp): _kind, symbol = "bitwise_or", "|"
class BitwiseXor(BinaryOp): _kind, symbol = "bitwise_xor", "^"
class ShiftLeft(BinaryOp): _kind, symbol = "shift_left", "<<"
class ShiftRight(BinaryOp): _kind, symbol = "shift_right", ">>"
class EQ(_BoolResult): _kind, symbol = "eq", "=="
class NE(_BoolResult): _kind, symbol = "ne", "!="
class LT(_BoolResult): _kind, symbol = "lt", "<"
class LE(_BoolResult): _kind, symbol = "le", "<="
class GT(_BoolResult): _kind, symbol = "gt", ">"
class GE(_BoolResult): _kind, symbol = "ge", ">="
class And(_BoolResult): _kind, symbol = "and", "and"
class Or(_BoolResult): _kind, symbol = "or", "or"

ARITH_OPS = (Add, Sub, Mul, Div, FloorDiv, FloorMod, TruncDiv, TruncMod, Min, Max)
BITWISE_OPS = (BitwiseAnd, BitwiseOr, BitwiseXor, ShiftLeft, ShiftRight)
CMP_OPS = (EQ, NE, LT, LE, GT, GE)
LOGICAL_OPS = (And, Or)
BINARY_OPS = ARITH_OPS + BITWISE_OPS + CMP_OPS + LOGICAL_OPS


@tir_node
class UnaryOp(PrimExpr):
    a: PrimExpr
    dtype: str = field(init=False)
    symbol: ClassVar[str] = "?"
    _child_fields: ClassVar[tuple[str, ...]] = ("a",)

    def __post_init__(self) -> None:
        _check_child(self, self.a, "operand")
        object.__setattr__(self, "dtype", "bool" if isinstance(self, Not) else self.a.dtype)





class Not(UnaryOp): _kind, symbol = "not", "not"
class BitwiseNot(UnaryOp): _kind, symbol = "bitwise_not", "~"


# ---- other expressions --------------------------------------------------------------------------


@tir_node
class Select(PrimExpr):
    """``cond ? true_value : false_value``; only the chosen branch is evaluated."""

    cond: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str = field(init=False)
    _kind: ClassVar[str] = "select"
    _child_fields: ClassVar[tuple[str, ...]] = ("cond", "true_value", "false_value")

    def __post_init__(self) -> None:
        _check_child(self, self.cond, "cond")
        _check_child(self, self.true_value, "true_value")
        _check_child(self, self.false_value, "false_value")
        object.__setattr__(self, "dtype", self.true_value.dtype)





@tir_node
class Cast(PrimExpr):
    dtype: str
    value: PrimExpr
    _kind: ClassVar[str] = "cast"
    _child_fields: ClassVar[tuple[str, ...]] = ("value",)

    def __post_init__(self) -> None:
        check_dtype(self.dtype, "Cast")
        _check_child(self, self.value, "value")





# ---- buffers and the expressions that read them -----------------------------------------------


def _as_int_expr(value: Any, dtype: str, what: str) -> PrimExpr:
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return IntImm(int(value), dtype)
    if not isinstance(value, PrimExpr):
        raise TIRError(f"{what} must be a PrimExpr or an int, got {value!r}")
    return value


@tir_node
class Buffer(TIRNode):
    """A dense row-major array. ``shape`` entries are integer expressions (ints become int64)."""

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str = "float32"
    scope: str = "global"
    _kind: ClassVar[str] = "buffer"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TIRError(f"Buffer: name must be a str, got {self.name!r}")
        shape = self.shape if isinstance(self.shape, (tuple, list)) else (self.shape,)
        object.__setattr__(self, "shape", tuple(_as_int_expr(d, "int64", f"Buffer '{self.name}': shape") for d in shape))
        check_dtype(self.dtype, f"Buffer '{self.name}'")
        if not isinstance(self.scope, str) or not self.scope:
            raise TIRError(f"Buffer '{self.name}': scope must be a non-empty str, got {self.scope!r}")

    __hash__ = object.__hash__

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as ints, or None if some dimension is not an immediate."""
        if all(isinstance(d, IntImm) for d in self.shape):
            return tuple(d.value for d in self.shape)  # type: ignore[attr-defined]
        return None

    def __getitem__(self, indices: Any) -> BufferLoad:
        return BufferLoad(self, indices if isinstance(indices, tuple) else (indices,))

    def load(self, *indices: Any) -> BufferLoad:
        return BufferLoad(self, indices)

    def store(self, indices: Any, value: Any) -> TIRNode:
        """The statement ``self[indices] = value`` (a :class:`plait.tir.stmt.BufferStore`, made by
        :func:`plait.tir.op.buffer_store`); a Python number becomes an immediate of the buffer's dtype."""
        return _op.buffer_store(self, indices, value)


def _norm_indices(node: TIRNode, indices: Any) -> tuple[PrimExpr, ...]:
    if isinstance(indices, (PrimExpr, int, np.integer)):
        indices = (indices,)
    out = tuple(IntImm(int(i)) if isinstance(i, (int, np.integer)) and not isinstance(i, bool) else i
                for i in indices)
    for k, i in enumerate(out):
        _check_child(node, i, f"index {k}")
    return out


def _check_buffer(node: TIRNode, buffer: object) -> None:
    if not isinstance(buffer, Buffer):
        raise TIRError(f"{type(node).__name__}: buffer must be a Buffer, got {buffer!r}")


@tir_node
class BufferLoad(PrimExpr):
    """``buffer[indices]``: one index per dimension (ints are made int64 immediates)."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    dtype: str = field(init=False)
    _kind: ClassVar[str] = "buffer_load"
    _child_fields: ClassVar[tuple[str, ...]] = ("indices",)

    def __post_init__(self) -> None:
        _check_buffer(self, self.buffer)
        object.__setattr__(self, "indices", _norm_indices(self, self.indices))
        object.__setattr__(self, "dtype", self.buffer.dtype)





@tir_node
class AddressOf(PrimExpr):
    """The address of ``buffer[indices]`` (dtype ``handle``), to pass a buffer to an extern call."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    dtype: str = field(init=False, default=HANDLE)
    _kind: ClassVar[str] = "address_of"
    _child_fields: ClassVar[tuple[str, ...]] = ("indices",)

    def __post_init__(self) -> None:
        _check_buffer(self, self.buffer)
        object.__setattr__(self, "indices", _norm_indices(self, self.indices))




CALL_KINDS = ("intrin", "extern", "kernel")


@tir_node
class Call(PrimExpr):
    """A call. ``kind="intrin"``: a math intrinsic of :data:`plait.tir.intrin.INTRINSICS`;
    ``kind="extern"``: an external C function by name (``dtype`` may be ``void`` or ``handle``);
    ``kind="kernel"``: a kernel of :data:`plait.tir.kernels.KERNELS` by its abstract name (each backend
    calls its own implementation). Extern and kernel calls are opaque: they may have side effects."""

    dtype: str
    name: str
    args: tuple[PrimExpr, ...]
    kind: str = "intrin"
    _kind: ClassVar[str] = "call"
    _child_fields: ClassVar[tuple[str, ...]] = ("args",)

    def __post_init__(self) -> None:
        check_dtype(self.dtype, f"Call '{self.name}'", allow_handle=True, allow_void=True)
        if not isinstance(self.name, str) or not self.name:
            raise TIRError(f"Call: name must be a non-empty str, got {self.name!r}")
        if self.kind not in CALL_KINDS:
            raise TIRError(f"Call '{self.name}': kind must be one of {', '.join(CALL_KINDS)}, got {self.kind!r}")
        object.__setattr__(self, "args", tuple(self.args))
        for k, a in enumerate(self.args):
            _check_child(self, a, f"argument {k}")





@tir_node
class Let(PrimExpr):
    """``let var = value in body``; ``var`` is bound in ``body`` only."""

    var: Var
    value: PrimExpr
    body: PrimExpr
    dtype: str = field(init=False)
    _kind: ClassVar[str] = "let"
    _child_fields: ClassVar[tuple[str, ...]] = ("value", "body")

    def __post_init__(self) -> None:
        if not isinstance(self.var, Var):
            raise TIRError(f"Let: var must be a Var, got {self.var!r}")
        _check_child(self, self.value, "value")
        _check_child(self, self.body, "body")
        object.__setattr__(self, "dtype", self.body.dtype)





def const(value: Any, dtype: str | None = None) -> PrimExpr:
    """An immediate: ``const(3)`` is an int64 ``IntImm``, ``const(0.5)`` a float32 ``FloatImm``."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, np.generic) and dtype is None:
        dtype = value.dtype.name
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float32"
    check_dtype(dtype, "const")
    if is_float(dtype):
        return FloatImm(float(value), dtype)
    if isinstance(value, (float, np.floating)):
        raise TIRError(f"const: cannot make a {dtype} immediate from the float {value!r}")
    return IntImm(int(value), dtype)


__all__ = [
    "ARITH_OPS", "BINARY_OPS", "BITWISE_OPS", "CALL_KINDS", "CMP_OPS", "LOGICAL_OPS", "VOID",
    "Add", "AddressOf", "And", "BinaryOp", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "Buffer", "BufferLoad",
    "Call", "Cast", "Div", "EQ", "FloatImm", "FloorDiv", "FloorMod", "GE", "GT", "IntImm", "LE", "LT", "Let",
    "Max", "Min", "Mul", "NE", "Not", "Or", "PrimExpr", "Select", "ShiftLeft", "ShiftRight", "Sub", "TIRNode",
    "TruncDiv", "TruncMod", "UnaryOp", "Var", "const",
]
