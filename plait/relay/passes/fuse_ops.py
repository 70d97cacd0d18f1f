"""FuseOps: group operator calls of ``main`` into Primitive functions (docs/lowering.md, section 1).

Groups are grown backwards from each group's *root* (the only call of the group whose value is
used outside it): visiting calls consumers first, a call joins the group of its consumers when

- every use of its value is by calls of that one group (so groups have a single output and are
  convex: a path leaving a group can never come back to it), and
- the fusion patterns allow it (``OpPattern``; ``nn.batch_norm`` counts as BROADCAST here: in
  inference it is a per-channel ``(x - mean) * gamma / sqrt(var + eps) + beta``):

  * OPAQUE calls and ``device_copy`` are groups of their own; a call with a tuple result (``split``)
    is always a group's root (its consumers see the tuple through ``TupleGetItem``);
  * a group without an anchor takes ELEMWISE/BROADCAST/INJECTIVE calls; an anchor (an
    OUT_ELEMWISE_FUSABLE or REDUCTION call) joins it only if every group call downstream of
    the anchor is ELEMWISE/BROADCAST with the anchor's output shape (its epilogue);
  * once a group has its anchor, calls upstream of the anchor join only if the anchor is a
    REDUCTION and they are ELEMWISE/BROADCAST/INJECTIVE (reductions absorb injective producers;
    conv/dense/matmul/pools do not); calls on side branches (feeding the epilogue, not the
    anchor) join if they are ELEMWISE/BROADCAST/INJECTIVE.
- both calls have the same fusion key: ``key(call)`` when a key function is given (placement groups
  calls it may put on the same pieces), else the call's ``meta["fusion"]`` (a pass that wants calls
  kept apart sets it; absent: no limit);
- the group holds fewer than ``max_ops`` calls (:data:`MAX_FUSED_OPS`, 256, as in TVM): a longer
  chain is cut into groups of that size (identical groups are lowered once).

Each group becomes ``Call(Function(params, body, attrs={"Primitive": 1, "anchor": op, "name":
"fused_..."}), args)``: params are the group's external inputs in first-use order (variables,
other groups' results, non-scalar constants); constants with one element are inlined. Calls in
the body keep their attrs and meta. Each scope is fused on its own: the dataflow of ``main``, then
every ``If`` branch, ``Loop`` operand and body, and function literal, whose values from the enclosing
scope are leaves there (never pulled into a group of the inner scope). Calls of functions are left
as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Collection, Hashable

from plait.ir.attrs import Attrs
from plait.ir.op import Op, OpPattern
from plait.ir.transform import Pass, PassContext
from plait.ir.types import TensorType, TupleType
from plait.relay.expr import Call, Constant, Expr, Function, If, Loop, Var
from plait.relay.infer import infer_type
from plait.relay.module import IRModule
from plait.relay.visitor import ExprMutator, children, post_order

FUSION_PATTERN_OVERRIDES: dict[str, OpPattern] = {"nn.batch_norm": OpPattern.BROADCAST}
"""Fusion patterns used instead of the operator's own (see the module docstring)."""

NOT_FUSED = frozenset({"device_copy"})
"""Operators left as plain calls in ``main`` (not outlined)."""

_ANCHORS = (OpPattern.OUT_ELEMWISE_FUSABLE, OpPattern.REDUCTION)


def fusion_pattern(call: Call) -> OpPattern:
    assert isinstance(call.op, Op)
    return FUSION_PATTERN_OVERRIDES.get(call.op.name, call.op.pattern)


def _is_op_call(e: Expr) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name not in NOT_FUSED


class _Group:
    __slots__ = ("root", "members", "anchor", "upstream", "open")

    def __init__(self, root: Call, pattern: OpPattern):
        self.root = root
        self.members: list[Call] = [root]
        self.anchor: Call | None = root if pattern in _ANCHORS else None
        self.upstream: set[Call] = set()  # members upstream of the anchor
        self.open = pattern <= OpPattern.OUT_ELEMWISE_FUSABLE  # opaque calls never grow


MAX_FUSED_OPS = 256
"""The most calls one group may hold (as in TVM): a chain of 10,000 elementwise calls becomes
groups of this size (lowered once, called many times) rather than one function of 10,000 stages,
which C compilers optimize in time superlinear in its size."""


FUSION_META = "fusion"
"""The call ``meta`` key holding a call's fusion key (:func:`find_groups`: different keys never fuse)."""

FusionKey = Callable[[Call], Hashable]


def meta_key(call: Call) -> Hashable:
    """The default fusion key: the call's ``meta["fusion"]``, or None."""
    return call.meta.get(FUSION_META) if call.meta else None


def _scope(n: Expr) -> bool:
    """Does ``n`` open scopes of its own (fused separately)?"""
    return isinstance(n, (If, Loop, Function))


def scope_refs(n: Expr, level: Collection[Expr]) -> list[Expr]:
    """The nodes of ``level`` (an enclosing scope's) that the scopes ``n`` opens read (through nodes of
    their own)."""
    seen: dict[Expr, None] = {}
    for c in children(n):
        for e in post_order(c, enter=lambda e: e not in level):
            if e in level:
                seen.setdefault(e)
    return list(seen)


def find_groups(body: Expr, max_ops: int = MAX_FUSED_OPS, key: FusionKey | None = None,
                outer: Collection[Expr] = ()) -> dict[Call, _Group]:
    """Map every fusable call of ``body``'s dataflow to its group (of at most ``max_ops`` calls, all
    with the same ``key``; default :func:`meta_key`). Nodes of ``outer`` (enclosing scopes') are
    leaves: neither entered nor grouped. A value read inside an ``If`` / ``Loop`` / function literal
    is used by it: it stays a group's output."""
    key = key or meta_key
    order = list(post_order(body, enter=lambda n: not _scope(n) and n not in outer))
    level = set(order)
    consumers: dict[Expr, list[Expr]] = {}
    for n in order:
        if n in outer:
            continue
        for c in (scope_refs(n, level) if _scope(n) else children(n)):
            lst = consumers.setdefault(c, [])
            if not lst or lst[-1] is not n:
                lst.append(n)
    group_of: dict[Call, _Group] = {}
    for n in reversed(order):
        if not _is_op_call(n) or n in outer:
            continue
        assert isinstance(n, Call)
        users = consumers.get(n, [])
        g = _joinable_group(n, users, group_of, max_ops) if n is not body else None
        if g is not None and key(n) != key(g.root):
            g = None
        if g is None:
            group_of[n] = _Group(n, fusion_pattern(n))
        else:
            _join(g, n, users)
            group_of[n] = g
    return group_of


def _joinable_group(n: Call, users: list[Expr], group_of: dict[Call, _Group], max_ops: int) -> _Group | None:
    if not users or not all(isinstance(u, Call) and u in group_of for u in users):
        return None
    g = group_of[users[0]]  # type: ignore[index]
    if not g.open or len(g.members) >= max_ops or any(group_of[u] is not g for u in users):  # type: ignore[index]
        return None
    p = fusion_pattern(n)
    if isinstance(n.checked_type, TupleType) or p > OpPattern.OUT_ELEMWISE_FUSABLE:
        return None
    if g.anchor is None:
        if p <= OpPattern.INJECTIVE:
            return g
        return g if _epilogue_ok(g, n, users) else None
    if p in _ANCHORS:
        return None  # one anchor per group
    feeds_anchor = any(u is g.anchor or u in g.upstream for u in users)
    if feeds_anchor:
        return g if fusion_pattern(g.anchor) == OpPattern.REDUCTION and p <= OpPattern.INJECTIVE else None
    return g if p <= OpPattern.INJECTIVE else None


def _epilogue_ok(g: _Group, anchor: Call, users: list[Expr]) -> bool:
    """Are all group calls downstream of ``anchor`` elementwise/broadcast with its output shape?"""
    shape = anchor.checked_type
    if not isinstance(shape, TensorType):
        return False
    members = set(g.members)
    stack, seen = [u for u in users], set()
    inside: dict[Expr, list[Expr]] = {}
    for m in g.members:
        for c in m.args:
            inside.setdefault(c, []).append(m)
    while stack:
        m = stack.pop()
        if m in seen:
            continue
        seen.add(m)
        t = m.checked_type
        if fusion_pattern(m) > OpPattern.BROADCAST or not isinstance(t, TensorType) or t.shape != shape.shape:
            return False
        stack.extend(x for x in inside.get(m, []) if x in members)
    return True


def _join(g: _Group, n: Call, users: list[Expr]) -> None:
    p = fusion_pattern(n)
    if p in _ANCHORS:
        g.anchor = n
    elif g.anchor is not None and any(u is g.anchor or u in g.upstream for u in users):
        g.upstream.add(n)
    g.members.append(n)


def _op_label(name: str) -> str:
    return name.replace(".", "_")


def _inline_constant(c: Constant) -> bool:
    return c.data.size == 1


def outline(g: _Group, memo: dict[Expr, Expr]) -> Call:
    """The call of the Primitive function of group ``g`` (arguments already rewritten in ``memo``)."""
    fn, inputs = group_function(g)
    return Call(fn, tuple(memo[x] for x in inputs))


def group_function(g: _Group) -> tuple[Function, list[Expr]]:
    """The Primitive function of group ``g`` (untyped) and the values its parameters stand for."""
    members = set(g.members)
    params: list[Var] = []
    args: list[Expr] = []
    pmap: dict[Expr, Expr] = {}
    new: dict[Expr, Expr] = {}
    calls: list[Call] = []
    for node in post_order(g.root, enter=lambda x: x in members):
        if node in members:
            assert isinstance(node, Call)
            new[node] = Call(node.op, tuple(new[a] for a in node.args), node.attrs, node.meta)
            calls.append(node)
        elif isinstance(node, Constant) and _inline_constant(node):
            new[node] = node
        elif node not in pmap:
            v = Var(f"p{len(params)}", node.checked_type)
            params.append(v)
            args.append(node)
            pmap[node] = new[node] = v
    anchor = g.anchor if g.anchor is not None else calls[0]
    assert isinstance(anchor.op, Op)
    name = "fused_" + "_".join(_op_label(c.op.name) for c in calls)  # type: ignore[union-attr]
    attrs = Attrs({"Primitive": 1, "anchor": anchor.op.name, "name": name})
    return Function(tuple(params), new[g.root], g.root.checked_type, attrs), args


class _Outliner(ExprMutator):
    def __init__(self, groups: dict[Call, _Group], max_ops: int = MAX_FUSED_OPS, outer: Collection[Expr] = ()):
        super().__init__()
        self.groups = groups
        self.max_ops = max_ops
        self.outer = outer  # the nodes of the enclosing scopes (their rewritten forms are in memo)
        self.level: set[Expr] = set()

    def visit(self, root: Expr) -> Expr:
        self.level = set(post_order(root, enter=lambda n: not _scope(n) and n not in self.outer)) | set(self.outer)
        return self.walk(root)

    def walk(self, root: Expr) -> Expr:
        """Rewrite ``root`` (a node of this scope), children first."""
        memo = self.memo
        for node in post_order(root, enter=lambda n: n not in memo and not _scope(n)):
            if node in memo:
                continue
            if _scope(node):
                memo[node] = node if isinstance(node, Function) and node.attrs.get("Primitive") else self.scoped(node)
                continue
            post = self._rebuild(node)
            g = self.groups.get(node) if isinstance(node, Call) else None
            memo[node] = outline(g, memo) if g is not None and g.root is node else post
        return memo[root]

    def scoped(self, node: Expr) -> Expr:
        """An ``If`` / ``Loop`` / function literal with each child (a function: its body) fused as a
        scope of its own; the values it reads from this scope are rewritten first (its leaves)."""
        for ref in scope_refs(node, self.level):
            if ref not in self.memo:
                self.walk(ref)
        new = []
        for c in children(node):
            if isinstance(c, Function) and not c.attrs.get("Primitive"):
                new.append(Function(c.params, self.nested(c.body), c.ret_type, c.attrs))
            elif isinstance(c, Var) or (isinstance(c, Function) and c.attrs.get("Primitive")):
                new.append(self.memo.get(c, c))
            else:
                new.append(self.nested(c))
        if isinstance(node, Function):
            return Function(node.params, new[-1], node.ret_type, node.attrs)
        return node._rebuild(tuple(new))

    def nested(self, expr: Expr) -> Expr:
        inner = _Outliner(find_groups(expr, self.max_ops, outer=self.level), self.max_ops, self.level)
        inner.memo = dict(self.memo)
        return inner.visit(expr)


def fuse_function(fn: Function, max_ops: int = MAX_FUSED_OPS) -> Function:
    """``fn`` with its operator calls grouped into Primitive function calls (``fn`` must be typed)."""
    groups = find_groups(fn.body, max_ops)
    body = _Outliner(groups, max_ops).visit(fn.body)
    return Function(fn.params, body, fn.ret_type, fn.attrs)


@dataclass(frozen=True)
class FuseOps(Pass):
    """Fuse the calls of every non-Primitive Relay function of the module (``main`` in practice) into
    groups of at most ``max_ops`` calls."""

    max_ops: int = MAX_FUSED_OPS
    name: ClassVar[str] = "fuse_ops"
    opt_level: ClassVar[int] = 0

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        mod = infer_type(mod)
        funcs = {}
        for gname, fn in mod.items():
            if isinstance(fn, Function) and not fn.attrs.get("Primitive"):
                funcs[gname] = fuse_function(fn, self.max_ops)
        return infer_type(mod.with_functions(funcs))
