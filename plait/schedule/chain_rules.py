"""Steps of the rules (plait/schedule/rules.py calls them) for reductions that take no vectors.

- :func:`scalar_reduction`: no SIMD (the ``microcontroller`` rules, a ``cpu`` target without vectors):
  unroll a short innermost reduce loop.

- :func:`interleave_outputs`: a reduction with neither a vector axis (its outputs are not contiguous
  in any load: a global pool reads each channel's plane) nor a reduce loop to vectorize (rows of 125
  are no multiple of the lanes) runs one scalar sum per output, each add waiting for the one before
  (3-4 cycles). Computing a block of outputs together, their accumulators in registers below the
  reduce loops, gives as many independent chains: DS-CNN's global average pool (64 channels of 25 x 5)
  3.5 -> 1.1 us. Knob ``<stage root>.interleave`` (the block: 1 or a divisor of the loop up to
  :data:`MAX_CHAINS`).
"""

from __future__ import annotations

from plait.schedule import knobs
from plait.schedule.analysis import const_int
from plait.schedule.errors import ScheduleError
from plait.schedule.schedule import Schedule
from plait.tir.stmt import PrimFunc
from plait.schedule.stage import Stage, uses

MAX_CHAINS = 8
"""At most this many outputs per block (independent scalar accumulators)."""


def interleave_outputs(sch: Schedule, st: Stage, knob: str) -> bool:
    """Block the longest spatial loop of the output that the loads use (a channel loop) by the largest
    divisor up to :data:`MAX_CHAINS` and move the block below the reduce loops, its accumulators in a
    local buffer. True if done (``sch`` changed), False if the stage has no such loop or a primitive
    refused (``sch`` unchanged)."""
    if st.output is None or not st.reduce or st.update is None or st.update.buffer.scope != "local":
        return False
    cands = [lp for lp in st.spatial if (const_int(lp.extent) or 0) >= 2 and uses(st.output.indices, lp.loop_var)
             and any(uses(ld.indices, lp.loop_var) for ld in st.loads())]
    if not cands:
        return False
    u = max(cands, key=lambda lp: const_int(lp.extent))  # type: ignore[arg-type, return-value]
    n = const_int(u.extent)
    blocks = [1] + [d for d in range(2, MAX_CHAINS + 1) if n % d == 0]  # type: ignore[operator]
    ub = knobs.choose(f"{knob}.interleave", blocks, blocks[-1])
    if ub == 1:
        return False
    trial = Schedule(sch.func)
    name = u.loop_var.name
    try:
        if ub < n:  # type: ignore[operator]
            outer, inner = trial.split(name, [None, ub])
        else:
            outer, inner = None, name
        order = [lp.loop_var.name for lp in st.spatial if lp is not u]
        at = [lp.loop_var.name for lp in st.spatial].index(name)
        if outer is not None:
            order.insert(at, outer)
        trial.reorder(*order, inner)
        trial.decompose_reduction(inner)
        trial.reorder(*[lp.loop_var.name for lp in st.reduce], inner)
    except ScheduleError:
        return False
    sch.func, sch.trace = trial.func, sch.trace + trial.trace
    return True


def scalar_reduction(sch: Schedule, st: Stage, knob: str) -> PrimFunc:
    """No SIMD: unroll a short innermost reduce loop (a 3-tap kernel row), nothing else (knob
    ``<root>.unroll``: any innermost reduce loop of 2 to 16 iterations)."""
    if st.reduce:
        lp = st.reduce[-1]
        n = const_int(lp.extent)
        if n is not None and 2 <= n <= 16 and knobs.choose(f"{knob}.unroll", (False, True), n <= 4):
            _try_unroll(sch, lp.loop_var.name)
    return sch.func


def _try_unroll(sch: Schedule, name: str) -> None:
    try:
        sch.unroll(name)
    except ScheduleError:
        pass


__all__ = ["MAX_CHAINS", "interleave_outputs", "scalar_reduction"]
