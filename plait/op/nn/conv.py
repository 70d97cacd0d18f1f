"""Convolutions, matmul and dense (ONNX semantics, NCHW / OIHW).

Spatial attributes follow one convention: ``padding`` is (top, left, bottom, right), ``strides``
and ``dilation`` are (h, w). float16 inputs are computed in float32 and rounded once, as ONNX
Runtime does. Symbolic dims flow through where the output dim is a copy (batch,
channels); a spatial dim computed from a symbol is ``"?"`` unless the window leaves it unchanged.
References loop over the (small) kernel window only and hand the channel contraction to one
batched ``matmul``.

TE computes: convolutions are direct reductions over (input channels of the group, kernel rows,
kernel columns); zero padding is a padded stage that is inlined (a ``select`` guarding the load).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plait import te
from plait.ir.attrs import Attrs
from plait.op._common import (
    ANY_DIM, AttrSpec, Cost, Dim, Family, OnnxMap, OpPattern, RelError, TensorType, Type, as_tensor, broadcast_shapes,
    dim_mul, numel, same_dtype, tensor_bytes,
)
from plait.op._compute import (
    Shape, bcast_dims, bcast_shape, broadcast_pairs, compute_fact, dims_agree, make, out_tensor_type, shape_checks,
    shape_of, tir, up,
)
from plait.op.nn._window import (
    WINDOW_ATTRS, check_rank, fdtype, float_tensors, padded, rounded, taps, window_attrs, window_fits, window_ints,
    window_len, window_out,
)
from plait.op.tensor import require_dtype
from plait.tir.dtype import bits as dtype_bits
from plait.tir.expr import PrimExpr

defop = Family()

# ---- conv2d -------------------------------------------------------------------------------------


def _conv2d_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x, w = float_tensors(args, "conv2d", ("data", "weight"))
    check_rank(x, 4, "conv2d: data", "[N, C, H, W]")
    check_rank(w, 4, "conv2d: weight", "[O, C/groups, KH, KW]")
    s, p, d = window_attrs(attrs, "conv2d")
    g = attrs["groups"]
    if g < 1:
        raise RelError(f"conv2d: groups: expected a value >= 1, got {g}")
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if isinstance(c, int) and c % g:
        raise RelError(f"conv2d: input channels: expected a multiple of groups {g}, got {c}")
    if isinstance(o, int) and o % g:
        raise RelError(f"conv2d: output channels (weight dim 0): expected a multiple of groups {g}, got {o}")
    if isinstance(c, int) and isinstance(cg, int) and cg != c // g:
        raise RelError(f"conv2d: weight channels: expected {c // g} (input channels {c} / groups {g}), got {cg}")
    if not (isinstance(kh, int) and isinstance(kw, int)):
        raise RelError(f"conv2d: weight: expected a static kernel size, got {w}")
    oh = window_out(h, kh, s[0], d[0], p[0], p[2], what="conv2d", axis="height")
    ow = window_out(wd, kw, s[1], d[1], p[1], p[3], what="conv2d", axis="width")
    return TensorType((n, o, oh, ow), x.dtype)


def _conv2d_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, w = (np.asarray(a) for a in args)
    ct = fdtype(x)
    s, p, d, g = attrs["strides"], attrs["padding"], attrs["dilation"], attrs["groups"]
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = window_out(h, kh, s[0], d[0], p[0], p[2])
    ow = window_out(wd, kw, s[1], d[1], p[1], p[3])
    xp = np.pad(x.astype(ct, copy=False), ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    xp = xp.reshape(n, g, cg, *xp.shape[2:])
    cols = np.empty((n, g, cg, kh, kw, oh, ow), ct)
    for i, j, view in taps(xp, kh, kw, s, d, oh, ow):
        cols[:, :, :, i, j] = view
    wg = w.astype(ct, copy=False).reshape(g, o // g, cg * kh * kw)
    out = np.matmul(wg, cols.reshape(n, g, cg * kh * kw, oh * ow))  # [n, g, o/g, oh*ow]
    return out.reshape(n, o, oh, ow).astype(x.dtype, copy=False)


def _conv2d_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    x, w = args
    assert isinstance(w, TensorType)
    per_out = numel(w) / max(_static(w.shape[0]), 1)  # (C/groups) * KH * KW
    return Cost(flops=2.0 * numel(out) * per_out, bytes_read=tensor_bytes(x) + tensor_bytes(w),
                bytes_written=tensor_bytes(out))


def _static(d: Dim) -> int:
    return d if isinstance(d, int) else 1


defop("nn.conv2d", rel=_conv2d_rel, ref=_conv2d_ref, cost=_conv2d_cost, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
      num_inputs=2, attrs=WINDOW_ATTRS + (
          AttrSpec("groups", "int", 1, "number of channel groups (C for depthwise)"),
      ), doc="2-D convolution, data [N, C, H, W] * weight [O, C/groups, KH, KW] (ONNX Conv); bias is an add")

# ---- conv2d_transpose ---------------------------------------------------------------------------


def _tconv_params(attrs: Attrs) -> tuple:
    s, p, d = window_attrs(attrs, "conv2d_transpose")
    op = window_ints(attrs, "output_padding", 2, "conv2d_transpose", "h, w", 0)
    if op[0] >= s[0] or op[1] >= s[1]:
        raise RelError(f"conv2d_transpose: output_padding: expected values below the strides {s}, got {op}")
    return s, p, d, op


def _tconv_out(size: Dim, k: int, s: int, d: int, p0: int, p1: int, op: int, axis: str) -> Dim:
    if isinstance(size, str):
        return size if s == 1 and d * (k - 1) + op - p0 - p1 == 0 else ANY_DIM
    out = s * (size - 1) + op + d * (k - 1) + 1 - p0 - p1
    if out < 1:
        raise RelError(f"conv2d_transpose: {axis}: expected a positive output size, got {out} "
                       f"(input {size}, padding {p0} + {p1})")
    return out


def tconv_len(size: Any, k: int, s: int, d: int, p0: int, p1: int, op: int) -> Any:
    """The output length of a transposed convolution over an axis of ``size`` (an int or an int64 expression:
    a symbolic spatial axis; a result below 1 is refused by the relation on static sizes and left to the
    shape function, which refuses a negative one, on symbolic ones)."""
    return s * (size - 1) + (op + d * (k - 1) + 1 - p0 - p1)


def _tconv_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x, w = float_tensors(args, "conv2d_transpose", ("data", "weight"))
    check_rank(x, 4, "conv2d_transpose: data", "[N, C, H, W]")
    check_rank(w, 4, "conv2d_transpose: weight", "[C, O/groups, KH, KW]")
    s, p, d, op = _tconv_params(attrs)
    g = attrs["groups"]
    if g < 1:
        raise RelError(f"conv2d_transpose: groups: expected a value >= 1, got {g}")
    n, c, h, wd = x.shape
    wc, og, kh, kw = w.shape
    if isinstance(c, int) and c % g:
        raise RelError(f"conv2d_transpose: input channels: expected a multiple of groups {g}, got {c}")
    if isinstance(c, int) and isinstance(wc, int) and wc != c:
        raise RelError(f"conv2d_transpose: weight dim 0: expected {c} (input channels), got {wc}")
    if not (isinstance(kh, int) and isinstance(kw, int)):
        raise RelError(f"conv2d_transpose: weight: expected a static kernel size, got {w}")
    oh = _tconv_out(h, kh, s[0], d[0], p[0], p[2], op[0], "height")
    ow = _tconv_out(wd, kw, s[1], d[1], p[1], p[3], op[1], "width")
    return TensorType((n, og if g == 1 else dim_mul(og, g), oh, ow), x.dtype)


def _tconv_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, w = (np.asarray(a) for a in args)
    ct = fdtype(x)
    s, p, d, op = _tconv_params(attrs)
    g = attrs["groups"]
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    oh = _tconv_out(h, kh, s[0], d[0], p[0], p[2], op[0], "height")
    ow = _tconv_out(wd, kw, s[1], d[1], p[1], p[3], op[1], "width")
    cg = c // g
    # every input pixel contributes x * w[c, o, i, j] at (h*s + i*d, w*s + j*d) of the unpadded output
    wg = w.astype(ct, copy=False).reshape(g, cg, og * kh * kw).transpose(0, 2, 1)  # [g, og*kh*kw, cg]
    cols = np.matmul(wg, x.astype(ct, copy=False).reshape(n, g, cg, h * wd))  # [n, g, og*kh*kw, h*w]
    cols = cols.reshape(n, g, og, kh, kw, h, wd)
    full_h = max(s[0] * (h - 1) + d[0] * (kh - 1) + 1, p[0] + oh)
    full_w = max(s[1] * (wd - 1) + d[1] * (kw - 1) + 1, p[1] + ow)
    full = np.zeros((n, g, og, full_h, full_w), ct)
    for i in range(kh):
        for j in range(kw):
            h0, w0 = i * d[0], j * d[1]
            full[..., h0:h0 + s[0] * (h - 1) + 1:s[0], w0:w0 + s[1] * (wd - 1) + 1:s[1]] += cols[:, :, :, i, j]
    out = full[..., p[0]:p[0] + oh, p[1]:p[1] + ow]
    return np.ascontiguousarray(out.reshape(n, g * og, oh, ow)).astype(x.dtype, copy=False)


def _tconv_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    x, w = args
    assert isinstance(x, TensorType)
    # every input element meets (O/groups) * KH * KW weights
    per_in = numel(w) / max(_static(x.shape[1]), 1)
    return Cost(flops=2.0 * numel(x) * per_in, bytes_read=tensor_bytes(x) + tensor_bytes(w),
                bytes_written=tensor_bytes(out))


defop("nn.conv2d_transpose", rel=_tconv_rel, ref=_tconv_ref, cost=_tconv_cost,
      pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=2, attrs=WINDOW_ATTRS + (
          AttrSpec("groups", "int", 1, "number of channel groups"),
          AttrSpec("output_padding", "ints", (0, 0), "extra rows/columns added at the bottom/right (h, w)"),
      ), doc="transposed 2-D convolution, weight [C, O/groups, KH, KW] (ONNX ConvTranspose)")

# ---- matmul, dense -----------------------------------------------------------------------------


def _numeric_pair(args: tuple[Type, ...], what: str, names: tuple[str, str]) -> tuple[TensorType, TensorType]:
    a, b = (as_tensor(t, f"{what}: {nm}") for t, nm in zip(args, names))
    same_dtype((a, b), f"{what}: {names[0]} and {names[1]}")
    require_dtype(a, "numeric", f"{what}: {names[0]}")
    return a, b


def _same_dim(x: Dim, y: Dim, what: str) -> None:
    if isinstance(x, int) and isinstance(y, int) and x != y:
        raise RelError(f"{what}: expected {x}, got {y}")


def _matmul_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    a, b = _numeric_pair(args, "matmul", ("a", "b"))
    for t, nm in ((a, "a"), (b, "b")):
        if t.ndim == 0:
            raise RelError(f"matmul: {nm}: expected a tensor of rank >= 1, got {t}")
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    _same_dim(ka, kb, f"matmul: {'length' if b.ndim == 1 else 'rows'} of b (columns of a)")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    rows = (a.shape[-2],) if a.ndim >= 2 else ()
    cols = (b.shape[-1],) if b.ndim >= 2 else ()
    return TensorType(batch + rows + cols, a.dtype)


def _matmul_ref(args: list, attrs: Attrs) -> np.ndarray:
    a, b = (np.asarray(v) for v in args)
    ct = fdtype(a)
    return np.asarray(np.matmul(a.astype(ct, copy=False), b.astype(ct, copy=False))).astype(a.dtype, copy=False)


def _contract_cost(k_of: Callable[[TensorType, TensorType], Dim]) -> Callable[[tuple[Type, ...], Type, Attrs], Cost]:
    def cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
        a, b = args
        assert isinstance(a, TensorType) and isinstance(b, TensorType)
        k = _static(k_of(a, b))
        return Cost(flops=2.0 * numel(out) * k, bytes_read=tensor_bytes(a) + tensor_bytes(b),
                    bytes_written=tensor_bytes(out))

    return cost


defop("nn.matmul", rel=_matmul_rel, ref=_matmul_ref, cost=_contract_cost(lambda a, b: a.shape[-1]),
      pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=2,
      doc="matrix product with numpy matmul semantics (1-D promotion, broadcast batch dims; ONNX MatMul)")


def _dense_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x, w = _numeric_pair(args, "dense", ("data", "weight"))
    if x.ndim == 0:
        raise RelError(f"dense: data: expected a tensor of rank >= 1, got {x}")
    check_rank(w, 2, "dense: weight", "[units, K]")
    _same_dim(x.shape[-1], w.shape[1], "dense: weight dim 1 (data dim -1)")
    return TensorType(x.shape[:-1] + (w.shape[0],), x.dtype)


def _dense_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, w = (np.asarray(v) for v in args)
    ct = fdtype(x)
    return np.asarray(np.matmul(x.astype(ct, copy=False), w.astype(ct, copy=False).T)).astype(x.dtype, copy=False)


defop("nn.dense", rel=_dense_rel, ref=_dense_ref, cost=_contract_cost(lambda x, w: x.shape[-1]),
      pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=2,
      doc="data [..., K] @ weight[N, K].T -> [..., N] (ONNX Gemm with transB=1); bias is an add")


# ---- TE computes ----------------------------------------------------------------------------------


def conv_shape(op: str, x_shape: Shape, w_shape: Shape, attrs: Attrs, nhwc: bool = False) -> tuple[Shape, list]:
    """(the output shape a 2-D convolution derives from its inputs, its run-time checks): the output lengths
    of symbolic spatial axes are expressions, and each such axis must hold its dilated window."""
    n0, h, w = (x_shape[0], x_shape[1], x_shape[2]) if nhwc else (x_shape[0], x_shape[2], x_shape[3])
    o, _, kh, kw = w_shape
    s, d, p = attrs["strides"], attrs["dilation"], attrs["padding"]
    oh, ow = window_len(h, kh, s[0], d[0], p[0], p[2]), window_len(w, kw, s[1], d[1], p[1], p[3])
    return (n0, oh, ow, o) if nhwc else (n0, o, oh, ow), shape_checks(op, window_fits((h, w), (kh, kw), d, p))


@defop.compute("nn.conv2d")
def _conv2d(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.conv2d"
    x, wt = inputs
    o, cg, kh, kw = shape_of(wt, op)
    s, d, g = attrs["strides"], attrs["dilation"], attrs["groups"]
    like, checks = conv_shape(op, shape_of(x, op), shape_of(wt, op), attrs)
    out_shape, dtype = out_tensor_type(out_type, op, like=like)
    og = o // g
    if kh == kw == 1 and tuple(s) != (1, 1) and not any(attrs["padding"]):
        # a strided 1x1 convolution (a ResNet shortcut) is a 1x1 convolution of the subsampled input:
        # copied once, so that the product reads whole contiguous rows (2.4x -> about 1x ORT)
        n = shape_of(x, op)[0]
        c = shape_of(x, op)[1]
        x = make(op, (n, c, out_shape[2], out_shape[3]), lambda i, j, y, z: x[i, j, y * s[0], z * s[1]],
                 "subsample", inline=False)
        s = (1, 1)
    if _windowed(shape_of(x, op), (o, cg, kh, kw), out_shape, g, max(1, dtype_bits(x.dtype) // 8)):
        return rounded(op, out_shape, _window_product(op, x, wt, attrs, out_shape), dtype)
    if _wide_rows(shape_of(x, op), (o, cg, kh, kw), out_shape, g, s):
        return rounded(op, out_shape, _wide_depthwise(op, x, wt, attrs, out_shape), dtype)
    xp, _, _ = padded(op, x, attrs["padding"], 0.0)

    def body(n: PrimExpr, oc: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        rc = te.reduce_axis((0, cg), "rc")
        ry = te.reduce_axis((0, kh), "ry")
        rx = te.reduce_axis((0, kw), "rx")
        c = rc if g == 1 else oc // og * cg + rc
        v = up(xp[n, c, y * s[0] + ry * d[0], z * s[1] + rx * d[1]]) * up(wt[oc, rc, ry, rx])
        return te.sum(v, axis=[rc, ry, rx])

    acc = make(op, out_shape, body, checks=checks)
    return rounded(op, out_shape, acc, dtype)


SHORT_ROW = 8
"""Output rows shorter than this many pixels are short: a direct convolution vectorized along them
runs partial vectors (:func:`_windowed`)."""

MIN_WINDOW = 16
"""A convolution is computed over a copied window (:func:`_windowed`) when each output sums at least
this many products (``C * KH * KW``)..."""

MIN_WINDOW_REUSE = 16
"""... and every copied element meets at least this many weights (output channels)..."""

MAX_WINDOW_BYTES = 256 << 10
"""... and the copy (``N * C * KH * KW * OH * OW`` elements of the input's dtype) takes at most this many
bytes."""


def _windowed(x_shape: tuple, w_shape: tuple, out_shape: Any, groups: int, elem_bytes: int = 4) -> bool:
    """Whether a float convolution is computed as a product over its copied windows (im2col,
    :func:`_window_product`) rather than as a direct loop nest: on a machine with vectors (lowering's
    ``simd_bits`` fact; never on a microcontroller, whose RAM the copy would take), a convolution
    with short output rows (:data:`SHORT_ROW`), a kernel larger than 1x1 and enough work per copied
    element (:data:`MIN_WINDOW`, :data:`MIN_WINDOW_REUSE`, :data:`MAX_WINDOW_BYTES`). The product
    then has the shape of a 1x1 convolution over ``C * KH * KW`` channels and rows of ``OH * OW``
    pixels, which the cpu rules fuse into one long row and tile over whole vectors. DS-CNN's stem (1
    channel, 10x4 kernel, stride 2, 64 outputs at 25x5) ran a partial vector of 5 per output row,
    1.4x ONNX Runtime alone."""
    if groups != 1 or compute_fact("simd_bits", 128) < 128:
        return False
    dims = (*x_shape, *w_shape, *out_shape)
    if not all(isinstance(d, int) for d in dims):
        return False
    o, c, kh, kw = w_shape
    n, _, oh, ow = out_shape
    k = c * kh * kw
    return (kh * kw > 1 and ow < SHORT_ROW and k >= MIN_WINDOW and o >= MIN_WINDOW_REUSE
            and n * k * oh * ow * elem_bytes <= MAX_WINDOW_BYTES)


def _window_product(op: str, x: Any, wt: Any, attrs: Attrs, out_shape: Any) -> Any:
    """The convolution as ``acc[n, oc, y, z] = sum(col[n, t, y, z] * w[oc, t])`` over one reduce loop
    ``t = (c * KH + ry) * KW + rx``, each output's window copied once into ``col`` from the zero-padded
    input (both copies are stages of their own: no guard in the copy loop). One reduce loop, not three:
    gcc kept the register tile of the nested (ry, rx) loops in memory (DS-CNN's stem 20 -> 9 us)."""
    s, d = attrs["strides"], attrs["dilation"]
    n, _, oh, ow = out_shape
    _, cg, kh, kw = shape_of(wt, op)
    xp, _, _ = padded(op, x, attrs["padding"], 0.0, inline=False)

    def window(i: PrimExpr, t: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        c, ry, rx = t // (kh * kw), t // kw % kh, t % kw
        return xp[i, c, y * s[0] + ry * d[0], z * s[1] + rx * d[1]]

    col = make(op, (n, cg * kh * kw, oh, ow), window, "window", inline=False)

    def body(i: PrimExpr, oc: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        t = te.reduce_axis((0, cg * kh * kw), "rt")
        return te.sum(up(col[i, t, y, z]) * up(wt[oc, t // (kh * kw), t // kw % kh, t % kw]), axis=[t])

    return make(op, out_shape, body)


def _wide_rows(x_shape: tuple, w_shape: tuple, out_shape: Any, groups: int, strides: Any) -> bool:
    """Whether a depthwise convolution (one input and one output channel per group) of stride 1 with
    short output rows (:data:`SHORT_ROW`) is computed over the full width of its padded input
    (:func:`_wide_depthwise`), on a machine with vectors."""
    if compute_fact("simd_bits", 128) < 128 or tuple(strides) != (1, 1):
        return False
    if not all(isinstance(d, int) for d in (*x_shape, *w_shape, *out_shape)):
        return False
    o, cg, kh, kw = w_shape
    return cg == 1 and groups == o == x_shape[1] and kh * kw > 1 and out_shape[3] < SHORT_ROW


def _wide_depthwise(op: str, x: Any, wt: Any, attrs: Attrs, out_shape: Any) -> Any:
    """A depthwise convolution of stride 1 computed on rows as wide as its padded input, ``Wp``:
    ``wide[n, c, y, q] = sum(xp[n, c, y + ry * dy, q + rx * dx] * w[c, 0, ry, rx])`` for ``q < Wp``,
    then cropped to ``q < OW``. With the row stride of ``wide`` equal to the padded input's, the
    loads are contiguous along the fused (y, q) loop: one long row of whole vectors per channel
    (DS-CNN's 25 x 5 outputs: 175 wide outputs, 11 AVX-512 vectors, instead of 25 partial vectors
    of 5). The columns ``q >= OW`` read into the next row (their values are dropped): the padded
    copy has rows enough below for the last row's reads."""
    d = attrs["dilation"]
    top, left, bottom, right = attrs["padding"]
    n, c, oh, ow = out_shape
    _, _, kh, kw = shape_of(wt, op)
    h, w = shape_of(x, op)[2:]
    wp = w + left + right
    extra = -(-((kw - 1) * d[1]) // wp)  # rows below for the reads of the last row's dropped columns
    xp, _, _ = padded(op, x, (top, left, bottom + extra, right), 0.0, inline=False)

    def body(i: PrimExpr, ch: PrimExpr, q: PrimExpr) -> Any:  # q: a flat position in the padded rows
        ry = te.reduce_axis((0, kh), "ry")
        rx = te.reduce_axis((0, kw), "rx")
        f = q + ry * (d[0] * wp) + rx * d[1]
        return te.sum(up(xp[i, ch, f // wp, f % wp]) * up(wt[ch, 0, ry, rx]), axis=[ry, rx])

    wide = make(op, (n, c, oh * wp), body, "wide", inline=False)
    return make(op, out_shape, lambda i, ch, y, z: wide[i, ch, y * wp + z])


@defop.compute("nn.conv2d_transpose")
def _conv2d_transpose(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.conv2d_transpose"
    x, wt = inputs
    n, c, h, w = shape_of(x, op)
    _, og, kh, kw = shape_of(wt, op)
    s, p, d, g = attrs["strides"], attrs["padding"], attrs["dilation"], attrs["groups"]
    op_h, op_w = attrs["output_padding"]
    like = (n, og * g, tconv_len(h, kh, s[0], d[0], p[0], p[2], op_h), tconv_len(w, kw, s[1], d[1], p[1], p[3], op_w))
    out_shape, dtype = out_tensor_type(out_type, op, like=like)
    cg = c // g
    if tuple(d) != (1, 1):
        return rounded(op, out_shape, _tconv_scatter(x, wt, out_shape, s, p, d, g), dtype)

    # 1. every (input pixel, kernel tap) product, summed over the input channels: a 1x1 convolution
    #    (a matrix product, contiguous along the input row) into cols[n, oc, ky, kx, hy, hx]
    def gemm(b: PrimExpr, oc: PrimExpr, ky: PrimExpr, kx: PrimExpr, hy: PrimExpr, hx: PrimExpr) -> Any:
        rc = te.reduce_axis((0, cg), "rc")
        c_in = rc if g == 1 else oc // og * cg + rc
        return te.sum(up(x[b, c_in, hy, hx]) * up(wt[c_in, oc if g == 1 else oc % og, ky, kx]), axis=[rc])

    cols = make(op, (n, out_shape[1], kh, kw, h, w), gemm, "cols")
    # 2. each output pixel gathers the taps that reach it: with y + pad = hy * s + ky, the taps of
    #    output row y are ky = (y + pad) % s + j * s for j < ceil(kh / s) (one tap when kh <= s)
    ty, tx = -(-kh // s[0]), -(-kw // s[1])

    def taps(pos: PrimExpr, j: Any, k: int, st: int, pad: int, size: int, extent: int, nj: int) -> tuple:
        """(tap, input position, guards) of output position ``pos`` for its ``j``-th tap."""
        kk, hh = ((pos + pad) % st + j * st, (pos + pad) // st - j) if st > 1 else (j, pos + pad - j)
        conds = [kk < k] if k % st else []
        if nj > 1:
            conds.append(hh >= 0)
        if not (isinstance(extent, int) and isinstance(size, int)) or (extent - 1 + pad) // st >= size:
            conds.append(hh < size)
        return kk, hh, conds

    def gather(b: PrimExpr, oc: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        axes = []
        jy: Any = 0
        jx: Any = 0
        if ty > 1:
            jy = te.reduce_axis((0, ty), "jy")
            axes.append(jy)
        if tx > 1:
            jx = te.reduce_axis((0, tx), "jx")
            axes.append(jx)
        ky, hy, cy = taps(y, jy, kh, s[0], p[0], h, out_shape[2], ty)
        kx, hx, cx = taps(z, jx, kw, s[1], p[1], w, out_shape[3], tx)
        v = cols[b, oc, ky, kx, hy, hx]
        if cy or cx:
            v = tir.select(tir.all_(*cy, *cx), v, tir.const(0.0, v.dtype))
        return te.sum(v, axis=axes) if axes else v

    return rounded(op, out_shape, make(op, out_shape, gather), dtype)


def _tconv_scatter(x: Any, wt: Any, out_shape: Any, s: Any, p: Any, d: Any, g: int) -> Any:
    """The transposed convolution as a reduction over every (input channel, tap) with a guard
    (dilated kernels only: the gather form handles dilation 1)."""
    op = "nn.conv2d_transpose"
    _, c, h, w = shape_of(x, op)
    _, og, kh, kw = shape_of(wt, op)
    cg = c // g

    def body(n: PrimExpr, oc: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        rc = te.reduce_axis((0, cg), "rc")
        ky = te.reduce_axis((0, kh), "ky")
        kx = te.reduce_axis((0, kw), "kx")
        # input pixel (hy, hx) reaches output (y, z) through tap (ky, kx) if y + pad = hy * s + ky * d
        ty, tx = y + p[0] - ky * d[0], z + p[1] - kx * d[1]
        hy, hx = (ty, tx) if s == (1, 1) else (ty // s[0], tx // s[1])
        conds = [ty >= 0, tx >= 0, hy < h, hx < w]
        if s[0] > 1:
            conds.append(tir.eq(ty % s[0], 0))
        if s[1] > 1:
            conds.append(tir.eq(tx % s[1], 0))
        c_in = rc if g == 1 else oc // og * cg + rc
        prod = up(x[n, c_in, hy, hx]) * up(wt[c_in, oc if g == 1 else oc % og, ky, kx])
        return te.sum(tir.select(tir.all_(*conds), prod, tir.const(0.0, prod.dtype)), axis=[rc, ky, kx])

    return make(op, out_shape, body)


# ---- matmul, dense ----------------------------------------------------------------------------


def matmul_indices(sa: Shape, sb: Shape, nb: int, i: tuple, k: PrimExpr) -> tuple[tuple, tuple]:
    """The indices into ``a`` and ``b`` of a (batched, numpy-broadcast) matrix product's output element
    ``i`` at reduction index ``k``: ``nb`` leading batch dims, then the row (when ``a`` is a matrix)
    and the column (when ``b`` is)."""
    batch, rest = i[:nb], list(i[nb:])
    row = [rest.pop(0)] if len(sa) >= 2 else []
    col = [rest.pop(0)] if len(sb) >= 2 else []
    return bcast_dims(sa[:-2], batch) + tuple(row) + (k,), bcast_dims(sb[:-2], batch) + (k,) + tuple(col)


def matmul_shape(op: str, sa: Shape, sb: Shape) -> tuple[Shape, list]:
    """(the result shape of a numpy-style matrix product of ``sa`` and ``sb``, its run-time checks): the
    broadcast batch dims, the row and the column; the reduced lengths and the batch dims must agree when a
    symbolic dim is among them."""
    batch = bcast_shape([sa[:-2], sb[:-2]])
    like = tuple(batch) + ((sa[-2],) if len(sa) >= 2 else ()) + ((sb[-1],) if len(sb) >= 2 else ())
    k_b = sb[-2] if len(sb) >= 2 else sb[0]
    return like, dims_agree(op, [(sa[-1], k_b)] + broadcast_pairs([sa[:-2], sb[:-2]], batch))


def dense_shape(op: str, sx: Shape, sw: Shape) -> tuple[Shape, list]:
    """(the result shape of ``x`` times the transposed weight ``sw`` (units, k), its run-time checks)."""
    return tuple(sx[:-1]) + (sw[0],), dims_agree(op, [(sx[-1], sw[1])])


@defop.compute("nn.matmul")
def _matmul(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.matmul"
    a, b = inputs
    sa, sb = shape_of(a, op), shape_of(b, op)
    like, checks = matmul_shape(op, sa, sb)
    out_shape, dtype = out_tensor_type(out_type, op, like=like)
    k_len = sa[-1]
    nb = len(out_shape) - (len(sa) >= 2) - (len(sb) >= 2)  # batch dims of the result

    def body(*i: PrimExpr) -> Any:
        k = te.reduce_axis((0, k_len), "k")
        ia, ib = matmul_indices(sa, sb, nb, i, k)
        return te.sum(up(a[ia]) * up(b[ib]), axis=[k])

    acc = make(op, out_shape, body, checks=checks)
    return rounded(op, out_shape, acc, dtype)


@defop.compute("nn.dense")
def _dense(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.dense"
    x, wt = inputs
    k_len = shape_of(x, op)[-1]
    like, checks = dense_shape(op, shape_of(x, op), shape_of(wt, op))
    out_shape, dtype = out_tensor_type(out_type, op, like=like)

    def body(*i: PrimExpr) -> Any:
        k = te.reduce_axis((0, k_len), "k")
        return te.sum(up(x[tuple(i[:-1]) + (k,)]) * up(wt[i[-1], k]), axis=[k])

    acc = make(op, out_shape, body, checks=checks)
    return rounded(op, out_shape, acc, dtype)


# ---- ONNX -----------------------------------------------------------------------------------------


def _onnx_kernel(ex: Any, i: int) -> list[int] | None:
    ks = ex.arg_type(i).shape[2:]
    return [int(k) for k in ks] if all(isinstance(k, int) for k in ks) else None


def _conv_onnx(ex: Any) -> str:
    a = ex.attrs
    return ex.node("Conv", ex.ins, kernel_shape=_onnx_kernel(ex, 1), strides=list(a["strides"]), pads=list(a["padding"]),
                   dilations=list(a["dilation"]), group=a["groups"])


def _conv_transpose_onnx(ex: Any) -> str:
    a = ex.attrs
    return ex.node("ConvTranspose", ex.ins, kernel_shape=_onnx_kernel(ex, 1), strides=list(a["strides"]),
                   pads=list(a["padding"]), dilations=list(a["dilation"]), group=a["groups"],
                   output_padding=list(a["output_padding"]))


def _dense_onnx(ex: Any) -> str:
    if ex.arg_type(0).ndim == 2:
        return ex.node("Gemm", ex.ins, transB=1)
    weight = ex.const_value(1)
    if weight is not None:
        wt = ex.const(np.ascontiguousarray(weight.T), hint="weight_t")
    else:
        wt = ex.node("Transpose", [ex.ins[1]], perm=[1, 0])
    return ex.node("MatMul", [ex.ins[0], wt])


# imported by the frontend's converters (Conv/ConvTranspose with auto_pad, 1-D and 3-D forms and the
# bias; Gemm and MatMul compositions); exported by code (a conv's or 2-D dense's bias add is fused
# back into the node by the exporter)
defop.onnx("nn.conv2d", OnnxMap("Conv", convert=False, export=_conv_onnx))
defop.onnx("nn.conv2d_transpose", OnnxMap("ConvTranspose", convert=False, export=_conv_transpose_onnx))
defop.onnx("nn.matmul", OnnxMap("MatMul", convert=False))
defop.onnx("nn.dense", OnnxMap("Gemm", convert=False, export=_dense_onnx))
