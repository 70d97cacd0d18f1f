"""``bind_shared_exprs``: give shared subexpressions a name with ``Let``.

An expression object may be used by several parents (inlining a producer into a consumer that
reads it twice, ``x * sigmoid(x)``). The IR allows it, and the passes that work per node object
(verify, simplify, structural equality and hashing, the mutators) stay linear, but anything that
walks the *tree* (the printer, C codegen, the interpreter at run time) sees one copy per use: a
chain of 50 such ops is 2**50 nodes. Lowering should call this helper on what it built:

    cse0: float32 = A[i]
    cse1: float32 = cse0 * 0.5 + cse0
    B[i] = select(cse1 > 0.0, cse1, cse1 * 0.1)

Only pure subexpressions (no extern call: binding would change how often it runs) are bound, and
only when they are evaluated anyway (not only under a lazy ``select`` branch or the right operand
of ``and``/``or``) or cannot fail (no loads, no integer division or shifts): binding never
evaluates something the original would not, so padding guards keep working.
"""

from __future__ import annotations

from typing import Any

from plait.tir.expr import (
    AddressOf, And, BufferLoad, Call, FloatImm, FloorDiv, FloorMod, IntImm, Let, Or, PrimExpr, Select,
    ShiftLeft, ShiftRight, TruncDiv, TruncMod, Var,
)
from plait.tir.functor import StmtExprMutator, post_order
from plait.tir.stmt import AssertStmt, BufferStore, Evaluate, For, IfThenElse, LetStmt, Stmt

_MAY_FAIL = (BufferLoad, FloorDiv, FloorMod, TruncDiv, TruncMod, ShiftLeft, ShiftRight)
_LEAVES = (Var, IntImm, FloatImm)


def _analyze(root: PrimExpr) -> set[PrimExpr]:
    """The shared subexpressions of ``root`` that can be bound at its top."""
    uses: dict[PrimExpr, int] = {}
    pure: dict[PrimExpr, bool] = {}
    safe: dict[PrimExpr, bool] = {}
    let_bound: dict[PrimExpr, bool] = {}  # uses a variable bound by a Let inside root
    inner_vars = {n.var for n in post_order(root, unique=True) if isinstance(n, Let)}
    for n in post_order(root, unique=True):
        kids = n._children()
        for c in kids:
            uses[c] = uses.get(c, 0) + 1  # type: ignore[index]
        pure[n] = not (isinstance(n, Call) and n.kind != "intrin") and all(pure[c] for c in kids)  # type: ignore
        safe[n] = not isinstance(n, _MAY_FAIL) and all(safe[c] for c in kids)  # type: ignore[index]
        let_bound[n] = (n in inner_vars) or isinstance(n, Let) or any(let_bound[c] for c in kids)  # type: ignore
    always: set[PrimExpr] = set()  # evaluated whenever root is
    stack = [root]
    while stack:
        n = stack.pop()
        if n in always:
            continue
        always.add(n)
        if isinstance(n, Select):
            stack.append(n.cond)
        elif isinstance(n, (And, Or)):
            stack.append(n.a)
        else:
            stack.extend(n._children())  # type: ignore[arg-type]
    return {n for n, k in uses.items() if k > 1 and not isinstance(n, _LEAVES + (AddressOf,)) and pure[n]
            and not let_bound[n] and (n in always or safe[n])}


class _Bind(StmtExprMutator):
    def __init__(self, shared: set[PrimExpr], prefix: str):
        super().__init__()
        self.shared, self.prefix = shared, prefix
        self.lets: list[tuple[Var, PrimExpr]] = []

    def _name(self, pre: Any, post: Any) -> Any:
        if pre in self.shared:
            v = Var(f"{self.prefix}{len(self.lets)}", post.dtype)
            self.lets.append((v, post))
            return v
        return post


for _kind in ("add", "sub", "mul", "div", "floordiv", "floormod", "truncdiv", "truncmod", "min", "max",
              "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right", "eq", "ne", "lt", "le",
              "gt", "ge", "and", "or", "not", "bitwise_not", "select", "cast", "buffer_load", "call"):
    setattr(_Bind, "rewrite_" + _kind, _Bind._name)


def _bind_roots(roots: tuple[PrimExpr, ...], prefix: str) -> tuple[tuple[PrimExpr, ...], list[tuple[Var, PrimExpr]]]:
    """Rewrite expressions evaluated together, binding what they share (within or across them)."""
    shared = _analyze(roots[0] if len(roots) == 1 else Call("int32", "_roots", roots, "extern"))
    if not shared:
        return roots, []
    b = _Bind(shared, prefix)
    return tuple(b.visit(r) for r in roots), b.lets


class _PerStatement(StmtExprMutator):
    """Bind the shared subexpressions of each statement with LetStmts around it."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def wrap(self, post: Stmt, roots: tuple[PrimExpr, ...], build: Any) -> Stmt:
        new, lets = _bind_roots(roots, self.prefix)
        if not lets:
            return post
        out = build(*new)
        for v, value in reversed(lets):
            out = LetStmt(v, value, out)
        return out

    def rewrite_buffer_store(self, pre: Stmt, post: BufferStore) -> Stmt:
        return self.wrap(post, (post.value, *post.indices), lambda v, *idx: BufferStore(post.buffer, v, idx))

    def rewrite_evaluate(self, pre: Stmt, post: Evaluate) -> Stmt:
        return self.wrap(post, (post.value,), Evaluate)

    def rewrite_assert(self, pre: Stmt, post: AssertStmt) -> Stmt:
        return self.wrap(post, (post.cond,), lambda c: AssertStmt(c, post.status))

    def rewrite_if_then_else(self, pre: Stmt, post: IfThenElse) -> Stmt:
        return self.wrap(post, (post.cond,), lambda c: IfThenElse(c, post.then_case, post.else_case))

    def rewrite_let_stmt(self, pre: Stmt, post: LetStmt) -> Stmt:
        return self.wrap(post, (post.value,), lambda v: LetStmt(post.var, v, post.body))

    def rewrite_for(self, pre: Stmt, post: For) -> Stmt:
        return self.wrap(post, (post.min, post.extent),
                         lambda lo, n: For(post.loop_var, lo, n, post.kind, post.body, post.annotations))


def bind_shared_exprs(node: Any, prefix: str = "cse") -> Any:
    """``node`` with its shared subexpressions bound to new variables ``cse0``, ``cse1``...

    An expression gets ``Let`` expressions at its top; in a statement or a PrimFunc, each
    statement gets ``LetStmt`` s around it for what its expressions share (C-friendly).
    Unshared trees are returned as they are.
    """
    if isinstance(node, PrimExpr):
        (new,), lets = _bind_roots((node,), prefix)
        for v, value in reversed(lets):
            new = Let(v, value, new)
        return new
    return _PerStatement(prefix).visit(node)
