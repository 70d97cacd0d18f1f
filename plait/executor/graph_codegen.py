"""Graph executor codegen: a lowered ``main`` -> a JSON graph, its params and a storage plan.

Input: an IRModule whose ``main`` calls only functions of the module that are lowered (TIR
``PrimFunc``s, called through a ``GlobalVar``) or region functions (Relay functions with attr
``region``, made by partitioning, whose bodies call PrimFuncs: their calls are serialized where
``main`` calls the region, each node recording its ``region``), plus ``Tuple`` / ``TupleGetItem`` /
``Constant`` / ``Var`` / ``Let`` plumbing. Each PrimFunc is destination-passing: its runtime function takes the
input buffers, then the output buffers (tuple results flattened), all as pointers.

The graph (``GRAPH_FORMAT`` version 2) is a JSON object:

    nodes    [{"op": "input", "name": "x", "outputs": [0]},
              {"op": "param", "name": "p0", "outputs": [1]},
              {"op": "call", "name": "/fc0/Gemm", "func": "fused_nn_dense_add", "inputs": [0, 1],
               "outputs": [2]},                        (calls in execution order)
              {"op": "call", ..., "piece": "c", "workspace": [7]},   (with a workspace arena)
              {"op": "copy", "name": "device_copy", "src": "a", "dst": "b", "inputs": [2],
               "outputs": [3]},                        (a device_copy between pieces)
              {"op": "view", "name": "/Reshape", "inputs": [3], "outputs": [4]}, ...]
                                                       (a reshape: the same bytes, another shape)
    entries  [{"shape": [1, 256], "dtype": "float32", "storage": 0}, ...]   (every tensor value)
    storage  [{"bytes": 1024, "kind": "input" | "param"},
              {"bytes": 1024, "kind": "activation" | "workspace", "pool": 0, "offset": 2048}, ...]
    pools    [{"name": "workspace_c", "piece": "c", "bytes", "align", "algorithm", "lower_bound",
               "sizes": {algorithm: bytes}, "optimal"}, ...]
    inputs, params   node ids;   outputs   entry ids;   output_names
    memory   {"input_bytes", "param_bytes", "activation_bytes" (the pools), "activation_bytes_naive"
              (one aligned buffer per value), "lower_bound_bytes", "peak_bytes" (everything the
              executor allocates)}

A call records the ``piece`` it runs on (its function's ``piece`` attr, set by the driver, else its
``target`` attr). A call whose PrimFunc has a workspace arena (``attrs["workspace_bytes"]``, see
:mod:`plait.memory.workspace`) gets one ``workspace`` entry per arena parameter, passed after its
outputs. A call of a view operator (``Op.view``: reshape, flatten, squeeze, expand_dims; left in
``main`` by lowering) is a ``view`` node: its output shares its input's storage, nothing runs.
Memory is planned by :func:`plait.memory.plan.plan_memory`: inputs and params have their own
buffers; activations and workspaces get offsets in one pool per memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plait.executor.errors import GraphCodegenError
from plait.executor.graph_check import GRAPH_FORMAT, GRAPH_VERSION, NODE_OPS, STORAGE_KINDS  # noqa: F401
from plait.executor.manifest import signature
from plait.memory.plan import entry_bytes, plan_memory  # noqa: F401 - re-exported
from plait.pipeline.stages import ProgramPlan
from plait.ir.op import Op
from plait.ir.types import TensorType, TupleType, Type
from plait.relay.expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from plait.relay.module import IRModule
from plait.relay.visitor import post_order
from plait.target.composite import piece_of



# A value during serialization: an entry id, or a tuple of values (nested like the Relay type).
Value = Any


def _flatten(v: Value) -> list[int]:
    if isinstance(v, tuple):
        return [e for f in v for e in _flatten(f)]
    return [v]


def _where(call: Call) -> str:
    name = call.meta.get("name")
    return f"call {call.op_name}" + (f" (node '{name}')" if name else "")


@dataclass
class _Builder:
    mod: IRModule
    nodes: list[dict[str, Any]] = field(default_factory=list)
    entries: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, np.ndarray] = field(default_factory=dict)
    functions: dict[str, dict[str, Any]] = field(default_factory=dict)  # symbol -> signature (manifest)
    _fn_of: dict[str, Any] = field(default_factory=dict)

    def entry(self, t: Type, what: str) -> int:
        if not isinstance(t, TensorType):
            raise GraphCodegenError(f"graph executor: {what} has type {t}; expected a tensor")
        if not t.is_static:
            raise GraphCodegenError(f"graph executor: {what} has a symbolic shape {t}; "
                                    "the graph executor needs static shapes (build with executor='vm', "
                                    "plait --executor vm)")
        self.entries.append({"shape": list(t.shape), "dtype": t.dtype})
        return len(self.entries) - 1

    def entries_of_type(self, t: Type, what: str) -> Value:
        if isinstance(t, TupleType):
            return tuple(self.entries_of_type(f, f"{what}.{i}") for i, f in enumerate(t.fields))
        return self.entry(t, what)

    def add_node(self, node: dict[str, Any], outputs: Value) -> None:
        node["outputs"] = _flatten(outputs)
        self.nodes.append(node)

    def describe(self, symbol: str, fn: Any, node: dict[str, Any]) -> None:
        """Record the signature of the function ``symbol`` (once; two functions may not share a symbol)."""
        if symbol not in self.functions:
            self.functions[symbol] = signature(fn, symbol, node)
            self._fn_of[symbol] = fn
        elif self._fn_of[symbol] is not fn and signature(fn, symbol, node) != self.functions[symbol]:
            raise GraphCodegenError(f"graph executor: two different functions have the symbol '{symbol}'")

    def serialize(self, body: Expr, values: dict[int, Value], region: str | None) -> None:
        """Add the nodes computing ``body`` (main's, or a region function's with its parameters bound in
        ``values``) in execution order; ``values[id(expr)]`` is each expression's value."""
        let_values: dict[Var, Expr] = {}
        for node in post_order(body, enter=self.enters):
            if isinstance(node, Let):
                let_values[node.var] = node.value
        for e in post_order(body, enter=self.enters):
            if id(e) in values:
                continue
            if isinstance(e, Var):
                if e not in let_values:
                    raise GraphCodegenError(f"graph executor: free variable %{e.name_hint} in "
                                            + (f"region function '{region}'" if region else "main"))
                values[id(e)] = values[id(let_values[e])]
            elif isinstance(e, Constant):
                name = f"p{len(self.params)}"
                v = self.entry(e.checked_type, f"constant {name}")
                self.params[name] = e.data
                self.add_node({"op": "param", "name": name}, v)
                values[id(e)] = v
            elif isinstance(e, Tuple):
                values[id(e)] = tuple(values[id(f)] for f in e.fields)
            elif isinstance(e, TupleGetItem):
                values[id(e)] = values[id(e.tuple_value)][e.index]
            elif isinstance(e, Let):
                values[id(e)] = values[id(e.body)]
            elif isinstance(e, Call):
                values[id(e)] = self.call(e, values, region)
            elif isinstance(e, GlobalVar):
                continue  # resolved by the call that uses it
            else:
                values[id(e)] = self.other(e, values, region)

    def enters(self, e: Expr) -> bool:
        """Does :meth:`serialize` walk into ``e``'s children? (Not into function literals.)"""
        return not isinstance(e, Function)

    def other(self, e: Expr, values: dict[int, Value], region: str | None) -> Value:
        """The value of a node the graph has no node for (``If``, ``Loop``): an error here; the VM compiles them."""
        from plait.relay.expr import If, Loop

        hint = " (control flow: build with executor='vm', plait --executor vm)" if isinstance(e, (If, Loop)) else ""
        raise GraphCodegenError(f"graph executor: unsupported {type(e).__name__} in main{hint}")

    def call(self, e: Call, values: dict[int, Value], region: str | None) -> Value:
        """The nodes of one call: a copy, a call of a region function (its body, serialized in place)
        or a call of a lowered function."""
        inputs = [i for a in e.args for i in _flatten(values[id(a)])]
        name = e.meta.get("name")
        if isinstance(e.op, Op) and e.op.view and len(inputs) == 1:  # the same bytes: shares its storage
            out = self.entry(e.checked_type, f"the result of {_where(e)}")
            node = {"op": "view", "name": name if isinstance(name, str) else e.op.name, "inputs": inputs}
            if region is not None:
                node["region"] = region
            self.add_node(node, out)
            return out
        if isinstance(e.op, Op) and e.op.name == "device_copy":
            outs = self.entries_of_type(e.checked_type, f"the result of {_where(e)}")
            self.add_node({"op": "copy", "name": name if isinstance(name, str) else "device_copy",
                           "src": str(e.attrs["src"]), "dst": str(e.attrs["dst"]), "inputs": inputs}, outs)
            return outs
        region_fn = self.region(e)
        if region_fn is not None:
            if region is not None:
                raise GraphCodegenError(f"graph executor: region function '{region}' calls another region "
                                        f"'{e.op.name}'")
            inner = {id(p): values[id(a)] for p, a in zip(region_fn.params, e.args)}
            self.serialize(region_fn.body, inner, e.op.name)
            return inner[id(region_fn.body)]
        func, fn = self.callee(e)
        outs = self.entries_of_type(e.checked_type, f"the result of {_where(e)}")
        node: dict[str, Any] = {"op": "call", "name": name if isinstance(name, str) else func, "func": func,
                                "inputs": inputs}
        ws = _workspace_params(fn)
        if ws:
            node["workspace"] = [self.entry(TensorType(tuple(p.static_shape), p.dtype), f"the workspace of {func}")
                                 for p in ws]
        piece = piece_of(fn)
        if piece is not None:
            node["piece"] = piece
        if region is not None:
            node["region"] = region
        self.add_node(node, outs)
        self.describe(func, fn, node)
        return outs

    def region(self, call: Call) -> Function | None:
        """The region function (``attrs["region"]``, see plait.placement.partition) ``call`` calls, if it
        calls one: its body calls lowered functions and is serialized in place of the call."""
        op = call.op
        if isinstance(op, GlobalVar) and op.name in self.mod:
            fn = self.mod[op.name]
            if isinstance(fn, Function) and fn.attrs.get("region"):
                return fn
        return None

    def callee(self, call: Call) -> tuple[str, Any]:
        """(runtime symbol, the lowered function) of a call of a lowered function."""
        op = call.op
        if isinstance(op, GlobalVar):
            if op.name not in self.mod:
                raise GraphCodegenError(f"graph executor: {_where(call)}: no function '@{op.name}' in the module")
            fn = self.mod[op.name]
            if not isinstance(fn, Function):
                symbol = getattr(fn, "attrs", {}).get("global_symbol") if hasattr(fn, "attrs") else None
                return (symbol if isinstance(symbol, str) else op.name), fn
            what = "a Relay function"
        elif isinstance(op, Function):
            what = "a Primitive function literal" if op.attrs.get("Primitive") else "a function literal"
        else:
            what = f"the operator '{call.op_name}'"
        raise GraphCodegenError(f"graph executor: main calls {what} at {_where(call)}: lower the module "
                                "first (plait.build runs FuseOps and LowerToTIR)")


def graph_codegen(mod: IRModule) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Serialize ``mod['main']`` (lowered, type-inferred) to a graph dict and its params."""
    graph, params, _ = graph_codegen_full(mod)
    return graph, params


def graph_codegen_full(mod: IRModule) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, Any]]:
    """:func:`graph_codegen`, plus the signature of every function the graph calls (the
    ``functions`` of the artifact manifest, :mod:`plait.executor.manifest`)."""
    graph, params, functions = graph_form(mod)
    plan_memory(graph)
    return graph, params, functions


def graph_plan(mod: IRModule) -> ProgramPlan:
    """The graph form of ``mod`` planned by the one memory planner (a pool per memory): the default
    :meth:`Executor.plan <plait.executor.base.Executor.plan>`, what the graph executor runs."""
    return ProgramPlan(*graph_codegen_full(mod))


def graph_form(mod: IRModule) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, Any]]:
    """The graph of ``mod['main']`` before its memory is planned (no ``storage``, ``pools``, ``memory``),
    its params and the signature of every function it calls: what every executor's plan starts from."""
    from plait.relay.infer import infer_type

    if "main" not in mod:
        raise GraphCodegenError("graph executor: the module has no 'main' function")
    infer_type(mod)
    main = mod.main
    b = _Builder(mod)
    values: dict[int, Value] = {}  # id(expr) -> value
    seen_names: set[str] = set()
    for p in main.params:
        if p.name_hint in seen_names:
            raise GraphCodegenError(f"graph executor: main has two parameters named '{p.name_hint}'")
        seen_names.add(p.name_hint)
        v = b.entry(p.checked_type, f"input '{p.name_hint}'")
        b.add_node({"op": "input", "name": p.name_hint}, v)
        values[id(p)] = v

    b.serialize(main.body, values, region=None)

    outputs = _flatten(values[id(main.body)])
    names = mod.attrs.get("output_names")
    output_names = list(names) if names and len(names) == len(outputs) else [f"output_{i}" for i in range(len(outputs))]
    graph: dict[str, Any] = {
        "format": GRAPH_FORMAT, "version": GRAPH_VERSION, "nodes": b.nodes, "entries": b.entries,
        "inputs": [i for i, n in enumerate(b.nodes) if n["op"] == "input"],
        "params": [i for i, n in enumerate(b.nodes) if n["op"] == "param"],
        "outputs": outputs, "output_names": output_names,
    }
    return graph, dict(b.params), dict(b.functions)


def _workspace_params(fn: Any) -> list[Any]:
    """The workspace arena params of a lowered function (plait.memory.workspace), if it has any."""
    attrs = getattr(fn, "attrs", None)
    if not attrs or not attrs.get("workspace_bytes"):
        return []
    from plait.memory.workspace import workspace_params

    params = workspace_params(fn)
    if any(p.static_shape is None for p in params):
        raise GraphCodegenError(f"graph executor: the workspace of '{fn.name}' has a symbolic size")
    return params


def dumps(graph: dict[str, Any]) -> str:
    """The graph as JSON text: deterministic (one node per line, for diffs)."""
    lines = ["{"]
    items = list(graph.items())
    for k, (key, val) in enumerate(items):
        sep = "," if k + 1 < len(items) else ""
        if key in ("nodes", "entries", "storage", "pools") and val:
            body = ",\n".join("    " + json.dumps(x, sort_keys=True) for x in val)
            lines.append(f"  {json.dumps(key)}: [\n{body}\n  ]{sep}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(val, sort_keys=True)}{sep}")
    lines.append("}")
    return "\n".join(lines) + "\n"
