"""Reductions and normalizations over axes (ONNX semantics): reduce ops, argmax/argmin, softmax,
log_softmax, cumsum.

Reductions keep the input dtype (integer sums wrap; integer means truncate toward zero). float16
is accumulated in float32 and rounded once, as ONNX Runtime does. An empty reduction gives the
identity of the operation (sum 0, prod 1, max -inf or the dtype's minimum, ...); an empty mean
gives 0, as in ONNX Runtime.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from plait.ir.numeric import cast_array
from plait.op._common import (
    Attrs, AttrSpec, Cost, OpPattern, RelError, TensorType, Type, as_tensor, defop, norm_axis,
    numel, tensor_bytes,
)
from plait.op.tensor import compute_dtype, require_dtype


def check_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """Normalize one (possibly negative) axis of a rank-``ndim`` tensor; raises RelError."""
    if ndim == 0:
        raise RelError(f"{what}: expected a tensor of rank >= 1, got a scalar (axis {axis})")
    return norm_axis(axis, ndim, what)


def reduce_axes(axis: tuple[int, ...] | None, ndim: int) -> tuple[int, ...]:
    """The sorted, normalized axes a reduction acts on (``None``: all axes)."""
    if axis is None:
        return tuple(range(ndim))
    axes = tuple(check_axis(a, ndim) for a in axis)
    if len(set(axes)) != len(axes):
        raise RelError(f"axis: expected distinct axes, got {tuple(axis)}")
    return tuple(sorted(axes))


def reduced_shape(shape: tuple, axes: tuple[int, ...], keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reduction_cost(flops_per_input: float) -> Callable[[tuple[Type, ...], Type, Attrs], Cost]:
    def cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
        return Cost(flops=flops_per_input * numel(args[0]), bytes_read=tensor_bytes(args[0]),
                    bytes_written=tensor_bytes(out))

    return cost


# ---- reduce ops ---------------------------------------------------------------------------

_REDUCE_ATTRS = (
    AttrSpec("axis", "ints", None, "axes to reduce (None: all axes)", optional=True),
    AttrSpec("keepdims", "bool", True, "keep reduced axes as size-1 dims"),
)


def _reduce_rel(kind: str) -> Callable[[tuple[Type, ...], Attrs], Type]:
    def rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
        t = require_dtype(as_tensor(args[0]), kind)
        axes = reduce_axes(attrs["axis"], t.ndim)
        return TensorType(reduced_shape(t.shape, axes, attrs["keepdims"]), t.dtype)

    return rel


def _lowest(dtype: np.dtype) -> object:
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _highest(dtype: np.dtype) -> object:
    return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


def _sum(x: np.ndarray, ax: tuple[int, ...]) -> np.ndarray:
    return np.sum(x, axis=ax, keepdims=True, dtype=x.dtype)


def _mean(x: np.ndarray, ax: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod([x.shape[a] for a in ax], dtype=np.int64))
    s = _sum(x, ax)
    if n == 0:  # undefined in ONNX; ONNX Runtime gives 0
        return np.zeros_like(s)
    if x.dtype.kind == "f":
        return s / n
    q = np.abs(s.astype(np.int64)) // n if x.dtype.kind == "i" else s // n  # truncate toward zero
    return (np.sign(s) * q).astype(x.dtype) if x.dtype.kind == "i" else q


def _log_sum_exp(x: np.ndarray, ax: tuple[int, ...]) -> np.ndarray:
    m = np.max(x, axis=ax, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0).astype(x.dtype)
    return np.log(_sum(np.exp(x - m), ax)) + m


def _l2(x: np.ndarray, ax: tuple[int, ...]) -> np.ndarray:
    s = _sum(x * x, ax)
    # integer L2 norms: the square root in double, truncated (as ONNX Runtime does)
    if x.dtype.kind == "f":
        return np.sqrt(s)
    with np.errstate(invalid="ignore"):  # a wrapped-around negative sum: NaN -> 0
        return cast_array(np.sqrt(s.astype(np.float64)), x.dtype.name)


# name, function of (x in compute dtype, normalized axes) with keepdims, dtype kind, FLOPs per input element
_REDUCE: list[tuple[str, Callable[[np.ndarray, tuple[int, ...]], np.ndarray], str, float, str]] = [
    ("sum", _sum, "numeric", 1, "sum over axes (ONNX ReduceSum)"),
    ("mean", _mean, "numeric", 1, "mean over axes; integer means truncate toward zero (ONNX ReduceMean)"),
    ("max", lambda x, ax: np.max(x, axis=ax, keepdims=True, initial=_lowest(x.dtype)), "numeric", 1,
     "maximum over axes; NaN propagates; empty: -inf or the dtype's minimum (ONNX ReduceMax)"),
    ("min", lambda x, ax: np.min(x, axis=ax, keepdims=True, initial=_highest(x.dtype)), "numeric", 1,
     "minimum over axes; NaN propagates; empty: +inf or the dtype's maximum (ONNX ReduceMin)"),
    ("prod", lambda x, ax: np.prod(x, axis=ax, keepdims=True, dtype=x.dtype), "numeric", 1,
     "product over axes (ONNX ReduceProd)"),
    ("sum_square", lambda x, ax: _sum(x * x, ax), "numeric", 2, "sum of squares (ONNX ReduceSumSquare)"),
    ("l1_norm", lambda x, ax: _sum(np.abs(x), ax), "numeric", 2, "sum of absolute values (ONNX ReduceL1)"),
    ("l2_norm", _l2, "numeric", 2, "square root of the sum of squares (ONNX ReduceL2)"),
    ("log_sum", lambda x, ax: np.log(_sum(x, ax)), "float", 1, "log of the sum (ONNX ReduceLogSum)"),
    ("log_sum_exp", _log_sum_exp, "float", 10, "log of the sum of exps, computed stably (ONNX ReduceLogSumExp)"),
]


def _defreduce(name: str, fn: Callable[[np.ndarray, tuple[int, ...]], np.ndarray], kind: str,
               flops: float, doc: str) -> None:
    def ref(args: list, attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        axes = reduce_axes(attrs["axis"], x.ndim)
        xc = x.astype(compute_dtype(x.dtype), copy=False) if x.dtype.kind == "f" else x
        with np.errstate(all="ignore"):
            out = np.asarray(fn(xc, axes), dtype=x.dtype)
        return out if attrs["keepdims"] else out.reshape(reduced_shape(x.shape, axes, False))

    defop(name, rel=_reduce_rel(kind), ref=ref, cost=reduction_cost(flops), pattern=OpPattern.REDUCTION,
          num_inputs=1, attrs=_REDUCE_ATTRS, doc=doc)


for _name, _fn, _kind, _flops, _doc in _REDUCE:
    _defreduce(_name, _fn, _kind, _flops, _doc)


# ---- argmax / argmin ----------------------------------------------------------------------

_ARG_ATTRS = (
    AttrSpec("axis", "int", 0, "the axis to reduce"),
    AttrSpec("keepdims", "bool", True, "keep the reduced axis as a size-1 dim"),
    AttrSpec("select_last_index", "bool", False, "on ties, the last index instead of the first"),
)


def _arg_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    t = as_tensor(args[0])
    axis = check_axis(attrs["axis"], t.ndim)
    if t.shape[axis] == 0:
        raise RelError(f"axis: expected a non-empty axis, got axis {axis} of size 0")
    return TensorType(reduced_shape(t.shape, (axis,), attrs["keepdims"]), "int64")


def _defarg(name: str, fn: Callable) -> None:
    def ref(args: list, attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        axis = check_axis(attrs["axis"], x.ndim)
        if attrs["select_last_index"]:
            idx = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis, keepdims=True)
        else:
            idx = fn(x, axis=axis, keepdims=True)
        idx = np.asarray(idx, dtype=np.int64)
        return idx if attrs["keepdims"] else np.squeeze(idx, axis)

    what = "largest" if fn is np.argmax else "smallest"
    defop(name, rel=_arg_rel, ref=ref, cost=reduction_cost(1.0), pattern=OpPattern.REDUCTION,
          num_inputs=1, attrs=_ARG_ATTRS, doc=f"int64 index of the {what} value along axis")


_defarg("argmax", np.argmax)
_defarg("argmin", np.argmin)


# ---- softmax family, cumsum ---------------------------------------------------------------


def _axis_rel(kind: str) -> Callable[[tuple[Type, ...], Attrs], Type]:
    def rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
        t = require_dtype(as_tensor(args[0]), kind)
        check_axis(attrs["axis"], t.ndim)
        return t

    return rel


def _softmax(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    z = x - np.where(np.isfinite(m), m, 0).astype(x.dtype)
    e = np.exp(z)
    s = np.sum(e, axis=axis, keepdims=True)
    return z - np.log(s) if log else e / s


def _defsoftmax(name: str, log: bool) -> None:
    def ref(args: list, attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        axis = check_axis(attrs["axis"], x.ndim)
        with np.errstate(all="ignore"):
            return np.asarray(_softmax(x.astype(compute_dtype(x.dtype), copy=False), axis, log), dtype=x.dtype)

    doc = "log(softmax(x))" if log else "exp(x) / sum(exp(x))"
    defop(name, rel=_axis_rel("float"), ref=ref, cost=reduction_cost(12.0), pattern=OpPattern.OPAQUE,
          num_inputs=1, attrs=[AttrSpec("axis", "int", -1, "the axis to normalize over")],
          doc=f"{doc} along one axis, computed stably (ONNX opset 13)")


_defsoftmax("nn.softmax", log=False)
_defsoftmax("nn.log_softmax", log=True)


def _cumsum_ref(args: list, attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    axis = check_axis(attrs["axis"], x.ndim)
    xc = x.astype(compute_dtype(x.dtype), copy=False) if x.dtype.kind == "f" else x
    if attrs["reverse"]:
        xc = np.flip(xc, axis)
    with np.errstate(all="ignore"):
        out = np.cumsum(xc, axis=axis, dtype=xc.dtype)
        if attrs["exclusive"] and x.shape[axis]:
            out = np.roll(out, 1, axis)
            first = tuple(0 if i == axis else slice(None) for i in range(x.ndim))
            out[first] = 0
        if attrs["reverse"]:
            out = np.flip(out, axis)
        return np.ascontiguousarray(out, dtype=x.dtype)


defop("cumsum", rel=_axis_rel("numeric"), ref=_cumsum_ref, cost=reduction_cost(1.0), pattern=OpPattern.OPAQUE,
      num_inputs=1, attrs=[
          AttrSpec("axis", "int", doc="the axis to accumulate along"),
          AttrSpec("exclusive", "bool", False, "exclude the current element (the first output is 0)"),
          AttrSpec("reverse", "bool", False, "accumulate from the end"),
      ], doc="cumulative sum along axis (ONNX CumSum)")
