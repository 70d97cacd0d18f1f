"""FoldBatchNorm: inference batch normalization with constant statistics becomes cheaper math.

``nn.batch_norm(x, gamma, beta, mean, var)`` with constant parameters computes
``x * s + t`` per channel, with ``s = gamma / sqrt(var + eps)`` and ``t = beta - mean * s``. Then:

- if ``x`` is ``nn.conv2d(d, W)`` (or ``add(nn.conv2d(d, W), b)`` with a per-channel constant ``b``)
  with a constant ``W`` and no other use, the scale goes into the weights:
  ``add(nn.conv2d(d, W * s), b * s + t)`` (one epilogue add instead of four parameter loads);
- otherwise it becomes ``add(multiply(x, s), t)`` with ``s``, ``t`` shaped to broadcast on the axis.

The folded constants are computed in float64 and rounded once to the data's dtype. The new calls
keep the batch norm's ``meta`` (the conv keeps its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from plait.ir.op import Op
from plait.ir.transform import Pass, PassContext
from plait.ir.types import TensorType
from plait.relay.expr import Call, Constant, Expr, Function, call
from plait.relay.infer import infer_type
from plait.relay.module import IRModule
from plait.relay.visitor import ExprMutator, post_order


def _use_counts(root: Expr) -> dict[Expr, int]:
    from plait.relay.visitor import children

    counts: dict[Expr, int] = {}
    for n in post_order(root):
        for c in children(n):
            counts[c] = counts.get(c, 0) + 1
    return counts


def _is_op(e: Expr, name: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name == name


def _channel_vector(c: Expr, channels: int, ndim: int, axis: int) -> np.ndarray | None:
    """The per-channel values of a constant broadcast along ``axis`` only, else None."""
    if not isinstance(c, Constant):
        return None
    d = c.data
    shape = [1] * ndim
    shape[axis] = channels
    if d.ndim > ndim or d.size != channels:
        return None
    padded = (1,) * (ndim - d.ndim) + d.shape
    if list(padded) != shape:
        return None
    return d.reshape(channels)


class _Folder(ExprMutator):
    def __init__(self, uses: dict[Expr, int]):
        super().__init__()
        self.uses = uses

    def rewrite_call(self, pre: Call, post: Expr) -> Expr:
        if not _is_op(post, "nn.batch_norm"):
            return post
        assert isinstance(post, Call)
        x, *params = post.args
        xt = pre.args[0].checked_type
        if not all(isinstance(p, Constant) for p in params) or not isinstance(xt, TensorType):
            return post
        axis = post.attrs["axis"] % xt.ndim
        gamma, beta, mean, var = (p.data.astype(np.float64) for p in params)  # type: ignore[union-attr]
        scale = gamma / np.sqrt(var + post.attrs["epsilon"])
        shift = beta - mean * scale
        dtype = np.dtype(xt.dtype)
        bshape = [1] * xt.ndim
        bshape[axis] = scale.size
        meta = post.meta

        conv, bias = x, None
        if _is_op(x, "add") and self.uses.get(pre.args[0], 0) == 1:
            a, b = x.args  # type: ignore[union-attr]
            vec = _channel_vector(b, scale.size, xt.ndim, axis)
            if _is_op(a, "nn.conv2d") and vec is not None:
                conv, bias = a, vec.astype(np.float64)
        pre_conv = pre.args[0] if bias is None else pre.args[0].args[0]  # type: ignore[union-attr]
        if (_is_op(conv, "nn.conv2d") and axis == 1 and isinstance(conv.args[1], Constant)  # type: ignore[union-attr]
                and self.uses.get(pre_conv, 0) == 1 and dtype.kind == "f"):
            w = conv.args[1].data.astype(np.float64)  # type: ignore[union-attr]
            new_w = (w * scale.reshape(-1, 1, 1, 1)).astype(dtype)
            new_conv = Call(conv.op, (conv.args[0], Constant(new_w)), conv.attrs, conv.meta)  # type: ignore[union-attr]
            new_bias = (shift if bias is None else bias * scale + shift).astype(dtype).reshape(bshape)
            return call("add", new_conv, Constant(new_bias), meta=meta)
        s = Constant(scale.astype(dtype).reshape(bshape))
        t = Constant(shift.astype(dtype).reshape(bshape))
        return call("add", call("multiply", x, s, meta=meta), t, meta=meta)


@dataclass(frozen=True)
class FoldBatchNorm(Pass):
    name: ClassVar[str] = "fold_batch_norm"
    opt_level: ClassVar[int] = 1

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        mod = infer_type(mod)
        changed = {}
        for gname, fn in mod.relay_functions().items():
            new = _Folder(_use_counts(fn)).visit(fn)
            if new is not fn:
                assert isinstance(new, Function)
                changed[gname] = new
        return infer_type(mod.with_functions(changed))
