"""Checks of a graph (as read from ``graph.json`` or made by codegen) before anything runs it.

:func:`check_graph` makes sure a graph is safe to run: every id is in range, every entry fits the
storage it lives in, a storage holds one value (and its views), every activation and workspace lies
inside its pool at an aligned offset, no two storages of a pool live at the same time overlap in
bytes (the live ranges are recomputed from the node order, not trusted), params and inputs are never
aliased (but by views), the nodes are in a valid execution order, and, given the function
signatures of the artifact's manifest (:mod:`plait.executor.manifest`), every call passes buffers
of exactly the dtype and shape the compiled function reads and writes. :func:`check_params`
compares params with the graph.

Every failure is an :class:`~plait.executor.errors.ExecutorError` naming the file (``where``) and the
entry, node, storage or function. Sizes are computed with Python integers (no overflow), and nothing
is allocated from a size before it is checked.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from plait.executor.errors import ExecutorError
from plait.ir.types import DTYPES
from plait.memory.plan import POOLED, live_ranges

GRAPH_FORMAT = "plait.graph"
GRAPH_VERSION = 2
NODE_OPS = ("input", "param", "call", "copy", "view")
STORAGE_KINDS = ("input", "param", "activation", "workspace")
ROLES = ("input", "output", "workspace")
"""The roles of a compiled function's arguments, in the order it takes them."""
MAX_NDIM = 32
"""The most dimensions a tensor may have (numpy's limit is 32 or 64 depending on the version)."""

_KIND_OF_OP = {"input": "input", "param": "param", "call": "activation", "copy": "activation"}  # a view: its input's


def is_int(x: Any) -> bool:
    """An integer in JSON terms (``True`` is not one)."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_dtype(x: Any) -> bool:
    """A dtype name plait knows."""
    return isinstance(x, str) and x in DTYPES


def shape_problem(shape: Any) -> str | None:
    """Why ``shape`` is not a list of non-negative integers (None when it is one)."""
    if not isinstance(shape, list):
        return "its shape is not a list"
    if len(shape) > MAX_NDIM:
        return f"its shape has {len(shape)} dimensions (at most {MAX_NDIM})"
    if not all(is_int(d) and d >= 0 for d in shape):
        return f"its shape {_short(shape)} is not a list of non-negative integers"
    return None


def nbytes(dtype: str, shape: list[int]) -> int:
    """Bytes of a dense tensor (Python integers: a huge shape gives a huge number, never a wrap)."""
    return math.prod(shape) * DTYPES[dtype].itemsize


def tensor_text(dtype: str, shape: list[int]) -> str:
    """``float32[1, 256] (1024 bytes)``."""
    return f"{dtype}{list(shape)} ({nbytes(dtype, shape)} bytes)"


def _short(x: Any, limit: int = 60) -> str:
    text = x if isinstance(x, str) else repr(x)
    return text if len(text) <= limit else text[:limit] + "..."


def _shown(x: Any) -> str:
    """A value from the file in a message: quoted when a string, shortened."""
    return f"'{_short(x)}'" if isinstance(x, str) else _short(x)


def _an(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def node_label(nid: int, node: Mapping[str, Any]) -> str:
    """``node 3 ('/fc0/Gemm')`` (long names shortened)."""
    return f"node {nid} ('{_short(node.get('name', ''))}')"


class _Checker:
    def __init__(self, graph: dict[str, Any], where: str):
        self.g = graph
        self.where = where

    def fail(self, msg: str) -> None:
        raise ExecutorError(f"{self.where}: {msg}")

    # -- the shape of the JSON -------------------------------------------------------------------
    def top(self) -> None:
        g = self.g
        if not isinstance(g, dict) or g.get("format") != GRAPH_FORMAT:
            self.fail(f"not a plait graph (expected \"format\": \"{GRAPH_FORMAT}\")")
        if g.get("version") != GRAPH_VERSION:
            self.fail(f"graph version {_shown(g.get('version'))} is not supported (this plait reads version "
                      f"{GRAPH_VERSION})")
        for key in ("nodes", "entries", "storage", "pools", "inputs", "params", "outputs", "output_names"):
            if not isinstance(g.get(key), list):
                self.fail(f"missing or malformed '{key}'")
        mem = g.get("memory")
        if not isinstance(mem, dict) or not all(isinstance(k, str) and is_int(v) and v >= 0 for k, v in mem.items()):
            self.fail("missing or malformed 'memory' (byte counts by kind)")
        if not isinstance(g.get("target", ""), str):
            self.fail("malformed 'target'")

    def pools(self) -> None:
        for k, p in enumerate(self.g["pools"]):
            if not isinstance(p, dict) or not all(isinstance(p.get(k), str) for k in ("name", "piece", "algorithm")) \
                    or not all(is_int(p.get(key)) and p[key] >= 0 for key in ("bytes", "lower_bound")) \
                    or not (is_int(p.get("align")) and p["align"] > 0) or not isinstance(p.get("optimal"), bool) \
                    or not isinstance(p.get("sizes"), dict) \
                    or not all(isinstance(a, str) and is_int(b) for a, b in p["sizes"].items()):
                self.fail(f"pool {k}: malformed (expected name, piece, bytes, align, algorithm, lower_bound, sizes, "
                          "optimal)")

    def storage(self) -> None:
        pools = self.g["pools"]
        for i, st in enumerate(self.g["storage"]):
            if not isinstance(st, dict) or not is_int(st.get("bytes")) or st["bytes"] < 0:
                self.fail(f"storage {i}: malformed (expected a non-negative byte count)")
            if st.get("kind") not in STORAGE_KINDS:
                self.fail(f"storage {i}: unknown kind {_shown(st.get('kind'))} (expected one of "
                          f"{', '.join(STORAGE_KINDS)})")
            if st["kind"] not in POOLED:
                if "pool" in st or "offset" in st:
                    self.fail(f"storage {i}: {_an(st['kind'])} has its own buffer (no pool, no offset)")
                continue
            k, off = st.get("pool"), st.get("offset")
            if not is_int(k) or not 0 <= k < len(pools):
                self.fail(f"storage {i}: {_short(k)} is not a pool id (the graph has {len(pools)} pools)")
            if not is_int(off) or off < 0:
                self.fail(f"storage {i}: malformed offset (expected a non-negative byte count)")
            pool = pools[k]
            if off % pool["align"]:
                self.fail(f"storage {i}: offset {off} is not a multiple of the alignment of pool {k} "
                          f"('{_short(pool['name'])}', {pool['align']} bytes)")
            if off + st["bytes"] > pool["bytes"]:
                self.fail(f"storage {i}: bytes {off} to {off + st['bytes']} are outside pool {k} "
                          f"('{_short(pool['name'])}', {pool['bytes']} bytes)")

    def entries(self) -> None:
        storage = self.g["storage"]
        for i, e in enumerate(self.g["entries"]):
            if not isinstance(e, dict):
                self.fail(f"entry {i}: malformed")
            if not is_dtype(e.get("dtype")):
                self.fail(f"entry {i}: unknown dtype {_shown(e.get('dtype'))}")
            problem = shape_problem(e.get("shape"))
            if problem:
                self.fail(f"entry {i}: {problem}")
            sid = e.get("storage")
            if not is_int(sid) or not 0 <= sid < len(storage):
                self.fail(f"entry {i}: {_short(sid)} is not a storage id (the graph has {len(storage)} storages)")
            need, have = nbytes(e["dtype"], e["shape"]), storage[sid]["bytes"]
            if need > have:
                self.fail(f"entry {i}, {tensor_text(e['dtype'], e['shape'])}, does not fit its storage {sid} "
                          f"({have} bytes)")

    def nodes(self) -> None:
        n_entries = len(self.g["entries"])
        for nid, n in enumerate(self.g["nodes"]):
            if not isinstance(n, dict) or n.get("op") not in NODE_OPS:
                self.fail(f"node {nid}: malformed (expected an object with \"op\" one of {', '.join(NODE_OPS)})")
            if not isinstance(n.get("name"), str):
                self.fail(f"node {nid}: malformed name")
            where = node_label(nid, n)
            if not isinstance(n.get("outputs"), list):
                self.fail(f"{where}: missing or malformed 'outputs'")
            for key in ("outputs", "inputs", "workspace"):
                ids = n.get(key, [])
                if not isinstance(ids, list):
                    self.fail(f"{where}: malformed '{key}'")
                bad = [x for x in ids if not is_int(x) or not 0 <= x < n_entries]
                if bad:
                    self.fail(f"{where}: {key}: {_short(bad[0])} is not an entry id (the graph has {n_entries} "
                              "entries)")
            op, ins, outs, ws = n["op"], n.get("inputs", []), n["outputs"], n.get("workspace", [])
            if op in ("input", "param") and (len(outs) != 1 or ins or ws):
                self.fail(f"{where}: {_an(op)} node has exactly one output and no inputs")
            if op == "call":
                if not isinstance(n.get("func"), str):
                    self.fail(f"{where} calls no function")
                if not outs:
                    self.fail(f"{where} has no outputs")
                if not isinstance(n.get("piece", ""), str):
                    self.fail(f"{where}: malformed piece")
            if op == "view":
                entries = self.g["entries"]
                if len(ins) != 1 or len(outs) != 1 or ws:
                    self.fail(f"{where}: a view node reinterprets one value (one input, one output)")
                a, b = entries[ins[0]], entries[outs[0]]
                if a["dtype"] != b["dtype"] or nbytes(a["dtype"], a["shape"]) != nbytes(b["dtype"], b["shape"]):
                    self.fail(f"{where}: a view node gives a value another shape of the same dtype and size; "
                              f"entry {ins[0]} is {tensor_text(a['dtype'], a['shape'])}, entry {outs[0]} is "
                              f"{tensor_text(b['dtype'], b['shape'])}")
                if a["storage"] != b["storage"]:
                    self.fail(f"{where}: a view shares its input's storage, but entry {outs[0]} is in storage "
                              f"{b['storage']} and entry {ins[0]} in storage {a['storage']}")
            if op == "copy":
                entries = self.g["entries"]
                if len(ins) != 1 or len(outs) != 1 or ws or not isinstance(n.get("src"), str) or \
                        not isinstance(n.get("dst"), str):
                    self.fail(f"{where}: a copy node copies one value (src, dst pieces; one input, one output)")
                a, b = entries[ins[0]], entries[outs[0]]
                if a["dtype"] != b["dtype"] or a["shape"] != b["shape"]:
                    self.fail(f"{where}: a copy node copies a value into one of the same dtype and shape; "
                              f"entry {ins[0]} is {tensor_text(a['dtype'], a['shape'])}, entry {outs[0]} is "
                              f"{tensor_text(b['dtype'], b['shape'])}")

    def lists(self) -> None:
        g, nodes = self.g, self.g["nodes"]
        for key in ("inputs", "params"):
            op = key[:-1]
            want = [i for i, n in enumerate(nodes) if n["op"] == op]
            if g[key] != want:
                self.fail(f"'{key}' lists nodes {_short(g[key])}, but the {op} nodes are {_short(want)}")
            seen: dict[str, int] = {}
            for i in want:
                name = nodes[i]["name"]
                if name in seen:
                    self.fail(f"two {op}s are named '{_short(name)}' (nodes {seen[name]} and {i})")
                seen[name] = i
        n_entries = len(g["entries"])
        for k, e in enumerate(g["outputs"]):
            if not is_int(e) or not 0 <= e < n_entries:
                self.fail(f"output {k}: {_short(e)} is not an entry id (the graph has {n_entries} entries)")
        names = g["output_names"]
        if len(names) != len(g["outputs"]) or not all(isinstance(x, str) for x in names):
            self.fail(f"'output_names' must name each of the {len(g['outputs'])} outputs")
        if len(set(names)) != len(names):
            dup = next(x for x in names if names.count(x) > 1)
            self.fail(f"two outputs are named '{_short(dup)}'")

    # -- dataflow and storage ------------------------------------------------------------------
    def dataflow(self) -> None:
        """Every entry is written by exactly one node, before any node reads it; the storage of each
        entry has the kind of its writer (a view: of its input); a storage holds one value and its
        views (a workspace: the arenas of one call); storages of a pool live at the same time do not
        overlap in bytes."""
        g, nodes, entries, storage = self.g, self.g["nodes"], self.g["entries"], self.g["storage"]
        producer = [-1] * len(entries)
        kind = [""] * len(entries)
        for nid, n in enumerate(nodes):
            written = [(e, _KIND_OF_OP.get(n["op"], "")) for e in n["outputs"]]
            written += [(e, "workspace") for e in n.get("workspace", [])]
            for e, k in written:
                if producer[e] >= 0:
                    self.fail(f"entry {e} is written by {node_label(producer[e], nodes[producer[e]])} and by "
                              f"{node_label(nid, n)}")
                producer[e], kind[e] = nid, k
        for e, p in enumerate(producer):
            if p < 0:
                self.fail(f"entry {e} is not written by any node")
        for nid, n in enumerate(nodes):
            for e in n.get("inputs", []):
                p = producer[e]
                if kind[e] == "workspace":
                    self.fail(f"{node_label(nid, n)} reads entry {e}, the workspace of {node_label(p, nodes[p])}")
                if p >= nid:
                    self.fail(f"{node_label(nid, n)} reads entry {e} before {node_label(p, nodes[p])} writes it "
                              "(the nodes are not in execution order)")
            if n["op"] == "view":
                kind[n["outputs"][0]] = kind[n["inputs"][0]]
        for k, e in enumerate(g["outputs"]):
            if kind[e] == "workspace":
                self.fail(f"output {k} is entry {e}, the workspace of {node_label(producer[e], nodes[producer[e]])}")
        owners: dict[int, list[int]] = {}  # storage -> the entries that are not views
        for e, ent in enumerate(entries):
            sid = ent["storage"]
            if storage[sid]["kind"] != kind[e]:
                self.fail(f"entry {e} (written by {node_label(producer[e], nodes[producer[e]])}) is {_an(kind[e])} but "
                          f"lives in storage {sid} of kind '{storage[sid]['kind']}'")
            if nodes[producer[e]]["op"] != "view":
                owners.setdefault(sid, []).append(e)
        for sid, es in owners.items():
            k = storage[sid]["kind"]
            if k in ("input", "param"):
                if len(es) > 1:
                    self.fail(f"storage {sid} ({k}) holds entries {es[0]} and {es[1]}: {_an(k)} is never shared "
                              "(only its views share it)")
            elif k == "workspace":
                if len({producer[e] for e in es}) > 1:
                    p, q = producer[es[0]], producer[es[-1]]
                    self.fail(f"storage {sid} (workspace) holds the workspaces of {node_label(p, nodes[p])} and "
                              f"{node_label(q, nodes[q])}: a workspace belongs to one call")
            elif len(es) > 1:
                self.fail(f"storage {sid} ({k}) holds entries {es[0]} and {es[1]}: {_an(k)} storage holds one value "
                          "(and its views)")
        self._pools_disjoint()

    def _pools_disjoint(self) -> None:
        """No two storages of a pool live at the same time (recomputed from the nodes, see
        :func:`plait.memory.plan.live_ranges`) overlap in bytes."""
        nodes, storage = self.g["nodes"], self.g["storage"]
        first, last = live_ranges(self.g)
        for k, pool in enumerate(self.g["pools"]):
            sids = sorted((s for s, st in enumerate(storage) if st["kind"] in POOLED and st["pool"] == k
                           and first[s] <= last[s]), key=lambda s: (storage[s]["offset"], s))
            for i, a in enumerate(sids):
                end_a = storage[a]["offset"] + storage[a]["bytes"]
                for b in sids[i + 1:]:
                    if storage[b]["offset"] >= end_a:
                        break
                    if first[a] <= last[b] and first[b] <= last[a] and storage[b]["bytes"] and storage[a]["bytes"]:
                        def span(s: int) -> str:
                            return (f"storage {s} at bytes {storage[s]['offset']} to "
                                    f"{storage[s]['offset'] + storage[s]['bytes']}, live from "
                                    f"{node_label(first[s], nodes[first[s]])} to {node_label(last[s], nodes[last[s]])}")
                        self.fail(f"pool {k} ('{_short(pool['name'])}'): {span(a)} overlaps {span(b)}")

    # -- calls against the compiled functions -------------------------------------------------------
    def calls(self, functions: Mapping[str, Any]) -> None:
        entries = self.g["entries"]
        for nid, n in enumerate(self.g["nodes"]):
            if n["op"] != "call":
                continue
            where, func = node_label(nid, n), n["func"]
            sig = functions.get(func)
            if sig is None:
                self.fail(f"{where} calls '{_short(func)}', which the artifact's manifest does not describe")
            given = [("input", e) for e in n.get("inputs", [])] + [("output", e) for e in n["outputs"]] + \
                [("workspace", e) for e in n.get("workspace", [])]
            args = sig["args"]
            if [r for r, _ in given] != [a["role"] for a in args]:
                self.fail(f"{where} passes {_counts([r for r, _ in given])} to '{_short(func)}', which takes "
                          f"{_counts([a['role'] for a in args])}")
            for k, ((role, e), a) in enumerate(zip(given, args)):
                ent = entries[e]
                if ent["dtype"] != a["dtype"] or ent["shape"] != a["shape"]:
                    self.fail(f"{where}: argument {k} ({role}) of '{_short(func)}' is "
                              f"{tensor_text(a['dtype'], a['shape'])}, but entry {e} is "
                              f"{tensor_text(ent['dtype'], ent['shape'])}")


def _counts(roles: list[str]) -> str:
    parts = []
    for r in ROLES:
        c = roles.count(r)
        if c or r != "workspace":
            parts.append(f"{c} {r}{'s' if c != 1 else ''}")
    return ", ".join(parts)


def check_graph(graph: Any, where: str = "graph", functions: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check ``graph`` (a dict as read from JSON) is safe to run; returns it.

    ``functions``: the signatures of the compiled functions (``manifest["functions"]``, already
    checked by :func:`check_functions`); when given, every call's arguments must match them exactly.
    ``where`` names the graph in messages (the file, quoted).
    """
    c = _Checker(graph, where)
    c.top()
    c.pools()
    c.storage()
    c.entries()
    c.nodes()
    c.lists()
    c.dataflow()
    if functions is not None:
        c.calls(functions)
    return graph


def check_functions(functions: Any, where: str, n_modules: int | None = None) -> dict[str, Any]:
    """Check the ``functions`` table of a manifest: per function, its arguments (``role``,
    ``dtype``, ``shape``, ``bytes``, in the order inputs, outputs, workspaces) and, when
    ``n_modules`` is given, the index of the module implementing it."""
    if not isinstance(functions, dict):
        raise ExecutorError(f"{where}: missing or malformed 'functions'")
    for name, sig in functions.items():
        what = f"{where}: function '{_short(name)}'"
        if not isinstance(sig, dict) or not isinstance(sig.get("args"), list):
            raise ExecutorError(f"{what}: malformed (expected an object with \"args\")")
        if n_modules is not None and not (is_int(sig.get("module")) and 0 <= sig["module"] < n_modules):
            raise ExecutorError(f"{what}: module {_short(sig.get('module'))} out of range (the manifest lists "
                                f"{n_modules} modules)")
        rank = 0
        for k, a in enumerate(sig["args"]):
            if not isinstance(a, dict) or a.get("role") not in ROLES or not is_dtype(a.get("dtype")):
                raise ExecutorError(f"{what}: argument {k} is malformed (expected role, dtype, shape, bytes)")
            problem = shape_problem(a.get("shape"))
            if problem:
                raise ExecutorError(f"{what}: argument {k}: {problem}")
            if not is_int(a.get("bytes")) or a["bytes"] != nbytes(a["dtype"], a["shape"]):
                raise ExecutorError(f"{what}: argument {k} is {tensor_text(a['dtype'], a['shape'])}, not "
                                    f"{_short(a.get('bytes'))} bytes")
            if ROLES.index(a["role"]) < rank:
                raise ExecutorError(f"{what}: argument {k} ({a['role']}) comes after {_an(ROLES[rank])} "
                                    "(the order is inputs, outputs, workspaces)")
            rank = ROLES.index(a["role"])
    return functions


def param_entries(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Param name -> its entry, for a checked graph."""
    nodes, entries = graph["nodes"], graph["entries"]
    return {nodes[i]["name"]: entries[nodes[i]["outputs"][0]] for i in graph["params"]}


def check_params(params: Any, graph: dict[str, Any], where: str = "the params") -> None:
    """Every param of ``graph`` is in ``params`` as an array of exactly its dtype and shape; nothing else is."""
    if not isinstance(params, Mapping):
        raise ExecutorError(f"{where}: expected a mapping of parameter names to arrays, got {type(params).__name__}")
    expected = param_entries(graph)
    for name, ent in expected.items():
        if name not in params:
            raise ExecutorError(f"{where}: parameter '{_short(name)}' is missing")
        v = params[name]
        if not isinstance(v, np.ndarray):
            raise ExecutorError(f"{where}: parameter '{_short(name)}' is a {type(v).__name__}, not a numpy array")
        if v.dtype != DTYPES[ent["dtype"]] or list(v.shape) != ent["shape"]:
            raise ExecutorError(f"{where}: parameter '{_short(name)}' is {v.dtype}{list(v.shape)}; the graph "
                                f"expects {ent['dtype']}{ent['shape']}")
    extra = sorted(k for k in params if k not in expected)
    if extra:
        raise ExecutorError(f"{where}: unexpected parameter '{_short(str(extra[0]))}' (the graph has no parameter "
                            "of that name)")


__all__ = ["GRAPH_FORMAT", "GRAPH_VERSION", "MAX_NDIM", "NODE_OPS", "ROLES", "STORAGE_KINDS", "check_functions",
           "check_graph", "check_params", "is_dtype", "is_int", "nbytes", "node_label", "param_entries",
           "shape_problem",
           "tensor_text"]
