"""Graph executor codegen: a lowered ``main`` -> a JSON graph, its params and a storage plan.

Input: an IRModule whose ``main`` calls only functions of the module that are lowered (TIR
``PrimFunc``s, called through a ``GlobalVar``), plus ``Tuple`` / ``TupleGetItem`` / ``Constant`` /
``Var`` / ``Let`` plumbing. Each PrimFunc is destination-passing: its runtime function takes the
input buffers, then the output buffers (tuple results flattened), all as pointers.

The graph (``GRAPH_FORMAT`` version 1) is a JSON object:

    nodes    [{"op": "input", "name": "x", "outputs": [0]},
              {"op": "param", "name": "p0", "outputs": [1]},
              {"op": "call", "name": "/fc0/Gemm", "func": "fused_nn_dense_add", "inputs": [0, 1],
               "outputs": [2]}, ...]                     (calls in execution order)
    entries  [{"shape": [1, 256], "dtype": "float32", "storage": 0}, ...]   (every tensor value)
    storage  [{"bytes": 1024, "kind": "input" | "param" | "activation"}, ...]
    inputs, params   node ids;   outputs   entry ids;   output_names
    memory   {"input_bytes", "param_bytes", "activation_bytes" (planned), "activation_bytes_naive"
              (one buffer per value), "peak_bytes" (everything the executor allocates)}

Storage: inputs and params get their own buffers. Call outputs share buffers by liveness: walking
the calls in order, an output takes a free buffer of exactly its size (or a new one); after the
call, the buffers of values whose last use was that call (and that are not graph outputs) are free
again. Outputs are assigned before inputs are released, so a call never writes into a buffer it
reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plait.errors import PlaitError
from plait.ir.types import DTYPES, TensorType, TupleType, Type
from plait.relay.expr import Call, Constant, Expr, Function, GlobalVar, Let, Tuple, TupleGetItem, Var
from plait.relay.module import IRModule
from plait.relay.visitor import post_order

GRAPH_FORMAT = "plait.graph"
GRAPH_VERSION = 1


class GraphCodegenError(PlaitError):
    """``main`` cannot be turned into a graph (not lowered, unsupported construct, symbolic shape)."""


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

    def entry(self, t: Type, what: str) -> int:
        if not isinstance(t, TensorType):
            raise GraphCodegenError(f"graph executor: {what} has type {t}; expected a tensor")
        if not t.is_static:
            raise GraphCodegenError(f"graph executor: {what} has a symbolic shape {t}; "
                                    "the graph executor needs static shapes")
        self.entries.append({"shape": list(t.shape), "dtype": t.dtype})
        return len(self.entries) - 1

    def entries_of_type(self, t: Type, what: str) -> Value:
        if isinstance(t, TupleType):
            return tuple(self.entries_of_type(f, f"{what}.{i}") for i, f in enumerate(t.fields))
        return self.entry(t, what)

    def add_node(self, node: dict[str, Any], outputs: Value) -> None:
        node["outputs"] = _flatten(outputs)
        self.nodes.append(node)

    def callee(self, call: Call) -> str:
        op = call.op
        if isinstance(op, GlobalVar):
            if op.name not in self.mod:
                raise GraphCodegenError(f"graph executor: {_where(call)}: no function '@{op.name}' in the module")
            fn = self.mod[op.name]
            if not isinstance(fn, Function):
                symbol = getattr(fn, "attrs", {}).get("global_symbol") if hasattr(fn, "attrs") else None
                return symbol if isinstance(symbol, str) else op.name
            what = "a Relay function"
        elif isinstance(op, Function):
            what = "a Primitive function literal" if op.attrs.get("Primitive") else "a function literal"
        else:
            what = f"the operator '{call.op_name}'"
        raise GraphCodegenError(f"graph executor: main calls {what} at {_where(call)}: lower the module "
                                "first (plait.build runs FuseOps and LowerToTIR)")


def graph_codegen(mod: IRModule) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Serialize ``mod['main']`` (lowered, type-inferred) to a graph dict and its params."""
    from plait.relay.infer import infer_type

    if "main" not in mod:
        raise GraphCodegenError("graph executor: the module has no 'main' function")
    infer_type(mod)
    main = mod.main
    b = _Builder(mod)
    values: dict[int, Value] = {}  # id(expr) -> value
    let_values: dict[Var, Expr] = {}
    for node in post_order(main.body):
        if isinstance(node, Let):
            let_values[node.var] = node.value

    seen_names: set[str] = set()
    for p in main.params:
        if p.name_hint in seen_names:
            raise GraphCodegenError(f"graph executor: main has two parameters named '{p.name_hint}'")
        seen_names.add(p.name_hint)
        v = b.entry(p.checked_type, f"input '{p.name_hint}'")
        b.add_node({"op": "input", "name": p.name_hint}, v)
        values[id(p)] = v

    for e in post_order(main.body, enter=lambda e: not isinstance(e, Function)):
        if id(e) in values:
            continue
        if isinstance(e, Var):
            if e not in let_values:
                raise GraphCodegenError(f"graph executor: free variable %{e.name_hint} in main")
            values[id(e)] = values[id(let_values[e])]
        elif isinstance(e, Constant):
            name = f"p{len(b.params)}"
            v = b.entry(e.checked_type, f"constant {name}")
            b.params[name] = e.data
            b.add_node({"op": "param", "name": name}, v)
            values[id(e)] = v
        elif isinstance(e, Tuple):
            values[id(e)] = tuple(values[id(f)] for f in e.fields)
        elif isinstance(e, TupleGetItem):
            values[id(e)] = values[id(e.tuple_value)][e.index]
        elif isinstance(e, Let):
            values[id(e)] = values[id(e.body)]
        elif isinstance(e, Call):
            func = b.callee(e)
            inputs = [i for a in e.args for i in _flatten(values[id(a)])]
            outs = b.entries_of_type(e.checked_type, f"the result of {_where(e)}")
            name = e.meta.get("name")
            b.add_node({"op": "call", "name": name if isinstance(name, str) else func, "func": func,
                        "inputs": inputs}, outs)
            values[id(e)] = outs
        elif isinstance(e, GlobalVar):
            continue  # resolved by the call that uses it
        else:
            raise GraphCodegenError(f"graph executor: unsupported {type(e).__name__} in main")

    outputs = _flatten(values[id(main.body)])
    names = mod.attrs.get("output_names")
    output_names = list(names) if names and len(names) == len(outputs) else [f"output_{i}" for i in range(len(outputs))]
    graph: dict[str, Any] = {
        "format": GRAPH_FORMAT, "version": GRAPH_VERSION, "nodes": b.nodes, "entries": b.entries,
        "inputs": [i for i, n in enumerate(b.nodes) if n["op"] == "input"],
        "params": [i for i, n in enumerate(b.nodes) if n["op"] == "param"],
        "outputs": outputs, "output_names": output_names,
    }
    plan_storage(graph)
    return graph, dict(b.params)


def entry_bytes(entry: dict[str, Any]) -> int:
    return int(np.prod(entry["shape"], dtype=np.int64)) * DTYPES[entry["dtype"]].itemsize


def plan_storage(graph: dict[str, Any]) -> None:
    """Assign ``storage`` to every entry (liveness-based reuse of same-size buffers); set
    ``graph["storage"]`` and ``graph["memory"]``. Deterministic."""
    nodes, entries = graph["nodes"], graph["entries"]
    storage: list[dict[str, Any]] = []
    is_output = set(graph["outputs"])

    def new(nbytes: int, kind: str) -> int:
        storage.append({"bytes": nbytes, "kind": kind})
        return len(storage) - 1

    last_use: dict[int, int] = {}
    for nid, n in enumerate(nodes):
        for e in n.get("inputs", ()):
            last_use[e] = nid
    free: dict[int, list[int]] = {}
    for nid, n in enumerate(nodes):
        if n["op"] != "call":
            for e in n["outputs"]:
                entries[e]["storage"] = new(entry_bytes(entries[e]), "input" if n["op"] == "input" else "param")
            continue
        for e in n["outputs"]:
            size = entry_bytes(entries[e])
            pool = free.get(size)
            entries[e]["storage"] = pool.pop() if pool else new(size, "activation")
        released = [e for e in dict.fromkeys(n["inputs"]) if last_use[e] == nid]
        released += [e for e in n["outputs"] if e not in last_use]
        for e in released:
            sid = entries[e]["storage"]
            if e not in is_output and storage[sid]["kind"] == "activation":
                free.setdefault(storage[sid]["bytes"], []).append(sid)

    def total(kind: str) -> int:
        return sum(s["bytes"] for s in storage if s["kind"] == kind)

    naive = sum(entry_bytes(entries[e]) for n in nodes if n["op"] == "call" for e in n["outputs"])
    graph["storage"] = storage
    graph["memory"] = {
        "input_bytes": total("input"), "param_bytes": total("param"), "activation_bytes": total("activation"),
        "activation_bytes_naive": naive, "peak_bytes": sum(s["bytes"] for s in storage),
    }


def check_graph(graph: Any, where: str = "graph") -> dict[str, Any]:
    """Check the shape of a graph dict (as read from JSON) enough to run it safely."""
    if not isinstance(graph, dict) or graph.get("format") != GRAPH_FORMAT:
        raise GraphCodegenError(f"{where}: not a plait graph (expected \"format\": \"{GRAPH_FORMAT}\")")
    if graph.get("version") != GRAPH_VERSION:
        raise GraphCodegenError(f"{where}: graph version {graph.get('version')!r} is not supported "
                                f"(this plait reads version {GRAPH_VERSION})")
    for key in ("nodes", "entries", "storage", "inputs", "params", "outputs", "output_names"):
        if not isinstance(graph.get(key), list):
            raise GraphCodegenError(f"{where}: missing or malformed '{key}'")
    n_entries, n_storage = len(graph["entries"]), len(graph["storage"])
    for i, e in enumerate(graph["entries"]):
        if e.get("dtype") not in DTYPES or not isinstance(e.get("shape"), list) or \
                not isinstance(e.get("storage"), int) or not 0 <= e["storage"] < n_storage:
            raise GraphCodegenError(f"{where}: malformed entry {i}")
        if entry_bytes(e) > graph["storage"][e["storage"]]["bytes"]:
            raise GraphCodegenError(f"{where}: entry {i} does not fit its storage {e['storage']}")
    for i, n in enumerate(graph["nodes"]):
        ids = list(n.get("outputs", [])) + list(n.get("inputs", []))
        if n.get("op") not in ("input", "param", "call") or any(not 0 <= x < n_entries for x in ids):
            raise GraphCodegenError(f"{where}: malformed node {i}")
    if any(not 0 <= x < n_entries for x in graph["outputs"]):
        raise GraphCodegenError(f"{where}: malformed outputs")
    return graph


def dumps(graph: dict[str, Any]) -> str:
    """The graph as JSON text: deterministic (one node per line, for diffs)."""
    lines = ["{"]
    items = list(graph.items())
    for k, (key, val) in enumerate(items):
        sep = "," if k + 1 < len(items) else ""
        if key in ("nodes", "entries", "storage") and val:
            body = ",\n".join("    " + json.dumps(x, sort_keys=True) for x in val)
            lines.append(f"  {json.dumps(key)}: [\n{body}\n  ]{sep}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(val, sort_keys=True)}{sep}")
    lines.append("}")
    return "\n".join(lines) + "\n"
