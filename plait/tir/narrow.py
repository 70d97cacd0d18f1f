"""``narrow_indices``: index arithmetic in 32 bits where every value it takes fits (TVM's NarrowDataType).

TIR's loop variables and index expressions are int64. On a core with 32-bit registers (a Cortex-M:
``Machine.word_bits`` 32) every int64 loop increment and compare is two instructions and every index
product a long multiply (on ARMv6-M a libgcc call). This pass rewrites, in one PrimFunc:

- a loop variable with constant ``min`` and ``extent`` (``extent > 0``) whose values and end
  (``min + extent``) fit int32 -> an int32 variable with int32 bounds;
- an *index expression*: an int64 tree of ``+ - * // % truncdiv truncmod min max select`` over
  immediates and narrowed variables (at least one) in which every node's values provably fit int32
  (:class:`plait.tir.int_bounds.IntBounds`: loop ranges, let values) -> the same tree in int32;
- a let variable bound to an index expression -> an int32 variable.

Where a narrowed value is used, the consumer decides: buffer indices and loop bounds take it as it
is (the C emitter flattens a buffer's indices in int32 only when the buffer has fewer than 2**31
elements, else in int64: :meth:`plait.backends.c.emit.CFunctionEmitter.flat_index`); a comparison of
two index values (or one and an immediate that fits) compares in int32; a cast converts from int32
(the same integer, so the same result); anything else (data arithmetic such as a requantization's
int64 products, an extern call's argument) gets ``Cast(int64, value)``, keeping its types. Symbolic
extents, loaded values and scalar parameters are never narrowed, nor is anything computed from them.
Every value of a narrowed tree is the same integer it was in int64, so results are identical.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from plait.ir.transform import PassContext
from plait.tir.dtype import int_range
from plait.tir.expr import (
    CMP_OPS, Add, AddressOf, BufferLoad, Cast, FloorDiv, FloorMod, IntImm, Let, Max, Min, Mul, PrimExpr, Select,
    Sub, TIRNode, TruncDiv, TruncMod, Var,
)
from plait.tir.functor import pre_order
from plait.tir.int_bounds import IntBounds, fits
from plait.tir.stmt import BufferStore, For, LetStmt, PrimFunc
from plait.tir.transform import PrimFuncPass

WIDE, NARROW = "int64", "int32"
_INDEX_OPS = (Add, Sub, Mul, FloorDiv, FloorMod, TruncDiv, TruncMod, Min, Max)


def _small(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.dtype == WIDE and fits((e.value, e.value), NARROW)


class _Analysis:
    """Which variables and int64 nodes of a function become int32."""

    def __init__(self, func: PrimFunc):
        self.bounds = IntBounds(func)
        self.vars: dict[Var, Var] = {}
        self.memo: dict[TIRNode, bool] = {}
        lo, hi = int_range(NARROW)
        for n in pre_order(func.body, unique=True):  # binders before their uses
            if isinstance(n, For):
                v, m, e = n.loop_var, n.min, n.extent
                if v.dtype == WIDE and isinstance(m, IntImm) and isinstance(e, IntImm) and e.value > 0 \
                        and lo <= m.value and m.value + e.value <= hi:
                    self.vars[v] = Var(v.name, NARROW)
            elif isinstance(n, (LetStmt, Let)) and n.var.dtype == WIDE and self.index(n.value):
                self.vars[n.var] = Var(n.var.name, NARROW)

    def index(self, root: PrimExpr) -> bool:
        """Is ``root`` an index expression (module docstring)?"""
        memo = self.memo
        stack: list[tuple[PrimExpr, bool]] = [(root, False)]
        while stack:
            n, done = stack.pop()
            if n in memo:
                continue
            kids = self._operands(n)
            if kids is None:
                memo[n] = False
                continue
            if not done:
                stack.append((n, True))
                stack.extend((c, False) for c in kids if c not in memo)
                continue
            memo[n] = isinstance(n, Var) or all(memo[c] or _small(c) for c in kids) and any(
                memo[c] for c in kids) and self._fits(n)
        return memo[root]

    def _operands(self, n: PrimExpr) -> tuple[PrimExpr, ...] | None:
        """The int64 operands whose narrowing ``n``'s needs (None: ``n`` is never an index expression)."""
        if n.dtype != WIDE:
            return None
        if isinstance(n, Var):  # a loop variable checked above, or a let variable bound to an index expression
            return None if n not in self.vars else ()
        if isinstance(n, _INDEX_OPS):
            return (n.a, n.b)
        if isinstance(n, Select):
            return (n.true_value, n.false_value)
        return None

    def _fits(self, n: PrimExpr) -> bool:
        r = self.bounds.bounds(n)
        return r is not None and fits(r, NARROW)


@dataclass
class _Rewriter:
    a: _Analysis

    def run(self, func: PrimFunc) -> PrimFunc:
        memo: dict[TIRNode, TIRNode] = {}
        stack: list[tuple[TIRNode, bool]] = [(func.body, False)]
        while stack:
            node, done = stack.pop()
            if node in memo:
                continue
            kids = node._children()
            if not done:
                stack.append((node, True))
                stack.extend((c, False) for c in reversed(kids) if c not in memo)
                continue
            memo[node] = self.node(node, kids, [memo[c] for c in kids])
        body = memo[func.body]
        return func if body is func.body else func.with_body(body)  # type: ignore[arg-type]

    def narrow(self, old: PrimExpr, new: PrimExpr) -> PrimExpr:
        """The int32 value of ``old`` (an index expression, rewritten as ``new``, or a small immediate)."""
        if new.dtype == NARROW:
            return new
        return IntImm(old.value, NARROW)  # type: ignore[attr-defined]

    def node(self, node: TIRNode, kids: tuple, new: list) -> TIRNode:
        a = self.a
        if isinstance(node, PrimExpr) and node.dtype == WIDE and a.index(node):
            if isinstance(node, Var):
                return a.vars[node]
            if isinstance(node, Select):
                t, f = (self.narrow(o, n) for o, n in zip(kids[1:], new[1:]))
                return Select(new[0], t, f)
            return type(node)(*(self.narrow(o, n) for o, n in zip(kids, new)))
        if isinstance(node, For) and node.loop_var in a.vars:
            v = a.vars[node.loop_var]
            return replace(node, loop_var=v, min=IntImm(node.min.value, NARROW),  # type: ignore[attr-defined]
                           extent=IntImm(node.extent.value, NARROW), body=new[2])  # type: ignore[attr-defined]
        if isinstance(node, (LetStmt, Let)) and node.var in a.vars:
            body = new[1]
            if isinstance(node, Let) and body.dtype != node.body.dtype:
                body = Cast(WIDE, body)
            return replace(node, var=a.vars[node.var], value=new[0], body=body)
        if isinstance(node, Cast) and new[0].dtype != node.value.dtype:
            return new[0] if node.dtype == NARROW else Cast(node.dtype, new[0])
        if isinstance(node, CMP_OPS) and node.a.dtype == WIDE:
            pairs = list(zip(kids, new))
            if any(n.dtype == NARROW for _, n in pairs) and all(n.dtype == NARROW or _small(o) for o, n in pairs):
                return type(node)(*(self.narrow(o, n) for o, n in pairs))
        keep = isinstance(node, (BufferLoad, AddressOf, BufferStore))  # indices take int32 as they are
        fixed = []
        for k, (o, n) in enumerate(zip(kids, new)):
            if keep and _is_index(node, k):
                n = self.narrow(o, n) if _small(o) else n  # a constant index too: the offset stays int32
            elif isinstance(o, PrimExpr) and o.dtype == WIDE and n.dtype == NARROW:
                n = Cast(WIDE, n)
            fixed.append(n)
        if all(o is n for o, n in zip(kids, fixed)):
            return node
        return node._rebuild(tuple(fixed))


def _is_index(node: TIRNode, k: int) -> bool:
    """Is child ``k`` of a load, address or store one of its indices (a store's value comes last)?"""
    return not isinstance(node, BufferStore) or k < len(node.indices)


def narrow_indices(func: PrimFunc) -> PrimFunc:
    """``func`` with its index arithmetic in int32 where that is exact (module docstring); ``func``
    itself when nothing narrows."""
    a = _Analysis(func)
    if not a.vars:
        return func
    return _Rewriter(a).run(func)


@dataclass(frozen=True)
class NarrowIndices(PrimFuncPass):
    """:func:`narrow_indices` on every PrimFunc (for a piece whose registers are 32 bits wide)."""

    name: ClassVar[str] = "tir.narrow_indices"

    def transform_function(self, func: PrimFunc, name: str, mod: Any, ctx: PassContext) -> PrimFunc:
        return narrow_indices(func)


__all__ = ["NarrowIndices", "narrow_indices"]
