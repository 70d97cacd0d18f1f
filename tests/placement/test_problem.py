"""The ILP against exhaustive search on random small DAGs (hypothesis)."""

import pytest
from hypothesis import given, settings, strategies as st

from plait.placement.problem import Problem, brute_force, solve


@st.composite
def problems(draw, max_nodes=9, max_pieces=3, min_nodes=1):
    n = draw(st.integers(min_nodes, max_nodes))
    m = draw(st.integers(1, max_pieces))
    cost = []
    for u in range(n):
        row = [draw(st.one_of(st.none(), st.integers(0, 50).map(float))) for _ in range(m)]
        cost.append(row)
    outputs = []
    for u in range(n):
        consumers = tuple(v for v in range(u + 1, n) if draw(st.booleans()) and draw(st.booleans()))
        tr = [[0.0 if a == b else float(draw(st.integers(0, 30))) for b in range(m)] for a in range(m)]
        outputs.append((consumers, tr))
    weights = [draw(st.integers(0, 10)) for _ in range(n)]
    capacity = [draw(st.one_of(st.none(), st.integers(0, 40))) for _ in range(m)]
    pinned = [draw(st.one_of(st.none(), st.none(), st.none(), st.integers(0, m - 1))) for _ in range(n)]
    label = [draw(st.integers(0, n)) for _ in range(n)]  # nodes with the same label < n/2 form a group (a region)
    groups = [tuple(u for u in range(n) if label[u] == g) for g in range(n // 2)]
    return Problem(cost, outputs, weights, capacity, pinned, [g for g in groups if len(g) > 1])


def _check_ilp_against_brute_force(pr):
    want, want_val = brute_force(pr)
    got, method = solve(pr)
    assert method == "ilp"
    if want is None:
        assert got is None
        return
    assert got is not None and pr.feasible(got)
    assert pr.objective(got) == pytest.approx(want_val, rel=1e-9, abs=1e-6)
    assert got == solve(pr)[0]  # deterministic


@settings(max_examples=150, deadline=None)
@given(problems())
def test_ilp_matches_brute_force(pr):
    _check_ilp_against_brute_force(pr)


@settings(max_examples=25, deadline=None)
@given(problems(max_nodes=12, max_pieces=2, min_nodes=10))
def test_ilp_matches_brute_force_on_twelve_calls(pr):
    """The issue's size: graphs of 10 to 12 calls (two pieces keep the exhaustive search at 4096)."""
    _check_ilp_against_brute_force(pr)


@settings(max_examples=100, deadline=None)
@given(problems())
def test_greedy_is_feasible_when_it_answers(pr):
    got, method = solve(pr, exact=False)
    assert method == "greedy"
    if got is not None:
        assert pr.feasible(got)
        assert pr.objective(got) >= brute_force(pr)[1] - 1e-9


def test_transfer_is_charged_once_per_destination_piece():
    # node 0 feeds 1 and 2; both must be on piece 1 while 0 is pinned on piece 0: one copy, not two
    pr = Problem([[1.0, 1.0], [None, 1.0], [None, 1.0]], [((1, 2), [[0, 5.0], [5.0, 0]]), ((), [[0, 0], [0, 0]]),
                                                          ((), [[0, 0], [0, 0]])], pinned=[0, None, None])
    assert solve(pr) == ([0, 1, 1], "ilp")
    assert pr.objective([0, 1, 1]) == 3 + 5


def test_transfer_keeps_a_chain_together():
    # alone, node 1 is cheaper on piece 1 (1 vs 2), but moving there and back costs 10
    tr = [[0, 5.0], [5.0, 0]]
    pr = Problem([[1.0, 9.0], [2.0, 1.0], [1.0, 9.0]], [((1,), tr), ((2,), tr), ((), tr)])
    assert solve(pr) == ([0, 0, 0], "ilp")


def test_too_large_for_the_ilp_falls_back_to_greedy(monkeypatch):
    import plait.placement.problem as problem

    tr = [[0, 5.0], [5.0, 0]]
    pr = Problem([[1.0, 9.0], [2.0, 1.0], [1.0, 9.0]], [((1,), tr), ((2,), tr), ((), tr)])
    monkeypatch.setattr(problem, "ILP_MAX_VARIABLES", 3)
    assert solve(pr) == ([0, 0, 0], "greedy")


def test_groups_go_to_one_piece():
    # nodes 0 and 2 form a region: alone, 0 is cheaper on piece 0 and 2 on piece 1; together piece 1 wins
    tr = [[0, 0.0], [0.0, 0]]
    out = [((), tr)] * 3
    pr = Problem([[1.0, 2.0], [1.0, 1.0], [9.0, 1.0]], out, groups=[(0, 2)])
    assert solve(pr) == ([1, 0, 1], "ilp") and solve(pr, exact=False) == ([1, 0, 1], "greedy")
    assert not pr.feasible([0, 0, 1]) and pr.allowed(0) == [0, 1]
    pr = Problem([[1.0, None], [1.0, 1.0], [None, 1.0]], out, groups=[(0, 2)])  # no piece runs both
    assert pr.allowed(0) == [] and solve(pr) == (None, "ilp")
    with pytest.raises(ValueError, match=r"placement problem: groups overlap at nodes \[1\]"):
        Problem([[1.0]] * 3, [((), [[0]])] * 3, groups=[(0, 1), (1, 2)])


def test_infeasible_and_empty():
    assert solve(Problem([[None, None]], [((), [[0, 0], [0, 0]])])) == (None, "ilp")
    pr = Problem([[1.0], [1.0]], [((), [[0]]), ((), [[0]])], weights=[5, 5], capacity=[8])
    assert solve(pr) == (None, "ilp") and solve(pr, exact=False) == (None, "greedy")
    assert solve(Problem([], [])) == ([], "ilp")


def test_ties_go_to_the_earlier_piece():
    tr = [[0, 0, 1.0], [0, 0, 1.0], [1.0, 1.0, 0]]
    pr = Problem([[3.0, 3.0, 3.0], [2.0, 2.0, 2.0], [1.0, 1.0, 5.0]], [((1, 2), tr), ((2,), tr), ((), tr)])
    assert solve(pr) == ([0, 0, 0], "ilp")
    assert solve(pr, exact=False) == ([0, 0, 0], "greedy")
    pr.pinned = [1, None, None]  # transfers between pieces 0 and 1 are free: the rest still go to 0
    assert solve(pr) == ([1, 0, 0], "ilp")
