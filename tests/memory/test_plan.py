"""The static memory planner (plait.memory.plan) on graph dicts: invariants on random graphs with
copies between pieces and views, checked pair by pair; lower bounds of small graphs argued by hand;
one pool per memory; domains given by the caller; live ranges through views."""

import json

import numpy as np
import pytest

from plait.errors import PlaitError
from plait.executor.graph_check import check_graph
from plait.memory.algorithms import ALGORITHMS
from plait.memory.plan import MemoryPlan, entry_bytes, live_ranges, memory_domains, plan_memory, view_roots


def random_graph(rng: np.random.Generator) -> dict:
    """Inputs, params, then calls, copies between pieces and views (a value seen as [1, n])."""
    sizes = [1, 2, 3, 4, 6, 8, 16]
    entries, nodes = [], []

    def entry(n, shape=None):
        entries.append({"shape": shape or [int(n)], "dtype": "float32"})
        return len(entries) - 1

    avail = []
    for k in range(int(rng.integers(1, 3))):
        e = entry(rng.choice(sizes))
        nodes.append({"op": "input", "name": f"x{k}", "outputs": [e]})
        avail.append(e)
    for k in range(int(rng.integers(0, 3))):
        e = entry(rng.choice(sizes))
        nodes.append({"op": "param", "name": f"p{k}", "outputs": [e]})
        avail.append(e)
    for k in range(int(rng.integers(1, 25))):
        r = rng.random()
        if r < 0.15:
            src = int(rng.choice(avail))
            out = entry(0, list(entries[src]["shape"]))
            src_piece, dst_piece = (str(p) for p in rng.choice(["a", "b", "c"], 2, replace=False))
            nodes.append({"op": "copy", "name": f"c{k}", "src": src_piece, "dst": dst_piece, "inputs": [src],
                          "outputs": [out]})
        elif r < 0.25:
            src = int(rng.choice(avail[-4:]))
            out = entry(0, [1, int(np.prod(entries[src]["shape"]))])
            nodes.append({"op": "view", "name": f"v{k}", "inputs": [src], "outputs": [out]})
        else:
            recent = avail[-6:]  # mostly recent values: realistic, short lifetimes
            ins = [int(rng.choice(recent if rng.random() < 0.8 else avail)) for _ in range(int(rng.integers(1, 4)))]
            outs = [entry(rng.choice(sizes)) for _ in range(int(rng.integers(1, 3)))]
            nodes.append({"op": "call", "name": f"f{k}", "func": "f", "inputs": ins, "outputs": outs,
                          "piece": str(rng.choice(["a", "b", "c"]))})
        avail += nodes[-1]["outputs"]
    produced = [e for n in nodes if n["op"] in ("call", "copy", "view") for e in n["outputs"]]
    outputs = sorted({produced[-1], *[int(e) for e in rng.choice(produced, int(rng.integers(0, 3)))]})
    return {"format": "plait.graph", "version": 2, "nodes": nodes, "entries": entries,
            "inputs": [i for i, n in enumerate(nodes) if n["op"] == "input"],
            "params": [i for i, n in enumerate(nodes) if n["op"] == "param"],
            "outputs": outputs, "output_names": [f"y{k}" for k in range(len(outputs))]}


def storage_live(graph: dict) -> dict[int, tuple[int, int]]:
    """Brute force: each storage's (first write, last use) over all the entries it holds (outputs: the end)."""
    nodes, entries = graph["nodes"], graph["entries"]
    live: dict[int, tuple[int, int]] = {}
    for nid, n in enumerate(nodes):
        for e in (*n["outputs"], *n.get("workspace", ())):
            uses = [i for i, m in enumerate(nodes) if e in m.get("inputs", ())]
            last = len(nodes) - 1 if e in graph["outputs"] else max([nid, *uses])
            sid = entries[e]["storage"]
            lo, hi = live.get(sid, (nid, last))
            live[sid] = (min(lo, nid), max(hi, last))
    return live


def verify_plan(graph: dict, align: int = 16, domains: dict | None = None) -> None:
    """The invariants of a plan, checked pair by pair."""
    nodes, entries, storage, pools = graph["nodes"], graph["entries"], graph["storage"], graph["pools"]
    store = [e["storage"] for e in entries]
    roots = view_roots(graph)
    for n in nodes:  # one storage per value; a view shares its input's
        for e in n["outputs"]:
            assert store[e] == store[roots[e]] if e in roots else store.count(store[e]) == 1 + sum(
                1 for v, r in roots.items() if r == e)
    live = storage_live(graph)
    pooled = [s for s, st in enumerate(storage) if st["kind"] in ("activation", "workspace")]
    for a in pooled:
        sa = storage[a]
        assert sa["offset"] % align == 0 and sa["offset"] + sa["bytes"] <= pools[sa["pool"]]["bytes"]
        for b in pooled:
            sb = storage[b]
            if a < b and sa["pool"] == sb["pool"]:
                (p1, l1), (p2, l2) = live[a], live[b]
                if p1 <= l2 and p2 <= l1:  # live together: apart in bytes
                    assert sa["offset"] + sa["bytes"] <= sb["offset"] or sb["offset"] + sb["bytes"] <= sa["offset"]
    domains = memory_domains(graph) if domains is None else domains
    for e, d in domains.items():  # one pool per memory
        assert pools[storage[store[e]]["pool"]]["piece"] == d
    for n in nodes:  # a node never writes a buffer it reads
        if n["op"] in ("call", "copy"):
            assert not {store[e] for e in n["outputs"]} & {store[e] for e in n["inputs"]}
    for e in entries:
        assert entry_bytes(e) <= storage[e["storage"]]["bytes"]
    for p in pools:
        assert p["lower_bound"] <= p["bytes"] == min(p["sizes"].values()) and p["sizes"][p["algorithm"]] == p["bytes"]
    mem = graph["memory"]
    assert mem["activation_bytes"] == sum(p["bytes"] for p in pools) <= mem["activation_bytes_naive"]
    assert mem["peak_bytes"] == mem["input_bytes"] + mem["param_bytes"] + mem["activation_bytes"]
    check_graph(graph)


def test_random_graphs_plan_invariants():
    rng = np.random.default_rng(0)
    views = 0
    for _ in range(200):
        g = random_graph(rng)
        views += sum(n["op"] == "view" for n in g["nodes"])
        plan = plan_memory(g)
        verify_plan(g)
        g2 = json.loads(json.dumps(g))
        for e in g2["entries"]:
            del e["storage"]
        assert plan_memory(g2).entry_storage == plan.entry_storage and g2 == g  # deterministic
        for algorithm in ALGORITHMS:
            gs = json.loads(json.dumps(g2))
            p = plan_memory(gs, algorithm)
            verify_plan(gs)
            assert [q["algorithm"] for q in gs["pools"]] == [algorithm] * len(gs["pools"])
            assert plan.memory["activation_bytes"] <= p.memory["activation_bytes"]
        for align in (4, 64):
            ga = json.loads(json.dumps(g2))
            plan_memory(ga, align=align)
            verify_plan(ga, align)
    assert views > 50


def test_a_chain_reaches_its_lower_bound():
    # x -> v1 (100 floats) -> v2 (50) -> v3 (100) -> v4 (50) -> v5 (25): each value lives from its call
    # to the next, so at most two neighbours are live: 400 + 208 bytes (200 rounded up to the alignment,
    # 16). v1 and v3 take bytes 0-400, v2 and v4 400-608, v5 0-112: the pool is the lower bound, 608
    # bytes (one buffer per value: 400 + 208 + 400 + 208 + 112 = 1,328).
    sizes = [7, 100, 50, 100, 50, 25]
    entries = [{"shape": [s], "dtype": "float32"} for s in sizes]
    nodes = [{"op": "input", "name": "x", "outputs": [0]}]
    nodes += [{"op": "call", "name": f"f{k}", "func": "f", "inputs": [k - 1], "outputs": [k]} for k in range(1, 6)]
    graph = {"format": "plait.graph", "version": 2, "nodes": nodes, "entries": entries, "inputs": [0],
             "params": [], "outputs": [5], "output_names": ["y"]}
    plan = plan_memory(graph)
    verify_plan(graph)
    assert [(p["name"], p["piece"], p["bytes"], p["lower_bound"]) for p in plan.pools] == [("workspace", "", 608, 608)]
    assert plan.memory == {"input_bytes": 28, "param_bytes": 0, "activation_bytes": 608,
                           "activation_bytes_naive": 1328, "lower_bound_bytes": 608, "peak_bytes": 636}
    assert all(b >= 608 for b in plan.pools[0]["sizes"].values())
    with pytest.raises(PlaitError) as e:
        plan_memory(graph, "fast")
    assert str(e.value) == ("plan_memory: unknown algorithm 'fast' (expected auto, greedy_by_size, "
                            "greedy_by_conflicts, hill_climb, tflm_greedy, ilp)")
    with pytest.raises(PlaitError) as e:
        plan_memory(graph, align=0)
    assert str(e.value) == "plan_memory: the alignment must be a positive number of bytes, not 0"


def test_pieces_on_different_memories_get_their_own_pools():
    """a and c exchange values directly (one memory); b is across copies (another memory)."""
    f4 = {"shape": [4], "dtype": "float32"}
    entries = [dict(f4) for _ in range(9)]
    nodes = [
        {"op": "input", "name": "x", "outputs": [0]},
        {"op": "call", "name": "a0", "func": "f", "piece": "a", "inputs": [0], "outputs": [1]},
        {"op": "call", "name": "c0", "func": "f", "piece": "c", "inputs": [1], "outputs": [2]},
        {"op": "copy", "name": "to_b", "src": "c", "dst": "b", "inputs": [2], "outputs": [3]},
        {"op": "call", "name": "b0", "func": "f", "piece": "b", "inputs": [3], "outputs": [4]},
        {"op": "call", "name": "b1", "func": "f", "piece": "b", "inputs": [4], "outputs": [5]},
        {"op": "copy", "name": "to_a", "src": "b", "dst": "a", "inputs": [5], "outputs": [6]},
        {"op": "call", "name": "a1", "func": "f", "piece": "a", "inputs": [6], "outputs": [7]},
        {"op": "call", "name": "c1", "func": "f", "piece": "c", "inputs": [7], "outputs": [8]},
    ]
    graph = {"format": "plait.graph", "version": 2, "nodes": nodes, "entries": entries, "inputs": [0],
             "params": [], "outputs": [8], "output_names": ["y"]}
    assert memory_domains(graph) == {1: "a", 2: "a", 3: "b", 4: "b", 5: "b", 6: "a", 7: "a", 8: "a"}
    plan_memory(graph)
    verify_plan(graph)
    assert [e["storage"] for e in entries] == list(range(9))
    # 16-byte values, each live from its node to the next: two at a time in each memory
    assert [(p["name"], p["piece"], p["bytes"], p["lower_bound"]) for p in graph["pools"]] == \
        [("workspace_a", "a", 32, 32), ("workspace_b", "b", 32, 32)]
    assert [s.get("pool") for s in graph["storage"]] == [None, 0, 0, 1, 1, 1, 0, 0, 0]
    report = MemoryPlan.from_graph(graph).report().splitlines()
    assert report[3:] == ["  pools                  64 B  2 pools (128 B with one buffer per value)",
                          "  pool 'workspace_a' (piece 'a'): 32 B, lower bound 32 B, algorithm "
                          f"{graph['pools'][0]['algorithm']}; 5 activations, 0 workspaces",
                          "  pool 'workspace_b' (piece 'b'): 32 B, lower bound 32 B, algorithm "
                          f"{graph['pools'][1]['algorithm']}; 3 activations, 0 workspaces"]
    # without the copies (one memory) the same calls need one pool of two values
    one = json.loads(json.dumps(graph))
    for n in one["nodes"]:
        if n["op"] == "copy":
            n["src"] = n["dst"] = "a"
    assert set(memory_domains(one).values()) == {"a"}
    plan_memory(one)
    assert one["memory"]["activation_bytes"] == 32 and len(one["pools"]) == 1
    # the domains may be given (the AOT executor gives one per piece)
    per_piece = json.loads(json.dumps(graph))
    pieces = {e: n.get("piece", n.get("dst")) for n in nodes for e in n["outputs"] if n["op"] != "input"}
    plan_memory(per_piece, domains=pieces)
    verify_plan(per_piece, domains=pieces)
    # a: 1, then 6 and 7 (live together at a1); c: 2 and 8 (never together); b: 3, 4, 5 (two at a time)
    assert [(p["piece"], p["bytes"]) for p in per_piece["pools"]] == [("a", 32), ("c", 16), ("b", 32)]
    with pytest.raises(PlaitError) as e:
        plan_memory(json.loads(json.dumps(graph)), domains={1: "a"})
    assert str(e.value) == "plan_memory: no memory is given for entry 2 (an output of node 2)"


def test_live_ranges_follow_views_and_outputs():
    f4 = {"shape": [4], "dtype": "float32"}
    v = {"shape": [1, 4], "dtype": "float32"}
    entries = [dict(f4), dict(f4), dict(v), dict(f4), dict(f4), dict(v)]
    nodes = [
        {"op": "input", "name": "x", "outputs": [0]},
        {"op": "call", "name": "f0", "func": "f", "inputs": [0], "outputs": [1], "workspace": [4]},
        {"op": "view", "name": "v0", "inputs": [1], "outputs": [2]},
        {"op": "call", "name": "f1", "func": "f", "inputs": [0], "outputs": [3]},
        {"op": "view", "name": "v1", "inputs": [0], "outputs": [5]},
        {"op": "call", "name": "f2", "func": "f", "inputs": [2, 3], "outputs": []},
    ]
    nodes[-1]["outputs"] = [len(entries)]
    entries.append(dict(f4))
    graph = {"format": "plait.graph", "version": 2, "nodes": nodes, "entries": entries, "inputs": [0],
             "params": [], "outputs": [6, 5], "output_names": ["y", "z"]}
    plan_memory(graph)
    # storages: 0 x (and its view 5, an output), 1 f0's result (and its view 2), 2 f0's workspace,
    # 3 f1's result, 4 f2's result
    assert [e["storage"] for e in entries] == [0, 1, 1, 3, 2, 0, 4]
    assert live_ranges(graph) == ([0, 1, 1, 3, 5], [5, 5, 1, 5, 5])
    # at f2 (node 5): f0's result (through its view), f1's and f2's: 3 x 16 bytes; the workspace is
    # live only at f0, with f0's result: it may take f1's or f2's bytes
    assert graph["pools"][0]["lower_bound"] == graph["pools"][0]["bytes"] == 48
    check_graph(graph)


