"""Computes of the elementwise and broadcasting operators (:mod:`plait.op.tensor`).

Each formula mirrors the numpy reference operation by operation (same constants, same order), so
float32 results agree to the rounding of the math library. float16 is computed in float32 and
rounded once; integer arithmetic wraps like the references' numpy arithmetic.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from plait.ir.attrs import Attrs
from plait.te.computes._common import elementwise, is_float, is_uint, nan_max, nan_min, scalar_const, tir, up
from plait.te.registry import register_compute
from plait.tir.dtype import int_range
from plait.tir.expr import PrimExpr

# ---- binary -------------------------------------------------------------------------------------


def _divide(a: PrimExpr, b: PrimExpr, attrs: Attrs) -> PrimExpr:
    return a / b if is_float(a.dtype) else tir.truncdiv(a, b)


def _power(a: PrimExpr, b: PrimExpr, attrs: Attrs) -> PrimExpr:
    if is_float(a.dtype):
        return tir.pow(a, b)
    # the reference evaluates integer powers in double and converts back (3 ** -1 == 0)
    return tir.cast(a.dtype, tir.pow(tir.cast("float64", a), tir.cast("float64", b)))


def _mod(a: PrimExpr, b: PrimExpr, attrs: Attrs) -> PrimExpr:
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
    "divide": _divide,
    "power": _power,
    "maximum": lambda a, b, _: nan_max(a, b),
    "minimum": lambda a, b, _: nan_min(a, b),
    "mod": _mod,
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
    @register_compute(name)
    def _compute(inputs: list, attrs: Attrs, out_type: Any) -> Any:
        return elementwise(name, inputs, out_type, lambda a, b: fn(up(a), up(b), attrs))


for _name, _fn in _BINARY.items():
    _register_binary(_name, _fn)


@register_compute("where")
def _where(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    return elementwise("where", inputs, out_type, lambda c, x, y: tir.select(c, x, y))


@register_compute("nn.prelu")
def _prelu(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    def fn(x: PrimExpr, slope: PrimExpr) -> PrimExpr:
        x, slope = up(x), up(slope)
        return tir.select(x < 0, slope * x, x)

    return elementwise("nn.prelu", inputs, out_type, fn)


# ---- unary --------------------------------------------------------------------------------------


def _sigmoid(x: PrimExpr) -> PrimExpr:
    e = tir.exp(-tir.fabs(x))  # never overflows
    return tir.select(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus(x: PrimExpr) -> PrimExpr:
    return nan_max(x, tir.const(0.0, x.dtype)) + tir.log1p(tir.exp(-tir.fabs(x)))


def _clip_to(x: PrimExpr, lo: float | None, hi: float | None) -> PrimExpr:
    """numpy.maximum(x, lo) then numpy.minimum(., hi); integer bounds saturate to the dtype first."""
    def bound(v: float) -> Any:
        if is_float(x.dtype):
            return scalar_const(v, x.dtype)
        lo_i, hi_i = int_range(x.dtype)
        return tir.const(int(min(max(v, lo_i), hi_i)), x.dtype)  # saturate, then truncate like astype

    if lo is not None:
        x = nan_max(x, bound(lo))
    if hi is not None:
        x = nan_min(x, bound(hi))
    return x


def _relu(x: PrimExpr, a: Attrs) -> PrimExpr:
    return nan_max(x, tir.const(0, x.dtype) if not is_float(x.dtype) else tir.const(0.0, x.dtype))


def _abs(x: PrimExpr, a: Attrs) -> PrimExpr:
    if is_float(x.dtype):
        return tir.fabs(x)
    return x if is_uint(x.dtype) else tir.select(x < 0, -x, x)


def _negative(x: PrimExpr, a: Attrs) -> PrimExpr:
    return -x


def _sign(x: PrimExpr, a: Attrs) -> PrimExpr:
    one = tir.const(1, x.dtype)
    zero = tir.const(0, x.dtype)
    if is_uint(x.dtype):
        return tir.select(x > 0, one, zero)
    rest = tir.select(tir.eq(x, zero), zero, x) if is_float(x.dtype) else zero  # NaN stays NaN
    return tir.select(x > 0, one, tir.select(x < 0, tir.const(-1, x.dtype), rest))


def _gelu(x: PrimExpr, a: Attrs) -> PrimExpr:
    if a["approximate"] == "tanh":
        return 0.5 * x * (1 + tir.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + tir.erf(x / math.sqrt(2.0)))


def _elu(x: PrimExpr, alpha: float) -> PrimExpr:
    return tir.select(x > 0, x, alpha * tir.expm1(nan_min(x, tir.const(0.0, x.dtype))))


def _isinf(x: PrimExpr, a: Attrs) -> PrimExpr:
    parts = []
    if a["detect_positive"]:
        parts.append(tir.logical_and(tir.isinf(x), x > 0))
    if a["detect_negative"]:
        parts.append(tir.logical_and(tir.isinf(x), x < 0))
    return tir.any_(*parts)


def _clip01(v: PrimExpr) -> PrimExpr:
    return _clip_to(v, 0.0, 1.0)


# name -> function of (x in its compute dtype, attrs)
_UNARY: dict[str, Callable[[PrimExpr, Attrs], PrimExpr]] = {
    "nn.relu": _relu,
    "nn.leaky_relu": lambda x, a: tir.select(x >= 0, x, a["alpha"] * x),
    "clip": lambda x, a: _clip_to(x, a["a_min"], a["a_max"]),
    "sigmoid": lambda x, a: _sigmoid(x),
    "tanh": lambda x, a: tir.tanh(x),
    "exp": lambda x, a: tir.exp(x),
    "log": lambda x, a: tir.log(x),
    "sqrt": lambda x, a: tir.sqrt(x),
    "rsqrt": lambda x, a: 1 / tir.sqrt(x),
    "erf": lambda x, a: tir.erf(x),
    "abs": _abs,
    "negative": _negative,
    "sign": _sign,
    "floor": lambda x, a: tir.floor(x),
    "ceil": lambda x, a: tir.ceil(x),
    "round": lambda x, a: tir.nearbyint(x),  # half to even under the default rounding mode
    "reciprocal": lambda x, a: 1 / x,
    "sin": lambda x, a: tir.sin(x),
    "cos": lambda x, a: tir.cos(x),
    "tan": lambda x, a: tir.tan(x),
    "asin": lambda x, a: tir.asin(x),
    "acos": lambda x, a: tir.acos(x),
    "atan": lambda x, a: tir.atan(x),
    "sinh": lambda x, a: tir.sinh(x),
    "cosh": lambda x, a: tir.cosh(x),
    "asinh": lambda x, a: tir.asinh(x),
    "acosh": lambda x, a: tir.acosh(x),
    "atanh": lambda x, a: tir.atanh(x),
    "logical_not": lambda x, a: tir.logical_not(x),
    "bitwise_not": lambda x, a: tir.bitwise_not(x),
    "nn.gelu": _gelu,
    "nn.hard_sigmoid": lambda x, a: _clip01(a["alpha"] * x + a["beta"]),
    "nn.hard_swish": lambda x, a: x * _clip01(x / 6 + 0.5),
    "nn.elu": lambda x, a: _elu(x, a["alpha"]),
    "nn.selu": lambda x, a: a["gamma"] * _elu(x, a["alpha"]),
    "nn.celu": lambda x, a: tir.select(x > 0, x, a["alpha"] * tir.expm1(nan_min(x, tir.const(0.0, x.dtype))
                                                                          / a["alpha"])),
    "nn.softplus": lambda x, a: _softplus(x),
    "nn.softsign": lambda x, a: x / (1 + tir.fabs(x)),
    "nn.mish": lambda x, a: x * tir.tanh(_softplus(x)),
    "nn.silu": lambda x, a: x * _sigmoid(x),
    "nn.thresholded_relu": lambda x, a: tir.select(x > a["alpha"], x, tir.const(0.0, x.dtype)),
    "isnan": lambda x, a: tir.isnan(x),
    "isinf": _isinf,
}


def _register_unary(name: str, fn: Callable[[PrimExpr, Attrs], PrimExpr]) -> None:
    @register_compute(name)
    def _compute(inputs: list, attrs: Attrs, out_type: Any) -> Any:
        return elementwise(name, inputs, out_type, lambda x: fn(up(x), attrs))


for _name, _fn in _UNARY.items():
    _register_unary(_name, _fn)


@register_compute("cast")
def _cast(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    # one conversion from the source dtype (float64 -> float16 must not round twice through float32)
    return elementwise("cast", inputs, out_type, lambda x: x)
