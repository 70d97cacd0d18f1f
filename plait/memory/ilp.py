"""The exact offset-assignment algorithm of :mod:`plait.memory.algorithms`: an ILP solved by HiGHS.

Works in units of the alignment like :mod:`plait.memory.heuristics` (``u``, ``s``, ``e``). The model:

- an integer offset ``x_i`` per buffer that conflicts with another (the others sit at 0), and the
  integer pool size ``P`` with ``x_i + u_i <= P``, ``lower bound <= P <= upper bound``;
- a binary ``y_ij`` per conflicting pair, ``y_ij = 1`` when ``i`` lies below ``j`` (big-M disjunction with
  M = the upper bound): ``x_i + u_i <= x_j + M (1 - y_ij)`` and ``x_j + u_j <= x_i + M y_ij``;
- symmetry breaking: mirroring a plan (``x_i -> P - x_i - u_i``) keeps it valid and flips every
  ``y``, so the first pair's ``y`` is fixed to 1;
- minimize ``P``. The start plan (the best heuristic's) gives the upper bound (``P``'s bound and M);
  it is *not* handed to HiGHS as an incumbent (``setSolution``): with HiGHS 1.16 and presolve on, that
  made HiGHS declare a non-optimal incumbent optimal (the 5-buffer case of
  tests/memory/test_algorithms.py), so a proof is also cross-checked against HiGHS's dual bound.

Determinism: one thread, a fixed random seed and a work limit counted in branch-and-bound nodes
(``ILP_MAX_NODES``), never wall time; the ILP is only attempted with at most ``ILP_MAX_PAIRS``
conflicting pairs. ``highspy`` is imported only when the ILP runs.
"""

from __future__ import annotations

import numpy as np

ILP_MAX_PAIRS = 400
"""The ILP is attempted only when at most this many pairs of buffers conflict."""
ILP_MAX_NODES = 2_000
"""HiGHS's branch-and-bound node limit (``mip_max_nodes``): the deterministic work limit."""
ILP_SEED = 0

_BANNER_SHOWN = False


def conflicting_pairs(u: np.ndarray, s: np.ndarray, e: np.ndarray) -> list[tuple[int, int]]:
    """The pairs ``(i, j)``, ``i < j``, of non-empty buffers whose live ranges intersect."""
    live = np.flatnonzero(u > 0)
    by_start = live[np.lexsort((live, s[live]))]
    starts = s[by_start]
    pairs = []
    for k, i in enumerate(by_start.tolist()):
        # every intersecting pair has one buffer starting within the other's range
        stop = int(np.searchsorted(starts, e[i], side="right"))
        pairs.extend((min(i, j), max(i, j)) for j in by_start[k + 1:stop].tolist())
    return sorted(pairs)


def count_conflicting_pairs(u: np.ndarray, s: np.ndarray, e: np.ndarray) -> int:
    """How many pairs of non-empty buffers conflict (without listing them)."""
    live = u > 0
    order = np.argsort(s[live], kind="stable")
    starts = s[live][order]
    # each pair counted once, at the buffer that comes first in the start order
    stops = np.searchsorted(starts, e[live][order], side="right")
    return int((stops - np.arange(1, starts.size + 1)).sum())


def new_highs() -> object:
    """A silent HiGHS instance; the first one of a process prints a banner on the C stdout: silenced."""
    global _BANNER_SHOWN
    import highspy

    if _BANNER_SHOWN:
        return highspy.Highs()
    _BANNER_SHOWN = True
    import os
    import sys

    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):
        return highspy.Highs()
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        return highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def solve(u: np.ndarray, s: np.ndarray, e: np.ndarray, start: np.ndarray,
          lower: int) -> tuple[np.ndarray | None, bool]:
    """The ILP's plan in units (None when HiGHS found none within its limit) and whether it is proven
    optimal. ``start`` is a valid plan (its size is the upper bound; returned when it meets the lower
    bound ``lower`` or nothing conflicts), ``lower`` the lower bound."""
    upper = int((start + u).max(initial=0))
    pairs = conflicting_pairs(u, s, e)
    if upper <= lower or not pairs:
        return start.copy(), True
    import highspy

    active = sorted({i for p in pairs for i in p})
    col = {i: c for c, i in enumerate(active)}
    pool = len(active)
    n_cols = pool + 1 + len(pairs)
    inf = highspy.kHighsInf
    lo = np.zeros(n_cols)
    hi = np.ones(n_cols)
    for i, c in col.items():
        hi[c] = upper - int(u[i])
    lo[pool], hi[pool] = max(lower, int(u.max(initial=0))), upper
    lo[pool + 1] = 1.0  # symmetry breaking: in the first pair, the first buffer lies below
    cost = np.zeros(n_cols)
    cost[pool] = 1.0
    rows: list[tuple[list[int], list[float], float, float]] = []
    for i, c in col.items():  # x_i - P <= -u_i
        rows.append(([c, pool], [1.0, -1.0], -inf, -float(u[i])))
    for k, (i, j) in enumerate(pairs):
        y = pool + 1 + k
        rows.append(([col[i], col[j], y], [1.0, -1.0, float(upper)], -inf, float(upper - u[i])))
        rows.append(([col[i], col[j], y], [-1.0, 1.0, -float(upper)], -inf, -float(u[j])))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n_cols, len(rows)
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, lo, hi
    lp.row_lower_ = np.array([r[2] for r in rows])
    lp.row_upper_ = np.array([r[3] for r in rows])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.array([0] + list(np.cumsum([len(r[0]) for r in rows])), dtype=np.int32)
    lp.a_matrix_.index_ = np.array([c for r in rows for c in r[0]], dtype=np.int32)
    lp.a_matrix_.value_ = np.array([v for r in rows for v in r[1]], dtype=np.float64)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n_cols
    h = new_highs()
    for option, value in (("output_flag", False), ("threads", 1), ("random_seed", ILP_SEED),
                          ("mip_max_nodes", ILP_MAX_NODES), ("mip_rel_gap", 0.0), ("mip_abs_gap", 0.5)):
        h.setOptionValue(option, value)
    h.passModel(lp)
    h.run()
    info = h.getInfo()
    if info.primal_solution_status != 2:  # 2: feasible
        return None, False
    values = h.getSolution().col_value
    offsets = np.zeros(u.size, dtype=np.int64)
    for i, c in col.items():
        offsets[i] = int(round(values[c]))
    size = int((offsets + u).max(initial=0))
    # a proof only when HiGHS says optimal and its dual bound agrees (no integer size below this one)
    proved = h.getModelStatus() == highspy.HighsModelStatus.kOptimal and info.mip_dual_bound > size - 1 + 1e-6
    return offsets, proved
