"""Quantization operators: ``qnn.quantize``, ``qnn.dequantize`` and ``qnn.requantize`` (ONNX Runtime's
arithmetic, and TensorFlow Lite's fixed-point requantization).

Scales and zero points are tensor arguments (scalar, ``[1]``, or ``[C]`` along ``axis``): TE has no
constant tables, so a per-channel value is a small buffer; the importer and the QDQ pass give
constants, which stay compile-time constants in the artifact.

- ``qnn.quantize(x, scale, zero_point)``: what ONNX Runtime's MLAS computes, ``q = x / scale`` in
  float32, clamped to ``[qmin - zp, qmax - zp]`` (NaN -> the low end, as SSE's MAXPS does), rounded
  half to even, plus ``zp``; the result dtype is the zero point's (int8, uint8, int16, uint16, int32).
- ``qnn.dequantize(x, scale, zero_point)``: ``float32(x - zp) * scale``, rounded to the scale's dtype.
- ``qnn.requantize(acc, scale)`` (``mode="float"``): an int32 accumulator to int8/uint8 as MLAS's
  ``MlasRequantizeOutput`` does: ``float32(acc) * scale`` (scale = the float32
  ``in_scale * w_scale / out_scale`` computed in that order, as QLinearConv does), clamped to
  ``[lo - zp, hi - zp]``, rounded half to even, plus ``zp``. ``qnn.requantize(acc, multiplier,
  shift)`` (``mode="fixed"``): TensorFlow Lite / CMSIS-NN's ``MultiplyByQuantizedMultiplier``
  (saturating rounding doubling high multiply, then a rounding divide by a power of two; no float
  at all), with multipliers and shifts from :func:`fixed_point_multiplier`. ``clamp_min`` /
  ``clamp_max`` narrow the output range (a fused Relu / Clip in the quantized domain).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from plait.ir.attrs import Attrs
from plait.op._common import (
    AttrSpec, Cost, Family, OnnxMap, OpPattern, RelError, TensorType, Type, as_tensor, numel, norm_axis, tensor_bytes,
)
from plait.op._compute import make, out_tensor_type, shape_of, tir, up
from plait.op.qnn_fixed import rdbpot, srdhm
from plait.tir.dtype import int_range
from plait.tir.expr import PrimExpr

defop = Family()

QUANT_DTYPES = ("int8", "uint8", "int16", "uint16", "int32")
SCALE_DTYPES = ("float32", "float16")

# ---- shared helpers -------------------------------------------------------------------------------


def _param_type(t: Type, x: TensorType, axis: int, what: str, dtypes: tuple[str, ...],
                block: int = 0) -> TensorType:
    """A scale / zero point argument: scalar, [1], or [C] with C = x.shape[axis]; blocked
    (``block`` > 0): the input's rank, ``ceil(D / block)`` along ``axis``, the input's dims elsewhere."""
    p = as_tensor(t, what)
    if p.dtype not in dtypes:
        raise RelError(f"{what}: expected {' or '.join(dtypes)}, got {p}")
    if block:
        return _block_param_type(p, x, axis, what, block)
    if p.ndim > 1:
        raise RelError(f"{what}: expected a scalar or a 1-D tensor, got {p}")
    if p.ndim == 1 and p.shape[0] != 1:
        if x.ndim == 0:
            raise RelError(f"{what}: a scalar input takes a scalar {what.split(': ')[-1]}, got {p}")
        c = x.shape[norm_axis(axis, x.ndim, what + ": axis")]
        if isinstance(c, int) and isinstance(p.shape[0], int) and p.shape[0] != c:
            raise RelError(f"{what}: expected {c} values (dim {axis} of the input), got {p}")
    return p


def _block_param_type(p: TensorType, x: TensorType, axis: int, what: str, block: int) -> TensorType:
    """A blocked scale / zero point: rank of the input, dim ``axis`` = ceil(D / block), others equal."""
    if block < 0:
        raise RelError(f"{what}: block_size must be >= 0, got {block}")
    if p.ndim != x.ndim or x.ndim == 0:
        raise RelError(f"{what}: blocked quantization expects the input's rank {x.ndim} (>= 1), got {p}")
    ax = norm_axis(axis, x.ndim, what + ": axis")
    for d, (pd, xd) in enumerate(zip(p.shape, x.shape)):
        if not (isinstance(pd, int) and isinstance(xd, int)):
            continue
        want = -(-xd // block) if d == ax else xd
        if pd != want:
            how = f"ceil({xd} / block_size {block})" if d == ax else "the input's"
            raise RelError(f"{what}: dim {d}: expected {want} ({how}), got {p}")
    return p


def _unblock(p: np.ndarray, shape: tuple[int, ...], axis: int, block: int) -> np.ndarray:
    """A blocked parameter repeated ``block`` times along ``axis`` and cut to the input's ``shape``."""
    ax = axis + len(shape) if axis < 0 else axis
    return np.take(np.repeat(np.asarray(p), block, axis=ax), np.arange(shape[ax]), axis=ax)


def _bcast(p: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A scale / zero point array shaped to broadcast along ``axis`` of a rank-``ndim`` value."""
    p = np.asarray(p).reshape(-1)
    if p.size == 1 or ndim == 0:
        return p.reshape(())
    axis = axis + ndim if axis < 0 else axis
    return p.reshape((-1,) + (1,) * (ndim - 1 - axis))


def _param_load(p: Any, idx: tuple[PrimExpr, ...], axis: int, block: int = 0) -> PrimExpr:
    """The TE load of a per-tensor, per-axis or blocked parameter at output index ``idx``."""
    shape = shape_of(p, "qnn")
    if block:
        ax = axis + len(idx) if axis < 0 else axis
        return p[tuple(tir.floordiv(v, block) if d == ax else v for d, v in enumerate(idx))]
    if not shape:
        return p[()]
    if shape[0] == 1:
        return p[0]
    return p[idx[axis + len(idx) if axis < 0 else axis]]


def _qcost(flops: float):
    def cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
        return Cost(flops=flops * numel(out), bytes_read=sum(tensor_bytes(a) for a in args),
                    bytes_written=tensor_bytes(out))

    return cost


AXIS = AttrSpec("axis", "int", 1, "the axis a 1-D scale / zero point runs along")
BLOCK = AttrSpec("block_size", "int", 0, "blocked quantization: scale / zero point of the input's rank, "
                 "element i along axis reads index i // block_size (0: per tensor or per axis)")

# ---- quantize / dequantize ------------------------------------------------------------------------


def _quantize_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x = as_tensor(args[0], "quantize: input")
    if x.dtype not in ("float32", "float16", "int32"):
        raise RelError(f"quantize: input: expected float32, float16 or int32, got {x}")
    b = attrs["block_size"]
    _param_type(args[1], x, attrs["axis"], "quantize: scale", SCALE_DTYPES, b)
    zp = _param_type(args[2], x, attrs["axis"], "quantize: zero_point", QUANT_DTYPES, b)
    return TensorType(x.shape, zp.dtype)


def _params(shape: tuple, scale: np.ndarray, zp: np.ndarray, axis: int,
            block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The scale (float32) and zero point (int64) shaped to broadcast against a value of ``shape``:
    per tensor, per axis, or per block of ``block_size`` along ``axis``."""
    if block_size:
        return (_unblock(scale, shape, axis, block_size).astype(np.float32),
                _unblock(zp, shape, axis, block_size).astype(np.int64))
    return _bcast(scale, len(shape), axis).astype(np.float32), _bcast(zp, len(shape), axis).astype(np.int64)


def quantize_array(x: np.ndarray, scale: Any, zp: Any, axis: int = 1, block_size: int = 0) -> np.ndarray:
    """``qnn.quantize``'s arithmetic (MLAS's ``MlasQuantizeLinear``) on numpy values; the result has
    the zero point's dtype."""
    x, scale, zp = np.asarray(x), np.asarray(scale), np.asarray(zp)
    out = zp.dtype
    lo, hi = int_range(out.name)
    s, z = _params(x.shape, scale, zp, axis, block_size)
    with np.errstate(all="ignore"):
        v = x.astype(np.float32) / s
    if out == np.int32:  # bounds beyond float32's exact integers: round, then clamp in float64
        r = np.rint(v).astype(np.float64) + z
        return np.where(np.isnan(r), lo, np.clip(r, lo, hi)).astype(out)
    flo, fhi = (lo - z).astype(np.float32), (hi - z).astype(np.float32)
    v = np.where(np.isnan(v), flo, np.minimum(np.maximum(v, flo), fhi))
    return (np.rint(v).astype(np.int64) + z).astype(out)


def _quantize_ref(args: list, attrs: Attrs) -> np.ndarray:
    return quantize_array(args[0], args[1], args[2], attrs["axis"], attrs["block_size"])


def _dequantize_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x = as_tensor(args[0], "dequantize: input")
    if x.dtype not in QUANT_DTYPES:
        raise RelError(f"dequantize: input: expected {', '.join(QUANT_DTYPES)}, got {x}")
    b = attrs["block_size"]
    s = _param_type(args[1], x, attrs["axis"], "dequantize: scale", SCALE_DTYPES, b)
    zp = _param_type(args[2], x, attrs["axis"], "dequantize: zero_point", QUANT_DTYPES, b)
    if zp.dtype != x.dtype:
        raise RelError(f"dequantize: zero_point: expected {x.dtype} (the input's dtype), got {zp}")
    return TensorType(x.shape, s.dtype)


def _dequantize_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, scale, zp = (np.asarray(a) for a in args)
    s, z = _params(x.shape, scale, zp, attrs["axis"], attrs["block_size"])
    return ((x.astype(np.int64) - z).astype(np.float32) * s).astype(scale.dtype)


def _qdq_onnx(op_type: str, dtype_arg: int) -> Any:
    def export(ex: Any) -> str:
        if ex.arg_type(dtype_arg).dtype in ("int16", "uint16"):
            ex.need_opset(21, f"{op_type} of {ex.arg_type(dtype_arg).dtype}")
        if ex.attrs["block_size"]:
            ex.need_opset(21, f"blocked {op_type}")
            return ex.node(op_type, ex.ins, axis=ex.attrs["axis"], block_size=ex.attrs["block_size"])
        return ex.node(op_type, ex.ins, axis=ex.attrs["axis"])

    return export


defop("qnn.quantize", rel=_quantize_rel, ref=_quantize_ref, cost=_qcost(4.0), pattern=OpPattern.BROADCAST, num_inputs=3, attrs=(AXIS, BLOCK),
      doc="x / scale rounded half to even, plus zero_point, saturated (ONNX QuantizeLinear as ONNX Runtime computes it)",
      onnx=(OnnxMap("QuantizeLinear", convert=False, export=_qdq_onnx("QuantizeLinear", 2)),))
defop("qnn.dequantize", rel=_dequantize_rel, ref=_dequantize_ref, cost=_qcost(2.0), pattern=OpPattern.BROADCAST,
      num_inputs=3, attrs=(AXIS, BLOCK),
      doc="(x - zero_point) * scale in float32 (ONNX DequantizeLinear)",
      onnx=(OnnxMap("DequantizeLinear", convert=False, export=_qdq_onnx("DequantizeLinear", 0)),))

# ---- requantize -----------------------------------------------------------------------------------


def fixed_point_multiplier(scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """TensorFlow Lite's ``QuantizeMultiplier`` of each (float32) scale, taken as a double:
    ``scale = multiplier / 2**31 * 2**shift`` with ``multiplier`` in [2**30, 2**31) (0 for a zero
    scale, or one below 2**-31). Returns int32 arrays (multiplier, shift)."""
    flat = np.asarray(scale, dtype=np.float64).reshape(-1)
    mult, shift = np.zeros(flat.shape, np.int32), np.zeros(flat.shape, np.int32)
    for k, s in enumerate(flat):
        if not math.isfinite(s) or s < 0:
            raise ValueError(f"requantize: scale {s} is not a finite value >= 0")
        if s == 0:
            continue
        q, e = math.frexp(s)
        m = math.floor(q * (1 << 31) + 0.5)  # std::round: half away from zero (q > 0)
        if m == 1 << 31:
            m, e = m // 2, e + 1
        if e < -31:
            m, e = 0, 0
        if e > 30:
            raise ValueError(f"requantize: scale {s} is too large for a fixed-point multiplier")
        mult[k], shift[k] = m, e
    return mult.reshape(np.shape(scale)), shift.reshape(np.shape(scale))


def _clamp_range(attrs: Attrs, out: str) -> tuple[int, int]:
    lo, hi = int_range(out)
    if attrs["clamp_min"] is not None:
        lo = max(lo, attrs["clamp_min"])
    if attrs["clamp_max"] is not None:
        hi = min(hi, attrs["clamp_max"])
    return lo, hi


def _requantize_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    acc = as_tensor(args[0], "requantize: input")
    if acc.dtype != "int32":
        raise RelError(f"requantize: input: expected int32, got {acc}")
    out, mode = attrs["out_dtype"], attrs["mode"]
    if out not in ("int8", "uint8", "int16", "uint16", "int32"):
        raise RelError(f"requantize: out_dtype: expected int8, uint8, int16, uint16 or int32, got {out}")
    if out == "int32" and mode != "fixed":
        raise RelError("requantize: out_dtype int32 needs mode 'fixed' (a TFLite rescaling)")
    lo, hi = int_range(out)
    if not lo <= attrs["zero_point"] <= hi:
        raise RelError(f"requantize: zero_point: expected a value in [{lo}, {hi}], got {attrs['zero_point']}")
    clo, chi = _clamp_range(attrs, out)
    if clo > chi:
        raise RelError(f"requantize: clamp_min {attrs['clamp_min']} is above clamp_max {attrs['clamp_max']}")
    if mode == "float":
        if len(args) != 2:
            raise RelError(f"requantize: mode 'float' takes (input, scale), got {len(args)} arguments")
        _param_type(args[1], acc, attrs["axis"], "requantize: scale", ("float32",))
    else:
        if len(args) != 3:
            raise RelError(f"requantize: mode 'fixed' takes (input, multiplier, shift), got {len(args)} arguments")
        _param_type(args[1], acc, attrs["axis"], "requantize: multiplier", ("int32",))
        _param_type(args[2], acc, attrs["axis"], "requantize: shift", ("int32",))
    return TensorType(acc.shape, out)


def _requantize_ref(args: list, attrs: Attrs) -> np.ndarray:
    acc = np.asarray(args[0])
    out, zp, axis = attrs["out_dtype"], attrs["zero_point"], attrs["axis"]
    lo, hi = _clamp_range(attrs, out)
    if attrs["mode"] == "float":
        s = _bcast(args[1], acc.ndim, axis).astype(np.float32)
        v = acc.astype(np.float32) * s
        v = np.minimum(np.maximum(v, np.float32(lo - zp)), np.float32(hi - zp))
        return (np.rint(v).astype(np.int64) + zp).astype(out)
    m = _bcast(args[1], acc.ndim, axis).astype(np.int64)
    sh = _bcast(args[2], acc.ndim, axis).astype(np.int64)
    x = np.clip(acc.astype(np.int64) << np.maximum(sh, 0), -(1 << 31), (1 << 31) - 1)
    q = rdbpot(srdhm(x, m), np.maximum(-sh, 0))
    return np.clip(q + zp, lo, hi).astype(out)


defop("qnn.requantize", rel=_requantize_rel, ref=_requantize_ref, cost=_qcost(6.0), pattern=OpPattern.BROADCAST,
      num_inputs=(2, 3), attrs=(
    AttrSpec("zero_point", "int", 0, "the output's zero point"),
    AttrSpec("out_dtype", "dtype", "int8", "int8, uint8, int16 or uint16 (int32 in fixed mode: TFLite's "
             "rescaling of an int32 value, as ADD's inputs)"),
    AXIS,
    AttrSpec("mode", "str", "float", "float: float32 scale, round half to even (ONNX Runtime); fixed: int32 "
             "multiplier and shift (TensorFlow Lite)", choices=("float", "fixed")),
    AttrSpec("clamp_min", "int", None, "lowest output value (a fused Relu / Clip)", optional=True),
    AttrSpec("clamp_max", "int", None, "highest output value (a fused Clip)", optional=True),
), doc="int32 accumulator -> int8/uint8 (float: MLAS's MlasRequantizeOutput; fixed: TFLite's "
       "MultiplyByQuantizedMultiplier)")


# ---- TE computes ----------------------------------------------------------------------------------


def _nearest_int(v: PrimExpr, dtype: str) -> PrimExpr:
    """A float32 value already inside ``dtype``'s range, rounded half to even and converted."""
    return tir.cast(dtype, tir.nearbyint(v))


@defop.compute("qnn.quantize")
def _quantize(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.quantize"
    x, scale, zp = inputs
    shape, out = out_tensor_type(out_type, op, like=shape_of(x, op))
    lo, hi = int_range(out)
    axis, b = attrs["axis"], attrs["block_size"]
    wide = out == "int32"  # int32 bounds are not float32 values: clamp after rounding, in float64

    def body(*i: PrimExpr) -> PrimExpr:
        s = up(_param_load(scale, i, axis, b))
        v = tir.cast("float32", x[i]) / s
        if wide:
            r = tir.cast("float64", tir.nearbyint(v)) + tir.cast("float64", _param_load(zp, i, axis, b))
            return tir.cast(out, tir.min(tir.max(r, float(lo)), float(hi)))
        z = tir.cast("float32", _param_load(zp, i, axis, b))
        flo, fhi = float(lo) - z, float(hi) - z
        v = tir.min(tir.max(v, flo), fhi)  # TIR's max(NaN, lo) is lo: NaN gives qmin (MAXPS)
        return tir.cast(out, tir.cast("int32", tir.nearbyint(v)) + tir.cast("int32", _param_load(zp, i, axis, b)))

    return make(op, shape, body)


@defop.compute("qnn.dequantize")
def _dequantize(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.dequantize"
    x, scale, zp = inputs
    shape, out = out_tensor_type(out_type, op, like=shape_of(x, op))
    axis, b = attrs["axis"], attrs["block_size"]

    def body(*i: PrimExpr) -> PrimExpr:
        d = tir.cast("int64", x[i]) - tir.cast("int64", _param_load(zp, i, axis, b))
        return tir.cast(out, tir.cast("float32", d) * up(_param_load(scale, i, axis, b)))

    return make(op, shape, body)


def _fixed_point(acc: PrimExpr, mult: PrimExpr, shift: PrimExpr) -> PrimExpr:
    """TFLite's MultiplyByQuantizedMultiplier in int64 arithmetic (the left shift saturates to int32)."""
    i64 = "int64"
    zero = tir.const(0, "int32")
    left = tir.cast(i64, tir.max(shift, zero))
    right = tir.cast(i64, tir.max(zero - shift, zero))
    x = tir.shift_left(tir.cast(i64, acc), left)
    x = tir.min(tir.max(x, tir.const(-(1 << 31), i64)), tir.const((1 << 31) - 1, i64))
    ab = x * tir.cast(i64, mult)
    nudge = tir.select(ab >= tir.const(0, i64), tir.const(1 << 30, i64), tir.const(1 - (1 << 30), i64))
    high = tir.truncdiv(ab + nudge, tir.const(1 << 31, i64))
    mask = tir.shift_left(tir.const(1, i64), right) - tir.const(1, i64)
    rem = tir.bitwise_and(high, mask)
    threshold = tir.shift_right(mask, tir.const(1, i64)) + tir.cast(i64, high < tir.const(0, i64))
    return tir.shift_right(high, right) + tir.cast(i64, rem > threshold)


@defop.compute("qnn.requantize")
def _requantize(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.requantize"
    acc = inputs[0]
    shape, out = out_tensor_type(out_type, op, like=shape_of(acc, op))
    zp, axis = attrs["zero_point"], attrs["axis"]
    lo, hi = _clamp_range(attrs, out)

    if attrs["mode"] == "float":
        scale = inputs[1]

        def body(*i: PrimExpr) -> PrimExpr:
            v = tir.cast("float32", acc[i]) * _param_load(scale, i, axis)
            v = tir.min(tir.max(v, float(lo - zp)), float(hi - zp))
            return tir.cast(out, _nearest_int(v, "int32") + zp)
    else:
        mult, shift = inputs[1], inputs[2]

        def body(*i: PrimExpr) -> PrimExpr:
            q = _fixed_point(acc[i], _param_load(mult, i, axis), _param_load(shift, i, axis)) + zp
            return tir.cast(out, tir.min(tir.max(q, tir.const(lo, "int64")), tir.const(hi, "int64")))

    return make(op, shape, body)


# ---- ONNX export ----------------------------------------------------------------------------------


def _per_channel_onnx(ex: Any, i: int) -> str:
    """Input ``i`` (a scalar or a vector along ``axis``) reshaped to broadcast against input 0."""
    nd, n, a = ex.arg_type(0).ndim, ex.arg_type(i).shape, ex.attrs
    if n and n[0] != 1 and nd > 1:
        axis = a["axis"] + nd if a["axis"] < 0 else a["axis"]
        return ex.node("Reshape", [ex.ins[i], ex.ints([-1] + [1] * (nd - 1 - axis), "shape")])
    return ex.ins[i]


def _fixed_requantize_onnx(ex: Any) -> str:
    """fixed mode: ``MultiplyByQuantizedMultiplier`` in int64 operators (:mod:`plait.op._onnx_int`), plus
    the zero point, clamped, cast."""
    from plait.op._onnx_int import OnnxInt

    g, a = OnnxInt(ex), ex.attrs
    mult, shift = (g.i64(_per_channel_onnx(ex, i)) for i in (1, 2))
    q = g.op("Add", g.multiply_by_quantized_multiplier(g.i64(ex.ins[0]), mult, shift), g.c(a["zero_point"]))
    lo, hi = _clamp_range(a, a["out_dtype"])
    return g.op("Cast", g.clamp(q, lo, hi), to=ex.elem_type(a["out_dtype"]))


def _requantize_onnx(ex: Any) -> str:
    """float mode: Cast, Mul by the scale (per channel reshaped), QuantizeLinear with scale 1 (which
    clamps, rounds half to even and adds the zero point), then Clip for a fused clamp; fixed mode: its
    integer arithmetic (:func:`_fixed_requantize_onnx`)."""
    a = ex.attrs
    if a["mode"] != "float":
        return _fixed_requantize_onnx(ex)
    scale = _per_channel_onnx(ex, 1)
    v = ex.node("Mul", [ex.node("Cast", [ex.ins[0]], to=ex.elem_type("float32")), scale])
    zp = ex.const(np.array(a["zero_point"], dtype=a["out_dtype"]), hint="zero_point")
    y = ex.node("QuantizeLinear", [v, ex.const(np.array(1.0, np.float32), hint="one"), zp])
    if a["clamp_min"] is None and a["clamp_max"] is None:
        return y
    lo, hi = _clamp_range(a, a["out_dtype"])
    return ex.node("Clip", [y, ex.const(np.array(lo, dtype=a["out_dtype"]), hint="lo"),
                            ex.const(np.array(hi, dtype=a["out_dtype"]), hint="hi")])


# exported as a composition ending in QuantizeLinear (imported by the frontend's QLinear* converters)
defop.onnx("qnn.requantize", OnnxMap("QuantizeLinear", convert=False, export=_requantize_onnx))
