"""``qnn.softmax16``: TFLite's int16 softmax (``reference_ops::SoftmaxInt16``, as TensorFlow Lite Micro runs
it), bit for bit.

TensorFlow Lite Micro's ``SoftmaxPrepare`` builds two 513-entry int16 tables with ``gen_lut`` (float32:
``exp`` on [-10, 0] and ``1 / (1 + x)`` on [0, 1], both to [-1, 1]; :func:`softmax16_luts`) and
``QuantizeMultiplier(input_scale * beta / (10 / 65535))`` (:func:`softmax16_params`). Per row along
``axis``: ``d = x - max(x)``; ``e = lut(exp, clamp(MultiplyByQuantizedMultiplier(d) + 32767))``, an
int16 (``generic_int16_table_lookup``: ``lut[256 + (v >> 7)]`` plus the slope times ``v & 127``,
``+ 64 >> 7``); ``sum`` the int32 sum of ``e``; ``h = clz(sum)``; ``r = lut(1 / (1 + x),
clamp((((sum << (h - 1)) + 2**13) >> 14) - 98304))``; ``y = (e * r + 2**(30 - h)) >> (31 - h)`` clamped
to [0, 32767]. The output's scale is 1/32768 and its zero point 0, as TFLite requires. It exports to
ONNX as int64 standard operators (ONNX Runtime computes them exactly).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from plait import te
from plait.ir.attrs import Attrs
from plait.op._common import AttrSpec, Cost, Family, OnnxMap, OpPattern, RelError, Type, as_tensor, norm_axis, numel
from plait.op._compute import Rows, make, out_tensor_type, shape_of, tir
from plait.op._onnx_int import OnnxInt
from plait.op.qnn import fixed_point_multiplier
from plait.op.qnn_fixed import _bind, _clz, _i64, _rdbpot, _srdhm, multiply_by_quantized_multiplier
from plait.tir.expr import PrimExpr

defop = Family()

LUT_SIZE = 513
MAX_ROW = ((1 << 31) - 1) // 32767  # exp(0) is 32767: longer rows could overflow the int32 sum


# ---- compile-time parameters: SoftmaxPrepare ------------------------------------------------------


def _roundf(v: np.ndarray) -> np.ndarray:
    """``TfLiteRound`` of float32 values (half away from zero; exact in float32 for these magnitudes)."""
    v = np.asarray(v, np.float32)
    return (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.float32)


def _gen_lut(func: Any, input_min: float, input_max: float) -> np.ndarray:
    """``gen_lut<float, int16_t, int16_t>(func, input_min, input_max, -1, 1)``: 512 steps, each sample
    biased by half its midpoint's interpolation error, plus the value at ``input_max``."""
    f = np.float32
    lo, hi = f(input_min), f(input_max)
    step = f((hi - lo) / f(512))
    half = f(step / f(2))
    inv = f(f(65536.0) / f(2.0))
    i = np.arange(512, dtype=np.float32)
    at = (lo + (i * step).astype(f)).astype(f)
    val, mid = func(at), func((at + half).astype(f))
    nxt = func((lo + ((i + f(1)) * step).astype(f)).astype(f))
    sample = _roundf(val * inv)
    interp = _roundf(((nxt * inv).astype(f) + sample).astype(f) / f(2))
    bias = _roundf((interp - _roundf(mid * inv)).astype(f) / f(2))
    lut = np.clip(sample - bias, -32768, 32767)
    last = np.clip(_roundf(func(np.array([hi], f)) * inv), -32768, 32767)
    return np.concatenate([lut, last]).astype(np.int16)


def _expf(v: np.ndarray) -> np.ndarray:
    """``std::exp`` of float32 values (glibc's ``expf``: the correctly rounded float32 of the double)."""
    return np.array([np.float32(math.exp(float(x))) for x in np.asarray(v).reshape(-1)], np.float32).reshape(np.shape(v))


def _one_over_one_plus(v: np.ndarray) -> np.ndarray:
    return (np.float32(1.0) / (np.float32(1.0) + np.asarray(v, np.float32))).astype(np.float32)


def softmax16_luts() -> np.ndarray:
    """The int16 [2, 513] tables ``SoftmaxPrepare`` builds: row 0 ``exp`` on [-10, 0], row 1 ``1 / (1 + x)``
    on [0, 1] (they do not depend on the scales)."""
    return np.stack([_gen_lut(_expf, -10.0, 0.0), _gen_lut(_one_over_one_plus, 0.0, 1.0)])


def softmax16_params(x_scale: float, beta: float = 1.0) -> tuple[int, int]:
    """``QuantizeMultiplier(double(input_scale) * double(beta) / (10.0 / 65535.0))``: (multiplier, shift)."""
    real = float(np.float32(x_scale)) * float(np.float32(beta)) / (10.0 / 65535.0)
    if not math.isfinite(real) or real <= 0:
        raise ValueError(f"softmax16: input scale x beta {real} is not a positive finite value")
    m, s = fixed_point_multiplier(np.array([real]))
    m, s = int(m[0]), int(s[0])
    if m == 0:
        raise ValueError(f"softmax16: input scale x beta is too small for TFLite's int16 softmax ({real})")
    if 65535 << max(s, 0) >= 1 << 31:
        raise ValueError(f"softmax16: input scale x beta is too large for TFLite's int16 softmax ({real}: its "
                         "int32 differences would overflow)")
    return m, s


def lut16(v: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """``generic_int16_table_lookup`` of int16 values (int64 arrays)."""
    v = np.asarray(v, np.int64)
    lut = np.asarray(lut, np.int64)
    index, offset = 256 + (v >> 7), v & 0x7F
    base = lut[index]
    slope = ((lut[index + 1] - base + 32768) % 65536) - 32768
    r = base + ((slope * offset + 64) >> 7)
    return ((r + 32768) % 65536) - 32768


# ---- qnn.softmax16 --------------------------------------------------------------------------------


def _rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x = as_tensor(args[0], "softmax16: input")
    if x.dtype != "int16":
        raise RelError(f"softmax16: input: expected int16, got {x}")
    if x.ndim == 0:
        raise RelError(f"softmax16: input: expected at least one dimension, got {x}")
    t = as_tensor(args[1], "softmax16: tables")
    if t.dtype != "int16" or t.shape != (2, LUT_SIZE):
        raise RelError(f"softmax16: tables: expected int16[2, {LUT_SIZE}], got {t}")
    axis = norm_axis(attrs["axis"], x.ndim, "softmax16: axis")
    n = x.shape[axis]
    if isinstance(n, int) and n > MAX_ROW:
        raise RelError(f"softmax16: rows of {n} values could overflow the int32 sum (at most {MAX_ROW})")
    if not (1 << 30) <= attrs["multiplier"] < (1 << 31) or not -31 <= attrs["shift"] <= 15:
        raise RelError(f"softmax16: multiplier {attrs['multiplier']} and shift {attrs['shift']} are not a "
                       "QuantizeMultiplier result TFLite's int16 softmax takes")
    return x


def _ref(args: list, attrs: Attrs) -> np.ndarray:
    x, tab = np.asarray(args[0]), np.asarray(args[1], np.int64)
    axis = norm_axis(attrs["axis"], x.ndim, "softmax16: axis")
    xi = np.moveaxis(x.astype(np.int64), axis, -1)
    d = xi - xi.max(-1, keepdims=True)
    scaled = multiply_by_quantized_multiplier(d, attrs["multiplier"], attrs["shift"])
    e = lut16(np.clip(scaled + 32767, -32768, 32767), tab[0])
    total = e.sum(-1, keepdims=True)
    clz = np.zeros(total.shape, np.int64)
    for k in range(1, 33):
        clz += total < (1 << (32 - k))
    shifted = ((total << (clz - 1)) + (1 << 13)) >> 14
    r = lut16(np.clip(shifted - ((1 << 15) + (1 << 16)), -32768, 32767), tab[1])
    rs = 31 - clz
    y = np.clip((e * r + (np.int64(1) << (rs - 1))) >> rs, 0, 32767)
    return np.moveaxis(y, -1, axis).astype(np.int16)


def _cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    return Cost(flops=16.0 * numel(out), bytes_read=numel(args[0]) * 2.0 + 4 * LUT_SIZE,
                bytes_written=numel(out) * 2.0)


defop("qnn.softmax16", rel=_rel, ref=_ref, cost=_cost, pattern=OpPattern.OPAQUE, num_inputs=2, attrs=(
    AttrSpec("axis", "int", -1, "the axis the softmax runs along"),
    AttrSpec("multiplier", "int", doc="QuantizeMultiplier(input scale x beta / (10 / 65535)): the multiplier"),
    AttrSpec("shift", "int", doc="... and its shift")),
      doc="int16 softmax as TensorFlow Lite (Micro) computes it (SoftmaxInt16: exp and 1/(1+x) tables of 513 "
          "int16 entries, interpolated); the output's scale is 1/32768, its zero point 0")


def _lut_expr(tab: Any, row: int, v: PrimExpr) -> PrimExpr:
    """``generic_int16_table_lookup`` of an int64 expression holding an int16 value."""
    def body(v: PrimExpr) -> PrimExpr:
        index = tir.cast("int32", tir.shift_right(v, _i64(7)) + _i64(256))
        base = _i64(tab[row, index])
        slope = _i64(tab[row, index + 1]) - base  # monotonic tables: the int16 difference does not wrap
        return base + tir.shift_right(slope * tir.bitwise_and(v, _i64(0x7F)) + _i64(64), _i64(7))
    return _bind(_i64(v), body)


def _clamp16(v: PrimExpr) -> PrimExpr:
    return tir.min(tir.max(v, _i64(-32768)), _i64(32767))


@defop.compute("qnn.softmax16")
def _softmax16(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.softmax16"
    x, tab = inputs
    shape, dtype = out_tensor_type(out_type, op, like=shape_of(x, op))
    axis = norm_axis(attrs["axis"], len(shape), "softmax16: axis")
    rows = Rows(op, x, shape, axis)
    red_shape, n, at = rows.shape, rows.n, rows.at
    mult, shift = attrs["multiplier"], attrs["shift"]
    m = rows.max()

    def exp_of(*i: PrimExpr) -> PrimExpr:
        d = tir.shift_left(_i64(x[i]) - _i64(m[at(i, 0)]), _i64(max(shift, 0)))
        scaled = _rdbpot(_srdhm(d, mult), max(-shift, 0))
        return tir.cast("int32", _lut_expr(tab, 0, _clamp16(scaled + _i64(32767))))

    e = make(op, shape, exp_of, "exp", inline=False)

    def row_sum(*i: PrimExpr) -> Any:
        r = te.reduce_axis((0, n), "k")
        return te.sum(e[at(i, r)], axis=[r])

    s = make(op, red_shape, row_sum, "sum", inline=False)
    clz = make(op, red_shape, lambda *i: tir.cast("int32", _clz(s[i])), "clz", inline=False)

    def recip(*i: PrimExpr) -> PrimExpr:
        sh = tir.shift_right(tir.shift_left(_i64(s[i]), _i64(clz[i]) - _i64(1)) + _i64(1 << 13), _i64(14))
        return tir.cast("int32", _lut_expr(tab, 1, _clamp16(sh - _i64((1 << 15) + (1 << 16)))))

    rc = make(op, red_shape, recip, "recip", inline=False)

    def body(*i: PrimExpr) -> PrimExpr:
        j = at(i, 0)
        rs = _i64(31) - _i64(clz[j])
        y = tir.shift_right(_i64(e[i]) * _i64(rc[j]) + tir.shift_left(_i64(1), rs - _i64(1)), rs)
        return tir.cast(dtype, tir.min(tir.max(y, _i64(0)), _i64(32767)))

    return make(op, shape, body)


# ---- ONNX: the same integer arithmetic in standard operators --------------------------------------


def _lut_onnx(g: OnnxInt, tab: str, v: str) -> str:
    """``generic_int16_table_lookup`` in int64 ONNX operators (``v + 32768`` is non-negative: the
    truncating Div and Mod are the floor shift and the mask)."""
    u = g.op("Add", v, g.c(32768))
    index = g.op("Div", u, g.c(128))
    base = g.i64(g.op("Gather", tab, index))
    slope = g.op("Sub", g.i64(g.op("Gather", tab, g.op("Add", index, g.c(1)))), base)
    prod = g.op("Add", g.op("Mul", slope, g.op("Mod", u, g.c(128))), g.c(64 + (1 << 23)))
    return g.op("Add", base, g.op("Sub", g.op("Div", prod, g.c(128)), g.c(1 << 16)))  # floor: offset by 2**23


def _softmax16_onnx(ex: Any) -> str:
    ex.need_opset(18, "qnn.softmax16 (ReduceMax with axes as an input)")
    g = OnnxInt(ex)
    x = ex.arg_type(0)
    a = ex.attrs
    axes = ex.ints([norm_axis(a["axis"], x.ndim, "softmax16: axis")], "axes")
    rows = [g.op("Gather", ex.ins[1], g.c(k), axis=0) for k in range(2)]
    xi = g.i64(ex.ins[0])
    d = g.op("Sub", xi, g.op("ReduceMax", xi, axes, keepdims=1))
    scaled = g.multiply_by_quantized_multiplier(d, g.c(a["multiplier"]), g.c(a["shift"]))
    e = _lut_onnx(g, rows[0], g.clamp(g.op("Add", scaled, g.c(32767)), -32768, 32767))
    total = g.op("ReduceSum", e, axes, keepdims=1)
    powers = ex.const(np.array([1 << k for k in range(1, 31)], np.int64), hint="powers")
    below = g.op("Cast", g.op("Less", g.op("Unsqueeze", total, ex.ints([-1], "last")), powers),
                 to=ex.elem_type("int64"))
    clz = g.op("Add", g.op("ReduceSum", below, ex.ints([-1], "last"), keepdims=0), g.c(1))
    shifted = g.op("Div", g.op("Add", g.op("Mul", total, g.pow2(g.op("Sub", clz, g.c(1)))), g.c(1 << 13)),
                   g.c(1 << 14))
    r = _lut_onnx(g, rows[1], g.clamp(g.op("Sub", shifted, g.c((1 << 15) + (1 << 16))), -32768, 32767))
    rs = g.op("Sub", g.c(31), clz)
    y = g.op("Div", g.op("Add", g.op("Mul", e, r), g.pow2(g.op("Sub", rs, g.c(1)))), g.pow2(rs))
    return g.op("Cast", g.clamp(y, 0, 32767), to=ex.elem_type("int16"))


defop.onnx("qnn.softmax16", OnnxMap("Softmax", convert=False, export=_softmax16_onnx))
