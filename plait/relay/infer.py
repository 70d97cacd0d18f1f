"""Type inference: a type for every node, from parameter annotations and operator type relations.

Iterative (post order), so arbitrarily long chains are fine. Types are cached on the nodes
(``expr.checked_type``, a pure function of the node's structure) and inference is incremental: a
node that has a type is not visited again (nor its subtree), so a pass that rebuilds part of a
module pays only for the nodes it made. :data:`INFER_STATS` counts the work (``runs``: calls of
:func:`infer_type` that typed at least one node; ``nodes``: nodes typed). Errors are
:class:`TypeInferenceError` naming the call, the operator and the expected vs actual types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from plait.errors import PlaitError, TypeInferenceError
from plait.ir.op import Op, RelError
from plait.ir.transform import Pass, PassContext
from plait.ir.types import ANY_DIM, FuncType, TensorType, TupleType, Type
from plait.relay.expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Loop, Tuple, TupleGetItem, Var
from plait.relay.module import IRModule
from plait.relay.visitor import post_order


def describe_call(call: Call) -> str:
    """A short, user-facing name for a call: its source node name if known, and its operator."""
    name = call.meta.get("name")
    where = f"call '{name}'" if name else "call"
    return f"{where} (operator '{call.op_name}')"


def _types_str(types: tuple[Type, ...]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


def _match(expected: Type, actual: Type, binding: dict[str, object]) -> bool:
    """Does ``actual`` fit ``expected``? Symbolic dims of ``expected`` bind consistently."""
    if isinstance(expected, TensorType) and isinstance(actual, TensorType):
        if expected.dtype != actual.dtype or expected.ndim != actual.ndim:
            return False
        for e, a in zip(expected.shape, actual.shape):
            if e == ANY_DIM or a == ANY_DIM:
                continue
            if isinstance(e, str):
                if binding.setdefault(e, a) != a:
                    return False
            elif e != a:
                return False
        return True
    if isinstance(expected, TupleType) and isinstance(actual, TupleType):
        return len(expected.fields) == len(actual.fields) and all(
            _match(e, a, binding) for e, a in zip(expected.fields, actual.fields)
        )
    if isinstance(expected, FuncType) and isinstance(actual, FuncType):
        return expected == actual
    return False


def _subst(t: Type, binding: dict[str, object]) -> Type:
    if isinstance(t, TensorType):
        return TensorType(tuple(binding.get(d, d) if isinstance(d, str) else d for d in t.shape), t.dtype)
    if isinstance(t, TupleType):
        return TupleType(tuple(_subst(f, binding) for f in t.fields))
    return t


def _scalar(t: Type, dtype: str) -> bool:
    return isinstance(t, TensorType) and t.dtype == dtype and t.is_static and t.size == 1


def loop_type(lp: Loop, body_t: Type, where: str) -> Type:
    """The type of a :class:`~plait.relay.expr.Loop`: ``(*state, *scan outputs)``; see its docstring."""
    n = len(lp.init)
    if lp.trip_count is not None and not _scalar(lp.trip_count.checked_type, "int64"):
        raise TypeInferenceError(f"in {where}: a loop's trip count must be a single int64, got "
                                 f"{lp.trip_count.checked_type}")
    if lp.cond is not None and not _scalar(lp.cond.checked_type, "bool"):
        raise TypeInferenceError(f"in {where}: a loop's condition must be a single bool, got {lp.cond.checked_type}")
    params = [p.checked_type for p in lp.body.params]
    if not (_scalar(params[0], "int64") and _scalar(params[1], "bool")):
        raise TypeInferenceError(f"in {where}: a loop body's first parameters are (iter: int64, cond: bool), got "
                                 f"({params[0]}, {params[1]})")
    assert isinstance(body_t, FuncType)
    ret = body_t.ret_type
    if not isinstance(ret, TupleType) or len(ret.fields) != 1 + n + lp.num_scan:
        raise TypeInferenceError(f"in {where}: a loop body with {n} state values and {lp.num_scan} scan outputs "
                                 f"returns (cond, *state, *scan): {1 + n + lp.num_scan} values, got {ret}")
    if not _scalar(ret.fields[0], "bool"):
        raise TypeInferenceError(f"in {where}: a loop body's first result is its condition (a single bool), "
                                 f"got {ret.fields[0]}")
    for k, (i, p, o) in enumerate(zip(lp.init, params[2:], ret.fields[1:1 + n])):
        if not (_match(p, i.checked_type, {}) and _match(p, o, {})):
            raise TypeInferenceError(f"in {where}: loop state {k} has the type {i.checked_type} initially, {p} as "
                                     f"a body parameter and {o} as a body result; they must agree")
    static = isinstance(lp.trip_count, Constant) and lp.cond is None
    length: object = max(0, int(lp.trip_count.data.reshape(-1)[0])) if static else ANY_DIM  # type: ignore[union-attr]
    scans = []
    for t in ret.fields[1 + n:]:
        if not isinstance(t, TensorType):
            raise TypeInferenceError(f"in {where}: a loop's scan output must be a tensor, got {t}")
        scans.append(TensorType((length, *t.shape), t.dtype))  # type: ignore[arg-type]
    return TupleType((*params[2:], *scans))


@dataclass
class InferStats:
    """Type inference work in this process: ``calls`` of :func:`infer_type`, ``runs`` (those that
    typed at least one node: the others found the module typed), ``nodes`` typed in all."""

    calls: int = 0
    runs: int = 0
    nodes: int = 0


INFER_STATS = InferStats()


class _Inferer:
    def __init__(self, mod: IRModule | None):
        self.mod = mod
        self.global_types: dict[str, FuncType] = {}
        self.in_progress: set[str] = set()
        self.typed = 0

    # -- globals, in dependency order ---------------------------------------------------------
    def global_type(self, name: str) -> FuncType:
        if name in self.global_types:
            return self.global_types[name]
        if self.mod is None or name not in self.mod:
            raise TypeInferenceError(f"reference to unknown global function '@{name}'")
        fn = self.mod[name]
        if not isinstance(fn, Function):
            # a lowered function (e.g. a TIR PrimFunc) declares its Relay-level type
            ft = getattr(fn, "relay_type", None)
            if not isinstance(ft, FuncType):
                raise TypeInferenceError(f"global '@{name}' is a {type(fn).__name__} without a Relay type")
            self.global_types[name] = ft
            return ft
        if name in self.in_progress:
            if fn.ret_type is None:
                raise TypeInferenceError(
                    f"global function '@{name}' is recursive: annotate its return type")
            return FuncType(tuple(p.checked_type for p in fn.params), fn.ret_type)
        self.in_progress.add(name)
        try:
            t = self.infer_expr(fn, f"@{name}")
        finally:
            self.in_progress.discard(name)
        assert isinstance(t, FuncType)
        self.global_types[name] = t
        return t

    # -- expressions ---------------------------------------------------------------------------
    def infer_expr(self, root: Expr, where: str = "expression") -> Type:
        let_values: dict[Var, Expr] = {}
        nodes = [n for n in post_order(root, enter=lambda n: not n.has_type) if not n.has_type]
        for node in nodes:
            if isinstance(node, Let):
                let_values[node.var] = node.value
        for node in nodes:
            t = self.node_type(node, let_values, where)
            if t is not None and not isinstance(node, GlobalVar):
                node._set_type(t)
                self.typed += 1
        if isinstance(root, GlobalVar):
            return self.global_type(root.name)
        return root.checked_type

    def type_of(self, e: Expr) -> Type:
        if isinstance(e, GlobalVar):
            return self.global_type(e.name)
        return e.checked_type

    def node_type(self, e: Expr, let_values: dict[Var, Expr], where: str) -> Type | None:
        if isinstance(e, Var):
            if e.type_annotation is not None:
                return e.type_annotation
            if e in let_values:
                return self.type_of(let_values[e])
            raise TypeInferenceError(f"in {where}: variable %{e.name_hint} has no type annotation")
        if isinstance(e, Constant):
            return e.checked_type
        if isinstance(e, GlobalVar):
            return None
        if isinstance(e, Tuple):
            return TupleType(tuple(self.type_of(f) for f in e.fields))
        if isinstance(e, TupleGetItem):
            tt = self.type_of(e.tuple_value)
            if not isinstance(tt, TupleType):
                raise TypeInferenceError(f"in {where}: tuple index .{e.index} applied to non-tuple of type {tt}")
            if not 0 <= e.index < len(tt.fields):
                raise TypeInferenceError(
                    f"in {where}: tuple index .{e.index} out of range for a tuple of {len(tt.fields)} fields")
            return tt.fields[e.index]
        if isinstance(e, Call):
            return self.call_type(e, where)
        if isinstance(e, Let):
            return self.type_of(e.body)
        if isinstance(e, If):
            ct = self.type_of(e.cond)
            if not (isinstance(ct, TensorType) and ct.dtype == "bool" and ct.is_static and ct.size == 1):
                raise TypeInferenceError(f"in {where}: if condition must be a single bool, got {ct}")
            tt, ft = self.type_of(e.true_branch), self.type_of(e.false_branch)
            if not _match(tt, ft, {}):
                raise TypeInferenceError(f"in {where}: if branches differ: expected {tt}, got {ft}")
            return tt
        if isinstance(e, Loop):
            return loop_type(e, self.type_of(e.body), where)
        if isinstance(e, Function):
            body_t = self.type_of(e.body)
            if e.ret_type is not None and not _match(e.ret_type, body_t, {}):
                raise TypeInferenceError(
                    f"in {where}: function body has type {body_t}, expected the annotated {e.ret_type}")
            return FuncType(tuple(p.checked_type for p in e.params), e.ret_type or body_t)
        raise TypeInferenceError(f"in {where}: unknown node {e!r}")

    def call_type(self, call: Call, where: str) -> Type:
        arg_types = tuple(self.type_of(a) for a in call.args)
        if isinstance(call.op, Op):
            op = call.op
            want = op.check_arity(len(arg_types))
            if want is not None:
                raise TypeInferenceError(
                    f"in {where}: {describe_call(call)}: expected {want} arguments, got {len(arg_types)}")
            try:
                return op.rel(arg_types, call.attrs)
            except RelError as exc:
                raise TypeInferenceError(
                    f"type mismatch in {where}: {describe_call(call)} with argument types "
                    f"{_types_str(arg_types)}: {exc}") from None
        ft = self.type_of(call.op)
        if not isinstance(ft, FuncType):
            raise TypeInferenceError(f"in {where}: {describe_call(call)}: callee has non-function type {ft}")
        if len(ft.arg_types) != len(arg_types):
            raise TypeInferenceError(
                f"in {where}: {describe_call(call)}: expected {len(ft.arg_types)} arguments, got {len(arg_types)}")
        binding: dict[str, object] = {}
        for i, (exp, act) in enumerate(zip(ft.arg_types, arg_types)):
            if not _match(exp, act, binding):
                raise TypeInferenceError(
                    f"type mismatch in {where}: {describe_call(call)}: argument {i}: expected {exp}, got {act}")
        return _subst(ft.ret_type, binding)


def infer_type(mod: IRModule) -> IRModule:
    """Infer (and cache on the nodes) the types of every function of ``mod``. Returns ``mod``."""
    inf = _Inferer(mod)
    for name, fn in mod.items():
        if isinstance(fn, Function):
            inf.global_type(name)
    INFER_STATS.calls += 1
    INFER_STATS.runs += inf.typed > 0
    INFER_STATS.nodes += inf.typed
    return mod


def infer_expr(expr: Expr, mod: IRModule | None = None) -> Type:
    """Infer the type of a standalone expression (global references resolve in ``mod``)."""
    inf = _Inferer(mod)
    t = inf.infer_expr(expr)
    INFER_STATS.nodes += inf.typed
    return t


@dataclass(frozen=True)
class InferType(Pass):
    name: ClassVar[str] = "infer_type"

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return infer_type(mod)


__all__ = ["INFER_STATS", "InferStats", "InferType", "describe_call", "infer_expr", "infer_type", "PlaitError"]
