"""Integer operators with TensorFlow Lite's fixed-point arithmetic: ``qnn.fixed_softmax`` and
``qnn.avg_pool2d`` (TensorFlow Lite Micro's reference kernels, bit for bit).

- ``qnn.fixed_softmax(x, table)``: TFLite's int8 softmax (``reference_ops::Softmax`` with gemmlowp's
  fixed point, as TensorFlow Lite Micro runs it): per row along ``axis``, ``d = x - max(x)``;
  ``e = table[-d]`` is ``exp_on_negative_values`` of ``d`` rescaled by the input multiplier (a Q5.26
  value), a Q0.31 int32, 0 where ``d < diff_min`` (:func:`softmax_exp_table` builds it at compile time:
  the table depends on the input scale and beta only); ``sum`` the Q12.19 sum of ``e / 2**12``
  (rounded); its reciprocal by gemmlowp's Newton-Raphson (``GetReciprocal``); and
  ``y = RoundingDivideByPOT(e * recip, bits + 23) + lo`` clamped, ``lo`` the dtype's lowest value (int8:
  -128; uint8, LiteRT's legacy kernel: 0). The output's scale is 1/256 and its zero point ``lo``, as
  TFLite requires.
- ``qnn.avg_pool2d(x)``: TFLite's integer average pool (``reference_integer_ops::AveragePool``; uint8:
  ``reference_ops::AveragePool``, the same rounding):
  the int32 sum of the window's taps inside the input (padding is not counted), divided by their
  count rounding half away from zero, clamped to ``[clamp_min, clamp_max]``; int8, uint8 or int16, NCHW,
  the input's scale and zero point are the output's.

Both export to ONNX as compositions of standard integer operators (int64 Mul, truncating Div, Mod,
Where, Gather, ReduceMax/ReduceSum; the pool's sum a float Conv of ones, exact for its integers) that
ONNX Runtime computes bit for bit.

The helpers below are the gemmlowp primitives (``SaturatingRoundingDoublingHighMul``,
``RoundingDivideByPOT``, ...) twice: on numpy int64 arrays for the references and tables, and as TIR
expressions for the computes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from plait import te
from plait.ir.attrs import Attrs
from plait.op._common import AttrSpec, Cost, Family, OnnxMap, OpPattern, RelError, TensorType, Type, as_tensor, norm_axis, numel
from plait.op._onnx_int import I32_MAX, I32_MIN, OnnxInt
from plait.op._compute import Rows, make, out_tensor_type, shape_of, tir
from plait.op.nn._window import WINDOW_ATTRS, check_rank, inside, taps, window_attrs, window_ints, window_out
from plait.tir.dtype import int_range
from plait.tir.expr import PrimExpr, Var

defop = Family()

# ---- gemmlowp on numpy int64 arrays (values that fit int32) ---------------------------------------


def srdhm(a: Any, b: Any) -> np.ndarray:
    """``SaturatingRoundingDoublingHighMul`` (int32 x int32 -> the high 32 bits of 2ab, rounded)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    ab = a * b
    v = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    q = np.where(v >= 0, v // (1 << 31), -((-v) // (1 << 31)))  # C division truncates toward zero
    return np.where((a == I32_MIN) & (b == I32_MIN), I32_MAX, q)


def rdbpot(x: Any, e: Any) -> np.ndarray:
    """``RoundingDivideByPOT``: x / 2**e rounded half away from zero."""
    x, e = np.asarray(x, np.int64), np.asarray(e, np.int64)
    mask = (np.int64(1) << e) - 1
    return (x >> e) + ((x & mask) > (mask >> 1) + (x < 0))


def sat_shl(x: Any, e: int) -> np.ndarray:
    """``SaturatingRoundingMultiplyByPOT<e>`` for e > 0: x * 2**e saturated to int32 (gemmlowp's
    thresholds: above ``2**(31 - e) - 1`` is the maximum, below its negative the minimum)."""
    x = np.asarray(x, np.int64)
    t = (1 << (31 - e)) - 1
    return np.where(x > t, I32_MAX, np.where(x < -t, I32_MIN, x << e))


def wrap32(x: Any) -> np.ndarray:
    """int64 values taken modulo 2**32 as int32 (C's wrapping int32 addition)."""
    return ((np.asarray(x, np.int64) + (1 << 31)) % (1 << 32)) - (1 << 31)


def _exp_quarter(a: np.ndarray) -> np.ndarray:
    """``exp_on_interval_between_negative_one_quarter_and_0_excl`` of a Q0.31 value."""
    x = a + (1 << 28)
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_4 = rdbpot(x4, 2)
    poly = rdbpot(srdhm(x4_4 + x3, 715827883) + x2, 1)
    c = 1895147668
    return c + srdhm(c, x + poly)


_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a: Any, integer_bits: int = 5) -> np.ndarray:
    """gemmlowp's ``exp_on_negative_values`` of a value <= 0 with ``integer_bits`` integer bits (Q5.26 by
    default), a Q0.31 result."""
    a = np.asarray(a, np.int64)
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    amq = (a & (quarter - 1)) - quarter
    result = _exp_quarter(sat_shl(amq, integer_bits))
    remainder = wrap32(amq - a)
    for exponent, mult in _BARREL:
        if integer_bits > exponent:
            bit = (remainder & (1 << (frac + exponent))) != 0
            result = np.where(bit, srdhm(result, mult), result)
    return np.where(a == 0, I32_MAX, result)


def _newton(a: np.ndarray) -> np.ndarray:
    """The Q2.29 Newton-Raphson estimate of ``1 / (1 + a)`` gemmlowp's divisions share (three steps from
    48/17 - 32/17 of the half-denominator ``RoundingHalfSum(a, 1)``)."""
    s = a + I32_MAX
    half = np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))  # RoundingHalfSum: (sum + sign) / 2, truncated
    x = 1515870810 + srdhm(half, -1010580540)
    for _ in range(3):
        t = (1 << 29) - srdhm(half, x)
        x = x + sat_shl(srdhm(x, t), 2)
    return x


def _one_over_one_plus_x(a: np.ndarray) -> np.ndarray:
    """``one_over_one_plus_x_for_x_in_0_1`` of a Q0.31 value in [0, 1)."""
    return sat_shl(_newton(a), 1)


def _one_minus_x_over_one_plus_x(a: np.ndarray) -> np.ndarray:
    """``one_minus_x_over_one_plus_x_for_x_in_0_1`` of a Q0.31 value in [0, 1)."""
    return sat_shl(_newton(a) - (1 << 29), 2)


def logistic(a: Any, integer_bits: int) -> np.ndarray:
    """gemmlowp's ``logistic`` of a value with ``integer_bits`` integer bits, a Q0.31 result."""
    a = np.asarray(a, np.int64)
    positive = _one_over_one_plus_x(exp_on_negative_values(-np.abs(a), integer_bits))
    return np.where(a == 0, 1 << 30, np.where(a > 0, positive, I32_MAX - positive))


def tanh(a: Any, integer_bits: int) -> np.ndarray:
    """gemmlowp's ``tanh`` of a value with ``integer_bits`` integer bits, a Q0.31 result (``exp`` of
    ``2a``: the same raw value read with one more integer bit)."""
    a = np.asarray(a, np.int64)
    t = _one_minus_x_over_one_plus_x(exp_on_negative_values(-np.abs(a), integer_bits + 1))
    return np.where(a == 0, 0, np.where(a < 0, -t, t))


def multiply_by_quantized_multiplier(x: Any, mult: int, shift: int, single_rounding: bool = False) -> np.ndarray:
    """TFLite's ``MultiplyByQuantizedMultiplier`` (int32 values: the left shift wraps, as in C): SRDHM then
    a rounding shift (TensorFlow Lite Micro's), or with ``single_rounding`` the one rounding of
    ``TFLITE_SINGLE_ROUNDING`` builds, ``(x * mult + 2**(30 - shift)) >> (31 - shift)`` (LiteRT's)."""
    x = np.asarray(x, np.int64)
    if single_rounding:
        total = 31 - shift
        return (x * mult + (1 << (total - 1))) >> total
    return rdbpot(srdhm(wrap32(x << max(shift, 0)), mult), max(-shift, 0))


def reciprocal(total: Any, integer_bits: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """TFLite's ``GetReciprocal`` of positive int32 values: (Q0.31 scale, num_bits_over_unit)."""
    t = np.asarray(total, np.int64)
    clz = np.zeros(t.shape, np.int64)
    for k in range(1, 32):
        clz += t < (1 << k)
    shifted = ((t << clz) & 0xFFFFFFFF) - (1 << 31)
    return _one_over_one_plus_x(shifted), integer_bits - clz


def softmax_params(x_scale: float, beta: float = 1.0) -> tuple[int, int, int]:
    """TFLite's ``PreprocessSoftmaxScaling`` and ``CalculateInputRadius`` (5 integer bits):
    (input multiplier, input left shift, diff_min)."""
    real = min(float(beta) * float(x_scale) * float(1 << 26), float((1 << 31) - 1))
    if not math.isfinite(real) or real <= 0:
        raise ValueError(f"softmax: beta x input scale {real} is not a positive finite value")
    q, e = math.frexp(real)
    m = math.floor(q * (1 << 31) + 0.5)
    if m == 1 << 31:
        m, e = m // 2, e + 1
    if e < 0:
        raise ValueError(f"softmax: beta x input scale is too small for TFLite's int8 softmax ({real / (1 << 26)})")
    radius = math.floor(1.0 * ((1 << 5) - 1) * (1 << 26) / (1 << e))
    return m, e, -radius


def softmax_exp_table(x_scale: float, beta: float = 1.0) -> np.ndarray:
    """The int32 table of ``qnn.fixed_softmax``: entry k is ``exp_on_negative_values`` of ``-k``
    rescaled (``MultiplyByQuantizedMultiplierGreaterThanOne``), 0 where ``-k < diff_min``."""
    mult, shift, diff_min = softmax_params(x_scale, beta)
    d = -np.arange(256, dtype=np.int64)
    e = exp_on_negative_values(srdhm(d << shift, mult))
    return np.where(d >= diff_min, e, 0).astype(np.int32)


# ---- qnn.fixed_softmax ----------------------------------------------------------------------------


def _softmax_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x = as_tensor(args[0], "fixed_softmax: input")
    if x.dtype not in ("int8", "uint8"):
        raise RelError(f"fixed_softmax: input: expected int8 or uint8, got {x}")
    if x.ndim == 0:
        raise RelError(f"fixed_softmax: input: expected at least one dimension, got {x}")
    t = as_tensor(args[1], "fixed_softmax: table")
    if t.dtype != "int32" or t.shape != (256,):
        raise RelError(f"fixed_softmax: table: expected int32[256], got {t}")
    norm_axis(attrs["axis"], x.ndim, "fixed_softmax: axis")
    return x


def _softmax_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, tab = np.asarray(args[0]), np.asarray(args[1], np.int64)
    axis = norm_axis(attrs["axis"], x.ndim, "fixed_softmax: axis")
    xi = np.moveaxis(x.astype(np.int64), axis, -1)
    e = tab[xi.max(-1, keepdims=True) - xi]
    total = rdbpot(e, 12).sum(-1, keepdims=True)
    scale, bits = reciprocal(total)
    lo, hi = int_range(x.dtype.name)
    y = np.clip(rdbpot(srdhm(scale, e), bits + 23) + lo, lo, hi)
    return np.moveaxis(y, -1, axis).astype(x.dtype)


def _cost(flops: float) -> Any:
    def cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
        return Cost(flops=flops * numel(out), bytes_read=numel(args[0]) * 1.0, bytes_written=numel(out) * 1.0)

    return cost


defop("qnn.fixed_softmax", rel=_softmax_rel, ref=_softmax_ref, cost=_cost(12.0), pattern=OpPattern.OPAQUE,
      num_inputs=2, attrs=(AttrSpec("axis", "int", -1, "the axis the softmax runs along"),),
      doc="int8/uint8 softmax as TensorFlow Lite (Micro) computes it: gemmlowp fixed point, a table of exp; "
          "the output's scale is 1/256, its zero point the dtype's lowest value")


def _i64(v: Any) -> PrimExpr:
    return tir.const(v, "int64") if isinstance(v, int) else tir.cast("int64", v)


_names = iter(range(1 << 62))


def _bind(value: PrimExpr, body: Any) -> PrimExpr:
    """``let v = value in body(v)`` (a fresh variable: the expression stays a DAG-sized tree)."""
    return tir.let(Var(f"fx{next(_names)}", value.dtype), value, body)


def _srdhm(a: PrimExpr, b: Any) -> PrimExpr:
    """SRDHM on int64 expressions holding int32 values (the int32-min x int32-min case cannot occur here:
    every use has one operand that is not the minimum)."""
    def high(ab: PrimExpr) -> PrimExpr:
        nudge = tir.select(ab >= _i64(0), _i64(1 << 30), _i64(1 - (1 << 30)))
        return tir.truncdiv(ab + nudge, _i64(1 << 31))
    return _bind(_i64(a) * _i64(b), high)


def _rdbpot(x: PrimExpr, e: Any) -> PrimExpr:
    def body(x: PrimExpr) -> PrimExpr:
        ee = _i64(e)
        mask = tir.shift_left(_i64(1), ee) - _i64(1)
        threshold = tir.shift_right(mask, _i64(1)) + tir.cast("int64", x < _i64(0))
        return tir.shift_right(x, ee) + tir.cast("int64", tir.bitwise_and(x, mask) > threshold)
    return _bind(_i64(x), body)


def _sat_shl(x: PrimExpr, e: int) -> PrimExpr:
    t = (1 << (31 - e)) - 1
    return _bind(_i64(x), lambda x: tir.select(x > _i64(t), _i64(I32_MAX), tir.select(
        x < _i64(-t), _i64(I32_MIN), tir.shift_left(x, _i64(e)))))


def _clz(t: PrimExpr) -> PrimExpr:
    """Leading zeros of a positive int32 value: ``sum over k of [t < 2**k]`` (k = 31 always counts)."""
    t = _i64(t)
    n = _i64(1)
    for k in range(1, 31):
        n = n + tir.cast("int64", t < _i64(1 << k))
    return n


def _recip_scale(total: PrimExpr, clz: PrimExpr) -> PrimExpr:
    shifted = tir.bitwise_and(tir.shift_left(_i64(total), _i64(clz)), _i64(0xFFFFFFFF)) - _i64(1 << 31)
    s = shifted + _i64(I32_MAX)  # >= 0: shifted is in [0, 2**31)

    def newton(half: PrimExpr) -> PrimExpr:
        def step(k: int, x: PrimExpr) -> PrimExpr:
            if k == 3:
                return _sat_shl(x, 1)
            nxt = x + _sat_shl(_srdhm(x, _i64(1 << 29) - _srdhm(half, x)), 2)
            return _bind(nxt, lambda x: step(k + 1, x))
        return _bind(_i64(1515870810) + _srdhm(half, -1010580540), lambda x: step(0, x))
    return _bind(tir.shift_right(s + _i64(1), _i64(1)), newton)


@defop.compute("qnn.fixed_softmax")
def _fixed_softmax(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.fixed_softmax"
    x, tab = inputs
    shape, dtype = out_tensor_type(out_type, op, like=shape_of(x, op))
    lo, hi = int_range(dtype)
    axis = norm_axis(attrs["axis"], len(shape), "fixed_softmax: axis")
    rows = Rows(op, x, shape, axis)
    red_shape, n, at = rows.shape, rows.n, rows.at
    m = rows.max()

    def exp_of(i: tuple) -> PrimExpr:
        return tab[m[at(i, 0)] - tir.cast("int32", x[i])]

    def row_sum(*i: PrimExpr) -> Any:
        r = te.reduce_axis((0, n), "k")
        return te.sum(tir.cast("int32", _rdbpot(exp_of(at(i, r)), 12)), axis=[r])

    s = make(op, red_shape, row_sum, "sum", inline=False)
    clz = make(op, red_shape, lambda *i: tir.cast("int32", _clz(s[i])), "clz", inline=False)
    recip = make(op, red_shape, lambda *i: tir.cast("int32", _recip_scale(s[i], clz[i])), "recip", inline=False)

    def body(*i: PrimExpr) -> PrimExpr:
        j = at(i, 0)
        bits = _i64(12 + 23) - _i64(clz[j])
        y = _rdbpot(_srdhm(recip[j], exp_of(i)), bits) + _i64(lo)
        return tir.cast(dtype, tir.min(tir.max(y, _i64(lo)), _i64(hi)))

    return make(op, shape, body)


# ---- qnn.avg_pool2d -------------------------------------------------------------------------------


def _clamp(attrs: Attrs, dtype: str) -> tuple[int, int]:
    lo, hi = int_range(dtype)
    if attrs["clamp_min"] is not None:
        lo = max(lo, attrs["clamp_min"])
    if attrs["clamp_max"] is not None:
        hi = min(hi, attrs["clamp_max"])
    return lo, hi


def _pool_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    what = "qnn.avg_pool2d"
    x = check_rank(as_tensor(args[0], f"{what}: data"), 4, f"{what}: data", "[N, C, H, W]")
    if x.dtype not in ("int8", "uint8", "int16"):
        raise RelError(f"{what}: data: expected int8, uint8 or int16, got {x}")
    k = window_ints(attrs, "pool_size", 2, what, "h, w", 1)
    s, p, d = window_attrs(attrs, what)
    lo, hi = _clamp(attrs, x.dtype)
    if lo > hi:
        raise RelError(f"{what}: clamp_min {attrs['clamp_min']} is above clamp_max {attrs['clamp_max']}")
    n, c, h, w = x.shape
    oh = window_out(h, k[0], s[0], d[0], p[0], p[2], False, what, "height")
    ow = window_out(w, k[1], s[1], d[1], p[1], p[3], False, what, "width")
    return TensorType((n, c, oh, ow), x.dtype)


def _round_div(total: np.ndarray, count: np.ndarray) -> np.ndarray:
    """C's ``(acc +- count / 2) / count`` (truncating): half away from zero."""
    half = count // 2
    v = np.where(total > 0, total + half, total - half)
    return np.sign(v) * (np.abs(v) // count)


def _pool_ref(args: list, attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    k, s, p, d = attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"]
    n, c, h, w = x.shape
    oh = window_out(h, k[0], s[0], d[0], p[0], p[2])
    ow = window_out(w, k[1], s[1], d[1], p[1], p[3])
    pads = ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3]))
    xp = np.pad(x.astype(np.int64), pads)
    valid = np.pad(np.ones((h, w), np.int64), pads[2:])
    total = np.zeros((n, c, oh, ow), np.int64)
    count = np.zeros((oh, ow), np.int64)
    for _, _, view in taps(xp, k[0], k[1], s, d, oh, ow):
        total += view
    for _, _, view in taps(valid, k[0], k[1], s, d, oh, ow):
        count += view
    lo, hi = _clamp(attrs, x.dtype.name)
    return np.clip(_round_div(total, np.maximum(count, 1)), lo, hi).astype(x.dtype)


def _pool_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    t = math.prod(attrs["pool_size"])
    x = as_tensor(args[0], "qnn.avg_pool2d")
    return Cost(flops=(t + 4) * numel(out), bytes_read=numel(x) * 1.0, bytes_written=numel(out) * 1.0)


defop("qnn.avg_pool2d", rel=_pool_rel, ref=_pool_ref, cost=_pool_cost, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
      num_inputs=1, attrs=(AttrSpec("pool_size", "ints", doc="window size (h, w)"),) + WINDOW_ATTRS + (
          AttrSpec("clamp_min", "int", None, "lowest output value (a fused activation)", optional=True),
          AttrSpec("clamp_max", "int", None, "highest output value (a fused activation)", optional=True)),
      doc="int8/uint8/int16 average pooling over [N, C, H, W] as TensorFlow Lite computes it (padding not "
          "counted, the quotient rounded half away from zero)")


def _tap_count(pos: PrimExpr, k: int, s: int, d: int, p0: int, size: int) -> PrimExpr:
    base = pos * s - p0
    t_lo = tir.max((0 - base + (d - 1)) // d, 0)
    t_hi = tir.min((size - 1 - base) // d, k - 1)
    return tir.max(t_hi - t_lo + 1, 1)


@defop.compute("qnn.avg_pool2d")
def _avg_pool2d(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.avg_pool2d"
    (x,) = inputs
    _, _, h, w = shape_of(x, op)
    out_shape, dtype = out_tensor_type(out_type, op)
    k, s, p, d = attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"]
    lo, hi = _clamp(attrs, dtype)

    def body(n: PrimExpr, c: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        ry = te.reduce_axis((0, k[0]), "ry")
        rx = te.reduce_axis((0, k[1]), "rx")
        iy, ix = y * s[0] + ry * d[0] - p[0], z * s[1] + rx * d[1] - p[1]
        v = tir.select(inside(iy, ix, h, w), tir.cast("int32", x[n, c, iy, ix]), tir.const(0, "int32"))
        return te.sum(v, axis=[ry, rx])

    total = make(op, out_shape, body, "sum", inline=False)

    def avg(n: PrimExpr, c: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        cnt = tir.cast("int32", _tap_count(y, k[0], s[0], d[0], p[0], h) * _tap_count(z, k[1], s[1], d[1], p[1], w))
        t = total[n, c, y, z]
        half = tir.truncdiv(cnt, tir.const(2, "int32"))
        q = tir.truncdiv(tir.select(t > tir.const(0, "int32"), t + half, t - half), cnt)
        return tir.cast(dtype, tir.min(tir.max(q, tir.const(lo, "int32")), tir.const(hi, "int32")))

    return make(op, out_shape, avg)


# ---- ONNX: the same integer arithmetic in standard operators --------------------------------------


def _fixed_softmax_onnx(ex: Any) -> str:
    """TFLite's int8 softmax in int64 ONNX operators: the row max, the table gathered at ``max - x``,
    the Q12 sum, the leading zeros counted against the powers of two, the Newton-Raphson reciprocal,
    the rounding shift by ``35 - clz``, the clamp."""
    ex.need_opset(18, "qnn.fixed_softmax (ReduceMax with axes as an input)")
    g = OnnxInt(ex)
    x = ex.arg_type(0)
    axes = ex.ints([norm_axis(ex.attrs["axis"], x.ndim, "fixed_softmax: axis")], "axes")
    xi = g.i64(ex.ins[0])
    m = g.op("ReduceMax", xi, axes, keepdims=1)
    e = g.i64(g.op("Gather", ex.ins[1], g.op("Sub", m, xi)))
    total = g.op("ReduceSum", g.rdbpot(e, g.c(1 << 12)), axes, keepdims=1)
    powers = ex.const(np.array([1 << k for k in range(1, 31)], np.int64), hint="powers")
    below = g.op("Cast", g.op("Less", g.op("Unsqueeze", total, ex.ints([-1], "last")), powers),
                 to=ex.elem_type("int64"))
    clz = g.op("Add", g.op("ReduceSum", below, ex.ints([-1], "last"), keepdims=0), g.c(1))
    shifted = g.op("Sub", g.op("Mul", total, g.pow2(clz)), g.c(1 << 31))  # total << clz is below 2**32
    half = g.op("Div", g.op("Add", g.op("Add", shifted, g.c(I32_MAX)), g.c(1)), g.c(2))
    r = g.op("Add", g.c(1515870810), g.srdhm(half, g.c(-1010580540)))
    for _ in range(3):
        t = g.op("Sub", g.c(1 << 29), g.srdhm(half, r))
        r = g.op("Add", r, g.sat_shl(g.srdhm(r, t), 2))
    recip = g.sat_shl(r, 1)
    lo, hi = int_range(x.dtype)
    y = g.op("Add", g.rdbpot(g.srdhm(recip, e), g.pow2(g.op("Sub", g.c(35), clz))), g.c(lo))
    return g.op("Cast", g.clamp(y, lo, hi), to=ex.elem_type(x.dtype))


def _avg_pool_onnx(ex: Any) -> str:
    """The window sums as a float32 depthwise Conv with ones (exact: integers below 2**24), their
    counts a constant, the half-away-from-zero quotient a truncating int32 Div, the clamp."""
    a = ex.attrs
    x = ex.arg_type(0)
    _, c, h, w = x.shape
    k, s, p, d = a["pool_size"], a["strides"], a["padding"], a["dilation"]
    if (1 << 15) * math.prod(k) >= 1 << 24:
        raise ex.fail(f"qnn.avg_pool2d: a {k[0]}x{k[1]} window's float32 sums are not exact")
    oh, ow = window_out(h, k[0], s[0], d[0], p[0], p[2]), window_out(w, k[1], s[1], d[1], p[1], p[3])
    valid = np.pad(np.ones((h, w), np.int64), ((p[0], p[2]), (p[1], p[3])))
    count = np.zeros((oh, ow), np.int64)
    for _, _, view in taps(valid, k[0], k[1], s, d, oh, ow):
        count += view
    count = np.maximum(count, 1).astype(np.int32)
    xf = ex.node("Cast", [ex.ins[0]], to=ex.elem_type("float32"))
    ones = ex.const(np.ones((c, 1, k[0], k[1]), np.float32), hint="ones")
    total = ex.node("Conv", [xf, ones], group=c, kernel_shape=list(k), strides=list(s), pads=list(p),
                    dilations=list(d))
    t = ex.node("Cast", [total], to=ex.elem_type("int32"))
    half = ex.const(count // 2, hint="half")
    v = ex.node("Where", [ex.node("Greater", [t, ex.const(np.array(0, np.int32), hint="zero")]),
                          ex.node("Add", [t, half]), ex.node("Sub", [t, half])])
    q = ex.node("Div", [v, ex.const(count, hint="count")])
    lo, hi = _clamp(a, x.dtype)
    q = ex.node("Min", [ex.node("Max", [q, ex.const(np.array(lo, np.int32), hint="lo")]),
                        ex.const(np.array(hi, np.int32), hint="hi")])
    return ex.node("Cast", [q], to=ex.elem_type(x.dtype))


defop.onnx("qnn.fixed_softmax", OnnxMap("Softmax", convert=False, export=_fixed_softmax_onnx))
defop.onnx("qnn.avg_pool2d", OnnxMap("AveragePool", convert=False, export=_avg_pool_onnx))
