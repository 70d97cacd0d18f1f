"""Computes of the normalizations (:mod:`plait.op.nn`): batch_norm, layer_norm, instance_norm, lrn.

Moments are stages: the mean (a sum divided by the count), the variance of the centred values,
then the elementwise normalization, in the references' operation order; float16 in float32.
"""

from __future__ import annotations

from typing import Any, Sequence

from plait import te
from plait.ir.attrs import Attrs
from plait.op._common import norm_axis
from plait.te.computes._common import bcast_index, cdtype, down, make, out_tensor_type, shape_of, tir, up
from plait.te.registry import register_compute
from plait.te.tensor import Tensor
from plait.tir.expr import PrimExpr


@register_compute("nn.batch_norm")
def _batch_norm(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.batch_norm"
    x, gamma, beta, mean, var = inputs
    shape, dtype = out_tensor_type(out_type, op)
    axis = norm_axis(attrs["axis"], len(shape))
    eps = float(attrs["epsilon"])

    def body(*i: PrimExpr) -> PrimExpr:
        c = i[axis]
        g, b, m, v = (up(t[c]) for t in (gamma, beta, mean, var))
        return down((up(x[i]) - m) / tir.sqrt(v + eps) * g + b, dtype)

    return make(op, shape, body)


def _normalized(op: str, x: Tensor, axes: Sequence[int], eps: float) -> tuple[Any, tuple[int, ...]]:
    """``(norm, kept shape)``: ``norm(idx)`` is ``(x - mean) / sqrt(var + eps)`` at a full index, with
    the mean and the variance stages over the kept (not normalized) dims, as numpy's ``mean``."""
    shape = shape_of(x, op)
    kept = [k for k in range(len(shape)) if k not in axes]
    n = 1
    for a in axes:
        n *= shape[a]
    kshape = tuple(shape[k] for k in kept)
    ct = cdtype(x.dtype)

    def full(i: Sequence[PrimExpr], rs: Sequence[Any]) -> tuple[Any, ...]:
        it, rt = iter(i), iter(rs)
        return tuple(next(rt) if k in axes else next(it) for k in range(len(shape)))

    def kept_of(i: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        return tuple(i[k] for k in kept)

    def s1(*i: PrimExpr) -> Any:
        rs = [te.reduce_axis((0, shape[a]), f"r{a}") for a in axes]
        return te.sum(up(x[full(i, rs)]), axis=rs)

    total = make(op, kshape, s1, "sum")
    mean = make(op, kshape, lambda *i: total[i] / float(n), "mean")

    def s2(*i: PrimExpr) -> Any:
        rs = [te.reduce_axis((0, shape[a]), f"r{a}") for a in axes]
        dv = up(x[full(i, rs)]) - mean[i]
        return te.sum(dv * dv, axis=rs)

    sq = make(op, kshape, s2, "sumsq")

    def norm(i: Sequence[PrimExpr]) -> PrimExpr:
        k = kept_of(i)
        return (up(x[tuple(i)]) - mean[k]) / tir.sqrt(sq[k] / float(n) + tir.const(eps, ct))

    return norm, kshape


@register_compute("nn.layer_norm")
def _layer_norm(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.layer_norm"
    x, params = inputs[0], inputs[1:]
    shape, dtype = out_tensor_type(out_type, op)
    axis = norm_axis(attrs["axis"], len(shape))
    norm, _ = _normalized(op, x, tuple(range(axis, len(shape))), float(attrs["epsilon"]))

    def body(*i: PrimExpr) -> PrimExpr:
        y = norm(i)
        for k, p in enumerate(params):
            v = up(p[bcast_index(p, i, op)])
            y = y * v if k == 0 else y + v
        return down(y, dtype)

    return make(op, shape, body)


@register_compute("nn.instance_norm")
def _instance_norm(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.instance_norm"
    x, gamma, beta = inputs
    shape, dtype = out_tensor_type(out_type, op)
    norm, _ = _normalized(op, x, tuple(range(2, len(shape))), float(attrs["epsilon"]))
    return make(op, shape, lambda *i: down(norm(i) * up(gamma[i[1]]) + up(beta[i[1]]), dtype))


@register_compute("nn.lrn")
def _lrn(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.lrn"
    (x,) = inputs
    shape, dtype = out_tensor_type(out_type, op)
    ct = cdtype(dtype)
    size = attrs["size"]
    lo = (size - 1) // 2  # channels c - lo .. c + size // 2
    channels = shape[1]

    def body(*i: PrimExpr) -> Any:
        r = te.reduce_axis((0, size), "r")
        c = i[1] + r - lo
        v = up(x[(i[0], c) + tuple(i[2:])])
        inside = tir.logical_and(c >= 0, c < channels)
        return te.sum(tir.select(inside, v * v, tir.const(0.0, ct)), axis=[r])

    acc = make(op, shape, body, "sum")

    def out(*i: PrimExpr) -> PrimExpr:
        scale = tir.const(float(attrs["bias"]), ct) + tir.const(attrs["alpha"] / size, ct) * acc[i]
        return down(up(x[i]) / tir.pow(scale, tir.const(float(attrs["beta"]), ct)), dtype)

    return make(op, shape, out)
