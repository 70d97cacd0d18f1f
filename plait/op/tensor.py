"""Elementwise and broadcasting operators (ONNX semantics): binary math, comparisons, logical and
bitwise ops, ``where``, unary math, activations and ``cast``.

Dtype rules: both inputs of a binary op share one dtype; comparisons and ``isnan``/``isinf``
return bool; logical ops take bool; bitwise ops take integers; transcendental ops take floats.
float16 stays float16: composite float16 formulas are evaluated in float32 and rounded once (as
ONNX Runtime does), which single numpy float16 ufuncs do anyway.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from plait.ir.numeric import cast_array
from plait.ir.types import INT_DTYPES
from plait.op._common import (
    DTYPES, FLOAT_DTYPES, Attrs, AttrSpec, OpPattern, RelError, TensorType, Type, as_tensor,
    broadcast_shapes, defop, elementwise_cost, same_dtype,
)

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


# ---- unary ------------------------------------------------------------------------------


def unary_rel(kind: str = "numeric", out_dtype: str | None = None) -> Callable[[tuple[Type, ...], Attrs], Type]:
    def rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
        t = require_dtype(as_tensor(args[0]), kind)
        return TensorType(t.shape, out_dtype) if out_dtype else t

    return rel


def defunary(name: str, fn: Callable[[np.ndarray, Attrs], Any], kind: str = "float", flops: float = 1.0,
             out_dtype: str | None = None, attrs: Sequence[AttrSpec] = (), doc: str = "") -> None:
    """A unary op; float formulas see float16 inputs as float32 (see :func:`compute_dtype`)."""

    def ref(args: list, attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        xc = x.astype(compute_dtype(x.dtype), copy=False) if x.dtype.kind == "f" else x
        with np.errstate(all="ignore"):
            return np.asarray(fn(xc, attrs), dtype=out_dtype or x.dtype)

    defop(name, rel=unary_rel(kind, out_dtype), ref=ref, cost=elementwise_cost(flops),
          pattern=OpPattern.ELEMWISE, num_inputs=1, attrs=attrs, doc=doc)


_SQRT_PI = math.sqrt(math.pi)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise, to about 1e-15 relative (evaluated in float64).

    |x| < 2: the Maclaurin series; otherwise 1 - erfc(|x|) with erfc from Laplace's continued
    fraction (erf is exactly 1 in double beyond |x| ~ 6).
    """
    x = np.asarray(x)
    a = np.abs(x.astype(np.float64))
    out = np.empty_like(a)
    small = a < 2.0
    s = a[small]
    s2 = s * s
    term = s.copy()
    acc = s.copy()
    for n in range(1, 30):
        term = term * (-s2) / n
        acc = acc + term / (2 * n + 1)
    out[small] = acc * (2.0 / _SQRT_PI)
    big = ~small & ~np.isnan(a)
    b = np.minimum(a[big], 7.0)
    f = b.copy()
    for k in range(50, 0, -1):
        f = b + (k / 2.0) / f
    out[big] = 1.0 - np.exp(-b * b) / _SQRT_PI / f
    out[np.isnan(a)] = np.nan
    return np.copysign(out, x).astype(x.dtype, copy=False)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))  # never overflows
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _clip(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    lo, hi = attrs["a_min"], attrs["a_max"]
    info = np.iinfo(x.dtype) if x.dtype.kind in "iu" else None
    if lo is not None:
        lo = min(max(lo, info.min), info.max) if info else lo
        x = np.maximum(x, np.asarray(lo).astype(x.dtype))
    if hi is not None:
        hi = min(max(hi, info.min), info.max) if info else hi
        x = np.minimum(x, np.asarray(hi).astype(x.dtype))
    return x


def _gelu(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    if attrs["approximate"] == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + erf(x / math.sqrt(2.0)))


def _isinf(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    return (np.isposinf(x) & attrs["detect_positive"]) | (np.isneginf(x) & attrs["detect_negative"])


def _elu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


_ALPHA = AttrSpec("alpha", "float", 1.0, "scale of the negative part")
_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875

# name, function of (x, attrs), dtype kind, FLOPs per element, attrs, doc
_UNARY: list[tuple[str, Callable[[np.ndarray, Attrs], Any], str, float, tuple[AttrSpec, ...], str]] = [
    ("nn.relu", lambda x, a: np.maximum(x, np.zeros((), x.dtype)), "numeric", 1, (), "max(x, 0)"),
    ("nn.leaky_relu", lambda x, a: np.where(x >= 0, x, a["alpha"] * x), "float", 2,
     (AttrSpec("alpha", "float", 0.01, "slope of the negative part"),), "x if x >= 0 else alpha * x"),
    ("clip", _clip, "numeric", 2,
     (AttrSpec("a_min", "float", None, "lower bound (None: unbounded)", optional=True),
      AttrSpec("a_max", "float", None, "upper bound (None: unbounded)", optional=True)),
     "min(max(x, a_min), a_max)"),
    ("sigmoid", lambda x, a: _sigmoid(x), "float", 12, (), "1 / (1 + exp(-x))"),
    ("tanh", lambda x, a: np.tanh(x), "float", 12, (), "hyperbolic tangent"),
    ("exp", lambda x, a: np.exp(x), "float", 10, (), "e ** x"),
    ("log", lambda x, a: np.log(x), "float", 10, (), "natural logarithm"),
    ("sqrt", lambda x, a: np.sqrt(x), "float", 4, (), "square root"),
    ("rsqrt", lambda x, a: 1 / np.sqrt(x), "float", 5, (), "1 / sqrt(x)"),
    ("erf", lambda x, a: erf(x), "float", 16, (), "the error function"),
    ("abs", lambda x, a: np.abs(x), "numeric", 1, (), "absolute value"),
    ("negative", lambda x, a: np.negative(x), "numeric", 1, (), "-x"),
    ("sign", lambda x, a: np.sign(x), "numeric", 1, (), "-1, 0 or 1 (NaN stays NaN)"),
    ("floor", lambda x, a: np.floor(x), "float", 1, (), "round toward -inf"),
    ("ceil", lambda x, a: np.ceil(x), "float", 1, (), "round toward +inf"),
    ("round", lambda x, a: np.round(x), "float", 1, (), "round half to even"),
    ("reciprocal", lambda x, a: 1 / x, "float", 4, (), "1 / x"),
    ("sin", lambda x, a: np.sin(x), "float", 12, (), "sine"),
    ("cos", lambda x, a: np.cos(x), "float", 12, (), "cosine"),
    ("tan", lambda x, a: np.tan(x), "float", 14, (), "tangent"),
    ("asin", lambda x, a: np.arcsin(x), "float", 16, (), "inverse sine"),
    ("acos", lambda x, a: np.arccos(x), "float", 16, (), "inverse cosine"),
    ("atan", lambda x, a: np.arctan(x), "float", 16, (), "inverse tangent"),
    ("sinh", lambda x, a: np.sinh(x), "float", 12, (), "hyperbolic sine"),
    ("cosh", lambda x, a: np.cosh(x), "float", 12, (), "hyperbolic cosine"),
    ("asinh", lambda x, a: np.arcsinh(x), "float", 16, (), "inverse hyperbolic sine"),
    ("acosh", lambda x, a: np.arccosh(x), "float", 16, (), "inverse hyperbolic cosine"),
    ("atanh", lambda x, a: np.arctanh(x), "float", 16, (), "inverse hyperbolic tangent"),
    ("logical_not", lambda x, a: np.logical_not(x), "bool", 1, (), "not x"),
    ("bitwise_not", lambda x, a: np.invert(x), "int", 1, (), "~x"),
    ("nn.gelu", _gelu, "float", 20,
     (AttrSpec("approximate", "str", "none", "'none': exact (erf); 'tanh': tanh approximation",
               choices=("none", "tanh")),),
     "x * Phi(x), Phi the standard normal CDF (ONNX Gelu)"),
    ("nn.hard_sigmoid", lambda x, a: np.clip(a["alpha"] * x + a["beta"], 0, 1), "float", 3,
     (AttrSpec("alpha", "float", 0.2, "slope"), AttrSpec("beta", "float", 0.5, "offset")),
     "max(0, min(1, alpha * x + beta))"),
    ("nn.hard_swish", lambda x, a: x * np.clip(x / 6 + 0.5, 0, 1), "float", 4, (),
     "x * max(0, min(1, x / 6 + 1 / 2))"),
    ("nn.elu", lambda x, a: _elu(x, a["alpha"]), "float", 12, (_ALPHA,),
     "x if x > 0 else alpha * (exp(x) - 1)"),
    ("nn.selu", lambda x, a: a["gamma"] * _elu(x, a["alpha"]), "float", 13,
     (AttrSpec("alpha", "float", _SELU_ALPHA, "scale of the negative part"),
      AttrSpec("gamma", "float", _SELU_GAMMA, "scale of the result")),
     "gamma * (x if x > 0 else alpha * (exp(x) - 1))"),
    ("nn.celu", lambda x, a: np.where(x > 0, x, a["alpha"] * np.expm1(np.minimum(x, 0) / a["alpha"])),
     "float", 13, (_ALPHA,),
     "max(0, x) + min(0, alpha * (exp(x / alpha) - 1))"),
    ("nn.softplus", lambda x, a: _softplus(x), "float", 20, (), "log(1 + exp(x)), computed stably"),
    ("nn.softsign", lambda x, a: x / (1 + np.abs(x)), "float", 3, (), "x / (1 + |x|)"),
    ("nn.mish", lambda x, a: x * np.tanh(_softplus(x)), "float", 30, (), "x * tanh(softplus(x))"),
    ("nn.silu", lambda x, a: x * _sigmoid(x), "float", 13, (), "x * sigmoid(x) (swish)"),
    ("nn.thresholded_relu", lambda x, a: np.where(x > a["alpha"], x, 0), "float", 1,
     (AttrSpec("alpha", "float", 1.0, "threshold"),), "x if x > alpha else 0"),
]
for _name, _fn, _kind, _flops, _attrs, _doc in _UNARY:
    defunary(_name, _fn, _kind, _flops, attrs=_attrs, doc=_doc)

defunary("isnan", lambda x, a: np.isnan(x), "float", out_dtype="bool", doc="x is NaN")
defunary("isinf", _isinf, "float", out_dtype="bool", attrs=(
    AttrSpec("detect_positive", "bool", True, "report +inf"),
    AttrSpec("detect_negative", "bool", True, "report -inf"),
), doc="x is infinite (ONNX IsInf)")


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
