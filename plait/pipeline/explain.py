"""``plait explain``'s runner: the build's import, price and place steps (:mod:`plait.pipeline`) on a model,
then the report of :mod:`plait.placement.explain`.

    from plait.pipeline.explain import explain
    r = explain(mod, "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f", place="/fc/*=low_power_cpu")
    print(r.text())
"""

from __future__ import annotations

from typing import Any, Callable

from plait.ir.transform import PassContext
from plait.lowering.cache import LoweringCache
from plait.pipeline import import_stage, place_stage
from plait.pipeline.place import placement_cost_model
from plait.pipeline.stages import Imported
from plait.placement.cost import CostModel, applying_tuning
from plait.placement.explain import Report, check_objective, check_weight, quiet_solver_banner, report_of, rules_of
from plait.placement.rules import PlacementError
from plait.relay.expr import Function
from plait.relay.module import IRModule
from plait.target import CompositeTarget


def prepare(mod_or_func: Any, opt_level: int = 2) -> Function:
    """The typed function that ``plait.build`` places: ``main`` after the build's import stage
    (:func:`plait.pipeline.import_stage`: InferType, FoldConstant, FoldBatchNorm, the passes
    ``opt_level`` allows). A Function is typed (if it is not) and taken as it is."""
    from plait.relay.infer import infer_expr

    if isinstance(mod_or_func, Function):
        if not mod_or_func.has_type:
            infer_expr(mod_or_func)
        return mod_or_func
    if not isinstance(mod_or_func, IRModule):
        raise PlacementError(f"explain expects an IRModule or a Function, got {type(mod_or_func).__name__}")
    if "main" not in mod_or_func:
        raise PlacementError("explain: the module has no 'main' function")

    main = import_stage(mod_or_func, PassContext(opt_level=opt_level)).mod["main"]
    assert isinstance(main, Function)
    return main


def explain(mod_or_func: Any, target: Any, objective: str = "latency", place: Any = None, weight: float = 0.5,
            cost_model: CostModel | None = None, opt_level: int = 2,
            then: Callable[[Any, CompositeTarget, Any], None] | None = None) -> Report:
    """Place ``mod_or_func`` (an IRModule: its ``main``, folded as build does at ``opt_level``; or a Function) on
    the pieces of ``target`` and report every call's costs on every piece, the choice and its reason, and the
    totals. ``then(placed, composite, ctx)``, if given, is called with the ``Placed`` stage while the lowering cache of
    the pricing is still active (the CLI lowers it further for the memory plan, reusing that lowering)."""

    ct = target if isinstance(target, CompositeTarget) else CompositeTarget(target)
    objective = check_objective(objective)
    weight = check_weight(weight)
    rules = rules_of(place, ct)
    with LoweringCache().active(), applying_tuning(cost_model):  # as plait.build: each call lowered once
        func = prepare(mod_or_func, opt_level)
        cm = placement_cost_model(ct, cost_model)
        quiet_solver_banner()
        ctx = PassContext(opt_level=opt_level)
        placed = place_stage(Imported(IRModule({"main": func})), ct, ctx, rules, objective, weight, cm,
                             always_solve=True)
        if then is not None:
            then(placed, ct, ctx)
    a = placed.assignment
    return report_of(a, func, ct, cm, weight, rules)




__all__ = ["explain", "prepare"]
