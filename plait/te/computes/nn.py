"""Computes of the convolution, matmul/dense and pooling operators (:mod:`plait.op.nn`).

Convolutions are direct reductions over (input channels of the group, kernel rows, kernel columns);
zero padding is a padded stage that is inlined (a ``select`` guarding the load). Pools reduce over
the window; the average's divisor is a closed form of the output position. float16 is computed in
float32 and rounded once.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plait import te
from plait.ir.attrs import Attrs
from plait.te.computes._common import (
    bcast_dims, cdtype, down, make, max_reducer, out_tensor_type, shape_of, tir, up,
)
from plait.te.registry import register_compute
from plait.te.tensor import Tensor
from plait.tir.dtype import int_range, is_float
from plait.tir.expr import PrimExpr


def _rounded(op: str, out_shape: Any, acc: Tensor, dtype: str) -> Tensor:
    """``acc`` (accumulated in the compute dtype) rounded to ``dtype`` when the two differ (float16)."""
    return make(op, out_shape, lambda *i: down(acc[i], dtype)) if cdtype(dtype) != dtype else acc


def _inside(iy: PrimExpr, ix: PrimExpr, h: int, w: int) -> PrimExpr:
    return tir.all_(iy >= 0, iy < h, ix >= 0, ix < w)


def _padded(op: str, x: Tensor, pad: Sequence[int], value: Any) -> tuple[Tensor, int, int]:
    """``x`` [N, C, H, W] padded by (top, left, bottom, right) with ``value`` (an inlined stage)."""
    n, c, h, w = shape_of(x, op)
    t, l, b, r = pad
    if not any(pad):
        return x, h, w

    def body(i: PrimExpr, j: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        iy, ix = y - t, z - l
        return tir.select(_inside(iy, ix, h, w), x[i, j, iy, ix], tir.const(value, x.dtype))

    return make(op, (n, c, h + t + b, w + l + r), body, "pad"), h + t + b, w + l + r


@register_compute("nn.conv2d")
def _conv2d(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.conv2d"
    x, wt = inputs
    _, _, h, w = shape_of(x, op)
    o, cg, kh, kw = shape_of(wt, op)
    out_shape, dtype = out_tensor_type(out_type, op)
    s, d, g = attrs["strides"], attrs["dilation"], attrs["groups"]
    og = o // g
    xp, _, _ = _padded(op, x, attrs["padding"], 0.0)

    def body(n: PrimExpr, oc: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        rc = te.reduce_axis((0, cg), "rc")
        ry = te.reduce_axis((0, kh), "ry")
        rx = te.reduce_axis((0, kw), "rx")
        c = rc if g == 1 else oc // og * cg + rc
        v = up(xp[n, c, y * s[0] + ry * d[0], z * s[1] + rx * d[1]]) * up(wt[oc, rc, ry, rx])
        return te.sum(v, axis=[rc, ry, rx])

    acc = make(op, out_shape, body)
    return _rounded(op, out_shape, acc, dtype)


@register_compute("nn.conv2d_transpose")
def _conv2d_transpose(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.conv2d_transpose"
    x, wt = inputs
    _, c, h, w = shape_of(x, op)
    _, og, kh, kw = shape_of(wt, op)
    out_shape, dtype = out_tensor_type(out_type, op)
    s, p, d, g = attrs["strides"], attrs["padding"], attrs["dilation"], attrs["groups"]
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

    acc = make(op, out_shape, body)
    return _rounded(op, out_shape, acc, dtype)


# ---- matmul, dense ----------------------------------------------------------------------------


@register_compute("nn.matmul")
def _matmul(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.matmul"
    a, b = inputs
    sa, sb = shape_of(a, op), shape_of(b, op)
    out_shape, dtype = out_tensor_type(out_type, op)
    k_len = sa[-1]
    nb = len(out_shape) - (len(sa) >= 2) - (len(sb) >= 2)  # batch dims of the result

    def body(*i: PrimExpr) -> Any:
        k = te.reduce_axis((0, k_len), "k")
        batch, rest = i[:nb], list(i[nb:])
        row = [rest.pop(0)] if len(sa) >= 2 else []
        col = [rest.pop(0)] if len(sb) >= 2 else []
        ia = bcast_dims(sa[:-2], batch) + tuple(row) + (k,)
        ib = bcast_dims(sb[:-2], batch) + (k,) + tuple(col)
        return te.sum(up(a[ia]) * up(b[ib]), axis=[k])

    acc = make(op, out_shape, body)
    return _rounded(op, out_shape, acc, dtype)


@register_compute("nn.dense")
def _dense(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.dense"
    x, wt = inputs
    k_len = shape_of(x, op)[-1]
    out_shape, dtype = out_tensor_type(out_type, op)

    def body(*i: PrimExpr) -> Any:
        k = te.reduce_axis((0, k_len), "k")
        return te.sum(up(x[tuple(i[:-1]) + (k,)]) * up(wt[i[-1], k]), axis=[k])

    acc = make(op, out_shape, body)
    return _rounded(op, out_shape, acc, dtype)


# ---- pooling ----------------------------------------------------------------------------------


def _finite_lowest(dtype: str) -> Any:
    return float(np.finfo(dtype).min) if is_float(dtype) else int_range(dtype)[0]


@register_compute("nn.max_pool2d")
def _max_pool2d(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.max_pool2d"
    (x,) = inputs
    _, _, h, w = shape_of(x, op)
    out_shape, dtype = out_tensor_type(out_type, op)
    k, s, p, d = attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"]
    pad = _finite_lowest(dtype)  # padding never wins; a window of padding only gives the lowest value

    def body(n: PrimExpr, c: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        ry = te.reduce_axis((0, k[0]), "ry")
        rx = te.reduce_axis((0, k[1]), "rx")
        iy, ix = y * s[0] + ry * d[0] - p[0], z * s[1] + rx * d[1] - p[1]
        v = tir.select(_inside(iy, ix, h, w), x[n, c, iy, ix], tir.const(pad, dtype))
        return max_reducer(up(v), axis=[ry, rx])

    m = make(op, out_shape, body)
    return make(op, out_shape, lambda *i: down(m[i], dtype)) if cdtype(dtype) != dtype else m


def _tap_count(pos: PrimExpr, k: int, s: int, d: int, p0: int, lo: int, hi: int) -> PrimExpr:
    """How many of the taps ``pos * s - p0 + t * d`` (t < k) fall in [lo, hi) (an int64 expression)."""
    base = pos * s - p0
    t_lo = tir.max((lo - base + (d - 1)) // d, 0)
    t_hi = tir.min((hi - 1 - base) // d, k - 1)
    return tir.max(t_hi - t_lo + 1, 0)


@register_compute("nn.avg_pool2d")
def _avg_pool2d(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.avg_pool2d"
    (x,) = inputs
    _, _, h, w = shape_of(x, op)
    out_shape, dtype = out_tensor_type(out_type, op)
    ct = cdtype(dtype)
    k, s, p, d = attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"]

    def body(n: PrimExpr, c: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        ry = te.reduce_axis((0, k[0]), "ry")
        rx = te.reduce_axis((0, k[1]), "rx")
        iy, ix = y * s[0] + ry * d[0] - p[0], z * s[1] + rx * d[1] - p[1]
        return te.sum(tir.select(_inside(iy, ix, h, w), up(x[n, c, iy, ix]), tir.const(0.0, ct)), axis=[ry, rx])

    total = make(op, out_shape, body)
    # the divisor: taps on the input, or with count_include_pad on the input and its explicit padding
    inc = attrs["count_include_pad"]
    lo_h, hi_h = (-p[0], h + p[2]) if inc else (0, h)
    lo_w, hi_w = (-p[1], w + p[3]) if inc else (0, w)

    def avg(n: PrimExpr, c: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        cnt = _tap_count(y, k[0], s[0], d[0], p[0], lo_h, hi_h) * _tap_count(z, k[1], s[1], d[1], p[1], lo_w, hi_w)
        return down(total[n, c, y, z] / tir.cast(ct, cnt), dtype)

    return make(op, out_shape, avg)


def _register_global_pool(kind: str) -> None:
    op = f"nn.global_{kind}_pool2d"

    @register_compute(op)
    def _compute(inputs: list, attrs: Attrs, out_type: Any) -> Any:
        (x,) = inputs
        shape = shape_of(x, op)
        out_shape, dtype = out_tensor_type(out_type, op)
        spatial = shape[2:]
        count = 1
        for v in spatial:
            count *= v

        def body(*i: PrimExpr) -> Any:
            rs = [te.reduce_axis((0, v), f"r{a}") for a, v in enumerate(spatial)]
            v = up(x[(i[0], i[1]) + tuple(rs)])
            return max_reducer(v, axis=rs) if kind == "max" else te.sum(v, axis=rs)

        r = make(op, out_shape, body)
        if kind == "max":
            return make(op, out_shape, lambda *i: down(r[i], dtype)) if cdtype(dtype) != dtype else r
        return make(op, out_shape, lambda *i: down(r[i] / float(count), dtype))


_register_global_pool("avg")
_register_global_pool("max")
