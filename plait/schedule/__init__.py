"""Schedules: loop transformations of TIR PrimFuncs, per-target default rules and a cost estimate.

    from plait.schedule import Schedule, default_schedule, estimate_cost
    sch = Schedule(func)                  # primitives by loop name: split, reorder, fuse, vectorize,
    sch.split("y_x", [None, 8])           # parallel, unroll, decompose_reduction, rfactor,
    func = default_schedule(func, target) # cache_write, compute_inline, reverse_compute_inline, pad_input
    cost = estimate_cost(func, target)    # cycles, bytes, flops for the target's facts

The primitives are also pure functions ``PrimFunc -> PrimFunc`` in :mod:`plait.schedule.loops`,
:mod:`plait.schedule.reduction` and :mod:`plait.schedule.compute`. See docs/schedules.md.
"""

from plait.schedule.compute import compute_inline, pad_input, reverse_compute_inline
from plait.schedule.cost import ScheduleCost, estimate_cost
from plait.schedule.errors import ScheduleError
from plait.schedule.loops import (
    annotate, fuse, parallel, remove_unit_loop, reorder, serial, split, split_overlapping, unroll, vectorize,
)
from plait.schedule.machine import Machine
from plait.schedule.reduction import cache_write, decompose_reduction, rfactor
from plait.schedule.rules import RULE_SETS, RuleSet, default_schedule, machine_for, register_rules, rules_for
from plait.schedule.schedule import Schedule

__all__ = [
    "ScheduleCost", "Machine", "RULE_SETS", "RuleSet", "Schedule", "ScheduleError", "annotate", "cache_write",
    "compute_inline", "decompose_reduction", "default_schedule", "estimate_cost", "fuse", "machine_for",
    "pad_input", "parallel", "register_rules", "remove_unit_loop", "reorder", "reverse_compute_inline", "rfactor", "rules_for",
    "serial", "split", "split_overlapping", "unroll", "vectorize",
]
