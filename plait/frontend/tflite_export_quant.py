"""TFLite exporter converters of quantized (int8) operators: the integer patterns the TFLite importer
builds (:mod:`plait.frontend.tflite_ops`, :mod:`plait.frontend.tflite_ops_nn`) written back as
TFLite's int8 operators, and ``qnn.quantize`` / ``qnn.dequantize``.

- ``qnn.requantize`` (fixed point) is the root of a pattern: of ``[add(] qnn.conv2d [, bias)]`` a
  CONV_2D or DEPTHWISE_CONV_2D, of ``[add(] qnn.dense [, bias)]`` a FULLY_CONNECTED, of the sum or
  difference of two int32 rescalings an ADD or SUB, of a product of offset inputs a MUL, of an offset
  input a QUANTIZE (int8 to int8). Its clamp is the fused activation whose range
  (``CalculateActivationRangeQuantized``) it is.
- Weight scales: TFLite stores the filter's float32 scales, plait the fixed-point multipliers of
  ``input_scale * weight_scale / output_scale``. :func:`weight_scales` finds, for each channel, the
  float32 weight scale whose multiplier (computed as TFLite computes it) is exactly the model's, so
  that the file read back has the same multipliers.
- ``qnn.fixed_softmax`` is SOFTMAX (beta 1: the table must be TFLite's for the input scale), output
  scale 1/256 and zero point -128; ``qnn.avg_pool2d`` AVERAGE_POOL_2D; ``qnn.lookup`` the activation its
  call's ``op_type`` names (RELU, RELU6, LOGISTIC, TANH, HARD_SWISH, ABS, ...) when the table is the one
  the importer computes for the tensors' scales (LEAKY_RELU, whose alpha is not recorded, is refused).
"""

from __future__ import annotations

import numpy as np

from plait.frontend.tflite_export_core import QUANT_DTYPES, TV, Exporter, NoMapping, converter, ttype
from plait.frontend.tflite_export_ops import (
    conv_weights, emit_conv, emit_fc, emit_pool, emit_softmax, hint, is_op, operands, unary,
)
from plait.frontend.tflite_quant import clamp_attrs, multipliers
from plait.relay.expr import Call, Constant, Expr


def weight_scales(xs: float, ys: float, mult: np.ndarray, shift: np.ndarray, span: int = 8) -> np.ndarray:
    """float32 scales ``w`` with ``multipliers(xs, w, ys) == (mult, shift)`` channel by channel."""
    mult, shift = np.asarray(mult, np.int64).reshape(-1), np.asarray(shift, np.int64).reshape(-1)
    eff = mult.astype(np.float64) * np.exp2(shift.astype(np.float64) - 31)
    guess = (eff * np.float64(np.float32(ys)) / np.float64(np.float32(xs))).astype(np.float32)
    out = np.empty(guess.shape, np.float32)
    for k, g in enumerate(guess):
        cands = [g]
        up, down = g, g
        for _ in range(span):
            up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(0))
            cands += [up, down]
        m, s = multipliers(xs, np.array(cands, np.float32), ys)
        hit = np.nonzero((m.astype(np.int64) == mult[k]) & (s.astype(np.int64) == shift[k]))[0]
        if not hit.size:
            raise NoMapping(f"no float32 weight scale of channel {k} gives the multiplier {mult[k]} with shift "
                            f"{shift[k]} for input scale {xs} and output scale {ys}")
        out[k] = cands[int(hit[0])]
    return out


def fused_code(c: Call, scale: float, zp: int, dtype: str) -> int:
    """The fused activation whose quantized range is the clamp of ``c`` (clamp_min / clamp_max)."""
    want = {"clamp_min": c.attrs.get("clamp_min"), "clamp_max": c.attrs.get("clamp_max")}
    for code in (0, 1, 3, 2):  # NONE, RELU, RELU6, RELU_N1_TO_1
        if clamp_attrs(code, scale, zp, dtype) == want:
            return code
    raise NoMapping(f"its clamp [{want['clamp_min']}, {want['clamp_max']}] is the range of no TFLite fused "
                    f"activation at scale {scale} and zero point {zp}")


def _const(e: Expr, what: str) -> np.ndarray:
    if not isinstance(e, Constant):
        raise NoMapping(f"{what} is not a constant")
    return e.data


def _split_bias(acc: Expr) -> tuple[Expr, np.ndarray | None]:
    if is_op(acc, "add"):
        for a, b in ((acc.args[0], acc.args[1]), (acc.args[1], acc.args[0])):
            if isinstance(b, Constant) and is_op(a, "qnn.conv2d", "qnn.dense"):
                return a, b.data
    return acc, None


def _offset_input(e: Expr) -> tuple[Expr, int] | None:
    """``x`` and ``zp`` of ``cast(x, int32)`` or ``subtract(cast(x, int32), zp)``."""
    zp = 0
    if is_op(e, "subtract") and isinstance(e.args[1], Constant) and is_op(e.args[0], "cast"):
        zp, e = int(e.args[1].data), e.args[0]
    if is_op(e, "cast") and e.attrs["dtype"] == "int32" and ttype(e.args[0]).dtype in QUANT_DTYPES:
        return e.args[0], zp
    return None


def _rescaled_input(e: Expr) -> tuple[Expr, int] | None:
    """``x`` and ``zp`` of ADD's input rescaling ``requantize((x - zp) * 2**20, ..., out_dtype=int32)``."""
    if not (is_op(e, "qnn.requantize") and e.attrs["out_dtype"] == "int32" and is_op(e.args[0], "multiply")):
        return None
    return _offset_input(e.args[0].args[0])


@converter("qnn.requantize")
def _requantize(ex: Exporter, c: Call, fused: int) -> TV:
    a = c.attrs
    if a["mode"] != "fixed":
        raise NoMapping("a float-mode requantize (ONNX Runtime's arithmetic; TFLite's is fixed point: build the "
                        "model with -requantize=fixed)")
    if a["out_dtype"] not in ("int8", "uint8"):
        raise NoMapping(f"a requantize to {a['out_dtype']} outside the TFLite importer's ADD pattern")
    acc = c.args[0]
    inner, bias = _split_bias(acc)
    if is_op(inner, "qnn.conv2d", "qnn.dense"):
        return _product(ex, c, inner, bias)
    if is_op(acc, "add", "subtract"):
        ra, rb = _rescaled_input(acc.args[0]), _rescaled_input(acc.args[1])
        if ra and rb:
            return _elementwise(ex, c, "ADD" if acc.op.name == "add" else "SUB", (ra, rb))
    if is_op(acc, "multiply"):
        oa, ob = _offset_input(acc.args[0]), _offset_input(acc.args[1])
        if oa and ob:
            return _elementwise(ex, c, "MUL", (oa, ob))
    off = _offset_input(acc)
    if off is not None:
        return _elementwise(ex, c, "QUANTIZE", (off,))
    shown = getattr(getattr(acc, "op", None), "name", type(acc).__name__)
    raise NoMapping(f"a requantize of {shown}, not one of the TFLite importer's quantized patterns")


def _product(ex: Exporter, c: Call, inner: Call, bias: np.ndarray | None) -> TV:
    conv = inner.op.name == "qnn.conv2d"
    x = ex.nhwc(inner.args[0], hint(inner)) if conv else ex.plain(inner.args[0])
    xs, xz = ex.in_quant(x, c, 0, "the data")
    if xz != inner.attrs["input_zero_point"]:
        raise NoMapping(f"the data's zero point {inner.attrs['input_zero_point']} is not its tensor's ({xz})")
    ys, yz = ex.out_quant(c, c.attrs["zero_point"])
    w = _const(inner.args[1], "the weights")
    wz = int(inner.attrs["kernel_zero_point"])
    if w.dtype == np.int8 and wz != 0:
        raise NoMapping(f"int8 weights with zero point {wz} (TFLite's are symmetric)")
    mult, shift = _const(c.args[1], "the multiplier"), _const(c.args[2], "the shift")
    o = w.shape[0]
    if mult.size not in (1, o) or (mult.size > 1 and c.attrs["axis"] != 1):
        raise NoMapping(f"{mult.size} multipliers along axis {c.attrs['axis']} for {o} output channels")
    ws = weight_scales(xs, ys, mult, shift)
    qdim = conv_weights(inner, w, ex.w.tensors[x].shape[-1])[3] if conv else 0
    if ws.size == 1:
        wq, bq = (ws[0], wz), (np.float32(xs) * ws[0], 0)
    else:
        wq = (ws, np.full(o, wz, np.int64), qdim)
        bq = (np.float32(xs) * ws, np.zeros(o, np.int64), 0)
    if bias is not None and (bias.dtype != np.int32 or bias.size != o):
        raise NoMapping(f"the bias is {bias.dtype}{list(bias.shape)}, expected int32[{o}]")
    code = fused_code(c, ys, yz, c.attrs["out_dtype"])
    quant = (wq, bq, (ys, yz))
    if conv:
        return emit_conv(ex, inner, c, bias, code, quant)
    return emit_fc(ex, inner, c, w, bias, code, quant)


def _elementwise(ex: Exporter, c: Call, kind: str, ins: tuple[tuple[Expr, int], ...]) -> TV:
    tensors, nchw = operands(ex, tuple(x for x, _ in ins))
    for k, ((_, zp), t) in enumerate(zip(ins, tensors)):
        got = ex.in_quant(t, c, k)
        if got[1] != zp:
            raise NoMapping(f"input {k}'s offset {zp} is not its zero point {got[1]}")
    ys, yz = ex.out_quant(c, c.attrs["zero_point"])
    code = fused_code(c, ys, yz, c.attrs["out_dtype"])
    out = ex.out_tensor(c, nchw=nchw, quant=(ys, yz))
    if kind == "QUANTIZE":
        if code:
            raise NoMapping("a clamped QUANTIZE")
        ex.w.op(kind, tensors, [out])
    else:
        ex.w.op(kind, tensors, [out], FusedActivationFunction=code)
    return TV(out, nchw)


@converter("qnn.fixed_softmax")
def _fixed_softmax(ex: Exporter, c: Call, fused: int) -> TV:
    from plait.op.qnn_fixed import softmax_exp_table

    tv = ex.value(c.args[0])
    xs, _ = ex.in_quant(tv.index, c, 0)
    table = _const(c.args[1], "the exp table")
    if not np.array_equal(table, softmax_exp_table(xs, 1.0)):
        raise NoMapping(f"its exp table is not TFLite's for input scale {xs} and beta 1")
    return emit_softmax(ex, c, "SOFTMAX", (1 / 256, -128), {"Beta": 1.0})


@converter("qnn.fixed_log_softmax")
def _fixed_log_softmax(ex: Exporter, c: Call, fused: int) -> TV:
    from plait.op.qnn_log_softmax import OUTPUT_SCALE, OUTPUT_ZERO_POINT, log_softmax_params

    tv = ex.value(c.args[0])
    xs, _ = ex.in_quant(tv.index, c, 0)
    table, attrs = log_softmax_params(xs)
    if not np.array_equal(_const(c.args[1], "the table"), table) or any(c.attrs[k] != v for k, v in attrs.items()):
        raise NoMapping(f"its table and scalings are not TFLite's for input scale {xs}")
    return emit_softmax(ex, c, "LOG_SOFTMAX", (OUTPUT_SCALE, OUTPUT_ZERO_POINT), {})


@converter("qnn.l2_normalize")
def _l2_normalize(ex: Exporter, c: Call, fused: int) -> TV:
    tv = ex.value(c.args[0])
    _, zp = ex.in_quant(tv.index, c, 0)
    if zp != c.attrs["input_zero_point"]:
        raise NoMapping(f"its input zero point {c.attrs['input_zero_point']} is not its input's ({zp})")
    return emit_softmax(ex, c, "L2_NORMALIZATION", (1 / 128, 0), {})


@converter("qnn.lookup")
def _lookup(ex: Exporter, c: Call, fused: int) -> TV:
    """A quantized activation the importer read as a table (meta ``op_type``), written back as that
    builtin when its table is the one the importer computes for the tensors' scales."""
    from plait.frontend import tflite_ops_qelem as qelem

    kind = str(c.meta.get("op_type", "")) if c.meta else ""
    if kind not in qelem.table_operators() or kind == "LEAKY_RELU":  # LEAKY_RELU: its alpha is not recorded
        raise NoMapping(f"a table lookup that is not one of TFLite's quantized activations without options "
                        f"(its op_type is {kind or 'not recorded'})")
    tv = ex.value(c.args[0])
    dtype = ttype(c).dtype
    qin, qout = ex.in_quant(tv.index, c, 0), ex.out_quant(c)
    if not np.array_equal(_const(c.args[1], "the table"), qelem.table(kind, dtype, qin, qout)):
        raise NoMapping(f"its table is not TFLite's {kind} for input {qin} and output {qout}")
    out = ex.out_tensor(c, nchw=tv.nchw, quant=qout)
    ex.w.op(kind, [tv.index], [out])
    return TV(out, tv.nchw)


@converter("qnn.avg_pool2d")
def _avg_pool(ex: Exporter, c: Call, fused: int) -> TV:
    x = ex.nhwc(c.args[0], hint(c))
    s, z = ex.in_quant(x, c, 0)
    return emit_pool(ex, c, fused_code(c, s, z, ttype(c).dtype), "AVERAGE_POOL_2D")


@converter("qnn.dequantize")
def _dequantize(ex: Exporter, c: Call, fused: int) -> TV:
    scale, zp = _const(c.args[1], "the scale"), _const(c.args[2], "the zero point")
    if scale.size != 1 or zp.size != 1:
        raise NoMapping("a per-axis DEQUANTIZE (an activation's quantization is per tensor in TFLite)")
    tv = ex.value(c.args[0])
    q = ex.quant(tv.index)
    want = (float(np.float32(scale.reshape(()))), int(zp.reshape(())))
    if q is None:
        ex.set_quant(tv.index, want)
    elif (float(np.float32(q[0])), q[1]) != want:
        raise NoMapping(f"its scale and zero point {want} are not its input tensor's {q}")
    out = ex.out_tensor(c, nchw=tv.nchw)
    ex.w.op("DEQUANTIZE", [tv.index], [out])
    return TV(out, tv.nchw)


@converter("qnn.quantize")
def _quantize(ex: Exporter, c: Call, fused: int) -> TV:
    scale, zp = _const(c.args[1], "the scale"), _const(c.args[2], "the zero point")
    if scale.size != 1 or zp.size != 1:
        raise NoMapping("a per-axis QUANTIZE")
    tv = ex.value(c.args[0])
    out = ex.out_tensor(c, nchw=tv.nchw, quant=(float(scale.reshape(())), int(zp.reshape(()))))
    ex.w.op("QUANTIZE", [tv.index], [out])
    return TV(out, tv.nchw)


def _float_quantize(c: Call) -> Expr | None:
    """``v`` of the TFLite importer's QUANTIZE: ``cast(clip(add(multiply(sign(q), floor(add(abs(q), 0.5))),
    zp)), int8)`` with ``q = cast(divide(v, scale), float64)``."""
    e = c.args[0]
    for name in ("clip", "add", "multiply", "sign", "cast", "divide"):
        if not is_op(e, name):
            return None
        e = e.args[0]
    return e


@converter("cast")
def _cast(ex: Exporter, c: Call, fused: int) -> TV:
    out_dtype, in_dtype = ttype(c).dtype, ttype(c.args[0]).dtype
    if out_dtype in QUANT_DTYPES:
        v = _float_quantize(c)
        if v is None:
            raise NoMapping(f"a cast to {out_dtype} outside the TFLite importer's QUANTIZE pattern")
        tv = ex.value(v)
        out = ex.out_tensor(c, nchw=tv.nchw, quant=ex.out_quant(c))
        ex.w.op("QUANTIZE", [tv.index], [out])
        return TV(out, tv.nchw)
    if in_dtype in QUANT_DTYPES:
        raise NoMapping(f"a cast of {in_dtype} values outside the TFLite importer's quantized patterns")
    return unary(ex, c, "CAST")
