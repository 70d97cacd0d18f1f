"""check_graph against a brute-force oracle: on random planned graphs whose storage or node order is changed,
it accepts exactly the graphs in which each storage holds one value (and its views), no two storages of a
pool live at the same time overlap in bytes, every storage lies aligned inside its pool, every value fits
its storage, and every value is written before it is read."""

import json

import numpy as np
import pytest

from plait.executor import ExecutorError, check_graph
from plait.executor.graph_check import nbytes
from plait.memory.plan import plan_memory

from tests.memory.test_plan import random_graph, storage_live

KIND = {"input": "input", "param": "param", "call": "activation", "copy": "activation"}


def safe(graph: dict) -> bool:
    """The oracle: every pair of storages compared directly."""
    nodes, entries, storage, pools = graph["nodes"], graph["entries"], graph["storage"], graph["pools"]
    writer = {e: i for i, n in enumerate(nodes) for e in n["outputs"]}
    if [i for i, n in enumerate(nodes) if n["op"] == "input"] != graph["inputs"] or \
            [i for i, n in enumerate(nodes) if n["op"] == "param"] != graph["params"]:
        return False
    for i, n in enumerate(nodes):
        if any(writer[e] >= i for e in n.get("inputs", ())):
            return False
        if n["op"] == "view" and entries[n["inputs"][0]]["storage"] != entries[n["outputs"][0]]["storage"]:
            return False
    kind: dict[int, str] = {}
    for n in nodes:
        for e in n["outputs"]:
            kind[e] = kind[n["inputs"][0]] if n["op"] == "view" else KIND[n["op"]]
    owners: dict[int, list[int]] = {}
    for e, ent in enumerate(entries):
        s = storage[ent["storage"]]
        if nbytes(ent["dtype"], ent["shape"]) > s["bytes"] or s["kind"] != kind[e]:
            return False
        if nodes[writer[e]]["op"] != "view":
            owners.setdefault(ent["storage"], []).append(e)
    if any(len(es) > 1 for es in owners.values()):
        return False
    live = storage_live(graph)
    pooled = [s for s in live if storage[s]["kind"] == "activation"]
    for a in pooled:
        sa = storage[a]
        if sa["offset"] % pools[sa["pool"]]["align"] or sa["offset"] + sa["bytes"] > pools[sa["pool"]]["bytes"]:
            return False
        for b in pooled:
            sb = storage[b]
            (p1, l1), (p2, l2) = live[a], live[b]
            if a < b and sa["pool"] == sb["pool"] and p1 <= l2 and p2 <= l1 and \
                    sa["offset"] < sb["offset"] + sb["bytes"] and sb["offset"] < sa["offset"] + sa["bytes"]:
                return False
    return True


def accepted(graph: dict) -> bool:
    try:
        check_graph(json.loads(json.dumps(graph)))
    except ExecutorError:
        return False
    return True


@pytest.mark.parametrize("seed", range(4))
def test_check_graph_agrees_with_the_oracle_on_changed_plans(seed):
    rng = np.random.default_rng(seed)
    verdicts = {True: 0, False: 0}
    for _ in range(150):
        g = random_graph(rng)
        plan_memory(g)
        assert safe(g) and accepted(g)  # every plan the planner makes is accepted
        for _ in range(4):
            bad = json.loads(json.dumps(g))
            r = rng.random()
            if r < 0.35:  # move one value to another storage
                e = int(rng.integers(len(bad["entries"])))
                bad["entries"][e]["storage"] = int(rng.integers(len(bad["storage"])))
            elif r < 0.7:  # move a storage within its pool (sometimes out of it, or misaligned)
                pooled = [st for st in bad["storage"] if "pool" in st]
                if not pooled:
                    continue
                st = pooled[int(rng.integers(len(pooled)))]
                st["offset"] = int(rng.integers(0, bad["pools"][st["pool"]]["bytes"] + 32)) // 8 * 8
            else:  # swap two nodes (the inputs/params lists follow)
                i, j = (int(k) for k in rng.choice(len(bad["nodes"]), 2, replace=False))
                bad["nodes"][i], bad["nodes"][j] = bad["nodes"][j], bad["nodes"][i]
                for key in ("inputs", "params"):
                    bad[key] = [k for k, n in enumerate(bad["nodes"]) if n["op"] == key[:-1]]
            verdict = safe(bad)
            assert accepted(bad) == verdict, json.dumps(bad)
            verdicts[verdict] += 1
    assert verdicts[True] > 50 and verdicts[False] > 50  # both kinds of change were tried
