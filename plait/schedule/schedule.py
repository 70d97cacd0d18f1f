"""``Schedule``: a PrimFunc being transformed, one primitive per method call.

    sch = Schedule(func)
    o, i = sch.split("y_x", [None, 8])
    sch.reorder(o, "y_c", i)
    sch.vectorize(i)
    func = sch.func

Each method applies the pure function of the same name (:mod:`plait.schedule.loops`,
:mod:`plait.schedule.reduction`, :mod:`plait.schedule.compute`, :mod:`plait.schedule.layout`) to ``sch.func`` and appends a line to
``sch.trace``. A failing primitive raises :class:`ScheduleError` and leaves ``sch.func`` unchanged.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from plait.tir.stmt import Allocate, For, PrimFunc
from plait.schedule import compute, layout, loops, reduction
from plait.schedule.analysis import get_loop, loop_names, walk
from plait.schedule.errors import ScheduleError


class Schedule:
    def __init__(self, func: PrimFunc):
        if not isinstance(func, PrimFunc):
            raise ScheduleError(f"Schedule: expected a PrimFunc, got {type(func).__name__}")
        self.func = func
        self.trace: list[str] = []

    def _apply(self, fn: Callable[..., PrimFunc], *args: Any, **kwargs: Any) -> None:
        self.func = fn(self.func, *args, **kwargs)
        shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items() if v is not None]
        self.trace.append(f"{fn.__name__}({', '.join(shown)})")

    # -- queries --------------------------------------------------------------------------------------
    def loops(self) -> list[str]:
        """Loop names in program order."""
        return loop_names(self.func)

    def get_loop(self, name: str) -> For:
        return get_loop(self.func, name, f"get_loop('{name}')")

    def extent(self, name: str) -> int | None:
        e = self.get_loop(name).extent
        return getattr(e, "value", None)

    # -- loops ----------------------------------------------------------------------------------------
    def split(self, loop: str, factors: Sequence[int | None], names: Sequence[str] | None = None) -> list[str]:
        new = list(names) if names is not None else [f"{loop}_{k}" for k in range(len(factors))]
        self._apply(loops.split, loop, list(factors), names)
        return new

    def split_overlapping(self, loop: str, factor: int, names: Sequence[str] | None = None) -> list[str]:
        new = list(names) if names is not None else [f"{loop}_0", f"{loop}_1"]
        self._apply(loops.split_overlapping, loop, factor, names)
        return new

    def fuse(self, outer: str, inner: str, name: str | None = None) -> str:
        self._apply(loops.fuse, outer, inner, name)
        return name or f"{outer}_{inner}_fused"

    def reorder(self, *names: str) -> None:
        self._apply(loops.reorder, *names)

    def vectorize(self, loop: str) -> None:
        self._apply(loops.vectorize, loop)

    def parallel(self, loop: str) -> None:
        self._apply(loops.parallel, loop)

    def unroll(self, loop: str) -> None:
        self._apply(loops.unroll, loop)

    def serial(self, loop: str) -> None:
        self._apply(loops.serial, loop)

    def remove_unit_loop(self, loop: str) -> None:
        self._apply(loops.remove_unit_loop, loop)

    def annotate(self, loop: str, key: str, value: object) -> None:
        self._apply(loops.annotate, loop, key, value)

    # -- reductions -----------------------------------------------------------------------------------
    def decompose_reduction(self, loop: str) -> None:
        self._apply(reduction.decompose_reduction, loop)

    def rfactor(self, loop: str) -> str:
        """Returns the name of the partial-accumulator buffer."""
        before = _alloc_names(self.func)
        self._apply(reduction.rfactor, loop)
        return next(iter(sorted(_alloc_names(self.func) - before)), "")

    def cache_write(self, loop: str, buffer: str) -> str:
        self._apply(reduction.cache_write, loop, buffer)
        return f"{buffer}_local"

    # -- stages ---------------------------------------------------------------------------------------
    def compute_inline(self, buffer: str) -> None:
        self._apply(compute.compute_inline, buffer)

    def reverse_compute_inline(self, buffer: str) -> None:
        self._apply(compute.reverse_compute_inline, buffer)

    def pad_input(self, buffer: str) -> str:
        self._apply(compute.pad_input, buffer)
        return f"{buffer}_pad"

    def split_phases(self, buffer: str, stride: int) -> str:
        self._apply(layout.split_phases, buffer, stride)
        return f"{buffer}_ph"


def _alloc_names(func: PrimFunc) -> set[str]:
    return {s.buffer.name for s, _ in walk(func.body) if isinstance(s, Allocate)}
