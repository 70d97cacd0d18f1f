"""The placement problem in numbers, and its exact (ILP, HiGHS) and fallback (greedy) solvers.

Nodes ``0..n-1`` (calls, in a topological order), pieces ``0..m-1``.

- ``cost[u][p]``: objective value of node ``u`` on piece ``p``; ``None`` when ``p`` cannot run it;
- ``outputs[u]``: ``(consumers, transfer)``: when ``u`` is on piece ``a`` and at least one consumer is
  on ``b != a``, the value is copied once to ``b`` at ``transfer[a][b]`` (one copy per producer and
  destination piece, as device_copy insertion will do);
- ``weights[u]`` bytes of constant weights the node keeps on its piece; ``capacity[p]`` bytes or None;
- ``pinned[u]``: a piece index or None;
- ``groups``: tuples of nodes that must all go to the same piece (a claimed region): a node of a group
  may go only where every node of the group may (:meth:`Problem.allowed`).

:func:`solve` returns ``(assignment, method)``; method is ``"ilp"`` (optimal), or ``"greedy"`` (greedy
in topological order + single-node moves, not proven optimal) when the ILP is too large, highspy is
missing, or HiGHS hits its time limit without an optimum. Same problem => same answer.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Sequence

ILP_MAX_VARIABLES = 200_000
TIME_LIMIT_S = 10.0


@dataclass
class Problem:
    cost: list[list[float | None]]
    outputs: list[tuple[tuple[int, ...], list[list[float]]]]
    weights: list[int] = field(default_factory=list)
    capacity: list[int | None] = field(default_factory=list)
    pinned: list[int | None] = field(default_factory=list)
    groups: list[tuple[int, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        n, m = len(self.cost), self.num_pieces
        self.weights = list(self.weights) or [0] * n
        self.capacity = list(self.capacity) or [None] * m
        self.pinned = list(self.pinned) or [None] * n
        self.groups = [tuple(sorted(set(g))) for g in self.groups if len(set(g)) > 1]
        seen: set[int] = set()
        for g in self.groups:
            if seen & set(g):
                raise ValueError(f"placement problem: groups overlap at nodes {sorted(seen & set(g))}")
            seen |= set(g)

    @property
    def num_pieces(self) -> int:
        return len(self.cost[0]) if self.cost else 0

    def group(self, u: int) -> tuple[int, ...]:
        """The nodes that must share ``u``'s piece (``(u,)`` when it is in no group)."""
        for g in self.groups:
            if u in g:
                return g
        return (u,)

    def _allowed_alone(self, u: int) -> list[int]:
        if self.pinned[u] is not None:
            return [self.pinned[u]] if self.cost[u][self.pinned[u]] is not None else []
        return [p for p, c in enumerate(self.cost[u]) if c is not None]

    def allowed(self, u: int) -> list[int]:
        ok = self._allowed_alone(u)
        for v in self.group(u):
            if v != u:
                other = set(self._allowed_alone(v))
                ok = [p for p in ok if p in other]
        return ok

    def units(self) -> list[tuple[int, ...]]:
        """Groups and single nodes, ordered by their first node: what moves together."""
        grouped = {u for g in self.groups for u in g}
        out = [g for g in self.groups] + [(u,) for u in range(len(self.cost)) if u not in grouped]
        return sorted(out)

    def feasible(self, assign: Sequence[int]) -> bool:
        used = [0] * self.num_pieces
        for u, p in enumerate(assign):
            if p not in self.allowed(u):
                return False
            used[p] += self.weights[u]
        if any(len({assign[u] for u in g}) > 1 for g in self.groups):
            return False
        return all(cap is None or used[p] <= cap for p, cap in enumerate(self.capacity))

    def objective(self, assign: Sequence[int]) -> float:
        total = sum(self.cost[u][p] for u, p in enumerate(assign))
        for u, (consumers, tr) in enumerate(self.outputs):
            a = assign[u]
            for b in sorted({assign[v] for v in consumers} - {a}):
                total += tr[a][b]
        return total


def brute_force(pr: Problem) -> tuple[list[int] | None, float]:
    """Exhaustive search (for tests): the first optimal assignment in lexicographic order."""
    best, best_val = None, float("inf")
    for assign in itertools.product(*(pr.allowed(u) for u in range(len(pr.cost)))):
        if pr.feasible(assign):
            val = pr.objective(assign)
            if val < best_val - 1e-12 * max(1.0, abs(best_val) if best_val != float("inf") else 1.0):
                best, best_val = list(assign), val
    return best, best_val


def solve(pr: Problem, time_limit: float = TIME_LIMIT_S, exact: bool = True) -> tuple[list[int] | None, str]:
    """An optimal assignment (None when infeasible) and the method that found it."""
    if any(not pr.allowed(u) for u in range(len(pr.cost))):
        return None, "ilp" if exact else "greedy"
    if not pr.cost:
        return [], "ilp" if exact else "greedy"
    if exact:
        try:
            import highspy  # noqa: F401
        except ImportError:
            exact = False
    if exact and _num_vars(pr) <= ILP_MAX_VARIABLES:
        got = _ilp(pr, time_limit)
        if got is None:
            return None, "ilp"
        if got != "timeout":
            return _improve(pr, got), "ilp"  # cleans up differences below HiGHS's tolerances
    return _greedy(pr), "greedy"


def _num_vars(pr: Problem) -> int:
    m = pr.num_pieces
    return len(pr.cost) * m + sum(m * m for cons, _ in pr.outputs if cons)


def _ilp(pr: Problem, time_limit: float) -> list[int] | None | str:
    import highspy
    import numpy as np

    n, m = len(pr.cost), pr.num_pieces
    scale = max([c for row in pr.cost for c in row if c] + [t for _, tr in pr.outputs for row in tr for t in row] + [0])
    scale = 1.0 / scale if scale > 0 else 1.0
    from plait.memory.ilp import new_highs

    h = new_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_rel_gap", 1e-9)
    h.setOptionValue("mip_abs_gap", 0.0)
    h.setOptionValue("threads", 1)
    h.setOptionValue("random_seed", 0)
    inf = highspy.kHighsInf
    col = 0
    x: dict[tuple[int, int], int] = {}
    costs, lower, upper, integral = [], [], [], []

    def add(c: float, ub: float, is_int: bool) -> int:
        nonlocal col
        costs.append(c * scale)
        lower.append(0.0)
        upper.append(ub)
        integral.append(is_int)
        col += 1
        return col - 1

    for u in range(n):
        allowed = set(pr.allowed(u))
        for p in range(m):
            if p in allowed:
                x[u, p] = add(pr.cost[u][p], 1.0, True)
    rows: list[tuple[dict[int, float], float, float]] = []
    for u in range(n):
        rows.append(({x[u, p]: 1.0 for p in range(m) if (u, p) in x}, 1.0, 1.0))
    for g in pr.groups:  # a claimed region: x[v,p] == x[g0,p] (allowed() is the same for every node of g)
        for v in g[1:]:
            for p in range(m):
                if (g[0], p) in x:
                    rows.append(({x[v, p]: 1.0, x[g[0], p]: -1.0}, 0.0, 0.0))
    for u, (consumers, tr) in enumerate(pr.outputs):
        for a in range(m):
            if (u, a) not in x:
                continue
            for b in range(m):
                if b == a or not any((v, b) in x for v in consumers):
                    continue
                z = add(tr[a][b], 1.0, False)
                for v in consumers:  # z >= x[u,a] + x[v,b] - 1
                    if (v, b) in x:
                        rows.append(({z: 1.0, x[u, a]: -1.0, x[v, b]: -1.0}, -1.0, inf))
    for p, cap in enumerate(pr.capacity):
        if cap is not None:
            coeffs = {x[u, p]: float(pr.weights[u]) for u in range(n) if (u, p) in x and pr.weights[u]}
            if coeffs:
                rows.append((coeffs, -inf, float(cap)))
    lp = highspy.HighsLp()
    lp.num_col_ = col
    lp.num_row_ = len(rows)
    lp.col_cost_ = np.array(costs, dtype=np.float64)
    lp.col_lower_ = np.array(lower, dtype=np.float64)
    lp.col_upper_ = np.array(upper, dtype=np.float64)
    lp.row_lower_ = np.array([r[1] for r in rows], dtype=np.float64)
    lp.row_upper_ = np.array([r[2] for r in rows], dtype=np.float64)
    starts, index, value = [0], [], []
    for coeffs, _, _ in rows:
        for c, v in sorted(coeffs.items()):
            index.append(c)
            value.append(v)
        starts.append(len(index))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(value, dtype=np.float64)
    lp.integrality_ = [highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous for i in integral]
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return None
    if status != highspy.HighsModelStatus.kOptimal:
        return "timeout"
    sol = h.getSolution().col_value
    return [max((p for p in range(m) if (u, p) in x), key=lambda p: (sol[x[u, p]], -p)) for u in range(n)]


def _greedy(pr: Problem) -> list[int] | None:
    """Topological greedy (cheapest piece given the producers' pieces, within capacity; a group is placed
    whole when its first node comes), then moves of single nodes or whole groups while they lower the
    objective. Deterministic: ties go to the lower piece index."""
    n, m = len(pr.cost), pr.num_pieces
    producers: list[list[int]] = [[] for _ in range(n)]
    for u, (consumers, _) in enumerate(pr.outputs):
        for v in consumers:
            producers[v].append(u)
    used = [0] * m
    for u in range(n):  # pinned weights first
        if pr.pinned[u] is not None:
            used[pr.pinned[u]] += pr.weights[u]
    assign: list[int] = [-1] * n
    for u in range(n):
        if assign[u] != -1:
            continue
        unit = pr.group(u)
        inside = set(unit)
        extra = sum(pr.weights[v] for v in unit if pr.pinned[v] is None)
        best = None
        for p in pr.allowed(u):
            cap = pr.capacity[p]
            if cap is not None and used[p] + extra > cap:
                continue
            val = sum(pr.cost[v][p] for v in unit)
            val += sum(pr.outputs[w][1][assign[w]][p] for v in unit for w in producers[v]
                       if w not in inside and assign[w] not in (-1, p))
            if best is None or val < best[0]:
                best = (val, p)
        if best is None:
            return None
        for v in unit:
            assign[v] = best[1]
        used[best[1]] += extra
    return _improve(pr, assign)


def _improve(pr: Problem, assign: list[int]) -> list[int]:
    """Moves of single nodes (or whole groups) while they lower the objective (first improving move, in
    order); a move that keeps the objective (within 1e-12 relative) to a lower piece index is taken too:
    ties go to the earlier piece, whichever optimum the solver found. Terminates: each move lowers the
    objective or keeps it and lowers the sum of piece indices."""
    current = pr.objective(assign)
    units = pr.units()
    improved = True
    while improved:
        improved = False
        for unit in units:
            u = unit[0]
            for p in pr.allowed(u):
                if p == assign[u]:
                    continue
                trial = list(assign)
                for v in unit:
                    trial[v] = p
                if pr.feasible(trial):
                    val = pr.objective(trial)
                    tol = 1e-12 * max(1.0, abs(current))
                    if val < current - tol or (p < assign[u] and val <= current + tol):
                        assign, current, improved = trial, min(val, current), True
    return assign
