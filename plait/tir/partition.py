"""``partition_loops``: a guarded copy's loops split where its bounds test is decided (TVM's LoopPartition).

A convolution's padded copy stores ``select(cond, v, c)`` with ``cond`` a conjunction of bounds on its
loops (``yy - 1 >= 0 && yy - 1 < 25 && f - 1 >= 0 && f - 1 < 5``). The test runs for every element
although for the interior rows and columns it is always true; on a Cortex-M gcc does not hoist it,
and on the host it keeps the copy from being a contiguous vector copy. This pass rewrites, in one
PrimFunc, a loop

- with constant ``min`` and ``extent`` (symbolic extents are left alone),
- whose body is a perfect nest of loops down to one ``BufferStore`` of ``select(cond, v, c)`` with
  ``c`` an immediate (an ``if``/``else`` statement is not handled),
- where some conjuncts of ``cond`` use this loop's variable and no other variable (and no load or call),

into at most three loops over consecutive ranges: the prefix where one of those conjuncts is false
(the store of ``c``, no load), the interior where all of them are true (the store of ``select`` over
the remaining conjuncts, or of ``v`` when none remain; its inner loops are partitioned in turn) and
the suffix (``c`` again). Each piece keeps the loop's kind (a vectorized piece of one iteration becomes
serial) and annotations; an empty piece is left out. The ranges come from evaluating the conjuncts at every value of the loop (extents up to
:data:`MAX_EXTENT`), so any condition in the loop variable alone qualifies as long as the values
where it holds form one range; otherwise the loop stays as it is. A condition never true leaves one
loop storing ``c``; one always true leaves one loop without the test. Every element gets the value
it got before, so results are bit-identical. The pieces' variables keep their names (new objects:
the same names appear in consecutive loops of the generated C).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from plait.ir.transform import PassContext
from plait.tir.expr import AddressOf, And, BufferLoad, Call, FloatImm, IntImm, PrimExpr, Select, Var
from plait.tir.functor import StmtExprMutator, copy_with_fresh_vars, free_vars, pre_order
from plait.tir.interpreter import evaluate_expr
from plait.tir.stmt import BufferStore, For, PrimFunc, Stmt, seq
from plait.tir.transform import PrimFuncPass

MAX_EXTENT = 1 << 16
"""Loops longer than this are not partitioned (their conditions are evaluated at every value)."""


def _conjuncts(e: PrimExpr) -> list[PrimExpr]:
    out, stack = [], [e]
    while stack:
        n = stack.pop()
        if isinstance(n, And):
            stack.extend((n.b, n.a))
        else:
            out.append(n)
    return out


def _conjoin(terms: list[PrimExpr]) -> PrimExpr:
    out = terms[0]
    for t in terms[1:]:
        out = And(out, t)
    return out


def _guarded_nest(loop: For) -> tuple[list[For], BufferStore] | None:
    """The loops below ``loop`` (a perfect nest) and the store of a ``select`` with an immediate
    ``false_value`` they end in; None otherwise."""
    chain: list[For] = []
    s: Stmt = loop.body
    while isinstance(s, For):
        chain.append(s)
        s = s.body
    if isinstance(s, BufferStore) and isinstance(s.value, Select) \
            and isinstance(s.value.false_value, (IntImm, FloatImm)):
        return chain, s
    return None


def _with_store(chain: list[For], store: BufferStore) -> Stmt:
    """A loop's body with the nest ``chain`` ending in ``store``."""
    body: Stmt = store
    for f in reversed(chain):
        body = replace(f, body=body)
    return body


def _pure(e: PrimExpr) -> bool:
    """Does ``e`` compute from its variables alone (no load, address or call)?"""
    return not any(isinstance(n, (BufferLoad, AddressOf, Call)) for n in pre_order(e))


def _range_where(terms: list[PrimExpr], v: Var, lo: int, n: int) -> tuple[int, int] | None:
    """The values ``[a, b)`` of ``v`` in ``[lo, lo + n)`` where every term holds (``a == b``: none);
    None when they are not one range."""
    held = [all(bool(evaluate_expr(t, {v: x})) for t in terms) for x in range(lo, lo + n)]
    if not any(held):
        return lo, lo
    a = held.index(True)
    b = n - held[::-1].index(True)
    if not all(held[a:b]):
        return None
    return lo + a, lo + b


def partition_loop(loop: For) -> Stmt:
    """``loop`` split where the bounds test of its guarded store is decided (module docstring), its
    interior's inner loops partitioned too; ``loop`` itself when nothing is decided by its variable."""
    found = _guarded_nest(loop)
    v, m, e = loop.loop_var, loop.min, loop.extent
    if found is None:
        return loop
    chain, store = found
    sel = store.value
    terms = _conjuncts(sel.cond)
    mine = [t for t in terms if free_vars(t) == [v] and _pure(t)]
    if not mine or not (isinstance(m, IntImm) and isinstance(e, IntImm)) or not 0 < e.value <= MAX_EXTENT:
        return _partition_inner(loop, chain, store)
    bounds = _range_where(mine, v, m.value, e.value)
    if bounds is None:
        return _partition_inner(loop, chain, store)
    a, b = bounds
    rest = [t for t in terms if not any(t is x for x in mine)]
    inside = BufferStore(store.buffer, Select(_conjoin(rest), sel.true_value, sel.false_value) if rest
                         else sel.true_value, store.indices)
    border = BufferStore(store.buffer, sel.false_value, store.indices)
    pieces = []
    first = True
    for lo, hi, st in ((m.value, a, border), (a, b, inside), (b, m.value + e.value, border)):
        if hi <= lo:
            continue
        kind = "serial" if hi - lo == 1 and loop.kind == "vectorized" else loop.kind  # (one iteration: no vector)
        piece = For(v, lo, hi - lo, kind, _with_store(chain, st), loop.annotations)
        if st is inside:
            piece = _partition_inner(piece, chain, st)
        if not first:
            piece = copy_with_fresh_vars(piece)
        pieces.append(piece)
        first = False
    return seq(pieces)


def _partition_inner(loop: For, chain: list[For], store: BufferStore) -> Stmt:
    """``loop`` with its first inner loop partitioned (which partitions the ones below it in turn)."""
    if not chain:
        return loop
    cand = replace(chain[0], body=_with_store(chain[1:], store))
    inner = partition_loop(cand)
    return loop if inner is cand else replace(loop, body=inner)


class _Partitioner(StmtExprMutator):
    memoize = False

    def enter_for(self, node: For) -> Stmt | None:
        if _guarded_nest(node) is None:
            return None
        return partition_loop(node)


def partition_loops(func: PrimFunc) -> PrimFunc:
    """``func`` with every guarded copy's loops partitioned (module docstring); ``func`` itself when
    nothing changes."""
    return _Partitioner().visit(func)


@dataclass(frozen=True)
class PartitionLoops(PrimFuncPass):
    """:func:`partition_loops` on every PrimFunc."""

    name: ClassVar[str] = "tir.partition_loops"

    def transform_function(self, func: PrimFunc, name: str, mod: Any, ctx: PassContext) -> PrimFunc:
        return partition_loops(func)


__all__ = ["MAX_EXTENT", "PartitionLoops", "partition_loop", "partition_loops"]
