"""TFLite converters of quantized elementwise operators: int8 (TensorFlow Lite Micro's kernels, bit for
bit) and uint8 (LiteRT's) activations as 256-entry tables (``qnn.lookup``).

A quantized unary operator maps each of the 256 input values to one output value, so it is computed
here, at import, exactly as TFLite's kernel computes it (its parameters from the tensors' scales and
zero points, as its ``Prepare`` derives them), and the model looks the table up:

- **RELU, RELU_N1_TO_1, RELU_0_TO_1** (``ReluQuantized`` / ``ReluX``): ``zo + MultiplyByQuantizedMultiplier(x -
  zi)`` by ``QuantizeMultiplier(double(si) / double(so))``, clamped to ``zo + roundf(bound / so)``. Where
  LiteRT is the reference (uint8, and RELU_N1_TO_1 and RELU_0_TO_1, which TensorFlow Lite Micro does not
  have), the scale ratio is a float32 division and the multiplication rounds once, as LiteRT's build
  does (``TFLITE_SINGLE_ROUNDING``).
- **RELU6** as TensorFlow Lite Micro computes it (``Relu6Quantized``): ``x`` clamped to ``[zi, zi +
  round(6 / si)]``, in the input's quantization (the output's scale is not read); uint8 as LiteRT does,
  the RELU form with bounds 0 and 6.
- **LEAKY_RELU** (``QuantizeLeakyRelu``): the identity or the alpha multiplier by the sign of ``x - zi``
  (``double(si) * double(alpha) / double(so)``, ``double(si) / double(so)``; a negative alpha gives a
  negative multiplier).
- **LOGISTIC** (``reference_integer_ops::Logistic``): ``x - zi`` rescaled to Q4.27 by
  ``frexp(si * 2**27)``, saturated outside the input radius, gemmlowp's fixed-point ``logistic``,
  ``RoundingDivideByPOT(., 23)`` + the output zero point (which TFLite requires to be the lowest value).
- **TANH** (``reference_integer_ops::Tanh``): the same Q4.27 input, gemmlowp's ``tanh``,
  ``RoundingDivideByPOT(., 24)`` clamped (output scale 1/128, zero point 0 as TFLite requires).
- **ELU** (int8; TensorFlow Lite Micro's own float32 table): ``round(elu(si * (x - zi)) / so) + zo``;
  **EXP** the same table of ``exp`` (LiteRT's; TensorFlow Lite Micro has no quantized EXP).
- **RSQRT** (int8, ``RsqrtEvalQuantized``): TFLite's fixed-point inverse square root of ``x - zi``
  (``GetInvSqrtQuantizedMultiplierExp``), rescaled by ``1 / (sqrt(si) * so)``.
- **SQRT, NEG, LOG, GELU** (int8, LiteRT's: TensorFlow Lite Micro has none): LOG and GELU float32
  tables as EXP's; SQRT ``trunc(sqrt(si * (x - zi)) / so) + zo``; NEG the stored value negated.
- **ABS** (``AbsEvalQuantized``): ``|x - zi|``, rescaled by ``si / so`` when the scales differ, plus ``zo``.
- **HARD_SWISH** (``reference_ops::HardSwish``, int8 and uint8 alike): int16 fixed point, the input at
  ``scale / 128``, a "relu-ish" factor in [0, 1] from ``hires / (3 / 32768)``, the product
  (``SaturatingDoublingHighMul``) shifted to the output scale.

int16 (16x8 models; TensorFlow Lite Micro's int16 kernels, :data:`INT16`): the table holds all 65536
values and is looked up with ``take`` at ``x + 32768``. RELU (zero points 0, as ``ReluPrepare`` requires),
RELU6 and LEAKY_RELU compute as for int8. LOGISTIC and TANH (``reference_integer_ops::Logistic`` /
``Tanh`` for int16; zero points 0 and output scale 1/32768 required): the input rescaled to 1/(3 * 4096)
by ``(x * multiplier + round) >> shift`` (a power-of-two scale 2**-12, or 2**-11 for TANH: multiplier
``3 << shift``; else ``scale * 12288`` doubled past 16383.5, truncated), then TFLite's 256-entry
``sigmoid_table_uint16`` interpolated at ``|x| >> 9`` (TANH: ``>> 8``) and folded by the sign. ABS as for
int8. HARD_SWISH, ELU, RSQRT, EXP, SQRT, NEG, LOG and GELU of int16 are refused.

:data:`QUANT` holds these forms of operators whose float form :mod:`plait.frontend.tflite_ops` converts
(it calls :func:`convert` for a quantized input); :data:`CONVERTERS` the operators converted here in
every dtype (none yet)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from plait.frontend.tflite_context import OpContext, Unsupported, Val
from plait.frontend.tflite_quant import per_tensor, round_away
from plait.op.qnn import fixed_point_multiplier
from plait.op.qnn_fixed import logistic, multiply_by_quantized_multiplier, rdbpot, tanh
from plait.op.qnn_norm import inv_sqrt
from plait.tir.dtype import int_range

CONVERTERS: dict[str, Callable[[OpContext], Any]] = {}
QUANT: dict[str, Callable[[OpContext], Any]] = {}
TableFn = Callable[["_Op", np.ndarray, tuple[float, int], tuple[float, int], str], np.ndarray]
_TABLES: dict[str, TableFn] = {}
_ONLY = {op: ("int8",) for op in ("ABS", "ELU", "RSQRT", "EXP", "SQRT", "NEG", "LOG", "GELU")}  # no uint8 forms


def convert(cx: OpContext) -> Any:
    """The quantized form of ``cx``'s operator."""
    fn = QUANT.get(cx.op.opcode)
    if fn is None:
        t = cx.tensor(0)
        raise Unsupported(f"{cx.op.opcode} of {t.type_name if t else 'this input'} is not supported yet")
    return fn(cx)


def _table_op(*ops: str) -> Callable[[TableFn], TableFn]:
    def deco(fn: TableFn) -> TableFn:
        for op in ops:
            _TABLES[op] = fn
            QUANT[op] = _lookup
        return fn
    return deco


@dataclass(frozen=True)
class _Op:
    """What a table function reads of its operator: the builtin's name and its options."""

    opcode: str
    option: Callable[[str, Any], Any] = lambda name, default=None: default


def table(opcode: str, dtype: str, qin: tuple[float, int], qout: tuple[float, int],
          option: Callable[[str, Any], Any] | None = None) -> np.ndarray:
    """The 256 outputs (``dtype``) of quantized ``opcode`` for input and output ``(scale, zero_point)``
    (the exporter checks a table against it)."""
    lo, hi = int_range(dtype)
    v = np.arange(lo, hi + 1, dtype=np.int64)
    op = _Op(opcode, option) if option else _Op(opcode)
    return np.clip(_TABLES[opcode](op, v, qin, qout, dtype), lo, hi).astype(dtype)


def table_operators() -> tuple[str, ...]:
    return tuple(_TABLES)


def _lookup(cx: OpContext) -> Val:
    """The operator as ``qnn.lookup`` of its 256-entry table (the input's layout kept)."""
    cx.need(1, 1)
    x, y = cx.tensor(0), cx.out()
    dtypes = _ONLY.get(cx.op.opcode, ("int8", "uint8")) + (("int16",) if cx.op.opcode in INT16 else ())
    if x.dtype not in dtypes or y.dtype != x.dtype:
        raise Unsupported(f"{cx.op.opcode} of {x.type_name} to {y.type_name} is not supported "
                          f"({' and '.join([', '.join(dtypes[:-1]), dtypes[-1]] if len(dtypes) > 1 else dtypes)} "
                          "to itself is)")
    qi, qo = per_tensor(x, "the input"), per_tensor(y, "the output")
    val = cx.val(0)
    tab = table(cx.op.opcode, x.dtype, qi, qo, cx.option)
    if x.dtype == "int16":  # a [65536] table: take at x + 32768
        index = cx.call("add", cx.call("cast", val.expr, dtype="int32"), np.array(32768, np.int32))
        return Val(cx.call("take", tab, index, axis=0), val.nchw)
    return Val(cx.call("qnn.lookup", val.expr, tab), val.nchw)


def _quantize_multiplier(real: float, what: str) -> tuple[int, int]:
    """``QuantizeMultiplier`` of a double, negative ones too (a negative LEAKY_RELU alpha)."""
    try:
        m, s = fixed_point_multiplier(np.array([abs(real)]))
    except ValueError as exc:
        raise Unsupported(f"{what}: {exc}") from None
    m, s = int(m[0]), int(s[0])
    if real < 0 and m == 1 << 30 and math.frexp(abs(real))[1] == s - 1:  # q rounded to -1: kept as -2**31
        return -(1 << 31), s - 1
    return (-m if real < 0 else m), s


NOT_IN_TFLM = ("RELU_N1_TO_1", "RELU_0_TO_1", "EXP", "SQRT", "NEG", "LOG", "GELU")  # LiteRT is their reference
INT16 = ("RELU", "RELU6", "LEAKY_RELU", "LOGISTIC", "TANH", "ABS")  # TensorFlow Lite Micro's int16 forms


def _symmetric16(op: _Op, qi: tuple[float, int], qo: tuple[float, int]) -> None:
    if qi[1] != 0 or qo[1] != 0:
        raise Unsupported(f"{op.opcode} of INT16 needs zero points 0 (TFLite requires them), got input {qi[1]} "
                          f"and output {qo[1]}")
_RELU_BOUNDS = {"RELU": (0.0, None), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0), "RELU6": (0.0, 6.0)}


@_table_op("RELU", "RELU_N1_TO_1", "RELU_0_TO_1")
def _relu(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    (si, zi), (so, zo) = qi, qo
    if dtype == "int16":
        _symmetric16(op, qi, qo)
    litert = dtype == "uint8" or op.opcode in NOT_IN_TFLM
    real = float(np.float32(si) / np.float32(so)) if litert else si / so  # LiteRT divides in float32
    m, s = _quantize_multiplier(real, "the input / output scale")
    lo, hi = int_range(dtype)
    a, b = _RELU_BOUNDS[op.opcode]

    def bound(f: float) -> int:  # roundf(f / scale) in float32
        return zo + int(round_away(np.float32(f) / np.float32(so)))

    y = zo + multiply_by_quantized_multiplier(v - zi, m, s, single_rounding=litert)
    return np.clip(y, max(lo, bound(a)), hi if b is None else min(hi, bound(b)))


@_table_op("RELU6")
def _relu6(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    if dtype == "uint8":  # LiteRT's: the output's quantization, as RELU_N1_TO_1
        return _relu(op, v, qi, qo, dtype)
    si, zi = qi
    lo, hi = int_range(dtype)
    six = min(max(zi + int(round_away(np.float32(6.0) / np.float32(si))), lo), hi)  # FloatToQuantizedType
    return np.clip(v, zi, six)


@_table_op("LEAKY_RELU")
def _leaky_relu(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    (si, zi), (so, zo) = qi, qo
    alpha = float(np.float32(op.option("Alpha", 0.0)))
    ma, sa = _quantize_multiplier(si * alpha / so, "alpha x scale")  # doubles of the float32 values
    mi, s_i = _quantize_multiplier(si / so, "the input / output scale")
    d, single = v - zi, dtype == "uint8"
    return zo + np.where(d >= 0, multiply_by_quantized_multiplier(d, mi, s_i, single),
                         multiply_by_quantized_multiplier(d, ma, sa, single))


def _q4_input(op: _Op, v: np.ndarray, si: float, zi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x - zi rescaled to Q4.27, below the radius, above it) as LOGISTIC and TANH prepare it."""
    q, shift = math.frexp(float(si) * float(1 << 27))
    if shift < 0:
        raise Unsupported(f"the input scale {si} is too small for TFLite's {op.opcode} (below 2**-28)")
    mult = math.floor(q * (1 << 31) + 0.5)
    mult = mult - (1 << 32) if mult >= 1 << 31 else mult  # the int32 cast of 2**31 wraps
    radius = math.floor(15.0 * (1 << 27) / (1 << shift))  # CalculateInputRadius(4, shift, 31)
    d = v - zi
    return multiply_by_quantized_multiplier(d, mult, shift), d <= -radius, d >= radius


@_table_op("LOGISTIC")
def _logistic(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    if dtype == "int16":
        return _logistic16(op, v, qi, qo)
    lo, hi = int_range(dtype)
    if qo[1] != lo:
        raise Unsupported(f"LOGISTIC of {dtype}: the output zero point {qo[1]} is not {lo} (TFLite requires it)")
    a, below, above = _q4_input(op, v, *qi)
    y = rdbpot(logistic(np.where(below | above, 0, a), 4), 23) + lo
    return np.where(below, lo, np.where(above, hi, y))


@_table_op("TANH")
def _tanh(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    if dtype == "int16":
        return _tanh16(op, v, qi, qo)
    lo, hi = int_range(dtype)
    mid = lo + 128  # int8: 0; uint8: 128 (LiteRT's legacy kernel)
    a, below, above = _q4_input(op, v, *qi)
    y = rdbpot(tanh(np.where(below | above, 0, a), 4), 24) + mid
    return np.where(below, lo, np.where(above, hi, y))


@_table_op("ABS")
def _abs(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    (si, zi), (so, zo) = qi, qo
    if dtype == "int16" and (zi or zo):
        raise Unsupported(f"an int16 ABS needs zero points 0 (TensorFlow Lite Micro's is symmetric); got {zi} and {zo}")
    value = np.abs(v - zi)
    if np.float32(si) == np.float32(so):  # TensorFlow Lite Micro rescales only when the scales differ
        return value + zo
    m, s = _quantize_multiplier(si / so, "the input / output scale")
    return multiply_by_quantized_multiplier(value, m, s, single_rounding=dtype == "uint8") + zo


def _expf(d: np.ndarray) -> np.ndarray:
    """``expf`` of float32 values: the correctly rounded float32 of the double ``exp``, as glibc's is."""
    with np.errstate(over="ignore"):
        return np.array([np.float32(math.exp(min(float(x), 709.0))) for x in d], np.float32)


def _float_table(t: np.ndarray, so: float, zo: int) -> np.ndarray:
    """``LUTPopulate``'s last step: ``TfLiteRound(t * (1 / so)) + zo`` in float32 (clamped by the caller)."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = round_away(t * (np.float32(1.0) / np.float32(so)))
    return np.clip(np.nan_to_num(r, nan=0.0), -1e9, 1e9).astype(np.int64) + zo


def _dequantized(v: np.ndarray, si: float, zi: int) -> np.ndarray:
    return np.float32(si) * (v - zi).astype(np.float32)


@_table_op("ELU")
def _elu(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    """TensorFlow Lite Micro's float32 table: ``round(elu(si * (x - zi)) * (1 / so)) + zo``."""
    d = _dequantized(v, *qi)
    return _float_table(np.where(d < 0, _expf(d) - np.float32(1.0), d).astype(np.float32), *qo)


@_table_op("EXP")
def _exp(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    """LiteRT's float32 table (TensorFlow Lite Micro has no quantized EXP): ``round(exp(si * (x - zi)) *
    (1 / so)) + zo``."""
    return _float_table(_expf(_dequantized(v, *qi)), *qo)


@_table_op("LOG")
def _log(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    """LiteRT's float32 table (TensorFlow Lite Micro has no quantized LOG): ``round(log(si * (x - zi)) *
    (1 / so)) + zo``; the lowest value at and below ``zi`` (``-inf`` and NaN, which LiteRT stores so)."""
    d = _dequantized(v, *qi)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = _float_table(np.log(np.maximum(d, np.float32(np.finfo(np.float32).tiny))), *qo)
    return np.where(d > 0, t, int_range(dtype)[0])


@_table_op("SQRT")
def _sqrt(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    """LiteRT's (TensorFlow Lite Micro has no quantized SQRT): ``trunc(sqrt(si * (x - zi)) / so) + zo`` in
    float32, truncated toward zero. LiteRT stops with an error on an input below ``zi``; here it gives ``zo``."""
    (so, zo) = qo
    d = np.maximum(_dequantized(v, *qi), np.float32(0))
    return np.trunc(np.sqrt(d) / np.float32(so)).astype(np.int64) + zo


@_table_op("NEG")
def _neg(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    """LiteRT's int8 NEG (TensorFlow Lite Micro has none): the stored value negated, wrapping (-128 stays
    -128), whatever the scales and zero points."""
    return (-v + 128) % 256 - 128


@_table_op("GELU")
def _gelu(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    """LiteRT's float32 table (``LUTPopulate``; TensorFlow Lite Micro has no GELU): ``0.5 x (1 + erf(x /
    sqrt 2))``, or with ``Approximate`` ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x**3)))``."""
    f = np.float32
    d = _dequantized(v, *qi)
    if op.option("Approximate", False):
        inner = f(math.sqrt(2 / math.pi)) * (d + f(0.044715) * d * d * d)
        return _float_table(f(0.5) * d * (f(1) + np.tanh(inner.astype(f))), *qo)
    erf = np.array([f(math.erf(float(z))) for z in (d * f(1 / math.sqrt(2))).astype(f)], f)
    return _float_table(f(0.5) * d * (f(1) + erf), *qo)


@_table_op("RSQRT")
def _rsqrt(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    """``RsqrtEvalQuantized``: ``1 / sqrt(x - zi)`` through the fixed-point inverse square root, rescaled by
    ``1 / (sqrt(si) * so)``; the largest value at ``x == zi``. Inputs below ``zi`` are an error in
    TensorFlow Lite Micro; here they give the largest value too."""
    (si, zi), (so, zo) = qi, qo
    om, os_ = _quantize_multiplier(1.0 / (math.sqrt(si) * so), "1 / (sqrt(input scale) x output scale)")
    lo, hi = int_range(dtype)
    out = []
    for d in (v - zi).tolist():
        if d <= 0:
            out.append(hi)
            continue
        m, s = (int(t) for t in inv_sqrt(d))
        data = int(multiply_by_quantized_multiplier(np.int64(1), m, s + 20))
        out.append(int(multiply_by_quantized_multiplier(np.int64(data), om, os_ - 20)) + zo)
    return np.array(out, np.int64)


# ---- HARD_SWISH: reference_ops::HardSwish, int16 fixed point --------------------------------------


def _srdhm16(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp's int16 ``SaturatingRoundingDoublingHighMul``."""
    ab = a.astype(np.int64) * b
    v = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    q = np.where(v >= 0, v // (1 << 15), -((-v) // (1 << 15)))
    return np.where((a == -32768) & (b == -32768), 32767, q)


def _sdhm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``SaturatingDoublingHighMul``: the high half of 2ab truncated toward zero (SQDMULH)."""
    ab = a.astype(np.int64) * b
    q = np.where(ab >= 0, ab // (1 << 15), -((-ab) // (1 << 15)))
    return np.where((a == -32768) & (b == -32768), 32767, q)


def _sat_shl16(x: np.ndarray, e: int) -> np.ndarray:
    return np.clip(x * (1 << e), -32768, 32767)


def _int16_multiplier(real: float) -> tuple[int, int]:
    """``QuantizeMultiplier`` then ``DownScaleInt32ToInt16Multiplier``."""
    m, e = _quantize_multiplier(real, "a HARD_SWISH multiplier")
    return (32767 if m >= (1 << 31) - 1 - (1 << 15) else (m + (1 << 15)) >> 16), e


@_table_op("HARD_SWISH")
def _hard_swish(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], dtype: str) -> np.ndarray:
    (si, zi), (so, zo) = qi, qo
    hires = np.float32(np.float32(1.0 / 128.0) * np.float32(si))
    out_m, out_e = _int16_multiplier(float(np.float32(hires / np.float32(so))))
    relu_m, relu_e = _int16_multiplier(float(np.float32(hires / np.float32(3.0 / 32768.0))))
    if out_e > 0 or out_e < -15 or relu_e < -15:
        raise Unsupported(f"HARD_SWISH: the scales give shifts TFLite's kernel does not take ({out_e}, {relu_e})")
    hires_v = (v - zi) * 128
    pre_out = _srdhm16(hires_v, out_m)
    r = hires_v
    if relu_e > 0:
        r = _sat_shl16(r, relu_e - 1)
    r = _srdhm16(r, relu_m)
    if relu_e > 0:
        r = _sat_shl16(r, 1)
    if relu_e < 0:
        r = rdbpot(r, -relu_e)
    r = (r + (1 << 15)) >> 1
    return rdbpot(_sdhm16(r, pre_out), -out_e) + zo


# ---- int16 LOGISTIC and TANH: reference_integer_ops::Logistic / Tanh (int16), sigmoid table ----------

# TFLite's sigmoid_table_uint16 (common.h): sigmoid(i / 24) in 0.16 fixed point, for |x| (tanh(x) is
# 2 sigmoid(2x) - 1), as successive differences from 32768
_SIGMOID_DIFFS = (
    "0 683 682 680 680 676 674 670 667 661 657 651 645 638 632 624 616 608 599 591 581 572 562 552 542 532 "
    "521 511 500 489 478 467 456 446 434 424 412 402 391 381 370 360 349 340 329 320 310 300 291 283 273 264 "
    "256 248 240 231 224 216 209 202 195 188 182 175 169 162 158 151 146 140 136 130 126 121 117 112 108 104 "
    "100 96 93 89 86 82 79 76 74 70 68 65 62 60 58 56 53 51 49 48 45 44 42 40 38 38 35 34 33 32 30 29 28 27 "
    "26 24 24 23 22 20 21 19 18 18 17 17 15 15 15 14 13 13 12 12 11 11 11 10 9 9 9 9 8 7 8 7 7 7 6 6 6 5 6 5 "
    "5 5 4 4 5 4 3 4 4 3 3 3 3 3 3 3 2 3 2 2 2 3 1 2 2 2 2 1 2 1 2 1 1 2 1 1 1 1 1 1 1 1 1 1 0 1 1 1 0 1 1 0 "
    "1 0 1 0 1 0 1 0 0 1 0 1 0 0 1 0 0 0 1 0 0 0 1 0 0 0 0 1 0 0 0 0 0 1 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 1")
SIGMOID_TABLE = np.cumsum(np.array([int(t) for t in _SIGMOID_DIFFS.split()], np.int64)) + 32768


def _checked_log2(x: float) -> tuple[bool, int]:
    """``CheckedLog2`` (float32): whether ``log2(x)`` is within 1e-3 of an integer, and that integer."""
    f = np.float32
    lg = f(f(np.log(f(x))) * f(f(1.0) / f(np.log(f(2.0)))))
    r = f(round_away(lg))
    return bool(abs(f(lg - r)) < f(1e-3)), int(r)


def _q16_input(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int], pot_shifts: tuple[int, ...]
               ) -> np.ndarray:
    """The int16 input rescaled to 1 / (3 * 4096) as ``CalculateArithmeticOpDataLogistic`` / TANH's Prepare
    and Eval compute it: ``(x * multiplier + round) >> left_shift``."""
    _symmetric16(op, qi, qo)
    ok, lg = _checked_log2(qo[0])
    if not ok or lg != -15:
        raise Unsupported(f"{op.opcode} of INT16 needs the output scale 1/32768 (TFLite requires it), got {qo[0]}")
    pot, lg = _checked_log2(qi[0])
    shift = 12 + lg
    if pot and shift in pot_shifts:
        mult, shift = 3 << shift, 0
    else:
        m, shift = float(np.float32(qi[0])) * 4096.0 * 3.0, 0
        while m <= 32767.0 / 2.0 and shift <= 30:
            shift, m = shift + 1, m * 2.0
        mult = int(m)
    if mult > 32767:
        raise Unsupported(f"the input scale {qi[0]} is too large for TFLite's int16 {op.opcode} (multiplier {mult})")
    rnd = 1 << (shift - 1) if shift > 0 else 0
    return (v * mult + rnd) >> shift


def _wrap16(r: np.ndarray) -> np.ndarray:
    return ((r + 32768) % 65536) - 32768


def _interp(a: np.ndarray, bits: int, saturated: int) -> np.ndarray:
    """``(ua << bits) + ut * (ub - ua)`` of the sigmoid table at ``|x| >> bits``, ``saturated`` past it."""
    uh = a >> bits
    k = np.minimum(uh, 254)
    ua, ub = SIGMOID_TABLE[k], SIGMOID_TABLE[k + 1]
    return np.where(uh >= 255, saturated, (ua << bits) + (a & ((1 << bits) - 1)) * (ub - ua))


def _logistic16(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int]) -> np.ndarray:
    x = _q16_input(op, v, qi, qo, (0,))
    r = _interp(np.abs(x), 9, 0x7FFF << 10)
    r = np.where(x >= 0, r + (1 << 9), (1 << 25) - r + (1 << 9) - 1)
    return _wrap16(r >> 10)


def _tanh16(op: _Op, v: np.ndarray, qi: tuple[float, int], qo: tuple[float, int]) -> np.ndarray:
    x = _q16_input(op, v, qi, qo, (0, 1))
    r = _interp(np.abs(x), 8, 0xFFFF << 8)
    r = np.where(x >= 0, r - (1 << 23) + (1 << 7), -r + (1 << 23) + (1 << 7) - 1)
    return _wrap16(r >> 8)
