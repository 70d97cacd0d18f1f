"""Computes of the shape and data-movement operators (:mod:`plait.op.transform`).

Every one is an injective index mapping from the output index to one input element (concatenate
chooses its input with nested ``select`` s, constant padding guards its load with one), so they are
inlined into their consumers by ``create_prim_func``. ``split`` returns one tensor per section.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from plait.ir.attrs import Attrs
from plait.op._common import norm_axis
from plait.op.transform import _pad_widths, _perm, _slice_plan, _squeeze_axes, norm_axes, slice_bounds
from plait.ir.types import TensorType
from plait.te.computes._common import (
    bcast_index, clamp, down, make, out_tensor_type, scalar_const, shape_of, tir, up,
)
from plait.te.registry import register_compute
from plait.te.tensor import Tensor
from plait.tir.expr import PrimExpr


def ravel(idx: Sequence[PrimExpr], shape: Sequence[int]) -> PrimExpr | int:
    """The row-major linear offset of ``idx`` in ``shape``."""
    flat: Any = 0
    for i, d in zip(idx, shape):
        flat = i if isinstance(flat, int) and flat == 0 else flat * d + i
    return flat


def unravel(flat: Any, shape: Sequence[int]) -> tuple[Any, ...]:
    """The index of row-major linear offset ``flat`` in ``shape`` (every dimension > 0)."""
    out: list[Any] = []
    stride = math.prod(shape)
    for k, d in enumerate(shape):
        stride //= d
        v = flat if stride == 1 else flat // stride
        out.append(v if k == 0 else v % d)
    return tuple(out)


def _empty(op: str, shape: Sequence[int], dtype: str) -> Tensor:
    """A stage with no elements (its body is never evaluated)."""
    return make(op, shape, lambda *i: scalar_const(0, dtype))


def _copy_reshaped(op: str, x: Tensor, out_type: Any) -> Tensor:
    """``x``'s elements in row-major order, in the result's shape (reshape, flatten, ...)."""
    shape, dtype = out_tensor_type(out_type, op)
    in_shape = shape_of(x, op)
    if 0 in shape or 0 in in_shape:
        return _empty(op, shape, dtype)
    if tuple(shape) == tuple(in_shape):
        return make(op, shape, lambda *i: x[i])
    return make(op, shape, lambda *i: x[unravel(ravel(i, shape), in_shape)])


for _name in ("reshape", "flatten"):
    register_compute(_name)(lambda inputs, attrs, out_type, _n=_name: _copy_reshaped(_n, inputs[0], out_type))


@register_compute("squeeze")
def _squeeze(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "squeeze")
    drop = set(_squeeze_axes(TensorType(in_shape), attrs["axes"]))
    shape, _ = out_tensor_type(out_type, "squeeze")

    def body(*i: PrimExpr) -> PrimExpr:
        it = iter(i)
        return x[tuple(0 if k in drop else next(it) for k in range(len(in_shape)))]

    return make("squeeze", shape, body)


@register_compute("expand_dims")
def _expand_dims(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    shape, _ = out_tensor_type(out_type, "expand_dims")
    new = set(norm_axes(attrs["axes"], len(shape), "expand_dims"))
    return make("expand_dims", shape, lambda *i: x[tuple(v for k, v in enumerate(i) if k not in new)])


@register_compute("transpose")
def _transpose(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "transpose")
    perm = _perm(TensorType(in_shape), attrs["axes"])
    shape, _ = out_tensor_type(out_type, "transpose")

    def body(*i: PrimExpr) -> PrimExpr:
        idx: list[Any] = [0] * len(perm)
        for k, p in enumerate(perm):
            idx[p] = i[k]
        return x[tuple(idx)]

    return make("transpose", shape, body)


@register_compute("broadcast_to")
def _broadcast_to(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    shape, _ = out_tensor_type(out_type, "broadcast_to")
    return make("broadcast_to", shape, lambda *i: x[bcast_index(x, i, "broadcast_to")])


@register_compute("tile")
def _tile(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "tile")
    shape, dtype = out_tensor_type(out_type, "tile")
    if 0 in shape:
        return _empty("tile", shape, dtype)
    reps = attrs["reps"]
    return make("tile", shape, lambda *i: x[tuple(v if r == 1 else v % d for v, d, r in zip(i, in_shape, reps))])


@register_compute("concatenate")
def _concatenate(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    shape, dtype = out_tensor_type(out_type, "concatenate")
    axis = norm_axis(attrs["axis"], len(shape))
    parts = [(x, shape_of(x, "concatenate")[axis]) for x in inputs]
    parts = [(x, n) for x, n in parts if n > 0]
    if not parts or 0 in shape:
        return _empty("concatenate", shape, dtype)

    def body(*i: PrimExpr) -> PrimExpr:
        def at(x: Tensor, offset: int) -> PrimExpr:
            return x[tuple(i[:axis]) + (i[axis] - offset if offset else i[axis],) + tuple(i[axis + 1:])]

        offsets = np.cumsum([0] + [n for _, n in parts]).tolist()
        value = at(parts[-1][0], offsets[-2])
        for k in range(len(parts) - 2, -1, -1):
            value = tir.select(i[axis] < offsets[k + 1], at(parts[k][0], offsets[k]), value)
        return value

    return make("concatenate", shape, body)


@register_compute("split")
def _split(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "split")
    axis = norm_axis(attrs["axis"], len(in_shape))
    outs = []
    offset = 0
    for k, n in enumerate(attrs["sections"]):
        shape, dtype = out_tensor_type(out_type, "split", k)

        def body(*i: PrimExpr, _o: int = offset) -> PrimExpr:
            return x[tuple(i[:axis]) + (i[axis] + _o if _o else i[axis],) + tuple(i[axis + 1:])]

        outs.append(make("split", shape, body, str(k)) if n > 0 else _empty("split", shape, dtype))
        offset += n
    return outs


@register_compute("strided_slice")
def _strided_slice(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "strided_slice")
    shape, dtype = out_tensor_type(out_type, "strided_slice")
    if 0 in shape:
        return _empty("strided_slice", shape, dtype)
    plan = {axis: (slice_bounds(in_shape[axis], s, e, st)[0], st)
            for axis, s, e, st in _slice_plan(TensorType(in_shape), attrs)}

    def body(*i: PrimExpr) -> PrimExpr:
        idx = []
        for k, v in enumerate(i):
            start, step = plan.get(k, (0, 1))
            idx.append(v if (start, step) == (0, 1) else v * step + start)
        return x[tuple(idx)]

    return make("strided_slice", shape, body)


@register_compute("nn.pad")
def _pad(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "nn.pad")
    shape, dtype = out_tensor_type(out_type, "nn.pad")
    widths = _pad_widths(TensorType(in_shape), attrs)
    mode = attrs["pad_mode"]
    if 0 in shape:
        return _empty("nn.pad", shape, dtype)
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
                if shape[k] > before[k] + n:
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

    return make("nn.pad", shape, body)


@register_compute("device_copy")
def _device_copy(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    shape, _ = out_tensor_type(out_type, "device_copy")
    return make("device_copy", shape, lambda *i: x[i])


@register_compute("range")
def _range(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    shape, dtype = out_tensor_type(out_type, "range")
    start, delta = scalar_const(attrs["start"], dtype), scalar_const(attrs["delta"], dtype)

    def body(i: PrimExpr) -> PrimExpr:
        # start + i * delta with each operation rounded to the dtype, as the reference's numpy
        t = down(up(tir.cast(dtype, i)) * up(delta), dtype)
        return down(up(start) + up(t), dtype)

    return make("range", shape, body)
