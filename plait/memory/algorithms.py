"""Offset assignment for a static memory pool: where each buffer lives so that no two buffers live at
the same time share a byte, and the pool is small. Pure: buffers are sizes and live ranges, nothing more.

    from plait.memory.algorithms import LiveBuffer, plan_pool
    plan = plan_pool([LiveBuffer(64, 0, 1, "a"), LiveBuffer(32, 1, 2, "b"), LiveBuffer(64, 2, 3, "c")])
    plan.offsets, plan.size, plan.algorithm, plan.lower_bound, plan.optimal

Two buffers *conflict* when their live ranges ``[start, end]`` (time steps, both ends included)
intersect and both have a non-zero size. Sizes are rounded up to the alignment for packing, so every
offset is a multiple of it. Algorithms (:data:`ALGORITHMS`):

- ``greedy_by_size`` / ``greedy_by_conflicts`` (TVM USMP): buffers by size (ties: longer live range,
  then input index) or by number of conflicts (ties: size, then index); each goes right above the
  highest already placed buffer it conflicts with;
- ``hill_climb`` (TVM USMP): first-fit placement of an order perturbed by swaps, deterministic
  (fixed seed, counted iterations);
- ``tflm_greedy`` (TensorFlow Lite Micro's ``GreedyMemoryPlanner``): by size, each into the first gap
  large enough among the placed buffers it conflicts with;
- ``ilp`` (exact, HiGHS): only with at most ``ILP_MAX_PAIRS`` conflicting pairs, bounded by a node
  count; may prove its plan optimal.

:func:`plan_pool` with ``algorithm="auto"`` runs the suite and keeps the smallest valid plan (ties:
the earliest in :data:`ALGORITHMS`), always the same plan for the same buffers. The heuristics are in
:mod:`plait.memory.heuristics`, the ILP in :mod:`plait.memory.ilp`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from plait.errors import PlaitError
from plait.memory import heuristics, ilp

ALGORITHMS = ("greedy_by_size", "greedy_by_conflicts", "hill_climb", "tflm_greedy", "ilp")
DEFAULT_ALIGN = 16


class MemoryPlanError(PlaitError):
    """Bad input to the memory planner (a size, a live range, the alignment, an algorithm's name), or a
    plan in which two buffers live at the same time share bytes, or an offset is misaligned."""


@dataclass(frozen=True)
class LiveBuffer:
    """A buffer to place: ``size`` bytes, live from time step ``start`` to ``end`` (both included)."""

    size: int
    start: int
    end: int
    name: str = ""


@dataclass(frozen=True)
class PoolPlan:
    """A pool's plan: each buffer's ``offsets`` (input order), the pool ``size`` in bytes (0 for no
    buffers), the ``algorithm`` whose plan was kept, the ``lower_bound``, the pool size of every
    algorithm that ran (``sizes``), and whether ``size`` is proven ``optimal`` (the ILP proved it, or
    it equals the lower bound)."""

    offsets: tuple[int, ...]
    size: int
    algorithm: str
    lower_bound: int
    sizes: Mapping[str, int]
    optimal: bool


def _label(buffers: Sequence[LiveBuffer], i: int) -> str:
    name = buffers[i].name
    return f"'{name}'" if name else f"#{i}"


def _check_align(align: object) -> int:
    if isinstance(align, bool) or not isinstance(align, int) or align < 1 or align & (align - 1):
        raise MemoryPlanError(f"the alignment must be a power of two, got {align!r}")
    return align


def _pack(buffers: Sequence[LiveBuffer], align: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate ``buffers``; their sizes in units of ``align`` (rounded up) and live ranges with time
    compressed to ``0..T-1`` (which keeps every intersection)."""
    _check_align(align)
    for i, b in enumerate(buffers):
        if not isinstance(b, LiveBuffer):
            raise MemoryPlanError(f"buffer #{i} is a {type(b).__name__}, not a LiveBuffer")
        for field in ("size", "start", "end"):
            value = getattr(b, field)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise MemoryPlanError(f"buffer {_label(buffers, i)}: {field} must be an int, got {value!r}")
        if b.size < 0:
            raise MemoryPlanError(f"buffer {_label(buffers, i)}: size {b.size} is negative")
        if b.start > b.end:
            raise MemoryPlanError(f"buffer {_label(buffers, i)}: live range starts at {b.start} after it "
                                  f"ends at {b.end}")
    units = np.array([-(-b.size // align) for b in buffers], dtype=np.int64)
    start = np.array([b.start for b in buffers], dtype=np.int64)
    end = np.array([b.end for b in buffers], dtype=np.int64)
    times = np.unique(np.concatenate((start, end)))
    return units, np.searchsorted(times, start), np.searchsorted(times, end)


def lower_bound(buffers: Sequence[LiveBuffer], align: int = DEFAULT_ALIGN) -> int:
    """No plan is smaller: the maximum over time of the bytes live, each size rounded up to ``align``."""
    u, s, e = _pack(buffers, align)
    return heuristics.live_peak(u, s, e) * align


def check_plan(buffers: Sequence[LiveBuffer], offsets: Sequence[int], align: int = DEFAULT_ALIGN) -> None:
    """Raise :class:`MemoryPlanError` unless ``offsets`` is a valid plan of ``buffers``: one offset per
    buffer, each a non-negative multiple of ``align``, and no two buffers live at the same time sharing
    a byte (the message names the first such pair by name, else by index, the time step and bytes)."""
    _pack(buffers, align)
    if len(offsets) != len(buffers):
        raise MemoryPlanError(f"the plan has {len(offsets)} offsets for {len(buffers)} buffers")
    for i, off in enumerate(offsets):
        if isinstance(off, bool) or not isinstance(off, (int, np.integer)) or off < 0 or off % align:
            raise MemoryPlanError(f"buffer {_label(buffers, i)} is at offset {off!r}, not a non-negative "
                                  f"multiple of the alignment {align}")
    live = [i for i, b in enumerate(buffers) if b.size > 0]
    live.sort(key=lambda i: (buffers[i].start, i))
    off = np.array([offsets[i] for i in live], dtype=np.int64)
    top = off + np.array([buffers[i].size for i in live], dtype=np.int64)
    # every intersecting pair has one buffer starting within the other's range
    stops = np.searchsorted(np.array([buffers[i].start for i in live], dtype=np.int64),
                            np.array([buffers[i].end for i in live], dtype=np.int64), side="right").tolist()
    for k, i in enumerate(live):
        stop = stops[k]
        if stop <= k + 1:
            continue
        clash = np.flatnonzero((off[k + 1:stop] < top[k]) & (top[k + 1:stop] > off[k]))
        if clash.size:
            j = live[k + 1 + int(clash[0])]
            a, b = min(i, j), max(i, j)
            step = max(buffers[a].start, buffers[b].start)
            lo = max(offsets[a], offsets[b])
            hi = min(offsets[a] + buffers[a].size, offsets[b] + buffers[b].size)
            raise MemoryPlanError(f"buffers {_label(buffers, a)} and {_label(buffers, b)} are both live at "
                                  f"step {step} and share bytes [{lo}, {hi})")


def _unknown(algorithm: object, known: Sequence[str]) -> MemoryPlanError:
    return MemoryPlanError(f"unknown memory planning algorithm {algorithm!r}; known: {', '.join(known)}")


def _run(name: str, u: np.ndarray, s: np.ndarray, e: np.ndarray,
         start: np.ndarray | None = None) -> tuple[np.ndarray | None, bool]:
    """One algorithm's plan in units (None: the ILP found none) and whether it is proven optimal."""
    if name == "greedy_by_size":
        return heuristics.stacked(heuristics.size_order(u, s, e), u, s, e), False
    if name == "greedy_by_conflicts":
        return heuristics.stacked(heuristics.conflicts_order(u, s, e), u, s, e), False
    if name == "hill_climb":
        return heuristics.hill_climb(u, s, e), False
    if name == "tflm_greedy":
        return heuristics.first_fit(heuristics.size_order(u, s, e), u, s, e), False
    if start is None:
        start = heuristics.first_fit(heuristics.size_order(u, s, e), u, s, e)
    return ilp.solve(u, s, e, start, heuristics.live_peak(u, s, e))


def _ilp_too_large(u: np.ndarray, s: np.ndarray, e: np.ndarray) -> int | None:
    """The number of conflicting pairs when it is over the ILP's limit, else None."""
    pairs = ilp.count_conflicting_pairs(u, s, e)
    return pairs if pairs > ilp.ILP_MAX_PAIRS else None


def allocate(buffers: Sequence[LiveBuffer], algorithm: str, align: int = DEFAULT_ALIGN) -> tuple[int, ...]:
    """The byte offset of each buffer (input order) by one algorithm of :data:`ALGORITHMS`; every
    offset a multiple of ``align``. ``"ilp"`` takes the ``tflm_greedy`` plan's size as its upper bound
    and raises :class:`MemoryPlanError` when the buffers have too many conflicting pairs for it."""
    if algorithm not in ALGORITHMS:
        raise _unknown(algorithm, ALGORITHMS)
    return _plan_one(buffers, algorithm, align)[0]


def _plan_one(buffers: Sequence[LiveBuffer], algorithm: str, align: int) -> tuple[tuple[int, ...], bool]:
    u, s, e = _pack(buffers, align)
    if algorithm == "ilp":
        too_many = _ilp_too_large(u, s, e)
        if too_many is not None:
            raise MemoryPlanError(f"the ilp algorithm plans at most {ilp.ILP_MAX_PAIRS} conflicting buffer "
                                  f"pairs; these buffers have {too_many}")
    units, proved = _run(algorithm, u, s, e)
    if units is None:
        raise MemoryPlanError(f"the ilp algorithm found no plan within its work limit of "
                              f"{ilp.ILP_MAX_NODES} branch-and-bound nodes")
    offsets = tuple(int(o) * align for o in units)
    check_plan(buffers, offsets, align)
    return offsets, proved


def _pool_size(buffers: Sequence[LiveBuffer], offsets: Sequence[int], align: int) -> int:
    return max((o + -(-b.size // align) * align for o, b in zip(offsets, buffers)), default=0)


def plan_pool(buffers: Sequence[LiveBuffer], align: int = DEFAULT_ALIGN, algorithm: str = "auto") -> PoolPlan:
    """Plan one pool. ``"auto"`` runs every algorithm (the ILP only within ``ILP_MAX_PAIRS``, bounded by the
    best heuristic plan) and keeps the smallest valid plan, ties to the earliest in :data:`ALGORITHMS`;
    a name of :data:`ALGORITHMS` runs that one only. Deterministic: the same buffers, the same plan."""
    if algorithm != "auto" and algorithm not in ALGORITHMS:
        raise _unknown(algorithm, ("auto",) + ALGORITHMS)
    u, s, e = _pack(buffers, align)
    bound = heuristics.live_peak(u, s, e) * align
    if algorithm != "auto":
        offsets, proved = _plan_one(buffers, algorithm, align)
        size = _pool_size(buffers, offsets, align)
        return PoolPlan(offsets, size, algorithm, bound, {algorithm: size},
                        proved or size == bound)
    plans: dict[str, tuple[int, ...]] = {}
    sizes: dict[str, int] = {}
    proved_by_ilp = False
    for name in ALGORITHMS:
        if name == "ilp":
            if not plans or _ilp_too_large(u, s, e) is not None:
                continue
            best = min(plans, key=lambda n: (sizes[n], ALGORITHMS.index(n)))
            got, proved_by_ilp = _run(name, u, s, e, np.array(plans[best], dtype=np.int64) // align)
            if got is None:
                continue
            offsets = tuple(int(o) * align for o in got)
        else:
            offsets = tuple(int(o) * align for o in _run(name, u, s, e)[0])
        check_plan(buffers, offsets, align)
        plans[name], sizes[name] = offsets, _pool_size(buffers, offsets, align)
    best = min(plans, key=lambda n: (sizes[n], ALGORITHMS.index(n)))
    size = sizes[best]
    proved = size == bound or (proved_by_ilp and "ilp" in sizes and size <= sizes["ilp"])
    return PoolPlan(plans[best], size, best, bound, dict(sizes), proved)
