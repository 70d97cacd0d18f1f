"""LowerToTIR: Primitive Relay functions -> TIR PrimFuncs in the same IRModule (docs/lowering.md, 3).

Every call of a Primitive function in the module's (non-Primitive) Relay functions becomes a call of a
scheduled PrimFunc: :func:`plait.lowering.function.lower_function` (its docstring gives the steps: TE
placeholders and computes, ``create_prim_func``, the target's default schedule, the attrs), reached through
the build's lowering cache, :func:`plait.lowering.cache.lower_cached`; the PrimFunc's ``global_symbol`` is
its name in the module.

Structurally identical Primitive functions (same ops, attrs and types; call ``meta`` ignored) are
lowered once. Names come from the function's ``name`` attribute (``fused_nn_conv2d_add``), made
C-safe, cut to :data:`MAX_NAME` characters and unique (``_1``, ``_2``... on a clash). An operator
call outside any Primitive function (FuseOps not run) is lowered as a group of its own;
``device_copy`` calls are kept. A group made only of views (:attr:`plait.ir.op.Op.view`: reshape,
flatten, squeeze, expand_dims of the group's one input) is not lowered: it stays in ``main`` as
plain operator calls, which executors alias (graph codegen: a ``view`` node, no copy).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

from plait.ir.attrs import Attrs
from plait.ir.op import Op
from plait.ir.transform import Pass, PassContext
from plait.lowering.cache import lower_cached, strip_meta
from plait.lowering.function import LowerError, lower_function, resolve_target, target_facts
from plait.relay.analysis import structural_equal, structural_hash
from plait.relay.expr import Call, Constant, Expr, Function, GlobalVar, Tuple, Var
from plait.relay.infer import infer_expr, infer_type
from plait.relay.module import IRModule
from plait.relay.passes.fuse_ops import NOT_FUSED, FuseOps
from plait.relay.visitor import ExprMutator, post_order
from plait.tir.stmt import PrimFunc

MAX_NAME = 64

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def c_name(name: str) -> str:
    """``name`` as a C identifier of at most :data:`MAX_NAME` characters."""
    s = _UNSAFE.sub("_", name) or "fn"
    if s[0].isdigit():
        s = "_" + s
    return s[:MAX_NAME]


def single_call_function(call: Call) -> Function:
    """``fn(p0, p1, ...) { op(p0, p1, ...) }`` for a typed operator call (its attrs and meta kept),
    typed and Primitive: how a call outside any fused group is lowered."""
    assert isinstance(call.op, Op)
    params = tuple(Var(f"p{k}", a.checked_type) for k, a in enumerate(call.args))
    fn = Function(params, Call(call.op, params, call.attrs, call.meta), call.checked_type,
                  Attrs({"Primitive": 1, "anchor": call.op.name, "name": "fused_" + c_name(call.op.name)}))
    infer_expr(fn)
    return fn


def legalized_group(calls: Sequence[Call], target: Any) -> Function | None:
    """The Primitive function default lowering on a piece of ``target`` makes of the calls ``calls`` (one
    fusion group or one call, in topological order, the last one its output) after the Relay passes its
    kind legalizes with (:meth:`plait.target.backend.Backend.legalize`), which see the calls' constant
    arguments (a fixed-point requantization needs its scale): what placement prices. None when the kind
    has no such passes (:attr:`Pass.reprices`), or when they leave the calls more than one group."""
    passes = [p for p in target.kind.backend.legalize(target) if p.reprices]
    if not passes:
        return None
    members = {c: i for i, c in enumerate(calls)}
    free: dict[Expr, Var] = {}
    memo: dict[Expr, Expr] = {}

    def arg(a: Expr) -> Expr:
        if a in memo or isinstance(a, Constant):
            return memo.get(a, a)
        if isinstance(a, Tuple) and any(f in members for f in a.fields):
            return Tuple(tuple(arg(f) for f in a.fields))
        if a not in free:
            free[a] = Var(f"p{len(free)}", a.checked_type)
        return free[a]

    for c in calls:
        memo[c] = Call(c.op, tuple(arg(a) for a in c.args), c.attrs, c.meta)
    mod = infer_type(IRModule({"main": Function(tuple(free.values()), memo[calls[-1]])}))
    ctx = PassContext(opt_level=2)
    for p in (*passes, FuseOps()):
        mod = ctx.run(p, mod)
    fused = [n.op for n in post_order(mod.main.body) if isinstance(n, Call) and isinstance(n.op, Function)]
    return fused[0] if len(fused) == 1 else None


def view_calls(fn: Function, args: tuple[Expr, ...]) -> Expr | None:
    """The body of the Primitive function ``fn`` applied to ``args`` as plain operator calls, when
    it is a chain of views (:attr:`Op.view`: reshape, flatten, squeeze, expand_dims) of its one
    parameter; None otherwise. Such a group is not lowered: executors alias its result."""
    chain: list[Call] = []
    node: Expr = fn.body
    while isinstance(node, Call) and isinstance(node.op, Op) and node.op.view and len(node.args) == 1:
        chain.append(node)
        node = node.args[0]
    if not chain or len(fn.params) != 1 or node is not fn.params[0] or len(args) != 1:
        return None
    out = args[0]
    for c in reversed(chain):
        out = Call(c.op, (out,), c.attrs, c.meta)
    return out


class _Lowerer(ExprMutator):
    def __init__(self, state: "_State"):
        super().__init__()
        self.state = state

    def visit(self, root: Expr) -> Expr:
        memo = self.memo

        def primitive(n: Expr) -> bool:
            return isinstance(n, Function) and bool(n.attrs.get("Primitive"))

        for node in post_order(root, enter=lambda n: n not in memo and not primitive(n)):
            if node not in memo:
                memo[node] = node if primitive(node) else self.rewrite(node)
        return memo[root]

    def rewrite(self, node: Expr) -> Expr:
        post = self._rebuild(node)
        return self.rewrite_call(node, post) if isinstance(node, Call) else post

    def rewrite_call(self, pre: Call, post: Expr) -> Expr:
        assert isinstance(post, Call)
        if isinstance(post.op, Function) and post.op.attrs.get("Primitive"):
            views = view_calls(post.op, post.args)
            if views is not None:
                return views
            return Call(GlobalVar(self.state.lower(pre.op)), post.args)  # type: ignore[arg-type]
        if isinstance(post.op, Op) and post.op.view:
            return post  # a view: executors alias it
        if isinstance(post.op, Op) and post.op.name not in NOT_FUSED:
            return Call(GlobalVar(self.state.lower(single_call_function(pre))), post.args)
        return post


class UniqueNames:
    """Function names unique in a module: C-safe (:func:`c_name`), at most :data:`MAX_NAME`
    characters, ``_1``, ``_2``... appended on a clash with a name already used."""

    def __init__(self, used: Any = ()):
        self.used: set[str] = set(used)
        self._last: dict[str, int] = {}  # base -> the last suffix tried (every one before it is taken)

    def unique(self, base: str) -> str:
        base = c_name(base)
        name, k = base, self._last.get(base, 0)
        if k:
            name = base[:MAX_NAME - len(f"_{k}")] + f"_{k}"
        while name in self.used:
            k += 1
            suffix = f"_{k}"
            name = base[:MAX_NAME - len(suffix)] + suffix
        self._last[base] = k
        self.used.add(name)
        return name


class _State(UniqueNames):
    def __init__(self, mod: IRModule, target: Any, piece: Any, schedule: bool):
        super().__init__(mod)
        self.target, self.piece, self.schedule = target, piece, schedule
        self.funcs: dict[str, PrimFunc] = {}
        self.seen: dict[int, list[tuple[Function, str]]] = {}

    def lower(self, fn: Function) -> str:
        key_fn = strip_meta(fn)
        h = structural_hash(key_fn)
        for other, name in self.seen.get(h, []):
            if structural_equal(other, key_fn):
                return name
        name = self.unique(c_name(str(fn.attrs.get("name") or "fused")))
        self.funcs[name] = lower_cached(fn, name, self.target, self.piece, self.schedule)
        self.seen.setdefault(h, []).append((key_fn, name))
        return name


@dataclass(frozen=True)
class LowerToTIR(Pass):
    """Lower every Primitive function call of the module's Relay functions to a PrimFunc call.

    ``target`` (required): a Target, a target string or a Piece (errors then name the piece); ``schedule``:
    apply the target's default schedule (if :mod:`plait.schedule` provides one); ``reserved``: names
    taken elsewhere (the driver lowers one piece's functions at a time).
    """

    target: Any = None
    schedule: bool = True
    reserved: tuple[str, ...] = ()  # names the new PrimFuncs must not take (functions of a wider module)
    name: ClassVar[str] = "lower_to_tir"

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        mod = infer_type(mod)
        target, piece = resolve_target(self.target, "LowerToTIR")
        state = _State(mod, target, piece, self.schedule)
        state.used.update(self.reserved)
        new_funcs: dict[str, Function] = {}
        for gname, fn in mod.items():
            if isinstance(fn, Function) and not fn.attrs.get("Primitive"):
                out = _Lowerer(state).visit(fn)
                assert isinstance(out, Function)
                new_funcs[gname] = out
        for gname, fn in mod.items():
            if isinstance(fn, Function) and fn.attrs.get("Primitive"):
                new_funcs.setdefault(gname, fn)  # a global Primitive function: kept (hooks may want it)
        return infer_type(mod.with_functions({**new_funcs, **state.funcs}))


__all__ = ["LowerError", "LowerToTIR", "MAX_NAME", "c_name", "lower_function", "resolve_target", "single_call_function",
           "target_facts",
           "strip_meta", "UniqueNames"]
