"""Integer elementwise chains of one int8 value folded into one ``qnn.lookup`` table (run by the QDQ
pass, :class:`plait.relay.passes.QDQToInteger`, after its patterns).

A ``qnn.add`` / ``qnn.mul`` whose operands are each the same int8/uint8 value ``x``, a
``qnn.lookup(x, table)`` or a one-element constant, with at least one such lookup (a GELU after its
``Erf`` table: ``x * (1 + erf(x / sqrt 2)) * 0.5`` is ``qnn.lookup`` -> ``qnn.add`` -> ``qnn.mul`` ->
``qnn.mul``), and a ``qnn.lookup`` of such a lookup, is a function of ``x`` alone: it becomes
``qnn.lookup(x, table)``, the table computed here by the operators' references on all 256 values of
``x`` (which their C matches bit for bit: the same numbers, one gather at run time instead of the
chain's float arithmetic per element). The folded operators stay only where something else uses them.
"""

from __future__ import annotations

import numpy as np

from plait.ir.types import TensorType
from plait.relay.expr import Call, Constant, Expr, call
from plait.relay.visitor import ExprMutator
from plait.tir.dtype import int_range

INT8 = ("int8", "uint8")
FOLDABLE = ("qnn.add", "qnn.mul")


def _is(e: Expr, *names: str) -> bool:
    return isinstance(e, Call) and e.op.name in names


class FoldTables(ExprMutator):
    """The rewrite of the module docstring on one function (its ``pre`` expressions typed)."""

    def __init__(self) -> None:
        super().__init__()
        self.made: dict[int, tuple[Expr, str, np.ndarray]] = {}  # id(new lookup) -> (x, x dtype, table)
        self.keep: list[Expr] = []  # (the ids above stay valid)

    def _part(self, pre: Expr, post: Expr, shape: tuple) -> tuple | None:
        """``("const", value)``, ``("lookup", x, dtype, table)`` or ``("value", x, dtype)``; None when the
        operand is none of them (or changes the shape)."""
        if isinstance(post, Constant):
            return ("const", post.data) if post.data.size == 1 and post.data.ndim <= len(shape) else None
        t = pre.checked_type
        if not isinstance(t, TensorType) or tuple(t.shape) != shape:
            return None
        if id(post) in self.made:
            return ("lookup", *self.made[id(post)])
        if _is(post, "qnn.lookup") and _is(pre, "qnn.lookup") and isinstance(post.args[1], Constant):  # type: ignore
            xt = pre.args[0].checked_type  # type: ignore[union-attr]
            if isinstance(xt, TensorType) and xt.dtype in INT8:
                return ("lookup", post.args[0], xt.dtype, post.args[1].data)  # type: ignore[union-attr]
            return None
        return ("value", post, t.dtype) if t.dtype in INT8 else None

    def rewrite_call(self, pre: Call, post: Expr) -> Expr:
        if not isinstance(post, Call) or not _is(post, "qnn.lookup", *FOLDABLE):
            return post
        out = pre.checked_type
        if not isinstance(out, TensorType) or out.dtype not in INT8:
            return post
        shape = tuple(out.shape)
        operands = post.args[:1] if _is(post, "qnn.lookup") else post.args
        if _is(post, "qnn.lookup") and not isinstance(post.args[1], Constant):
            return post
        parts = [self._part(a, b, shape) for a, b in zip(pre.args, operands)]
        if any(p is None for p in parts) or not any(p[0] == "lookup" for p in parts):  # type: ignore[index]
            return post
        xs = [p for p in parts if p[0] != "const"]  # type: ignore[index]
        x, dtype = xs[0][1], xs[0][2]
        if any(p[1] is not x or p[2] != dtype for p in xs):
            return post
        lo, _ = int_range(dtype)
        v = np.arange(lo, lo + 256).astype(dtype)
        args = [p[1] if p[0] == "const" else p[3][v.astype(np.int64) - lo] if p[0] == "lookup" else v  # type: ignore
                for p in parts]
        if _is(post, "qnn.lookup"):
            args.append(post.args[1].data)  # type: ignore[union-attr]
        table = np.asarray(post.op.ref(args, post.attrs)).reshape(-1)
        if table.size != 256 or table.dtype.name != out.dtype:
            return post
        new = call("qnn.lookup", x, Constant(table), meta=post.meta)
        self.made[id(new)] = (x, dtype, table)
        self.keep.append(new)
        return new


__all__ = ["FoldTables"]
