"""The static memory planner: every activation and workspace at an offset in a pool.

    plan = plan_memory(graph)      # fills graph["storage"], graph["pools"], every entry's "storage", graph["memory"]
    print(plan.report())           # or GraphArtifact.memory_report()

Input: a graph dict of :mod:`plait.executor.graph_codegen` (``nodes`` in execution order,
``entries``, ``outputs``). Time is the node index. Storage kinds:

- ``input`` / ``param``: one buffer per graph input / parameter, never shared, outside the pools;
- ``activation``: one storage per value computed by a ``call`` or ``copy`` node, live from its
  producer to its last reader (graph outputs: to the end);
- ``workspace``: one storage per call with a workspace arena (all the call's ``workspace`` entries,
  one per dtype, share it), live only while the call runs.

A ``view`` node (a reshape: the same bytes under another shape) allocates nothing: its output
shares its input's storage, whose live range then extends to the view's last reader.

Activations and workspaces of one memory (:func:`memory_domains`: pieces that exchange values
without a copy share a memory) form one **pool**; each storage of a pool has an ``offset`` there.
The offsets are planned by :func:`plait.memory.algorithms.plan_pool` (the algorithms by name, the
lower bound: the most bytes live at one time). Two storages live at the same time never overlap
in bytes; a call never writes bytes it reads (its outputs and inputs are live together at its step).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from plait.ir.types import DTYPES
from plait.memory.algorithms import ALGORITHMS, DEFAULT_ALIGN, LiveBuffer, MemoryPlanError, plan_pool

PRODUCERS = ("call", "copy")
"""Node ops whose outputs are activations (a ``view`` makes no new value, it aliases its input)."""
POOLED = ("activation", "workspace")
"""The storage kinds that live in pools."""


def entry_bytes(entry: dict[str, Any]) -> int:
    """Bytes of one graph entry (a tensor value)."""
    return int(np.prod(entry["shape"], dtype=np.int64)) * DTYPES[entry["dtype"]].itemsize


def _round(n: int, align: int) -> int:
    return -(-n // align) * align


def pool_name(domain: str) -> str:
    """The name of the pool of a memory: ``workspace_<piece>`` (``workspace`` without pieces)."""
    return f"workspace_{domain}" if domain else "workspace"


@dataclass
class MemoryPlan:
    """A memory plan: ``storage`` (``{"bytes", "kind"[, "pool", "offset"]}`` each), the storage of
    each entry, the ``pools`` and the byte totals (``memory``)."""

    storage: list[dict[str, Any]]
    entry_storage: list[int]
    memory: dict[str, int]
    pools: list[dict[str, Any]] = field(default_factory=list)
    graph: dict[str, Any] | None = field(default=None, repr=False)

    def apply(self, graph: dict[str, Any]) -> None:
        """Write the plan into ``graph``: entries' ``storage``, ``storage``, ``pools``, ``memory``."""
        for e, sid in zip(graph["entries"], self.entry_storage):
            e["storage"] = sid
        graph["storage"] = [dict(s) for s in self.storage]
        graph["pools"] = [dict(p) for p in self.pools]
        graph["memory"] = dict(self.memory)
        self.graph = graph

    def report(self, top: int = 10) -> str:
        """A readable summary: bytes per kind, each pool against its lower bound, the biggest workspaces."""
        graph = dict(self.graph or {})
        graph.setdefault("storage", self.storage)
        graph.setdefault("pools", self.pools)
        graph.setdefault("memory", self.memory)
        return memory_report(graph, top)

    @classmethod
    def from_graph(cls, graph: dict[str, Any]) -> "MemoryPlan":
        """The plan recorded in an already planned graph (e.g. read from graph.json)."""
        return cls([dict(s) for s in graph["storage"]], [e["storage"] for e in graph["entries"]],
                   dict(graph.get("memory", {})), [dict(p) for p in graph.get("pools", [])], graph)


def view_roots(graph: dict[str, Any]) -> dict[int, int]:
    """Each ``view`` output entry -> the entry whose storage it shares (through chains of views)."""
    roots: dict[int, int] = {}
    for n in graph["nodes"]:
        if n["op"] == "view":
            src = n["inputs"][0]
            roots[n["outputs"][0]] = roots.get(src, src)
    return roots


def memory_domains(graph: dict[str, Any]) -> dict[int, str]:
    """The memory each activation and workspace lives in: entry -> a piece name standing for every
    piece that shares that memory.

    A call's outputs and workspace live in the memory of its ``piece``; a copy's output in the
    memory of its ``dst``; a view's output where its input lives. Two pieces share memory when a
    call on one reads a value made on the other without a copy in between, or a copy's ``src``
    reads a value made on the other (placement inserts copies exactly between pieces that do not
    share memory). Each memory is named by its first piece in execution order. Without copies,
    everything is one memory.
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
        if n["op"] == "view":
            if n["inputs"][0] in home:
                home[n["outputs"][0]] = home[n["inputs"][0]]
            continue
        if n["op"] not in PRODUCERS:
            continue
        reader, maker = (str(n.get("src", "")), str(n.get("dst", ""))) if n["op"] == "copy" else \
            (str(n.get("piece", "")),) * 2
        find(reader)
        for e in n.get("inputs", ()):
            if e in home:
                union(reader, home[e])
        find(maker)
        for e in (*n["outputs"], *n.get("workspace", ())):
            home[e] = maker
    return {e: find(p) for e, p in home.items()}


def live_ranges(graph: dict[str, Any]) -> tuple[list[int], list[int]]:
    """``(first, last)`` per storage of a planned graph: the node writing it and the last node reading
    it or any view of it (graph outputs: the last node). Inputs and params: the whole run."""
    nodes, entries, storage = graph["nodes"], graph["entries"], graph["storage"]
    end = max(len(nodes) - 1, 0)
    first = [0] * len(storage)  # a pooled storage no node writes is never live: (0, -1)
    last = [-1 if s["kind"] in POOLED else end for s in storage]
    seen: set[int] = set()
    for nid, n in enumerate(nodes):
        if n["op"] in PRODUCERS:
            for e in (*n["outputs"], *n.get("workspace", ())):
                sid = entries[e]["storage"]
                if sid not in seen:
                    seen.add(sid)
                    first[sid] = last[sid] = nid
    for nid, n in enumerate(nodes):
        for e in n.get("inputs", ()):
            sid = entries[e]["storage"]
            if sid in seen:
                last[sid] = max(last[sid], nid)
    for e in graph["outputs"]:
        if entries[e]["storage"] in seen:
            last[entries[e]["storage"]] = end
    return first, last


def plan_memory(graph: dict[str, Any], algorithm: str = "auto", align: int = DEFAULT_ALIGN,
                domains: Mapping[int, str] | None = None) -> MemoryPlan:
    """Plan ``graph``'s memory (see the module docstring) and write the plan into it.

    ``algorithm``: one of :data:`plait.memory.algorithms.ALGORITHMS`, or ``auto`` (each, the
    smallest pool; deterministic). ``align``: every offset is a multiple of it. ``domains``: the
    memory of each activation and workspace entry (default :func:`memory_domains`); each memory
    is one pool, named :func:`pool_name`.
    """
    if algorithm not in (*ALGORITHMS, "auto"):
        raise MemoryPlanError(f"plan_memory: unknown algorithm '{algorithm}' (expected auto, {', '.join(ALGORITHMS)})")
    if not (isinstance(align, int) and align > 0):
        raise MemoryPlanError(f"plan_memory: the alignment must be a positive number of bytes, not {align!r}")
    nodes, entries = graph["nodes"], graph["entries"]
    domains = memory_domains(graph) if domains is None else domains
    storage: list[dict[str, Any]] = []
    where = [-1] * len(entries)
    domain_of: dict[int, str] = {}  # storage id -> its memory

    def new(nbytes: int, kind: str) -> int:
        storage.append({"bytes": nbytes, "kind": kind})
        return len(storage) - 1

    def home(e: int, what: str) -> str:
        if e not in domains:
            raise MemoryPlanError(f"plan_memory: no memory is given for entry {e} ({what})")
        return str(domains[e])

    for nid, n in enumerate(nodes):
        op = n["op"]
        if op in ("input", "param"):
            where[n["outputs"][0]] = new(entry_bytes(entries[n["outputs"][0]]), op)
        elif op == "view":
            where[n["outputs"][0]] = where[n["inputs"][0]]
        else:
            for e in n["outputs"]:
                where[e] = new(entry_bytes(entries[e]), "activation")
                domain_of[where[e]] = home(e, f"an output of node {nid}")
            ws = n.get("workspace") or []
            if ws:
                sid = new(max(entry_bytes(entries[e]) for e in ws), "workspace")
                domain_of[sid] = home(ws[0], f"the workspace of node {nid}")
                for e in ws:
                    where[e] = sid

    for e, sid in zip(entries, where):
        e["storage"] = sid
    graph["storage"] = storage
    first, last = live_ranges(graph)
    pools: list[dict[str, Any]] = []
    members: dict[str, list[int]] = {}
    for sid, d in domain_of.items():  # storage ids ascend: pools in order of first use
        members.setdefault(d, []).append(sid)
    for k, (d, sids) in enumerate(members.items()):
        bufs = [LiveBuffer(storage[s]["bytes"], first[s], last[s], f"storage {s}") for s in sids]
        pp = plan_pool(bufs, align, algorithm)
        for s, off in zip(sids, pp.offsets):
            storage[s]["pool"], storage[s]["offset"] = k, int(off)
        pools.append({"name": pool_name(d), "piece": d, "bytes": int(pp.size), "align": align,
                      "algorithm": pp.algorithm, "lower_bound": int(pp.lower_bound),
                      "sizes": {a: int(b) for a, b in pp.sizes.items()}, "optimal": bool(pp.optimal)})

    def total(kind: str) -> int:
        return sum(s["bytes"] for s in storage if s["kind"] == kind)

    pooled = sum(p["bytes"] for p in pools)
    memory = {
        "input_bytes": total("input"), "param_bytes": total("param"), "activation_bytes": pooled,
        "activation_bytes_naive": sum(_round(s["bytes"], align) for s in storage if s["kind"] in POOLED),
        "lower_bound_bytes": sum(p["lower_bound"] for p in pools),
        "peak_bytes": total("input") + total("param") + pooled,
    }
    plan = MemoryPlan(storage, where, memory, pools)
    plan.apply(graph)
    return plan


def piece_bytes(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each piece's share of a planned graph (for the memory fit check, :func:`plait.placement.fit.check_fit`):

    - ``pool``: the name of the pool of the piece's memory (``""`` when it makes no value);
    - ``activation``: that pool's bytes (activations and workspaces; pieces sharing a memory share
      the pool, and each is charged all of it);
    - ``param``: the params its calls read (weights; each counted once per piece).

    Pieces are those of the calls (``piece``) and of the copies (``src``, ``dst``).
    """
    nodes, entries, storage, pools = graph["nodes"], graph["entries"], graph["storage"], graph.get("pools", [])
    pool_of: dict[str, int] = {}  # piece -> its pool
    for n in nodes:
        if n["op"] in PRODUCERS:
            owner = str(n.get("dst", "")) if n["op"] == "copy" else str(n.get("piece", ""))
            for e in n["outputs"]:
                pool_of.setdefault(owner, storage[entries[e]["storage"]]["pool"])
    pieces = sorted({str(n.get(k, "")) for n in nodes if n["op"] in PRODUCERS
                     for k in (("src", "dst") if n["op"] == "copy" else ("piece",))})
    params: dict[str, set[int]] = {}
    for n in nodes:
        if n["op"] == "call":
            sids = {entries[e]["storage"] for e in n["inputs"]}
            params.setdefault(str(n.get("piece", "")), set()).update(
                sid for sid in sids if storage[sid]["kind"] == "param")
    out: dict[str, dict[str, Any]] = {}
    for p in pieces:
        k = pool_of.get(p)
        out[p] = {"pool": pools[k]["name"] if k is not None else "",
                  "activation": pools[k]["bytes"] if k is not None else 0,
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


def pool_lines(graph: dict[str, Any]) -> list[str]:
    """One line per pool: bytes, lower bound, the algorithm chosen, what it holds."""
    storage = graph["storage"]
    lines = []
    for k, p in enumerate(graph.get("pools", [])):
        held = [s["kind"] for s in storage if s.get("pool") == k]
        acts, ws = held.count("activation"), held.count("workspace")
        lines.append(f"  pool '{p['name']}' (piece '{p['piece']}'): {_b(p['bytes'])}, lower bound "
                     f"{_b(p['lower_bound'])}, algorithm {p['algorithm']}; {acts} activation{'' if acts == 1 else 's'}"
                     f", {ws} workspace{'' if ws == 1 else 's'}")
    return lines


def memory_report(graph: dict[str, Any], top: int = 10) -> str:
    """The memory plan of a planned graph as text: inputs and params, each pool (bytes, lower bound,
    algorithm), the biggest workspaces by function."""
    storage, mem = graph["storage"], graph.get("memory", {})
    lines = [f"memory plan: peak {_b(mem.get('peak_bytes', 0))}"]
    for kind in ("input", "param"):
        items = [s for s in storage if s["kind"] == kind]
        nb = sum(s["bytes"] for s in items)
        lines.append(f"  {kind:<11}{_b(nb):>16}  {len(items)} buffer{'' if len(items) == 1 else 's'}")
    pools = graph.get("pools", [])
    lines.append(f"  pools      {_b(mem.get('activation_bytes', 0)):>16}  {len(pools)} pool"
                 f"{'' if len(pools) == 1 else 's'} ({_b(mem.get('activation_bytes_naive', 0))} with one buffer "
                 "per value)")
    lines += pool_lines(graph)
    rows = workspace_table(graph)
    if rows:
        lines.append("biggest workspaces:")
        for r in rows[:top]:
            calls = f"{r['calls']} call{'' if r['calls'] == 1 else 's'}"
            lines.append(f"  {r['func']:<40}{_b(r['bytes']):>16}  piece '{r['piece']}', {calls}")
        if len(rows) > top:
            lines.append(f"  ... and {len(rows) - top} more")
    return "\n".join(lines) + "\n"


__all__ = ["MemoryPlan", "POOLED", "PRODUCERS", "entry_bytes", "live_ranges", "memory_domains", "memory_report",
           "piece_bytes", "plan_memory", "pool_lines", "pool_name", "view_roots", "workspace_table"]
