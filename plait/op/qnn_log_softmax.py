"""``qnn.fixed_log_softmax``: TFLite's int8 log softmax (``reference_ops::LogSoftmax(params, outer_size,
depth, ...)``, i.e. ``LogSoftmaxQuantized``, as TensorFlow Lite Micro runs it), bit for bit.

TensorFlow Lite Micro's ``LOG_SOFTMAX`` prepares, from the input scale alone,
``PreprocessLogSoftmaxScalingExp(1.0, scale, 5)``: the input multiplier and left shift of
``scale * 2**26`` (a Q5.26 difference), the reverse multiplier and (non-positive) shift of
``2**(31 - shift) / multiplier``; and ``diff_min = -CalculateInputRadius(5, shift)``.
:func:`log_softmax_params` computes them at compile time and the table of the differences ``0..-255``
(row 0: ``Rescale<12>(exp_on_negative_values(MultiplyByQuantizedMultiplier(-k)))``, the Q12.19 term
of the sum; row 1: ``MultiplyByQuantizedMultiplier(-k)``, the Q5.26 difference; both 0 below
``diff_min``). Per row along ``axis``, ``k = max(x) - x``: ``sum`` the int32 sum of ``table[0, k]``;
``log_sum = log_x_for_x_greater_than_or_equal_to_1<5>(sum)`` (Q5.26, gemmlowp's polynomial in TFLite's
common.h); ``adjusted = max(diff_min - 1, MultiplyByQuantizedMultiplier(log_sum + INT32_MIN,
reverse_multiplier, reverse_shift))``; ``y = RoundingDivideByPOT(table[1, k] - log_sum, 22) + 127``
(the subtraction wrapping as int32, as in C) clamped to int8 where ``-k > adjusted``, else -128. The
output is in steps of 16/256 with zero point 127, as TensorFlow Lite Micro requires. It exports to ONNX
as int64 standard operators (ONNX Runtime computes them exactly).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from plait import te
from plait.ir.attrs import Attrs
from plait.op._common import AttrSpec, Cost, Family, OnnxMap, OpPattern, RelError, Type, as_tensor, norm_axis, numel
from plait.op._compute import Rows, make, out_tensor_type, shape_of, tir
from plait.op._onnx_int import I32_MAX, I32_MIN, OnnxInt
from plait.op.qnn_fixed import (_bind, _clz, _i64, _one_over_one_plus_x, _rdbpot, _sat_shl, _srdhm,
                                exp_on_negative_values, multiply_by_quantized_multiplier, rdbpot, sat_shl,
                                softmax_params, srdhm, wrap32)
from plait.tir.expr import PrimExpr

defop = Family()

OUTPUT_SCALE, OUTPUT_ZERO_POINT = 16 / 256, 127  # TensorFlow Lite Micro's kOutputScale, kOutputZeroPoint
MAX_ROW = I32_MAX // (1 << 19)  # exp(0) is 2**19 in Q12.19: longer rows can overflow the int32 sum

# gemmlowp's Q0.31 constants of log_x_for_x_greater_than_or_equal_to_1_impl
_LOG_2, _SQRT_SQRT_HALF, _SQRT_HALF = 1488522236, 1805811301, 1518500250
_ALPHA_N, _ALPHA_D, _ALPHA_I, _ALPHA_F = 117049297, 127690142, 1057819769, 638450708
_QUARTER = 1 << 23  # Rescale<6>(1/4): one quarter in Q6.25


def log_softmax_params(x_scale: float) -> tuple[np.ndarray, dict[str, int]]:
    """TensorFlow Lite Micro's prepared ``LOG_SOFTMAX`` parameters for an input scale: the int32[2, 256]
    table of ``qnn.fixed_log_softmax`` and its attributes ``diff_min``, ``reverse_multiplier``,
    ``reverse_shift``. ``ValueError`` where TensorFlow Lite Micro's preparation would fail."""
    real = float(x_scale) * float(1 << 26)
    if not math.isfinite(real) or real <= 1.0:
        raise ValueError(f"log softmax: input scale {x_scale} x 2**26 is not above 1 (TFLite's "
                         "QuantizeMultiplierGreaterThanOne)")
    mult, shift, diff_min = softmax_params(x_scale, 1.0)
    reverse = (1 << (31 - shift)) / float(mult)
    if not 0.0 < reverse < 1.0:
        raise ValueError(f"log softmax: input scale {x_scale} gives a reverse scaling {reverse}, not below 1")
    q, e = math.frexp(reverse)
    rm = math.floor(q * (1 << 31) + 0.5)
    if rm == 1 << 31:
        rm, e = rm // 2, e + 1
    if e < -31:
        rm, e = 0, 0
    d = -np.arange(256, dtype=np.int64)
    inside = d >= diff_min
    dq = np.where(inside, multiply_by_quantized_multiplier(np.where(inside, d, 0), mult, shift), 0)
    terms = np.where(inside, rdbpot(exp_on_negative_values(dq), 12), 0)
    table = np.stack([terms, dq]).astype(np.int32)
    return table, {"diff_min": int(diff_min), "reverse_multiplier": int(rm), "reverse_shift": int(e)}


# ---- gemmlowp's log on numpy int64 arrays ---------------------------------------------------------


def _clz32(v: np.ndarray) -> np.ndarray:
    """``CountLeadingZeros(uint32)`` of int32 values >= 0 (32 for 0)."""
    return 32 - sum((v >= (1 << k)).astype(np.int64) for k in range(31))


def _sat_shl_param(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``SaturatingRoundingMultiplyByPOTParam`` for per-element exponents 0..31."""
    t = (np.int64(1) << (31 - e)) - 1
    shifted = np.where(x > t, I32_MAX, np.where(x < -t, I32_MIN, wrap32(x << e)))
    return np.where(e == 0, x, shifted)


def log_x_for_x_greater_than_or_equal_to_1(z: Any, input_bits: int = 12, output_bits: int = 5) -> np.ndarray:
    """TFLite's ``log_x_for_x_greater_than_or_equal_to_1<output_bits>`` of positive raw values with
    ``input_bits`` integer bits (the Q12.19 sum of exps by default), a Q5.26 result."""
    z = np.asarray(z, np.int64)
    acc = output_bits + 1
    clz_a = _clz32(z)
    r_a = sat_shl(srdhm(_sat_shl_param(z, clz_a - 1), _SQRT_HALF), 1)
    pow_a = np.clip(((input_bits - clz_a) << (31 - acc)) + _QUARTER, I32_MIN, I32_MAX)
    b_headroom = _clz32(srdhm(z, _SQRT_HALF)) - 1
    r_b = _sat_shl_param(z, b_headroom)
    pow_b = np.clip(((input_bits - b_headroom) << (31 - acc)) - _QUARTER, I32_MIN, I32_MAX)
    r = np.minimum(r_a, r_b)
    pow2_adj = np.maximum(pow_a, pow_b)
    total = r + _SQRT_SQRT_HALF
    p = np.where(total >= 0, (total + 1) // 2, -((-total + 1) // 2))  # RoundingHalfSum
    q = wrap32(2 * wrap32(r - _SQRT_SQRT_HALF))
    sq = srdhm(q, q)
    num = wrap32(srdhm(q, r) + srdhm(srdhm(q, sq), _ALPHA_N))
    denom = wrap32(srdhm(p, wrap32(_ALPHA_I + q + srdhm(_ALPHA_D, sq))) + srdhm(_ALPHA_F, q))
    out = wrap32(srdhm(pow2_adj, _LOG_2) + srdhm(rdbpot(num, 6), _one_over_one_plus_x(denom)))
    return sat_shl(out, acc - output_bits) if acc > output_bits else out


# ---- qnn.fixed_log_softmax ------------------------------------------------------------------------

_OP = "qnn.fixed_log_softmax"


def _rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x = as_tensor(args[0], f"{_OP}: data")
    if x.dtype != "int8":
        raise RelError(f"{_OP}: data: expected int8, got {x}")
    if x.ndim == 0:
        raise RelError(f"{_OP}: data: expected at least one dimension, got {x}")
    t = as_tensor(args[1], f"{_OP}: table")
    if t.dtype != "int32" or t.shape != (2, 256):
        raise RelError(f"{_OP}: table: expected int32[2, 256], got {t}")
    axis = norm_axis(attrs["axis"], x.ndim, f"{_OP}: axis")
    n = x.shape[axis]
    if not isinstance(n, int) or n > MAX_ROW:
        raise RelError(f"{_OP}: a row of {n} values can overflow TFLite's int32 sum of exps (at most {MAX_ROW})")
    if attrs["diff_min"] > 0:
        raise RelError(f"{_OP}: diff_min {attrs['diff_min']} is positive")
    if not 0 <= attrs["reverse_multiplier"] <= I32_MAX:
        raise RelError(f"{_OP}: reverse_multiplier {attrs['reverse_multiplier']} is outside [0, 2**31 - 1]")
    if not -31 <= attrs["reverse_shift"] <= 0:
        raise RelError(f"{_OP}: reverse_shift {attrs['reverse_shift']} is outside [-31, 0]")
    return x


def _ref(args: list, attrs: Attrs) -> np.ndarray:
    x, tab = np.asarray(args[0]), np.asarray(args[1], np.int64)
    axis = norm_axis(attrs["axis"], x.ndim, f"{_OP}: axis")
    xi = np.moveaxis(x.astype(np.int64), axis, -1)
    k = xi.max(-1, keepdims=True) - xi
    log_sum = log_x_for_x_greater_than_or_equal_to_1(wrap32(tab[0][k].sum(-1, keepdims=True)))
    bound = multiply_by_quantized_multiplier(log_sum + I32_MIN, attrs["reverse_multiplier"], attrs["reverse_shift"])
    adjusted = np.maximum(attrs["diff_min"] - 1, bound)
    y = np.clip(rdbpot(wrap32(tab[1][k] - log_sum), 22) + 127, -128, 127)
    return np.moveaxis(np.where(-k > adjusted, y, -128), -1, axis).astype(np.int8)


def _cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    return Cost(flops=10.0 * numel(out), bytes_read=numel(args[0]) * 1.0, bytes_written=numel(out) * 1.0)


defop(_OP, rel=_rel, ref=_ref, cost=_cost, pattern=OpPattern.OPAQUE, num_inputs=2, attrs=(
    AttrSpec("diff_min", "int", doc="the smallest difference from the row's maximum counted (-input radius)"),
    AttrSpec("reverse_multiplier", "int", doc="the Q0.31 multiplier of the reverse input scaling"),
    AttrSpec("reverse_shift", "int", doc="the (non-positive) left shift of the reverse input scaling"),
    AttrSpec("axis", "int", -1, "the axis the log softmax runs along"),
), doc="int8 log softmax as TensorFlow Lite Micro computes it: gemmlowp fixed point, a table of the "
       "rescaled differences and their exps; the output is in steps of 16/256 with zero point 127")


# ---- TE compute -----------------------------------------------------------------------------------


def _sat_shl_var(x: PrimExpr, e: PrimExpr) -> PrimExpr:
    """``SaturatingRoundingMultiplyByPOTParam`` of int64 ``x`` (an int32 value) by int64 ``e`` in 0..30."""
    def body(x: PrimExpr) -> PrimExpr:
        t = tir.shift_left(_i64(1), _i64(31) - e) - _i64(1)
        return tir.select(e == _i64(0), x, tir.select(x > t, _i64(I32_MAX), tir.select(
            x < _i64(0) - t, _i64(I32_MIN), tir.shift_left(x, e))))
    return _bind(_i64(x), body)


def _half_sum(a: PrimExpr, b: int) -> PrimExpr:
    """gemmlowp's ``RoundingHalfSum``: ``(a + b + sign) / 2`` truncated."""
    return _bind(_i64(a) + _i64(b), lambda s: tir.truncdiv(
        s + tir.select(s >= _i64(0), _i64(1), _i64(-1)), _i64(2)))


def _log_tir(z: PrimExpr) -> PrimExpr:
    """:func:`log_x_for_x_greater_than_or_equal_to_1` of an int64 expression (a positive int32 sum)."""
    def with_z(z: PrimExpr) -> PrimExpr:
        def with_clz(clz_a: PrimExpr) -> PrimExpr:
            r_a = _sat_shl(_srdhm(tir.shift_left(z, clz_a - _i64(1)), _SQRT_HALF), 1)  # no saturation: normalized
            pow_a = (_i64(12) - clz_a) * _i64(1 << 25) + _i64(_QUARTER)  # small: never saturates

            def with_b(b_headroom: PrimExpr) -> PrimExpr:
                r_b = _sat_shl_var(z, b_headroom)
                pow_b = (_i64(12) - b_headroom) * _i64(1 << 25) - _i64(_QUARTER)
                return _bind(tir.min(r_a, r_b), lambda r: _bind(tir.max(pow_a, pow_b), lambda adj: poly(r, adj)))
            return _bind(_clz(_srdhm(z, _SQRT_HALF)) - _i64(1), with_b)
        return _bind(_clz(z), with_clz)

    def poly(r: PrimExpr, adj: PrimExpr) -> PrimExpr:
        def with_q(q: PrimExpr) -> PrimExpr:
            def with_sq(sq: PrimExpr) -> PrimExpr:
                num = _srdhm(q, r) + _srdhm(_srdhm(q, sq), _ALPHA_N)
                denom = _srdhm(_half_sum(r, _SQRT_SQRT_HALF), _i64(_ALPHA_I) + q + _srdhm(_ALPHA_D, sq)) + \
                    _srdhm(_ALPHA_F, q)
                recip = _sat_shl(_newton_tir(denom), 1)
                return _sat_shl(_srdhm(adj, _LOG_2) + _srdhm(_rdbpot(num, 6), recip), 1)
            return _bind(_srdhm(q, q), with_sq)
        return _bind((r - _i64(_SQRT_SQRT_HALF)) * _i64(2), with_q)
    return _bind(_i64(z), with_z)


def _newton_tir(a: PrimExpr) -> PrimExpr:
    """gemmlowp's Newton-Raphson ``1 / (1 + a)`` before its final doubling (Q2.29), of a Q0.31 value."""
    def newton(half: PrimExpr) -> PrimExpr:
        def step(k: int, x: PrimExpr) -> PrimExpr:
            if k == 3:
                return x
            nxt = x + _sat_shl(_srdhm(x, _i64(1 << 29) - _srdhm(half, x)), 2)
            return _bind(nxt, lambda x: step(k + 1, x))
        return _bind(_i64(1515870810) + _srdhm(half, -1010580540), lambda x: step(0, x))
    return _bind(_half_sum(a, I32_MAX), newton)


@defop.compute(_OP)
def _fixed_log_softmax(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    x, tab = inputs
    shape, _ = out_tensor_type(out_type, _OP, like=shape_of(x, _OP))
    axis = norm_axis(attrs["axis"], len(shape), f"{_OP}: axis")
    rows = Rows(_OP, x, shape, axis)
    red_shape, n, at = rows.shape, rows.n, rows.at
    m = rows.max()

    def diff(i: tuple) -> PrimExpr:
        return m[at(i, 0)] - tir.cast("int32", x[i])

    def row_sum(*i: PrimExpr) -> Any:
        r = te.reduce_axis((0, n), "k")
        return te.sum(tab[0, diff(at(i, r))], axis=[r])

    s = make(_OP, red_shape, row_sum, "sum", inline=False)
    log_sum = make(_OP, red_shape, lambda *i: tir.cast("int32", _log_tir(s[i])), "log", inline=False)

    def bound_of(*i: PrimExpr) -> PrimExpr:
        b = _rdbpot(_srdhm(_i64(log_sum[i]) + _i64(I32_MIN), attrs["reverse_multiplier"]), -attrs["reverse_shift"])
        return tir.cast("int32", tir.max(b, _i64(attrs["diff_min"] - 1)))

    adjusted = make(_OP, red_shape, bound_of, "adjusted", inline=False)

    def body(*i: PrimExpr) -> PrimExpr:
        j = at(i, 0)
        k = diff(i)
        delta = tir.cast("int64", tir.cast("int32", _i64(tab[1, k]) - _i64(log_sum[j])))  # wraps as in C
        y = tir.min(tir.max(_rdbpot(delta, 22) + _i64(127), _i64(-128)), _i64(127))
        return tir.cast("int8", tir.select(tir.const(0, "int32") - k > adjusted[j], y, _i64(-128)))

    return make(_OP, shape, body)


# ---- ONNX -----------------------------------------------------------------------------------------


def _fixed_log_softmax_onnx(ex: Any) -> str:
    """The same arithmetic in int64 ONNX operators: the row max, the table gathered at ``max - x``, the
    sum, the leading zeros counted against the powers of two, gemmlowp's log polynomial and
    Newton-Raphson reciprocal, the reverse-scaled bound, the wrapped difference, the rounding shift."""
    ex.need_opset(18, f"{_OP} (ReduceMax with axes as an input)")
    g = OnnxInt(ex)
    a = ex.attrs
    x = ex.arg_type(0)
    axes = ex.ints([norm_axis(a["axis"], x.ndim, f"{_OP}: axis")], "axes")
    xi = g.i64(ex.ins[0])
    k = g.op("Sub", g.op("ReduceMax", xi, axes, keepdims=1), xi)
    tab = g.i64(ex.ins[1])
    terms = g.op("Gather", g.op("Gather", tab, g.c(0), axis=0), k)
    dq = g.op("Gather", g.op("Gather", tab, g.c(1), axis=0), k)
    z = g.op("ReduceSum", terms, axes, keepdims=1)
    powers = ex.const(np.array([1 << j for j in range(1, 31)], np.int64), hint="powers")
    last = ex.ints([-1], "last")

    def clz(v: str) -> str:  # 1 + [v < 2**j] for j in 1..30: a positive int32's leading zeros
        below = g.i64(g.op("Less", g.op("Unsqueeze", v, last), powers))
        return g.op("Add", g.op("ReduceSum", below, last, keepdims=0), g.c(1))

    def sat_shl_var(v: str, e: str) -> str:
        t = g.op("Sub", g.pow2(g.op("Sub", g.c(31), e)), g.c(1))
        shifted = g.where(g.op("Greater", v, t), g.c(I32_MAX), g.where(
            g.op("Less", v, g.op("Neg", t)), g.c(I32_MIN), g.op("Mul", v, g.pow2(e))))
        return g.where(g.op("Equal", e, g.c(0)), v, shifted)

    def half_sum(v: str, b: int) -> str:
        s = g.op("Add", v, g.c(b))
        return g.op("Div", g.op("Add", s, g.where(g.op("Less", s, g.c(0)), g.c(-1), g.c(1))), g.c(2))

    sqrt_half = g.c(_SQRT_HALF)
    clz_a = clz(z)
    r_a = g.sat_shl(g.srdhm(g.op("Mul", z, g.pow2(g.op("Sub", clz_a, g.c(1)))), sqrt_half), 1)
    pow_a = g.op("Add", g.op("Mul", g.op("Sub", g.c(12), clz_a), g.c(1 << 25)), g.c(_QUARTER))
    b_headroom = g.op("Sub", clz(g.srdhm(z, sqrt_half)), g.c(1))
    r_b = sat_shl_var(z, b_headroom)
    pow_b = g.op("Sub", g.op("Mul", g.op("Sub", g.c(12), b_headroom), g.c(1 << 25)), g.c(_QUARTER))
    r = g.op("Min", r_a, r_b)
    adj = g.op("Max", pow_a, pow_b)
    q = g.op("Mul", g.op("Sub", r, g.c(_SQRT_SQRT_HALF)), g.c(2))
    sq = g.srdhm(q, q)
    num = g.op("Add", g.srdhm(q, r), g.srdhm(g.srdhm(q, sq), g.c(_ALPHA_N)))
    inner = g.op("Add", g.op("Add", g.c(_ALPHA_I), q), g.srdhm(g.c(_ALPHA_D), sq))
    denom = g.op("Add", g.srdhm(half_sum(r, _SQRT_SQRT_HALF), inner), g.srdhm(g.c(_ALPHA_F), q))
    half = half_sum(denom, I32_MAX)
    rc = g.op("Add", g.c(1515870810), g.srdhm(half, g.c(-1010580540)))
    for _ in range(3):
        rc = g.op("Add", rc, g.sat_shl(g.srdhm(rc, g.op("Sub", g.c(1 << 29), g.srdhm(half, rc))), 2))
    recip = g.sat_shl(rc, 1)
    log_sum = g.sat_shl(g.op("Add", g.srdhm(adj, g.c(_LOG_2)), g.srdhm(g.rdbpot(num, g.c(1 << 6)), recip)), 1)
    bound = g.rdbpot(g.srdhm(g.op("Add", log_sum, g.c(I32_MIN)), g.c(a["reverse_multiplier"])),
                     g.c(1 << -a["reverse_shift"]))
    adjusted = g.op("Max", bound, g.c(a["diff_min"] - 1))
    delta = g.op("Sub", g.op("Mod", g.op("Add", g.op("Sub", dq, log_sum), g.c(1 << 31)), g.c(1 << 32), fmod=0),
                 g.c(1 << 31))  # the int32 subtraction wraps, as in C
    y = g.clamp(g.op("Add", g.rdbpot(delta, g.c(1 << 22)), g.c(127)), -128, 127)
    y = g.where(g.op("Greater", g.op("Neg", k), adjusted), y, g.c(-128))
    return g.op("Cast", y, to=ex.elem_type("int8"))


defop.onnx(_OP, OnnxMap("LogSoftmax", convert=False, export=_fixed_log_softmax_onnx))
