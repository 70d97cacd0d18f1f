"""ONNX converters: Resize and Upsample, onto ``image.resize2d``.

``image.resize2d`` resizes the last two axes of an NCHW tensor. Any other layout works as long as
at most two axes change: those axes are moved last (transpose), the others flattened into C
(reshape), and everything is put back after the resize. Then the resized axes must be static. An NCHW input
resized over (H, W) needs no reshape: every axis may be symbolic, a scaled symbolic H or W being
``image.resize2d``'s size -1 (floor of the size times the scale, when the function runs), and sizes read
by ``Shape`` from another tensor (a U-Net upsampling to its skip's size) being that tensor's dims
(``image.resize2d``'s like argument).
"""

from __future__ import annotations

import math

import numpy as np

from plait.frontend.onnx_node import NodeContext, SymDim, Unsupported, short
from plait.ir.types import ANY_DIM
from plait.errors import FrontendError
from plait.frontend.onnx_registry import Converter, converters
from plait.relay.expr import Expr

_MODES = ("nearest", "linear", "cubic")


def _resize(cx: NodeContext, out_shape: list[int], scales: list[float] | None, roi: list[float] | None,
            **attrs: object) -> Expr:
    """Resize input 0 to ``out_shape`` (full rank); ``scales``/``roi`` are per axis (full rank)."""
    in_shape = list(cx.shape(0))
    nd = len(in_shape)
    full_roi = roi if roi is not None else [0.0] * nd + [1.0] * nd

    def kept(a: int) -> bool:  # the same length (a symbolic one by name; "?" of the same tensor's axis only)
        d = out_shape[a]
        if d == ANY_DIM:
            return isinstance(d, SymDim) and d.source is cx.expr(0) and d.axis == a
        return d != -1 and d == in_shape[a]

    changed = [a for a in range(nd) if not kept(a) or (scales is not None and scales[a] != 1.0)
               or (attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize"
                   and (full_roi[a], full_roi[a + nd]) != (0.0, 1.0))]
    if len(changed) > 2:
        raise Unsupported(f"resizing {len(changed)} axes ({', '.join(map(str, changed))}); plait resizes at most 2")
    if not changed:
        return cx.expr(0)
    rs = changed  # the resized axes, in order: they become (H, W), or W alone
    others = [a for a in range(nd) if a not in rs]
    x = cx.expr(0)
    if nd == 4 and set(rs) <= {2, 3}:  # NCHW over (H, W) or one of them: image.resize2d as
        # it is (N and C may be symbolic; a symbolic H or W kept or scaled is a size of -1; one read by Shape
        # from another tensor comes from that tensor, image.resize2d's like argument)
        like_axes, src = [-1, -1], None
        for k in range(2):
            d = out_shape[2 + k]
            if isinstance(d, str) and not kept(2 + k):
                if not isinstance(d, SymDim) or (src is not None and d.source is not src):
                    raise Unsupported(f"sizes {short(out_shape[2:])} are not known at import time, nor read from "
                                      "one tensor's shape")
                src, like_axes[k] = d.source, d.axis
        size = tuple(0 if like_axes[k] >= 0 else d if isinstance(d, int) and d != -1 else -1
                     for k, d in enumerate(out_shape[2:]))
        args = (x,) if src is None else (x, src)
        return cx.call("image.resize2d", *args, size=size, like_axes=() if src is None else tuple(like_axes),
                       scales=None if scales is None else tuple(float(s) for s in scales[2:]),
                       roi=None if attrs.get("coordinate_transformation_mode") != "tf_crop_and_resize"
                       else tuple(full_roi[2:4] + full_roi[6:8]), **attrs)
    in_shape = list(cx.static_shape(0, "input"))
    perm = others + rs
    if perm != list(range(nd)):
        x = cx.call("transpose", x, axes=tuple(perm))
    lead = math.prod(in_shape[a] for a in others)
    hw_in = [in_shape[a] for a in rs]
    while len(hw_in) < 2:
        hw_in.insert(0, 1)
    x4_shape = (1, lead) + tuple(hw_in)
    if tuple(x.checked_type.shape) != x4_shape:
        x = cx.reshape(x, x4_shape)
    pad = 2 - len(rs)
    size = tuple([1] * pad + [out_shape[a] for a in rs])
    op_scales = None if scales is None else tuple([1.0] * pad + [float(scales[a]) for a in rs])
    op_roi = None
    if attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        op_roi = tuple([0.0] * pad + [full_roi[a] for a in rs] + [1.0] * pad + [full_roi[a + nd] for a in rs])
    y = cx.call("image.resize2d", x, size=size, scales=op_scales, roi=op_roi, **attrs)
    t_shape = [in_shape[a] for a in others] + [out_shape[a] for a in rs]
    if list(y.checked_type.shape) != t_shape:
        y = cx.reshape(y, t_shape)
    if perm != list(range(nd)):
        inverse = [perm.index(a) for a in range(nd)]
        y = cx.call("transpose", y, axes=tuple(inverse))
    return y


def _floats(cx: NodeContext, i: int, what: str) -> list[float] | None:
    if not cx.has(i):
        return None
    v = cx.const(i, what).reshape(-1)
    return [float(x) for x in v] if v.size else None


def _scaled(size: int, scale: float) -> int:
    """floor(size * scale) computed as ONNX does (float32); refused when it overflows."""
    with np.errstate(over="ignore"):
        v = size * np.float32(scale)
    if not np.isfinite(v) or float(v) >= 1 << 62:
        raise FrontendError(f"scale {scale} makes a dimension of {size} absurdly large")
    return int(math.floor(v))


def _check_scales(scales: list[float] | None, n: int, what: str = "scales") -> None:
    if scales is None:
        return
    if len(scales) != n:
        raise FrontendError(f"{what} has {len(scales)} values, expected {n}")
    if not all(s > 0 and math.isfinite(s) for s in scales):
        raise FrontendError(f"{what} {short(scales)} must be finite and > 0")


def resize(cx: NodeContext) -> object:
    if cx.attr("antialias", 0):
        raise Unsupported("antialias=1 not supported")
    mode = cx.attr("mode", "nearest")
    if mode not in _MODES:
        raise Unsupported(f"mode '{mode}' not supported")
    in_shape = cx.shape(0)
    nd = len(in_shape)
    if cx.version < 11:
        ctm, nearest_mode = "asymmetric", "floor"
        roi, scales, sizes = None, _floats(cx, 1, "scales"), None
    else:
        ctm = cx.attr("coordinate_transformation_mode", "half_pixel")
        nearest_mode = cx.attr("nearest_mode", "round_prefer_floor")
        roi, scales = _floats(cx, 1, "roi"), _floats(cx, 2, "scales")
        sizes = list(cx.sym_ints(3, "sizes")) if cx.has(3) else None  # ints, or dims read by Shape
    axes = list(cx.axes(cx.attr("axes", list(range(nd))), nd))
    _check_scales(scales, len(axes))
    if sizes and (len(sizes) != len(axes) or min((s for s in sizes if isinstance(s, int)), default=1) < 1):
        raise FrontendError(f"sizes {short(sizes)} must be {len(axes)} values >= 1")
    if roi is not None and ctm == "tf_crop_and_resize" and len(roi) != 2 * len(axes):
        raise FrontendError(f"roi has {len(roi)} values, expected {2 * len(axes)}")
    full_scales: list[float] | None = None
    out = list(in_shape)
    if sizes:
        policy = cx.attr("keep_aspect_ratio_policy", "stretch")
        if policy == "stretch":
            for a, s in zip(axes, sizes):
                out[a] = s
        elif policy in ("not_larger", "not_smaller"):
            in_shape = cx.static_shape(0, "input")
            if not all(isinstance(s, int) for s in sizes):
                raise Unsupported(f"keep_aspect_ratio_policy '{policy}' with sizes known at run time")
            ratios = [s / in_shape[a] for a, s in zip(axes, sizes)]
            r = min(ratios) if policy == "not_larger" else max(ratios)
            full_scales = [1.0] * nd
            for a in axes:
                out[a] = int(math.floor(r * in_shape[a] + 0.5))
                full_scales[a] = r
        else:
            raise Unsupported(f"keep_aspect_ratio_policy '{policy}' not supported")
    elif scales:
        full_scales = [1.0] * nd
        for a, s in zip(axes, scales):
            full_scales[a] = s
            if not isinstance(in_shape[a], int):
                if s != 1.0 and (nd != 4 or a not in (2, 3)):
                    cx.static_shape(0, "input with a scale other than 1 on a symbolic axis")
                if s != 1.0:  # H or W of NCHW: image.resize2d's size -1, the input's size times the scale
                    out[a] = -1
                continue
            out[a] = _scaled(in_shape[a], s)
    else:
        raise Unsupported("needs scales or sizes")
    full_roi = None
    if roi is not None and ctm == "tf_crop_and_resize":
        k = len(axes)
        full_roi = [0.0] * nd + [1.0] * nd
        for i, a in enumerate(axes):
            full_roi[a], full_roi[a + nd] = roi[i], roi[i + k]
    return _resize(cx, out, full_scales, full_roi, method=mode, coordinate_transformation_mode=ctm,
                   nearest_mode=nearest_mode, cubic_alpha=cx.attr("cubic_coeff_a", -0.75),
                   exclude_outside=bool(cx.attr("exclude_outside", 0)),
                   extrapolation_value=cx.attr("extrapolation_value", 0.0))


def upsample(cx: NodeContext) -> object:
    mode = cx.attr("mode", "nearest")
    if mode not in ("nearest", "linear"):
        raise Unsupported(f"mode '{mode}' not supported")
    scales = list(cx.attr("scales")) if "scales" in cx.attrs else _floats(cx, 1, "scales")
    if not scales:
        raise Unsupported("needs scales")
    in_shape = cx.static_shape(0, "input")
    _check_scales([float(s) for s in scales], len(in_shape))
    out = [_scaled(d, s) for d, s in zip(in_shape, scales)]
    return _resize(cx, out, [float(s) for s in scales], None, method=mode,
                   coordinate_transformation_mode="asymmetric", nearest_mode="floor")


CONVERTERS: list[Converter] = [
    *converters(["Resize"], resize,
                attrs=("antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                       "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode"),
                ops=("floor", "image.resize2d", "transpose", "reshape")),
    *converters(["Upsample"], upsample, attrs=("mode", "scales"),
                ops=("floor", "image.resize2d", "transpose", "reshape")),
]
