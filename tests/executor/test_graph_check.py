"""check_graph against a brute-force oracle: on random planned graphs whose storage or node order is changed,
it accepts exactly the graphs in which no two values live at the same time share storage, every value fits
its storage, params and inputs are alone in theirs, and every value is written before it is read."""

import json

import numpy as np
import pytest

from plait.executor import ExecutorError, check_graph
from plait.executor.graph_check import nbytes
from plait.memory.plan import plan_memory

from tests.executor.test_memory_plan import random_graph

KIND = {"input": "input", "param": "param", "call": "activation", "copy": "activation"}


def safe(graph: dict) -> bool:
    """The oracle: every pair of values compared directly."""
    nodes, entries, storage = graph["nodes"], graph["entries"], graph["storage"]
    writer = {e: i for i, n in enumerate(nodes) for e in n["outputs"]}
    if [i for i, n in enumerate(nodes) if n["op"] == "input"] != graph["inputs"] or \
            [i for i, n in enumerate(nodes) if n["op"] == "param"] != graph["params"]:
        return False
    for i, n in enumerate(nodes):
        if any(writer[e] >= i for e in n.get("inputs", ())):
            return False
    live = {}
    for e, ent in enumerate(entries):
        s = storage[ent["storage"]]
        if nbytes(ent["dtype"], ent["shape"]) > s["bytes"] or s["kind"] != KIND[nodes[writer[e]]["op"]]:
            return False
        uses = [i for i, n in enumerate(nodes) if e in n.get("inputs", ())]
        live[e] = (writer[e], len(nodes) if e in graph["outputs"] else max([writer[e], *uses]))
    for a in live:
        for b in live:
            if a < b and entries[a]["storage"] == entries[b]["storage"]:
                if storage[entries[a]["storage"]]["kind"] in ("input", "param"):
                    return False
                (p1, l1), (p2, l2) = live[a], live[b]
                if p1 <= l2 and p2 <= l1:
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
            if rng.random() < 0.7:  # move one value to another storage
                e = int(rng.integers(len(bad["entries"])))
                bad["entries"][e]["storage"] = int(rng.integers(len(bad["storage"])))
            else:  # swap two nodes (the inputs/params lists follow)
                i, j = (int(k) for k in rng.choice(len(bad["nodes"]), 2, replace=False))
                bad["nodes"][i], bad["nodes"][j] = bad["nodes"][j], bad["nodes"][i]
                for key in ("inputs", "params"):
                    bad[key] = [k for k, n in enumerate(bad["nodes"]) if n["op"] == key[:-1]]
            verdict = safe(bad)
            assert accepted(bad) == verdict, json.dumps(bad)
            verdicts[verdict] += 1
    assert verdicts[True] > 50 and verdicts[False] > 50  # both kinds of change were tried
