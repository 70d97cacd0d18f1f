"""Image operators on NCHW tensors (ONNX semantics): image.resize2d, depth_to_space, space_to_depth.

image.resize2d follows ONNX Resize over the two spatial dims. Coordinates are computed in float32
with the operation order ONNX Runtime uses, so that nearest-neighbour ties and linear weights land
exactly where ONNX Runtime puts them. Interpolation (linear, cubic) is separable: one weight matrix
per spatial axis. Linear and cubic need floating-point data (ONNX Runtime's integer paths use
implementation-specific fixed-point rounding); nearest works for every dtype.
"""

from __future__ import annotations

import numpy as np

from plait.ir.numeric import cast_array
from plait.op._common import (
    ANY_DIM, AttrSpec, Attrs, Cost, FLOAT_DTYPES, OpPattern, RelError, TensorType, defop, numel, tensor_bytes,
)
from plait.op.transform import fmt, move_cost, one_tensor

F32 = np.float32
_COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_crop_and_resize")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


# ---- coordinate mapping (one spatial axis) -----------------------------------------------------------


def original_coords(out_len: int, in_len: int, scale: float, mode: str, roi: tuple[float, float]) -> np.ndarray:
    """x_original for every output index x (float32), per ONNX Resize's coordinate_transformation_mode."""
    x = np.arange(out_len, dtype=F32)
    s, L, n = F32(scale), F32(in_len), F32(out_len)
    half = F32(0.5)
    if mode == "half_pixel":
        return (x + half) / s - half
    if mode == "pytorch_half_pixel":
        return (x + half) / s - half if out_len > 1 else np.zeros(out_len, F32)
    if mode == "asymmetric":
        return x / s
    if mode == "align_corners":
        return x * (L - 1) / (n - 1) if out_len > 1 else np.zeros(out_len, F32)
    if mode == "half_pixel_symmetric":
        adjustment = n / (s * L)
        offset = (L / F32(2)) * (F32(1) - adjustment)
        return (np.float64(offset) + (x.astype(np.float64) + 0.5) / np.float64(s) - 0.5).astype(F32)
    start, end = F32(roi[0]), F32(roi[1])  # tf_crop_and_resize
    if out_len > 1:
        return start * (L - 1) + (x * (end - start) * (L - 1)) / (n - 1)
    return np.full(out_len, 0.5 * np.float64(start + end) * np.float64(L - 1), F32)


def _nearest_index(xo: np.ndarray, mode: str, in_len: int) -> np.ndarray:
    def round_half_away(v):
        return np.sign(v) * np.floor(np.abs(v) + F32(0.5))

    if mode == "round_prefer_floor":
        idx = np.where(xo == np.trunc(xo) + F32(0.5), np.floor(xo), round_half_away(xo))
    elif mode == "round_prefer_ceil":
        idx = round_half_away(xo)
    elif mode == "floor":
        idx = np.floor(xo)
    else:
        idx = np.ceil(xo)
    return np.clip(cast_array(idx, "int64"), 0, in_len - 1)


def cubic_coeffs(s: np.ndarray, a: float) -> np.ndarray:
    """Keys cubic convolution weights of the 4 taps floor(x)-1 .. floor(x)+2 for fractions ``s``; shape (n, 4)."""
    a = F32(a)

    def far(t):  # |t| in [1, 2)
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

    def near(t):  # |t| in [0, 1)
        return ((a + 2) * t - (a + 3)) * t * t + 1

    return np.stack([far(s + 1), near(s), near(1 - s), far(2 - s)], axis=-1).astype(F32)


def _weights(xo: np.ndarray, in_len: int, method: str, attrs: Attrs) -> np.ndarray:
    """Dense (out_len, in_len) interpolation matrix of one axis (taps outside the axis are clamped)."""
    w = np.zeros((len(xo), in_len), F32)
    rows = np.arange(len(xo))
    if method == "linear":
        xc = np.clip(xo, F32(0), F32(in_len - 1))
        i1 = np.minimum(cast_array(xc, "int64"), in_len - 1)
        i2 = np.minimum(i1 + 1, in_len - 1)
        frac = np.where(i1 == i2, F32(0.5), xc - i1.astype(F32))
        np.add.at(w, (rows, i1), np.where(i1 == i2, F32(0.5), F32(1) - frac))
        np.add.at(w, (rows, i2), frac)
        return w
    base = cast_array(np.floor(xo), "int64")
    coeffs = cubic_coeffs((xo - np.floor(xo)).astype(F32), attrs["cubic_alpha"])
    taps = base[:, None] + np.arange(-1, 3)
    if attrs["exclude_outside"]:
        coeffs = np.where((taps < 0) | (taps >= in_len), F32(0), coeffs)
        coeffs = coeffs / coeffs.sum(axis=1, keepdims=True)
    for k in range(4):
        np.add.at(w, (rows, np.clip(taps[:, k], 0, in_len - 1)), coeffs[:, k])
    return w


# ---- image.resize2d ----------------------------------------------------------------------------------


def _check_resize_attrs(attrs: Attrs) -> None:
    size, roi, scales = attrs["size"], attrs["roi"], attrs["scales"]
    if len(size) != 2 or any(d < 0 for d in size):
        raise RelError(f"image.resize2d: expected size of 2 sizes >= 0 (out H, W), got {fmt(size)}")
    if roi is not None and len(roi) != 4:
        raise RelError(f"image.resize2d: expected roi of 4 values (h_start, w_start, h_end, w_end), got {fmt(roi)}")
    if scales is not None and (len(scales) != 2 or any(s <= 0 for s in scales)):
        raise RelError(f"image.resize2d: expected scales of 2 values > 0 (H, W), got {fmt(scales)}")


def _resize_rel(args, attrs):
    x = one_tensor(args, "image.resize2d")
    if x.ndim != 4:
        raise RelError(f"image.resize2d: data: expected a 4-D NCHW tensor, got {x}")
    _check_resize_attrs(attrs)
    if attrs["method"] != "nearest" and x.dtype not in FLOAT_DTYPES:
        raise RelError(f"image.resize2d: {attrs['method']} interpolation: expected a floating-point tensor, "
                       f"got {x.dtype}")
    return TensorType(x.shape[:2] + tuple(attrs["size"]), x.dtype)


def _resize_ref(args, attrs):
    (x,) = args
    _check_resize_attrs(attrs)
    method, mode = attrs["method"], attrs["coordinate_transformation_mode"]
    roi = attrs["roi"] if attrs["roi"] is not None else (0.0, 0.0, 1.0, 1.0)
    out_hw = attrs["size"]
    if x.size == 0 or 0 in out_hw:
        return np.zeros(x.shape[:2] + tuple(out_hw), x.dtype)
    coords, outside = [], []
    for k in range(2):
        in_len, out_len = x.shape[2 + k], out_hw[k]
        scale = attrs["scales"][k] if attrs["scales"] is not None else F32(out_len) / F32(in_len)
        xo = original_coords(out_len, in_len, scale, mode, (roi[k], roi[2 + k]))
        coords.append(xo)
        outside.append((xo < 0) | (xo > F32(in_len - 1)))
    if method == "nearest":
        ih, iw = (_nearest_index(c, attrs["nearest_mode"], x.shape[2 + k]) for k, c in enumerate(coords))
        out = x[:, :, ih[:, None], iw[None, :]]
    else:
        wh, ww = (_weights(c, x.shape[2 + k], method, attrs) for k, c in enumerate(coords))
        acc = np.float64 if x.dtype == np.float64 else F32
        out = np.einsum("oh,nchw,pw->ncop", wh.astype(acc), x.astype(acc), ww.astype(acc)).astype(x.dtype)
    if mode == "tf_crop_and_resize":
        mask = outside[0][:, None] | outside[1][None, :]
        fill = np.asarray(attrs["extrapolation_value"]).astype(x.dtype)
        out = np.where(mask, fill, out)
    return np.ascontiguousarray(out, dtype=x.dtype)


def _resize_cost(args, out, attrs) -> Cost:
    taps = {"nearest": 0, "linear": 4, "cubic": 16}[attrs["method"]]
    return Cost(2.0 * taps * numel(out), tensor_bytes(args[0]), tensor_bytes(out))


defop("image.resize2d", rel=_resize_rel, ref=_resize_ref, cost=_resize_cost, pattern=OpPattern.INJECTIVE, attrs=[
    AttrSpec("size", "ints", doc="output (H, W)"),
    AttrSpec("method", "str", "nearest", "interpolation", choices=("nearest", "linear", "cubic")),
    AttrSpec("coordinate_transformation_mode", "str", "half_pixel",
             "how an output coordinate maps back to the input (ONNX modes)", choices=_COORD_MODES),
    AttrSpec("nearest_mode", "str", "round_prefer_floor", "rounding of nearest (method nearest only)",
             choices=_NEAREST_MODES),
    AttrSpec("cubic_alpha", "float", -0.75, "the cubic kernel's a (ONNX cubic_coeff_a)"),
    AttrSpec("exclude_outside", "bool", False, "cubic: drop taps outside the input and renormalize the weights"),
    AttrSpec("extrapolation_value", "float", 0.0, "tf_crop_and_resize: value of outputs mapping outside the input"),
    AttrSpec("roi", "floats", None, "tf_crop_and_resize: normalized (h_start, w_start, h_end, w_end); "
             "None = (0, 0, 1, 1)", optional=True),
    AttrSpec("scales", "floats", None, "(H, W) scale factors of the coordinate mapping when the model gave ONNX "
             "scales; None = size / input size", optional=True),
], doc="ONNX Resize over the spatial dims of NCHW data")


# ---- depth_to_space, space_to_depth --------------------------------------------------------------------


def _block_attrs():
    return [
        AttrSpec("block_size", "int", doc="side of the spatial block"),
        AttrSpec("mode", "str", "DCR", "channel order: DCR (depth-column-row, ONNX default) or CRD",
                 choices=("DCR", "CRD")),
    ]


def _scaled(d, factor: int, divide: bool):
    if not isinstance(d, int):
        return ANY_DIM
    return d // factor if divide else d * factor


def _d2s_rel(args, attrs):
    x = one_tensor(args, "depth_to_space")
    b = attrs["block_size"]
    if x.ndim != 4:
        raise RelError(f"depth_to_space: data: expected a 4-D NCHW tensor, got {x}")
    if b < 1:
        raise RelError(f"depth_to_space: expected block_size >= 1, got {b}")
    c = x.shape[1]
    if isinstance(c, int) and c % (b * b):
        raise RelError(f"depth_to_space: expected channels divisible by block_size^2 = {b * b}, got {c}")
    return TensorType((x.shape[0], _scaled(c, b * b, True), _scaled(x.shape[2], b, False),
                       _scaled(x.shape[3], b, False)), x.dtype)


def _d2s_ref(args, attrs):
    (x,) = args
    b = attrs["block_size"]
    n, c, h, w = x.shape
    if attrs["mode"] == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(y.reshape(n, c // (b * b), h * b, w * b))


defop("depth_to_space", rel=_d2s_rel, ref=_d2s_ref, cost=move_cost, pattern=OpPattern.INJECTIVE,
      attrs=_block_attrs(), doc="ONNX DepthToSpace: (N, C, H, W) -> (N, C/b^2, H*b, W*b)")


def _s2d_rel(args, attrs):
    x = one_tensor(args, "space_to_depth")
    b = attrs["block_size"]
    if x.ndim != 4:
        raise RelError(f"space_to_depth: data: expected a 4-D NCHW tensor, got {x}")
    if b < 1:
        raise RelError(f"space_to_depth: expected block_size >= 1, got {b}")
    for axis in (2, 3):
        d = x.shape[axis]
        if isinstance(d, int) and d % b:
            raise RelError(f"space_to_depth: expected axis {axis} divisible by block_size {b}, got {d}")
    return TensorType((x.shape[0], _scaled(x.shape[1], b * b, False), _scaled(x.shape[2], b, True),
                       _scaled(x.shape[3], b, True)), x.dtype)


def _s2d_ref(args, attrs):
    (x,) = args
    b = attrs["block_size"]
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b)
    y = y.transpose(0, 3, 5, 1, 2, 4) if attrs["mode"] == "DCR" else y.transpose(0, 1, 3, 5, 2, 4)
    return np.ascontiguousarray(y.reshape(n, c * b * b, h // b, w // b))


defop("space_to_depth", rel=_s2d_rel, ref=_s2d_ref, cost=move_cost, pattern=OpPattern.INJECTIVE,
      attrs=_block_attrs(), doc="ONNX SpaceToDepth (mode DCR; CRD is the inverse of depth_to_space CRD): "
                                "(N, C, H, W) -> (N, C*b^2, H/b, W/b)")
