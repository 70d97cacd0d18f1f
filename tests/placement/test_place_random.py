"""place() on random Relay DAGs with random capabilities, costs and pins equals a brute-force optimum."""

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from plait import relay
from plait.placement.cost import CostModel, Estimate
from plait.placement.rules import PlacementError, parse_place
from plait.placement.solver import place
from plait.relay.expr import Function, Tuple, TupleGetItem
from plait.relay.infer import infer_expr
from plait.target import CompositeTarget

CT = CompositeTarget("a: c; b: c; c: c")
NAMES = CT.names


class Table(CostModel):
    def __init__(self, costs, link):
        super().__init__(link_bytes_per_s=link, switch_s=1.0)
        self.costs = costs

    def call_cost(self, call, piece):
        s = self.costs[call.meta["name"], piece.name]
        return Estimate(s, s, "test")


@st.composite
def dags(draw, sizes=(1, 7), names=NAMES):
    n = draw(st.integers(*sizes))
    x = relay.var("x", (1, 16))
    values, calls, producers = [x], [], []
    for k in range(n):
        picks = sorted(set(draw(st.lists(st.integers(0, len(values) - 1), min_size=1, max_size=2))))
        args = [values[i] for i in picks]
        if len(args) == 2 and draw(st.booleans()):  # through a tuple and projections
            t = Tuple(tuple(args))
            y = relay.call("add", TupleGetItem(t, 0), TupleGetItem(t, 1), meta={"name": f"n{k}"})
        elif len(args) == 2:
            y = relay.call("add", *args, meta={"name": f"n{k}"})
        else:
            y = relay.call("nn.relu", args[0], meta={"name": f"n{k}"})
        values.append(y)
        calls.append(y)
        producers.append([i - 1 for i in picks if i > 0])
    f = Function((x,), Tuple(tuple(calls)))  # every call is an output: all stay live
    infer_expr(f)
    costs = {(f"n{k}", p): float(draw(st.integers(0, 20))) for k in range(n) for p in names}
    pins = {k: draw(st.sampled_from(names)) for k in range(n) if draw(st.integers(0, 4)) == 0}
    link = float(draw(st.sampled_from([16.0, 64.0, 1e9])))  # 64 bytes per value: 4 / 1 / ~0 + 1 s switch
    return f, calls, producers, costs, pins, link


def _brute(calls, producers, costs, pins, link, names=NAMES):
    best = None
    choices = [[pins[k]] if k in pins else list(names) for k in range(len(calls))]
    for assign in itertools.product(*choices):
        total = sum(costs[f"n{k}", p] for k, p in enumerate(assign))
        for u in range(len(calls)):
            dests = {assign[v] for v in range(len(calls)) if u in producers[v]} - {assign[u]}
            total += len(dests) * (64 / link + 1.0)
        best = total if best is None else min(best, total)
    return best


@settings(max_examples=60, deadline=None)
@given(dags())
def test_place_matches_brute_force(case):
    f, calls, producers, costs, pins, link = case
    rules = ",".join(f"n{k}={p}" for k, p in pins.items())
    a = place(f, CT, "latency", parse_place(rules, CT) if rules else (), cost_model=Table(costs, link))
    assert a.method == "ilp"
    assert a.total == pytest.approx(_brute(calls, producers, costs, pins, link), rel=1e-9, abs=1e-6)
    for k, p in pins.items():
        assert a[calls[k]].piece == p
    again = place(f, CT, "latency", parse_place(rules, CT) if rules else (), cost_model=Table(costs, link))
    assert [p.piece for p in again] == [p.piece for p in a]


CT2 = CompositeTarget("a: c; b: c")


@settings(max_examples=20, deadline=None)
@given(dags(sizes=(10, 12), names=CT2.names))
def test_place_matches_brute_force_on_twelve_calls(case):
    """Relay DAGs of 10 to 12 calls on two pieces (4096 assignments to search)."""
    f, calls, producers, costs, pins, link = case
    rules = ",".join(f"n{k}={p}" for k, p in pins.items())
    a = place(f, CT2, "latency", parse_place(rules, CT2) if rules else (), cost_model=Table(costs, link))
    assert a.method == "ilp"
    assert a.total == pytest.approx(_brute(calls, producers, costs, pins, link, CT2.names), rel=1e-9, abs=1e-6)
    for k, p in pins.items():
        assert a[calls[k]].piece == p
