"""Slicing and padding (ONNX semantics): strided_slice (Slice) and nn.pad (Pad).

Slice's starts/ends/axes/steps and Pad's pads are attributes here: the ONNX frontend folds them to
constants.

TE computes: every one is an injective index mapping from the output index to one input element
(concatenate chooses its input with nested ``select`` s, constant padding guards its load with one),
so they are inlined into their consumers by ``create_prim_func``. ``split`` returns one tensor per
section.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait.ir.attrs import Attrs
from plait.ir.numeric import cast_array
from plait.ir.types import DTYPES, TensorType
from plait.op._common import ANY_DIM, AttrSpec, Family, OnnxMap, OpPattern, RelError
from plait.op._compute import (
    ceil_div, clamp, dim_max, dim_min, make, out_tensor_type, relay_shape, scalar_const, shape_checks, shape_of,
    tir,
)
from plait.op.transform import empty_tensor, fmt, move_cost, norm_axes, one_tensor, select_cost
from plait.tir.expr import PrimExpr

defop = Family()

INJ = OpPattern.INJECTIVE

# ---- strided_slice --------------------------------------------------------------------------------


def slice_bounds(dim: int, start: int, end: int, step: int) -> tuple[int, int, int]:
    """ONNX Slice clamping for one axis: normalized (start, end, length); end -1 means 'before 0'."""
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return start, end, max(0, -(-(end - start) // step))


# an end at least this large is "to the end" of any axis (ONNX exporters write INT64_MAX or INT32_MAX);
# a start or end at most its negation is "before the start"
_HUGE = 2**62


def slice_extent(dim: Any, start: int, end: int, step: int) -> tuple[Any, Any]:
    """:func:`slice_bounds` for a dim that may be an int64 expression (a symbolic axis): (start, length),
    each an int or an int64 expression evaluated at run time, with ONNX's clamping (negative indices
    count from the end, ends beyond the axis are clamped, negative steps walk backwards)."""
    if isinstance(dim, int):
        s, _, n = slice_bounds(dim, start, end, step)
        return s, n
    if step > 0:
        s = dim_min(start, dim) if start >= 0 else dim_max(start + dim, 0) if start > -_HUGE else 0
        e = dim if end >= _HUGE else dim_min(end, dim) if end >= 0 else dim_max(end + dim, 0) if end > -_HUGE else 0
        return s, ceil_div(dim_max(e - s, 0), step)
    last = dim - 1
    s = last if start >= _HUGE else dim_min(start, last) if start >= 0 else dim_min(dim_max(start + dim, 0), last)
    e = -1 if end <= -_HUGE else dim_max(end + dim, -1) if end < 0 else dim_min(end, last)
    return s, ceil_div(dim_max(s - e, 0), -step)


def _slice_plan(x: TensorType, attrs: Attrs) -> list[tuple[int, int, int, int]]:
    """[(axis, start, end, step)] after checking the attributes' consistency."""
    begin, end = attrs["begin"], attrs["end"]
    n = len(begin)
    strides = attrs["strides"] if attrs["strides"] is not None else (1,) * n
    axes = attrs["axes"] if attrs["axes"] is not None else tuple(range(n))
    for name, v in (("end", end), ("strides", strides), ("axes", axes)):
        if len(v) != n:
            raise RelError(f"strided_slice: expected {name} of length {n} (as begin), got {fmt(v)}")
    if attrs["axes"] is None and n > x.ndim:
        raise RelError(f"strided_slice: expected at most {x.ndim} begin values (the input rank), got {n}")
    if 0 in strides:
        raise RelError(f"strided_slice: expected non-zero strides, got {fmt(strides)}")
    return [(a, s, e, st) for a, s, e, st in zip(norm_axes(axes, x.ndim, "strided_slice"), begin, end, strides)]


def _slice_rel(args, attrs):
    x = one_tensor(args, "strided_slice")
    out = list(x.shape)
    for axis, s, e, st in _slice_plan(x, attrs):
        d = x.shape[axis]
        if isinstance(d, int):
            out[axis] = slice_bounds(d, s, e, st)[2]
        elif not ((s == 0 and st == 1 and e >= 2**31 - 1) or (s == -1 and st == -1 and e <= -(2**31))):
            out[axis] = ANY_DIM  # only the whole axis (forwards or reversed) keeps a symbol
    return TensorType(tuple(out), x.dtype)


def _slice_ref(args, attrs):
    (x,) = args
    index = [slice(None)] * x.ndim
    for axis, s, e, st in _slice_plan(TensorType(x.shape), attrs):
        s, e, _ = slice_bounds(x.shape[axis], s, e, st)
        index[axis] = slice(s, e if e >= 0 else None, st)
    return np.array(x[tuple(index)])


defop("strided_slice", rel=_slice_rel, ref=_slice_ref, cost=select_cost, pattern=INJ, attrs=[
    AttrSpec("begin", "ints", doc="start per sliced axis (negative counts from the end; clamped)"),
    AttrSpec("end", "ints", doc="exclusive end per sliced axis (clamped; use INT64_MAX/MIN for 'to the end')"),
    AttrSpec("strides", "ints", None, "step per sliced axis (negative walks backwards); None = all 1",
             optional=True),
    AttrSpec("axes", "ints", None, "the axes begin/end/strides refer to; None = 0, 1, ...", optional=True),
], doc="ONNX Slice")


# ---- nn.pad ---------------------------------------------------------------------------------------


def _pad_widths(x: TensorType, attrs: Attrs) -> list[tuple[int, int]]:
    pads, mode = attrs["pad_width"], attrs["pad_mode"]
    if len(pads) != 2 * x.ndim:
        raise RelError(f"nn.pad: expected {2 * x.ndim} pad_width values (begins then ends), got {fmt(pads)}")
    widths = list(zip(pads[:x.ndim], pads[x.ndim:]))
    for axis, ((b, e), d) in enumerate(zip(widths, x.shape)):
        if not isinstance(d, int):
            continue
        if d + b + e < 0:
            raise RelError(f"nn.pad: axis {axis} of size {d} padded by ({b}, {e}): expected a size >= 0, "
                           f"got {d + b + e}")
        kept = d + min(b, 0) + min(e, 0)  # negative pads crop first, then the mode pads what is left
        if mode == "reflect" and max(b, e) > max(kept - 1, 0):
            raise RelError(f"nn.pad: reflect padding at axis {axis}: expected pads <= {max(kept - 1, 0)} "
                           f"(the cropped size {kept} minus 1), got ({b}, {e})")
        if mode in ("edge", "wrap") and kept == 0 and max(b, e) > 0:
            raise RelError(f"nn.pad: {mode} padding at axis {axis}: expected a non-empty axis, got size {kept}")
    return widths


def _pad_rel(args, attrs):
    x = one_tensor(args, "nn.pad")
    widths = _pad_widths(x, attrs)
    out = [d + b + e if isinstance(d, int) else (d if b == e == 0 else ANY_DIM) for d, (b, e) in zip(x.shape, widths)]
    return TensorType(tuple(out), x.dtype)


def _pad_ref(args, attrs):
    (x,) = args
    widths = _pad_widths(TensorType(x.shape), attrs)
    crop = tuple(slice(-min(b, 0), x.shape[i] + min(e, 0)) for i, (b, e) in enumerate(widths))
    x = x[crop]
    pos = [(max(b, 0), max(e, 0)) for b, e in widths]
    mode = attrs["pad_mode"]
    if mode == "constant":
        value = cast_array(attrs["pad_value"], x.dtype.name) if x.dtype != bool else bool(attrs["pad_value"])
        return np.pad(x, pos, mode="constant", constant_values=value)
    return np.pad(x, pos, mode=mode)


defop("nn.pad", rel=_pad_rel, ref=_pad_ref, cost=move_cost, pattern=INJ, attrs=[
    AttrSpec("pad_width", "ints", doc="ONNX order: every axis' begin, then every axis' end; negative crops"),
    AttrSpec("pad_value", "float", 0.0, "the fill value of constant mode (cast to the data's dtype)"),
    AttrSpec("pad_mode", "str", "constant", "how to fill", choices=("constant", "reflect", "edge", "wrap")),
], doc="ONNX Pad")


# ---- TE computes ----------------------------------------------------------------------------------


@defop.compute("strided_slice")
def _strided_slice(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "strided_slice")
    plan = {axis: (slice_extent(in_shape[axis], s, e, st), st)
            for axis, s, e, st in _slice_plan(TensorType(relay_shape(in_shape)), attrs)}
    derived = tuple(plan[k][0][1] if k in plan else d for k, d in enumerate(in_shape))
    shape, dtype = out_tensor_type(out_type, "strided_slice", like=derived)
    if 0 in shape:
        return empty_tensor("strided_slice", shape, dtype)

    def body(*i: PrimExpr) -> PrimExpr:
        idx = []
        for k, v in enumerate(i):
            (start, _), step = plan.get(k, ((0, None), 1))
            plain = isinstance(start, int) and start == 0 and step == 1
            idx.append(v if plain else v * step + start)
        return x[tuple(idx)]

    return make("strided_slice", shape, body)


@defop.compute("nn.pad")
def _pad(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "nn.pad")
    widths = _pad_widths(TensorType(relay_shape(in_shape)), attrs)
    mode = attrs["pad_mode"]
    shape, dtype = out_tensor_type(out_type, "nn.pad", like=[d + b + e for d, (b, e) in zip(in_shape, widths)])
    if 0 in shape:
        return empty_tensor("nn.pad", shape, dtype)
    # negative pads crop first: the kept part of axis k starts at crop[k] and has kept[k] elements
    crop = [-min(b, 0) for b, _ in widths]
    kept = [d + min(b, 0) + min(e, 0) for d, (b, e) in zip(in_shape, widths)]
    before = [max(b, 0) for b, _ in widths]
    fill = scalar_const(attrs["pad_value"], dtype)

    def body(*i: PrimExpr) -> PrimExpr:
        idx, inside = [], []
        for k, v in enumerate(i):
            if widths[k] == (0, 0):
                idx.append(v)
                continue
            q = v - before[k] if before[k] else v
            n = kept[k]
            if mode == "constant":
                if before[k]:
                    inside.append(q >= 0)
                if widths[k][1] > 0:
                    inside.append(q < n)
            elif mode == "edge":
                q = clamp(q, 0, n - 1)
            elif mode == "reflect":  # one reflection suffices: pads never exceed n - 1
                q = tir.select(q < 0, -q, tir.select(q >= n, 2 * (n - 1) - q, q))
            else:  # wrap
                q = q % n
            idx.append(q + crop[k] if crop[k] else q)
        value = x[tuple(idx)]
        return tir.select(tir.all_(*inside), value, fill) if inside else value

    return make("nn.pad", shape, body, checks=_pad_checks(in_shape, widths, mode))


def _pad_checks(in_shape: Any, widths: list[tuple[int, int]], mode: str) -> list[Any]:
    """Run-time checks of what the relation checks on static axes, for the symbolic ones: a crop keeps
    >= 0 elements, reflect pads stay below the cropped size, edge and wrap padding have elements to repeat."""
    conds = []
    for d, (b, e) in zip(in_shape, widths):
        if isinstance(d, int) or (b, e) == (0, 0):
            continue
        kept = d + min(b, 0) + min(e, 0)
        if mode == "reflect" and max(b, e) > 0:
            conds.append(kept - 1 >= max(b, e))
        elif mode in ("edge", "wrap") and max(b, e) > 0:
            conds.append(kept >= 1)
        elif min(b, e) < 0:
            conds.append(kept >= 0)
    return shape_checks("nn.pad", conds)


# ---- ONNX -----------------------------------------------------------------------------------------


def _slice_onnx(ex: Any) -> str:
    a = ex.attrs
    begin, end, axes, steps = a["begin"], a["end"], a["axes"], a["strides"]
    ins = [ex.ins[0], ex.ints(begin, "starts"), ex.ints(end, "ends")]
    if axes is not None or steps is not None:
        ins.append(ex.ints(axes if axes is not None else range(len(begin)), "axes"))
    if steps is not None:
        ins.append(ex.ints(steps, "steps"))
    return ex.node("Slice", ins)


def _pad_onnx(ex: Any) -> str:
    a = ex.attrs
    mode = a["pad_mode"]
    if mode == "wrap":
        ex.need_opset(19, "Pad with mode 'wrap'")
    ins = [ex.ins[0], ex.ints(a["pad_width"], "pads")]
    if mode == "constant" and a["pad_value"] != 0:
        dtype = ex.arg_type(0).dtype
        value = np.asarray(a["pad_value"]).astype(DTYPES[dtype])
        if float(value) != a["pad_value"] and not np.isnan(a["pad_value"]):
            raise ex.fail(f"pad value {a['pad_value']} is not representable in {dtype}")
        ins.append(ex.const(value, hint="constant_value"))
    return ex.node("Pad", ins, mode=mode)


# imported by the frontend's converters (starts/ends/pads inputs folded to attributes); exported by code
defop.onnx("strided_slice", OnnxMap("Slice", convert=False, export=_slice_onnx))
defop.onnx("nn.pad", OnnxMap("Pad", convert=False, export=_pad_onnx))
