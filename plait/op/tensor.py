"""Elementwise and broadcasting operators (ONNX semantics): binary math, comparisons, logical and
bitwise ops, ``where``, ``nn.prelu`` and ``cast`` (the unary ones are in :mod:`plait.op.unary`).

Dtype rules: both inputs of a binary op share one dtype; comparisons return bool; logical ops take
bool; bitwise ops take integers. float16 stays float16: composite float16 formulas are evaluated
in float32 and rounded once (as ONNX Runtime does), which single numpy float16 ufuncs do anyway.

TE computes: each formula mirrors the numpy reference operation by operation (same constants, same
order), so float32 results agree to the rounding of the math library. float16 is computed in
float32 and rounded once; integer arithmetic wraps like the references' numpy arithmetic.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from plait.ir.attrs import Attrs
from plait.ir.numeric import cast_array
from plait.ir.types import INT_DTYPES
from plait.op._common import (
    AttrSpec, DTYPES, FLOAT_DTYPES, Family, OnnxMap, OpPattern, RelError, TensorType, Type, as_tensor,
    broadcast_shapes, elementwise_cost, same_dtype,
)
from plait.op._compute import elementwise, is_float, nan_max, nan_min, tir, up
from plait.tir.expr import PrimExpr

defop = Family()

# dtype classes an operator accepts: name -> (dtypes, description used in error messages)
DTYPE_KINDS: dict[str, tuple[frozenset[str], str]] = {
    "any": (frozenset(DTYPES), "any"),
    "numeric": (INT_DTYPES | FLOAT_DTYPES, "a numeric"),
    "float": (FLOAT_DTYPES, "a floating-point"),
    "int": (INT_DTYPES, "an integer"),
    "bool": (frozenset({"bool"}), "a bool"),
}


def require_dtype(t: TensorType, kind: str, what: str = "argument") -> TensorType:
    """Check that ``t``'s dtype belongs to ``kind`` (a key of :data:`DTYPE_KINDS`)."""
    dtypes, desc = DTYPE_KINDS[kind]
    if t.dtype not in dtypes:
        raise RelError(f"{what}: expected {desc} tensor, got {t}")
    return t


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a float formula is evaluated in: float32 for float16 inputs, else the input's."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


# ---- binary -----------------------------------------------------------------------------


def binary_rel(kind: str = "numeric", out_dtype: str | None = None) -> Callable[[tuple[Type, ...], Attrs], Type]:
    """Broadcasting binary relation; both inputs share a dtype of ``kind``; result dtype = it or ``out_dtype``."""

    def rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
        a, b = (as_tensor(t, f"argument {i}") for i, t in enumerate(args))
        dt = same_dtype((a, b))
        require_dtype(a, kind, "arguments")
        return TensorType(broadcast_shapes(a.shape, b.shape), out_dtype or dt)

    return rel


def defbinary(name: str, fn: Callable[[np.ndarray, np.ndarray, Attrs], Any], kind: str = "numeric",
              flops: float = 1.0, out_dtype: str | None = None, attrs: Sequence[AttrSpec] = (),
              doc: str = "") -> None:
    def ref(args: list, attrs: Attrs) -> np.ndarray:
        a, b = (np.asarray(v) for v in args)
        with np.errstate(all="ignore"):
            return np.asarray(fn(a, b, attrs), dtype=out_dtype or a.dtype)

    defop(name, rel=binary_rel(kind, out_dtype), ref=ref, cost=elementwise_cost(flops),
          pattern=OpPattern.BROADCAST, num_inputs=2, attrs=attrs, doc=doc)


def _u2(f: Callable) -> Callable[[np.ndarray, np.ndarray, Attrs], Any]:
    return lambda a, b, attrs: f(a, b)


def _divide(a: np.ndarray, b: np.ndarray, attrs: Attrs) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.true_divide(a, b)
    q = np.floor_divide(a, b)
    if a.dtype.kind == "u":
        return q
    # floor -> truncation toward zero: add one where the remainder is nonzero and the signs differ
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(a.dtype)


def _power(a: np.ndarray, b: np.ndarray, attrs: Attrs) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.power(a, b)
    # ONNX Runtime evaluates integer powers in double and converts back (3 ** -1 == 0); a result
    # beyond the type saturates (plait's defined conversion)
    return cast_array(np.power(a.astype(np.float64), b.astype(np.float64)), a.dtype.name)


def _mod(a: np.ndarray, b: np.ndarray, attrs: Attrs) -> np.ndarray:
    # fmod=1: C fmod, the sign of the dividend; fmod=0: the sign of the divisor (Python %)
    return np.fmod(a, b) if attrs["fmod"] else np.mod(a, b)


defbinary("add", _u2(np.add), doc="a + b, broadcasting")
defbinary("subtract", _u2(np.subtract), doc="a - b, broadcasting")
defbinary("multiply", _u2(np.multiply), doc="a * b, broadcasting")
defbinary("divide", _divide, flops=4, doc="a / b; integer division truncates toward zero")
defbinary("power", _power, flops=10, doc="a ** b; integer powers are computed in double and truncated")
defbinary("maximum", _u2(np.maximum), doc="elementwise max (NaN propagates)")
defbinary("minimum", _u2(np.minimum), doc="elementwise min (NaN propagates)")
defbinary("mod", _mod, flops=4, attrs=[
    AttrSpec("fmod", "bool", False, "true: result takes the dividend's sign (C fmod); false: the divisor's"),
], doc="remainder of a / b (ONNX Mod)")
for _name, _f in [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
                  ("less_equal", np.less_equal), ("greater", np.greater), ("greater_equal", np.greater_equal)]:
    defbinary(_name, _u2(_f), kind="any", out_dtype="bool", doc=f"elementwise {_f.__name__} -> bool")
for _name, _f in [("logical_and", np.logical_and), ("logical_or", np.logical_or),
                  ("logical_xor", np.logical_xor)]:
    defbinary(_name, _u2(_f), kind="bool", doc=f"elementwise {_f.__name__} of bool tensors")
for _name, _f in [("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or),
                  ("bitwise_xor", np.bitwise_xor), ("left_shift", np.left_shift),
                  ("right_shift", np.right_shift)]:
    defbinary(_name, _u2(_f), kind="int", doc=f"elementwise {_f.__name__} of integer tensors")


def _where_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    c, x, y = (as_tensor(t, f"argument {i}") for i, t in enumerate(args))
    require_dtype(c, "bool", "argument 0 (condition)")
    dt = same_dtype((x, y), "arguments 1 and 2")
    return TensorType(broadcast_shapes(c.shape, x.shape, y.shape), dt)


def _where_ref(args: list, attrs: Attrs) -> np.ndarray:
    c, x, y = (np.asarray(v) for v in args)
    return np.asarray(np.where(c, x, y), dtype=x.dtype)


defop("where", rel=_where_rel, ref=_where_ref, cost=elementwise_cost(1.0), pattern=OpPattern.BROADCAST,
      num_inputs=3, doc="cond ? x : y, three-way broadcasting")


def _prelu_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x, slope = (as_tensor(t, f"argument {i}") for i, t in enumerate(args))
    same_dtype((x, slope))
    require_dtype(x, "numeric", "arguments")
    out = broadcast_shapes(x.shape, slope.shape)
    fits = len(out) == x.ndim and all(o == d or isinstance(d, str) for o, d in zip(out, x.shape))
    if not fits:
        raise RelError(f"slope: expected a shape that broadcasts to {tuple(x.shape)}, got {tuple(slope.shape)}")
    return x


def _prelu_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, slope = (np.asarray(v) for v in args)
    with np.errstate(all="ignore"):
        return np.asarray(np.where(x < 0, slope * x, x), dtype=x.dtype)


defop("nn.prelu", rel=_prelu_rel, ref=_prelu_ref, cost=elementwise_cost(2.0), pattern=OpPattern.BROADCAST,
      num_inputs=2, doc="x if x >= 0 else slope * x; slope broadcasts to x (ONNX PRelu)")


# ---- cast -------------------------------------------------------------------------------


def _cast_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    return TensorType(as_tensor(args[0]).shape, attrs["dtype"])


def _cast_ref(args: list, attrs: Attrs) -> np.ndarray:
    # float -> int truncates toward zero, float -> bool is x != 0 (NaN -> true); NaN, infinities
    # and out-of-range values (undefined in ONNX, and in numpy's astype CPU-dependent) have plait's
    # defined result: NaN -> 0, saturation at the type's limits (docs/tir.md, "Numeric semantics")
    return cast_array(args[0], attrs["dtype"])


defop("cast", rel=_cast_rel, ref=_cast_ref, cost=elementwise_cost(1.0), pattern=OpPattern.ELEMWISE,
      num_inputs=1, attrs=[AttrSpec("dtype", "dtype", doc="the result's dtype")],
      doc="convert to another dtype (ONNX Cast)")


# ---- TE computes ----------------------------------------------------------------------------------


# ---- binary -------------------------------------------------------------------------------------


def _divide_te(a: PrimExpr, b: PrimExpr, attrs: Attrs) -> PrimExpr:
    return a / b if is_float(a.dtype) else tir.truncdiv(a, b)


def _power_te(a: PrimExpr, b: PrimExpr, attrs: Attrs) -> PrimExpr:
    if is_float(a.dtype):
        return tir.pow(a, b)
    # the reference evaluates integer powers in double and converts back (3 ** -1 == 0)
    return tir.cast(a.dtype, tir.pow(tir.cast("float64", a), tir.cast("float64", b)))


def _mod_te(a: PrimExpr, b: PrimExpr, attrs: Attrs) -> PrimExpr:
    if not is_float(a.dtype):
        return tir.truncmod(a, b) if attrs["fmod"] else tir.floormod(a, b)
    m = tir.fmod(a, b)
    if attrs["fmod"]:
        return m
    # numpy's float remainder: fmod, moved into the divisor's sign; a zero result takes b's sign
    flip = tir.logical_and(tir.ne(m, 0.0), tir.ne(b < 0.0, m < 0.0))
    return tir.select(flip, m + b, tir.select(tir.eq(m, 0.0), tir.copysign(0.0, b), m))


def _cmp(f: Callable[[PrimExpr, PrimExpr], PrimExpr]) -> Callable[[PrimExpr, PrimExpr, Attrs], PrimExpr]:
    def fn(a: PrimExpr, b: PrimExpr, attrs: Attrs) -> PrimExpr:
        if a.dtype == "bool" and f not in (tir.eq, tir.ne):  # False < True, as numpy orders bools
            a, b = tir.cast("int8", a), tir.cast("int8", b)
        return f(a, b)

    return fn


def _shift(left: bool) -> Callable[[PrimExpr, PrimExpr, Attrs], PrimExpr]:
    """Shifts as numpy defines them for every amount: C leaves a negative amount or one of at least the
    bit width undefined, so those give 0 (or the sign fill for a right shift of a negative value)."""

    def fn(a: PrimExpr, b: PrimExpr, attrs: Attrs) -> PrimExpr:
        width = np.dtype(a.dtype).itemsize * 8
        signed = np.dtype(a.dtype).kind == "i"
        out_of_range = b >= tir.const(width, b.dtype)
        if np.dtype(b.dtype).kind == "i":
            out_of_range = tir.logical_or(b < tir.const(0, b.dtype), out_of_range)
        zero = tir.const(0, a.dtype)
        if left:
            return tir.select(out_of_range, zero, tir.shift_left(a, b))
        fill = tir.select(a < zero, tir.const(-1, a.dtype), zero) if signed else zero
        return tir.select(out_of_range, fill, tir.shift_right(a, b))

    return fn


_BINARY: dict[str, Callable[[PrimExpr, PrimExpr, Attrs], PrimExpr]] = {
    "add": lambda a, b, _: a + b,
    "subtract": lambda a, b, _: a - b,
    "multiply": lambda a, b, _: a * b,
    "divide": _divide_te,
    "power": _power_te,
    "maximum": lambda a, b, _: nan_max(a, b),
    "minimum": lambda a, b, _: nan_min(a, b),
    "mod": _mod_te,
    "equal": _cmp(tir.eq), "not_equal": _cmp(tir.ne), "less": _cmp(tir.lt), "less_equal": _cmp(tir.le),
    "greater": _cmp(tir.gt), "greater_equal": _cmp(tir.ge),
    "logical_and": lambda a, b, _: tir.logical_and(a, b),
    "logical_or": lambda a, b, _: tir.logical_or(a, b),
    "logical_xor": lambda a, b, _: tir.ne(a, b),
    "bitwise_and": lambda a, b, _: tir.bitwise_and(a, b),
    "bitwise_or": lambda a, b, _: tir.bitwise_or(a, b),
    "bitwise_xor": lambda a, b, _: tir.bitwise_xor(a, b),
    "left_shift": _shift(True),
    "right_shift": _shift(False),
}


def _register_binary(name: str, fn: Callable[[PrimExpr, PrimExpr, Attrs], PrimExpr]) -> None:
    @defop.compute(name)
    def _compute(inputs: list, attrs: Attrs, out_type: Any) -> Any:
        return elementwise(name, inputs, out_type, lambda a, b: fn(up(a), up(b), attrs))


for _name, _fn in _BINARY.items():
    _register_binary(_name, _fn)


@defop.compute("where")
def _where(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    return elementwise("where", inputs, out_type, lambda c, x, y: tir.select(c, x, y))


@defop.compute("nn.prelu")
def _prelu(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    def fn(x: PrimExpr, slope: PrimExpr) -> PrimExpr:
        x, slope = up(x), up(slope)
        return tir.select(x < 0, slope * x, x)

    return elementwise("nn.prelu", inputs, out_type, fn)


@defop.compute("cast")
def _cast(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    # one conversion from the source dtype (float64 -> float16 must not round twice through float32)
    return elementwise("cast", inputs, out_type, lambda x: x)


# ---- ONNX -----------------------------------------------------------------------------------------


def _not_equal_onnx(ex: Any) -> str:
    return ex.node("Not", [ex.node("Equal", ex.ins)])


def _mod_onnx(ex: Any) -> str:
    fmod = bool(ex.attrs["fmod"])
    dtype = ex.arg_type(0).dtype
    if dtype not in FLOAT_DTYPES or fmod:
        return ex.node("Mod", ex.ins, fmod=int(fmod))
    # floats with the divisor's sign (numpy's mod; ONNX Mod takes fmod=1 for floats): r = fmod(a, b),
    # plus b where r is non-zero with the other sign; every result (zero too) has b's sign. The sign
    # is applied by a multiplication: ONNX Runtime's Where turns -0.0 into 0.0.
    a, b = ex.ins
    dt = DTYPES[dtype]
    zero, one, minus_one = (ex.const(v, dt, hint=h) for v, h in ((0.0, "zero"), (1.0, "one"), (-1.0, "minus_one")))
    r = ex.node("Mod", [a, b], fmod=1)
    b_neg = ex.node("Or", [ex.node("Less", [b, zero]), ex.node("Less", [ex.node("Div", [one, b]), zero])])  # -0 too
    differ = ex.node("Xor", [ex.node("Less", [r, zero]), b_neg])
    fix = ex.node("And", [differ, ex.node("Not", [ex.node("Equal", [r, zero])])])
    fixed = ex.node("Where", [fix, ex.node("Add", [r, b]), r])
    return ex.node("Mul", [ex.node("Abs", [fixed]), ex.node("Where", [b_neg, minus_one, one])])


def _shift_onnx(ex: Any) -> str:
    """BitShift. Signed integers go through the unsigned type of their width (ONNX BitShift is
    unsigned-only; a negative amount becomes one of at least the bit width); a right shift of a
    negative value is ~(~x >> s), arithmetic. Amounts of at least the bit width give 0 in ONNX
    Runtime's BitShift (ONNX leaves them unspecified), which is numpy's answer (-1 for a negative
    value shifted right, through the complement)."""
    dtype = ex.arg_type(0).dtype
    dt = DTYPES[dtype]
    direction = "LEFT" if ex.call.op.name == "left_shift" else "RIGHT"  # type: ignore[union-attr]
    if dt.kind == "u":
        return ex.node("BitShift", ex.ins, direction=direction)
    ex.need_opset(18, f"a shift of {dtype} values (BitwiseNot)")
    x, amount = ex.ins
    udt = f"uint{dt.itemsize * 8}"

    def shift(v: str) -> str:
        u = ex.node("Cast", [v], to=ex.elem_type(udt))
        return ex.node("Cast", [ex.node("BitShift", [u, s], direction=direction)], to=ex.elem_type(dtype))

    s = ex.node("Cast", [amount], to=ex.elem_type(udt))
    if direction == "LEFT":
        return shift(x)
    negative = ex.node("Less", [x, ex.const(0, dt, hint="zero")])
    return ex.node("Where", [negative, ex.node("BitwiseNot", [shift(ex.node("BitwiseNot", [x]))]), shift(x)])


def _cast_onnx(ex: Any) -> str:
    return ex.node("Cast", ex.ins, to=ex.elem_type(ex.attrs["dtype"]))


# 1:1 (import and export): the elementwise binary ops; opsets < 7 may carry broadcast/axis
for _name, _op_type, _since in [
        ("add", "Add", 1), ("subtract", "Sub", 1), ("multiply", "Mul", 1), ("divide", "Div", 1),
        ("equal", "Equal", 1), ("less", "Less", 1), ("less_equal", "LessOrEqual", 12), ("greater", "Greater", 1),
        ("greater_equal", "GreaterOrEqual", 12), ("logical_and", "And", 1), ("logical_or", "Or", 1),
        ("logical_xor", "Xor", 1), ("bitwise_and", "BitwiseAnd", 18), ("bitwise_or", "BitwiseOr", 18),
        ("bitwise_xor", "BitwiseXor", 18)]:
    defop.onnx(_name, OnnxMap(_op_type, since=_since, legacy_broadcast=True))
defop.onnx("where", OnnxMap("Where"))
defop.onnx("mod", OnnxMap("Mod", attrs={"fmod": ("fmod", bool)}, since=10, export=_mod_onnx))
# imported by the frontend's converters (Pow's dtype rules, the variadic Max/Min, PRelu's legacy
# per-channel slope, BitShift's direction, Cast's dtype codes); exported 1:1 or by code
defop.onnx("power", OnnxMap("Pow", convert=False))
defop.onnx("maximum", OnnxMap("Max", convert=False))
defop.onnx("minimum", OnnxMap("Min", convert=False))
defop.onnx("nn.prelu", OnnxMap("PRelu", convert=False))
defop.onnx("not_equal", OnnxMap("Equal", convert=False, export=_not_equal_onnx))
defop.onnx("left_shift", OnnxMap("BitShift", convert=False, export=_shift_onnx))
defop.onnx("right_shift", OnnxMap("BitShift", convert=False, export=_shift_onnx))
defop.onnx("cast", OnnxMap("Cast", convert=False, export=_cast_onnx))
