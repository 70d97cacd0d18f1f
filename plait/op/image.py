"""Image resizing on NCHW tensors (ONNX semantics): image.resize2d.

image.resize2d follows ONNX Resize over the two spatial dims. Coordinates are computed in float32
with the operation order ONNX Runtime uses, so that nearest-neighbour ties and linear weights land
exactly where ONNX Runtime puts them. Linear interpolation is ONNX Runtime's ``UpsampleBilinear``
operation by operation (the float32 products ``w_y * w_x``, each times its tap, summed in the order
(y1, x1), (y1, x2), (y2, x1), (y2, x2)), so float32 results are ONNX Runtime's bit for bit; int8
and uint8 data take the same float32 arithmetic, truncated toward zero (``static_cast<T>``), as
ONNX Runtime's NCHW kernel does. Cubic is separable (one weight matrix per spatial axis) and needs
floating-point data; nearest works for every dtype.

TE computes: image.resize2d ports the reference's coordinate mapping operation by operation in float32 (constants
folded with numpy float32 arithmetic, exactly as the reference computes them), so nearest-neighbour
ties and interpolation weights land where the reference puts them. Each spatial axis gets a small
table stage over the output positions (source indices, weights, the outside flag of
tf_crop_and_resize), computed once; linear adds a stage of the four coefficients of every output
position (float32 values stored as float64, so the C compiler cannot fuse a term's multiply into the
sum); the output stage reads the tables and the 1, 2x2 or 4x4 taps.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from plait.ir.attrs import Attrs
from plait.ir.numeric import cast_array
from plait.op._common import (
    ANY_DIM, AttrSpec, Cost, FLOAT_DTYPES, Family, OnnxMap, OpPattern, RelError, TensorType, numel, tensor_bytes,
)
from plait.op._compute import clamp, make, out_tensor_type, scalar_const, shape_of, tir
from plait.op.transform import fmt, one_tensor
from plait.te.tensor import Tensor
from plait.tir.expr import PrimExpr, Var

defop = Family()

F32 = np.float32
_COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_crop_and_resize")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
# linear interpolation of integers: ONNX Runtime's NCHW kernel (float32 arithmetic, truncated toward zero)
LINEAR_INT_DTYPES = ("int8", "uint8")


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


def linear_taps(xo: np.ndarray, in_len: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(i1, i2, weight of i1, weight of i2) of one axis, as ONNX Runtime's ``SetupUpsampleBilinear``:
    the coordinate clamped to [0, in_len - 1], ``i2 = min(i1 + 1, in_len - 1)``, the weight of i1
    ``|x - i2|`` and of i2 ``|x - i1|`` (both 0.5 when i1 == i2), in float32."""
    xc = np.clip(xo, F32(0), F32(in_len - 1))
    i1 = np.minimum(cast_array(xc, "int64"), in_len - 1)
    i2 = np.minimum(i1 + 1, in_len - 1)
    same = i1 == i2
    w1 = np.where(same, F32(0.5), np.abs(xc - i2.astype(F32))).astype(F32)
    w2 = np.where(same, F32(0.5), np.abs(xc - i1.astype(F32))).astype(F32)
    return i1, i2, w1, w2


def _bilinear(x: np.ndarray, ch: np.ndarray, cw: np.ndarray) -> np.ndarray:
    """ONNX Runtime's ``UpsampleBilinear`` (NCHW): the float32 products of a row and a column weight,
    each times its tap, summed in the order (y1, x1), (y1, x2), (y2, x1), (y2, x2)."""
    y1, y2, wy1, wy2 = linear_taps(ch, x.shape[2])
    x1, x2, wx1, wx2 = linear_taps(cw, x.shape[3])
    acc = np.float64 if x.dtype == np.float64 else F32
    xa = x.astype(acc)
    total = None
    for ty, wy in ((y1, wy1), (y2, wy2)):
        for tx, wx in ((x1, wx1), (x2, wx2)):
            term = (wy[:, None] * wx[None, :]).astype(acc) * xa[:, :, ty[:, None], tx[None, :]]
            total = term if total is None else total + term
    if x.dtype.kind in "iu":  # static_cast<T>: toward zero (the sum stays inside T's range)
        info = np.iinfo(x.dtype)
        return np.clip(np.trunc(total), info.min, info.max).astype(x.dtype)
    return total.astype(x.dtype)


def _weights(xo: np.ndarray, in_len: int, method: str, attrs: Attrs) -> np.ndarray:
    """Dense (out_len, in_len) cubic interpolation matrix of one axis (taps outside the axis are clamped)."""
    w = np.zeros((len(xo), in_len), F32)
    rows = np.arange(len(xo))
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
    if len(size) != 2 or any(d < -1 for d in size):
        raise RelError(f"image.resize2d: expected size of 2 sizes >= 0 (out H, W), got {fmt(size)}")
    if roi is not None and len(roi) != 4:
        raise RelError(f"image.resize2d: expected roi of 4 values (h_start, w_start, h_end, w_end), got {fmt(roi)}")
    if scales is not None and (len(scales) != 2 or any(s <= 0 for s in scales)):
        raise RelError(f"image.resize2d: expected scales of 2 values > 0 (H, W), got {fmt(scales)}")
    axes = attrs["like_axes"]
    if axes and (len(axes) != 2 or min(axes) < -1 or max(axes) < 0):
        raise RelError(f"image.resize2d: expected like_axes of 2 axes of the like argument (or -1), got {fmt(axes)}")


def _like_shape(args: Sequence[Any], attrs: Attrs) -> Any:
    """The like argument's shape (its dims at like_axes are the output H and W), None without one."""
    axes = attrs["like_axes"]
    like = args[1].shape if len(args) > 1 else None
    if bool(axes) != (like is not None):
        raise RelError("image.resize2d: like_axes and a like argument go together")
    if like is not None and max(axes) >= len(like):
        raise RelError(f"image.resize2d: like_axes {fmt(axes)}: the like argument has rank {len(like)}")
    return like


def _resize_rel(args, attrs):
    x = one_tensor(args, "image.resize2d")
    like = _like_shape(args, attrs)
    if x.ndim != 4:
        raise RelError(f"image.resize2d: data: expected a 4-D NCHW tensor, got {x}")
    _check_resize_attrs(attrs)
    if attrs["method"] == "linear" and x.dtype not in FLOAT_DTYPES and x.dtype not in LINEAR_INT_DTYPES:
        raise RelError(f"image.resize2d: linear interpolation: expected a floating-point, int8 or uint8 tensor, "
                       f"got {x.dtype}")
    if attrs["method"] == "cubic" and x.dtype not in FLOAT_DTYPES:
        raise RelError(f"image.resize2d: cubic interpolation: expected a floating-point tensor, got {x.dtype}")
    return TensorType(x.shape[:2] + _out_hw(x.shape[2:], attrs, like), x.dtype)


def scaled_len(size: Any, scale: float) -> Any:
    """``floor(size * scale)`` as ONNX Runtime computes a Resize output length from a scale (a float32
    product; an int64 expression for a symbolic size, exact in integers for a whole scale)."""
    if isinstance(size, int):
        return int(np.floor(np.float32(size) * F32(scale)))
    if float(scale).is_integer():
        return size * int(scale)
    return tir.cast("int64", tir.floor(tir.cast("float32", size) * _f(scale)))


def _scale(attrs: Attrs, k: int) -> float:
    """The scale of spatial axis ``k`` whose size is -1: the given one, else 1 (the axis is kept)."""
    return attrs["scales"][k] if attrs["scales"] is not None else 1.0


def _from_like(attrs: Attrs, k: int) -> bool:
    return bool(attrs["like_axes"]) and attrs["like_axes"][k] >= 0


def _out_hw(in_hw: Sequence[Any], attrs: Attrs, like: Sequence[Any] | None = None,
            run_time: bool = False) -> tuple[Any, ...]:
    """The output (H, W): the like argument's dim where like_axes says so, else ``size``, a -1 being the input
    size times the scale, or the input size without scales (in the type: "?" on a symbolic axis unless the
    scale is 1; ``run_time``: the compute's int64 expression)."""
    out = []
    for k, d in enumerate(attrs["size"]):
        if _from_like(attrs, k):
            out.append(like[attrs["like_axes"][k]])  # type: ignore[index]
        elif d != -1:
            out.append(d)
        elif isinstance(in_hw[k], int) or run_time:
            out.append(scaled_len(in_hw[k], _scale(attrs, k)))
        else:
            out.append(in_hw[k] if _scale(attrs, k) == 1.0 else ANY_DIM)
    return tuple(out)


def _resize_ref(args, attrs):
    x = args[0]
    _check_resize_attrs(attrs)
    method, mode = attrs["method"], attrs["coordinate_transformation_mode"]
    roi = attrs["roi"] if attrs["roi"] is not None else (0.0, 0.0, 1.0, 1.0)
    out_hw = _out_hw(x.shape[2:], attrs, _like_shape(args, attrs))
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
    elif method == "linear":
        out = _bilinear(x, coords[0], coords[1])
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


defop("image.resize2d", rel=_resize_rel, ref=_resize_ref, cost=_resize_cost, pattern=OpPattern.INJECTIVE,
      num_inputs=(1, 2), attrs=[
    AttrSpec("size", "ints", doc="output (H, W); -1: floor(input size x scale), the input size without scales "
             "(a symbolic input axis); ignored where like_axes names an axis"),
    AttrSpec("like_axes", "ints", (), "(H, W): the axis of the like argument whose size the output has (ONNX "
             "sizes read by Shape from another tensor), or -1; empty without a like argument"),
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


# ---- TE computes ----------------------------------------------------------------------------------


def _f(v: Any) -> PrimExpr:
    """A float32 immediate of an (already float32-rounded) value."""
    return tir.const(float(F32(v)), "float32")


def _c(v: Any) -> PrimExpr:
    """A float32 value: an immediate of a (float32-rounded) number, or a float32 expression as it is."""
    return v if isinstance(v, PrimExpr) else _f(v)


def _f32(v: Any) -> Any:
    """A length as float32: a numpy float32 of an int, a float32 expression of an int64 expression."""
    return F32(v) if isinstance(v, int) else tir.cast("float32", v)


def _f64_len(n: PrimExpr) -> PrimExpr:
    """An int64 length expression as float64 (exact below 2**53; equal to its float32 value below 2**24)."""
    return tir.cast("float64", n)


def _if_long(out_len: Any, long: Callable[[], PrimExpr], short: Callable[[], PrimExpr]) -> PrimExpr:
    """``long()`` when the output axis has more than one element, else ``short()`` (decided at run time for a
    symbolic length)."""
    if isinstance(out_len, int):
        return long() if out_len > 1 else short()
    return tir.select(out_len > 1, long(), short())


def original_coord(x_idx: PrimExpr, out_len: Any, in_len: Any, scale: Any, mode: str,
                   roi: tuple[float, float]) -> PrimExpr:
    """x_original of output index ``x_idx`` (float32), as ``plait.op.image.original_coords``. The lengths may
    be int64 expressions and the scale a float32 one (symbolic axes): the same float32 operations then run
    in the function instead of being folded here."""
    x = tir.cast("float32", x_idx)
    s = scale if isinstance(scale, PrimExpr) else F32(scale)
    L, n, half = _f32(in_len), _f32(out_len), F32(0.5)
    if mode == "half_pixel":
        return (x + _f(half)) / _c(s) - _f(half)
    if mode == "pytorch_half_pixel":
        return _if_long(out_len, lambda: (x + _f(half)) / _c(s) - _f(half), lambda: _f(0.0))
    if mode == "asymmetric":
        return x / _c(s)
    if mode == "align_corners":
        return _if_long(out_len, lambda: x * _c(L - F32(1)) / _c(n - F32(1)), lambda: _f(0.0))
    if mode == "half_pixel_symmetric":
        adjustment = n / (s * L)
        offset = (L / F32(2)) * (F32(1) - adjustment)
        xd = tir.cast("float64", x)
        off = tir.cast("float64", offset) if isinstance(offset, PrimExpr) else tir.const(float(offset), "float64")
        sd = tir.cast("float64", s) if isinstance(s, PrimExpr) else tir.const(float(s), "float64")
        return tir.cast("float32", off + (xd + 0.5) / sd - 0.5)
    start, end = F32(roi[0]), F32(roi[1])  # tf_crop_and_resize

    def one() -> PrimExpr:
        if isinstance(L, PrimExpr):
            mid = tir.const(0.5 * float(np.float64(start + end)), "float64")
            return tir.cast("float32", mid * _f64_len(in_len - 1))
        return _f(0.5 * np.float64(start + end) * np.float64(L - F32(1)))

    def first() -> PrimExpr:
        # start * (L - 1) as float32. Symbolic: the exact double product of start and the integer L - 1 (an
        # int64 converted, so the C compiler cannot narrow it to a float32 multiply and contract that into the
        # sum: an FMA rounds once where the static constant was rounded before the sum)
        if isinstance(L, PrimExpr):
            return tir.cast("float32", tir.const(float(start), "float64") * _f64_len(in_len - 1))
        return _f(start * (L - F32(1)))

    return _if_long(out_len, lambda: first() + (x * _f(end - start) * _c(L - F32(1))) / _c(n - F32(1)), one)


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
        return tir.logical_or(xo < 0.0, xo > _c(_f32(in_len - 1)))
    if method == "nearest":
        return _nearest(xo, attrs["nearest_mode"], in_len)
    if method == "linear":
        xc = tir.min(tir.max(xo, _f(0)), _c(_f32(in_len - 1)))  # np.clip; xo is never NaN
        i1 = tir.min(tir.cast("int64", xc), in_len - 1)
        i2 = tir.min(i1 + 1, in_len - 1)
        same = tir.eq(i1, i2)
        w1 = tir.select(same, _f(0.5), tir.fabs(xc - tir.cast("float32", i2)))
        w2 = tir.select(same, _f(0.5), tir.fabs(xc - tir.cast("float32", i1)))
        return [i1, i2, w1, w2][j]
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


def _axis_tables(k: int, out_len: Any, in_len: Any, attrs: Attrs) -> tuple[list[Tensor], list[Tensor], Tensor | None]:
    """(source index tables, weight tables, outside table or None) of spatial axis ``k``; each (out_len,)."""
    method, mode = attrs["method"], attrs["coordinate_transformation_mode"]
    roi = attrs["roi"] if attrs["roi"] is not None else (0.0, 0.0, 1.0, 1.0)
    if attrs["size"][k] == -1 and not _from_like(attrs, k):
        scale = _scale(attrs, k)
    else:
        scale = attrs["scales"][k] if attrs["scales"] is not None else _f32(out_len) / _f32(in_len)
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


def _bilinear_coefs(out_hw: Sequence[int], tables: tuple) -> list[Tensor]:
    """The four products ``w_y * w_x`` ((y1, x1), (y1, x2), (y2, x1), (y2, x2)) of every output
    position, rounded to float32 and stored as float64: a stage of its own, so the C compiler sees
    an opaque double factor in each term and cannot contract the term's multiply into the sum (an FMA
    rounds once where ONNX Runtime rounds twice)."""
    ih, wh, iw, ww = tables

    def body(y: PrimExpr, z: PrimExpr) -> tuple[PrimExpr, ...]:
        return tuple(tir.cast("float64", tir.cast("float32", tir.cast("float64", wa[y]) * tir.cast("float64", wb[z])))
                     for wa in wh for wb in ww)

    return make("image.resize2d", tuple(out_hw), body, "coef", inline=False)


def _bilinear_sum(x: Tensor, at: tuple[PrimExpr, ...], tables: tuple, coefs: list[Tensor], acc: str) -> PrimExpr:
    """``plait.op.image._bilinear`` at output ``at`` = (b, ch, y, z): each coefficient times its tap,
    summed (y1, x1), (y1, x2), (y2, x1), (y2, x2). In float32 each product is a double product
    (exact) rounded to float32, each sum two float32 values added: IEEE float32 arithmetic, bit for
    bit, and nothing the C compiler may fuse."""
    b, ch, y, z = at
    ih, _, iw, _ = tables
    taps = [(ta, tb) for ta in ih for tb in iw]
    total = None
    for (ta, tb), c in zip(taps, coefs):
        term = c[y, z] * tir.cast("float64", x[b, ch, ta[y], tb[z]])
        if acc == "float32":
            term = tir.cast("float32", term)
        total = term if total is None else total + term
    return total


def _bilinear_out(total: PrimExpr, dtype: str) -> PrimExpr:
    """The sum in the output's dtype: an integer one truncated toward zero (``static_cast<T>``)."""
    if dtype not in LINEAR_INT_DTYPES:
        return tir.cast(dtype, total)
    lo, hi = (-128, 127) if dtype == "int8" else (0, 255)
    return tir.cast(dtype, clamp(tir.cast("int32", tir.trunc(total)), lo, hi))


@defop.compute("image.resize2d")
def _resize2d(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "image.resize2d"
    x = inputs[0]
    n, c, h, w = shape_of(x, op)
    sizes = shape_of(inputs[1], op) if len(inputs) > 1 else None
    shape, dtype = out_tensor_type(out_type, op, like=(n, c) + _out_hw((h, w), attrs, sizes, run_time=True))
    if 0 in shape or h == 0 or w == 0:
        return make(op, shape, lambda *i: scalar_const(0, dtype))
    (ih, wh, oh), (iw, ww, ow) = (_axis_tables(k, shape[2 + k], (h, w)[k], attrs) for k in range(2))
    acc = "float64" if dtype == "float64" else "float32"
    fill = scalar_const(attrs["extrapolation_value"], dtype)
    tables = (ih, wh, iw, ww)
    coefs = _bilinear_coefs(shape[2:], tables) if attrs["method"] == "linear" else []

    def body(b: PrimExpr, ch: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        if attrs["method"] == "nearest":
            value = x[b, ch, ih[0][y], iw[0][z]]
        elif attrs["method"] == "linear":
            value = _bilinear_out(_bilinear_sum(x, (b, ch, y, z), tables, coefs, acc), dtype)
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


__all__ = ["original_coord"]


# ---- ONNX -----------------------------------------------------------------------------------------


def _resize_onnx(ex: Any) -> str:
    a = ex.attrs
    ex.need_opset(18, "Resize of the two spatial axes (attribute 'axes')")
    ctm = a["coordinate_transformation_mode"]
    roi = ""
    if ctm == "tf_crop_and_resize":
        roi = ex.const(np.asarray(a["roi"] if a["roi"] is not None else (0.0, 0.0, 1.0, 1.0), np.float32), hint="roi")
    if a["like_axes"]:  # sizes read from the like argument's shape
        if a["scales"] is not None:
            raise ex.fail("resize to the size of another tensor with scales has no ONNX form")
        like = ex.node("Shape", [ex.ins[1]])
        parts = [ex.node("Gather", [like, ex.ints([ax], "axis")], axis=0) if ax >= 0 else ex.ints([d], "size")
                  for d, ax in zip(a["size"], a["like_axes"])]
        if any(ax < 0 and d == -1 for d, ax in zip(a["size"], a["like_axes"])):
            raise ex.fail("resize of a kept symbolic axis and one to another tensor's size has no ONNX form")
        ins = [ex.ins[0], roi, "", ex.node("Concat", parts, axis=0)]
    elif -1 in a["size"]:  # a symbolic axis: the scales say it all
        sc = a["scales"] if a["scales"] is not None else (1.0, 1.0)
        if a["scales"] is None and any(d != -1 for d in a["size"]):
            raise ex.fail("resize of one symbolic axis to a static size and another kept has no ONNX form")
        ins = [ex.ins[0], roi, ex.const(np.asarray(sc, np.float32), hint="scales")]
    elif a["scales"] is not None:
        in_hw = ex.arg_type(0).shape[2:]
        if not all(isinstance(d, int) for d in in_hw):
            raise ex.fail("resize with scales needs static input H and W")
        got = [int(np.floor(d * np.float32(s))) for d, s in zip(in_hw, a["scales"])]
        if got != list(a["size"]):
            raise ex.fail(f"scales {list(a['scales'])} give size {got}, not the call's size {list(a['size'])}")
        ins = [ex.ins[0], roi, ex.const(np.asarray(a["scales"], np.float32), hint="scales")]
    else:
        ins = [ex.ins[0], roi, "", ex.ints(a["size"], "sizes")]
    return ex.node("Resize", ins, axes=[2, 3], mode=a["method"], coordinate_transformation_mode=ctm,
                   nearest_mode=a["nearest_mode"], cubic_coeff_a=a["cubic_alpha"],
                   exclude_outside=int(a["exclude_outside"]), extrapolation_value=a["extrapolation_value"])


# imported by the frontend's converters (Resize's scales/sizes inputs and axes, Upsample); exported by code
defop.onnx("image.resize2d", OnnxMap("Resize", convert=False, export=_resize_onnx))
