"""Iterative traversal and rewriting of Relay expressions.

Nothing here recurses per node: a chain of 20,000 calls is walked with an explicit stack.

- :func:`children` lists a node's direct sub-expressions (in evaluation order: a let's value
  comes before its variable);
- :func:`post_order` yields every node reachable from a root once, children before parents;
- :class:`ExprVisitor` calls ``visit_<kind>(node)`` on every node in post order;
- :class:`ExprMutator` rebuilds an expression bottom-up: ``rewrite_<kind>(pre, post)`` gets the
  original node and the node rebuilt from already-rewritten children, and returns the replacement.
"""

from __future__ import annotations

from typing import Callable, Iterator

from plait.relay.expr import (
    Call, Constant, Expr, Function, GlobalVar, If, Let, Loop, Tuple, TupleGetItem, Var,
)


def children(e: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``e`` in evaluation order (declared once per node class)."""
    return e._children()


def post_order(root: Expr, enter: Callable[[Expr], bool] | None = None) -> Iterator[Expr]:
    """Every node reachable from ``root`` once, children first.

    ``enter(node)`` may return False to not descend into that node (it is still yielded).
    """
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            yield node
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        if enter is None or enter(node):
            for c in reversed(node._children()):
                if id(c) not in seen:
                    stack.append((c, False))


def _kind(e: Expr) -> str:
    return _KIND_NAMES[type(e)] if type(e) in _KIND_NAMES else _kind_slow(e)


_KIND_NAMES = {
    Var: "var", GlobalVar: "global_var", Constant: "constant", Tuple: "tuple",
    TupleGetItem: "tuple_getitem", Call: "call", Let: "let", If: "if", Loop: "loop", Function: "function",
}


def _kind_slow(e: Expr) -> str:
    for cls, name in _KIND_NAMES.items():
        if isinstance(e, cls):
            return name
    raise TypeError(f"not a Relay expression: {e!r}")


class ExprVisitor:
    """Visit every node once in post order. Override ``visit_call`` and friends."""

    def visit(self, root: Expr) -> None:
        for node in post_order(root):
            getattr(self, "visit_" + _kind(node))(node)

    def visit_var(self, v: Var) -> None: ...
    def visit_global_var(self, g: GlobalVar) -> None: ...
    def visit_constant(self, c: Constant) -> None: ...
    def visit_tuple(self, t: Tuple) -> None: ...
    def visit_tuple_getitem(self, t: TupleGetItem) -> None: ...
    def visit_call(self, c: Call) -> None: ...
    def visit_let(self, l: Let) -> None: ...
    def visit_if(self, i: If) -> None: ...
    def visit_loop(self, lp: Loop) -> None: ...
    def visit_function(self, f: Function) -> None: ...


class ExprMutator:
    """Rebuild an expression bottom-up.

    ``rewrite_<kind>(pre, post)``: ``pre`` is the original node, ``post`` the same node rebuilt
    on the rewritten children (``post is pre`` when no child changed). Return the replacement;
    the default returns ``post``. Results are memoized per node, so shared subexpressions stay
    shared. ``self.memo[node]`` gives a node's rewritten form once it has been visited.
    """

    def __init__(self) -> None:
        self.memo: dict[Expr, Expr] = {}

    def visit(self, root: Expr) -> Expr:
        memo = self.memo
        for node in post_order(root, enter=lambda n: n not in memo):
            if node in memo:
                continue
            post = self._rebuild(node)
            memo[node] = getattr(self, "rewrite_" + _kind(node))(node, post)
        return memo[root]

    def _rebuild(self, e: Expr) -> Expr:
        kids = e._children()
        if not kids:
            return e
        m = self.memo
        new = tuple(m[k] for k in kids)
        if all(a is b for a, b in zip(new, kids)):
            return e
        if isinstance(e, Let) and not isinstance(new[1], Var):
            raise TypeError("a let-bound variable must be rewritten to a Var")
        if isinstance(e, Function) and not all(isinstance(p, Var) for p in new[:-1]):
            raise TypeError("function parameters must be rewritten to Vars")
        if isinstance(e, Loop) and not isinstance(new[-1], Function):
            raise TypeError("a loop body must be rewritten to a Function")
        return e._rebuild(new)

    def rewrite_var(self, pre: Var, post: Expr) -> Expr: return post
    def rewrite_global_var(self, pre: GlobalVar, post: Expr) -> Expr: return post
    def rewrite_constant(self, pre: Constant, post: Expr) -> Expr: return post
    def rewrite_tuple(self, pre: Tuple, post: Expr) -> Expr: return post
    def rewrite_tuple_getitem(self, pre: TupleGetItem, post: Expr) -> Expr: return post
    def rewrite_call(self, pre: Call, post: Expr) -> Expr: return post
    def rewrite_let(self, pre: Let, post: Expr) -> Expr: return post
    def rewrite_if(self, pre: If, post: Expr) -> Expr: return post
    def rewrite_loop(self, pre: Loop, post: Expr) -> Expr: return post
    def rewrite_function(self, pre: Function, post: Expr) -> Expr: return post


def free_vars(e: Expr) -> list[Var]:
    """Variables used in ``e`` but not bound in it, in first-use order."""
    bound: set[Var] = set()
    used: list[Var] = []
    seen: set[Var] = set()
    for n in post_order(e):
        if isinstance(n, Function):
            bound.update(n.params)
        elif isinstance(n, Let):
            bound.add(n.var)
    for n in post_order(e):
        if isinstance(n, Var) and n not in bound and n not in seen:
            seen.add(n)
            used.append(n)
    return used
