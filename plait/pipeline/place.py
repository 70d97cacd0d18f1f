"""The placement steps: ``Imported -> Priced -> Placed``.

``price`` (capability, pins, fusion groups, every call or group priced on every piece that may run it;
pricing lowers what default lowering will lower, through the build's lowering cache) and ``place``
(the solver: :mod:`plait.placement.solver`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from plait.ir.transform import PassContext
from plait.pipeline.stages import Imported, Placed, Priced
from plait.pipeline.step import StagePass

if TYPE_CHECKING:
    from plait.placement.cost import CostModel
    from plait.placement.rules import Rule
    from plait.target import CompositeTarget


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
class Placement:
    """What a build asks of placement: the rules (``--place``), the objective and its weight, the cost
    model (None: :meth:`CostModel.for_target`)."""

    rules: tuple[Rule, ...] = ()
    objective: str = "latency"
    weight: float = 0.5
    cost_model: CostModel | None = None
    always_solve: bool = False  # price for one piece too (plait explain reports its costs)


@dataclass(frozen=True)
class Price(StagePass):
    """Imported -> Priced: every operator call of ``main`` priced on the pieces that may run it
    (:func:`plait.placement.solver.price`). One piece: nothing to price (rules and weights checked only)."""

    composite: CompositeTarget | None = None
    placement: Placement = Placement()
    name: ClassVar[str] = "price"

    def run(self, imported: Imported, ctx: PassContext) -> Priced:
        from plait.placement.rules import check_rules_match
        from plait.placement.solver import check_weights, price

        main, o = imported.mod.main, self.placement
        if len(self.composite) == 1 and not o.always_solve:
            check_rules_match(main, o.rules)
            check_weights(main, self.composite.pieces[0])
            return Priced(imported.mod, None)
        cm = placement_cost_model(self.composite, o.cost_model)
        return Priced(imported.mod, price(main, self.composite, o.objective, o.rules, cost_model=cm, weight=o.weight))


@dataclass(frozen=True)
class Place(StagePass):
    """Priced -> Placed: every operator call of ``main`` assigned to a piece
    (:func:`plait.placement.solver.solve_priced`); None for one piece."""

    name: ClassVar[str] = "place"

    def run(self, priced: Priced, ctx: PassContext) -> Placed:
        from plait.placement.solver import solve_priced

        return Placed(priced.mod, None if priced.pricing is None else solve_priced(priced.pricing))


__all__ = ["Place", "Price", "placement_cost_model"]
