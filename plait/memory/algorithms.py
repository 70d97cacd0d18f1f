"""Placeholder of the pool allocation algorithms (helper "memalg" writes the real module; this one
only implements its API with one first-fit greedy so that the planner runs).

A buffer is live over ``[start, end]`` (node indices, inclusive); two buffers live at the same time
must not overlap in bytes. Offsets are multiples of ``align``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

from plait.errors import PlaitError

ALGORITHMS = ("greedy_by_size", "greedy_by_conflicts", "hill_climb", "tflm_greedy", "ilp")
DEFAULT_ALIGN = 16


class MemoryPlanError(PlaitError):
    """A memory plan cannot be made or is not valid."""


@dataclass(frozen=True)
class LiveBuffer:
    """``size`` bytes live from node ``start`` to node ``end`` (inclusive)."""

    size: int
    start: int
    end: int
    name: str = ""


def _round(n: int, align: int) -> int:
    return -(-n // align) * align


def lower_bound(buffers: Sequence[LiveBuffer], align: int = DEFAULT_ALIGN) -> int:
    """The most bytes live at one time, each buffer rounded up to ``align``."""
    times = sorted({b.start for b in buffers})
    return max((sum(_round(b.size, align) for b in buffers if b.start <= t <= b.end) for t in times), default=0)


def allocate(buffers: Sequence[LiveBuffer], algorithm: str, align: int = DEFAULT_ALIGN) -> tuple[int, ...]:
    """Offsets of ``buffers`` (placeholder: first fit by decreasing size for every algorithm)."""
    if algorithm not in ALGORITHMS:
        raise MemoryPlanError(f"unknown memory planning algorithm '{algorithm}' (expected one of "
                              f"{', '.join(ALGORITHMS)})")
    offsets = [0] * len(buffers)
    placed: list[int] = []
    for i in sorted(range(len(buffers)), key=lambda i: (-buffers[i].size, buffers[i].start, i)):
        b, off = buffers[i], 0
        busy = sorted((offsets[j], offsets[j] + _round(buffers[j].size, align)) for j in placed
                      if buffers[j].start <= b.end and b.start <= buffers[j].end)
        for lo, hi in busy:
            if off + _round(b.size, align) <= lo:
                break
            off = max(off, hi)
        offsets[i] = off
        placed.append(i)
    return tuple(offsets)


def check_plan(buffers: Sequence[LiveBuffer], offsets: Sequence[int], align: int = DEFAULT_ALIGN) -> None:
    """Raise :class:`MemoryPlanError` if an offset is misaligned or two live buffers overlap."""
    for i, (b, o) in enumerate(zip(buffers, offsets)):
        if o % align:
            raise MemoryPlanError(f"buffer {b.name or i} at offset {o} is not aligned to {align}")
        for j in range(i):
            c, p = buffers[j], offsets[j]
            if b.start <= c.end and c.start <= b.end and o < p + c.size and p < o + b.size:
                raise MemoryPlanError(f"buffers {c.name or j} and {b.name or i} overlap")


@dataclass(frozen=True)
class PoolPlan:
    """One pool's plan: offsets, size, the chosen algorithm, the lower bound, every algorithm's size."""

    offsets: tuple[int, ...]
    size: int
    algorithm: str
    lower_bound: int
    sizes: Mapping[str, int] = field(default_factory=dict)
    optimal: bool = False


def plan_pool(buffers: Sequence[LiveBuffer], align: int = DEFAULT_ALIGN, algorithm: str = "auto") -> PoolPlan:
    """Plan one pool with ``algorithm`` (``auto``: every algorithm, the smallest plan)."""
    names = ALGORITHMS if algorithm == "auto" else (algorithm,)
    best: tuple[int, str, tuple[int, ...]] | None = None
    sizes: dict[str, int] = {}
    for name in names:
        offs = allocate(buffers, name, align)
        size = max((o + _round(b.size, align) for b, o in zip(buffers, offs)), default=0)
        sizes[name] = size
        if best is None or size < best[0]:
            best = (size, name, offs)
    assert best is not None
    lb = lower_bound(buffers, align)
    return PoolPlan(best[2], best[0], best[1], lb, sizes, best[0] == lb)


__all__ = ["ALGORITHMS", "DEFAULT_ALIGN", "LiveBuffer", "MemoryPlanError", "PoolPlan", "allocate", "check_plan",
           "lower_bound", "plan_pool"]
