"""Computes of the image operators (:mod:`plait.op.image`): image.resize2d, depth_to_space,
space_to_depth.

image.resize2d ports the reference's coordinate mapping operation by operation in float32 (constants
folded with numpy float32 arithmetic, exactly as the reference computes them), so nearest-neighbour
ties and interpolation weights land where the reference puts them. Each spatial axis gets a small
table stage over the output positions (source indices, weights, the outside flag of
tf_crop_and_resize), computed once; the output stage reads the tables and the 1, 2x2 or 4x4 taps.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from plait.ir.attrs import Attrs
from plait.te.computes._common import clamp, make, out_tensor_type, scalar_const, shape_of, tir
from plait.te.registry import register_compute
from plait.te.tensor import Tensor
from plait.tir.expr import PrimExpr, Var

F32 = np.float32


def _f(v: Any) -> PrimExpr:
    """A float32 immediate of an (already float32-rounded) value."""
    return tir.const(float(F32(v)), "float32")


def original_coord(x_idx: PrimExpr, out_len: int, in_len: int, scale: float, mode: str,
                   roi: tuple[float, float]) -> PrimExpr:
    """x_original of output index ``x_idx`` (float32), as ``plait.op.image.original_coords``."""
    x = tir.cast("float32", x_idx)
    s, L, n, half = F32(scale), F32(in_len), F32(out_len), F32(0.5)
    if mode == "half_pixel" or (mode == "pytorch_half_pixel" and out_len > 1):
        return (x + _f(half)) / _f(s) - _f(half)
    if mode == "asymmetric":
        return x / _f(s)
    if mode == "align_corners" and out_len > 1:
        return x * _f(L - F32(1)) / _f(n - F32(1))
    if mode in ("pytorch_half_pixel", "align_corners"):
        return _f(0.0)
    if mode == "half_pixel_symmetric":
        adjustment = n / (s * L)
        offset = (L / F32(2)) * (F32(1) - adjustment)
        xd = tir.cast("float64", x)
        v = tir.const(float(offset), "float64") + (xd + 0.5) / tir.const(float(s), "float64") - 0.5
        return tir.cast("float32", v)
    start, end = F32(roi[0]), F32(roi[1])  # tf_crop_and_resize
    if out_len > 1:
        return _f(start * (L - F32(1))) + (x * _f(end - start) * _f(L - F32(1))) / _f(n - F32(1))
    return _f(0.5 * np.float64(start + end) * np.float64(L - F32(1)))


def _round_half_away(v: PrimExpr) -> PrimExpr:
    r = tir.floor(tir.fabs(v) + _f(0.5))
    return tir.select(v < 0, -r, tir.select(v > 0, r, _f(0.0)))


def _nearest(xo: PrimExpr, mode: str, in_len: int) -> PrimExpr:
    if mode == "round_prefer_floor":
        tie = tir.eq(xo, tir.trunc(xo) + _f(0.5))
        idx = tir.select(tie, tir.floor(xo), _round_half_away(xo))
    elif mode == "round_prefer_ceil":
        idx = _round_half_away(xo)
    elif mode == "floor":
        idx = tir.floor(xo)
    else:
        idx = tir.ceil(xo)
    return clamp(tir.cast("int64", idx), 0, in_len - 1)


def _cubic_coeffs(s: PrimExpr, alpha: float) -> list[PrimExpr]:
    """Keys weights of the taps floor(x)-1 .. floor(x)+2 for the fraction ``s`` (plait.op.image.cubic_coeffs)."""
    a = F32(alpha)

    def far(t: PrimExpr) -> PrimExpr:
        return ((_f(a) * t - _f(5 * a)) * t + _f(8 * a)) * t - _f(4 * a)

    def near(t: PrimExpr) -> PrimExpr:
        return ((_f(a + 2) * t - _f(a + 3)) * t) * t + _f(1)

    return [far(s + _f(1)), near(s), near(_f(1) - s), far(_f(2) - s)]


def _bind(value: PrimExpr, name: str, body: Callable[[PrimExpr], PrimExpr]) -> PrimExpr:
    """``let v = value in body(v)`` with a fresh variable (keeps the expression a DAG-sized tree)."""
    return tir.let(Var(name, value.dtype), value, body)


def _table_entry(j: int, xo: PrimExpr, in_len: int, attrs: Attrs, crop: bool) -> PrimExpr:
    """Entry ``j`` of the table at one output position whose source coordinate is ``xo`` (a variable):
    nearest: index; linear: i1, i2, w1, w2; cubic: 4 taps, 4 weights; then tf_crop_and_resize's flag."""
    method = attrs["method"]
    n = {"nearest": 1, "linear": 4, "cubic": 8}[method]
    if j == n:
        return tir.logical_or(xo < 0.0, xo > float(in_len - 1))
    if method == "nearest":
        return _nearest(xo, attrs["nearest_mode"], in_len)
    if method == "linear":
        xc = tir.min(tir.max(xo, _f(0)), _f(in_len - 1))  # np.clip; xo is never NaN
        i1 = tir.min(tir.cast("int64", xc), in_len - 1)
        i2 = tir.min(i1 + 1, in_len - 1)
        same = tir.eq(i1, i2)
        frac = tir.select(same, _f(0.5), xc - tir.cast("float32", i1))
        return [i1, i2, tir.select(same, _f(0.5), _f(1) - frac), frac][j]
    fl = tir.floor(xo)
    taps = [tir.cast("int64", fl) + d for d in (-1, 0, 1, 2)]
    if j < 4:
        return clamp(taps[j], 0, in_len - 1)
    k = j - 4

    def of_s(s: PrimExpr) -> PrimExpr:
        coeffs = _cubic_coeffs(s, attrs["cubic_alpha"])
        if not attrs["exclude_outside"]:
            return coeffs[k]
        masked = [tir.select(tir.logical_or(t < 0, t >= in_len), _f(0), c) for t, c in zip(taps, coeffs)]

        def bind_all(done: list[PrimExpr]) -> PrimExpr:
            if len(done) < 4:
                return _bind(masked[len(done)], f"c{len(done)}", lambda v: bind_all(done + [v]))
            return done[k] / (((done[0] + done[1]) + done[2]) + done[3])

        return bind_all([])

    return _bind(xo - fl, "s", of_s)


def _axis_tables(k: int, out_len: int, in_len: int, attrs: Attrs) -> tuple[list[Tensor], list[Tensor], Tensor | None]:
    """(source index tables, weight tables, outside table or None) of spatial axis ``k``; each (out_len,)."""
    method, mode = attrs["method"], attrs["coordinate_transformation_mode"]
    roi = attrs["roi"] if attrs["roi"] is not None else (0.0, 0.0, 1.0, 1.0)
    scale = attrs["scales"][k] if attrs["scales"] is not None else F32(out_len) / F32(in_len)
    crop = mode == "tf_crop_and_resize"
    n_out = {"nearest": 1, "linear": 4, "cubic": 8}[method] + crop

    def body(i: PrimExpr) -> tuple[PrimExpr, ...]:
        xo = original_coord(i, out_len, in_len, scale, mode, (roi[k], roi[2 + k]))
        # one let-bound coordinate per entry (a let variable is bound once in a PrimFunc)
        return tuple(_bind(xo, "xo", lambda v, _j=j: _table_entry(_j, v, in_len, attrs, crop)) for j in range(n_out))

    outs = make("image.resize2d", (out_len,), body, "hw"[k], inline=False)
    outs = outs if isinstance(outs, list) else [outs]
    taps = {"nearest": 1, "linear": 2, "cubic": 4}[method]
    return outs[:taps], outs[taps:2 * taps] if method != "nearest" else [], outs[-1] if crop else None


@register_compute("image.resize2d")
def _resize2d(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "image.resize2d"
    (x,) = inputs
    n, c, h, w = shape_of(x, op)
    shape, dtype = out_tensor_type(out_type, op)
    if 0 in shape or h == 0 or w == 0:
        return make(op, shape, lambda *i: scalar_const(0, dtype))
    (ih, wh, oh), (iw, ww, ow) = (_axis_tables(k, shape[2 + k], (h, w)[k], attrs) for k in range(2))
    acc = "float64" if dtype == "float64" else "float32"
    fill = scalar_const(attrs["extrapolation_value"], dtype)

    def body(b: PrimExpr, ch: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        if attrs["method"] == "nearest":
            value = x[b, ch, ih[0][y], iw[0][z]]
        else:
            def weight(t: Tensor, pos: PrimExpr) -> PrimExpr:
                return tir.cast(acc, t[pos])

            rows = []
            for ta, wa in zip(ih, wh):
                row = None
                for tb, wb in zip(iw, ww):
                    term = weight(wb, z) * tir.cast(acc, x[b, ch, ta[y], tb[z]])
                    row = term if row is None else row + term
                rows.append(weight(wa, y) * row)
            total = rows[0]
            for r in rows[1:]:
                total = total + r
            value = tir.cast(dtype, total)
        if oh is not None:
            value = tir.select(tir.logical_or(oh[y], ow[z]), fill, value)
        return value

    return make(op, shape, body)


# ---- depth_to_space, space_to_depth ----------------------------------------------------------------


def _block_channel(co: PrimExpr, b1: PrimExpr, b2: PrimExpr, b: int, depth: int, dcr: bool) -> PrimExpr:
    """The channel holding block offset (b1, b2) of channel ``co`` (``depth`` channels per offset)."""
    return (b1 * b + b2) * depth + co if dcr else co * (b * b) + b1 * b + b2


@register_compute("depth_to_space")
def _depth_to_space(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    c = shape_of(x, "depth_to_space")[1]
    shape, _ = out_tensor_type(out_type, "depth_to_space")
    b = attrs["block_size"]
    dcr = attrs["mode"] == "DCR"

    def body(n: PrimExpr, co: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        if b == 1:
            return x[n, co, y, z]
        return x[n, _block_channel(co, y % b, z % b, b, c // (b * b), dcr), y // b, z // b]

    return make("depth_to_space", shape, body)


@register_compute("space_to_depth")
def _space_to_depth(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    c = shape_of(x, "space_to_depth")[1]
    shape, _ = out_tensor_type(out_type, "space_to_depth")
    b = attrs["block_size"]
    dcr = attrs["mode"] == "DCR"

    def body(n: PrimExpr, co: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        if b == 1:
            return x[n, co, y, z]
        # co = _block_channel(ci, b1, b2): invert it
        if dcr:
            ci, blk = co % c, co // c
        else:
            ci, blk = co // (b * b), co % (b * b)
        b1, b2 = blk // b, blk % b
        return x[n, ci, y * b + b1, z * b + b2]

    return make("space_to_depth", shape, body)


__all__ = ["original_coord"]
