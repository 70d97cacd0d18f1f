"""QDQToInteger: ``DQ -> float operator -> Q`` patterns (what ONNX Runtime's QDQ quantizer writes)
become integer operators with an explicit requantization.

Matched, with ``DQ`` = ``qnn.dequantize`` and ``Q`` = ``qnn.quantize`` to int8/uint8 whose scales and
zero points are constants (per tensor for the data and the result; the weight's scale may be per
output channel, its zero points must be equal)::

    Q( [relu | clip]( [add(core, [reshape] DQ(bias int32, zero point 0))] ) )
    core = nn.conv2d(DQ(x), DQ(w const)) | nn.dense(DQ(x), DQ(w const)) | nn.matmul(DQ(a), DQ(b))

becomes ``qnn.requantize([add](qnn.<op>(x, w), bias), scale)`` with ``scale = x_scale * w_scale /
y_scale`` in float32 (QLinearConv's computation), the result's zero point, and the activation as a
clamp of the quantized result (exact: quantization is monotone, so ``Q(clip(v, a, b)) =
clip(Q(v), Q(a), Q(b))``). The int32 bias is added as it is, as ONNX Runtime's QDQ fusion does.
With ``mode="fixed"`` the requantization takes TensorFlow Lite multipliers and shifts
(:func:`plait.op.qnn.fixed_point_multiplier`) instead of the float scale.

``Q(reshape(DQ(x)))`` (or flatten, squeeze, expand_dims, transpose, strided_slice, max pooling, a
concatenate of such dequantizes) with the same scale and zero point becomes ``reshape(x)``.

The other patterns ONNX Runtime's optimized session fuses become the operators of
:mod:`plait.op.qnn_elem` with its kernels' arithmetic (per tensor, one dtype at both ends):
``Q(softmax(DQ(x)))`` -> ``qnn.softmax``; ``Q(sigmoid | leaky_relu(DQ(x)))`` -> ``qnn.lookup``;
``Q(add | multiply(DQ(a), DQ(b)))`` -> ``qnn.add`` / ``qnn.mul``; ``Q(concatenate(DQ(a), ...))`` ->
``qnn.lookup`` of each input with other parameters, then ``concatenate``;
``Q(global_avg_pool2d(DQ(x)))`` -> an int32 ``sum`` and ``qnn.requantize``; ``Q(avg_pool2d(DQ(x)))``
-> the float pooling with QLinearAveragePool's rounding. A chain of float elementwise operators that
ONNX Runtime runs in float (``Q(erf(divide(DQ(x), c)))``: :data:`TABLE_UNARY`, :data:`TABLE_BINARY`)
becomes one ``qnn.lookup`` table computed at compile time; so does, afterwards, a chain of integer
elementwise operators of one int8 value and such a table (:mod:`plait.relay.passes.qdq_tables`: a
GELU's ``x * (1 + erf(x))``).

First, as ONNX Runtime's ``WeightBiasQuantization``: ``Q([add](conv(DQ(x), w float), b float))``
(``nn.conv2d`` / ``nn.conv2d_transpose``, x per tensor) takes ``DQ(int8 w)`` and ``DQ(int32 b)``
(:class:`_WeightBias`), so the patterns above apply where ONNX Runtime's do.

The operator between the dequantizes and the quantize must have no other use (otherwise the float
computation stays); a dequantize may have other uses (ONNX Runtime duplicates it), which keep it.
What does not match keeps its float operator between a run-time dequantize and quantize (the int8
weights stay int8 either way: ``FoldConstant`` never folds ``qnn.dequantize``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from plait.ir.op import Op
from plait.ir.transform import Pass, PassContext
from plait.ir.types import TensorType
from plait.op import get_op
from plait.op._common import norm_axis
from plait.op.qnn import fixed_point_multiplier
from plait.op.qnn_elem import (
    add_attrs, global_avg_pool_scale, leaky_relu32, lookup_table, mlas_logistic, mul_attrs, softmax_multiplier,
    softmax_table,
)
from plait.relay.expr import Call, Constant, Expr, Function, call
from plait.relay.infer import infer_type
from plait.relay.module import IRModule
from plait.relay.passes.fold_batch_norm import _use_counts
from plait.relay.passes.qdq_tables import FoldTables
from plait.relay.visitor import ExprMutator
from plait.tir.dtype import int_range

INT8 = ("int8", "uint8")
# operators that commute with a quantization of equal parameters: they move or select values (max
# pooling is monotone), so Q(op(DQ(x))) = op(x)
MOVES = ("reshape", "flatten", "squeeze", "expand_dims", "transpose", "strided_slice", "nn.max_pool2d",
         "nn.global_max_pool2d", "concatenate")

# unary operators ONNX Runtime's optimized session runs as integer operators between a DQ and a Q
UNARY = ("nn.softmax", "sigmoid", "nn.leaky_relu", "nn.global_avg_pool2d", "nn.avg_pool2d")
# float elementwise operators (ONNX Runtime runs them in float32) whose chain between one per-tensor DQ
# and a Q, with one-element float32 constants as the other operand of a binary one, is a function of
# one int8 value: a qnn.lookup table computed at compile time
TABLE_UNARY = ("erf", "tanh", "exp", "log", "sqrt", "abs", "negative", "nn.relu", "clip", "floor", "ceil", "round")
TABLE_BINARY = ("add", "subtract", "multiply", "divide")


def _one(t: TensorType) -> bool:
    """Has ``t`` exactly one element (static shape)?"""
    return all(isinstance(d, int) for d in t.shape) and int(np.prod(t.shape)) == 1


def _op(e: Expr, *names: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name in names


def _const(e: Expr) -> np.ndarray | None:
    return e.data if isinstance(e, Constant) else None


@dataclass
class _QParams:
    """A dequantize's input and its constant scale (float32, flattened) and zero points."""

    value: Expr
    scale: np.ndarray
    zero: np.ndarray
    axis: int

    @property
    def per_tensor(self) -> bool:
        return self.scale.size == 1

    def zero_point(self) -> int | None:
        """The zero point when every channel has the same one."""
        z = np.unique(self.zero)
        return int(z[0]) if z.size == 1 else None


def _dq(e: Expr, dtypes: tuple[str, ...] = INT8) -> _QParams | None:
    if not _op(e, "qnn.dequantize"):
        return None
    x, s, z = e.args  # type: ignore[union-attr]
    sv, zv = _const(s), _const(z)
    if sv is None or zv is None or sv.dtype != np.float32 or zv.dtype.name not in dtypes:
        return None
    return _QParams(x, sv.reshape(-1), zv.reshape(-1), e.attrs["axis"])  # type: ignore[union-attr]


def _quantized_clip(act: Call, scale: np.float32, zero: np.ndarray) -> tuple[int | None, int | None]:
    """The clamp of the quantized result an activation between the operator and Q amounts to."""
    quantize = get_op("qnn.quantize")

    def q(v: float) -> int:
        return int(quantize.ref([np.array(v, np.float32), np.array(scale, np.float32), zero], quantize.make_attrs({})))

    if act.op.name == "nn.relu":  # type: ignore[union-attr]
        return q(0.0), None
    lo, hi = act.attrs["a_min"], act.attrs["a_max"]
    return (None if lo is None else q(lo)), (None if hi is None else q(hi))


class _Rewriter(ExprMutator):
    """Matches on the original (typed) nodes, whose use counts are known, and builds on their
    rewritten forms (``self.memo``)."""

    def __init__(self, uses: dict[Expr, int], mode: str):
        super().__init__()
        self.uses = uses
        self.mode = mode

    def _single(self, e: Expr) -> bool:
        return self.uses.get(e, 0) == 1

    def _new(self, e: Expr) -> Expr:
        return self.memo.get(e, e)

    def rewrite_call(self, pre: Call, post: Expr) -> Expr:
        if _op(post, "qnn.matmul"):  # (the QOperator form's)
            (a, b), at = post.args, pre.args[0].checked_type  # type: ignore[union-attr]
            assert isinstance(at, TensorType)
            return _product(a, b, at.ndim, post.attrs["a_zero_point"], post.attrs["b_zero_point"], post.meta)  # type: ignore[union-attr]
        if not _op(pre, "qnn.quantize"):
            return post
        y, s, z = pre.args
        sv, zv = _const(s), _const(z)
        if sv is None or zv is None or sv.size != 1 or zv.dtype.name not in INT8 or sv.dtype != np.float32:
            return post
        ys, zero = np.float32(sv.reshape(())), zv.reshape(())
        moved = self._moved(y, ys, zero) or self._unary(y, ys, zero) or self._binary(y, ys, zero) \
            or self._concat(y, ys, zero) or self._table(y, ys, zero)
        if moved is not None:
            return moved
        clamp: tuple[int | None, int | None] = (None, None)
        if _op(y, "nn.relu", "clip") and self._single(y):
            clamp = _quantized_clip(y, ys, zero)  # type: ignore[arg-type]
            y = y.args[0]  # type: ignore[union-attr]
        bias = None
        if _op(y, "add") and self._single(y):
            core, b = y.args  # type: ignore[union-attr]
            bias = self._bias(b)
            if bias is None:
                return post
            y = core
        if not self._single(y):
            return post
        built = self._core(y)
        if built is None:
            return post
        acc, scale, axis = built
        yt = y.checked_type
        assert isinstance(yt, TensorType)
        if bias is not None:
            b = bias.reshape(-1)
            if b.size not in (1, scale.size if scale.size > 1 else yt.shape[axis]):
                return post
            shape = (-1,) + (1,) * (yt.ndim - 1 - axis) if b.size > 1 else (1,)
            acc = call("add", acc, Constant(b.reshape(shape)), meta=y.meta)
        out_scale = (scale / ys).astype(np.float32)  # float32 arithmetic, QLinearConv's order
        attrs = dict(zero_point=int(zero), out_dtype=zv.dtype.name, axis=axis if out_scale.size > 1 else 1,
                     mode=self.mode, clamp_min=clamp[0], clamp_max=clamp[1])
        if self.mode == "float":
            params: tuple[Expr, ...] = (Constant(out_scale),)
        else:
            mult, shift = fixed_point_multiplier(out_scale)
            params = (Constant(mult), Constant(shift))
        return call("qnn.requantize", acc, *params, meta=pre.meta, **attrs)

    def _moved(self, y: Expr, scale: np.float32, zero: np.ndarray) -> Expr | None:
        """``Q(move(DQ(x)))`` with the same scale and zero point is ``move(x)`` (a reshape, flatten,
        squeeze, expand_dims or transpose moves values without changing them; Q(DQ(q)) = q)."""
        if not _op(y, *MOVES) or not self._single(y):
            return None
        args = []
        for a in y.args:  # type: ignore[union-attr]
            q = _dq(a)
            if q is None or not q.per_tensor or q.scale[0] != scale or q.zero_point() != int(zero) \
                    or q.zero.dtype != zero.dtype or not self._single(a):
                return None
            args.append(self._new(q.value))
        return Call(y.op, tuple(args), y.attrs, y.meta)  # type: ignore[union-attr]

    def _unary(self, y: Expr, scale: np.float32, zero: np.ndarray) -> Expr | None:
        """``Q(op(DQ(x)))`` for ``op`` in :data:`UNARY`, per tensor, of one dtype: what ONNX Runtime's
        optimized session fuses it into (QLinearSoftmax, a table for QLinearSigmoid / QLinearLeakyRelu,
        QLinearGlobalAveragePool, QLinearAveragePool). The dequantize may have other uses."""
        if not _op(y, *UNARY) or not self._single(y):
            return None
        q = _dq(y.args[0])  # type: ignore[union-attr]
        if q is None or not q.per_tensor or q.zero.dtype != zero.dtype:
            return None
        x, dt, xs, xz = self._new(q.value), zero.dtype.name, float(q.scale[0]), int(q.zero[0])
        name = y.op.name  # type: ignore[union-attr]
        if name == "nn.avg_pool2d":  # float, as ONNX Runtime's QLinearAveragePool, with its rounding
            lo, hi = int_range(dt)
            v = call("divide", Call(y.op, (self._new(y.args[0]),), y.attrs, y.meta),  # type: ignore[union-attr]
                     Constant(np.array(scale, np.float32)), meta=y.meta)
            v = call("round", call("add", v, Constant(np.array(float(zero), np.float32)), meta=y.meta), meta=y.meta)
            return call("cast", call("clip", v, a_min=float(lo), a_max=float(hi), meta=y.meta), dtype=dt, meta=y.meta)
        if name == "nn.global_avg_pool2d":
            return self._global_avg_pool(y, x, xs, xz, float(scale), zero)  # type: ignore[arg-type]
        if name == "nn.softmax":
            n = q.value.checked_type.shape[norm_axis(y.attrs["axis"], y.checked_type.ndim, "softmax")]  # type: ignore
            if not isinstance(n, int) or n == 0:
                return None
            return call("qnn.softmax", x, Constant(softmax_table(xs, n)), axis=y.attrs["axis"],  # type: ignore
                        multiplier=softmax_multiplier(float(scale)), zero_point=int(zero), meta=y.meta)
        fn = mlas_logistic if name == "sigmoid" else leaky_relu32(y.attrs["alpha"])  # type: ignore[union-attr]
        table = lookup_table(fn, dt, xs, xz, float(scale), int(zero), dt)
        return call("qnn.lookup", x, Constant(table), meta=y.meta)

    def _table(self, y: Expr, scale: np.float32, zero: np.ndarray) -> Expr | None:
        """``Q(f(DQ(x)))`` with ``f`` a chain of :data:`TABLE_UNARY` operators and :data:`TABLE_BINARY`
        ones with a one-element float32 constant, all float32, each of one use, per tensor at both
        ends: ``qnn.lookup`` of the table of ``Q(f(DQ(v)))`` for every int8 value ``v`` (the operators'
        numpy references, in float32), so no float arithmetic nor libm call is left at run time. The
        dequantize may have other uses."""
        steps: list[tuple[Call, int | None, np.ndarray | None]] = []  # (call, constant's position, constant)
        e = y
        while not _op(e, "qnn.dequantize"):
            if not isinstance(e, Call) or not self._single(e) or e.checked_type.dtype != "float32":  # type: ignore
                return None
            if _op(e, *TABLE_UNARY):
                steps.append((e, None, None))
                e = e.args[0]
                continue
            if not _op(e, *TABLE_BINARY):
                return None
            consts = [_const(a) for a in e.args]
            k = next((i for i, c in enumerate(consts) if c is not None and c.size == 1 and c.dtype == np.float32
                      and c.ndim <= e.checked_type.ndim), None)  # type: ignore[union-attr]
            if k is None or consts[1 - k] is not None:
                return None
            steps.append((e, k, consts[k]))
            e = e.args[1 - k]
        q = _dq(e)
        if not steps or q is None or not q.per_tensor or q.value.checked_type.shape != y.checked_type.shape:  # type: ignore
            return None

        def fn(v: np.ndarray) -> np.ndarray:
            for c, k, const in reversed(steps):
                args = [v] if k is None else [const, v] if k == 0 else [v, const]
                with np.errstate(all="ignore"):
                    v = np.asarray(c.op.ref(args, c.attrs), np.float32)  # type: ignore[union-attr]
            return v

        dt = q.zero.dtype.name
        table = lookup_table(fn, dt, float(q.scale[0]), int(q.zero[0]), float(scale), int(zero), zero.dtype.name)
        return call("qnn.lookup", self._new(q.value), Constant(table), meta=y.meta)

    @staticmethod
    def _global_avg_pool(y: Call, x: Expr, xs: float, xz: int, ys: float, yz: np.ndarray) -> Expr | None:
        """QLinearGlobalAveragePool: the int32 sum over H, W minus H * W * x_zero_point, requantized."""
        shape = y.args[0].checked_type.shape  # type: ignore[union-attr]
        if len(shape) != 4 or not all(isinstance(d, int) for d in shape[2:]):
            return None
        count = int(shape[2] * shape[3])
        acc = call("sum", call("cast", x, dtype="int32"), axis=(2, 3), keepdims=True, meta=y.meta)
        if xz:
            acc = call("add", acc, Constant(np.array(-count * xz, np.int32)), meta=y.meta)
        scale = Constant(np.array(global_avg_pool_scale(xs, ys, count), np.float32))
        return call("qnn.requantize", acc, scale, zero_point=int(yz), out_dtype=yz.dtype.name, meta=y.meta)

    def _concat(self, y: Expr, scale: np.float32, zero: np.ndarray) -> Expr | None:
        """``Q(concatenate(DQ(a), DQ(b), ...))``, per tensor, of one dtype: each input with other
        parameters through the table of ``Q(DQ(v))`` (ONNX Runtime's QLinearConcat), then the
        concatenation of the int8 values."""
        if not _op(y, "concatenate") or not self._single(y):
            return None
        qs = [_dq(a) for a in y.args]  # type: ignore[union-attr]
        if any(q is None or not q.per_tensor or q.zero.dtype != zero.dtype for q in qs):
            return None
        dt, parts = zero.dtype.name, []
        for q in qs:
            assert q is not None
            x = self._new(q.value)
            if q.scale[0] != scale or int(q.zero[0]) != int(zero):
                table = lookup_table(lambda v: v, dt, float(q.scale[0]), int(q.zero[0]), float(scale), int(zero), dt)
                x = call("qnn.lookup", x, Constant(table), meta=y.meta)
            parts.append(x)
        return Call(y.op, tuple(parts), y.attrs, y.meta)  # type: ignore[union-attr]

    def _binary(self, y: Expr, scale: np.float32, zero: np.ndarray) -> Expr | None:
        """``Q(add | multiply(DQ(a), DQ(b)))``, per tensor, of one dtype, equal shapes or a one-element
        operand: ``qnn.add`` / ``qnn.mul`` (QLinearAdd / QLinearMul, which ONNX Runtime fuses it into)."""
        if not _op(y, "add", "multiply") or not self._single(y):
            return None
        qs = [_dq(a) for a in y.args]  # type: ignore[union-attr]
        if any(q is None or not q.per_tensor or q.zero.dtype != zero.dtype for q in qs):
            return None
        qa, qb = qs
        assert qa is not None and qb is not None
        ta, tb = qa.value.checked_type, qb.value.checked_type
        assert isinstance(ta, TensorType) and isinstance(tb, TensorType)
        if not (ta.shape == tb.shape or _one(tb) and tb.ndim <= ta.ndim or _one(ta) and ta.ndim <= tb.ndim):
            return None
        params = (float(qa.scale[0]), int(qa.zero[0]), float(qb.scale[0]), int(qb.zero[0]), float(scale), int(zero))
        if y.op.name == "add":  # type: ignore[union-attr]
            return call("qnn.add", self._new(qa.value), self._new(qb.value), meta=y.meta, **add_attrs(*params))
        return call("qnn.mul", self._new(qa.value), self._new(qb.value), meta=y.meta, **mul_attrs(*params))

    def _bias(self, b: Expr) -> np.ndarray | None:
        """The int32 values of a (reshaped) constant bias dequantized with zero point 0."""
        if _op(b, "reshape") and self._single(b):
            b = b.args[0]  # type: ignore[union-attr]
        q = _dq(b, ("int32",))
        if q is None or not self._single(b) or np.any(q.zero != 0):
            return None
        return _const(q.value)

    def _core(self, y: Expr) -> tuple[Call, np.ndarray, int] | None:
        """(the integer call, the float32 scale x_scale * w_scale (one or one per channel), the
        channel axis of the result) of a float conv / dense / matmul of two dequantized values."""
        if not _op(y, "nn.conv2d", "nn.dense", "nn.matmul"):
            return None
        name = y.op.name  # type: ignore[union-attr]
        a_e, b_e = y.args  # type: ignore[union-attr]
        a, b = _dq(a_e), _dq(b_e)
        if a is None or b is None or not a.per_tensor:  # a dequantize with other uses stays for them
            return None
        za, zb = a.zero_point(), b.zero_point()
        if za is None or zb is None:
            return None
        yt, bt = y.checked_type, b.value.checked_type
        assert isinstance(yt, TensorType) and isinstance(bt, TensorType)
        # the weight axis its per-channel scale must run along, and the result axis that is
        w_axis = {"nn.conv2d": 0, "nn.dense": 0}.get(name, bt.ndim - 1)
        axis = 1 if name == "nn.conv2d" else yt.ndim - 1
        if not b.per_tensor and (bt.ndim < 2 or b.axis % bt.ndim != w_axis):
            return None
        scale = (np.float32(a.scale[0]) * b.scale).astype(np.float32)
        x, w = self._new(a.value), self._new(b.value)
        if name == "nn.conv2d":
            attrs = {k: y.attrs[k] for k in ("strides", "padding", "dilation", "groups")}  # type: ignore[union-attr]
            acc = call("qnn.conv2d", x, w, input_zero_point=za, kernel_zero_point=zb, meta=y.meta, **attrs)
        elif name == "nn.dense":
            acc = call("qnn.dense", x, w, input_zero_point=za, kernel_zero_point=zb, meta=y.meta)
        else:
            at = a.value.checked_type
            assert isinstance(at, TensorType)
            acc = _product(x, w, at.ndim, za, zb, y.meta)
        return acc, scale, axis


def _product(a: Expr, b: Expr, a_ndim: int, za: int, zb: int, meta: object) -> Call:
    """``qnn.matmul(a, b)``, or ``qnn.dense(a, b.T)`` with ``b`` transposed here when it is a constant
    matrix and ``a`` (of ``a_ndim`` dimensions) at least one too (the same exact sums: the dense kernel
    reads the weight's columns as contiguous runs, :mod:`plait.op.qnn_nn`)."""
    bv = _const(b)
    if bv is not None and bv.ndim == 2 and a_ndim >= 2:
        w = Constant(np.ascontiguousarray(bv.T))
        return call("qnn.dense", a, w, input_zero_point=za, kernel_zero_point=zb, meta=meta)  # type: ignore[arg-type]
    return call("qnn.matmul", a, b, a_zero_point=za, b_zero_point=zb, meta=meta)  # type: ignore[arg-type]


def weight_quantization(w: np.ndarray) -> tuple[np.float32, np.int8]:
    """ONNX Runtime's ``GetQuantizationParameter`` for an int8 weight (onnxruntime/core/util/qmath.h):
    the range widened to hold 0, ``scale = (max - min) / 255`` (1 for an all-zero range),
    ``zero = round_half_even(clamp(-128 - min / scale))``, in float32."""
    f32 = np.float32
    lo, hi = min(f32(w.min()), f32(0)), max(f32(w.max()), f32(0))
    scale = f32(1) if lo == hi else f32((hi - lo) / f32(255))
    zero = np.rint(np.clip(f32(f32(-128) - lo / scale), f32(-128), f32(127)))
    return scale, np.int8(zero)


class _WeightBias(ExprMutator):
    """ONNX Runtime's ``WeightBiasQuantization`` (onnxruntime/core/optimizer/qdq_transformer), as its
    optimized session applies it: a float ``nn.conv2d`` / ``nn.conv2d_transpose`` whose data is
    dequantized per tensor and whose result (after its bias ``add``) is quantized takes its float32
    constant weight quantized to int8 (per tensor, :func:`weight_quantization`) and dequantized, and
    its float32 constant bias as ``round_half_even(b / (x_scale * w_scale))`` in int32, dequantized:
    the numbers ONNX Runtime computes (and the pattern then becomes integer, as there)."""

    CONVS = ("nn.conv2d", "nn.conv2d_transpose")

    def __init__(self, uses: dict[Expr, int]):
        super().__init__()
        self.uses = uses

    def rewrite_call(self, pre: Call, post: Expr) -> Expr:
        if not _op(pre, "qnn.quantize") or self.uses.get(pre.args[0], 0) != 1:
            return post
        assert isinstance(post, Call)
        y, bias = post.args[0], None
        if _op(y, "add") and _op(y.args[0], *self.CONVS) and self.uses.get(pre.args[0].args[0], 0) == 1:  # type: ignore
            y, bias = y.args  # type: ignore[union-attr]
        if not _op(y, *self.CONVS):
            return post
        assert isinstance(y, Call)
        x, w = y.args
        xq, wv = _dq(x), _const(w)
        if xq is None or not xq.per_tensor:
            return post
        wq = _dq(w)
        if wq is not None and not wq.per_tensor and wq.axis != 0:  # ONNX Runtime: per channel along axis 0 only
            return post
        w_scale = wq.scale if wq is not None else None
        if wv is not None and wv.dtype == np.float32:
            scale, zero = weight_quantization(wv)
            q = get_op("qnn.quantize").ref([wv, np.array(scale), np.array(zero)], get_op("qnn.quantize").make_attrs({}))
            w = call("qnn.dequantize", Constant(q), Constant(np.array(scale)), Constant(np.array(zero)))
            w_scale = np.array([scale], np.float32)
        elif w_scale is None:
            return post
        conv = Call(y.op, (x, w), y.attrs, y.meta)
        bv = _const(bias) if bias is not None else None
        if bias is None or bv is None or bv.dtype != np.float32:
            out = conv if bias is None else call("add", conv, bias, meta=post.args[0].meta)  # type: ignore
        else:
            if bv.ndim > 3 or any(d != 1 for d in bv.shape[1:]) or w_scale.size not in (1, bv.size):
                return post
            bscale = (np.float32(xq.scale[0]) * w_scale).astype(np.float32)
            with np.errstate(all="ignore"):
                bq = np.rint(bv.reshape(-1) / bscale).astype(np.int32)
            bs = bscale.reshape(()) if bscale.size == 1 else bscale
            b = call("qnn.dequantize", Constant(bq.reshape(bv.shape)), Constant(bs), Constant(np.array(0, np.int32)),
                     axis=0)
            out = call("add", conv, b, meta=post.args[0].meta)  # type: ignore[union-attr]
        return Call(post.op, (out, *post.args[1:]), post.attrs, post.meta)


@dataclass(frozen=True)
class QDQToInteger(Pass):
    """Rewrite ``DQ -> conv2d / dense / matmul -> Q`` into integer operators (module docstring).
    ``mode``: the requantization (``float``: ONNX Runtime's arithmetic; ``fixed``: TensorFlow Lite's)."""

    mode: str = "float"
    name: ClassVar[str] = "qdq_to_integer"

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        mod = infer_type(mod)
        changed = {}
        for gname, fn in mod.relay_functions().items():
            fixed = _WeightBias(_use_counts(fn)).visit(fn)
            if fixed is not fn:
                mod = infer_type(mod.with_functions({gname: fixed}))
                fn = mod[gname]
            new = _Rewriter(_use_counts(fn), self.mode).visit(fn)
            if new is not fn:
                assert isinstance(new, Function)
                changed[gname] = new
        mod = infer_type(mod.with_functions(changed)) if changed else mod
        folded = {}
        for gname, fn in mod.relay_functions().items():  # chains of one int8 value: one table
            new = FoldTables().visit(fn)
            if new is not fn:
                folded[gname] = new
        return infer_type(mod.with_functions(folded)) if folded else mod


class _ToFixed(ExprMutator):
    def rewrite_call(self, pre: Call, post: Expr) -> Expr:
        if not _op(post, "qnn.requantize") or post.attrs["mode"] != "float":  # type: ignore[union-attr]
            return post
        assert isinstance(post, Call)
        scale = _const(post.args[1])
        if scale is None:
            return post
        mult, shift = fixed_point_multiplier(scale)
        attrs = {**post.attrs, "mode": "fixed"}
        return call("qnn.requantize", post.args[0], Constant(mult), Constant(shift), meta=post.meta, **attrs)


@dataclass(frozen=True)
class FixedPointRequantize(Pass):
    """Every ``qnn.requantize`` with a constant float scale becomes the fixed-point one (TensorFlow
    Lite's multiplier and shift): default lowering runs it for a piece whose requantization is
    ``fixed`` (a Cortex-M core without an FPU, or ``-requantize=fixed``)."""

    name: ClassVar[str] = "fixed_point_requantize"

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        changed = {}
        for gname, fn in mod.relay_functions().items():
            new = _ToFixed().visit(fn)
            if new is not fn:
                assert isinstance(new, Function)
                changed[gname] = new
        return infer_type(mod.with_functions(changed)) if changed else mod


class _ToFloat(ExprMutator):
    def rewrite_call(self, pre: Call, post: Expr) -> Expr:
        if not _op(post, "qnn.requantize") or post.attrs["mode"] != "fixed" or post.attrs["out_dtype"] == "int32":  # type: ignore[union-attr]
            return post
        assert isinstance(post, Call)
        mult, shift = _const(post.args[1]), _const(post.args[2])
        if mult is None or shift is None:
            return post
        scale = (mult.astype(np.float64) * np.exp2(shift.astype(np.float64) - 31)).astype(np.float32)
        attrs = {**post.attrs, "mode": "float"}
        return call("qnn.requantize", post.args[0], Constant(scale), meta=post.meta, **attrs)


@dataclass(frozen=True)
class FloatRequantize(Pass):
    """Every fixed-point ``qnn.requantize`` to 8 or 16 bits (a TFLite model's) becomes the float one,
    ONNX Runtime's arithmetic, with the scale its multiplier and shift stand for: default lowering runs
    it for a piece given ``-requantize=float`` explicitly. (TFLite's rescalings to int32, as in ADD,
    stay fixed-point.)"""

    name: ClassVar[str] = "float_requantize"

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        changed = {}
        for gname, fn in mod.relay_functions().items():
            new = _ToFloat().visit(fn)
            if new is not fn:
                assert isinstance(new, Function)
                changed[gname] = new
        return infer_type(mod.with_functions(changed)) if changed else mod
