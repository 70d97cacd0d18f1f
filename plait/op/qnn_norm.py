"""``qnn.l2_normalize``: TFLite's int8 L2 normalization (``reference_integer_ops::L2Normalization``, as
TensorFlow Lite Micro runs it), bit for bit.

Per row along ``axis``: ``d = x - input_zero_point``; ``acc = sum(d * d)`` (int32: the row must be short
enough not to overflow it); TFLite's ``GetInvSqrtQuantizedMultiplierExp(acc, kReverseShift)`` gives a
multiplier and a left shift of ``1 / sqrt(acc)`` by five Newton-Raphson steps in Q3.28 (``INT32_MAX``
and 0 for ``acc <= 1``); ``y = MultiplyByQuantizedMultiplier(d, multiplier, shift + 7)`` clamped to
int8. The output is in steps of 1/128 with zero point 0. It exports to ONNX as int64 standard operators
(ONNX Runtime computes them exactly).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait.ir.attrs import Attrs
from plait.op._common import AttrSpec, Cost, Family, OnnxMap, OpPattern, RelError, Type, as_tensor, norm_axis, numel
from plait.op._compute import Rows, make, out_tensor_type, shape_of, tir
from plait.op._onnx_int import I32_MAX, OnnxInt
from plait.op.qnn_fixed import _bind, _i64, _rdbpot, _sat_shl, _srdhm, rdbpot, sat_shl, srdhm, wrap32
from plait import te
from plait.tir.expr import PrimExpr

defop = Family()

_HALF_THREE = (1 << 28) + (1 << 27)  # 1.5 in Q3.28
_HALF_SQRT2 = 1518500250  # sqrt(2) / 2 in Q0.31


def _bit_length(v: np.ndarray) -> np.ndarray:
    return sum((v >= (1 << k)).astype(np.int64) for k in range(31))


def inv_sqrt(value: Any) -> tuple[np.ndarray, np.ndarray]:
    """``GetInvSqrtQuantizedMultiplierExp(value, kReverseShift)`` of int32 values >= 0 (numpy int64):
    (multiplier, left shift) of ``1 / sqrt(value)``."""
    v = np.asarray(value, np.int64)
    big = v >= (1 << 29)  # TFLite divides by 4 while >= 2**29: once at most for an int32
    w = np.where(big, v >> 2, v)
    pairs = (31 - _bit_length(w)) // 2 - 1  # (CountLeadingZeros - 1) / 2 - 1
    shift = np.where(big, 12, 11) - pairs
    w = w << (2 * pairs)
    half = rdbpot(w >> 1, 1)
    x = np.full(v.shape, 1 << 28, np.int64)
    for _ in range(5):
        x3 = sat_shl(srdhm(srdhm(x, x), x), 6)  # Rescale<3> of a Q9 product
        x = sat_shl(srdhm(_HALF_THREE, x) - srdhm(half, x3), 3)
    m = srdhm(x, _HALF_SQRT2)
    m = np.where(shift < 0, wrap32(m << np.maximum(-shift, 0)), m)
    small = v <= 1
    return np.where(small, I32_MAX, m), np.where(small, 0, -np.maximum(shift, 0))


def _mbqm(x: np.ndarray, mult: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """TensorFlow Lite Micro's ``MultiplyByQuantizedMultiplier`` with per-element multipliers and shifts."""
    return rdbpot(srdhm(wrap32(x << np.maximum(shift, 0)), mult), np.maximum(-shift, 0))


def _rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x = as_tensor(args[0], "qnn.l2_normalize: data")
    if x.dtype != "int8":
        raise RelError(f"qnn.l2_normalize: data: expected int8, got {x}")
    if x.ndim == 0:
        raise RelError(f"qnn.l2_normalize: data: expected at least one dimension, got {x}")
    axis = norm_axis(attrs["axis"], x.ndim, "qnn.l2_normalize: axis")
    zp = attrs["input_zero_point"]
    if not -128 <= zp <= 127:
        raise RelError(f"qnn.l2_normalize: input_zero_point {zp} is outside int8")
    n = x.shape[axis]
    if not isinstance(n, int) or n * 255 * 255 > I32_MAX:
        raise RelError(f"qnn.l2_normalize: a row of {n} values can overflow TFLite's int32 sum of squares "
                       f"(at most {I32_MAX // (255 * 255)})")
    return x


def _ref(args: list, attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    axis = norm_axis(attrs["axis"], x.ndim, "qnn.l2_normalize: axis")
    d = x.astype(np.int64) - attrs["input_zero_point"]
    mult, shift = inv_sqrt((d * d).sum(axis, keepdims=True))
    return np.clip(_mbqm(d, mult, shift + 7), -128, 127).astype(np.int8)


def _cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    return Cost(flops=12.0 * numel(out), bytes_read=numel(args[0]) * 1.0, bytes_written=numel(out) * 1.0)


defop("qnn.l2_normalize", rel=_rel, ref=_ref, cost=_cost, pattern=OpPattern.OPAQUE, attrs=(
    AttrSpec("input_zero_point", "int", 0, "the input's zero point"),
    AttrSpec("axis", "int", -1, "the axis each row runs along"),
), doc="int8 L2 normalization as TensorFlow Lite (Micro) computes it: the output is in steps of 1/128 with "
       "zero point 0")


# ---- TE compute -----------------------------------------------------------------------------------


def _bit_length_tir(t: PrimExpr) -> PrimExpr:
    n = _i64(0)
    for k in range(31):
        n = n + tir.cast("int64", t >= _i64(1 << k))
    return n


def _with_norm(v: PrimExpr, fn: Any) -> PrimExpr:
    """``fn(w, pairs, shift)`` of an int64 sum ``v``: :func:`inv_sqrt`'s normalization (``w`` is ``v`` over
    4 when ``v >= 2**29``; the shift before the negative-shift case is ``(12 or 11) - pairs``)."""
    def with_w(w: PrimExpr) -> PrimExpr:
        return _bind(tir.shift_right(_i64(31) - _bit_length_tir(w), _i64(1)) - _i64(1), lambda pairs: _bind(
            tir.select(v >= _i64(1 << 29), _i64(12), _i64(11)) - pairs, lambda shift: fn(w, pairs, shift)))
    return _bind(tir.select(v >= _i64(1 << 29), tir.shift_right(v, _i64(2)), v), with_w)


def _newton(w: PrimExpr, pairs: PrimExpr) -> PrimExpr:
    """The multiplier of ``1 / sqrt(w << 2 * pairs)``: five Newton-Raphson steps in Q3.28, times sqrt(2)/2."""
    def steps(half: PrimExpr) -> PrimExpr:
        def step(k: int, x: PrimExpr) -> PrimExpr:
            if k == 5:
                return _srdhm(x, _HALF_SQRT2)
            x3 = _sat_shl(_srdhm(_srdhm(x, x), x), 6)
            return _bind(_sat_shl(_srdhm(_HALF_THREE, x) - _srdhm(half, x3), 3), lambda x: step(k + 1, x))
        return step(0, _i64(1 << 28))
    return _bind(_rdbpot(tir.shift_right(tir.shift_left(w, pairs * _i64(2)), _i64(1)), 1), steps)


@defop.compute("qnn.l2_normalize")
def _l2_normalize(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.l2_normalize"
    (x,) = inputs
    shape, _ = out_tensor_type(out_type, op, like=shape_of(x, op))
    axis = norm_axis(attrs["axis"], len(shape), "qnn.l2_normalize: axis")
    zp = attrs["input_zero_point"]
    rows = Rows(op, x, shape, axis)
    red_shape, n, at = rows.shape, rows.n, rows.at

    def d(i: tuple) -> PrimExpr:
        return tir.cast("int64", x[i]) - _i64(zp)

    def row_sum(*i: PrimExpr) -> Any:
        r = te.reduce_axis((0, n), "k")
        v = tir.cast("int32", x[at(i, r)]) - tir.const(zp, "int32")
        return te.sum(v * v, axis=[r])

    acc = make(op, red_shape, row_sum, "sum", inline=False)

    def shift_of(*i: PrimExpr) -> PrimExpr:  # the left shift of MultiplyByQuantizedMultiplier, 7 added
        v = _i64(acc[i])
        left = _with_norm(v, lambda w, pairs, s: _i64(0) - tir.max(s, _i64(0)))
        return tir.cast("int32", tir.select(v <= _i64(1), _i64(0), left) + _i64(7))

    def mult_of(*i: PrimExpr) -> PrimExpr:
        v = _i64(acc[i])

        def multiplier(w: PrimExpr, pairs: PrimExpr, s: PrimExpr) -> PrimExpr:
            return _bind(_newton(w, pairs), lambda m: tir.select(s < _i64(0), tir.cast("int64", tir.cast(
                "int32", tir.shift_left(m, tir.max(_i64(0) - s, _i64(0))))), m))
        return tir.cast("int32", tir.select(v <= _i64(1), _i64(I32_MAX), _with_norm(v, multiplier)))

    shift = make(op, red_shape, shift_of, "shift", inline=False)
    mult = make(op, red_shape, mult_of, "mult", inline=False)

    def body(*i: PrimExpr) -> PrimExpr:
        j = at(i, 0)
        s = _i64(shift[j])
        left = tir.shift_left(d(i), tir.max(s, _i64(0)))
        y = _rdbpot(_srdhm(tir.cast("int64", tir.cast("int32", left)), mult[j]), tir.max(_i64(0) - s, _i64(0)))
        return tir.cast("int8", tir.min(tir.max(y, _i64(-128)), _i64(127)))

    return make(op, shape, body)


# ---- ONNX -----------------------------------------------------------------------------------------


def _l2_normalize_onnx(ex: Any) -> str:
    """The same arithmetic in int64 ONNX operators: the row's sum of squares, its bit length counted
    against the powers of two, the Newton-Raphson steps, MultiplyByQuantizedMultiplier, the clamp."""
    ex.need_opset(18, "qnn.l2_normalize (ReduceSum with axes as an input)")
    g = OnnxInt(ex)
    x = ex.arg_type(0)
    axes = ex.ints([norm_axis(ex.attrs["axis"], x.ndim, "qnn.l2_normalize: axis")], "axes")
    d = g.op("Sub", g.i64(ex.ins[0]), g.c(ex.attrs["input_zero_point"]))
    v = g.op("ReduceSum", g.op("Mul", d, d), axes, keepdims=1)
    big = g.op("GreaterOrEqual", v, g.c(1 << 29))
    w = g.where(big, g.op("Div", v, g.c(4)), v)
    powers = ex.const(np.array([1 << k for k in range(31)], np.int64), hint="powers")
    bits = g.op("ReduceSum", g.i64(g.op("GreaterOrEqual", g.op("Unsqueeze", w, ex.ints([-1], "last")), powers)),
                ex.ints([-1], "last"), keepdims=0)
    pairs = g.op("Sub", g.op("Div", g.op("Sub", g.c(31), bits), g.c(2)), g.c(1))
    shift = g.op("Sub", g.where(big, g.c(12), g.c(11)), pairs)
    w = g.op("Mul", w, g.pow2(g.op("Mul", pairs, g.c(2))))
    half = g.rdbpot(g.op("Div", w, g.c(2)), g.c(2))
    xr = g.c(1 << 28)
    for _ in range(5):
        x3 = g.sat_shl(g.srdhm(g.srdhm(xr, xr), xr), 6)
        xr = g.sat_shl(g.op("Sub", g.srdhm(g.c(_HALF_THREE), xr), g.srdhm(half, x3)), 3)
    m = g.srdhm(xr, g.c(_HALF_SQRT2))
    neg = g.op("Less", shift, g.c(0))
    zero = g.c(0)
    up = g.op("Mul", m, g.pow2(g.op("Max", g.op("Neg", shift), zero)))
    wrapped = g.op("Sub", g.op("Mod", g.op("Add", up, g.c(1 << 31)), g.c(1 << 32), fmod=0), g.c(1 << 31))
    small = g.op("LessOrEqual", v, g.c(1))
    mult = g.where(small, g.c(I32_MAX), g.where(neg, wrapped, m))
    left = g.where(small, zero, g.op("Neg", g.op("Max", shift, zero)))
    y = g.multiply_by_quantized_multiplier(d, mult, g.op("Add", left, g.c(7)))
    return g.op("Cast", g.clamp(y, -128, 127), to=ex.elem_type("int8"))


defop.onnx("qnn.l2_normalize", OnnxMap("LpNormalization", convert=False, export=_l2_normalize_onnx))
