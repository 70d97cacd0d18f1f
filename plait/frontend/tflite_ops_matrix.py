"""TFLite converters of the matrix products that are not FULLY_CONNECTED: BATCH_MATMUL and TRANSPOSE_CONV
(float32 and int8; the other quantized forms are refused naming the operator).

- BATCH_MATMUL ``(x, y)``: ``nn.matmul`` with broadcast batch dimensions, ``AdjX`` / ``AdjY`` transposing
  the last two dimensions of an operand first; int8 as TensorFlow Lite Micro computes it, the exact
  int32 product of the offset operands (``qnn.matmul``) requantized in fixed point by
  ``double(sx) * double(sy) / double(so)``.
- TRANSPOSE_CONV ``(output_shape, weights [O, KH, KW, I], input [N, H, W, I], bias [O]?)``: the transposed
  convolution of ``nn.conv2d_transpose`` (weights ``[I, O, KH, KW]``), its padding TFLite's
  (``ComputePaddingHeightWidth`` of the forward convolution from the output's size: SAME pads
  ``total // 2`` before), cropped or extended to the constant output shape; a fused activation after
  the bias. It computes channels-first, like the other spatial operators. int8 (per-channel symmetric
  weights) as TensorFlow Lite Micro computes it: exact int32 sums (a ``qnn.conv2d`` of the input spread
  apart with its zero point between), the bias, the fixed-point requantization per channel.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plait.frontend.tflite_context import OpContext, Unsupported, Val, registrar
from plait.frontend.tflite_ops import float_activation
from plait.frontend.tflite_quant import multipliers, per_tensor, qparams, requantize

CONVERTERS: dict[str, Callable[[OpContext], Any]] = {}

_conv = registrar(CONVERTERS)


def _float_only(cx: OpContext, *inputs: int) -> None:
    for i in inputs:
        t = cx.tensor(i)
        if t is not None and t.dtype != "float32":
            raise Unsupported(f"{cx.op.opcode} of {t.type_name} is not supported yet (float32 is)")


def _swap_last(cx: OpContext, e: Any) -> Any:
    rank = e.checked_type.ndim
    if rank < 2:
        raise Unsupported(f"an adjoint of a rank-{rank} operand")
    return cx.call("transpose", e, axes=tuple(range(rank - 2)) + (rank - 1, rank - 2))


@_conv("BATCH_MATMUL")
def _batch_matmul(cx: OpContext) -> Any:
    cx.need(2, 2)
    quant = cx.tensor(0).dtype == "int8"
    if not quant:
        _float_only(cx, 0, 1)
    a, b = cx.nhwc(0), cx.nhwc(1)
    if min(a.checked_type.ndim, b.checked_type.ndim) < 2:
        raise Unsupported("BATCH_MATMUL operands must have at least two dimensions")
    if cx.option("AdjX", False):
        a = _swap_last(cx, a)
    if cx.option("AdjY", False):
        b = _swap_last(cx, b)
    if not quant:
        return cx.call("nn.matmul", a, b)
    x, w, y = cx.tensor(0), cx.tensor(1), cx.out()
    if w.dtype != "int8" or y.dtype != "int8":
        raise Unsupported(f"BATCH_MATMUL of INT8 with {w.type_name} to {y.type_name} is not supported (int8 is)")
    (xs, xz), (ws, wz), (ys, yz) = (per_tensor(t, what) for t, what in
                                    ((x, "input 0"), (w, "input 1"), (y, "the output")))
    acc = cx.call("qnn.matmul", a, b, a_zero_point=xz, b_zero_point=wz)
    mult, shift = multipliers(xs, np.array([ws]), ys)
    return requantize(cx, acc, mult, shift, yz, "int8", 0, ys, axis=-1)


def _padding(cx: OpContext, size: int, out: int, k: int, s: int) -> tuple[int, int, int]:
    """(before, after, extra) of one spatial axis: the full transposed size ``(size - 1) * s + k`` cropped
    by ``before`` and ``after`` (``extra``: rows added at the end when the output is larger)."""
    padding = cx.option("Padding", 0)
    if padding not in (0, 1):
        raise Unsupported(f"unknown padding {padding}")
    full = (size - 1) * s + k
    before = max((((out + s - 1) // s) - 1) * s + k - out, 0) // 2 if padding == 0 else 0
    after = full - out - before
    if after < 0:
        if -after >= s:
            raise Unsupported(f"an output of {out} from an input of {size} (stride {s}, kernel {k})")
        return before, 0, -after
    return before, after, 0


def _quant_transpose_conv(cx: OpContext, wv: np.ndarray, out_hw: tuple[int, int], strides: tuple[int, int],
                          pads: tuple[int, int]) -> Any:
    """int8 TRANSPOSE_CONV as TensorFlow Lite Micro computes it (exact int32 sums, then per-channel
    fixed-point requantization): the input spread ``stride`` apart with its zero point between (a pad of a
    reshaped value), padded (or cropped) to the output's window, and a ``qnn.conv2d`` with the flipped
    weights."""
    x, w, y = cx.tensor(2), cx.tensor(1), cx.out()
    xs, xz = per_tensor(x, "the input")
    ys, yz = per_tensor(y, "the output")
    wq = qparams(w, "the weights")
    o, kh, kw, _ = wv.shape
    if wv.dtype != np.int8 or y.dtype != "int8" or np.any(wq.zero_point != 0):
        raise Unsupported(f"TRANSPOSE_CONV of INT8 with {w.type_name} weights to {y.type_name} is not supported "
                          "(int8 with symmetric weights is)")
    if wq.scale.size not in (1, o) or (wq.scale.size > 1 and wq.axis != 0):
        raise Unsupported(f"weight scales: {wq.scale.size} along dimension {wq.axis}, expected 1 or {o} along 0")
    n, h, wd, c = x.shape
    (sh, sw), (th, tw) = strides, pads
    v = cx.call("reshape", cx.nchw(2), newshape=(n, c, h, 1, wd, 1))
    v = cx.call("nn.pad", v, pad_width=(0, 0, 0, 0, 0, 0, 0, 0, 0, sh - 1, 0, sw - 1), pad_value=float(xz))
    v = cx.call("reshape", v, newshape=(n, c, h * sh, wd * sw))
    before = (kh - 1 - th, kw - 1 - tw)
    after = tuple(out + k - 1 - b - size * s for out, k, b, size, s in zip(out_hw, (kh, kw), before, (h, wd), strides))
    v = cx.call("nn.pad", v, pad_width=(0, 0, before[0], before[1], 0, 0, after[0], after[1]), pad_value=float(xz))
    weight = np.ascontiguousarray(np.transpose(wv, (0, 3, 1, 2))[:, :, ::-1, ::-1])  # OHWI -> OIHW, flipped
    acc = cx.call("qnn.conv2d", v, weight, input_zero_point=xz, kernel_zero_point=0)
    if cx.tensor(3) is not None:
        b = cx.need_const(3, "the bias").reshape(-1)
        if b.dtype not in (np.int32, np.int64) or b.size != o:
            raise Unsupported(f"the bias is {b.dtype}[{b.size}], expected int32[{o}]")
        acc = cx.call("add", acc, b.astype(np.int32).reshape(1, o, 1, 1))
    mult, shift = multipliers(xs, wq.scale, ys)
    if mult.size == 1 and o > 1:
        mult, shift = mult.reshape(()), shift.reshape(())
    return requantize(cx, acc, mult, shift, yz, "int8", cx.option("FusedActivationFunction", 0), ys, axis=1)


@_conv("TRANSPOSE_CONV")
def _transpose_conv(cx: OpContext) -> Any:
    cx.need(3, 4)
    quant = cx.tensor(2).dtype == "int8"
    if not quant:
        _float_only(cx, 1, 2, 3)
    shape = cx.need_const(0, "the output shape").reshape(-1)
    wv = cx.need_const(1, "the weights")
    x = cx.tensor(2)
    if len(x.shape) != 4 or wv.ndim != 4 or shape.size != 4:
        raise Unsupported(f"expected a 4-D input, weights and output shape, got {list(x.shape)}, "
                          f"{list(wv.shape)} and {shape.tolist()}")
    n, h, w, c = x.shape
    o, kh, kw, wi = wv.shape
    if wi != c or int(shape[3]) != o or int(shape[0]) != n:
        raise Unsupported(f"weights {list(wv.shape)} and output shape {shape.tolist()} do not fit the input "
                          f"{list(x.shape)}")
    sh, sw = cx.option("StrideH", 1), cx.option("StrideW", 1)
    if min(sh, sw) < 1:
        raise Unsupported(f"strides ({sh}, {sw}) must be >= 1")
    th, bh, eh = _padding(cx, h, int(shape[1]), kh, sh)
    tw, bw, ew = _padding(cx, w, int(shape[2]), kw, sw)
    if quant:
        return Val(_quant_transpose_conv(cx, wv, (int(shape[1]), int(shape[2])), (sh, sw), (th, tw)), nchw=True)
    weight = np.ascontiguousarray(np.transpose(wv, (3, 0, 1, 2)))  # OHWI -> [I, O, KH, KW]
    y = cx.call("nn.conv2d_transpose", cx.nchw(2), weight, strides=(sh, sw), padding=(th, tw, bh, bw),
                output_padding=(eh, ew))
    if cx.tensor(3) is not None:
        b = cx.need_const(3, "the bias").reshape(-1)
        if b.size != o:
            raise Unsupported(f"the bias has {b.size} values for {o} output channels")
        y = cx.call("add", y, b.astype(np.float32).reshape(1, o, 1, 1))
    return Val(float_activation(cx, y, cx.option("FusedActivationFunction", 0)), nchw=True)
