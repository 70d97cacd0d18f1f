"""Computes of the reductions and normalizations over an axis (:mod:`plait.op.reduce`).

A reduction is one reduce stage over the reduced axes followed (when the operator needs it) by an
elementwise epilogue stage over the output: ``create_prim_func`` fuses the two into one loop nest
with a local accumulator. float16 accumulates in float32 and is rounded once; integer sums wrap
in the input dtype like the references' ``np.sum(..., dtype=x.dtype)``.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

from plait import te
from plait.ir.attrs import Attrs
from plait.op.reduce import check_axis, reduce_axes
from plait.te.computes._common import (
    cdtype, down, highest, is_float, is_uint, lowest, make, max_reducer, min_reducer, out_tensor_type, shape_of,
    tir, up,
)
from plait.te.registry import register_compute
from plait.te.tensor import Tensor, comm_reducer
from plait.tir.expr import PrimExpr, Var


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


def _register_reduce(name: str) -> None:
    @register_compute(name)
    def _compute(inputs: list, attrs: Attrs, out_type: Any) -> Any:
        (x,) = inputs
        shape = shape_of(x, name)
        axes = reduce_axes(attrs["axis"], len(shape))
        keep = attrs["keepdims"]
        out_shape, dtype = out_tensor_type(out_type, name)
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

    @register_compute(name)
    def _compute(inputs: list, attrs: Attrs, out_type: Any) -> Any:
        (x,) = inputs
        shape = shape_of(x, name)
        axis = check_axis(attrs["axis"], len(shape))
        out_shape, _ = out_tensor_type(out_type, name)
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
    @register_compute(name)
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


@register_compute("cumsum")
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
