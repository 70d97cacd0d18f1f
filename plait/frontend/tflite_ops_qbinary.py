"""TFLite converters of quantized binary operators :mod:`plait.frontend.tflite_ops` hands over: int8 DIV,
as TensorFlow Lite Micro computes it (``micro/kernels/div.cc`` ``EvalQuantized``,
``reference_ops::DivElementwise`` in ``kernels/internal/reference/div.h``), bit for bit.

Per element, with ``v1 = x1 - z1`` and ``v2 = x2 - z2`` (both negated when ``v2 < 0``): the divisor's
reciprocal ``GetReciprocal(v2, 31)`` (a Q0.31 value from gemmlowp's Newton-Raphson
``one_over_one_plus_x_for_x_in_0_1``, and ``recip_shift = 31 - clz(v2)``), ``h =
CountLeadingSignBits(v1)``, ``q = SRDHM(v1 << h, reciprocal)``, then
``MultiplyByQuantizedMultiplierSmallerThanOneExp(q, m, shift - recip_shift - h) + zo`` clamped to the
fused activation's range; ``(m, shift)`` is ``QuantizeMultiplier(double(s1) / (double(s2) *
double(so)))`` (what the TensorFlow Lite Micro runtime computes; the source of August 2026 rounds the
ratio to float32 first, the runtime of October 2026 does not).

A divisor equal to its zero point (a zero divisor) is outside TFLite's contract (a ``DCHECK``); its
release build computes ``GetReciprocal(0)``, whose Newton iterations overflow and wrap, and the result is a
finite, saturating value of the sign opposite to ``v1``'s. That is reproduced too, as are shifts beyond 31
(``RoundingDivideByPOT`` of an exponent the C shifts take modulo 32 and 64 on x86, where TensorFlow Lite
Micro's Python runtime runs): the quotient of two int8 values is one of 65536, so the whole operator is a
table computed here, at import, and the model looks it up (``take``), 64 KiB of int8.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait.frontend.tflite_context import OpContext, Unsupported
from plait.frontend.tflite_quant import activation_range, per_tensor
from plait.op.qnn import fixed_point_multiplier
from plait.op.qnn_fixed import I32_MAX, sat_shl, srdhm, wrap32
from plait.relay.expr import Constant, Expr


def _clz32(v: np.ndarray) -> np.ndarray:
    """``CountLeadingZeros`` of uint32 values (32 for 0)."""
    v = np.asarray(v, np.int64) & 0xFFFFFFFF
    out = np.full(v.shape, 32, np.int64)
    for k in range(31, -1, -1):
        out = np.where(v >= (1 << k), np.minimum(out, 31 - k), out)
    return out


def _clsb32(v: np.ndarray) -> np.ndarray:
    """``CountLeadingSignBits`` of int32 values (``__builtin_clrsb``; 31 for 0)."""
    v = np.asarray(v, np.int64)
    return np.where(v >= 0, _clz32(v), _clz32(~v)) - 1


def _rdbpot(x: np.ndarray, e: np.ndarray) -> np.ndarray:
    """gemmlowp's int32 ``RoundingDivideByPOT`` as compiled for x86, for any exponent: the mask
    ``(1ll << e) - 1`` truncated to int32 (a 64-bit shift takes ``e`` modulo 64), ``x >> e`` modulo 32."""
    x, e = np.asarray(x, np.int64), np.asarray(e, np.int64)
    mask = wrap32((np.int64(1) << (e & 63)) - 1)
    return (x >> (e & 31)) + ((x & mask) > (mask >> 1) + (x < 0))


def _reciprocal(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``GetReciprocal(v, 31)`` of int32 values >= 0: (Q0.31 reciprocal, num_bits_over_unit). The fixed-point
    additions wrap, as gemmlowp's do (which only a zero ``v`` reaches)."""
    hp1 = _clz32(v)
    a = wrap32(((np.asarray(v, np.int64) << (hp1 & 31)) & 0xFFFFFFFF) - (1 << 31))
    s = a + I32_MAX
    half = np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))  # RoundingHalfSum(a, One)
    x = wrap32(1515870810 + srdhm(half, -1010580540))
    for _ in range(3):
        t = wrap32((1 << 29) - srdhm(half, x))
        x = wrap32(x + sat_shl(srdhm(x, t), 2))
    return sat_shl(x, 1), 31 - hp1


def div_int8(x1: Any, x2: Any, q1: tuple[float, int], q2: tuple[float, int], qo: tuple[float, int],
             bounds: tuple[int, int]) -> np.ndarray:
    """TensorFlow Lite Micro's int8 DIV of the values ``x1 / x2`` (numpy, broadcasting), as int64."""
    (s1, z1), (s2, z2), (so, zo) = q1, q2, qo
    f = np.float32
    real = np.float64(f(s1)) / (np.float64(f(s2)) * np.float64(f(so)))
    try:
        m, shift = (int(v[0]) for v in fixed_point_multiplier(np.array([real])))
    except ValueError as exc:
        raise Unsupported(f"DIV: {exc}") from None
    v1, v2 = np.broadcast_arrays(np.asarray(x1, np.int64) - z1, np.asarray(x2, np.int64) - z2)
    v1, v2 = np.where(v2 < 0, -v1, v1), np.abs(v2)
    inv, recip_shift = _reciprocal(v2)
    h = _clsb32(v1)
    quotient = srdhm(wrap32(v1 << h), inv)
    r = _rdbpot(srdhm(quotient, m), -(shift - recip_shift - h)) + zo
    return np.clip(r, *bounds)


def div(cx: OpContext, a: Expr, b: Expr) -> Expr:
    """int8 DIV: ``take(table, (a + 128) * 256 + (b + 128))`` of the 256 x 256 quotients."""
    t1, t2, y = cx.tensor(0), cx.tensor(1), cx.out()
    if not t1.dtype == t2.dtype == y.dtype == "int8":
        raise Unsupported(f"a quantized DIV of {t1.type_name} and {t2.type_name} to {y.type_name} is not "
                          "supported (TensorFlow Lite Micro's is int8 only)")
    q = [per_tensor(t, w) for t, w in ((t1, "input 0"), (t2, "input 1"), (y, "the output"))]
    bounds = activation_range(cx.option("FusedActivationFunction", 0), q[2][0], q[2][1], "int8")
    v = np.arange(-128, 128, dtype=np.int64)
    table = div_int8(v[:, None], v[None, :], q[0], q[1], q[2], bounds).astype(np.int8).reshape(-1)

    def offset(e: Expr, scale: int) -> Expr:
        e = cx.call("add", cx.call("cast", e, dtype="int32"), np.array(128, np.int32))
        return cx.call("multiply", e, np.array(scale, np.int32)) if scale != 1 else e

    index = cx.call("add", offset(a, 256), offset(b, 1))
    return cx.call("take", Constant(table), index, axis=0)
