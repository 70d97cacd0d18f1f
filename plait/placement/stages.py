"""The first two build stages, shared by ``plait.build`` (:mod:`plait.driver`) and ``plait explain``.

    imported = import_stage(mod, ctx)                  # Imported: typed and folded
    placed = ctx.run(Place(ct, rules, ...), imported)  # Placed: + the Assignment (None for one piece)

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
class Imported:
    """The model typed and folded: what placement sees."""

    mod: IRModule

    def __str__(self) -> str:
        return str(self.mod)


@dataclass(frozen=True)
class Placed:
    """``mod`` (unchanged) and ``assignment``: every call's piece (a
    :class:`~plait.placement.solver.Assignment`; None when the target has one piece)."""

    mod: IRModule
    assignment: Any

    def __str__(self) -> str:
        return str(self.mod)


def import_passes() -> list[Pass]:
    """Type inference and the folds that run before placement (each pass keeps the module typed)."""
    from plait.relay.infer import InferType
    from plait.relay.passes import FoldBatchNorm, FoldConstant

    return [InferType(), FoldConstant(), FoldBatchNorm()]


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
class Place(Pass):
    """Imported -> Placed: every operator call of ``main`` assigned to a piece
    (:func:`plait.placement.place`). One piece: no solver (rules and weights checked only)."""

    composite: Any = None
    rules: tuple = ()
    objective: str = "latency"
    weight: float = 0.5
    cost_model: Any = None
    always_solve: bool = False  # solve for one piece too (plait explain reports its costs)
    name: ClassVar[str] = "place"

    def run(self, imported: Imported, ctx: PassContext) -> Placed:
        from plait.placement.rules import check_rules_match
        from plait.placement.solver import check_weights, place

        main = imported.mod.main
        if len(self.composite) == 1 and not self.always_solve:
            check_rules_match(main, self.rules)
            check_weights(main, self.composite.pieces[0])
            return Placed(imported.mod, None)
        cm = placement_cost_model(self.composite, self.cost_model)
        return Placed(imported.mod, place(main, self.composite, self.objective, self.rules, cost_model=cm,
                                          weight=self.weight))


__all__ = ["Imported", "Place", "Placed", "import_passes", "import_stage", "placement_cost_model"]
