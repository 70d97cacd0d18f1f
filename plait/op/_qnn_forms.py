"""Which packed form :mod:`plait.op.qnn_nn`'s ``qnn.conv2d`` takes (:func:`packed_conv`), with the
thresholds that choose it; the channels-last forms (:mod:`plait.op._qnn_nhwc`) ask it too. The forms
themselves are computed in :mod:`plait.op.qnn_nn` (its module docstring describes them)."""

from __future__ import annotations

from plait.ir.attrs import Attrs
from plait.op._compute import compute_fact
from plait.op._qnn_planes import packs

MIN_DOT = 32
"""A convolution is computed as packed dot products when its window holds at least this many
elements (``KH * KW * C``)."""


def packed_conv(x_shape: tuple, w_shape: tuple, attrs: Attrs) -> str | None:
    """How a ``qnn.conv2d`` of these static shapes is packed (module docstring): ``"rows"`` (its
    window rows ``KW * C`` are long enough: the input packed channels-last once), ``"stacked"``
    (rows, and a stride-1 kernel of zero point 0 over a multiple of :data:`STACK_CHANNELS`
    channels: the rows of each output row's window stacked, one dot product per output), ``"window"`` (short rows, e.g.
    one input channel: every output's whole window packed, im2col), None (the direct loop nest:
    groups, symbolic shapes, tiny windows, a machine without vectors), ``"outer"`` (:data:`OUTER_LANES`)."""
    if attrs["groups"] != 1 or not all(isinstance(d, int) for d in (*x_shape, *w_shape)) or not packs():
        return None
    c, kh, kw = w_shape[1], w_shape[2], w_shape[3]
    if kh == kw == 1 and c % OUTER_STEP == 0 and w_shape[0] % OUTER_LANES == 0 and c >= MIN_DOT and \
            tuple(attrs["strides"]) == (1, 1) and not any(attrs["padding"]) and attrs["kernel_zero_point"] == 0 \
            and compute_fact("compiled_as_c", False) and compute_fact("simd_bits", 0) >= 512 \
            and compute_fact("vnni", False):
        return "outer"
    if (c * kw if attrs["dilation"][1] == 1 else c) >= MIN_DOT:
        k = c * kh * kw
        if c % STACK_CHANNELS == 0 and (_stack_run(k) - k) % c == 0 and kh > 1 and kw > 1 and \
                tuple(attrs["strides"]) == (1, 1) and tuple(attrs["dilation"]) == (1, 1) and \
                attrs["kernel_zero_point"] == 0:  # (uint8 data, int8 weights: int16 stacks would divide)
            return "stacked"
        return "rows"
    return "window" if c * kh * kw >= (MIN_WINDOW if compute_fact("compiled_as_c", True) else MIN_DOT) else None


MIN_WINDOW = 24
"""...and as packed windows (im2col) when the window holds at least this many (padded with zero
weights, :func:`window_layout`), when the code is compiled as C (``compiled_as_c``: gcc forms
``vpdpbusd`` from the dot loops, LLVM does not: its window of 27 taps is 14x slower than the direct
nest): mobilenet's 3-channel 3 x 3 stem (27 taps) 1.7x and its 1 x 1 expansions over 24 channels
1.5x faster than the direct nest's register tile and pixel rows."""


OUTER_LANES, OUTER_STEP = 16, 4
"""A 1x1 convolution of stride 1, no padding, over a multiple of ``OUTER_STEP`` (and at least
:data:`MIN_DOT`) input channels into a multiple of ``OUTER_LANES`` output channels, int8 weights of
zero point 0, compiled as C for a host with 512-bit vectors and AVX512-VNNI (compute fact ``vnni``: the c
kind's ``-int8-dot`` option, else this machine's CPU), takes the ``"outer"`` form: weights
packed as ``[O/16, C/4, 16, 4]``, the input channels-last, and the sums computed by the kernel
``q8_outer`` (:mod:`plait.tir.kernels`, put in by ``int_rules``; the C backend's body: 16 output channels in
the lanes of one accumulator, ``vpdpbusd`` of 4 input bytes of a pixel broadcast by 64 weight bytes,
no horizontal sums; a plain C body computes the same int32 sums without AVX-512 VNNI). ds_cnn's
64 -> 64 convolutions over 25 x 5 pixels: 9.2 -> 3.4 us in a C harness."""


STACK_CHANNELS = 16
"""A ``"rows"`` convolution of stride 1 over a multiple of this many channels takes the ``"stacked"``
form: its packed input copied once more as ``[N, OH, (W + pads) * KH * C + extra]``, each column
holding the ``KH`` rows of an output row's window, so that an output's window is one contiguous run
of ``KW * KH * C`` (one dot product and one horizontal sum per output instead of ``KH``). The run
is read as :func:`_stack_run` elements, the weights past the window zero (and ``extra`` zeros at
the end of each row for the last output's overhang). unet's 3x3 convolutions over 32 and 64
channels: 247 -> 156 us, 125 -> 82 us, 161 -> 133 us in a C harness; over 16 channels 170 -> 116 us
with runs of 160 (384 us with runs of 144: gcc's 16-byte tail)."""


STACK_ALIGN = 32


def _stack_run(k: int) -> int:
    """The length of a stacked window's run: ``k`` up to a multiple of :data:`STACK_ALIGN`."""
    return -(-k // STACK_ALIGN) * STACK_ALIGN


__all__ = ["MIN_DOT", "MIN_WINDOW", "OUTER_LANES", "OUTER_STEP", "STACK_ALIGN", "STACK_CHANNELS", "packed_conv"]
