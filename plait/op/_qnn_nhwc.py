"""The channels-last forms of ``qnn.conv2d`` (``data_layout="NHWC"``: data ``[N, H, W, C]``, sums
``[N, OH, OW, O]``; the weight stays ``[O, C/groups, KH, KW]``), which the channels-last pass
(:class:`plait.relay.passes.ChannelsLast`) gives the convolutions of a piece where :func:`nhwc_form`
has a form for them:

- ``"outer"``: one group, int8 weights of zero point 0, compiled as C for a host with 512-bit
  vectors and AVX512-VNNI or with 256-bit vectors (AVX2; :func:`conv_kernel_body` of the compute
  facts ``compiled_as_c``, ``simd_bits``, ``vnni``), at least
  :data:`MIN_OUTER_CHANNELS` input channels (or fewer with that many in a window row, folded into
  the channels: :func:`folds`), any window, stride, padding or dilation. The weight
  packed ``[ceil(O/16), KH * KW * CP / 4, 16, 4]`` (``CP``: the channels rounded up to a multiple of
  4, zero weights past ``C`` and ``O``), the input read as it is when it is uint8, unpadded and
  ``C % 4 == 0``, else copied once as a padded uint8 ``[N, H + pads, W + pads, CP]`` (an int8 input
  shifted by 128, the padding its zero point, the sums corrected by ``zero_point * sum(weights)``
  as the NCHW packed forms do). The sums are computed by the kernel ``q8_conv``
  (:mod:`plait.tir.kernels`, put in by :mod:`plait.schedule.int_kernels`; the C backend's body): 16 output channels in the lanes of
  one accumulator, ``vpdpbusd`` of 4 input bytes of a pixel broadcast by 64 weight bytes, blocks
  of 8 pixels, the taps an extra loop, whole 16-lane stores of int32 channels-last (no transposes);
  with AVX2 and no VNNI, both operands widened to int16 and ``vpmaddwd`` (exact pair sums), blocks of
  2 pixels x 16 channels in 8 accumulators, the pairs summed once per block.
- ``"depthwise"``: one input and one output channel per group, at least ``MIN_DEPTHWISE`` channels:
  the input packed ``[N, H + pads, (W + pads) * C]`` as int16 minus its zero point (a contiguous
  copy), the weight ``[KH, KW * C]``, the sums vectorized along the channels and written as the
  result: the channels-last depthwise form of :mod:`plait.op._qnn_planes` without its transposes.
  With AVX2 and no VNNI (:func:`conv_kernel_body` ``"avx2"``) the sums are stage ``dwk``, computed by
  the kernel ``dw16`` (:mod:`plait.tir.kernels`; the C backend's AVX2 body): pairs of taps interleaved and
  ``vpmaddwd`` by interleaved weights, where gcc multiplies with ``vpmullw`` + ``vpmulhw``.
- ``"packed"``: one group, a packed form of the NCHW convolution (:func:`plait.op._qnn_forms.packed_conv`:
  ``"rows"``, ``"stacked"``, ``"window"``) and a weight of at most :data:`MAX_PACKED_WEIGHT`
  elements: the same packs, copied from NHWC data without a transposition.
- ``"channels"``: one group, no padding, at least :data:`MIN_CHANNEL_VECTORS` output channels: a
  pixel's sums vectorized along the output channels.
- otherwise (``None``: symbolic shapes, other groups, a machine without the facts) the direct loop
  nest, channels-last.

Integers are exact: every form gives the same numbers as the reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait import te
from plait.ir.attrs import Attrs
from plait.op._compute import compute_fact, make, shape_of, tir
from plait.op._qnn_forms import packed_conv
from plait.op._qnn_planes import MIN_DEPTHWISE, _widened, depthwise_sums, packs
from plait.op.nn._window import inside
from plait.tir.expr import PrimExpr

LANES, STEP = 16, 4
"""The ``"outer"`` form's output channels per accumulator and input bytes per ``vpdpbusd`` lane."""

MIN_OUTER_CHANNELS = 3
"""The ``"outer"`` form takes convolutions over at least this many input channels (fewer are padded
to 4 with zeros: a 1- or 2-channel window wastes most of each ``vpdpbusd``), or fewer whose window
rows hold at least this many (:func:`folds`: each row of taps packed as the channels, the window one
tap wide; ds_cnn's 1-channel 10 x 4 stem: 12 -> 7 us with VNNI, 37 -> 11 us with AVX2, where it took
the ``"packed"`` im2col ``"window"`` form)."""


MAX_PACKED_WEIGHT = 16384
"""The ``"packed"`` form takes convolutions whose weight holds at most this many elements: its dot
products run output channel by output channel for each pixel (the result channels-last), so the
whole packed weight is read once per pixel; the NCHW form reads it once per row of pixels
(resnet_block's 64 x 64 x 3 x 3 layers under LLVM: 807 -> 971 us channels-last)."""


def conv_kernel_body(facts: dict[str, Any] | None = None) -> str | None:
    """Which fast body of the C backend's kernel ``q8_conv`` (:mod:`plait.tir.kernels`) the C of a piece with
    these compute facts (default: the current ones, :func:`compute_fact`) gets: ``"vnni"`` (compiled as
    C, 512-bit vectors and AVX512-VNNI: ``vpdpbusd``), ``"avx2"`` (compiled as C, at least 256-bit
    vectors without VNNI: x86-64-v3, int16 ``vpmaddwd`` pairs) or None (LLVM, narrower vectors,
    Cortex-M: the kernel's plain C body would be slower than the other forms)."""
    get = compute_fact if facts is None else (lambda name, default: facts.get(name, default))
    if not get("compiled_as_c", False):
        return None
    simd = get("simd_bits", 0)
    if simd >= 512 and get("vnni", False):
        return "vnni"
    return "avx2" if simd >= 256 else None


def _static(*shapes: Any) -> bool:
    return all(isinstance(d, int) for s in shapes for d in s)


def nhwc_form(x_shape: tuple, w_shape: tuple, w_dtype: str, attrs: Attrs) -> str | None:
    """The channels-last form of a ``qnn.conv2d`` of data ``x_shape`` (``[N, H, W, C]``) and weight
    ``w_shape`` (module docstring): ``"outer"``, ``"depthwise"``, ``"packed"`` (one group, a packed
    form of the NCHW convolution but ``"outer"``: :func:`plait.op._qnn_forms.packed_conv`, its packs
    copied without a transposition) or None (the direct loop nest)."""
    if not _static(x_shape, w_shape) or len(x_shape) != 4 or not packs():
        return None
    c, (o, cg, _, _), g = x_shape[3], w_shape, attrs["groups"]
    if g == c and o == c and cg == 1 and c >= MIN_DEPTHWISE:
        return "depthwise"
    if g == 1 and (c >= MIN_OUTER_CHANNELS or folds(c, w_shape[3])) and w_dtype == "int8" and \
            attrs["kernel_zero_point"] == 0 and \
            conv_kernel_body() is not None:
        return "outer"
    mode = packed_conv((x_shape[0], c, x_shape[1], x_shape[2]), w_shape, attrs)
    if mode is not None and mode != "outer" and int(np.prod(w_shape)) <= MAX_PACKED_WEIGHT:
        return "packed"
    if g == 1 and o >= MIN_CHANNEL_VECTORS and not any(attrs["padding"]) and \
            compute_fact("simd_bits", 128) >= 256:
        return "channels"
    return None


def _round(v: int, m: int) -> int:
    return -(-v // m) * m


def folds(c: int, kw: int) -> bool:
    """Whether the ``"outer"`` form of a convolution over ``c`` input channels with windows ``kw`` wide
    folds each window row into the channels (fewer than :data:`MIN_OUTER_CHANNELS` channels, at least
    that many in a row: ds_cnn's 1-channel 10 x 4 stem becomes a 10 x 1 window over 4 channels)."""
    return c < MIN_OUTER_CHANNELS <= c * kw


def _outer(op: str, x: Any, wt: Any, attrs: Attrs, out_shape: Any) -> Any:
    n, h, w, c = shape_of(x, op)
    o, _, kh, kw = shape_of(wt, op)
    s, d = attrs["strides"], attrs["dilation"]
    top, left, bottom, right = attrs["padding"]
    zx = attrs["input_zero_point"]
    shift = 128 if x.dtype == "int8" else 0
    pad = zx + shift
    fold = folds(c, kw)
    # (folded: the packed input's channel k is tap k // c, channel k % c of the row; the window 1 wide)
    cf, kwe, dwe = (c * kw, 1, 1) if fold else (c, kw, d[1])
    cp, op_ = _round(cf, STEP), _round(o, LANES)
    if shift or any(attrs["padding"]) or cp != c or fold:
        width = w + left + right - ((kw - 1) * d[1] if fold else 0)

        def xval(i: PrimExpr, yy: PrimExpr, xx: PrimExpr, k: PrimExpr) -> PrimExpr:
            iy, ix, ch = yy - top, xx - left, k
            if fold:  # (k % cf: in range past cf too, where the select takes the pad)
                kk = k % cf if cp != cf else k
                ix, ch = ix + (kk // c) * d[1], kk % c
            v = x[i, iy, ix, ch]
            v = tir.cast("uint8", tir.cast("int32", v) + shift) if shift else v
            conds = ([inside(iy, ix, h, w)] if any(attrs["padding"]) else []) + ([k < cf] if cp != cf else [])
            if not conds:
                return v
            return tir.select(conds[0] if len(conds) == 1 else tir.all_(*conds), v, tir.const(pad, "uint8"))

        xq = make(op, (n, h + top + bottom, width, cp), xval, "pack", inline=False)
    else:
        xq = x

    def wval(ob: PrimExpr, t4: PrimExpr, j: PrimExpr, q: PrimExpr) -> PrimExpr:
        oc, k = ob * LANES + j, t4 * STEP + q
        kf, tap = (k, 0) if kh * kwe == 1 else (k % cp, k // cp)
        ry, rx, ch = tap // kwe, tap % kwe, kf
        if fold:
            rx, ch = kf // c, kf % c
        v = wt[oc, ch, ry, rx]
        conds = ([oc < o] if op_ != o else []) + ([kf < cf] if cp != cf else [])
        if not conds:
            return v
        return tir.select(conds[0] if len(conds) == 1 else tir.all_(*conds), v, tir.const(0, "int8"))

    wq = make(op, (op_ // LANES, kh * kwe * cp // STEP, LANES, STEP), wval, "wpack", inline=False)

    def wout(oc: PrimExpr, t: PrimExpr, ch: PrimExpr) -> PrimExpr:  # the packed weight of (oc, tap, ch)
        k = t * cp + ch
        return wq[oc // LANES, k // STEP, oc % LANES, k % STEP]

    def body(i: PrimExpr, y: PrimExpr, z: PrimExpr, oc: PrimExpr) -> Any:
        ry, rx, rk = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kwe), "rx"), te.reduce_axis((0, cp), "rk")
        v = xq[i, y * s[0] + ry * d[0], z * s[1] + rx * dwe, rk]
        return te.sum(tir.cast("int32", v) * tir.cast("int32", wout(oc, ry * kwe + rx, rk)), axis=[ry, rx, rk])

    acc = make(op, out_shape, body, "outer")  # (int_rules' kernel)
    if not pad:
        return make(op, out_shape, lambda i, y, z, oc: acc[i, y, z, oc])

    def wsum(oc: PrimExpr) -> Any:
        rk = te.reduce_axis((0, kh * kwe * cp), "rk")
        return te.sum(tir.cast("int32", wq[oc // LANES, rk // STEP, oc % LANES, rk % STEP]), axis=[rk])

    ws = make(op, (o,), wsum, "wsum")
    return make(op, out_shape, lambda i, y, z, oc: acc[i, y, z, oc] - ws[oc] * pad)


def _depthwise(op: str, x: Any, wt: Any, attrs: Attrs, out_shape: Any) -> Any:
    n, h, w, c = shape_of(x, op)
    # (int_rules: the taps unrolled inside the channel vector loop; with AVX2 and no VNNI, "dwk": the
    # kernel dw16, pairs of taps by vpmaddwd)
    acc = depthwise_sums(op, lambda i, ch, iy, ix: x[i, iy, ix, ch], (n, h, w, c), wt, attrs,
                         (out_shape[1], out_shape[2]), "dwk" if conv_kernel_body() == "avx2" else "dwc")
    return make(op, out_shape, lambda i, y, z, ch: acc[i, y, z, ch])


MIN_CHANNEL_VECTORS = 32
"""The ``"channels"`` form takes a convolution of one group, no padding and at least this many output
channels that no packed form takes (too few input channels for dot products: mobilenet's 1x1
expansions over 8, 16 or 24 channels under LLVM): the weight packed ``[KH, KW, C, O]`` as int16 minus
its zero point, each output pixel's ``O`` sums vectorized along the output channels (int_rules'
pixel rows, the reduction outside the vector loop: an outer product per input channel)."""


def _channels(op: str, x: Any, wt: Any, attrs: Attrs, out_shape: Any) -> Any:
    o, c, kh, kw = shape_of(wt, op)
    s, d = attrs["strides"], attrs["dilation"]
    zx, zw = attrs["input_zero_point"], attrs["kernel_zero_point"]
    wq = make(op, (kh, kw, c, o), lambda ry, rx, ch, oc: tir.cast("int16", _widened(wt[oc, ch, ry, rx], zw)),
              "wpack", inline=False)

    def body(i: PrimExpr, y: PrimExpr, z: PrimExpr, oc: PrimExpr) -> Any:
        ry, rx, rc = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx"), te.reduce_axis((0, c), "rc")
        xv = _widened(x[i, y * s[0] + ry * d[0], z * s[1] + rx * d[1], rc], zx)
        return te.sum(xv * tir.cast("int32", wq[ry, rx, rc, oc]), axis=[ry, rx, rc])

    return make(op, out_shape, body)


def _direct(op: str, x: Any, wt: Any, attrs: Attrs, out_shape: Any) -> Any:
    _, h, w, _ = shape_of(x, op)
    o, cg, kh, kw = shape_of(wt, op)
    s, d, g = attrs["strides"], attrs["dilation"], attrs["groups"]
    top, left, _, _ = attrs["padding"]
    zx, zw = attrs["input_zero_point"], attrs["kernel_zero_point"]
    og = o // g

    def body(i: PrimExpr, y: PrimExpr, z: PrimExpr, oc: PrimExpr) -> Any:
        rc, ry, rx = te.reduce_axis((0, cg), "rc"), te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")
        ch = rc if g == 1 else oc // og * cg + rc
        iy, ix = y * s[0] + ry * d[0] - top, z * s[1] + rx * d[1] - left
        xv = _widened(x[i, iy, ix, ch], zx)
        if any(attrs["padding"]):
            xv = tir.select(inside(iy, ix, h, w), xv, tir.const(0, "int32"))
        return te.sum(xv * _widened(wt[oc, rc, ry, rx], zw), axis=[rc, ry, rx])

    return make(op, out_shape, body)


def nhwc_conv2d(op: str, x: Any, wt: Any, attrs: Attrs, out_shape: Any, packed: Any) -> Any:
    """The TE compute of a channels-last ``qnn.conv2d`` (its :func:`nhwc_form`; ``packed``:
    ``qnn_nn._packed_conv2d``)."""
    xs = shape_of(x, op)
    form = nhwc_form(xs, shape_of(wt, op), wt.dtype, attrs)
    if form == "packed":
        mode = packed_conv((xs[0], xs[3], xs[1], xs[2]), shape_of(wt, op), attrs)
        return packed(op, x, wt, attrs, out_shape, mode, nhwc=True)
    forms = {"outer": _outer, "depthwise": _depthwise, "channels": _channels, None: _direct}
    return forms[form](op, x, wt, attrs, out_shape)


__all__ = ["LANES", "MIN_OUTER_CHANNELS", "STEP", "nhwc_conv2d", "nhwc_form"]
