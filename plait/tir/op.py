"""Checked builders for TIR expressions (what the Python operators on expressions call).

Each helper checks operand dtypes and raises :class:`TIRError` with the operator and the dtypes;
Python numbers are turned into immediates of the other operand's dtype (``x + 1`` with an int32
``x`` adds an int32 ``1``). Two Python numbers give int64 / float32 immediates.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plait.errors import RegistryError
from plait.tir.dtype import VOID, check_dtype, is_bool, is_float, is_int, is_numeric
from plait.tir.errors import TIRError
from plait.tir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, AddressOf, And, BinaryOp, BitwiseAnd, BitwiseNot, BitwiseOr, BitwiseXor, Buffer,
    BufferLoad, Call, Cast, Div, FloatImm, FloorDiv, FloorMod, IntImm, Let, Max, Min, Mul, Not, Or, PrimExpr,
    Select, ShiftLeft, ShiftRight, Sub, TruncDiv, TruncMod, Var, const,
)
from plait.tir.intrin import INTRINSICS
from plait.tir.stmt import BufferStore

_Operand = Any  # PrimExpr | int | float | bool | numpy scalar


def convert(value: _Operand, dtype: str, what: str = "operand") -> PrimExpr:
    """``value`` as an expression; a Python number becomes an immediate of ``dtype``."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, (bool, np.bool_)):
        if dtype != "bool":
            raise TIRError(f"{what}: cannot convert the Python bool {bool(value)} to {dtype}")
        return IntImm(int(value), "bool")
    if isinstance(value, (int, np.integer)):
        if is_float(dtype):
            return FloatImm(float(value), dtype)
        if not is_int(dtype):
            raise TIRError(f"{what}: cannot convert the Python int {int(value)} to {dtype}")
        try:
            return IntImm(int(value), dtype)
        except TIRError as exc:
            raise TIRError(f"{what}: {str(exc).replace('IntImm: ', '')}") from None
    if isinstance(value, (float, np.floating)):
        if not is_float(dtype):
            raise TIRError(f"{what}: cannot convert the Python float {float(value)!r} to {dtype}")
        return FloatImm(float(value), dtype)
    raise TIRError(f"{what}: expected a TIR expression or a number, got {value!r}")


def _pair(what: str, a: _Operand, b: _Operand) -> tuple[PrimExpr, PrimExpr]:
    if isinstance(a, PrimExpr) and isinstance(b, PrimExpr):
        if a.dtype != b.dtype:
            raise TIRError(f"'{what}': operand dtypes differ: {a.dtype} and {b.dtype} (insert a cast)")
        return a, b
    if isinstance(a, PrimExpr):
        return a, convert(b, a.dtype, f"'{what}'")
    if isinstance(b, PrimExpr):
        return convert(a, b.dtype, f"'{what}'"), b
    # two Python numbers: float32 if either is a float, bool if both are bools, else int64
    floats = isinstance(a, (float, np.floating)) or isinstance(b, (float, np.floating))
    bools = isinstance(a, (bool, np.bool_)) and isinstance(b, (bool, np.bool_))
    dtype = "float32" if floats else "bool" if bools else "int64"
    return convert(a, dtype, f"'{what}'"), convert(b, dtype, f"'{what}'")


def _check(what: str, dtype: str, ok: Callable[[str], bool], needs: str, hint: str = "") -> None:
    if not ok(dtype):
        raise TIRError(f"'{what}' needs {needs} operands, got {dtype}{hint}")


def _binary(cls: type[BinaryOp], ok: Callable[[str], bool], needs: str, hint: str = "") -> Callable[..., PrimExpr]:
    def build(a: _Operand, b: _Operand) -> PrimExpr:
        x, y = _pair(cls.symbol, a, b)
        _check(cls.symbol, x.dtype, ok, needs, hint)
        return cls(x, y)

    build.__name__ = cls._kind
    build.__doc__ = f"Checked ``{cls.__name__}``: {needs} operands of one dtype."
    return build


def _eq_ok(d: str) -> bool:
    return is_numeric(d) or is_bool(d)


add = _binary(Add, is_numeric, "numeric")
sub = _binary(Sub, is_numeric, "numeric")
mul = _binary(Mul, is_numeric, "numeric")
div = _binary(Div, is_float, "float", "; '/' is true division: use // (floordiv) or truncdiv for integers")
floordiv = _binary(FloorDiv, is_int, "integer", "; use floor(a / b) for floats")
floormod = _binary(FloorMod, is_int, "integer", "; use fmod for floats")
truncdiv = _binary(TruncDiv, is_int, "integer")
truncmod = _binary(TruncMod, is_int, "integer")
min = _binary(Min, is_numeric, "numeric")  # noqa: A001 - tir.min, like tvm.tir.min
max = _binary(Max, is_numeric, "numeric")  # noqa: A001
eq = _binary(EQ, _eq_ok, "numeric or bool")
ne = _binary(NE, _eq_ok, "numeric or bool")
lt = _binary(LT, is_numeric, "numeric")
le = _binary(LE, is_numeric, "numeric")
gt = _binary(GT, is_numeric, "numeric")
ge = _binary(GE, is_numeric, "numeric")
logical_and = _binary(And, is_bool, "bool")
logical_or = _binary(Or, is_bool, "bool")
bitwise_and = _binary(BitwiseAnd, is_int, "integer")
bitwise_or = _binary(BitwiseOr, is_int, "integer")
bitwise_xor = _binary(BitwiseXor, is_int, "integer")
shift_left = _binary(ShiftLeft, is_int, "integer")
shift_right = _binary(ShiftRight, is_int, "integer")


def logical_not(a: _Operand) -> PrimExpr:
    x = convert(a, "bool", "'not'")
    _check("not", x.dtype, is_bool, "bool")
    return Not(x)


def bitwise_not(a: PrimExpr) -> PrimExpr:
    _check("~", a.dtype, is_int, "integer")
    return BitwiseNot(a)


def and_or_bitwise(symbol: str, a: _Operand, b: _Operand) -> PrimExpr:
    """``&``, ``|``, ``^``: logical and/or/xor on bool operands, bitwise on integers."""
    x, y = _pair(symbol, a, b)
    if is_bool(x.dtype):
        return {"&": And, "|": Or, "^": NE}[symbol](x, y)
    return {"&": bitwise_and, "|": bitwise_or, "^": bitwise_xor}[symbol](x, y)


def invert(a: PrimExpr) -> PrimExpr:
    """``~a``: logical not on bool, bitwise not on integers."""
    return Not(a) if is_bool(a.dtype) else bitwise_not(a)


def neg(a: PrimExpr) -> PrimExpr:
    """``-a``: ``0 - a`` for integers (wraps), ``a * -1.0`` for floats (exact, keeps the sign of zero)."""
    _check("-", a.dtype, is_numeric, "numeric")
    if is_float(a.dtype):
        return Mul(a, FloatImm(-1.0, a.dtype))
    return Sub(IntImm(0, a.dtype), a)


def all_(*conds: _Operand) -> PrimExpr:
    """Conjunction of bool expressions (``True`` for none)."""
    out: PrimExpr = IntImm(1, "bool")
    for k, c in enumerate(conds):
        c = convert(c, "bool", "all_")
        out = c if k == 0 else logical_and(out, c)
    return out


def any_(*conds: _Operand) -> PrimExpr:
    """Disjunction of bool expressions (``False`` for none)."""
    out: PrimExpr = IntImm(0, "bool")
    for k, c in enumerate(conds):
        c = convert(c, "bool", "any_")
        out = c if k == 0 else logical_or(out, c)
    return out


def select(cond: _Operand, true_value: _Operand, false_value: _Operand) -> PrimExpr:
    """``cond ? true_value : false_value`` (lazy: only the chosen branch is evaluated)."""
    c = convert(cond, "bool", "select condition")
    if not is_bool(c.dtype):
        raise TIRError(f"select: the condition must be bool, got {c.dtype}")
    t, f = _pair("select", true_value, false_value)
    return Select(c, t, f)


def cast(dtype: str, value: _Operand) -> PrimExpr:
    """``value`` converted to ``dtype`` (returned unchanged if it already has that dtype)."""
    check_dtype(dtype, "cast")
    if not isinstance(value, PrimExpr):
        return convert(value, dtype, "cast")
    if value.dtype == dtype:
        return value
    check_dtype(value.dtype, "cast operand")
    return Cast(dtype, value)


def call_intrin(name: str, *args: _Operand) -> PrimExpr:
    """A call of the math intrinsic ``name`` (see :mod:`plait.tir.intrin`)."""
    try:
        intr = INTRINSICS.get(name)
    except RegistryError as exc:
        raise TIRError(str(exc)) from None
    if len(args) != intr.arity:
        raise TIRError(f"intrinsic '{name}' takes {intr.arity} argument(s), got {len(args)}")
    first = next((a for a in args if isinstance(a, PrimExpr)), None)
    dtype = first.dtype if first is not None else "float32"
    xs = tuple(convert(a, dtype, f"intrinsic '{name}'") for a in args)
    for x in xs:
        if x.dtype != dtype:
            raise TIRError(f"intrinsic '{name}': argument dtypes differ: {dtype} and {x.dtype}")
    if dtype not in intr.c:
        raise TIRError(f"intrinsic '{name}' needs float arguments, got {dtype}")
    return Call(intr.result_dtype(dtype), name, xs, "intrin")


def call_extern(dtype: str, name: str, *args: _Operand) -> PrimExpr:
    """A call of the external C function ``name`` returning ``dtype`` (``"void"`` for none).

    Python numbers become int64 / float32 immediates; pass buffers with :func:`address_of`.
    """
    check_dtype(dtype, f"call_extern '{name}'", allow_handle=True, allow_void=True)
    xs = tuple(const(a) for a in args)
    for k, x in enumerate(xs):
        if x.dtype == VOID:
            raise TIRError(f"call_extern '{name}': argument {k} is a void call")
    return Call(dtype, name, xs, "extern")


def address_of(x: Any, *indices: _Operand) -> PrimExpr:
    """``address_of(A[i, 0])`` or ``address_of(A)`` (the address of the first element)."""
    if isinstance(x, BufferLoad) and not indices:
        return AddressOf(x.buffer, x.indices)
    if isinstance(x, Buffer):
        return AddressOf(x, indices or tuple(IntImm(0) for _ in x.shape))
    raise TIRError(f"address_of: expected a buffer load such as A[0, 0] or a Buffer, got {x!r}")


def buffer_store(buffer: Buffer, indices: Any, value: _Operand) -> BufferStore:
    """``buffer[indices] = value`` (what ``Buffer.store`` builds); a Python number becomes an immediate
    of the buffer's dtype."""
    idx = indices if isinstance(indices, tuple) else (indices,)
    return BufferStore(buffer, convert(value, buffer.dtype, f"store to '{buffer.name}'"), idx)


def let(var: Var, value: _Operand, body: Callable[[Var], PrimExpr] | PrimExpr) -> PrimExpr:
    """``let var = value in body``; ``body`` may be a function of ``var``."""
    v = convert(value, var.dtype, f"let '{var.name}'")
    if v.dtype != var.dtype:
        raise TIRError(f"let '{var.name}': the variable is {var.dtype} but the value is {v.dtype}")
    b = body(var) if callable(body) else body
    return Let(var, v, b)


def _intrinsic_helper(name: str) -> Callable[..., PrimExpr]:
    def helper(*args: _Operand) -> PrimExpr:
        return call_intrin(name, *args)

    helper.__name__ = name
    helper.__doc__ = f"The ``{name}`` intrinsic (C: ``{INTRINSICS.get(name).c['float32']}`` for float32)."
    return helper


for _name in INTRINSICS:
    globals()[_name] = _intrinsic_helper(_name)

INTRINSIC_HELPERS = tuple(INTRINSICS)

__all__ = [
    "add", "address_of", "all_", "and_or_bitwise", "any_", "bitwise_and", "bitwise_not", "bitwise_or",
    "bitwise_xor", "call_extern", "call_intrin", "cast", "convert", "div", "eq", "floordiv", "floormod", "ge",
    "gt", "invert", "le", "let", "logical_and", "logical_not", "logical_or", "lt", "max", "min", "mul", "ne",
    "neg", "select", "shift_left", "shift_right", "sub", "truncdiv", "truncmod", *INTRINSIC_HELPERS,
]
