"""FoldConstant: evaluate operator calls whose arguments are all constants (with the operators'
numpy references, i.e. exactly what the reference interpreter computes) and replace them by
constants; tuple items of constant tuples are folded too.

Not folded (:data:`NOT_FOLDED`): ``device_copy`` (placement inserted it on purpose) and
``qnn.dequantize`` (an int8 weight stays int8: the QDQ pass makes the operator it feeds an integer
one, and otherwise it is dequantized at run time), calls inside Primitive functions,
and results with more than ``max_elements`` elements (folding ``broadcast_to`` of a scalar into a
huge constant would only make the model bigger); the size is judged from the call's type before
anything is evaluated, so a huge result is never materialized.

A call some of whose arguments are constants is also checked by its operator's
``check_constant_args`` (the gather operators: an index out of range), so a model that would fail
on every input fails here, at compile time, with the reference interpreter's message and the call
named, instead of running clamped code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import math

import numpy as np

from plait.errors import InterpreterError, PlaitError
from plait.ir.op import Op
from plait.ir.transform import Pass, PassContext
from plait.ir.types import DTYPES, TensorType, TupleType, Type
from plait.relay.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem
from plait.relay.infer import describe_call, infer_type
from plait.relay.module import IRModule
from plait.relay.visitor import ExprMutator, post_order

# operators whose calls on constants stay calls (the importer's folding honours this too)
NOT_FOLDED = frozenset({"device_copy", "qnn.dequantize"})


def _matches(value: object, t: Type) -> bool:
    if isinstance(t, TensorType):
        return isinstance(value, np.ndarray) and value.dtype == DTYPES[t.dtype] and value.shape == tuple(t.shape)
    if isinstance(t, TupleType):
        return isinstance(value, tuple) and len(value) == len(t.fields) and all(
            _matches(v, f) for v, f in zip(value, t.fields))
    return False


def _size(value: object) -> int:
    if isinstance(value, tuple):
        return sum(_size(v) for v in value)
    return int(np.asarray(value).size)


def _type_size(t: Type) -> int | None:
    """Elements a value of type ``t`` holds (None: a symbolic dim)."""
    if isinstance(t, TupleType):
        sizes = [_type_size(f) for f in t.fields]
        return None if any(s is None for s in sizes) else sum(sizes)  # type: ignore[misc]
    if isinstance(t, TensorType) and all(isinstance(d, int) for d in t.shape):
        return math.prod(t.shape)  # type: ignore[arg-type]
    return None


def _check_constant_args(op: Op, pre: Call, post: Call) -> None:
    """Run the operator's check of its constant arguments; its error names the call."""
    check = op.check_constant_args
    if check is None or not any(isinstance(a, Constant) for a in post.args):
        return
    if not all(a.has_type for a in pre.args):
        return
    try:
        check([a.data if isinstance(a, Constant) else None for a in post.args],
              tuple(a.checked_type for a in pre.args), post.attrs)
    except PlaitError as exc:
        raise InterpreterError(f"{describe_call(pre)}: {exc} (a constant index: this call fails on every "
                               "input)") from None


def _as_expr(value: object) -> Expr:
    if isinstance(value, tuple):
        return Tuple(tuple(_as_expr(v) for v in value))
    return Constant(np.asarray(value))


class _Folder(ExprMutator):
    def __init__(self, max_elements: int):
        super().__init__()
        self.max_elements = max_elements

    def visit(self, root: Expr) -> Expr:
        memo = self.memo

        def skip(n: Expr) -> bool:
            return isinstance(n, Function) and bool(n.attrs.get("Primitive"))

        for node in post_order(root, enter=lambda n: n not in memo and not skip(n)):
            if node in memo:
                continue
            if skip(node):
                memo[node] = node
                continue
            post = self._rebuild(node)
            if isinstance(node, Call):
                memo[node] = self.rewrite_call(node, post)
            elif isinstance(node, TupleGetItem):
                memo[node] = self.rewrite_tuple_getitem(node, post)
            else:
                memo[node] = post
        return memo[root]

    def rewrite_call(self, pre: Call, post: Expr) -> Expr:
        assert isinstance(post, Call)
        op = post.op
        if isinstance(op, Op) and pre.has_type:
            _check_constant_args(op, pre, post)
        if not isinstance(op, Op) or op.name in NOT_FOLDED or not all(isinstance(a, Constant) for a in post.args):
            return post
        if not pre.has_type:
            return post
        t = pre.checked_type
        n = _type_size(t)
        if n is None or n > self.max_elements:
            return post
        try:
            value = op.ref([np.array(a.data) for a in post.args], post.attrs)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - leave it to run time, where the error names the call
            return post
        if isinstance(value, (np.generic, float, int, bool)):
            value = np.asarray(value)
        if isinstance(value, list):
            value = tuple(value)
        if not _matches(value, t) or _size(value) > self.max_elements:
            return post
        out = _as_expr(value)
        infer_type(IRModule.from_expr(out))
        return out

    def rewrite_tuple_getitem(self, pre: TupleGetItem, post: Expr) -> Expr:
        assert isinstance(post, TupleGetItem)
        t = post.tuple_value
        if isinstance(t, Tuple) and all(isinstance(f, Constant) for f in t.fields):
            return t.fields[post.index]
        return post


@dataclass(frozen=True)
class FoldConstant(Pass):
    """Fold constant subexpressions of every non-Primitive Relay function."""

    max_elements: int = 1 << 20
    name: ClassVar[str] = "fold_constant"

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        mod = infer_type(mod)
        for gname, fn in list(mod.items()):
            if isinstance(fn, Function) and not fn.attrs.get("Primitive"):
                new = _Folder(self.max_elements).visit(fn)
                if new is not fn:
                    mod = mod.with_function(gname, new)  # type: ignore[arg-type]
        return infer_type(mod)
