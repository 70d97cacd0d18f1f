"""Normalizations (ONNX semantics): batch_norm, layer_norm, instance_norm, lrn.

TE computes: moments are stages: the mean (a sum divided by the count), the variance of the centred
values, then the elementwise normalization, in the references' operation order; float16 in float32.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from plait import te
from plait.ir.attrs import Attrs
from plait.op._common import (
    AttrSpec, Cost, Dim, Family, OnnxMap, OpPattern, RelError, TensorType, Type, as_tensor, norm_axis, numel,
    tensor_bytes,
)
from plait.op._compute import bcast_index, cdtype, down, make, out_tensor_type, shape_of, tir, up
from plait.op.nn._window import fdtype, float_tensors
from plait.op.tensor import require_dtype
from plait.te.tensor import Tensor
from plait.tir.expr import PrimExpr

defop = Family()

# ---- normalizations -----------------------------------------------------------------------------

_EPS = AttrSpec("epsilon", "float", 1e-5, "added to the variance before the square root")


def _param_shape(t: TensorType, want: tuple[Dim, ...], what: str) -> None:
    ok = t.ndim == len(want) and all(isinstance(a, str) or isinstance(b, str) or a == b
                                     for a, b in zip(t.shape, want))
    if not ok:
        raise RelError(f"{what}: expected shape {want}, got {tuple(t.shape)}")


def _bn_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    names = ("data", "gamma", "beta", "mean", "var")
    x, *params = float_tensors(args, "batch_norm", names)
    c = x.shape[norm_axis(attrs["axis"], x.ndim, "batch_norm: axis")]
    for t, nm in zip(params, names[1:]):
        _param_shape(t, (c,), f"batch_norm: {nm}")
    return x


def _bn_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, gamma, beta, mean, var = (np.asarray(a) for a in args)
    ct = fdtype(x)
    axis = norm_axis(attrs["axis"], x.ndim)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    g, b, m, v = (a.astype(ct, copy=False).reshape(shape) for a in (gamma, beta, mean, var))
    y = (x.astype(ct, copy=False) - m) / np.sqrt(v + ct.type(attrs["epsilon"])) * g + b
    return y.astype(x.dtype, copy=False)


def _norm_cost(flops_per_element: float) -> Callable[[tuple[Type, ...], Type, Attrs], Cost]:
    def cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
        return Cost(flops=flops_per_element * numel(out), bytes_read=sum(tensor_bytes(a) for a in args),
                    bytes_written=tensor_bytes(out))

    return cost


defop("nn.batch_norm", rel=_bn_rel, ref=_bn_ref, cost=_norm_cost(2.0), pattern=OpPattern.OPAQUE,
      num_inputs=5, attrs=(AttrSpec("axis", "int", 1, "the channel axis"), _EPS),
      doc="inference batch normalization with given statistics (ONNX BatchNormalization); one output")


def _moments_norm(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) over ``axes``; float16 is computed in float32 (returned as such)."""
    ct = fdtype(x)
    xc = x.astype(ct, copy=False)
    mean = xc.mean(axis=axes, keepdims=True)
    diff = xc - mean
    var = (diff * diff).mean(axis=axes, keepdims=True)
    return diff / np.sqrt(var + ct.type(eps))


def _ln_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x, *params = float_tensors(args, "layer_norm", ("data", "gamma", "beta")[:len(args)])
    if x.ndim == 0:
        raise RelError(f"layer_norm: data: expected a tensor of rank >= 1, got {x}")
    axis = norm_axis(attrs["axis"], x.ndim, "layer_norm: axis")
    norm = x.shape[axis:]
    for t, nm in zip(params, ("gamma", "beta")):
        # unidirectional broadcast: every trailing dim of the parameter is 1 or the data's dim
        fits = t.ndim <= len(norm) and all(isinstance(p, str) or isinstance(d, str) or p in (1, d)
                                           for p, d in zip(reversed(t.shape), reversed(norm)))
        if not fits:
            raise RelError(f"layer_norm: {nm}: expected a shape that broadcasts to the normalized shape "
                           f"{tuple(norm)}, got {tuple(t.shape)}")
    return x


def _ln_ref(args: list, attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    axis = norm_axis(attrs["axis"], x.ndim)
    y = _moments_norm(x, tuple(range(axis, x.ndim)), attrs["epsilon"])
    for i, p in enumerate(args[1:]):
        p = np.asarray(p).astype(y.dtype, copy=False)
        y = y * p if i == 0 else y + p
    return y.astype(x.dtype, copy=False)


defop("nn.layer_norm", rel=_ln_rel, ref=_ln_ref, cost=_norm_cost(8.0), pattern=OpPattern.OPAQUE,
      num_inputs=(2, 3), attrs=(AttrSpec("axis", "int", -1, "first normalized axis: normalize over [axis, ndim)"),
                                _EPS),
      doc="layer normalization; gamma (and optional beta) broadcast to the normalized axes "
          "(ONNX LayerNormalization, computed in float32 for float16)")


def _in_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x, gamma, beta = float_tensors(args, "instance_norm", ("data", "gamma", "beta"))
    if x.ndim < 3:
        raise RelError(f"instance_norm: data: expected a tensor [N, C, spatial...] of rank >= 3, got {x}")
    for t, nm in ((gamma, "gamma"), (beta, "beta")):
        _param_shape(t, (x.shape[1],), f"instance_norm: {nm}")
    return x


def _in_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, gamma, beta = (np.asarray(a) for a in args)
    y = _moments_norm(x, tuple(range(2, x.ndim)), attrs["epsilon"])
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = y * gamma.astype(y.dtype).reshape(shape) + beta.astype(y.dtype).reshape(shape)
    return y.astype(x.dtype, copy=False)


defop("nn.instance_norm", rel=_in_rel, ref=_in_ref, cost=_norm_cost(8.0), pattern=OpPattern.OPAQUE,
      num_inputs=3, attrs=(_EPS,),
      doc="instance normalization over the spatial dims of [N, C, ...] (ONNX InstanceNormalization)")


def _lrn_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x = require_dtype(as_tensor(args[0], "lrn: data"), "float", "lrn: data")
    if x.ndim < 3:
        raise RelError(f"lrn: data: expected a tensor [N, C, spatial...] of rank >= 3, got {x}")
    if attrs["size"] < 1:
        raise RelError(f"lrn: size: expected a value >= 1, got {attrs['size']}")
    return x


def _lrn_ref(args: list, attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    ct = fdtype(x)
    size = attrs["size"]
    lo, hi = (size - 1) // 2, size // 2  # channels c - lo .. c + hi
    sq = np.square(x.astype(ct, copy=False))
    sqp = np.pad(sq, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
    c = x.shape[1]
    acc = np.zeros_like(sq)
    for i in range(size):
        acc += sqp[:, i:i + c]
    scale = ct.type(attrs["bias"]) + ct.type(attrs["alpha"] / size) * acc
    return (x.astype(ct, copy=False) / scale ** ct.type(attrs["beta"])).astype(x.dtype, copy=False)


def _lrn_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    return Cost(flops=(2.0 * attrs["size"] + 4.0) * numel(out), bytes_read=tensor_bytes(args[0]),
                bytes_written=tensor_bytes(out))


defop("nn.lrn", rel=_lrn_rel, ref=_lrn_ref, cost=_lrn_cost, pattern=OpPattern.OPAQUE, num_inputs=1, attrs=(
    AttrSpec("size", "int", doc="number of channels summed over (c - (size-1)//2 .. c + size//2)"),
    AttrSpec("alpha", "float", 1e-4, "scale of the sum of squares (divided by size)"),
    AttrSpec("beta", "float", 0.75, "exponent"),
    AttrSpec("bias", "float", 1.0, "added to the scaled sum of squares"),
), doc="local response normalization across channels (ONNX LRN)")


# ---- TE computes ----------------------------------------------------------------------------------


@defop.compute("nn.batch_norm")
def _batch_norm(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.batch_norm"
    x, gamma, beta, mean, var = inputs
    shape, dtype = out_tensor_type(out_type, op, like=shape_of(x, op))
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


@defop.compute("nn.layer_norm")
def _layer_norm(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.layer_norm"
    x, params = inputs[0], inputs[1:]
    shape, dtype = out_tensor_type(out_type, op, like=shape_of(x, op))
    axis = norm_axis(attrs["axis"], len(shape))
    norm, _ = _normalized(op, x, tuple(range(axis, len(shape))), float(attrs["epsilon"]))

    def body(*i: PrimExpr) -> PrimExpr:
        y = norm(i)
        for k, p in enumerate(params):
            v = up(p[bcast_index(p, i, op)])
            y = y * v if k == 0 else y + v
        return down(y, dtype)

    return make(op, shape, body)


@defop.compute("nn.instance_norm")
def _instance_norm(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.instance_norm"
    x, gamma, beta = inputs
    shape, dtype = out_tensor_type(out_type, op, like=shape_of(x, op))
    norm, _ = _normalized(op, x, tuple(range(2, len(shape))), float(attrs["epsilon"]))
    return make(op, shape, lambda *i: down(norm(i) * up(gamma[i[1]]) + up(beta[i[1]]), dtype))


@defop.compute("nn.lrn")
def _lrn(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    op = "nn.lrn"
    (x,) = inputs
    shape, dtype = out_tensor_type(out_type, op, like=shape_of(x, op))
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


# ---- ONNX -----------------------------------------------------------------------------------------


def _batch_norm_onnx(ex: Any) -> str:
    nd = ex.arg_type(0).ndim
    if nd < 2 or ex.attrs["axis"] % nd != 1:
        raise ex.fail(f"batch_norm over axis {ex.attrs['axis']} (ONNX BatchNormalization normalizes axis 1)")
    return ex.node("BatchNormalization", ex.ins, epsilon=ex.attrs["epsilon"])


def _layer_norm_onnx(ex: Any) -> str:
    ex.need_opset(17, "LayerNormalization")
    return ex.node("LayerNormalization", ex.ins, axis=ex.attrs["axis"], epsilon=ex.attrs["epsilon"])


# imported by the frontend's converters (BatchNormalization's training attributes, LayerNormalization's
# stash type, ...); exported 1:1 or by code
defop.onnx("nn.batch_norm", OnnxMap("BatchNormalization", convert=False, export=_batch_norm_onnx))
defop.onnx("nn.layer_norm", OnnxMap("LayerNormalization", since=17, convert=False, export=_layer_norm_onnx))
defop.onnx("nn.instance_norm", OnnxMap("InstanceNormalization", attrs={"epsilon": "epsilon"}, convert=False))
defop.onnx("nn.lrn", OnnxMap("LRN", attrs={"size": "size", "alpha": "alpha", "beta": "beta", "bias": "bias"},
                             convert=False))
