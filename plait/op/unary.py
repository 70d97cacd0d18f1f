"""Unary elementwise operators (ONNX semantics): math, rounding, activations, ``isnan``/``isinf``.

Transcendental ops take floats; ``isnan``/``isinf`` return bool. Float formulas see float16 inputs
as float32 and round once (see :func:`plait.op.tensor.compute_dtype`).

TE computes: each formula mirrors the numpy reference operation by operation (same constants, same
order), so float32 results agree to the rounding of the math library.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from plait.ir.attrs import Attrs
from plait.op._common import (
    AttrSpec, DTYPES, FLOAT_DTYPES, Family, OnnxMap, OpPattern, TensorType, Type, as_tensor, elementwise_cost,
)
from plait.op._compute import elementwise, is_float, is_uint, nan_max, nan_min, scalar_const, tir, up
from plait.op.tensor import compute_dtype, require_dtype
from plait.tir.dtype import int_range
from plait.tir.expr import PrimExpr

defop = Family()

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


# ---- TE computes ----------------------------------------------------------------------------------


# ---- unary --------------------------------------------------------------------------------------


def _sigmoid_te(x: PrimExpr) -> PrimExpr:
    e = tir.exp(-tir.fabs(x))  # never overflows
    return tir.select(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus_te(x: PrimExpr) -> PrimExpr:
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


def _gelu_te(x: PrimExpr, a: Attrs) -> PrimExpr:
    if a["approximate"] == "tanh":
        return 0.5 * x * (1 + tir.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + tir.erf(x / math.sqrt(2.0)))


def _elu_te(x: PrimExpr, alpha: float) -> PrimExpr:
    return tir.select(x > 0, x, alpha * tir.expm1(nan_min(x, tir.const(0.0, x.dtype))))


def _isinf_te(x: PrimExpr, a: Attrs) -> PrimExpr:
    parts = []
    if a["detect_positive"]:
        parts.append(tir.logical_and(tir.isinf(x), x > 0))
    if a["detect_negative"]:
        parts.append(tir.logical_and(tir.isinf(x), x < 0))
    return tir.any_(*parts)


def _clip01(v: PrimExpr) -> PrimExpr:
    return _clip_to(v, 0.0, 1.0)


# name -> function of (x in its compute dtype, attrs)
_UNARY_TE: dict[str, Callable[[PrimExpr, Attrs], PrimExpr]] = {
    "nn.relu": _relu,
    "nn.leaky_relu": lambda x, a: tir.select(x >= 0, x, a["alpha"] * x),
    "clip": lambda x, a: _clip_to(x, a["a_min"], a["a_max"]),
    "sigmoid": lambda x, a: _sigmoid_te(x),
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
    "nn.gelu": _gelu_te,
    "nn.hard_sigmoid": lambda x, a: _clip01(a["alpha"] * x + a["beta"]),
    "nn.hard_swish": lambda x, a: x * _clip01(x / 6 + 0.5),
    "nn.elu": lambda x, a: _elu_te(x, a["alpha"]),
    "nn.selu": lambda x, a: a["gamma"] * _elu_te(x, a["alpha"]),
    "nn.celu": lambda x, a: tir.select(x > 0, x, a["alpha"] * tir.expm1(nan_min(x, tir.const(0.0, x.dtype))
                                                                          / a["alpha"])),
    "nn.softplus": lambda x, a: _softplus_te(x),
    "nn.softsign": lambda x, a: x / (1 + tir.fabs(x)),
    "nn.mish": lambda x, a: x * tir.tanh(_softplus_te(x)),
    "nn.silu": lambda x, a: x * _sigmoid_te(x),
    "nn.thresholded_relu": lambda x, a: tir.select(x > a["alpha"], x, tir.const(0.0, x.dtype)),
    "isnan": lambda x, a: tir.isnan(x),
    "isinf": _isinf_te,
}


def _register_unary(name: str, fn: Callable[[PrimExpr, Attrs], PrimExpr]) -> None:
    @defop.compute(name)
    def _compute(inputs: list, attrs: Attrs, out_type: Any) -> Any:
        return elementwise(name, inputs, out_type, lambda x: fn(up(x), attrs))


for _name, _fn in _UNARY_TE.items():
    _register_unary(_name, _fn)


# ---- ONNX -----------------------------------------------------------------------------------------


def _rsqrt_onnx(ex: Any) -> str:
    return ex.node("Reciprocal", [ex.node("Sqrt", ex.ins)])


def _silu_onnx(ex: Any) -> str:
    return ex.node("Mul", [ex.ins[0], ex.node("Sigmoid", ex.ins)])


def _clip_onnx(ex: Any) -> str:
    dtype = ex.arg_type(0).dtype
    bounds = []
    for k in ("a_min", "a_max"):
        v = ex.attrs[k]
        if v is None:
            bounds.append("")
            continue
        if dtype not in FLOAT_DTYPES:
            if float(v) != int(v):
                raise ex.fail(f"clip of {dtype} values to the non-integer bound {v}")
            info = np.iinfo(DTYPES[dtype])  # a bound beyond the dtype's range clips nothing
            v = min(max(int(v), int(info.min)), int(info.max))
        bounds.append(ex.const(v, DTYPES[dtype], hint=k))
    while bounds and bounds[-1] == "":
        bounds.pop()
    return ex.node("Clip", [ex.ins[0], *bounds])


# 1:1 (import and export)
for _name, _op_type, _since in [
        ("abs", "Abs", 1), ("negative", "Neg", 1), ("reciprocal", "Reciprocal", 1), ("sqrt", "Sqrt", 1),
        ("exp", "Exp", 1), ("log", "Log", 1), ("sin", "Sin", 7), ("cos", "Cos", 7), ("tan", "Tan", 7),
        ("asin", "Asin", 7), ("acos", "Acos", 7), ("atan", "Atan", 7), ("sinh", "Sinh", 9), ("cosh", "Cosh", 9),
        ("asinh", "Asinh", 9), ("acosh", "Acosh", 9), ("atanh", "Atanh", 9), ("floor", "Floor", 1),
        ("ceil", "Ceil", 1), ("round", "Round", 11), ("sign", "Sign", 9), ("erf", "Erf", 9), ("isnan", "IsNaN", 9),
        ("logical_not", "Not", 1), ("bitwise_not", "BitwiseNot", 18), ("nn.relu", "Relu", 1),
        ("sigmoid", "Sigmoid", 1), ("tanh", "Tanh", 1), ("nn.softplus", "Softplus", 1),
        ("nn.softsign", "Softsign", 1), ("nn.mish", "Mish", 18), ("nn.hard_swish", "HardSwish", 14)]:
    defop.onnx(_name, OnnxMap(_op_type, since=_since))
defop.onnx("nn.leaky_relu", OnnxMap("LeakyRelu", attrs={"alpha": "alpha"}))
defop.onnx("nn.elu", OnnxMap("Elu", attrs={"alpha": "alpha"}))
defop.onnx("nn.selu", OnnxMap("Selu", attrs={"alpha": "alpha", "gamma": "gamma"}))
defop.onnx("nn.celu", OnnxMap("Celu", attrs={"alpha": "alpha"}, since=12))
defop.onnx("nn.hard_sigmoid", OnnxMap("HardSigmoid", attrs={"alpha": "alpha", "beta": "beta"}))
defop.onnx("nn.thresholded_relu", OnnxMap("ThresholdedRelu", attrs={"alpha": "alpha"}, since=10))
defop.onnx("isinf", OnnxMap("IsInf", attrs={"detect_positive": ("detect_positive", bool),
                                             "detect_negative": ("detect_negative", bool)}, since=10))
defop.onnx("nn.gelu", OnnxMap("Gelu", attrs={"approximate": "approximate"}, since=20))
# imported by the frontend's converters (Swish, Clip's bound inputs); exported by code
defop.onnx("rsqrt", OnnxMap("Sqrt", convert=False, export=_rsqrt_onnx))
defop.onnx("nn.silu", OnnxMap("Swish", convert=False, export=_silu_onnx))
defop.onnx("clip", OnnxMap("Clip", convert=False, export=_clip_onnx))


# ---- nn.shrink (ONNX Shrink): schema, relation, reference, cost, fusion kind, compute, ONNX ---------


def _shrink(x: np.ndarray, a: Attrs) -> np.ndarray:
    lambd, bias = a["lambd"], a["bias"]
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


defunary("nn.shrink", _shrink, "float", 3, attrs=(
    AttrSpec("lambd", "float", 0.5, "half-width of the band around zero that becomes 0"),
    AttrSpec("bias", "float", 0.0, "moved towards zero outside the band"),
), doc="x + bias if x < -lambd, x - bias if x > lambd, else 0 (ONNX Shrink; floats)")
defop.onnx("nn.shrink", OnnxMap("Shrink", attrs={"lambd": "lambd", "bias": "bias"}, since=9))


@defop.compute("nn.shrink")
def _shrink_te(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    lambd, bias = attrs["lambd"], attrs["bias"]

    def fn(x: PrimExpr) -> PrimExpr:
        x = up(x)
        return tir.select(x < -lambd, x + bias, tir.select(x > lambd, x - bias, tir.const(0.0, x.dtype)))

    return elementwise("nn.shrink", inputs, out_type, fn)
