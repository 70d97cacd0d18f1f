"""Integer elementwise operators with ONNX Runtime's arithmetic: ``qnn.lookup``, ``qnn.softmax``,
``qnn.add`` and ``qnn.mul``.

- ``qnn.lookup(x, table)``: an int8/uint8 value through a 256-entry table (``table[x - lo]``, lo
  the input dtype's lowest value); the C is a gather. ONNX Runtime computes QLinearSigmoid and
  QLinearLeakyRelu this way (``QlinearBuildLookupTable`` in
  onnxruntime/contrib_ops/cpu/quantization/qlinear_lookup_table.cc): every input value dequantized
  (``x_scale * float(x - x_zp)``), the float function applied, the results quantized as
  ``qnn.quantize`` does. :func:`lookup_table` builds such a table at compile time with the same
  float computation: :func:`mlas_logistic` is MLAS's logistic polynomial evaluated with fused
  multiply-adds (the FMA3 kernel ONNX Runtime dispatches to on x86-64 with AVX2), exactly rounded.
- ``qnn.softmax(x, table)``: QLinearSoftmax as ONNX Runtime computes it (qlinear_softmax.cc, opset 13
  semantics): per row along ``axis``, ``e = table[255 + x - max(x)]`` (a float32 table of
  ``exp((k - 255 + shift) * x_scale)`` in double, :func:`softmax_table`), ``sum`` the float32 sum of
  ``e`` in index order, and ``y = clamp(nearbyint(e * multiplier / sum) + zp)`` with ``multiplier =
  floor(1 / y_scale)`` in float32.

The tables are tensor arguments (TE has no constant tables); the importer and the QDQ pass give
constants, which stay compile-time constants of the artifact.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import numpy as np

from plait import te
from plait.ir.attrs import Attrs
from plait.op._common import (
    AttrSpec, Cost, Family, OnnxMap, OpPattern, RelError, TensorType, Type, as_tensor, norm_axis, numel,
)
from plait.op._compute import Rows, compute_fact, dims_agree, make, out_tensor_type, shape_of, tir
from plait.tir.dtype import int_range
from plait.tir.scalar import fma
from plait.tir.expr import PrimExpr

defop = Family()

INT8 = ("int8", "uint8")


def _int8(t: Type, what: str) -> TensorType:
    x = as_tensor(t, what)
    if x.dtype not in INT8:
        raise RelError(f"{what}: expected int8 or uint8, got {x}")
    return x


def _table(t: Type, what: str, dtypes: tuple[str, ...]) -> TensorType:
    tab = as_tensor(t, what)
    if tab.dtype not in dtypes or tab.shape != (256,):
        raise RelError(f"{what}: expected a [256] {' or '.join(dtypes)} table, got {tab}")
    return tab


def _cost(flops: float) -> Callable[[tuple[Type, ...], Type, Attrs], Cost]:
    def cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
        return Cost(flops=flops * numel(out), bytes_read=numel(args[0]) + 256 * 4, bytes_written=numel(out))

    return cost


# ---- compile-time tables --------------------------------------------------------------------------


_ALPHA = [np.float32(v) for v in (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
                                  8.51377133304701e-03, 2.48287947061529e-01)]
_BETA = [np.float32(v) for v in (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
                                 1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01)]


def mlas_logistic(x: np.ndarray) -> np.ndarray:
    """MLAS's logistic (``MlasComputeLogistic``: Eigen's rational polynomial on [-18, 18]) of float32
    values, each multiply-add fused (its FMA3 kernel), clamped to [0, 1]."""
    f = np.float32
    v = np.clip(np.asarray(x, f), f(-18.0), f(18.0)).astype(f)
    v2 = (v * v).astype(f)
    p = fma(v2, _ALPHA[0], _ALPHA[1])
    for a in _ALPHA[2:]:
        p = fma(p, v2, a)
    p = (p * v).astype(f)
    q = fma(v2, _BETA[0], _BETA[1])
    for b in _BETA[2:]:
        q = fma(q, v2, b)
    return np.clip(((p / q).astype(f) + f(0.5)).astype(f), f(0.0), f(1.0)).astype(f).reshape(np.shape(x))


def leaky_relu32(alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    """ONNX Runtime's QLinearLeakyRelu function: ``v >= 0 ? v : alpha * v`` in float32."""
    a = np.float32(alpha)
    return lambda v: np.where(v >= 0, v, (a * v).astype(np.float32)).astype(np.float32)


def lookup_table(fn: Callable[[np.ndarray], np.ndarray], x_dtype: str, x_scale: float, x_zero_point: int,
                 y_scale: float, y_zero_point: int, y_dtype: str) -> np.ndarray:
    """The [256] table of ``Q(fn(DQ(x)))`` for every input value (entry k is input ``lo + k``),
    computed as ONNX Runtime's ``QlinearBuildLookupTable`` does."""
    from plait.op.qnn import quantize_array

    lo, hi = int_range(x_dtype)
    xs = np.arange(lo, hi + 1, dtype=np.int64)
    deq = (np.float32(x_scale) * (xs - int(x_zero_point)).astype(np.float32)).astype(np.float32)
    y = np.asarray(fn(deq), np.float32)
    return quantize_array(y, np.float32(y_scale), np.array(y_zero_point, y_dtype))


def softmax_table(x_scale: float, reduce_len: int) -> np.ndarray:
    """QLinearSoftmax's float32 table: entry k is ``exp((k - 255 + shift) * x_scale)`` in double, with
    ``shift = max(0, log(FLT_MAX / reduce_len) - 5) / x_scale`` (the sum of ``reduce_len`` entries
    stays finite)."""
    if reduce_len <= 0:
        raise ValueError(f"softmax_table: reduce length {reduce_len} is not positive")
    s = float(np.float32(x_scale))
    shift = max(0.0, math.log(float(np.float32(np.finfo(np.float32).max) / np.float32(reduce_len))) - 5.0) / s
    k = np.arange(256, dtype=np.float64)
    return np.exp((k - 255.0 + shift) * s).astype(np.float32)


def softmax_multiplier(y_scale: float) -> float:
    """``floor(1 / y_scale)`` in float32 (QLinearSoftmax's output multiplier)."""
    return float(np.floor(np.float32(1.0) / np.float32(y_scale)))


def global_avg_pool_scale(x_scale: float, y_scale: float, count: int) -> np.float32:
    """QLinearGlobalAveragePool's requantization scale, ``x_scale / (y_scale * count)`` in float32
    (MLAS sums the int8 values in int32, subtracts ``count * x_zero_point`` and requantizes the sum
    as ``qnn.requantize`` does)."""
    f = np.float32
    return f(f(x_scale) / f(f(y_scale) * f(count)))


# ---- qnn.lookup -----------------------------------------------------------------------------------


def _lookup_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x = _int8(args[0], "lookup: input")
    tab = _table(args[1], "lookup: table", INT8)
    return TensorType(x.shape, tab.dtype)


def _lookup_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, tab = np.asarray(args[0]), np.asarray(args[1])
    lo, _ = int_range(x.dtype.name)
    return tab[x.astype(np.int64) - lo]


defop("qnn.lookup", rel=_lookup_rel, ref=_lookup_ref, cost=_cost(1.0), pattern=OpPattern.INJECTIVE, num_inputs=2,
      doc="an int8/uint8 value through a [256] table (table[x - lowest]): QLinearSigmoid, QLinearLeakyRelu")


@defop.compute("qnn.lookup")
def _lookup(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.lookup"
    x, tab = inputs
    shape, out = out_tensor_type(out_type, op, like=shape_of(x, op))
    lo, _ = int_range(x.dtype)
    if compute_fact("simd_bits", 0) >= 256:  # vector gathers load 32-bit lanes: the table widened first
        wide = make(op, (256,), lambda k: tir.cast("int32", tab[k]), suffix="wide", inline=False)

        def body(*i: PrimExpr) -> PrimExpr:
            k = tir.cast("int32", x[i])
            return tir.cast(out, wide[k - lo if lo else k])

        return make(op, shape, body)

    def body(*i: PrimExpr) -> PrimExpr:
        k = tir.cast("int32", x[i])
        return tab[k - lo if lo else k]

    return make(op, shape, body)


# ---- qnn.softmax ----------------------------------------------------------------------------------


def _softmax_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x = _int8(args[0], "softmax: input")
    _table(args[1], "softmax: table", ("float32",))
    if x.ndim == 0:
        raise RelError(f"softmax: input: expected at least one dimension, got {x}")
    norm_axis(attrs["axis"], x.ndim, "softmax: axis")
    lo, hi = int_range(x.dtype)
    if not lo <= attrs["zero_point"] <= hi:
        raise RelError(f"softmax: zero_point: expected a value in [{lo}, {hi}] ({x.dtype}), got {attrs['zero_point']}")
    return x


def _softmax_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, tab = np.asarray(args[0]), np.asarray(args[1], np.float32)
    axis = norm_axis(attrs["axis"], x.ndim, "softmax: axis")
    xi = np.moveaxis(x.astype(np.int64), axis, -1)
    e = tab[255 + xi - xi.max(-1, keepdims=True)]
    total = np.zeros(e.shape[:-1], np.float32)
    for j in range(e.shape[-1]):  # float32, in index order
        total = (total + e[..., j]).astype(np.float32)
    mult = np.float32(attrs["multiplier"])
    with np.errstate(all="ignore"):
        v = ((e * mult).astype(np.float32) / total[..., None]).astype(np.float32)
    lo, hi = int_range(x.dtype.name)
    q = np.clip(np.rint(v).astype(np.int64) + attrs["zero_point"], lo, hi)
    return np.moveaxis(q, -1, axis).astype(x.dtype)


defop("qnn.softmax", rel=_softmax_rel, ref=_softmax_ref, cost=_cost(4.0), pattern=OpPattern.OPAQUE, num_inputs=2,
      attrs=(AttrSpec("axis", "int", -1, "the axis the softmax runs along"),
             AttrSpec("multiplier", "float", 256.0, "floor(1 / y_scale)"),
             AttrSpec("zero_point", "int", 0, "the output's zero point")),
      doc="int8/uint8 softmax as ONNX Runtime's QLinearSoftmax computes it (a table of exp, float32 sums)")


@defop.compute("qnn.softmax")
def _softmax(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.softmax"
    x, tab = inputs
    shape, out = out_tensor_type(out_type, op, like=shape_of(x, op))
    nd = len(shape)
    axis = norm_axis(attrs["axis"], nd, "softmax: axis")
    rows = Rows(op, x, shape, axis)
    red_shape, n, at = rows.shape, rows.n, rows.at
    lo, hi = int_range(out)
    zp, mult = attrs["zero_point"], float(np.float32(attrs["multiplier"]))
    m = rows.max()

    def exp_of(i: tuple, m_i: PrimExpr) -> PrimExpr:
        return tab[tir.cast("int32", x[i]) - m_i + 255]

    def row_sum(*i: PrimExpr) -> Any:
        r = te.reduce_axis((0, n), "k")
        return te.sum(exp_of(at(i, r), m[at(i, 0)]), axis=[r])

    s = make(op, red_shape, row_sum, "sum", inline=False)

    def body(*i: PrimExpr) -> PrimExpr:
        v = exp_of(i, m[at(i, 0)]) * tir.const(mult, "float32") / s[at(i, 0)]
        q = tir.cast("int32", tir.nearbyint(v)) + zp
        return tir.cast(out, tir.min(tir.max(q, lo), hi))

    return make(op, shape, body)


# ---- qnn.add / qnn.mul ----------------------------------------------------------------------------


def add_attrs(a_scale: float, a_zp: int, b_scale: float, b_zp: int, y_scale: float, y_zp: int) -> dict[str, float]:
    """QLinearAdd's constants as MLAS computes them (float32): ``a_multiplier = a_scale / y_scale``,
    ``b_multiplier = b_scale / y_scale``, ``offset = y_zp - (a_multiplier * a_zp + b_multiplier * b_zp)``."""
    f = np.float32
    ra, rb = f(f(a_scale) / f(y_scale)), f(f(b_scale) / f(y_scale))
    offset = f(f(y_zp) - f(f(ra * f(a_zp)) + f(rb * f(b_zp))))
    return {"a_multiplier": float(ra), "b_multiplier": float(rb), "offset": float(offset)}


def mul_attrs(a_scale: float, a_zp: int, b_scale: float, b_zp: int, y_scale: float, y_zp: int) -> dict[str, Any]:
    """QLinearMul's constants as MLAS computes them: ``multiplier = a_scale * b_scale / y_scale`` in
    float32, the zero points as they are."""
    f = np.float32
    return {"multiplier": float(f(f(f(a_scale) * f(b_scale)) / f(y_scale))), "a_zero_point": int(a_zp),
            "b_zero_point": int(b_zp), "zero_point": int(y_zp)}


def _binary_rel(what: str) -> Callable[[tuple[Type, ...], Attrs], Type]:
    def rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
        a, b = _int8(args[0], f"{what}: a"), _int8(args[1], f"{what}: b")
        if a.dtype != b.dtype:
            raise RelError(f"{what}: b: expected {a.dtype} (a's dtype), got {b}")
        if a.shape == b.shape or numel(b) == 1 and b.ndim <= a.ndim:
            shape = a.shape
        elif numel(a) == 1 and a.ndim <= b.ndim:
            shape = b.shape
        else:
            raise RelError(f"{what}: expected equal shapes or a one-element operand, got {a} and {b}")
        if what == "mul":
            lo, hi = int_range(a.dtype)
            for z in ("a_zero_point", "b_zero_point", "zero_point"):
                if not lo <= attrs[z] <= hi:
                    raise RelError(f"{what}: {z}: expected a value in [{lo}, {hi}] ({a.dtype}), got {attrs[z]}")
        return TensorType(shape, a.dtype)

    return rel


def _f32(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, np.float64).astype(np.float32)


def _saturate(v: np.ndarray, dtype: str) -> np.ndarray:
    lo, hi = int_range(dtype)
    return np.rint(np.clip(v, np.float32(lo), np.float32(hi))).astype(np.int64).astype(dtype)


def _scalar_side(a_shape: tuple, b_shape: tuple) -> str:
    """Which operand MLAS folds into the offset: ``"a"`` or ``"b"`` (one element against more), or
    ``""`` (elementwise). Shapes may be symbolic (a symbolic dimension is not a one)."""
    def one(shape: tuple) -> bool:
        return all(isinstance(d, int) and d == 1 for d in shape)

    if one(a_shape) != one(b_shape):
        return "a" if one(a_shape) else "b"
    return ""


def _add_values(a: np.ndarray, b: np.ndarray, attrs: Any, side: str, fused: bool) -> np.ndarray:
    """QLinearAdd's float32 value before rounding, broadcast: ``a * ra + (b * rb + offset)``, each
    multiply-add fused (``fused``: rounded once, MLAS's FMA kernel) or in double rounded to float32
    (exact products, two roundings: the form for a machine without FMA, the same numbers where
    :func:`add_needs_fma` says so). A one-element operand is folded into the offset first (a
    float32 multiply, then an add)."""
    ra, rb, off = (np.float32(attrs[k]) for k in ("a_multiplier", "b_multiplier", "offset"))

    def madd(x: np.ndarray, r: np.float32, c: Any) -> np.ndarray:
        x = np.asarray(x).astype(np.float32)
        if fused:
            return fma(x, r, np.asarray(c, np.float32))
        return _f32(x.astype(np.float64) * np.float64(r) + np.asarray(c, np.float64))

    if side == "a":
        return madd(b, rb, _f32(_f32(np.asarray(a).astype(np.float64) * np.float64(ra)) + off))
    if side == "b":
        return madd(a, ra, _f32(_f32(np.asarray(b).astype(np.float64) * np.float64(rb)) + off))
    return madd(a, ra, madd(b, rb, off))


def _add_ref(args: list, attrs: Attrs) -> np.ndarray:
    a, b = np.asarray(args[0]), np.asarray(args[1])
    shape = a.shape if a.size != 1 or a.ndim > b.ndim else b.shape
    v = _add_values(a, b, attrs, _scalar_side(a.shape, b.shape), True)
    return _saturate(np.broadcast_to(v, shape), a.dtype.name)


@functools.lru_cache(maxsize=256)
def _needs_fma(ra: float, rb: float, off: float, dtype: str, side: str) -> bool:
    lo, hi = int_range(dtype)
    vals = np.arange(lo, hi + 1).astype(dtype)
    attrs = {"a_multiplier": ra, "b_multiplier": rb, "offset": off}
    x, y = vals[:, None], vals[None, :]  # every pair (a one-element operand takes each value in turn)
    outs = [_add_values(x, y, attrs, side, fused) for fused in (True, False)]
    return not np.array_equal(_saturate(outs[0], dtype), _saturate(outs[1], dtype))


def add_needs_fma(attrs: Any, dtype: str, side: str = "") -> bool:
    """Whether ``qnn.add`` with these constants on ``dtype`` values (``side``: the one-element
    operand, see :func:`_scalar_side`) must fuse its multiply-adds: whether the double form (exact
    products, a sum rounded to double and then to float32) differs from the fused one for some
    pair of input values. All 65536 pairs are tried (the inputs are 8-bit), so where this says no,
    both forms give the same numbers for every input. A double rounding changes a result only when
    a product and the value added to it differ in magnitude by more than about 2**20, which
    calibrated scales do not: in practice never."""
    return _needs_fma(*(float(np.float32(attrs[k])) for k in ("a_multiplier", "b_multiplier", "offset")), dtype, side)


def _mul_ref(args: list, attrs: Attrs) -> np.ndarray:
    a, b = np.asarray(args[0]), np.asarray(args[1])
    shape = a.shape if a.size != 1 or a.ndim > b.ndim else b.shape
    p = (a.astype(np.int64) - attrs["a_zero_point"]) * (b.astype(np.int64) - attrs["b_zero_point"])
    v = _f32(p * np.float64(np.float32(attrs["multiplier"]))) + np.float32(attrs["zero_point"])
    return _saturate(np.broadcast_to(v.astype(np.float32), shape), a.dtype.name)


defop("qnn.add", rel=_binary_rel("add"), ref=_add_ref, cost=_cost(4.0), pattern=OpPattern.BROADCAST, num_inputs=2,
      attrs=(AttrSpec("a_multiplier", "float", 1.0, "a_scale / y_scale (float32)"),
             AttrSpec("b_multiplier", "float", 1.0, "b_scale / y_scale (float32)"),
             AttrSpec("offset", "float", 0.0, "y_zp - (a_multiplier * a_zp + b_multiplier * b_zp) (float32)")),
      doc="int8/uint8 add as ONNX Runtime's QLinearAdd computes it (MLAS's AVX2 kernel: fused multiply-adds)")
defop("qnn.mul", rel=_binary_rel("mul"), ref=_mul_ref, cost=_cost(3.0), pattern=OpPattern.BROADCAST, num_inputs=2,
      attrs=(AttrSpec("multiplier", "float", 1.0, "a_scale * b_scale / y_scale (float32)"),
             AttrSpec("a_zero_point", "int", 0, "a's zero point"), AttrSpec("b_zero_point", "int", 0, "b's zero point"),
             AttrSpec("zero_point", "int", 0, "the output's zero point")),
      doc="int8/uint8 multiply as ONNX Runtime's QLinearMul computes it (an exact int32 product, a float32 "
          "multiply and add)")


def _load(t: Any, i: tuple) -> PrimExpr:
    """``t`` at output index ``i`` (a one-element operand at its only element)."""
    shape = shape_of(t, "qnn")
    if all(isinstance(d, int) and d == 1 for d in shape):
        return t[(0,) * len(shape)]
    return t[i]


def _binary_shape(op: str, a: Any, b: Any, out_type: Any) -> tuple[Any, str, list[Any]]:
    """(shape, dtype, run-time checks) of qnn.add / qnn.mul: the shape of the operand that is not one element
    (``a``'s when neither is); two such operands must agree when the function runs (symbolic dims)."""
    sa, sb = shape_of(a, op), shape_of(b, op)

    def one(s: Any) -> bool:
        return all(isinstance(d, int) and d == 1 for d in s)

    big = sa if not one(sa) or (one(sb) and len(sb) <= len(sa)) else sb  # as the relation chose
    shape, out = out_tensor_type(out_type, op, like=big)
    return shape, out, dims_agree(op, list(zip(sa, sb))) if not one(sa) and not one(sb) else []


def _round_out(v: PrimExpr, out: str) -> PrimExpr:
    lo, hi = int_range(out)
    return tir.cast(out, tir.cast("int32", tir.nearbyint(tir.min(tir.max(v, float(lo)), float(hi)))))


def _f32e(v: PrimExpr) -> PrimExpr:
    """A float64 value rounded to float32 (a product of an 8-bit value and a float32 is exact in
    float64: rounding it once is the float32 multiply, and no C compiler contracts across it)."""
    return tir.cast("float32", v)


def add_fused(attrs: Any, dtype: str, side: str = "") -> bool:
    """Whether the C of ``qnn.add`` fuses its multiply-adds (``fmaf``, float32 vectors): where the
    machine has FMA (lowering's ``fma`` fact: e.g. an AVX2 host, a Cortex-M4F/M7F), or where the
    double form would differ (:func:`add_needs_fma`). Else the double form (exact products in
    double, rounded to float32: no libm call on a machine without FMA). Both give the same numbers."""
    return bool(compute_fact("fma", False)) or add_needs_fma(attrs, dtype, side)


@defop.compute("qnn.add")
def _add(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    """:func:`_add_values` in TIR: ``fma`` in float32 (:func:`add_fused`) or the double form, whose
    casts keep a C compiler from contracting it (-ffp-contract=fast) into something else."""
    op = "qnn.add"
    a, b = inputs
    shape, out, checks = _binary_shape(op, a, b, out_type)
    side = _scalar_side(shape_of(a, op), shape_of(b, op))
    fused = add_fused(attrs, out, side)
    c32 = {k: tir.const(float(np.float32(attrs[k])), "float32") for k in ("a_multiplier", "b_multiplier", "offset")}
    c64 = {k: tir.const(float(np.float32(attrs[k])), "float64") for k in c32}

    def madd(x: PrimExpr, r: str, c: PrimExpr) -> PrimExpr:
        if fused:
            return tir.fma(tir.cast("float32", x), c32[r], c)
        return _f32e(tir.cast("float64", x) * c64[r] + tir.cast("float64", c))

    def body(*i: PrimExpr) -> PrimExpr:
        xa, xb = _load(a, i), _load(b, i)
        if side == "a":
            v = madd(xb, "b_multiplier", _f32e(tir.cast("float64", xa) * c64["a_multiplier"]) + c32["offset"])
        elif side == "b":
            v = madd(xa, "a_multiplier", _f32e(tir.cast("float64", xb) * c64["b_multiplier"]) + c32["offset"])
        else:
            v = madd(xa, "a_multiplier", madd(xb, "b_multiplier", c32["offset"]))
        return _round_out(v, out)

    return make(op, shape, body, checks=checks)


@defop.compute("qnn.mul")
def _mul(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.mul"
    a, b = inputs
    shape, out, checks = _binary_shape(op, a, b, out_type)
    m = tir.const(float(np.float32(attrs["multiplier"])), "float64")
    za, zb, zc = attrs["a_zero_point"], attrs["b_zero_point"], float(attrs["zero_point"])

    def body(*i: PrimExpr) -> PrimExpr:
        p = (tir.cast("int32", _load(a, i)) - za) * (tir.cast("int32", _load(b, i)) - zb)
        return _round_out(_f32e(tir.cast("float64", p) * m) + tir.const(zc, "float32"), out)

    return make(op, shape, body, checks=checks)


# ---- ONNX export ----------------------------------------------------------------------------------


def _index(ex: Any, x: str, offset: int) -> str:
    """``int32(x) + offset`` as ONNX nodes."""
    xi = ex.node("Cast", [x], to=ex.elem_type("int32"))
    return ex.node("Add", [xi, ex.const(np.array(offset, np.int32), hint="offset")]) if offset else xi


def _lookup_onnx(ex: Any) -> str:
    lo, _ = int_range(ex.arg_type(0).dtype)
    return ex.node("Gather", [ex.ins[1], _index(ex, ex.ins[0], -lo)])


def _softmax_onnx(ex: Any) -> str:
    """The same arithmetic in standard operators: ReduceMax, Gather of the table, ReduceSum, Mul,
    Div, Round (half to even), Add of the zero point, Clip, Cast."""
    ex.need_opset(18, "qnn.softmax (ReduceMax with axes as an input)")
    a = ex.attrs
    x = ex.arg_type(0)
    axes = ex.ints([norm_axis(a["axis"], x.ndim, "softmax: axis")], "axes")
    xi = _index(ex, ex.ins[0], 0)
    m = ex.node("ReduceMax", [xi, axes], keepdims=1)
    k = ex.node("Add", [ex.node("Sub", [xi, m]), ex.const(np.array(255, np.int32), hint="top")])
    e = ex.node("Gather", [ex.ins[1], k])
    s = ex.node("ReduceSum", [e, axes], keepdims=1)
    v = ex.node("Div", [ex.node("Mul", [e, ex.const(np.array(a["multiplier"], np.float32), hint="multiplier")]), s])
    v = ex.node("Add", [ex.node("Round", [v]), ex.const(np.array(a["zero_point"], np.float32), hint="zero_point")])
    return ex.node("Cast", [_clip_onnx(ex, v, x.dtype)], to=ex.elem_type(x.dtype))


def _add_onnx(ex: Any) -> str:
    """The same arithmetic in float64 ONNX operators (Cast, Mul, Add, Cast to float32: the double
    form, no ONNX operator fuses a multiply-add), then Round, Clip and Cast; refused where the
    double form differs (:func:`add_needs_fma`)."""
    a = ex.attrs
    side = _scalar_side(ex.arg_type(0).shape, ex.arg_type(1).shape)
    if add_needs_fma(a, ex.out_dtype(), side):
        raise ex.fail("qnn.add: these multipliers and offset need fused multiply-adds, which no ONNX operator computes")
    f64 = ex.elem_type("float64")
    fa, fb = (ex.node("Cast", [x], to=f64) for x in ex.ins)

    def c(v: float, hint: str) -> str:
        return ex.const(np.array(np.float32(v), np.float64), hint=hint)

    def f32(v: str) -> str:
        return ex.node("Cast", [ex.node("Cast", [v], to=ex.elem_type("float32"))], to=f64)

    ra, rb, off = c(a["a_multiplier"], "a_multiplier"), c(a["b_multiplier"], "b_multiplier"), c(a["offset"], "offset")
    if side == "a":
        v = ex.node("Add", [ex.node("Mul", [fb, rb]), f32(ex.node("Add", [f32(ex.node("Mul", [fa, ra])), off]))])
    elif side == "b":
        v = ex.node("Add", [ex.node("Mul", [fa, ra]), f32(ex.node("Add", [f32(ex.node("Mul", [fb, rb])), off]))])
    else:
        v = ex.node("Add", [ex.node("Mul", [fa, ra]), f32(ex.node("Add", [ex.node("Mul", [fb, rb]), off]))])
    return _round_onnx(ex, ex.node("Cast", [v], to=ex.elem_type("float32")))


def _clip_onnx(ex: Any, v: str, dtype: str) -> str:
    """A float32 value clipped to ``dtype``'s range."""
    lo, hi = (ex.const(np.array(b, np.float32), hint=h) for b, h in zip(int_range(dtype), ("lo", "hi")))
    return ex.node("Clip", [v, lo, hi])


def _round_onnx(ex: Any, v: str) -> str:
    v = _clip_onnx(ex, v, ex.out_dtype())
    return ex.node("Cast", [ex.node("Round", [v])], to=ex.elem_type(ex.out_dtype()))


def _mul_onnx(ex: Any) -> str:
    a = ex.attrs
    i32 = ex.elem_type("int32")
    da, db = (ex.node("Sub", [ex.node("Cast", [x], to=i32), ex.const(np.array(a[z], np.int32), hint=z)])
              for x, z in zip(ex.ins, ("a_zero_point", "b_zero_point")))
    p = ex.node("Cast", [ex.node("Mul", [da, db])], to=ex.elem_type("float64"))
    v = ex.node("Mul", [p, ex.const(np.array(np.float32(a["multiplier"]), np.float64), hint="multiplier")])
    v = ex.node("Add", [ex.node("Cast", [v], to=ex.elem_type("float32")),
                        ex.const(np.array(a["zero_point"], np.float32), hint="zero_point")])
    return _round_onnx(ex, v)


defop.onnx("qnn.lookup", OnnxMap("Gather", convert=False, export=_lookup_onnx))
defop.onnx("qnn.softmax", OnnxMap("Softmax", convert=False, export=_softmax_onnx))
defop.onnx("qnn.add", OnnxMap("Add", convert=False, export=_add_onnx))
defop.onnx("qnn.mul", OnnxMap("Mul", convert=False, export=_mul_onnx))
