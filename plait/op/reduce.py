"""Reductions and normalizations over axes (ONNX semantics): reduce ops, argmax/argmin, softmax,
log_softmax, cumsum.

Reductions keep the input dtype (integer sums wrap; integer means truncate toward zero). float16
is accumulated in float32 and rounded once, as ONNX Runtime does. An empty reduction gives the
identity of the operation (sum 0, prod 1, max -inf or the dtype's minimum, ...); an empty mean
gives 0, as in ONNX Runtime.

TE computes: A reduction is one reduce stage over the reduced axes followed (when the operator needs it) by an
elementwise epilogue stage over the output: ``create_prim_func`` fuses the two into one loop nest
with a local accumulator. float16 accumulates in float32 and is rounded once; integer sums wrap
in the input dtype like the references' ``np.sum(..., dtype=x.dtype)``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from plait import te
from plait.ir.attrs import Attrs
from plait.ir.numeric import cast_array
from plait.op._common import (
    AttrSpec, Cost, Family, OnnxMap, OpPattern, RelError, TensorType, Type, as_tensor, norm_axis, numel, tensor_bytes,
)
from plait.op._compute import (
    cdtype, down, highest, is_float, is_uint, lowest, make, max_reducer, min_reducer, out_tensor_type, shape_of, tir,
    up,
)
from plait.op.tensor import compute_dtype, require_dtype
from plait.te.tensor import Tensor, comm_reducer
from plait.tir.expr import PrimExpr, Var

defop = Family()

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


# ---- TE computes ----------------------------------------------------------------------------------


def _in_index(out_idx: Sequence[PrimExpr], ndim: int, axes: tuple[int, ...], rvars: Sequence[Any],
              keepdims: bool) -> tuple[Any, ...]:
    """The input index of a reduction: reduce variables at ``axes``, output indices elsewhere."""
    it = iter(out_idx)
    rv = dict(zip(axes, rvars))
    idx = []
    for k in range(ndim):
        if k in rv:
            idx.append(rv[k])
            if keepdims:
                next(it)
        else:
            idx.append(next(it))
    return tuple(idx)


def _reduce(op: str, x: Tensor, axes: tuple[int, ...], keepdims: bool, out_shape: Sequence[int],
            reducer: Any, value: Callable[[PrimExpr], PrimExpr], suffix: str = "") -> Tensor:
    """``reducer(value(x[...]))`` over ``axes`` at every index of ``out_shape``.

    A reduction over no axis (a scalar's) reduces over one dummy axis of extent 1.
    """
    shape = shape_of(x, op)

    def body(*i: PrimExpr) -> Any:
        rvars = [te.reduce_axis((0, shape[a]), f"k{a}") for a in axes]
        axis = rvars or [te.reduce_axis((0, 1), "k")]
        return reducer(value(x[_in_index(i, len(shape), axes, rvars, keepdims)]), axis=axis)

    return make(op, out_shape, body, suffix)


def _abs(v: PrimExpr) -> PrimExpr:
    if is_float(v.dtype):
        return tir.fabs(v)
    return v if is_uint(v.dtype) else tir.select(v < 0, -v, v)


def _wide(dtype: str) -> str:
    return "uint64" if is_uint(dtype) else "int64"


def _kept(shape: Sequence[Any], axes: Sequence[int], keep: bool) -> tuple[Any, ...]:
    """The shape a reduction over ``axes`` leaves (each reduced axis 1 with ``keep``, else gone)."""
    return tuple(1 if k in axes else d for k, d in enumerate(shape)) if keep else tuple(
        d for k, d in enumerate(shape) if k not in axes)


def _register_reduce(name: str) -> None:
    @defop.compute(name)
    def _compute(inputs: list, attrs: Attrs, out_type: Any) -> Any:
        (x,) = inputs
        shape = shape_of(x, name)
        axes = reduce_axes(attrs["axis"], len(shape))
        keep = attrs["keepdims"]
        out_shape, dtype = out_tensor_type(out_type, name, like=_kept(shape, axes, keep))
        ct = cdtype(dtype)

        def red(reducer: Any, value: Callable[[PrimExpr], PrimExpr], suffix: str = "") -> Tensor:
            return _reduce(name, x, axes, keep, out_shape, reducer, value, suffix)

        def epilogue(t: Tensor, fn: Callable[[PrimExpr], PrimExpr]) -> Tensor:
            return make(name, out_shape, lambda *i: down(fn(t[i]), dtype))

        if name == "log_sum_exp":
            m = red(max_reducer, up, "max")

            def shift(mv: PrimExpr) -> PrimExpr:
                return tir.select(tir.isfinite(mv), mv, tir.const(0.0, ct))

            def exps(*i: PrimExpr) -> Any:
                rvars = [te.reduce_axis((0, shape[a]), f"k{a}") for a in axes]
                v = up(x[_in_index(i, len(shape), axes, rvars, keep)])
                return te.sum(tir.exp(v - shift(m[i])), axis=rvars or [te.reduce_axis((0, 1), "k")])

            s = make(name, out_shape, exps, "sum")
            return make(name, out_shape, lambda *i: down(tir.log(s[i]) + shift(m[i]), dtype))
        if name in ("max", "min"):
            t = red(max_reducer if name == "max" else min_reducer, up)
            return epilogue(t, lambda v: v) if ct != dtype else t
        if name == "prod":
            t = red(te.prod, up)
            return epilogue(t, lambda v: v) if ct != dtype else t
        value = {"sum": up, "mean": up, "log_sum": up, "sum_square": lambda v: up(v) * up(v),
                 "l2_norm": lambda v: up(v) * up(v), "l1_norm": lambda v: _abs(up(v))}[name]
        s = red(te.sum, value)
        if name == "mean":
            n = math.prod(shape[a] for a in axes)
            if not isinstance(n, int):  # a symbolic count: 0 (an empty mean) is known when the function runs
                zero = tir.const(0.0 if is_float(ct) else 0, ct)
                if is_float(ct):
                    return epilogue(s, lambda v: tir.select(tir.eq(n, 0), zero, v / tir.cast(ct, n)))
                w = _wide(dtype)
                return epilogue(s, lambda v: tir.select(tir.eq(n, 0), tir.cast(w, zero),
                                                        tir.truncdiv(tir.cast(w, v), tir.cast(w, n))))
            if n == 0:  # an empty mean is 0 (ONNX Runtime)
                return epilogue(s, lambda v: tir.const(0, ct) if not is_float(ct) else tir.const(0.0, ct))
            if is_float(ct):
                return epilogue(s, lambda v: v / float(n))
            w = _wide(dtype)
            return epilogue(s, lambda v: tir.truncdiv(tir.cast(w, v), tir.const(n, w)))
        if name == "l2_norm":
            if is_float(ct):
                return epilogue(s, tir.sqrt)
            return epilogue(s, lambda v: tir.sqrt(tir.cast("float64", v)))  # in double, truncated
        if name == "log_sum":
            return epilogue(s, tir.log)
        return epilogue(s, lambda v: v) if ct != dtype else s


for _name in ("sum", "mean", "max", "min", "prod", "sum_square", "l1_norm", "l2_norm", "log_sum", "log_sum_exp"):
    _register_reduce(_name)


# ---- argmax / argmin ------------------------------------------------------------------------------


def _arg_reducer(kind: str, last: bool, floating: bool) -> Any:
    """Reducer over (index, value): the best value, ties to the first (or last) index; like numpy,
    the first (last) NaN wins over any number."""

    def combine(a: tuple, b: tuple) -> tuple:
        ai, av = a
        bi, bv = b
        later = bi > ai if last else bi < ai
        better = bv > av if kind == "max" else bv < av
        take = tir.logical_or(better, tir.logical_and(tir.eq(bv, av), later))
        if floating:
            an, bn = tir.isnan(av), tir.isnan(bv)
            take = tir.select(an, tir.logical_and(bn, later), tir.logical_or(bn, take))
        return tir.select(take, bi, ai), tir.select(take, bv, av)

    def identity(dtypes: tuple[str, ...]) -> tuple:
        first = lowest("int64") if last else highest("int64")
        return first, lowest(dtypes[1]) if kind == "max" else highest(dtypes[1])

    return comm_reducer(combine, identity, f"arg{kind}")


def _register_arg(name: str) -> None:
    kind = name[3:]

    @defop.compute(name)
    def _compute(inputs: list, attrs: Attrs, out_type: Any) -> Any:
        (x,) = inputs
        shape = shape_of(x, name)
        axis = check_axis(attrs["axis"], len(shape))
        out_shape, _ = out_tensor_type(out_type, name, like=_kept(shape, (axis,), attrs["keepdims"]))
        reducer = _arg_reducer(kind, attrs["select_last_index"], is_float(x.dtype))

        def body(*i: PrimExpr) -> Any:
            k = te.reduce_axis((0, shape[axis]), "k")
            v = up(x[_in_index(i, len(shape), (axis,), [k], attrs["keepdims"])])
            if v.dtype == "bool":
                v = tir.cast("int8", v)
            return reducer((k, v), axis=[k])

        idx, _val = make(name, out_shape, body)
        return idx


_register_arg("argmax")
_register_arg("argmin")


# ---- softmax, log_softmax, cumsum -----------------------------------------------------------------


def _drop(idx: Sequence[PrimExpr], axis: int) -> tuple[PrimExpr, ...]:
    return tuple(v for k, v in enumerate(idx) if k != axis)


def _register_softmax(name: str, log: bool) -> None:
    @defop.compute(name)
    def _compute(inputs: list, attrs: Attrs, out_type: Any) -> Any:
        (x,) = inputs
        shape = shape_of(x, name)
        axis = check_axis(attrs["axis"], len(shape))
        _, dtype = out_tensor_type(out_type, name)
        ct = cdtype(dtype)
        rshape = _drop(shape, axis)

        def along(i: Sequence[PrimExpr], k: Var) -> tuple[Any, ...]:
            return tuple(i[:axis]) + (k,) + tuple(i[axis:])

        def mx(*i: PrimExpr) -> Any:
            k = te.reduce_axis((0, shape[axis]), "k")
            return max_reducer(up(x[along(i, k)]), axis=[k])

        m = make(name, rshape, mx, "max")

        def shift(i: Sequence[PrimExpr]) -> PrimExpr:
            mv = m[_drop(i, axis)]
            return tir.select(tir.isfinite(mv), mv, tir.const(0.0, ct))

        def total(*i: PrimExpr) -> Any:
            k = te.reduce_axis((0, shape[axis]), "k")
            full = along(i, k)
            return te.sum(tir.exp(up(x[full]) - shift(full)), axis=[k])

        s = make(name, rshape, total, "sum")

        def out(*i: PrimExpr) -> PrimExpr:
            z = up(x[i]) - shift(i)
            return down(z - tir.log(s[_drop(i, axis)]) if log else tir.exp(z) / s[_drop(i, axis)], dtype)

        return make(name, shape, out)


_register_softmax("nn.softmax", log=False)
_register_softmax("nn.log_softmax", log=True)


@defop.compute("cumsum")
def _cumsum(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    shape = shape_of(x, "cumsum")
    axis = check_axis(attrs["axis"], len(shape))
    _, dtype = out_tensor_type(out_type, "cumsum")
    n = shape[axis]
    excl, rev = int(attrs["exclusive"]), attrs["reverse"]

    def body(*i: PrimExpr) -> Any:
        p = i[axis]
        # the same summation order as the reference: forwards from 0, or backwards from n - 1
        if rev:
            k = te.reduce_axis((0, n - p - excl), "k")
            src = n - 1 - k
        else:
            k = te.reduce_axis((0, p + 1 - excl), "k")
            src = k
        return te.sum(up(x[tuple(i[:axis]) + (src,) + tuple(i[axis + 1:])]), axis=[k])

    s = make("cumsum", shape, body, "sum" if cdtype(dtype) != dtype else "")
    return make("cumsum", shape, lambda *i: down(s[i], dtype)) if cdtype(dtype) != dtype else s


# ---- ONNX -----------------------------------------------------------------------------------------


# operator -> (ONNX ReduceX, the opset from which its axes are an input rather than an attribute)
_REDUCE_ONNX = {
    "sum": ("ReduceSum", 13), "mean": ("ReduceMean", 18), "max": ("ReduceMax", 18), "min": ("ReduceMin", 18),
    "prod": ("ReduceProd", 18), "sum_square": ("ReduceSumSquare", 18), "l1_norm": ("ReduceL1", 18),
    "l2_norm": ("ReduceL2", 18), "log_sum": ("ReduceLogSum", 18), "log_sum_exp": ("ReduceLogSumExp", 18),
}


def _reduce_onnx(ex: Any) -> str:
    op_type, since = _REDUCE_ONNX[ex.call.op.name]  # type: ignore[union-attr]
    axes = ex.attrs["axis"]
    keepdims = int(bool(ex.attrs["keepdims"]))
    if axes is not None and len(axes) == 0:  # reduce over no axis: the input itself
        return ex.node("Identity", ex.ins)
    if axes is None:
        return ex.node(op_type, ex.ins, keepdims=keepdims)
    if ex.opset >= since:
        return ex.node(op_type, [ex.ins[0], ex.ints(axes, "axes")], keepdims=keepdims)
    return ex.node(op_type, ex.ins, axes=list(axes), keepdims=keepdims)


def _softmax_onnx(ex: Any) -> str:
    nd = ex.arg_type(0).ndim
    axis = ex.attrs["axis"]
    if ex.opset < 13 and axis % max(nd, 1) != nd - 1:
        raise ex.fail(f"softmax over axis {axis} of a rank-{nd} tensor needs ONNX opset >= 13")
    return ex.node("Softmax" if ex.call.op.name == "nn.softmax" else "LogSoftmax", ex.ins, axis=axis)  # type: ignore


def _cumsum_onnx(ex: Any) -> str:
    return ex.node("CumSum", [ex.ins[0], ex.const(ex.attrs["axis"], np.int64, "axis")],
                   exclusive=int(ex.attrs["exclusive"]), reverse=int(ex.attrs["reverse"]))


# imported by the frontend's converters (axes inputs, noop_with_empty_axes, bool any/all, Softmax's
# pre-13 flattening); exported 1:1 or by code
for _name, (_op_type, _) in _REDUCE_ONNX.items():
    defop.onnx(_name, OnnxMap(_op_type, convert=False, export=_reduce_onnx))
_ARG_ATTRS = {"axis": "axis", "keepdims": "keepdims", "select_last_index": "select_last_index"}
defop.onnx("argmax", OnnxMap("ArgMax", attrs=_ARG_ATTRS, convert=False))
defop.onnx("argmin", OnnxMap("ArgMin", attrs=_ARG_ATTRS, convert=False))
defop.onnx("nn.softmax", OnnxMap("Softmax", convert=False, export=_softmax_onnx))
defop.onnx("nn.log_softmax", OnnxMap("LogSoftmax", convert=False, export=_softmax_onnx))
defop.onnx("cumsum", OnnxMap("CumSum", convert=False, export=_cumsum_onnx))
