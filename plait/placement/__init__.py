"""Placement: assign every call of a model to a piece of a composite target, by cost or by hand.

    from plait.placement import place, parse_place, on_target
    ct = CompositeTarget("low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f")
    a = place(mod["main"], ct, objective="latency", rules=parse_place("Gemm=low_power_cpu", ct))
    for p in a: print(p.call, p.piece, p.reason, p.alternatives)

Modules: :mod:`capability` (predicates, what a piece can run), :mod:`rules` (``--place``, ``on_target``,
``target`` function attribute), :mod:`cost` (latency / energy estimates, transfers, measured database),
:mod:`pattern` (region patterns kinds claim), :mod:`problem` (the ILP and its fallback), :mod:`solver` (:func:`place`). See docs/placement.md.
"""

from plait.placement.capability import (
    ANY, NOTHING, Answer, Predicate, attr_eq, attr_in, attr_where, decline_if_dtype, dtype_in, has_static_shape,
    op_is, piece_supports,
)
from plait.placement.cost import CostDatabase, CostError, CostModel, Estimate, objective_value, signature
from plait.placement.pattern import Match, Pattern, PatternError, is_constant, is_op, match, optional, wildcard
from plait.placement.problem import Problem, solve
from plait.placement.regions import PatternRegion, find_regions, is_convex
from plait.placement.rules import Pin, PlacementError, Rule, on_target, parse_place, pins_for
from plait.placement.solver import Assignment, CallPlacement, place

__all__ = [
    "ANY", "NOTHING", "Answer", "Assignment", "CostDatabase", "CostError", "CostModel", "Estimate", "Pin",
    "CallPlacement", "PlacementError", "Predicate", "Problem", "Rule", "attr_eq", "attr_in", "attr_where",
    "decline_if_dtype", "dtype_in", "has_static_shape", "objective_value", "on_target", "op_is", "parse_place",
    "piece_supports", "pins_for", "place", "signature", "solve",
    "Match", "Pattern", "PatternError", "PatternRegion", "find_regions", "is_constant", "is_convex", "is_op", "match",
    "optional", "wildcard",
]
