"""Hybrid TFLite operators: float32 activations with int8 (or legacy uint8) constant weights
("dynamic-range quantization"), computed as LiteRT's default interpreter computes them, bit for bit.

LiteRT quantizes the float input to 8 bits at run time, sums integer products exactly and scales the
sum back to float. Which kernel does it depends on the operator: the default interpreter
(``lit.Interpreter(model_content=buf)``) applies the XNNPACK delegate (tflite/delegates/xnnpack/
xnnpack_delegate.cc), which takes some hybrid operators and leaves the others to TFLite's kernels.
(``OpResolverType.BUILTIN_REF`` runs TFLite's kernels only: conv.cc ``EvalHybrid`` quantizes a CONV_2D
with per-tensor weights symmetrically instead, which this module does not follow.)

- **CONV_2D and FULLY_CONNECTED with int8 weights: XNNPACK** (``qd8-f32-qc8w``; a per-tensor filter
  scale is repeated per output channel). The input is quantized asymmetrically, per image for a
  convolution, per row of the ``[rows, K]`` input for a fully connected layer, and per pixel for a 1x1
  stride-1 ungrouped unpadded convolution with ``C + O > 2``, which XNNPACK's subgraph rewrites to a
  fully connected layer (src/subgraph/convolution-2d.c). The parameters are
  ``xnn_qd8_asymmetric_quantization_params`` (src/xnnpack/quantization.h), every step in float32::

      rmin = min(0, min x)   rmax = max(0, max x)   m = 255 / (rmax - rmin)   (1 when rmin == rmax)
      zp   = lrintf(clamp((-128 + rmin*m) + (127 + rmax*m) > 0 ? -128 - rmin*m : 127 - rmax*m, -128, 127))
      q    = sat8(lrintf(x * m) + zp)            (f32-qs8-vcvt: cvtps rounds half to even)
      y    = fma(float(sum w * (q - zp)) * (1 / m), w_scale[o], bias[o]),  then the fused clamp

  Padding is a real 0, i.e. ``q = zp``. ``AsymmetricQuantizeInputs`` is ignored.
- **DEPTHWISE_CONV_2D: TFLite's kernel** (XNNPACK refuses a float input with an int8 filter):
  depthwise_conv.cc ``EvalHybridPerChannel`` (optimized/integer_ops/depthwise_conv_hybrid.h), per
  image, with ``AsymmetricQuantizeFloats`` as LiteRT's x86 build runs it (optimized/
  neon_tensor_utils.cc ``NeonAsymmetricQuantizeFloats`` through NEON_2_SSE)::

      rmin, rmax as above (float32);  s = double(rmax - rmin) / 255     (sf = 1, zp = 0 when rmin == rmax)
      zp = clamp(round(128 + |rmin/s| < 127 + |rmax/s| ? -128 - rmin/s : 127 - rmax/s))   (double, half away)
      sf = float(s);  inv = float(1 / double(sf));  v = float(x * inv)
      q  = sat8(zp + trunc(float(v + (v < 0 ? -0.5 : 0.5))))   (``RoundToNearest`` without ARMv8's vcvta)
      y  = float(float(float(sum w * (q - zp)) * w_scale[o]) * sf) + bias[o]
           (``* sf`` then ``* w_scale[o]`` on the last ``O mod 4`` channels, after the 4-wide loop)

  LiteRT rounds the last ``n mod 8`` values of each image with ``TfLiteRound`` instead; the two differ
  only when ``|v| = 0.5 - 2**-25``, which plait rounds as the vector loop does. The filter needs one
  scale per output channel: with a single one LiteRT reads the others past its end.
- **uint8 weights (the legacy format): TFLite's kernels** (XNNPACK takes only int8): conv.cc
  ``EvalHybrid`` and fully_connected.cc ``EvalHybridDense`` read the bytes as int8 and ignore the zero
  point. The input is quantized per image / row by ``SymmetricQuantizeFloats`` (``range = max|x|``,
  ``sf = range / 127``, ``q = clamp(RoundToNearest(x * (127 / range)), -127, 127)``, in float32) or,
  for FULLY_CONNECTED with ``AsymmetricQuantizeInputs``, as the depthwise kernel does;
  ``y = float(float(sum w * (q - zp)) * float(sf * w_scale)) + bias``. (LiteRT's x86 dot product,
  ``maddubs`` of ``|q|`` and ``sign(w, q)``, gets a byte 128, i.e. -128, times a negative ``q`` wrong;
  plait computes the true product.)

Integer sums are ``qnn.conv2d`` / ``qnn.dense`` of ``q`` with zero points 0, less ``zp * sum(w[o])``;
a padded convolution quantizes its input padded with float zeros (the range includes 0 already, and 0
quantizes to ``zp``). A float32 product that LiteRT rounds before a sum is widened to float64 before it
(the float32 sum is the float64 sum rounded to float32), so that gcc's FMA contraction cannot fuse
them; XNNPACK's own FMA is a float64 product (exact) and sum rounded to float32, which differs from
one rounding only when the float64 sum is a float32 tie. Cases LiteRT runs with yet another kernel
(TANH and the other non-clamping activations, no bias on a convolution, per-channel scales along
another dimension, nonzero int8 weight zero points) or reads out of bounds are :class:`Unsupported`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait.frontend.tflite_context import OpContext, Unsupported, Val
from plait.frontend.tflite_ops import float_activation
from plait.frontend.tflite_quant import ACTIVATIONS, qparams
from plait.relay.expr import Expr

HYBRID_WEIGHTS = ("int8", "uint8")
CLAMPS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6")  # what XNNPACK's output range expresses
F32, F64 = np.float32, np.float64


def _f(v: float) -> np.ndarray:
    return np.array(v, F32)


def _d(v: float) -> np.ndarray:
    return np.array(v, F64)


# ---- checks -------------------------------------------------------------------------------------


def in_hybrid_model(sg: Any) -> bool:
    """Whether the subgraph has a hybrid operator (float32 input, int8 or uint8 constant weights)."""
    for op in sg.ops:
        if op.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED") and len(op.inputs) > 1 \
                and min(op.inputs[:2]) >= 0:
            x, w = sg.tensors[op.inputs[0]], sg.tensors[op.inputs[1]]
            if x.dtype == "float32" and w.dtype in HYBRID_WEIGHTS and w.data is not None:
                return True
    return False


def _weight_scales(cx: OpContext, o: int, axis: int, per_channel_only: bool) -> np.ndarray:
    """The weights' float32 scale of each of the ``o`` output channels (int8 zero points must be 0; a
    uint8 one is ignored, as LiteRT does)."""
    w = cx.tensor(1)
    q = qparams(w, "the hybrid weights")
    if w.dtype == "int8" and np.any(q.zero_point != 0):
        raise Unsupported(f"hybrid weights with zero points {sorted(set(q.zero_point.tolist()))} are not supported "
                          f"(LiteRT's kernels disagree on any but 0)")
    if w.dtype == "uint8":
        if q.scale.size != 1:
            raise Unsupported("uint8 hybrid weights with per-channel scales are not supported (LiteRT uses the first)")
    elif q.scale.size != 1 and (q.scale.size != o or q.axis != axis):
        raise Unsupported(f"hybrid weight scales: {q.scale.size} along dimension {q.axis}, expected 1 or {o} "
                          f"along dimension {axis}")
    if per_channel_only and q.scale.size != o:
        raise Unsupported(f"a hybrid {cx.op.opcode} needs one filter scale per output channel ({o}), got "
                          f"{q.scale.size} (LiteRT reads the missing ones past the end of the list)")
    return np.broadcast_to(q.scale.astype(F32), (o,)).copy()


def _check_activation(cx: OpContext, fused: int) -> None:
    name = ACTIVATIONS.get(fused, f"#{fused}")
    if name not in CLAMPS:
        raise Unsupported(f"a hybrid {cx.op.opcode} with fused activation {name} is not supported (LiteRT runs "
                          f"it with another kernel than the clamping activations)")


def _float_bias(cx: OpContext, o: int, required: bool) -> np.ndarray | None:
    if cx.tensor(2) is None:
        if required:
            raise Unsupported(f"a hybrid {cx.op.opcode} without a bias is not supported (LiteRT runs it with "
                              f"another kernel)")
        return None
    b = cx.need_const(2, "the bias")
    if b.dtype != F32 or b.size != o:
        raise Unsupported(f"the bias of a hybrid {cx.op.opcode} is {b.dtype}{list(b.shape)}, expected float32[{o}]")
    return b.reshape(-1)


# ---- run-time quantization ----------------------------------------------------------------------


def _range(cx: OpContext, x: Expr, axes: tuple[int, ...]) -> tuple[Expr, Expr]:
    """(min(0, min x), max(0, max x)) over ``axes``, kept as size-1 dims."""
    lo = cx.call("minimum", cx.call("min", x, axis=axes, keepdims=True), _f(0.0))
    hi = cx.call("maximum", cx.call("max", x, axis=axes, keepdims=True), _f(0.0))
    return lo, hi


def _f32_sum(cx: OpContext, c: float, prod: Expr, sign: int) -> Expr:
    """float32 ``c + sign * prod`` of a float32 product, never fused with it (see the module's docstring)."""
    wide = cx.call("cast", prod, dtype="float64")
    s = cx.call("add", _d(c), wide) if sign > 0 else cx.call("subtract", _d(c), wide)
    return cx.call("cast", s, dtype="float32")


def xnnpack_quantize(cx: OpContext, x: Expr, axes: tuple[int, ...]) -> tuple[Expr, Expr, Expr]:
    """XNNPACK's dynamic quantization of float32 ``x`` over ``axes``: (int8 q, int32 zero point, float32
    dequantization scale ``1 / m``), the last two with size-1 ``axes``."""
    lo, hi = _range(cx, x, axes)
    span = cx.call("subtract", hi, lo)
    flat = cx.call("equal", span, _f(0.0))  # rmin == rmax (both 0)
    m = cx.call("divide", _f(255.0), cx.call("where", flat, _f(255.0), span))
    dlo, dhi = cx.call("multiply", lo, m), cx.call("multiply", hi, m)
    err = cx.call("add", _f32_sum(cx, -128.0, dlo, 1), _f32_sum(cx, 127.0, dhi, 1))
    zp = cx.call("where", cx.call("greater", err, _f(0.0)), _f32_sum(cx, -128.0, dlo, -1),
                 _f32_sum(cx, 127.0, dhi, -1))
    zp = cx.call("round", cx.call("clip", zp, a_min=-128.0, a_max=127.0))
    v = cx.call("round", cx.call("multiply", x, m))
    q = cx.call("cast", cx.call("clip", cx.call("add", v, zp), a_min=-128.0, a_max=127.0), dtype="int8")
    return q, cx.call("cast", zp, dtype="int32"), cx.call("divide", _f(1.0), m)


def _round_vector(cx: OpContext, v: Expr) -> Expr:
    """NEON ``RoundToNearest`` as NEON_2_SSE runs it: ``trunc(float32(v +- 0.5))``, in float32."""
    r = cx.call("floor", cx.call("add", cx.call("abs", v), _f(0.5)))
    return cx.call("multiply", cx.call("sign", v), r)


def tflite_asymmetric(cx: OpContext, x: Expr, axes: tuple[int, ...]) -> tuple[Expr, Expr, Expr]:
    """TFLite's ``AsymmetricQuantizeFloats`` (NEON path) over ``axes``: (int8 q, int32 zero point,
    float32 scaling factor)."""
    lo32, hi32 = _range(cx, x, axes)
    flat = cx.call("equal", lo32, hi32)
    span = cx.call("cast", cx.call("subtract", hi32, lo32), dtype="float64")  # a float32 difference
    s = cx.call("where", flat, _d(1.0), cx.call("divide", span, _d(255.0)))
    lo, hi = cx.call("cast", lo32, dtype="float64"), cx.call("cast", hi32, dtype="float64")
    a, b = cx.call("divide", lo, s), cx.call("divide", hi, s)
    err_min, err_max = cx.call("add", _d(128.0), cx.call("abs", a)), cx.call("add", _d(127.0), cx.call("abs", b))
    from_min = cx.call("less", err_min, err_max)
    zd = cx.call("where", from_min, cx.call("subtract", _d(-128.0), a), cx.call("subtract", _d(127.0), b))
    zr = cx.call("multiply", cx.call("sign", zd), cx.call("floor", cx.call("add", cx.call("abs", zd), _d(0.5))))
    zp = cx.call("where", flat, _d(0.0), cx.call("clip", zr, a_min=-128.0, a_max=127.0))
    sf = cx.call("cast", s, dtype="float32")
    inv = cx.call("cast", cx.call("divide", _d(1.0), cx.call("cast", sf, dtype="float64")), dtype="float32")
    r = _round_vector(cx, cx.call("multiply", x, inv))
    zp32 = cx.call("cast", zp, dtype="float32")
    q = cx.call("cast", cx.call("clip", cx.call("add", r, zp32), a_min=-128.0, a_max=127.0), dtype="int8")
    return q, cx.call("cast", zp, dtype="int32"), sf


def tflite_symmetric(cx: OpContext, x: Expr, axes: tuple[int, ...]) -> tuple[Expr, Expr]:
    """TFLite's ``SymmetricQuantizeFloats`` (NEON path) over ``axes``: (int8 q, float32 scaling factor)."""
    top = cx.call("maximum", cx.call("abs", cx.call("min", x, axis=axes, keepdims=True)),
                  cx.call("abs", cx.call("max", x, axis=axes, keepdims=True)))
    flat = cx.call("equal", top, _f(0.0))
    safe = cx.call("where", flat, _f(127.0), top)
    sf = cx.call("where", flat, _f(1.0), cx.call("divide", safe, _f(127.0)))
    r = _round_vector(cx, cx.call("multiply", x, cx.call("divide", _f(127.0), safe)))
    return cx.call("cast", cx.call("clip", r, a_min=-127.0, a_max=127.0), dtype="int8"), sf


# ---- operators ----------------------------------------------------------------------------------


def _centered(cx: OpContext, acc: Expr, zp: Expr, ksum: np.ndarray) -> Expr:
    """``acc - zp * ksum``: the sum of ``w * (q - zp)`` from the sum of ``w * q``."""
    return cx.call("subtract", acc, cx.call("multiply", zp, ksum.astype(np.int32)))


def _fma(cx: OpContext, t: Expr, scale: np.ndarray, bias: np.ndarray | None) -> Expr:
    """XNNPACK's ``fmadd(t, w_scale, bias)`` in float32: the product is exact in float64, the sum is
    rounded to float64 then to float32 (a double rounding that differs from the FMA's one rounding
    only when the first lands on a float32 tie)."""
    if bias is None:
        return cx.call("multiply", t, scale)
    wide = cx.call("multiply", cx.call("cast", t, dtype="float64"), scale.astype(F64))
    return cx.call("cast", cx.call("add", wide, bias.astype(F64)), dtype="float32")


def _plus_bias(cx: OpContext, t: Expr, bias: np.ndarray | None) -> Expr:
    """float32 ``t + bias``, never fused with the product that made ``t`` (TFLite adds the bias alone)."""
    if bias is None:
        return t
    wide = cx.call("add", cx.call("cast", t, dtype="float64"), bias.astype(F64))
    return cx.call("cast", wide, dtype="float32")


def _depthwise_scaled(cx: OpContext, acc: Expr, sf: Expr, scales: np.ndarray) -> Expr:
    """TFLite's optimized depthwise store loop: ``(acc * w_scale) * sf`` on the channels its 4-wide
    vector loop covers, ``(acc * sf) * w_scale`` on the last ``O mod 4``."""
    o = scales.size
    per = scales.reshape(1, o, 1, 1)
    acc = cx.call("cast", acc, dtype="float32")
    vec = cx.call("multiply", cx.call("multiply", acc, per), sf)
    if o % 4 == 0:
        return vec
    tail = cx.call("multiply", cx.call("multiply", acc, sf), per)
    return cx.call("where", (np.arange(o) < o - o % 4).reshape(1, o, 1, 1), vec, tail)


def conv(cx: OpContext, weight: np.ndarray, attrs: dict[str, Any], depthwise: bool, fused: int) -> Val:
    """A hybrid CONV_2D / DEPTHWISE_CONV_2D; ``weight`` is the filter OIHW (``[C * M, 1, KH, KW]`` for a
    depthwise one), ``attrs`` the window and groups of ``qnn.conv2d``. The result is channels-first."""
    x = cx.tensor(0)
    o, _, kh, kw = weight.shape
    _check_activation(cx, fused)
    legacy = cx.tensor(1).dtype == "uint8"
    if depthwise and legacy:
        raise Unsupported("a hybrid DEPTHWISE_CONV_2D with uint8 weights is not supported (LiteRT refuses it)")
    if legacy and attrs["groups"] != 1:
        raise Unsupported("a grouped hybrid CONV_2D with uint8 weights is not supported (LiteRT reads a scale "
                          "per output channel)")
    scales = _weight_scales(cx, o, 3 if depthwise else 0, per_channel_only=depthwise)
    bias = _float_bias(cx, o, required=True)
    w8 = np.ascontiguousarray(weight).view(np.int8) if legacy else weight
    ksum = w8.astype(np.int64).reshape(o, -1).sum(axis=1).reshape(1, o, 1, 1)
    data = cx.nchw(0)
    per = (1, o, 1, 1)
    if legacy:  # TFLite EvalHybrid: symmetric, so padding with the integer 0 is a real 0
        q, sf = tflite_symmetric(cx, data, (1, 2, 3))
        acc = cx.call("qnn.conv2d", q, w8, **attrs)
        t = cx.call("multiply", cx.call("cast", acc, dtype="float32"), cx.call("multiply", sf, _f(scales[0])))
        y = _plus_bias(cx, t, bias.reshape(per))
    else:
        pointwise = (not depthwise and attrs["groups"] == 1 and (kh, kw) == (1, 1) and attrs["strides"] == (1, 1)
                     and x.shape[3] + o > 2 and not any(attrs["padding"]))
        pad = attrs["padding"]
        if any(pad):  # pad with a float 0, which quantizes to the zero point
            data = cx.call("nn.pad", data, pad_width=(0, 0, pad[0], pad[1], 0, 0, pad[2], pad[3]))
            attrs = dict(attrs, padding=(0, 0, 0, 0))
        if depthwise:
            q, zp, sf = tflite_asymmetric(cx, data, (1, 2, 3))
            acc = _centered(cx, cx.call("qnn.conv2d", q, w8, **attrs), zp, ksum)
            y = _plus_bias(cx, _depthwise_scaled(cx, acc, sf, scales), bias.reshape(per))
        else:
            q, zp, inv = xnnpack_quantize(cx, data, (1,) if pointwise else (1, 2, 3))
            acc = _centered(cx, cx.call("qnn.conv2d", q, w8, **attrs), zp, ksum)
            t = cx.call("multiply", cx.call("cast", acc, dtype="float32"), inv)
            y = _fma(cx, t, scales.reshape(per), bias.reshape(per))
    return Val(float_activation(cx, y, fused), nchw=True)


# the longest sum computed in XNNPACK's order (the converter keeps layers of fewer than 1,024 weights float)
XNNPACK_CHAIN = 1024


def _fma_chain(cx: OpContext, bias: np.ndarray | None, o: int, terms: Any, shape: tuple[int, ...]) -> Expr:
    """``y = bias; y = fma(x, w, y)`` for each ``(x, w)`` of ``terms`` in order, in float32: each FMA is
    the exact float64 product and sum rounded to float64 then to float32 (see :func:`_fma`)."""
    y: Expr | np.ndarray = (np.zeros(o, F64) if bias is None else bias.astype(F64)).reshape(shape)
    for k, (x, w) in enumerate(terms):
        prod = cx.call("multiply", cx.call("cast", x, dtype="float64"), w.astype(F64).reshape(shape))
        y = cx.call("cast", cx.call("add", y if k == 0 else cx.call("cast", y, dtype="float64"), prod),
                    dtype="float32")
    return y


def xnnpack_order(cx: OpContext, reduction: int) -> bool:
    """Whether a float32 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED summing ``reduction`` products is
    computed in XNNPACK's order: in a model with hybrid operators, whose layers after it quantize its
    output at run time (a float32 value one ulp away from LiteRT's would move a quantized input by one
    step), up to :data:`XNNPACK_CHAIN` products."""
    return bool(cx.imp.hybrid) and reduction <= XNNPACK_CHAIN


def xnnpack_conv(cx: OpContext, weight: np.ndarray, bias: np.ndarray | None, attrs: dict[str, Any],
                 depthwise: bool, fused: int) -> Val:
    """A float32 CONV_2D / DEPTHWISE_CONV_2D in XNNPACK's order on FMA hardware: from the bias, one FMA
    per product, a padded tap reading a real 0. Its ``f32-dwconv`` kernels (depth multiplier 1, at most
    25 taps: this LiteRT build has no multi-pass ones) take the taps column by column (``kx`` outer,
    ``ky`` inner, as its indirection buffer lists them); its ``gemm`` / ``igemm`` kernels (any other
    convolution) row by row, and the input channels of a group in order within a tap.
    ``weight`` is OIHW (``[C * M, 1, KH, KW]`` for a depthwise one); the result is channels-first."""
    x = cx.tensor(0)
    o, cg, kh, kw = weight.shape
    _, h, w, c = x.shape
    (sh, sw), (dh, dw), pad = attrs["strides"], attrs["dilation"], attrs["padding"]
    oh = (h + pad[0] + pad[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pad[1] + pad[3] - dw * (kw - 1) - 1) // sw + 1
    data = cx.nchw(0)
    if any(pad):
        data = cx.call("nn.pad", data, pad_width=(0, 0, pad[0], pad[1], 0, 0, pad[2], pad[3]))
    groups = attrs["groups"]
    per_group = o // groups

    def channel(k: int) -> Expr:  # input channel k of each output channel's group: [N, O or 1, H', W']
        if groups == 1:
            return cx.call("strided_slice", data, begin=(k,), end=(k + 1,), axes=(1,))
        return cx.call("take", data, np.arange(o, dtype=np.int64) // per_group * cg + k, axis=1)

    channels = [channel(k) for k in range(cg)]
    dwconv = depthwise and o == c and kh * kw <= 25
    taps = [(i, j) for j in range(kw) for i in range(kh)] if dwconv else list(np.ndindex(kh, kw))
    terms = ((cx.call("strided_slice", channels[k], begin=(i * dh, j * dw), end=(i * dh + (oh - 1) * sh + 1,
              j * dw + (ow - 1) * sw + 1), strides=(sh, sw), axes=(2, 3)), weight[:, k, i, j])
             for i, j in taps for k in range(cg))
    return Val(float_activation(cx, _fma_chain(cx, bias, o, terms, (1, o, 1, 1)), fused), nchw=True)


def xnnpack_dense(cx: OpContext, flat: Expr, wv: np.ndarray, bias: np.ndarray | None, fused: int) -> Expr:
    """A float32 FULLY_CONNECTED of ``[rows, K]`` and ``[O, K]`` in XNNPACK's order (its ``gemm``
    kernels): from the bias, one FMA per product, ``k`` in order."""
    o, k = wv.shape
    terms = ((cx.call("strided_slice", flat, begin=(i,), end=(i + 1,), axes=(1,)), wv[:, i]) for i in range(k))
    return float_activation(cx, _fma_chain(cx, bias, o, terms, (1, o)), fused)


def dense(cx: OpContext, flat: Expr, wv: np.ndarray, fused: int) -> Expr:
    """A hybrid FULLY_CONNECTED of the ``[rows, K]`` float32 input ``flat`` and the weights ``[O, K]``."""
    o = wv.shape[0]
    _check_activation(cx, fused)
    legacy = cx.tensor(1).dtype == "uint8"
    scales = _weight_scales(cx, o, 0, per_channel_only=False)
    bias = _float_bias(cx, o, required=False)
    w8 = np.ascontiguousarray(wv).view(np.int8) if legacy else wv
    ksum = w8.astype(np.int64).sum(axis=1).reshape(1, o)
    if not legacy:  # XNNPACK, per row
        q, zp, inv = xnnpack_quantize(cx, flat, (1,))
        acc = _centered(cx, cx.call("qnn.dense", q, w8), zp, ksum)
        y = _fma(cx, cx.call("multiply", cx.call("cast", acc, dtype="float32"), inv), scales.reshape(1, o), bias)
    else:  # TFLite EvalHybridDense: output = bias + sum * (sf * w_scale)
        if cx.option("AsymmetricQuantizeInputs", False):
            q, zp, sf = tflite_asymmetric(cx, flat, (1,))
            acc = _centered(cx, cx.call("qnn.dense", q, w8), zp, ksum)
        else:
            q, sf = tflite_symmetric(cx, flat, (1,))
            acc = cx.call("qnn.dense", q, w8)
        t = cx.call("multiply", cx.call("cast", acc, dtype="float32"), cx.call("multiply", sf, _f(scales[0])))
        y = _plus_bias(cx, t, bias)
    return float_activation(cx, y, fused)
