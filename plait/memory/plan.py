"""Memory planning for the graph executor: which buffer holds each value, and the workspaces.

    plan = plan_memory(graph)      # fills graph["storage"], every entry's "storage", graph["memory"]
    print(plan.report())           # or GraphArtifact.memory_report()

Input: a graph dict of :mod:`plait.executor.graph_codegen` (``nodes`` in execution order,
``entries``, ``outputs``). Storage kinds:

- ``input`` / ``param``: one buffer per graph input / parameter, never shared;
- ``activation``: the values computed by ``call`` and ``copy`` nodes, shared by liveness within
  one memory (:func:`memory_domains`: pieces on different devices, with copies between them, do
  not share buffers; such buffers carry the ``piece`` naming their memory);
- ``workspace``: one buffer per piece (a call's ``"piece"``: its PrimFunc's ``target`` attr),
  as large as the largest ``workspace_bytes`` of the calls on that piece. Calls run one after
  the other, so every call of a piece uses the same workspace.

**Sharing activations.** Walking the nodes in order, each output takes a free buffer; after the
node, the buffers of the values whose last use it was are free again (graph outputs never are).
Outputs are assigned before the node's inputs are released, so a node never writes a buffer it
reads, and two values live at the same time never share a buffer. Two deterministic choices of
the free buffer are planned and the smaller total kept (ties: ``exact``):

- ``exact``: a free buffer of exactly the value's size, else a new one;
- ``best_fit``: the smallest free buffer at least as large as the value; else the largest free
  buffer, grown to the value's size; else a new one.

A buffer's size is the largest value it ever holds, so ``activation_bytes`` is never more than
``activation_bytes_naive`` (one buffer per value).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plait.ir.types import DTYPES

STRATEGIES = ("exact", "best_fit")
PRODUCERS = ("call", "copy")
"""Node ops whose outputs are activations."""


def entry_bytes(entry: dict[str, Any]) -> int:
    """Bytes of one graph entry (a tensor value)."""
    return int(np.prod(entry["shape"], dtype=np.int64)) * DTYPES[entry["dtype"]].itemsize


@dataclass
class MemoryPlan:
    """A storage plan: ``storage`` (``{"bytes", "kind"[, "piece"]}`` each), the storage of each
    entry, the byte totals (``memory``) and the strategy that produced the activation sharing."""

    storage: list[dict[str, Any]]
    entry_storage: list[int]
    memory: dict[str, int]
    strategy: str = "exact"
    graph: dict[str, Any] | None = field(default=None, repr=False)

    def apply(self, graph: dict[str, Any]) -> None:
        """Write the plan into ``graph``: entries' ``storage``, ``storage``, ``memory``."""
        for e, sid in zip(graph["entries"], self.entry_storage):
            e["storage"] = sid
        graph["storage"] = [dict(s) for s in self.storage]
        graph["memory"] = dict(self.memory)
        self.graph = graph

    def report(self, top: int = 10) -> str:
        """A readable summary: bytes per storage kind, the peak, the biggest workspaces."""
        graph = dict(self.graph or {})
        graph.setdefault("storage", self.storage)
        graph.setdefault("memory", self.memory)
        return memory_report(graph, top)

    @classmethod
    def from_graph(cls, graph: dict[str, Any]) -> "MemoryPlan":
        """The plan recorded in an already planned graph (e.g. read from graph.json)."""
        return cls([dict(s) for s in graph["storage"]], [e["storage"] for e in graph["entries"]],
                   dict(graph.get("memory", {})), "", graph)


def _liveness(graph: dict[str, Any]) -> dict[int, int]:
    last_use: dict[int, int] = {}
    for nid, n in enumerate(graph["nodes"]):
        for e in n.get("inputs", ()):
            last_use[e] = nid
    return last_use


def memory_domains(graph: dict[str, Any]) -> dict[int, str]:
    """The memory each activation lives in: activation entry -> a piece name standing for every
    piece that shares that memory.

    A call's outputs live in the memory of its ``piece``; a copy's output in the memory of its
    ``dst``. Two pieces share memory when a call on one reads a value made on the other without a
    copy in between, or a copy's ``src`` reads a value made on the other (placement inserts copies
    exactly between pieces that do not share memory). Each memory is named by its first piece in
    execution order. Without copies, everything is one memory.
    """
    parent: dict[str, str] = {}
    rank: dict[str, int] = {}

    def find(p: str) -> str:
        if p not in parent:
            parent[p], rank[p] = p, len(rank)
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            first, second = (ra, rb) if rank[ra] < rank[rb] else (rb, ra)
            parent[second] = first

    home: dict[int, str] = {}
    for n in graph["nodes"]:
        if n["op"] not in PRODUCERS:
            continue
        reader, maker = (str(n.get("src", "")), str(n.get("dst", ""))) if n["op"] == "copy" else \
            (str(n.get("piece", "")),) * 2
        find(reader)
        for e in n.get("inputs", ()):
            if e in home:
                union(reader, home[e])
        find(maker)
        for e in n["outputs"]:
            home[e] = maker
    return {e: find(p) for e, p in home.items()}


def _plan_activations(graph: dict[str, Any], strategy: str) -> tuple[list[dict[str, Any]], list[int]]:
    """Storage for inputs, params and activations (in node order) and each entry's storage id."""
    nodes, entries = graph["nodes"], graph["entries"]
    storage: list[dict[str, Any]] = []
    where = [-1] * len(entries)
    is_output = set(graph["outputs"])
    last_use = _liveness(graph)
    domains = memory_domains(graph)
    several = len(set(domains.values())) > 1
    free: dict[str, list[int]] = {}  # memory -> free activation storage ids

    def new(nbytes: int, kind: str, domain: str | None = None) -> int:
        storage.append({"bytes": nbytes, "kind": kind})
        if domain is not None and several:
            storage[-1]["piece"] = domain
        return len(storage) - 1

    def take(size: int, domain: str) -> int:
        pool = free.setdefault(domain, [])
        if strategy == "exact":
            fits = [s for s in pool if storage[s]["bytes"] == size]
            if not fits:
                return new(size, "activation", domain)
            sid = fits[-1]  # the most recently freed
        else:
            fits = [s for s in pool if storage[s]["bytes"] >= size]
            if fits:
                sid = min(fits, key=lambda s: (storage[s]["bytes"], s))
            elif pool:
                sid = min(pool, key=lambda s: (-storage[s]["bytes"], s))
                storage[sid]["bytes"] = size  # grow it: a buffer is as big as its biggest value
            else:
                return new(size, "activation", domain)
        pool.remove(sid)
        return sid

    for nid, n in enumerate(nodes):
        op = n["op"]
        if op not in PRODUCERS:
            for e in n["outputs"]:
                where[e] = new(entry_bytes(entries[e]), "input" if op == "input" else "param")
            continue
        for e in n["outputs"]:
            where[e] = take(entry_bytes(entries[e]), domains[e])
        released = [e for e in dict.fromkeys(n["inputs"]) if last_use[e] == nid]
        released += [e for e in n["outputs"] if e not in last_use]
        for e in released:
            sid = where[e]
            if e not in is_output and storage[sid]["kind"] == "activation":
                pool = free.setdefault(domains[e], [])
                if sid not in pool:
                    pool.append(sid)
    return storage, where


def plan_memory(graph: dict[str, Any], strategy: str = "auto") -> MemoryPlan:
    """Plan ``graph``'s memory (see the module docstring) and write the plan into it.

    ``strategy``: ``exact``, ``best_fit``, or ``auto`` (both, the smaller activation total; ties
    go to ``exact``). Deterministic: the same graph gives the same plan.
    """
    if strategy not in (*STRATEGIES, "auto"):
        raise ValueError(f"plan_memory: unknown strategy {strategy!r} (expected auto, {', '.join(STRATEGIES)})")
    entries, nodes = graph["entries"], graph["nodes"]
    candidates = STRATEGIES if strategy == "auto" else (strategy,)
    best: tuple[int, str, list, list] | None = None
    for s in candidates:
        storage, where = _plan_activations(graph, s)
        total = sum(x["bytes"] for x in storage if x["kind"] == "activation")
        if best is None or total < best[0]:
            best = (total, s, storage, where)
    assert best is not None
    _, chosen, storage, where = best

    # workspaces: one buffer per piece, as big as its biggest call's workspace
    pieces: dict[str, int] = {}
    for n in nodes:
        ws = n.get("workspace") or []
        if not ws:
            continue
        piece = str(n.get("piece", ""))
        if piece not in pieces:
            storage.append({"bytes": 0, "kind": "workspace", "piece": piece})
            pieces[piece] = len(storage) - 1
        sid = pieces[piece]
        for e in ws:
            where[e] = sid
            storage[sid]["bytes"] = max(storage[sid]["bytes"], entry_bytes(entries[e]))

    def total(kind: str) -> int:
        return sum(s["bytes"] for s in storage if s["kind"] == kind)

    naive = sum(entry_bytes(entries[e]) for n in nodes if n["op"] in PRODUCERS for e in n["outputs"])
    memory = {
        "input_bytes": total("input"), "param_bytes": total("param"), "activation_bytes": total("activation"),
        "activation_bytes_naive": naive, "workspace_bytes": total("workspace"),
        "peak_bytes": sum(s["bytes"] for s in storage),
    }
    plan = MemoryPlan(storage, where, memory, chosen)
    plan.apply(graph)
    return plan


def plan_storage(graph: dict[str, Any]) -> None:
    """Same as :func:`plan_memory` (kept for older callers)."""
    plan_memory(graph)


def piece_bytes(graph: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Each piece's share of a planned graph (for the memory fit check, :func:`plait.placement.fit.check_fit`):

    - ``activation``: the activation buffers of the piece's memory (:func:`memory_domains`; pieces
      sharing a memory share these, and each is charged all of them);
    - ``workspace``: the workspace buffers of the pieces in that memory;
    - ``param``: the params its calls read (weights; each counted once per piece).

    Pieces are those of the calls (``piece``) and of the copies (``src``, ``dst``).
    """
    nodes, entries, storage = graph["nodes"], graph["entries"], graph["storage"]
    domains = memory_domains(graph)
    home: dict[str, str] = {}  # piece -> its memory
    for n in nodes:
        if n["op"] in PRODUCERS:
            owner = str(n.get("dst", "")) if n["op"] == "copy" else str(n.get("piece", ""))
            for e in n["outputs"]:
                home.setdefault(owner, domains[e])
    pieces = sorted({str(n.get(k, "")) for n in nodes if n["op"] in PRODUCERS
                     for k in (("src", "dst") if n["op"] == "copy" else ("piece",))})
    act: dict[str, set[int]] = {}
    for e, d in domains.items():
        sid = entries[e]["storage"]
        if storage[sid]["kind"] == "activation":
            act.setdefault(d, set()).add(sid)
    ws: dict[str, int] = {}
    for s in storage:
        if s["kind"] == "workspace":
            d = home.get(str(s.get("piece", "")), str(s.get("piece", "")))
            ws[d] = ws.get(d, 0) + s["bytes"]
    params: dict[str, set[int]] = {}
    for n in nodes:
        if n["op"] == "call":
            sids = {entries[e]["storage"] for e in n["inputs"]}
            params.setdefault(str(n.get("piece", "")), set()).update(
                sid for sid in sids if storage[sid]["kind"] == "param")
    out = {}
    for p in pieces:
        d = home.get(p)
        out[p] = {"activation": sum(storage[sid]["bytes"] for sid in act.get(d, ())) if d else 0,
                  "workspace": ws.get(d, 0) if d else 0,
                  "param": sum(storage[sid]["bytes"] for sid in params.get(p, ()))}
    return out


def _b(n: int) -> str:
    return f"{n:,} B"


def workspace_table(graph: dict[str, Any]) -> list[dict[str, Any]]:
    """Per function with a workspace: ``{"func", "piece", "bytes", "calls"}``, biggest first."""
    by_func: dict[tuple[str, str], dict[str, Any]] = {}
    for n in graph["nodes"]:
        ws = n.get("workspace") or []
        if not ws:
            continue
        nbytes = max(entry_bytes(graph["entries"][e]) for e in ws)
        key = (n.get("func", ""), str(n.get("piece", "")))
        row = by_func.setdefault(key, {"func": key[0], "piece": key[1], "bytes": 0, "calls": 0})
        row["bytes"] = max(row["bytes"], nbytes)
        row["calls"] += 1
    return sorted(by_func.values(), key=lambda r: (-r["bytes"], r["func"], r["piece"]))


def memory_report(graph: dict[str, Any], top: int = 10) -> str:
    """The memory plan of a planned graph as text: per storage kind, the peak, the biggest
    workspaces by function."""
    storage, mem = graph["storage"], graph.get("memory", {})
    lines = [f"memory plan: peak {_b(sum(s['bytes'] for s in storage))}"]
    for kind in ("input", "param", "activation", "workspace"):
        items = [s for s in storage if s["kind"] == kind]
        nb = sum(s["bytes"] for s in items)
        notes = []
        if kind == "activation" and "activation_bytes_naive" in mem:
            notes.append(f"{_b(mem['activation_bytes_naive'])} with one buffer per value")
        by_piece: dict[str, int] = {}
        for s in items:
            if "piece" in s:
                by_piece[s["piece"]] = by_piece.get(s["piece"], 0) + s["bytes"]
        if by_piece:
            notes.append(", ".join(f"piece '{p}': {_b(b)}" for p, b in by_piece.items()))
        notes_text = f" ({'; '.join(notes)})" if notes else ""
        lines.append(f"  {kind:<11}{_b(nb):>16}  {len(items)} buffer{'' if len(items) == 1 else 's'}{notes_text}")
    rows = workspace_table(graph)
    if rows:
        lines.append("biggest workspaces:")
        for r in rows[:top]:
            calls = f"{r['calls']} call{'' if r['calls'] == 1 else 's'}"
            lines.append(f"  {r['func']:<40}{_b(r['bytes']):>16}  piece '{r['piece']}', {calls}")
        if len(rows) > top:
            lines.append(f"  ... and {len(rows) - top} more")
    return "\n".join(lines) + "\n"


__all__ = ["MemoryPlan", "PRODUCERS", "STRATEGIES", "entry_bytes", "memory_domains", "memory_report", "piece_bytes",
           "plan_memory", "plan_storage", "workspace_table"]
