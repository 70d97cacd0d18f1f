"""Scalar semantics of TIR operators on numpy scalars: the single source of truth shared by the
interpreter and the simplifier's constant folding (so folding never changes a result).

Values are numpy scalars of the node's dtype: integer arithmetic wraps, floats round at the
dtype's precision. Every operation has one defined result for every input, also where C leaves it
undefined (docs/tir.md, "Numeric semantics"; the backends generate code computing exactly this):
integer division and remainder by zero give 0, ``INT_MIN / -1`` wraps to ``INT_MIN`` (remainder 0),
a shift by a negative amount or by >= the width gives 0 (a right shift of a negative value: -1),
and float -> integer casts truncate and saturate (:mod:`plait.ir.numeric`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable

import numpy as np

from plait.tir.dtype import bits, int_range, is_float, is_int, scalar_type, wrap_int


def floordiv(a: Any, b: Any) -> Any:
    if b == 0:
        return type(a)(0)
    return type(a)(wrap_int(int(a) // int(b), a.dtype.name))


def floormod(a: Any, b: Any) -> Any:
    if b == 0:
        return type(a)(0)
    return type(a)(wrap_int(int(a) % int(b), a.dtype.name))


def _trunc_q(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def truncdiv(a: Any, b: Any) -> Any:
    if b == 0:
        return type(a)(0)
    return type(a)(wrap_int(_trunc_q(int(a), int(b)), a.dtype.name))


def truncmod(a: Any, b: Any) -> Any:
    if b == 0:
        return type(a)(0)
    ia, ib = int(a), int(b)
    return type(a)(wrap_int(ia - ib * _trunc_q(ia, ib), a.dtype.name))


def shift_left(a: Any, b: Any) -> Any:
    """``a << b`` wrapped; 0 when ``b`` is negative or at least the width (as numpy defines it)."""
    n = int(b)
    if not 0 <= n < bits(a.dtype.name):
        return type(a)(0)
    return type(a)(wrap_int(int(a) << n, a.dtype.name))


def shift_right(a: Any, b: Any) -> Any:
    """``a >> b``, arithmetic for signed types; a negative amount or one of at least the width shifts
    every bit out: 0, or -1 for a negative ``a`` (as numpy defines it)."""
    n = int(b)
    if not 0 <= n < bits(a.dtype.name):
        n = bits(a.dtype.name) - 1 if int(a) < 0 else bits(a.dtype.name)
    return type(a)(int(a) >> n)


def minimum(a: Any, b: Any) -> Any:
    return a if a < b else b


def maximum(a: Any, b: Any) -> Any:
    return a if a > b else b


def cast(dtype: str, value: Any) -> Any:
    """``value`` converted to ``dtype`` (:mod:`plait.ir.numeric`: float -> integer truncates, NaN -> 0,
    beyond the range saturates; the rest as numpy converts)."""
    if is_int(dtype) and is_float(value.dtype.name):
        v = float(value)
        lo, hi = int_range(dtype)
        if math.isnan(v):
            return scalar_type(dtype)(0)
        if math.isinf(v):
            return scalar_type(dtype)(hi if v > 0 else lo)
        return scalar_type(dtype)(min(max(int(v), lo), hi))  # int() truncates toward zero, exactly
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(dtype)[()]


def _round_half_away(x: Any) -> Any:
    v = float(x)
    if not math.isfinite(v):
        return x
    r = math.floor(abs(v))
    if abs(v) - r >= 0.5:
        r += 1
    return type(x)(math.copysign(r, v))


def _via_float64(fn: Callable[[float], float]) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        try:
            return type(x)(fn(float(x)))
        except (ValueError, OverflowError):
            return type(x)(math.nan)
    return f


def fma(a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` rounded once (C99 ``fma``/``fmaf``), elementwise on float32 or float64 numpy
    values (scalars or arrays of one dtype). float32: the product is exact in float64, the sum is
    rounded to odd in float64 (the rounding error from Knuth's TwoSum; an inexact sum whose last
    bit is even moves one ulp towards the error), and rounding that to float32 is the single
    rounding (53 >= 24 + 2 bits: Boldo and Melquiond, "Emulation of FMA and correctly rounded
    sums: proved algorithms using rounding to odd"). float64: exact in rationals."""
    dt = np.result_type(a, b, c)
    if dt == np.float64:
        def one(x: float, y: float, z: float) -> float:
            if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
                return x * y + z
            v = Fraction(x) * Fraction(y) + Fraction(z)
            try:
                return float(v) if v else x * y + z  # an exact zero keeps IEEE's sign
            except OverflowError:
                return math.copysign(math.inf, v)

        out = np.vectorize(one, otypes=[np.float64])(a, b, c)
        return np.float64(out) if np.ndim(out) == 0 else out
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    z = np.asarray(c, np.float64)
    with np.errstate(all="ignore"):
        s = p + z
        t = s - p
        err = (p - (s - t)) + (z - t)
        even = (np.asarray(s).view(np.int64) & 1) == 0
        nudge = np.isfinite(s) & (err != 0) & even
        s = np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
        out = s.astype(np.float32)
    return np.float32(out) if np.ndim(out) == 0 else out


_INTRIN_IMPL: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10,
    "log1p": np.log1p, "sqrt": np.sqrt, "cbrt": np.cbrt, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "erf": _via_float64(math.erf),
    "erfc": _via_float64(math.erfc), "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    "round": _round_half_away, "nearbyint": np.rint, "pow": np.power, "fmod": np.fmod, "atan2": np.arctan2,
    "copysign": np.copysign, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
    "rsqrt": lambda x: type(x)(1) / np.sqrt(x), "fma": fma,
}


def intrinsic(name: str) -> Callable[..., Any]:
    """A numpy-scalar implementation of the intrinsic ``name`` (float16 is computed in float32)."""
    impl = _INTRIN_IMPL[name]

    def call(*args: Any) -> Any:
        with np.errstate(all="ignore"):
            if args[0].dtype == np.float16:
                out = impl(*(np.float32(a) for a in args))
                return out if isinstance(out, np.bool_) else np.float16(out)
            return impl(*args)

    return call


def make_scalar(value: Any, dtype: str) -> Any:
    """``value`` as a numpy scalar of ``dtype`` (ints are wrapped, like a C conversion)."""
    if dtype == "bool":
        return np.bool_(bool(value))
    if np.dtype(dtype).kind in "iu":
        return scalar_type(dtype)(wrap_int(int(value), dtype))
    with np.errstate(all="ignore"):
        return scalar_type(dtype)(value)
