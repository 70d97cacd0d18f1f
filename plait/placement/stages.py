"""The first build stages, shared by ``plait.build`` (:mod:`plait.driver`) and ``plait explain``.

    imported = import_stage(mod, ctx)                  # Imported: typed and folded
    placed = place_stage(imported, ct, ctx, rules)     # Placed: + the Assignment (None for one piece)

``place_stage`` runs two passes: ``price`` (Imported -> Priced: capability, pins, fusion groups, every
call or group priced on every piece that may run it; pricing lowers what default lowering will lower,
through the build's lowering cache) and ``place`` (Priced -> Placed: the solver).

A stage is a frozen dataclass holding the module and what its step produced; each step runs through
the :class:`~plait.ir.transform.PassContext`, so instruments (``Timing``, ``PrintAfter``) see it.
The later stages (Partitioned, Lowered, Built) are the driver's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, ClassVar

from plait.ir.transform import Pass, PassContext
from plait.relay.module import IRModule


@dataclass(frozen=True)
class BuildStage:
    """A build stage: the module, plus what the stage added (fields of a subclass). Prints as its module."""

    mod: IRModule

    def __str__(self) -> str:
        return str(self.mod)


@dataclass(frozen=True)
class Imported(BuildStage):
    """The model typed and folded: what placement sees."""


@dataclass(frozen=True)
class Placed(BuildStage):
    """``mod`` (unchanged) and ``assignment``: every call's piece (a
    :class:`~plait.placement.solver.Assignment`; None when the target has one piece)."""

    assignment: Any


def import_passes() -> list[Pass]:
    """Type inference, the quantized patterns made integer (QDQToInteger) and the folds that run
    before placement (each pass keeps the module typed)."""
    from plait.relay.infer import InferType
    from plait.relay.passes import FoldBatchNorm, FoldConstant, QDQToInteger

    return [InferType(), QDQToInteger(), FoldConstant(), FoldBatchNorm()]


def import_stage(mod: IRModule, ctx: PassContext) -> Imported:
    """``mod`` through :func:`import_passes` (those ``ctx.opt_level`` allows)."""
    for p in import_passes():
        mod = ctx.run(p, mod)
    return Imported(mod)


def placement_cost_model(composite: Any, cost_model: Any = None) -> Any:
    """``cost_model`` (default: :meth:`CostModel.for_target`) told which pieces of ``composite`` share memory."""
    from plait.placement.cost import CostModel

    if cost_model is None:
        return CostModel.for_target(composite)
    if getattr(cost_model, "composite", None) is None:
        cm = copy.copy(cost_model)  # the caller's model, told which pieces share memory
        cm.composite = composite
        return cm
    return cost_model


@dataclass(frozen=True)
class Priced(BuildStage):
    """``mod`` (unchanged) and ``pricing``: the placement problem in numbers (a
    :class:`~plait.placement.solver.Pricing`; None when the target has one piece)."""

    pricing: Any


@dataclass(frozen=True)
class Price(Pass):
    """Imported -> Priced: every operator call of ``main`` priced on the pieces that may run it
    (:func:`plait.placement.solver.price`). One piece: nothing to price (rules and weights checked only)."""

    composite: Any = None
    rules: tuple = ()
    objective: str = "latency"
    weight: float = 0.5
    cost_model: Any = None
    always_solve: bool = False  # price for one piece too (plait explain reports its costs)
    name: ClassVar[str] = "price"

    def run(self, imported: Imported, ctx: PassContext) -> Priced:
        from plait.placement.rules import check_rules_match
        from plait.placement.solver import check_weights, price

        main = imported.mod.main
        if len(self.composite) == 1 and not self.always_solve:
            check_rules_match(main, self.rules)
            check_weights(main, self.composite.pieces[0])
            return Priced(imported.mod, None)
        cm = placement_cost_model(self.composite, self.cost_model)
        return Priced(imported.mod, price(main, self.composite, self.objective, self.rules, cost_model=cm,
                                          weight=self.weight))


@dataclass(frozen=True)
class Place(Pass):
    """Priced -> Placed: every operator call of ``main`` assigned to a piece
    (:func:`plait.placement.solver.solve_priced`); None for one piece."""

    name: ClassVar[str] = "place"

    def run(self, priced: Priced, ctx: PassContext) -> Placed:
        from plait.placement.solver import solve_priced

        return Placed(priced.mod, None if priced.pricing is None else solve_priced(priced.pricing))


def place_stage(imported: Imported, composite: Any, ctx: PassContext, rules: tuple = (), objective: str = "latency",
                weight: float = 0.5, cost_model: Any = None, always_solve: bool = False) -> Placed:
    """Imported -> Priced -> Placed through ``ctx`` (:class:`Price`, then :class:`Place`)."""
    priced = ctx.run(Price(composite, tuple(rules), objective, weight, cost_model, always_solve), imported)
    return ctx.run(Place(), priced)


__all__ = ["BuildStage", "Imported", "Place", "Placed", "Price", "Priced", "import_passes", "import_stage", "place_stage",
           "placement_cost_model"]
