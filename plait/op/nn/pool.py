"""Pooling operators (ONNX semantics, NCHW): max and average pools, global pools.

Spatial attributes follow one convention: ``padding`` is (top, left, bottom, right), ``strides``
and ``dilation`` are (h, w). float16 inputs are computed in float32 and rounded once, as ONNX
Runtime does.

TE computes: pools reduce over the window; the average's divisor is a closed form of the output
position.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from plait import te
from plait.ir.attrs import Attrs
from plait.op._common import (
    AttrSpec, Cost, Family, OnnxMap, OpPattern, RelError, TensorType, Type, as_tensor, numel, tensor_bytes,
)
from plait.op._compute import cdtype, down, make, max_reducer, out_tensor_type, shape_checks, shape_of, tir, up
from plait.op.nn._window import (
    WINDOW_ATTRS, check_rank, fdtype, inside, taps, window_attrs, window_fits, window_ints, window_len, window_out,
)
from plait.op.tensor import require_dtype
from plait.tir.dtype import int_range, is_float
from plait.tir.expr import PrimExpr

defop = Family()

# ---- pooling ----------------------------------------------------------------------------------


def _pool_rel(kind: str) -> Callable[[tuple[Type, ...], Attrs], Type]:
    what = "max_pool2d" if kind == "max" else "avg_pool2d"

    def rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
        x = check_rank(as_tensor(args[0], f"{what}: data"), 4, f"{what}: data", "[N, C, H, W]")
        require_dtype(x, "numeric" if kind == "max" else "float", f"{what}: data")
        k = window_ints(attrs, "pool_size", 2, what, "h, w", 1)
        s, p, d = window_attrs(attrs, what)
        n, c, h, w = x.shape
        oh = window_out(h, k[0], s[0], d[0], p[0], p[2], attrs["ceil_mode"], what, "height")
        ow = window_out(w, k[1], s[1], d[1], p[1], p[3], attrs["ceil_mode"], what, "width")
        return TensorType((n, c, oh, ow), x.dtype)

    return rel


def _lowest(dtype: np.dtype) -> object:
    return np.finfo(dtype).min if dtype.kind == "f" else np.iinfo(dtype).min


def _pool_ref(kind: str) -> Callable[[list, Attrs], np.ndarray]:
    def ref(args: list, attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        k, s, p, d = attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"]
        n, c, h, w = x.shape
        oh = window_out(h, k[0], s[0], d[0], p[0], p[2], attrs["ceil_mode"])
        ow = window_out(w, k[1], s[1], d[1], p[1], p[3], attrs["ceil_mode"])
        # ceil_mode windows may reach past the bottom/right padding: pad further (never counted)
        xh = max((oh - 1) * s[0] + d[0] * (k[0] - 1) + 1 - (h + p[0] + p[2]), 0)
        xw = max((ow - 1) * s[1] + d[1] * (k[1] - 1) + 1 - (w + p[1] + p[3]), 0)
        pads = ((0, 0), (0, 0), (p[0], p[2] + xh), (p[1], p[3] + xw))
        if kind == "max":
            # padding never wins; a window of padding only gives the dtype's lowest value (as ORT)
            xp = np.pad(x, pads, constant_values=_lowest(x.dtype))
            out = np.full((n, c, oh, ow), _lowest(x.dtype), x.dtype)
            for _, _, view in taps(xp, k[0], k[1], s, d, oh, ow):
                np.maximum(out, view, out=out)
            return out
        ct = fdtype(x)
        xp = np.pad(x.astype(ct, copy=False), pads)
        total = np.zeros((n, c, oh, ow), ct)
        for _, _, view in taps(xp, k[0], k[1], s, d, oh, ow):
            total += view
        # the divisor: taps on the input (or, with count_include_pad, on the explicit padding)
        valid = np.pad(np.ones((h, w), ct), ((p[0], p[2]), (p[1], p[3])),
                       constant_values=1 if attrs["count_include_pad"] else 0)
        valid = np.pad(valid, ((0, xh), (0, xw)))
        count = np.zeros((oh, ow), ct)
        for _, _, view in taps(valid, k[0], k[1], s, d, oh, ow):
            count += view
        with np.errstate(divide="ignore", invalid="ignore"):
            return (total / count).astype(x.dtype, copy=False)

    return ref


def _pool_cost(extra: float) -> Callable[[tuple[Type, ...], Type, Attrs], Cost]:
    def cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
        taps = math.prod(attrs["pool_size"])
        return Cost(flops=(taps + extra) * numel(out), bytes_read=tensor_bytes(args[0]),
                    bytes_written=tensor_bytes(out))

    return cost


_POOL_ATTRS = (AttrSpec("pool_size", "ints", doc="window size (h, w)"),) + WINDOW_ATTRS + (
    AttrSpec("ceil_mode", "bool", False, "round the output size up (a last window must start inside the "
                                          "input or its top/left padding)"),
)
defop("nn.max_pool2d", rel=_pool_rel("max"), ref=_pool_ref("max"), cost=_pool_cost(0.0),
      pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=1, attrs=_POOL_ATTRS,
      doc="2-D max pooling over [N, C, H, W]; padding never wins (ONNX MaxPool)")
defop("nn.avg_pool2d", rel=_pool_rel("avg"), ref=_pool_ref("avg"), cost=_pool_cost(1.0),
      pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=1, attrs=_POOL_ATTRS + (
          AttrSpec("count_include_pad", "bool", False, "divide by the window size including explicit padding"),
      ), doc="2-D average pooling over [N, C, H, W] (ONNX AveragePool)")


def _global_pool_rel(kind: str) -> Callable[[tuple[Type, ...], Attrs], Type]:
    what = f"global_{kind}_pool2d"

    def rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
        x = as_tensor(args[0], f"{what}: data")
        if x.ndim < 3:
            raise RelError(f"{what}: data: expected a tensor [N, C, spatial...] of rank >= 3, got {x}")
        require_dtype(x, "numeric" if kind == "max" else "float", f"{what}: data")
        return TensorType(x.shape[:2] + (1,) * (x.ndim - 2), x.dtype)

    return rel


def _global_pool_ref(kind: str) -> Callable[[list, Attrs], np.ndarray]:
    def ref(args: list, attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        axes = tuple(range(2, x.ndim))
        if kind == "max":
            return np.max(x, axis=axes, keepdims=True)
        return np.mean(x, axis=axes, keepdims=True, dtype=fdtype(x)).astype(x.dtype, copy=False)

    return ref


def _global_pool_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    return Cost(flops=numel(args[0]), bytes_read=tensor_bytes(args[0]), bytes_written=tensor_bytes(out))


for _kind in ("avg", "max"):
    defop(f"nn.global_{_kind}_pool2d", rel=_global_pool_rel(_kind), ref=_global_pool_ref(_kind),
          cost=_global_pool_cost, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=1,
          doc=f"{_kind} over all spatial dims -> [N, C, 1, 1] (ONNX Global{_kind.capitalize()}Pool)")


# ---- TE computes ----------------------------------------------------------------------------------


# ---- pooling ----------------------------------------------------------------------------------


def _finite_lowest(dtype: str) -> Any:
    return float(np.finfo(dtype).min) if is_float(dtype) else int_range(dtype)[0]


def _pool_shape(op: str, x: Any, attrs: Attrs, out_type: Any) -> tuple[Any, str, list[Any]]:
    """(shape, dtype, run-time checks) of a pool's result: a symbolic spatial axis gives the window formula's
    expression, checked to hold one window."""
    n, c, h, w = shape_of(x, op)
    k, s, p, d = attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"]
    cm = attrs["ceil_mode"]
    like = (n, c, window_len(h, k[0], s[0], d[0], p[0], p[2], cm), window_len(w, k[1], s[1], d[1], p[1], p[3], cm))
    shape, dtype = out_tensor_type(out_type, op, like=like)
    return shape, dtype, shape_checks(op, window_fits((h, w), k, d, p))


@defop.compute("nn.max_pool2d")
def _max_pool2d(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.max_pool2d"
    (x,) = inputs
    _, _, h, w = shape_of(x, op)
    out_shape, dtype, checks = _pool_shape(op, x, attrs, out_type)
    k, s, p, d = attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"]
    pad = _finite_lowest(dtype)  # padding never wins; a window of padding only gives the lowest value

    def body(n: PrimExpr, c: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        ry = te.reduce_axis((0, k[0]), "ry")
        rx = te.reduce_axis((0, k[1]), "rx")
        iy, ix = y * s[0] + ry * d[0] - p[0], z * s[1] + rx * d[1] - p[1]
        v = tir.select(inside(iy, ix, h, w), x[n, c, iy, ix], tir.const(pad, dtype))
        return max_reducer(up(v), axis=[ry, rx])

    m = make(op, out_shape, body, checks=checks)
    return make(op, out_shape, lambda *i: down(m[i], dtype)) if cdtype(dtype) != dtype else m


def _tap_count(pos: PrimExpr, k: int, s: int, d: int, p0: int, lo: int, hi: int) -> PrimExpr:
    """How many of the taps ``pos * s - p0 + t * d`` (t < k) fall in [lo, hi) (an int64 expression)."""
    base = pos * s - p0
    t_lo = tir.max((lo - base + (d - 1)) // d, 0)
    t_hi = tir.min((hi - 1 - base) // d, k - 1)
    return tir.max(t_hi - t_lo + 1, 0)


@defop.compute("nn.avg_pool2d")
def _avg_pool2d(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.avg_pool2d"
    (x,) = inputs
    _, _, h, w = shape_of(x, op)
    out_shape, dtype, checks = _pool_shape(op, x, attrs, out_type)
    ct = cdtype(dtype)
    k, s, p, d = attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"]

    def body(n: PrimExpr, c: PrimExpr, y: PrimExpr, z: PrimExpr) -> Any:
        ry = te.reduce_axis((0, k[0]), "ry")
        rx = te.reduce_axis((0, k[1]), "rx")
        iy, ix = y * s[0] + ry * d[0] - p[0], z * s[1] + rx * d[1] - p[1]
        return te.sum(tir.select(inside(iy, ix, h, w), up(x[n, c, iy, ix]), tir.const(0.0, ct)), axis=[ry, rx])

    total = make(op, out_shape, body, checks=checks)
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

    @defop.compute(op)
    def _compute(inputs: list, attrs: Attrs, out_type: Any) -> Any:
        (x,) = inputs
        shape = shape_of(x, op)
        out_shape, dtype = out_tensor_type(out_type, op, like=tuple(shape[:2]) + (1,) * (len(shape) - 2))
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
        divisor = float(count) if isinstance(count, int) else tir.cast(cdtype(dtype), count)
        return make(op, out_shape, lambda *i: down(r[i] / divisor, dtype))


_register_global_pool("avg")
_register_global_pool("max")


# ---- ONNX -----------------------------------------------------------------------------------------


def _onnx_pool_attrs(ex: Any) -> dict[str, Any]:
    a = ex.attrs
    return dict(kernel_shape=list(a["pool_size"]), strides=list(a["strides"]), pads=list(a["padding"]),
                ceil_mode=int(a["ceil_mode"]))


def _max_pool_onnx(ex: Any) -> str:
    return ex.node("MaxPool", ex.ins, dilations=list(ex.attrs["dilation"]), **_onnx_pool_attrs(ex))


def _avg_pool_onnx(ex: Any) -> str:
    dil = list(ex.attrs["dilation"])
    if dil != [1, 1]:
        ex.need_opset(19, "AveragePool with dilations")
    return ex.node("AveragePool", ex.ins, dilations=dil if dil != [1, 1] else None,
                   count_include_pad=int(ex.attrs["count_include_pad"]), **_onnx_pool_attrs(ex))


# imported by the frontend's converters (auto_pad, 1-D and 3-D forms, LpPool); exported 1:1 or by code
defop.onnx("nn.max_pool2d", OnnxMap("MaxPool", convert=False, export=_max_pool_onnx))
defop.onnx("nn.avg_pool2d", OnnxMap("AveragePool", convert=False, export=_avg_pool_onnx))
defop.onnx("nn.global_avg_pool2d", OnnxMap("GlobalAveragePool", convert=False))
defop.onnx("nn.global_max_pool2d", OnnxMap("GlobalMaxPool", convert=False))
