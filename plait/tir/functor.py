"""Traversal and rewriting of TIR: visitors, mutators, substitution, free variables.

Nothing here recurses per node: expression chains thousands deep are walked with explicit stacks.

- :func:`pre_order` / :func:`post_order` yield nodes (per occurrence: a subexpression shared by two
  parents is yielded twice, once under each);
- :class:`StmtExprVisitor`: ``enter_<kind>(node)`` before a node's children (return False to skip
  them), ``visit_<kind>(node)`` after them. Per occurrence, so ``enter_for``/``visit_for`` bracket
  exactly the nodes of that loop: keep context (loop nests) on ``self``;
- :class:`StmtExprMutator`: rebuilds bottom-up and only what changed (``post is pre`` when no child,
  buffer or binder changed); ``rewrite_<kind>(pre, post)`` returns the replacement;
- :func:`substitute` (vars -> expressions, buffers -> buffers), :func:`copy_with_fresh_vars` (a copy
  whose loop/let variables and allocated buffers are new objects, for duplicating code: a variable
  may be bound only once per PrimFunc), :func:`free_vars`.

Kinds (the ``<kind>`` in method names): var, int_imm, float_imm, add, sub, mul, div, floordiv,
floormod, truncdiv, truncmod, min, max, bitwise_and, bitwise_or, bitwise_xor, shift_left,
shift_right, eq, ne, lt, le, gt, ge, and, or, not, bitwise_not, select, cast, buffer_load,
address_of, call, let, buffer_store, for, if_then_else, seq, evaluate, let_stmt, allocate, prim_func.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from plait.tir.expr import BINARY_OPS, AddressOf, BufferLoad, Let, PrimExpr, TIRNode, Var
from plait.tir.op import convert
from plait.tir.stmt import Allocate, Buffer, BufferStore, For, LetStmt, PrimFunc

KINDS = tuple(c._kind for c in BINARY_OPS) + (
    "var", "int_imm", "float_imm", "not", "bitwise_not", "select", "cast", "buffer_load", "address_of", "call",
    "let", "buffer_store", "for", "if_then_else", "seq", "evaluate", "assert", "let_stmt", "allocate", "prim_func",
)


def pre_order(root: TIRNode, unique: bool = False) -> Iterator[TIRNode]:
    """Every node under ``root`` (included), parents before children, left to right.

    ``unique=True`` yields each node object once (a shared subexpression is not walked again),
    which keeps the walk linear in the number of distinct nodes."""
    seen: set[TIRNode] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if unique:
            if node in seen:
                continue
            seen.add(node)
        yield node
        stack.extend(reversed(node._children()))


def post_order(root: TIRNode, unique: bool = False) -> Iterator[TIRNode]:
    """Every node under ``root`` (included), children before parents, left to right."""
    seen: set[TIRNode] = set()
    stack: list[tuple[TIRNode, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            yield node
            continue
        if unique:
            if node in seen:
                continue
            seen.add(node)
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(node._children()))


def binders(node: TIRNode) -> tuple[Var, ...]:
    """Variables a node binds for (part of) its children: loop var, let var, scalar params."""
    if isinstance(node, For):
        return (node.loop_var,)
    if isinstance(node, (Let, LetStmt)):
        return (node.var,)
    if isinstance(node, PrimFunc):
        return tuple(p for p in node.params if isinstance(p, Var))
    return ()


class _Hooks:
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch_cache = {}


class StmtExprVisitor(_Hooks):
    """Visit every node, per occurrence. Override ``enter_<kind>`` / ``visit_<kind>``.

    Set ``visit_shared_once = True`` to visit a node object shared by several parents only the
    first time (linear on heavily shared expressions; loses the per-occurrence context)."""

    visit_shared_once = False
    _dispatch_cache: dict = {}

    def _hooks(self, kind: str) -> tuple[Any, Any]:
        cache = type(self)._dispatch_cache
        if kind not in cache:
            cache[kind] = (getattr(type(self), "enter_" + kind, None), getattr(type(self), "visit_" + kind, None))
        return cache[kind]

    def visit(self, root: TIRNode) -> None:
        seen: set[TIRNode] = set()
        once = self.visit_shared_once
        stack: list[tuple[TIRNode, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            enter, leave = self._hooks(node._kind)
            if expanded:
                if leave is not None:
                    leave(self, node)
                continue
            if once:
                if node in seen:
                    continue
                seen.add(node)
            stack.append((node, True))
            if enter is None or enter(self, node) is not False:
                stack.extend((c, False) for c in reversed(node._children()))


class StmtExprMutator(_Hooks):
    """Rebuild a tree bottom-up, sharing every unchanged node.

    Hooks (all optional):

    - ``enter_<kind>(node)``: before the children; return a node to use it as the result as-is
      (children not visited, no rewrite), or None to go on;
    - ``rewrite_<kind>(pre, post)``: ``post`` is ``pre`` rebuilt from rewritten children (``post is
      pre`` if nothing changed); return the replacement;
    - ``rewrite_binder(var) -> Var``: called once per binder (loop/let variable, scalar param) before
      the node's children; a different Var rebinds (uses are rewritten by ``rewrite_var``);
    - ``rewrite_buffer(buffer) -> Buffer``: every buffer reference (loads, stores, address_of,
      allocations, buffer params) goes through it, memoized per buffer.

    With ``memoize = True`` (the default) a node object is rewritten once and its result reused
    wherever it appears: right for context-free rewrites; set it False for context-dependent ones.
    """

    memoize = True
    _dispatch_cache: dict = {}

    def __init__(self) -> None:
        self.memo: dict[TIRNode, TIRNode] = {}
        self.buffer_memo: dict[Buffer, Buffer] = {}
        self.binder_memo: dict[Var, Var] = {}

    def _hooks(self, kind: str) -> tuple[Any, Any]:
        cache = type(self)._dispatch_cache
        if kind not in cache:
            cache[kind] = (getattr(type(self), "enter_" + kind, None), getattr(type(self), "rewrite_" + kind, None))
        return cache[kind]

    def rewrite_binder(self, var: Var) -> Var:
        return var

    def rewrite_buffer(self, buffer: Buffer) -> Buffer:
        return buffer

    def buffer(self, b: Buffer) -> Buffer:
        """``rewrite_buffer`` memoized (use it, not rewrite_buffer, from hooks)."""
        out = self.buffer_memo.get(b)
        if out is None:
            out = self.buffer_memo[b] = self.rewrite_buffer(b)
        return out

    def _binder(self, v: Var) -> Var:
        out = self.binder_memo.get(v)
        if out is None:
            out = self.binder_memo[v] = self.rewrite_binder(v)
        return out

    def visit(self, root: TIRNode) -> Any:
        memo, results = self.memo, []
        stack: list[tuple[TIRNode, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            enter, rewrite = self._hooks(node._kind)
            if expanded:
                kids = node._children()
                if kids:
                    new_kids = tuple(results[len(results) - len(kids):])
                    del results[len(results) - len(kids):]
                else:
                    new_kids = kids
                post = self._rebuild(node, kids, new_kids)
                out = post if rewrite is None else rewrite(self, node, post)
                if self.memoize:
                    memo[node] = out
                results.append(out)
                continue
            if self.memoize and node in memo:
                results.append(memo[node])
                continue
            if enter is not None:
                early = enter(self, node)
                if early is not None:
                    results.append(early)
                    continue
            for v in binders(node):
                self._binder(v)
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(node._children()))
        assert len(results) == 1
        return results[0]

    def _rebuild(self, node: TIRNode, kids: tuple, new_kids: tuple) -> TIRNode:
        changed = any(a is not b for a, b in zip(kids, new_kids))
        if isinstance(node, (BufferLoad, AddressOf)):
            buf = self.buffer(node.buffer)
            if buf is not node.buffer or changed:
                return type(node)(buf, new_kids)
            return node
        if isinstance(node, BufferStore):
            buf = self.buffer(node.buffer)
            if buf is not node.buffer or changed:
                return BufferStore(buf, new_kids[-1], new_kids[:-1])
            return node
        if isinstance(node, Allocate):
            buf = self.buffer(node.buffer)
            return Allocate(buf, new_kids[0]) if buf is not node.buffer or changed else node
        if isinstance(node, For):
            v = self._binder(node.loop_var)
            if v is not node.loop_var or changed:
                return For(v, new_kids[0], new_kids[1], node.kind, new_kids[2], node.annotations)
            return node
        if isinstance(node, (Let, LetStmt)):
            v = self._binder(node.var)
            return type(node)(v, new_kids[0], new_kids[1]) if v is not node.var or changed else node
        if isinstance(node, PrimFunc):
            params = tuple(self.buffer(p) if isinstance(p, Buffer) else self._binder(p) for p in node.params)
            if changed or any(a is not b for a, b in zip(params, node.params)):
                return PrimFunc(params, new_kids[0], node.attrs)
            return node
        return node._rebuild(new_kids) if changed else node


class _Substitute(StmtExprMutator):
    def __init__(self, vmap: Mapping[Var, PrimExpr], bmap: Mapping[Buffer, Buffer]):
        super().__init__()
        self.vmap, self.bmap = vmap, bmap

    def rewrite_var(self, pre: Var, post: PrimExpr) -> PrimExpr:
        return self.vmap.get(pre, post)

    def rewrite_binder(self, var: Var) -> Var:
        new = self.vmap.get(var)
        return new if isinstance(new, Var) else var

    def rewrite_buffer(self, buffer: Buffer) -> Buffer:
        if buffer in self.bmap:
            return self.bmap[buffer]
        shape = tuple(_Substitute(self.vmap, {}).visit(d) for d in buffer.shape) if self.vmap else buffer.shape
        if any(a is not b for a, b in zip(shape, buffer.shape)):
            return Buffer(buffer.name, shape, buffer.dtype, buffer.scope)
        return buffer


def substitute(node: Any, vmap: Mapping[Var, Any] | None = None,
               buffer_map: Mapping[Buffer, Buffer] | None = None) -> Any:
    """``node`` with every use of a variable in ``vmap`` replaced (Python numbers become immediates
    of the variable's dtype) and every buffer in ``buffer_map`` replaced. A variable mapped to a
    Var is also renamed where it is bound. Buffer shapes are substituted too."""
    vm = {v: convert(e, v.dtype, f"substitute '{v.name}'") for v, e in (vmap or {}).items()}
    return _Substitute(vm, dict(buffer_map or {})).visit(node)


class _FreshCopy(StmtExprMutator):
    def rewrite_binder(self, var: Var) -> Var:
        return Var(var.name, var.dtype)

    def rewrite_var(self, pre: Var, post: PrimExpr) -> PrimExpr:
        return self.binder_memo.get(pre, post)

    def enter_allocate(self, node: Allocate) -> None:
        b = node.buffer
        shape = tuple(self.visit(d) for d in b.shape)
        self.buffer_memo[b] = Buffer(b.name, shape, b.dtype, b.scope)


def copy_with_fresh_vars(node: Any) -> Any:
    """A copy of ``node`` whose bound variables and allocated buffers are new objects.

    Use it when the same code must appear twice in a PrimFunc (unrolling by hand, peeling...).
    """
    return _FreshCopy().visit(node)


def free_vars(node: TIRNode) -> list[Var]:
    """Variables used under ``node`` but not bound there (nor in buffer shapes), first use first."""
    bound: set[Var] = set()
    for n in pre_order(node, unique=True):
        bound.update(binders(n))
    out: list[Var] = []
    seen: set[Var] = set()
    for n in pre_order(node, unique=True):
        if isinstance(n, Var) and n not in bound and n not in seen:
            seen.add(n)
            out.append(n)
    return out


def used_buffers(node: TIRNode) -> list[Buffer]:
    """Buffers loaded, stored, addressed or allocated under ``node``, in first-use order."""
    out: dict[Buffer, None] = {}
    for n in pre_order(node, unique=True):
        b = getattr(n, "buffer", None)
        if isinstance(b, Buffer):
            out.setdefault(b, None)
    return list(out)


def func_name(f: PrimFunc, k: int) -> str:
    """How messages name the ``k``-th PrimFunc of a list: its global symbol, else ``func<k>``."""
    return f.name if f.name else f"func{k}"


def extern_calls(funcs: Any, backend: str, usable: Any, error: type) -> dict[str, tuple[str, tuple[str, ...], str]]:
    """The extern functions the PrimFuncs ``funcs`` call: name -> (return dtype, argument dtypes,
    first caller). A code generator (``backend``: "C", "LLVM") passes ``usable(name) -> bool`` for
    the names it can declare; a name it cannot, or one called with two signatures, raises ``error``."""
    from plait.tir.expr import Call

    out: dict[str, tuple[str, tuple[str, ...], str]] = {}
    for k, f in enumerate(funcs):
        where = f"PrimFunc '{func_name(f, k)}'"
        for n in pre_order(f.body):
            if not (isinstance(n, Call) and n.kind == "extern"):
                continue
            if not usable(n.name):
                raise error(f"{backend} codegen of {where}: extern function name {n.name!r} is not a usable "
                            "C identifier")
            sig = (n.dtype, tuple(a.dtype for a in n.args), where)
            have = out.setdefault(n.name, sig)
            if have[:2] != sig[:2]:
                raise error(f"{backend} codegen of {where}: extern function '{n.name}' is called as "
                            f"{sig[0]}({', '.join(sig[1])}) here and as {have[0]}({', '.join(have[1])}) in {have[2]}")
    return out
