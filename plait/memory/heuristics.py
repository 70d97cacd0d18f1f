"""The heuristic offset-assignment algorithms of :mod:`plait.memory.algorithms`, on packed arrays.

Every function here works in *units* of the alignment: ``u[i]`` is buffer ``i``'s size rounded up to the
alignment and divided by it, ``s[i]``/``e[i]`` its live range with time compressed to ``0..T-1`` (two
buffers conflict iff their ranges intersect and both sizes are non-zero). Offsets come back in units,
so every plan is aligned by construction. Nothing here validates input: ``algorithms.py`` does.

- :func:`stacked` is the placement of TVM USMP's greedy algorithms: a buffer goes right above the
  highest already placed buffer it conflicts with (``max(offset + size)`` over them), found with one
  ``max`` over a per-time "top" array and updated the same way, so a pass is O(n·T) in numpy slices.
- :func:`first_fit` is TensorFlow Lite Micro's ``GreedyMemoryPlanner`` placement: the placed buffers
  that conflict, sorted by offset, are walked and the buffer goes into the first gap large enough
  (below, between or above them).
- :func:`hill_climb` is USMP's hill climb made deterministic: first-fit placement of an order that
  starts as the size order and is perturbed by swapping a buffer that reaches the top of the pool with
  an earlier placed buffer it conflicts with; a perturbation is kept when the pool does not grow. The
  random choices come from ``random.Random(HILL_CLIMB_SEED)`` and the budget is a count of
  iterations (:func:`hill_climb_iterations`), never wall time.
"""

from __future__ import annotations

import random

import numpy as np

HILL_CLIMB_SEED = 0
HILL_CLIMB_PLACEMENTS = 20_000
"""The hill climb's work budget, in buffer placements: iterations = this / n, within the bounds below."""
HILL_CLIMB_MIN_ITERATIONS = 4
HILL_CLIMB_MAX_ITERATIONS = 300


def conflict_counts(u: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """For each buffer, how many other (non-empty) buffers it conflicts with (0 for empty ones)."""
    live = u > 0
    ls, le = np.sort(s[live]), np.sort(e[live])
    # j conflicts with i unless it starts after i ends or ends before i starts
    n_after = ls.size - np.searchsorted(ls, e, side="right")
    n_before = np.searchsorted(le, s, side="left")
    return np.where(live, ls.size - n_after - n_before - 1, 0)


def size_order(u: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Buffers by size descending; ties: the longer live range first, then the input index."""
    return np.lexsort((np.arange(u.size), -(e - s), -u))


def conflicts_order(u: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Buffers by number of conflicts descending; ties: size descending, then the input index."""
    return np.lexsort((np.arange(u.size), -u, -conflict_counts(u, s, e)))


def stacked(order: np.ndarray, u: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """USMP's greedy placement of ``order``: each buffer right above its highest placed conflict."""
    offsets = np.zeros(u.size, dtype=np.int64)
    top = np.zeros(int(e.max(initial=-1)) + 1, dtype=np.int64)  # top[t]: highest end of a buffer live at t
    for i in order.tolist():
        if u[i] == 0:
            continue
        lo, hi = int(s[i]), int(e[i]) + 1
        off = int(top[lo:hi].max())
        offsets[i] = off
        top[lo:hi] = off + int(u[i])
    return offsets


def first_fit(order: np.ndarray, u: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """TFLM's greedy placement of ``order``: each buffer into the first gap among its placed conflicts."""
    S, E, U = s[order], e[order], u[order]
    placed = np.zeros(order.size, dtype=np.int64)
    _first_fit_from(S, E, U, placed, 0)
    offsets = np.zeros(u.size, dtype=np.int64)
    offsets[order] = placed
    return offsets


def _first_fit_from(S: np.ndarray, E: np.ndarray, U: np.ndarray, O: np.ndarray, begin: int) -> None:
    """Place positions ``begin..`` of an order (arrays by position) by first fit; ``O[:begin]`` is kept."""
    for k in range(begin, U.size):
        w = U[k]
        if w == 0:
            O[k] = 0
            continue
        idx = np.flatnonzero((S[:k] <= E[k]) & (E[:k] >= S[k]) & (U[:k] > 0))
        if idx.size == 0:
            O[k] = 0
            continue
        lo = O[idx]
        by_offset = np.argsort(lo, kind="stable")
        lo = lo[by_offset]
        below = np.maximum.accumulate(lo + U[idx][by_offset])  # the highest end among the first j+1
        candidates = np.concatenate(([0], below))  # where the buffer may go: 0, or above the first j+1
        room = np.concatenate((lo, [below[-1] + w])) - candidates  # up to the next one's offset
        O[k] = candidates[int(np.argmax(room >= w))]


def live_peak(u: np.ndarray, s: np.ndarray, e: np.ndarray) -> int:
    """The most units live at one step: the lower bound of every plan (no plan can be smaller)."""
    if u.size == 0:
        return 0
    live = np.zeros(int(e.max()) + 2, dtype=np.int64)
    np.add.at(live, s, u)
    np.add.at(live, e + 1, -u)
    return int(np.cumsum(live).max())


def hill_climb_iterations(n: int) -> int:
    """The hill climb's iteration budget for ``n`` buffers (a count: the same input, the same plan)."""
    if n == 0:
        return 0
    return min(HILL_CLIMB_MAX_ITERATIONS, max(HILL_CLIMB_MIN_ITERATIONS, HILL_CLIMB_PLACEMENTS // n))


def hill_climb(u: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """USMP's hill climb over first-fit orders, deterministic (fixed seed, counted iterations; it stops
    early once its plan reaches the lower bound, which no plan can beat)."""
    order = size_order(u, s, e)
    S, E, U = s[order], e[order], u[order]
    cur = np.zeros(order.size, dtype=np.int64)
    _first_fit_from(S, E, U, cur, 0)
    cur_size = int((cur + U).max(initial=0))
    best_order, best_placed, best_size = order.copy(), cur, cur_size
    rng = random.Random(HILL_CLIMB_SEED)
    floor = live_peak(u, s, e)  # a plan at the lower bound cannot be improved: stop there
    for _ in range(hill_climb_iterations(order.size)):
        if best_size <= floor:
            break
        tops = np.flatnonzero((cur + U == cur_size) & (U > 0))
        if tops.size == 0:
            break
        p = int(tops[rng.randrange(tops.size)])
        earlier = np.flatnonzero((S[:p] <= E[p]) & (E[:p] >= S[p]) & (U[:p] > 0))
        if earlier.size == 0:
            continue
        q = int(earlier[rng.randrange(earlier.size)])
        for a in (order, S, E, U):
            a[p], a[q] = a[q], a[p]
        new = cur.copy()
        _first_fit_from(S, E, U, new, q)
        new_size = int((new + U).max(initial=0))
        if new_size <= cur_size:  # keep it (a sideways move too: it lets the climb cross plateaus)
            cur, cur_size = new, new_size
            if new_size < best_size:
                best_order, best_placed, best_size = order.copy(), new, new_size
        else:
            for a in (order, S, E, U):
                a[p], a[q] = a[q], a[p]
    offsets = np.zeros(u.size, dtype=np.int64)
    offsets[best_order] = best_placed
    return offsets
