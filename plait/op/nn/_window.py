"""Helpers shared by the convolution and pooling definitions (:mod:`plait.op.nn`): window
attributes, output sizes, the reference's window taps and the computes' padded stages.

Spatial attributes follow one convention: ``padding`` is (top, left, bottom, right), ``strides``
and ``dilation`` are (h, w). float16 inputs are computed in float32 and rounded once, as ONNX
Runtime does.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plait.ir.attrs import Attrs
from plait.op._common import ANY_DIM, AttrSpec, Dim, RelError, TensorType, Type, as_tensor, same_dtype
from plait.op._compute import cdtype, down, make, shape_of, tir
from plait.op.tensor import compute_dtype, require_dtype
from plait.te.tensor import Tensor
from plait.tir.expr import PrimExpr

# ---- shared helpers ---------------------------------------------------------------------------


def window_ints(attrs: Attrs, name: str, n: int, what: str, meaning: str, lo: int) -> tuple[int, ...]:
    """Attribute ``name`` as exactly ``n`` ints, each >= ``lo``; raises RelError naming ``what``."""
    v = attrs[name]
    if len(v) != n:
        raise RelError(f"{what}: {name}: expected {n} values ({meaning}), got {v}")
    if any(x < lo for x in v):
        raise RelError(f"{what}: {name}: expected values >= {lo}, got {v}")
    return tuple(v)


def window_attrs(attrs: Attrs, what: str) -> tuple[tuple[int, int], tuple[int, int, int, int], tuple[int, int]]:
    """(strides, padding, dilation) of a 2-D windowed op, validated."""
    strides = window_ints(attrs, "strides", 2, what, "h, w", 1)
    padding = window_ints(attrs, "padding", 4, what, "top, left, bottom, right", 0)
    dilation = window_ints(attrs, "dilation", 2, what, "h, w", 1)
    return strides, padding, dilation  # type: ignore[return-value]


def check_rank(t: TensorType, n: int, what: str, layout: str) -> TensorType:
    if t.ndim != n:
        raise RelError(f"{what}: expected a {n}-D tensor {layout}, got {t}")
    return t


def float_tensors(args: tuple[Type, ...], what: str, names: tuple[str, ...]) -> list[TensorType]:
    ts = [as_tensor(a, f"{what}: {n}") for a, n in zip(args, names)]
    same_dtype(ts, f"{what}: {', '.join(names)}")
    require_dtype(ts[0], "float", f"{what}: {names[0]}")
    return ts


def window_out(size: Dim, k: int, s: int, d: int, p0: int, p1: int, ceil_mode: bool = False,
               what: str = "", axis: str = "") -> Dim:
    """Output length of a sliding window (ONNX Conv / Pool). With ``ceil_mode`` a last window that
    would start beyond the input and left padding is dropped (as ONNX Runtime does)."""
    ext = d * (k - 1) + 1
    if isinstance(size, str):
        return size if ext - p0 - p1 == 1 and s == 1 else ANY_DIM
    span = size + p0 + p1 - ext
    if span < 0:
        raise RelError(f"{what}: {axis}: expected padded input size >= window size {ext}, "
                       f"got {size + p0 + p1} (input {size}, padding {p0} + {p1})")
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p0:
        out -= 1
    return out


def window_len(size: Any, k: int, s: int, d: int, p0: int, p1: int, ceil_mode: bool = False) -> Any:
    """:func:`window_out` for a size that may be an int64 expression (a symbolic spatial axis): the same
    formula, evaluated when the function runs (:func:`window_fits` checks the window fits)."""
    if isinstance(size, int):
        return window_out(size, k, s, d, p0, p1, ceil_mode)
    span = size + (p0 + p1 - (d * (k - 1) + 1))
    if not ceil_mode:
        return span // s + 1 if s > 1 else span + 1
    out = (span + (s - 1)) // s + 1
    return out - tir.cast("int64", (out - 1) * s >= size + p0)


def window_fits(sizes: Sequence[Any], kernel: Sequence[int], d: Sequence[int], pads: Sequence[int]) -> list[Any]:
    """The conditions (for :func:`plait.op._compute.shape_checks`) that each symbolic spatial size, padded by
    (top, left, bottom, right) ``pads``, holds its dilated window (what :func:`window_out` checks on
    static sizes)."""
    return [size + (pads[a] + pads[a + 2]) >= d[a] * (kernel[a] - 1) + 1
            for a, size in enumerate(sizes) if not isinstance(size, int)]


def fdtype(x: np.ndarray) -> np.dtype:
    return compute_dtype(x.dtype) if x.dtype.kind == "f" else x.dtype


def taps(xp: np.ndarray, kh: int, kw: int, s: tuple[int, int], d: tuple[int, int], oh: int, ow: int):
    """Yield (i, j, view) for every kernel tap: the strided [..., oh, ow] view of ``xp`` it reads."""
    for i in range(kh):
        for j in range(kw):
            h0, w0 = i * d[0], j * d[1]
            yield i, j, xp[..., h0:h0 + s[0] * (oh - 1) + 1:s[0], w0:w0 + s[1] * (ow - 1) + 1:s[1]]


WINDOW_ATTRS = (
    AttrSpec("strides", "ints", (1, 1), "window step (h, w)"),
    AttrSpec("padding", "ints", (0, 0, 0, 0), "implicit padding (top, left, bottom, right)"),
    AttrSpec("dilation", "ints", (1, 1), "spacing between kernel taps (h, w)"),
)


# ---- TE computes ----------------------------------------------------------------------------------


def rounded(op: str, out_shape: Any, acc: Tensor, dtype: str) -> Tensor:
    """``acc`` (accumulated in the compute dtype) rounded to ``dtype`` when the two differ (float16)."""
    return make(op, out_shape, lambda *i: down(acc[i], dtype)) if cdtype(dtype) != dtype else acc


def inside(iy: PrimExpr, ix: PrimExpr, h: int, w: int) -> PrimExpr:
    return tir.all_(iy >= 0, iy < h, ix >= 0, ix < w)


def padded(op: str, x: Tensor, pad: Sequence[int], value: Any, inline: bool = True) -> tuple[Tensor, int, int]:
    """``x`` [N, C, H, W] padded by (top, left, bottom, right) with ``value`` (an inlined stage, or a
    copy of its own with ``inline=False``)."""
    n, c, h, w = shape_of(x, op)
    t, l, b, r = pad
    if not any(pad):
        return x, h, w

    def body(i: PrimExpr, j: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        iy, ix = y - t, z - l
        return tir.select(inside(iy, ix, h, w), x[i, j, iy, ix], tir.const(value, x.dtype))

    return make(op, (n, c, h + t + b, w + l + r), body, "pad", inline=inline), h + t + b, w + l + r
