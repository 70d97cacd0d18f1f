"""ChannelsLast: int8 convolutions channels-last, the transposes between them sunk and cancelled.

Every NCHW ``qnn.conv2d`` of static shapes for which :func:`plait.op._qnn_nhwc.nhwc_form` has a form
(under the piece's compute facts, given to the pass: the ``"outer"`` VNNI or AVX2 kernel, the channels-last
depthwise sums) becomes ``qnn.conv2d(data_layout="NHWC")``: its data transposed to ``[N, H, W, C]``
and its result ``[N, OH, OW, O]``. A value known channels-last stays so through the operators that do
not care about the layout (ONNX Runtime's NhwcTransformer does the same with QLinearConv):

- elementwise ``add``, ``subtract``, ``multiply``, ``maximum``, ``minimum``, ``qnn.add``, ``qnn.mul``
  with a channels-last operand (constants are transposed at compile time, a bias ``[O, 1, 1]``
  becomes ``[1, 1, 1, O]``; one-element operands stay as they are; an NCHW operand of the result's
  shape, a residual, is transposed: its one transpose, shared with a convolution reading it);
- ``cast``, ``clip``, ``nn.relu``, ``qnn.lookup``; ``qnn.requantize`` (a per-channel axis 1 becomes
  3; ``qnn.dequantize`` is not one: an int8 value transposes faster than its float32 result);
- ``sum`` / ``mean`` (a global average pool: axes 2, 3 become 1, 2), ``concatenate`` of channels-last
  values (axis 1 becomes 3), a ``transpose`` (composed with the pending one; the identity vanishes).

Anything else reads the NCHW value: one ``transpose`` back per value (a ``reshape`` when one pixel
is left, as after a global average pool). So between consecutive
convolutions (bias, requantization, residual adds) no transpose is left; one is left at each border
of a channels-last region. Functions with control flow are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from plait.ir.op import Op
from plait.ir.transform import Pass, PassContext
from plait.ir.types import TensorType
from plait.op._compute import compute_facts
from plait.op._qnn_nhwc import nhwc_form
from plait.op.qnn_nn import TO_NCHW, TO_NHWC
from plait.relay.expr import Call, Constant, Expr, Function, If, Loop, Tuple, call
from plait.relay.infer import infer_type
from plait.relay.module import IRModule
from plait.relay.visitor import ExprMutator, post_order

BINARY = ("add", "subtract", "multiply", "maximum", "minimum", "qnn.add", "qnn.mul")
UNARY = ("cast", "clip", "nn.relu", "qnn.lookup", "qnn.requantize")
REDUCE = ("sum", "mean")


def _type(e: Expr) -> TensorType | None:
    t = e.checked_type if e.has_type else None
    return t if isinstance(t, TensorType) and t.is_static else None


FUSION_KEY = "relayout"
"""The ``fusion`` meta of the transposes the pass puts in: FuseOps keeps them in groups of their own
(a tiled transposing copy), so that a convolution's epilogue fused with them does not become a group
of its own with its loops in the transposed order (resnet_block's last convolution: 535 + 675 us)."""


def _form(conv: Call) -> str | None:
    """The channels-last form (:func:`nhwc_form`) an NCHW ``qnn.conv2d`` would take, None for none."""
    xt, wt = _type(conv.args[0]), _type(conv.args[1])
    if conv.attrs["data_layout"] != "NCHW" or xt is None or wt is None or xt.ndim != 4:
        return None
    n, c, h, w = xt.shape
    return nhwc_form((n, h, w, c), wt.shape, wt.dtype, conv.attrs)


def _relayout(v: Expr, nchw_shape: tuple, perm: tuple[int, ...]) -> Expr:
    """``v`` transposed by ``perm`` (a reshape when no element moves: one pixel; one channel is left a
    transpose, whose loop nest fused after a producer stays a plain copy, a reshape's does not)."""
    if nchw_shape[2] * nchw_shape[3] == 1:
        shape = nchw_shape if perm == TO_NCHW else tuple(nchw_shape[p] for p in TO_NHWC)
        return call("reshape", v, newshape=shape)
    return call("transpose", v, axes=perm, meta={"fusion": FUSION_KEY})


class _ToChannelsLast(ExprMutator):
    """``memo[node]``: the node's value as it was (NCHW); ``last[node]``: its channels-last form, for the
    values that have one."""

    def __init__(self, forms: tuple[str, ...]):
        super().__init__()
        self.forms = forms
        self.last: dict[Expr, Expr] = {}
        self.into: dict[Expr, Expr] = {}  # node -> transpose of its NCHW value into NHWC (one per value)

    def _nhwc(self, pre: Expr) -> Expr:
        """The channels-last form of the (4-D, NCHW) value ``pre``."""
        if pre in self.last:
            return self.last[pre]
        if pre not in self.into:
            t = _type(pre)
            assert t is not None
            self.into[pre] = _relayout(self.memo[pre], t.shape, TO_NHWC)
        return self.into[pre]

    def _channels_last(self, pre: Call, new: Expr) -> Expr:
        """Record ``new`` (channels-last) as ``pre``'s form; the NCHW value is a transpose of it."""
        t = _type(pre)
        assert t is not None
        self.last[pre] = new
        return _relayout(new, t.shape, TO_NCHW)

    def rewrite_call(self, pre: Call, post: Expr) -> Expr:
        if not isinstance(pre.op, Op):
            return post
        name, t = pre.op.name, _type(pre)
        if t is None:
            return post
        if name == "qnn.conv2d":
            return self._conv(pre, post)
        args = pre.args
        if name in BINARY and t.ndim == 4:
            return self._binary(pre, post)
        if name in UNARY and t.ndim == 4 and args[0] in self.last:
            return self._unary(pre, post)
        if name in REDUCE and args[0] in self.last:
            return self._reduce(pre, post)
        if name == "concatenate" and isinstance(args[0], Tuple) and t.ndim == 4 and \
                all(f in self.last for f in args[0].fields):
            axis = pre.attrs["axis"] % 4
            fields = Tuple(tuple(self.last[f] for f in args[0].fields))
            return self._channels_last(pre, call("concatenate", fields, meta=pre.meta, axis=TO_NCHW[axis]))
        if name == "transpose" and args[0] in self.last and pre.attrs["axes"] is not None:
            axes = tuple(TO_NCHW[a % 4] for a in pre.attrs["axes"])
            if axes == (0, 1, 2, 3):
                return self.last[args[0]]
            return call("transpose", self.last[args[0]], meta=pre.meta, axes=axes)
        return post

    def _conv(self, pre: Call, post: Expr) -> Expr:
        if _form(pre) not in self.forms:
            return post
        a = pre.attrs
        new = call("qnn.conv2d", self._nhwc(pre.args[0]), self.memo[pre.args[1]], meta=pre.meta,
                   **{**a, "data_layout": "NHWC"})
        return self._channels_last(pre, new)

    def _binary(self, pre: Call, post: Expr) -> Expr:
        if not any(arg in self.last for arg in pre.args):
            return post
        new_args = []
        for arg in pre.args:
            at = _type(arg)
            if arg in self.last:
                new_args.append(self.last[arg])
            elif at is not None and int(np.prod(at.shape)) == 1:
                new_args.append(self.memo[arg])  # (one element: broadcast alike)
            elif isinstance(arg, Constant) and arg.data.ndim <= 4:
                data = arg.data.reshape((1,) * (4 - arg.data.ndim) + arg.data.shape)
                new_args.append(Constant(np.ascontiguousarray(np.transpose(data, TO_NHWC))))
            elif at is not None and at.shape == _type(pre).shape:  # type: ignore[union-attr]
                new_args.append(self._nhwc(arg))  # (a residual NCHW value: its one transpose, often shared)
            else:
                return post
        return self._channels_last(pre, Call(pre.op, tuple(new_args), pre.attrs, pre.meta))

    def _unary(self, pre: Call, post: Expr) -> Expr:
        attrs = dict(pre.attrs)
        if pre.op.name == "qnn.requantize":  # type: ignore[union-attr]
            # (its scale, or multiplier and shift: per tensor, or along the attribute axis)
            params = [_type(p) for p in pre.args[1:]]
            if any(p is None or p.ndim > 1 for p in params):
                return post
            if any(int(np.prod(p.shape)) > 1 for p in params if p is not None):
                if attrs["axis"] % 4 != 1:
                    return post
                attrs["axis"] = 3
        new = Call(pre.op, (self.last[pre.args[0]], *(self.memo[p] for p in pre.args[1:])), attrs, pre.meta)
        return self._channels_last(pre, new)

    def _reduce(self, pre: Call, post: Expr) -> Expr:
        axes = pre.attrs["axis"]
        if axes is None:
            return post
        nchw = sorted(a % 4 for a in axes)
        nhwc = sorted(TO_NCHW[a] for a in nchw)
        attrs = {**pre.attrs, "axis": nhwc}
        new = Call(pre.op, (self.last[pre.args[0]],), attrs, pre.meta)
        if pre.attrs["keepdims"]:
            return self._channels_last(pre, new)
        kept_nchw = [a for a in range(4) if a not in nchw]
        kept_nhwc = [TO_NHWC[p] for p in range(4) if p not in nhwc]  # (NCHW dims in NHWC order)
        return new if kept_nchw == kept_nhwc else post


@dataclass(frozen=True)
class ChannelsLast(Pass):
    """The module docstring's rewrite of every Relay function of the module; ``facts``: the compute
    facts of the piece (:func:`plait.op._compute.compute_fact`) under which the forms are chosen,
    ``forms``: the forms of :func:`nhwc_form` worth converting a convolution for."""

    facts: tuple[tuple[str, Any], ...] = ()
    forms: tuple[str, ...] = ("outer", "depthwise", "packed")
    every_conv: bool = False
    """Convert a function's convolutions only when every one of them has one of the ``forms`` (no
    transposes between convolutions left NCHW and converted ones: the llvm kind, whose NHWC forms gain
    less than such transposes cost)."""
    name: ClassVar[str] = "channels_last"
    reprices: ClassVar[bool] = False  # (placement prices the NCHW calls: one call alone gains transposes)

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        changed = {}
        with compute_facts(**dict(self.facts)):
            for gname, fn in mod.relay_functions().items():
                if any(isinstance(e, (If, Loop)) for e in post_order(fn.body)):
                    continue
                convs = [e for e in post_order(fn.body) if isinstance(e, Call) and isinstance(e.op, Op)
                         and e.op.name == "qnn.conv2d"]
                if not convs or (self.every_conv and not all(_form(c) in self.forms for c in convs)):
                    continue
                new = _ToChannelsLast(self.forms).visit(fn)
                if new is not fn:
                    assert isinstance(new, Function)
                    changed[gname] = new
        return infer_type(mod.with_functions(changed)) if changed else mod


__all__ = ["ChannelsLast"]
