"""Integer convolution and matrix products: ``qnn.conv2d``, ``qnn.dense``, ``qnn.matmul``.

Each takes int8 / uint8 data and weights with per-tensor zero points (attributes) and returns the
exact int32 sum of ``(x - x_zero_point) * (w - w_zero_point)`` (ONNX ConvInteger / MatMulInteger);
a bias is an int32 ``add`` and the scaling back to 8 bits a ``qnn.requantize``. Shapes and window
attributes are those of ``nn.conv2d`` / ``nn.dense`` / ``nn.matmul`` (their type relations are
reused); padding pads with the input zero point, i.e. contributes nothing.

TE computes accumulate int32 products of int32-widened loads. A convolution with one group whose
window rows are long enough (:func:`plait.op._qnn_forms.packed_conv`) is computed as dot products over contiguous
memory instead: the input is packed channels-last (``[N, H + pads, (W + pads) * C]``, padded with
the zero point) and the weight as ``[O, KH, KW * C]``, so that each output is ``KH`` sums over
contiguous ``KW * C`` runs of both, which gcc vectorizes with its dot-product pattern (u8 x s8 ->
``vpdpbusd`` / ``pmaddubsw``; s16 x s16 -> ``vpdpwssd`` / ``pmaddwd``; SMLAD on Cortex-M with DSP).
With int8 weights of zero point 0 the packed input is uint8 (an int8 input is shifted by 128) and
the sum is corrected by ``zero_point * sum(weights of the output channel)``; otherwise both are
packed as int16 with their zero points subtracted. A depthwise convolution is summed over whole
padded planes (``_depthwise_planes``: rows of 16 or more, little waste; strided ones by phases),
channels-last (``_depthwise``, short rows) or by the direct nest; so is a stride-1 convolution whose
window is too short to pack (``_conv_planes``, a few input channels): those forms are in
:mod:`plait.op._qnn_planes`. ``qnn.dense`` and
``qnn.matmul`` with a matrix are dot products over packed rows the same way (:func:`_packed_product`).
Integers are exact: every form gives the same numbers as the reference.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plait import te
from plait.ir.attrs import Attrs
from plait.op._common import AttrSpec, Cost, Family, OnnxMap, OpPattern, RelError, TensorType, Type, as_tensor
from plait.op._compute import make, out_tensor_type, shape_of, tir
from plait.op.nn import conv as fconv
from plait.op.nn._window import WINDOW_ATTRS, inside, padded
from plait.op._qnn_forms import MIN_DOT, OUTER_LANES, OUTER_STEP, _stack_run, packed_conv
from plait.op._qnn_nhwc import nhwc_conv2d
from plait.op._qnn_planes import _conv_planes, _depthwise, _depthwise_planes, _widened, packs
from plait.tir.dtype import int_range
from plait.tir.expr import PrimExpr

defop = Family()

INT8_DTYPES = ("int8", "uint8")


def _int8_pair(args: tuple[Type, ...], what: str, names: tuple[str, str], attrs: Attrs,
               zps: tuple[str, str]) -> tuple[Type, ...]:
    """The arguments as float32 types of the same shapes (for the float operator's relation), after
    checking their dtypes and zero points."""
    out = []
    for t, nm, zp in zip(args, names, zps):
        x = as_tensor(t, f"{what}: {nm}")
        if x.dtype not in INT8_DTYPES:
            raise RelError(f"{what}: {nm}: expected int8 or uint8, got {x}")
        lo, hi = int_range(x.dtype)
        if not lo <= attrs[zp] <= hi:
            raise RelError(f"{what}: {zp}: expected a value in [{lo}, {hi}] ({x.dtype}), got {attrs[zp]}")
        out.append(TensorType(x.shape, "float32"))
    return tuple(out)


def _int_rel(float_op: str, names: tuple[str, str], zps: tuple[str, str]) -> Callable[[tuple[Type, ...], Attrs], Type]:
    rel = fconv.defop.get(float_op).rel

    def relation(args: tuple[Type, ...], attrs: Attrs) -> Type:
        what = float_op.split(".")[-1]
        t = rel(_int8_pair(args, what, names, attrs, zps), attrs)
        assert isinstance(t, TensorType)
        return TensorType(t.shape, "int32")

    return relation


def _int_ref(float_op: str, zps: tuple[str, str]) -> Callable[[list, Attrs], np.ndarray]:
    """The float operator's reference on the zero-point-shifted values in float64 (exact: every
    partial sum of 8-bit products stays far below 2**53)."""
    ref = fconv.defop.get(float_op).ref

    def reference(args: list, attrs: Attrs) -> np.ndarray:
        shifted = [(np.asarray(a).astype(np.int64) - attrs[z]).astype(np.float64) for a, z in zip(args, zps)]
        return np.rint(ref(shifted, attrs)).astype(np.int64).astype(np.int32)

    return reference


def _int_cost(float_op: str) -> Callable[[tuple[Type, ...], Type, Attrs], Cost]:
    """The float operator's cost (as many multiply-adds; the bytes follow the 8-bit types)."""
    return fconv.defop.get(float_op).cost


def _zp(name: str, doc: str) -> AttrSpec:
    return AttrSpec(name, "int", 0, doc)


CONV_ZPS = ("input_zero_point", "kernel_zero_point")
MM_ZPS = ("a_zero_point", "b_zero_point")

LAYOUTS = ("NCHW", "NHWC")
TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)
"""The permutations (``transpose`` axes) between the two data layouts of ``qnn.conv2d``."""


def _layout(attrs: Attrs) -> str:
    layout = attrs["data_layout"]
    if layout not in LAYOUTS:
        raise RelError(f"conv2d: data_layout: expected NCHW or NHWC, got {layout!r}")
    return layout


def _permuted(t: Type, perm: tuple[int, ...]) -> Type:
    if not isinstance(t, TensorType) or t.ndim != 4:
        return t  # (the float relation names what is wrong)
    return TensorType(tuple(t.shape[p] for p in perm), t.dtype)


def _conv_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    """``nn.conv2d``'s relation, the data and result channels-last with ``data_layout="NHWC"``."""
    rel = _int_rel("nn.conv2d", ("data", "weight"), CONV_ZPS)
    if _layout(attrs) == "NCHW":
        return rel(args, attrs)
    if isinstance(args[0], TensorType) and args[0].ndim != 4:
        raise RelError(f"conv2d: data: expected a 4-D NHWC tensor, got {args[0]}")
    return _permuted(rel((_permuted(args[0], TO_NCHW), *args[1:]), attrs), TO_NHWC)


def _conv_ref(args: list, attrs: Attrs) -> np.ndarray:
    ref = _int_ref("nn.conv2d", CONV_ZPS)
    if _layout(attrs) == "NCHW":
        return ref(args, attrs)
    return np.ascontiguousarray(np.transpose(ref([np.transpose(args[0], TO_NCHW), args[1]], attrs), TO_NHWC))


def _conv_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    cost = _int_cost("nn.conv2d")
    if attrs["data_layout"] == "NCHW":
        return cost(args, out, attrs)
    return cost((_permuted(args[0], TO_NCHW), *args[1:]), _permuted(out, TO_NCHW), attrs)


defop("qnn.conv2d", rel=_conv_rel, ref=_conv_ref, cost=_conv_cost, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
      num_inputs=2, attrs=WINDOW_ATTRS + (
          AttrSpec("groups", "int", 1, "number of channel groups (C for depthwise)"),
          _zp("input_zero_point", "the data's zero point"),
          _zp("kernel_zero_point", "the weight's zero point (one for every output channel)"),
          AttrSpec("data_layout", "str", "NCHW", "NCHW: data [N, C, H, W], result [N, O, OH, OW]; NHWC "
                   "(channels-last, plait.relay.passes.ChannelsLast): data [N, H, W, C], result [N, OH, OW, O]"),
      ), doc="int8/uint8 2-D convolution -> exact int32 sums (ONNX ConvInteger); data [N, C, H, W] (or "
             "[N, H, W, C]: data_layout), weight [O, C/groups, KH, KW]")
defop("qnn.dense", rel=_int_rel("nn.dense", ("data", "weight"), ("input_zero_point", "kernel_zero_point")),
      ref=_int_ref("nn.dense", ("input_zero_point", "kernel_zero_point")), cost=_int_cost("nn.dense"),
      pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=2,
      attrs=(_zp("input_zero_point", "the data's zero point"), _zp("kernel_zero_point", "the weight's zero point")),
      doc="int8/uint8 data [..., K] @ weight [N, K].T -> exact int32 [..., N]")
defop("qnn.matmul", rel=_int_rel("nn.matmul", ("a", "b"), MM_ZPS), ref=_int_ref("nn.matmul", MM_ZPS),
      cost=_int_cost("nn.matmul"), pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=2,
      attrs=(_zp("a_zero_point", "a's zero point"), _zp("b_zero_point", "b's zero point")),
      doc="int8/uint8 matrix product (numpy matmul semantics) -> exact int32 (ONNX MatMulInteger)")


# ---- TE computes ----------------------------------------------------------------------------------


WINDOW_ALIGN = 16
"""A packed window (``"window"`` form) is padded with zero weights to a multiple of this many
elements: gcc's dot-product loop over a run of 40 (ds_cnn's 10 x 4 stem) ends in a scalar tail,
over 48 it does not (2x faster)."""


def window_layout(kh: int, row: int) -> tuple[int, int]:
    """(run, kp) of a packed window of ``kh`` rows of ``row`` elements: each window row starts at a
    multiple of ``run`` (``row`` itself when the padded window, ``kp`` elements, holds a whole
    number of rows: ds_cnn's 10 rows of 4 in 48; otherwise ``row`` rounded up to a power of two:
    mobilenet's 3 rows of 9 as 3 of 16 in 48), so that the gather splits the window index by
    ``run`` with no division, the taps past each row's ``row`` zero weights."""
    kp = -(-(kh * row) // WINDOW_ALIGN) * WINDOW_ALIGN
    if kp % row == 0:
        return row, kp
    run = 1 << (row - 1).bit_length()
    return run, -(-(kh * run) // WINDOW_ALIGN) * WINDOW_ALIGN


def _packed_conv2d(op: str, x: Any, wt: Any, attrs: Attrs, out_shape: Any, mode: str, nhwc: bool = False) -> Any:
    """The convolution as dot products over channels-last packed input and weight rows (``nhwc``: the
    data and the result channels-last, ``data_layout="NHWC"``: the same packs, copied without a
    transposition; not the ``"outer"`` mode)."""
    if nhwc:
        n, h, w, c = shape_of(x, op)
        oh, ow = out_shape[1], out_shape[2]
    else:
        n, c, h, w = shape_of(x, op)
        oh, ow = out_shape[2], out_shape[3]
    o, _, kh, kw = shape_of(wt, op)
    s, d = attrs["strides"], attrs["dilation"]
    top, left, bottom, right = attrs["padding"]
    zx, zw = attrs["input_zero_point"], attrs["kernel_zero_point"]
    u8 = wt.dtype == "int8" and zw == 0
    shift = 128 if u8 and x.dtype == "int8" else 0
    pdt, pad = ("uint8", zx + shift) if u8 else ("int16", 0)
    mode = "rows" if mode in ("stacked", "outer") and not u8 else mode  # (int16 stacks would divide per element)

    def xval(i: PrimExpr, ch: PrimExpr, iy: PrimExpr, ix: PrimExpr) -> PrimExpr:
        v = x[i, iy, ix, ch] if nhwc else x[i, ch, iy, ix]
        if u8:
            v = tir.cast("uint8", tir.cast("int32", v) + shift) if shift else v
        else:
            v = tir.cast("int16", _widened(v, zx))
        if not any(attrs["padding"]):  # (no bounds check to copy: a transposing pack is then tiled)
            return v
        return tir.select(inside(iy, ix, h, w), v, tir.const(pad, pdt))

    def wval(oc: PrimExpr, ch: PrimExpr, ry: PrimExpr, rx: PrimExpr) -> PrimExpr:
        v = wt[oc, ch, ry, rx]
        return v if u8 else tir.cast("int16", _widened(v, zw))

    row, k = kw * c, kh * kw * c
    run, kp = window_layout(kh, row)  # (window) each output's taps: rows of `run`, zero weights past them
    if mode == "stacked":  # xp as xq of rows; xq[n, y, (xx * KH + ry) * C + c] = xp[n, y + ry, xx * C + c]
        xp = make(op, (n, h + top + bottom, (w + left + right) * c),
                  lambda i, yy, f: xval(i, f % c, yy - top, f // c - left), "pack", inline=False)
        kp, end = _stack_run(k), (w + left + right) * kh * c

        def stack(i: PrimExpr, y: PrimExpr, f: PrimExpr) -> PrimExpr:
            v = xp[i, y + f // c % kh, f // c // kh * c + f % c]
            return v if kp == k else tir.select(f // c < end // c, v, tir.const(pad, pdt))  # (per C-run)

        def wstack(oc: PrimExpr, _: PrimExpr, t: PrimExpr) -> PrimExpr:
            v = wval(oc, t % c, t // c % kh, t // c // kh)
            return v if kp == k else tir.select(t < k, v, tir.const(0, v.dtype))

        xq = make(op, (n, oh, end + kp - k), stack, "stack", inline=False)
        wq = make(op, (o, 1, kp), wstack, "wpack", inline=False)
    elif mode == "outer":  # xq[n, y, x, c]; wq[oc // 16, c // 4, oc % 16, c % 4]
        xq = make(op, (n, h, w, c), lambda i, yy, xx, ch: xval(i, ch, yy, xx), "pack", inline=False)
        wq = make(op, (o // OUTER_LANES, c // OUTER_STEP, OUTER_LANES, OUTER_STEP),
                  lambda ob, k4, j, q: wval(ob * OUTER_LANES + j, k4 * OUTER_STEP + q, 0, 0), "wpack", inline=False)
    elif mode == "rows" and kw == 1:  # xq[n, yy, xx, c] (a pixel's run is its channels); wq[oc, ry, c]
        xq = make(op, (n, h + top + bottom, w + left + right, c),
                  lambda i, yy, xx, ch: xval(i, ch, yy - top, xx - left), "pack", inline=False)
        wq = make(op, (o, kh, c), lambda oc, ry, ch: wval(oc, ch, ry, 0), "wpack", inline=False)
    elif mode == "rows":  # xq[n, yy, xx * C + c]: the padded input channels-last; wq[oc, ry, rx * C + c]
        xq = make(op, (n, h + top + bottom, (w + left + right) * c),
                  lambda i, yy, f: xval(i, f % c, yy - top, f // c - left), "pack", inline=False)
        wq = make(op, (o, kh, row), lambda oc, ry, f: wval(oc, f % c, ry, f // c), "wpack", inline=False)
    else:  # xq[n, y, z, (ry * KW + rx) * C + c]: each output's window; wq[oc, 0, (ry * KW + rx) * C + c]
        xp = make(op, (n, h + top + bottom, (w + left + right) * c),
                  lambda i, yy, f: xval(i, f % c, yy - top, f // c - left), "pad", inline=False)

        def tap(t: PrimExpr) -> tuple[PrimExpr, PrimExpr, Any]:  # (window row, offset in it, is a tap)
            ry, r = t // run, t % run
            valid = None if kp == k else (t < k) if run == row else \
                (r < row) if kp == kh * run else tir.all_(r < row, t < kh * run)
            return ry, r, valid

        def window(i: PrimExpr, y: PrimExpr, z: PrimExpr, t: PrimExpr) -> PrimExpr:  # runs of KW * C from xp
            ry, r, valid = tap(t)
            col = z * (s[1] * c) + r if d[1] == 1 else (z * s[1] + r // c * d[1]) * c + r % c
            if valid is None:
                return xp[i, y * s[0] + ry * d[0], col]
            return tir.select(valid, xp[i, y * s[0] + ry * d[0], col], tir.const(pad, pdt))

        def wwindow(oc: PrimExpr, _: PrimExpr, t: PrimExpr) -> PrimExpr:
            ry, r, valid = tap(t)
            v = wval(oc, r % c, ry, r // c)
            return v if valid is None else tir.select(valid, v, tir.const(0, v.dtype))

        xq = make(op, (n, oh, ow, kp), window, "pack", inline=False)
        wq = make(op, (o, 1, kp), wwindow, "wpack", inline=False)

    def wout(oc: PrimExpr, ch: PrimExpr) -> PrimExpr:  # ("outer") the packed weight of (oc, ch)
        return wq[oc // OUTER_LANES, ch // OUTER_STEP, oc % OUTER_LANES, ch % OUTER_STEP]

    def body(i: PrimExpr, oc: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        if mode == "outer":
            rk = te.reduce_axis((0, c), "rk")
            return te.sum(tir.cast("int32", xq[i, y, z, rk]) * tir.cast("int32", wout(oc, rk)), axis=[rk])
        if mode == "window":
            rk = te.reduce_axis((0, kp), "rk")
            xi, wi, axes = (i, y, z, rk), (oc, 0, rk), [rk]
        elif mode == "stacked":
            rk = te.reduce_axis((0, kp), "rk")
            xi, wi, axes = (i, y, z * (kh * c) + rk), (oc, 0, rk), [rk]
        elif kw == 1:
            ry, rk = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, c), "rk")
            xi, wi, axes = (i, y * s[0] + ry * d[0], z * s[1], rk), (oc, ry, rk), [ry, rk]
        elif d[1] == 1:
            ry, rk = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, row), "rk")
            xi, wi, axes = (i, y * s[0] + ry * d[0], z * s[1] * c + rk), (oc, ry, rk), [ry, rk]
        else:
            ry, rx, rc = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx"), te.reduce_axis((0, c), "rc")
            xi = (i, y * s[0] + ry * d[0], (z * s[1] + rx * d[1]) * c + rc)
            wi, axes = (oc, ry, rx * c + rc), [ry, rx, rc]
        return te.sum(tir.cast("int32", xq[xi]) * tir.cast("int32", wq[wi]), axis=axes)

    def out(f: Callable[..., Any]) -> Callable[..., Any]:  # (an output index in the result's layout)
        return (lambda i, y, z, oc: f(i, oc, y, z)) if nhwc else f

    at = (lambda t, i, oc, y, z: t[i, y, z, oc]) if nhwc else (lambda t, i, oc, y, z: t[i, oc, y, z])
    if (not pad or not u8) and mode != "outer":
        return make(op, out_shape, out(body))
    acc = make(op, out_shape, out(body), "outer" if mode == "outer" else "dot")  # ("outer": int_rules' kernel)
    if not pad:
        return make(op, out_shape, out(lambda i, oc, y, z: at(acc, i, oc, y, z)))
    wrows, wlen = (1, kp) if mode in ("window", "stacked") else (kh, row)  # (zero weights past k)

    def wsum(oc: PrimExpr) -> Any:
        if mode == "outer":
            rk = te.reduce_axis((0, c), "rk")
            return te.sum(tir.cast("int32", wout(oc, rk)), axis=[rk])
        ry, rk = te.reduce_axis((0, wrows), "ry"), te.reduce_axis((0, wlen), "rk")
        return te.sum(tir.cast("int32", wq[oc, ry, rk]), axis=[ry, rk])

    ws = make(op, (o,), wsum, "wsum")
    return make(op, out_shape, out(lambda i, oc, y, z: at(acc, i, oc, y, z) - ws[oc] * pad))


@defop.compute("qnn.conv2d")
def _conv2d(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.conv2d"
    x, wt = inputs
    o, cg, kh, kw = shape_of(wt, op)
    like, checks = fconv.conv_shape(op, shape_of(x, op), shape_of(wt, op), attrs, attrs["data_layout"] == "NHWC")
    out_shape, _ = out_tensor_type(out_type, op, like=like)
    if attrs["data_layout"] == "NHWC":
        return nhwc_conv2d(op, x, wt, attrs, out_shape, _packed_conv2d)
    mode = packed_conv(shape_of(x, op), (o, cg, kh, kw), attrs)
    if mode is not None:
        return _packed_conv2d(op, x, wt, attrs, out_shape, mode)
    dw = _depthwise_planes(op, x, wt, attrs, out_shape)
    dw = dw if dw is not None else _depthwise(op, x, wt, attrs, out_shape)
    dw = dw if dw is not None else _conv_planes(op, x, wt, attrs, out_shape)
    if dw is not None:
        return dw
    s, d, g = attrs["strides"], attrs["dilation"], attrs["groups"]
    zx, zw = attrs["input_zero_point"], attrs["kernel_zero_point"]
    og = o // g
    xp, _, _ = padded(op, x, attrs["padding"], zx)

    def body(n: PrimExpr, oc: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        rc = te.reduce_axis((0, cg), "rc")
        ry = te.reduce_axis((0, kh), "ry")
        rx = te.reduce_axis((0, kw), "rx")
        c = rc if g == 1 else oc // og * cg + rc
        v = _widened(xp[n, c, y * s[0] + ry * d[0], z * s[1] + rx * d[1]], zx) * _widened(wt[oc, rc, ry, rx], zw)
        return te.sum(v, axis=[rc, ry, rx])

    return make(op, out_shape, body, checks=checks)


PRODUCT_ROWS = 4
"""A matrix product is packed (:func:`_packed_product`) when its data has at least this many rows: the
zero-point correction sums the whole weight once more, as much work as the product of one row (mlp's
1 x 256 x 512 layer: 6.3 -> 6.7 us packed; transformer_encoder's 32 rows: 42 -> 11 us)."""


def _packed_product(op: str, x: Any, wt: Any, wval: Callable[[PrimExpr, PrimExpr], PrimExpr], wdtype: str, n: int,
                    zx: int, zw: int, out_shape: Any) -> Any | None:
    """A matrix product ``x [..., K] @ W [K, N]`` (``wval(j, k)``: the weight element of output column
    ``j`` at ``k``; ``wt``: the weight as an ``[N, K]`` tensor when it is one, ``qnn.dense``) as dot
    products over contiguous ``K`` runs, like a packed convolution (module docstring): the weight
    ``[N, K]`` (int8 with zero point 0: as it is, or transposed once per call; otherwise int16 minus
    its zero point), the data as uint8 (an int8 one shifted by 128, the sum corrected by
    ``zero_point * sum(weight column)``) or int16 minus its zero point. None when the product is
    not one of these (symbolic shapes, K shorter than :data:`MIN_DOT`, fewer rows than
    :data:`PRODUCT_ROWS`, a machine without vectors).
    The QDQ pass makes a product with a constant matrix a ``qnn.dense`` with the matrix transposed
    at compile time, so that no transposition runs."""
    xs = shape_of(x, op)
    k_len = xs[-1]
    if len(xs) != len(out_shape) or not all(isinstance(d, int) for d in (*xs, *out_shape, n)) or \
            k_len < MIN_DOT or int(np.prod(xs[:-1])) < PRODUCT_ROWS or not packs():
        return None
    u8 = wdtype == "int8" and zw == 0
    shift = 128 if u8 and x.dtype == "int8" else 0
    if u8:
        xq = x if not shift else make(
            op, xs, lambda *i: tir.cast("uint8", tir.cast("int32", x[i]) + shift), "pack", inline=False)
        wq = wt if wt is not None else make(op, (n, k_len), wval, "wpack", inline=False)
        pad = zx + shift
    else:
        xq = make(op, xs, lambda *i: tir.cast("int16", _widened(x[i], zx)), "pack", inline=False)
        wq = make(op, (n, k_len), lambda j, k: tir.cast("int16", _widened(wval(j, k), zw)), "wpack", inline=False)
        pad = 0

    def body(*i: PrimExpr) -> Any:
        k = te.reduce_axis((0, k_len), "k")
        return te.sum(tir.cast("int32", xq[tuple(i[:-1]) + (k,)]) * tir.cast("int32", wq[i[-1], k]), axis=[k])

    if not pad:
        return make(op, out_shape, body)
    acc = make(op, out_shape, body, "dot")

    def wsum(j: PrimExpr) -> Any:
        k = te.reduce_axis((0, k_len), "rk")
        return te.sum(tir.cast("int32", wq[j, k]), axis=[k])

    ws = make(op, (n,), wsum, "wsum")
    return make(op, out_shape, lambda *i: acc[i] - ws[i[-1]] * pad)


@defop.compute("qnn.dense")
def _dense(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.dense"
    x, wt = inputs
    k_len = shape_of(x, op)[-1]
    like, checks = fconv.dense_shape(op, shape_of(x, op), shape_of(wt, op))
    out_shape, _ = out_tensor_type(out_type, op, like=like)
    zx, zw = attrs["input_zero_point"], attrs["kernel_zero_point"]
    packed = _packed_product(op, x, wt, lambda j, k: wt[j, k], wt.dtype, shape_of(wt, op)[0], zx, zw, out_shape)
    if packed is not None:
        return packed

    def body(*i: PrimExpr) -> Any:
        k = te.reduce_axis((0, k_len), "k")
        return te.sum(_widened(x[tuple(i[:-1]) + (k,)], zx) * _widened(wt[i[-1], k], zw), axis=[k])

    return make(op, out_shape, body, checks=checks)


@defop.compute("qnn.matmul")
def _matmul(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "qnn.matmul"
    a, b = inputs
    sa, sb = shape_of(a, op), shape_of(b, op)
    like, checks = fconv.matmul_shape(op, sa, sb)
    out_shape, _ = out_tensor_type(out_type, op, like=like)
    za, zb = attrs["a_zero_point"], attrs["b_zero_point"]
    nb = len(out_shape) - (len(sa) >= 2) - (len(sb) >= 2)
    if len(sb) == 2 and len(sa) >= 2:  # a product with a matrix (a weight): b packed transposed
        packed = _packed_product(op, a, None, lambda j, k: b[k, j], b.dtype, sb[1], za, zb, out_shape)
        if packed is not None:
            return packed

    def body(*i: PrimExpr) -> Any:
        k = te.reduce_axis((0, sa[-1]), "k")
        ia, ib = fconv.matmul_indices(sa, sb, nb, i, k)
        return te.sum(_widened(a[ia], za) * _widened(b[ib], zb), axis=[k])

    return make(op, out_shape, body, checks=checks)


# ---- ONNX export ----------------------------------------------------------------------------------


def _zero_points(ex: Any, names: tuple[str, str]) -> list[str]:
    return [ex.const(np.array(ex.attrs[z], dtype=ex.arg_type(i).dtype), hint=z) for i, z in enumerate(names)]


def _conv_onnx(ex: Any) -> str:
    """ConvInteger (NCHW); a channels-last convolution between two Transposes."""
    a = ex.attrs
    ks = [int(k) for k in ex.arg_type(1).shape[2:]]
    nhwc = a["data_layout"] == "NHWC"
    x = ex.node("Transpose", [ex.ins[0]], perm=list(TO_NCHW)) if nhwc else ex.ins[0]
    y = ex.node("ConvInteger", [x, ex.ins[1]] + _zero_points(ex, CONV_ZPS), kernel_shape=ks,
                strides=list(a["strides"]), pads=list(a["padding"]), dilations=list(a["dilation"]), group=a["groups"])
    return ex.node("Transpose", [y], perm=list(TO_NHWC)) if nhwc else y


def _dense_onnx(ex: Any) -> str:
    w = ex.node("Transpose", [ex.ins[1]], perm=[1, 0])
    return ex.node("MatMulInteger", [ex.ins[0], w] + _zero_points(ex, ("input_zero_point", "kernel_zero_point")))


def _matmul_onnx(ex: Any) -> str:
    return ex.node("MatMulInteger", ex.ins + _zero_points(ex, MM_ZPS))


# imported by the frontend's converters (plait.frontend.onnx_ops_quant: zero points must be constants)
defop.onnx("qnn.conv2d", OnnxMap("ConvInteger", convert=False, export=_conv_onnx))
defop.onnx("qnn.dense", OnnxMap("MatMulInteger", convert=False, export=_dense_onnx))
defop.onnx("qnn.matmul", OnnxMap("MatMulInteger", convert=False, export=_matmul_onnx))
