"""The int16 / channels-last forms of the integer convolutions (:mod:`plait.op.qnn_nn`'s
``qnn.conv2d``): depthwise convolutions channels-last (:func:`_depthwise`) or over whole padded planes
(:func:`_depthwise_planes`), and stride-1 convolutions too short to pack for dot products over padded
planes (:func:`_conv_planes`); with :func:`packs` (whether a machine packs at all) and
:func:`_widened`, which the dot-product forms share. Integers are exact: every form gives the same
numbers as the reference."""

from __future__ import annotations

from typing import Any

from plait import te
from plait.ir.attrs import Attrs
from plait.op._compute import compute_fact, make, shape_of, tir
from plait.op.nn._window import inside
from plait.tir.expr import PrimExpr


def _widened(v: PrimExpr, zp: int) -> PrimExpr:
    """A loaded 8-bit value as int32 minus its zero point."""
    w = tir.cast("int32", v)
    return w - zp if zp else w


def packs() -> bool:
    """Whether the integer convolutions pack their input (a copy as large as it, or larger) for dot
    products: on a machine with vectors or with paired 16-bit multiply-accumulates (lowering's
    ``simd_bits`` and ``narrow_macs`` facts: a host, a Cortex-M4/M7/M55 whose SMLAxx the dot loops
    reach; packed when no fact is stated), not on a core without either (Cortex-M0/M3), whose scarce
    RAM the copy would take for no gain."""
    return compute_fact("simd_bits", 128) >= 128 or compute_fact("narrow_macs", 2) >= 2


MIN_DEPTHWISE = 8
"""A depthwise convolution of at least this many channels is computed channels-last (vectors along
the channels): its rows are often too short to vectorize along the width (ds_cnn: 5 columns)..."""

WIDE_DEPTHWISE = 32
"""...unless its output rows have at least this many columns: then the direct loop nest, vectors
along the rows, skips the two transposing copies (a 48 x 48 x 16 layer: 1.8x faster; of stride 1
it takes whole planes, :func:`_depthwise_planes`, first)."""


def _depthwise(op: str, x: Any, wt: Any, attrs: Attrs, out_shape: Any) -> Any | None:
    """A depthwise convolution (one input and one output channel per group) channels-last: the
    input packed ``[N, H + pads, (W + pads) * C]`` and the weight ``[KH, KW * C]`` as int16 minus
    their zero points, the sums ``[N, OH, OW, C]`` vectorized along ``C``, then read back as NCHW."""
    xs, ws = shape_of(x, op), shape_of(wt, op)
    n, c, h, w = xs
    o, cg, kh, kw = ws
    if attrs["groups"] != c or o != c or cg != 1 or c < MIN_DEPTHWISE or not packs() or \
            not all(isinstance(v, int) for v in (*xs, *ws, out_shape[3])) or out_shape[3] >= WIDE_DEPTHWISE:
        return None
    acc = depthwise_sums(op, lambda i, ch, iy, ix: x[i, ch, iy, ix], (n, h, w, c), wt, attrs,
                         (out_shape[2], out_shape[3]), "nhwc")
    return make(op, out_shape, lambda i, ch, y, z: acc[i, y, z, ch])


def depthwise_sums(op: str, value: Any, nhwc: tuple, wt: Any, attrs: Attrs, out_hw: tuple, stage: str) -> Any:
    """The int32 sums ``[N, OH, OW, C]`` of a depthwise convolution channels-last, whatever the input's
    layout: ``value(i, ch, iy, ix)`` reads its element, ``nhwc`` its ``(N, H, W, C)``. The input packed
    ``[N, H + pads, (W + pads) * C]`` and the weight ``[KH, KW * C]`` as int16 minus their zero points
    (stages ``pack`` and ``wpack``), the sums vectorized along ``C`` (stage ``stage``: int_rules)."""
    n, h, w, c = nhwc
    _, _, kh, kw = shape_of(wt, op)
    s, d = attrs["strides"], attrs["dilation"]
    top, left, bottom, right = attrs["padding"]
    zx, zw = attrs["input_zero_point"], attrs["kernel_zero_point"]

    def pack(i: PrimExpr, yy: PrimExpr, f: PrimExpr) -> PrimExpr:
        iy, ix = yy - top, f // c - left
        v = tir.cast("int16", _widened(value(i, f % c, iy, ix), zx))
        return tir.select(inside(iy, ix, h, w), v, tir.const(0, "int16")) if any(attrs["padding"]) else v

    xq = make(op, (n, h + top + bottom, (w + left + right) * c), pack, "pack", inline=False)
    wq = make(op, (kh, kw * c), lambda ry, f: tir.cast("int16", _widened(wt[f % c, 0, ry, f // c], zw)),
              "wpack", inline=False)

    def body(i: PrimExpr, y: PrimExpr, z: PrimExpr, ch: PrimExpr) -> Any:
        ry, rx = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")
        v = tir.cast("int32", xq[i, y * s[0] + ry * d[0], (z * s[1] + rx * d[1]) * c + ch]) * \
            tir.cast("int32", wq[ry, rx * c + ch])
        return te.sum(v, axis=[ry, rx])

    return make(op, (n, *out_hw, c), body, stage)


PLANES_WASTE = (5, 4)
"""A depthwise convolution is computed over whole padded planes when its padded rows (of one phase,
strided) are at most 5/4 of its output rows (the extra columns are computed for nothing):
mobilenet's 24 x 24 x 96 layer 1.4x faster than channels-last; ds_cnn's 5-column rows (7 padded)
are not."""


MIN_PLANE_ROW = 16
"""...and its output rows have at least this many columns: the requantization of shorter rows (read
back from the planes row by row) is left scalar by gcc (one 16-lane vector of int8 per step), the
channels-last form's is vectorized along the channels (mobilenet's 12 x 12 x 144 layer 1.5x
faster). Rows that are not a multiple of it are copied out of the planes first (``compact``)."""


def _depthwise_planes(op: str, x: Any, wt: Any, attrs: Attrs, out_shape: Any) -> Any | None:
    """A depthwise convolution over whole padded planes: the input packed as int16 minus its zero
    point, ``[N, C, S, S, (HQ + 1) * WQ]``: for stride ``S``, its ``S * S`` phases (the padded rows
    and columns of each residue modulo ``S``, ``HQ x WQ`` each; one phase of the padded plane for
    stride 1), plus one zero row for the last row's overhang; the sums ``[N, C, OH * WQ]`` computed
    at every column of a phase's rows, so that each tap reads a contiguous run of one phase (vectors
    along it, no transposes, no strided loads), the extra columns left unread (``WQ / OW`` times the
    multiply-adds, at most :data:`PLANES_WASTE`). Dilation only with stride 1."""
    xs, ws = shape_of(x, op), shape_of(wt, op)
    n, c, h, w = xs
    o, cg, kh, kw = ws
    st, d = tuple(attrs["strides"]), tuple(attrs["dilation"])
    if attrs["groups"] != c or o != c or cg != 1 or st[0] != st[1] or (st != (1, 1) and d != (1, 1)) or \
            not packs() or not all(isinstance(v, int) for v in (*xs, *ws, out_shape[3])):
        return None
    s = st[0]
    top, left, bottom, right = attrs["padding"]
    zx, zw = attrs["input_zero_point"], attrs["kernel_zero_point"]
    hq, wq = -(-(h + top + bottom) // s), -(-(w + left + right) // s)
    as_c = compute_fact("compiled_as_c", True)  # (measured with gcc: LLVM keeps stride 1, any row)
    if wq * PLANES_WASTE[1] > out_shape[3] * PLANES_WASTE[0] or \
            (out_shape[3] < MIN_PLANE_ROW if as_c else s != 1):
        return None

    if s == 1:
        def pack(i: PrimExpr, ch: PrimExpr, py: PrimExpr, px: PrimExpr, f: PrimExpr) -> PrimExpr:
            iy, ix = f // wq - top, f % wq - left
            v = tir.cast("int16", _widened(x[i, ch, iy, ix], zx))
            return tir.select(inside(iy, ix, h, w), v, tir.const(0, "int16"))
    else:  # strided: a padded copy first, its rows grouped by phase ([N, C, S, (HQ + 1) * WQ * S]: its
        # bounds checks vectorize), then each phase a strided run of it (one loop, no division)
        def padded_rows(i: PrimExpr, ch: PrimExpr, py: PrimExpr, g: PrimExpr) -> PrimExpr:
            iy, ix = g // (wq * s) * s + py - top, g % (wq * s) - left
            return tir.select(inside(iy, ix, h, w), x[i, ch, iy, ix], tir.const(zx, x.dtype))

        xp = make(op, (n, c, s, (hq + 1) * wq * s), padded_rows, "pad", inline=False)

        def pack(i: PrimExpr, ch: PrimExpr, py: PrimExpr, px: PrimExpr, f: PrimExpr) -> PrimExpr:
            return tir.cast("int16", _widened(xp[i, ch, py, f * s + px], zx))

    xq = make(op, (n, c, s, s, (hq + 1) * wq), pack, "pack", inline=False)
    wq_ = make(op, (c, kh, kw), lambda ch, ry, rx: tir.cast("int16", _widened(wt[ch, 0, ry, rx], zw)),
               "wpack", inline=False)

    def body(i: PrimExpr, ch: PrimExpr, f: PrimExpr) -> Any:
        ry, rx = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")
        if s == 1:
            xi = (i, ch, 0, 0, f + ry * (d[0] * wq) + rx * d[1])
        else:
            xi = (i, ch, ry % s, rx % s, f + ry // s * wq + rx // s)
        v = tir.cast("int32", xq[xi]) * tir.cast("int32", wq_[ch, ry, rx])
        return te.sum(v, axis=[ry, rx])

    acc = make(op, (n, c, out_shape[2] * wq), body, "planes")
    if out_shape[3] % MIN_PLANE_ROW == 0 or not as_c:
        return make(op, out_shape, lambda i, ch, y, z: acc[i, ch, y * wq + z])
    # the sums without the extra columns, so that the epilogue (requantization) runs over whole
    # planes: read row by row from the planes, rows of 24 leave gcc's 16-lane int8 loop a scalar
    # tail of 8 per row (mobilenet's 24 x 24 x 96 layer 53 -> 40 us with this copy)
    return make(op, out_shape, lambda i, ch, y, z: acc[i, ch, y * wq + z], "compact", inline=False)


def _conv_planes(op: str, x: Any, wt: Any, attrs: Attrs, out_shape: Any) -> Any | None:
    """A convolution of stride 1 with one group, a spatial kernel and a window too short for dot
    products (a few channels: under ``_qnn_forms.MIN_WINDOW`` taps when compiled as C, under ``MIN_DOT``
    otherwise: unet's 3-channel 3 x 3 first layer under LLVM) over whole padded planes, as
    :func:`_depthwise_planes`: the input packed ``[N, C, (H + pads + 1) * (W + pads)]`` as int16
    minus its zero point, the sums ``[N, O, OH * (W + pads)]`` of ``C * KH * KW`` taps, each a
    contiguous run of a plane (int_rules' pixel rows: one output channel x a block of pixels, vectors
    along the pixels). unet's 3 -> 16 channel layer at 64 x 64: 215 -> 60 us."""
    xs, ws = shape_of(x, op), shape_of(wt, op)
    n, c, h, w = xs
    o, cg, kh, kw = ws
    if attrs["groups"] != 1 or kh * kw < 2 or tuple(attrs["strides"]) != (1, 1) or not packs() or \
            not all(isinstance(v, int) for v in (*xs, *ws, out_shape[3])):
        return None
    d = attrs["dilation"]
    top, left, bottom, right = attrs["padding"]
    zx, zw = attrs["input_zero_point"], attrs["kernel_zero_point"]
    hp, wp = h + top + bottom, w + left + right
    if wp * PLANES_WASTE[1] > out_shape[3] * PLANES_WASTE[0]:
        return None

    def pack(i: PrimExpr, ch: PrimExpr, f: PrimExpr) -> PrimExpr:
        iy, ix = f // wp - top, f % wp - left
        v = tir.cast("int16", _widened(x[i, ch, iy, ix], zx))
        return tir.select(inside(iy, ix, h, w), v, tir.const(0, "int16"))

    xq = make(op, (n, c, (hp + 1) * wp), pack, "pack", inline=False)
    wq = make(op, (o, c, kh, kw), lambda oc, ch, ry, rx: tir.cast("int16", _widened(wt[oc, ch, ry, rx], zw)),
              "wpack", inline=False)

    def body(i: PrimExpr, oc: PrimExpr, f: PrimExpr) -> Any:
        rc, ry, rx = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")
        v = tir.cast("int32", xq[i, rc, f + ry * (d[0] * wp) + rx * d[1]]) * tir.cast("int32", wq[oc, rc, ry, rx])
        return te.sum(v, axis=[rc, ry, rx])

    acc = make(op, (n, o, out_shape[2] * wp), body, "planes")
    return make(op, out_shape, lambda i, oc, y, z: acc[i, oc, y * wp + z])
