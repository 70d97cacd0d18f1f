"""The build pipeline, declared once: :func:`steps` lists every step, its passes (as data) and the stage
type it makes; ``plait.build`` (:mod:`plait.driver`), ``plait explain`` and the tuner run its steps.

    IRModule --import-->    Imported     infer_type, qdq_to_integer, fold_constant, fold_batch_norm
      --price-->            Priced       every call (or fusion group) priced on the pieces that may run it
      --place-->            Placed       + the Assignment: every operator call -> a piece (None for one piece)
      --partition-->        Partitioned  device_copy between memories; same-piece regions outlined into
                                         functions ``<piece>_<k>`` (attrs piece/region/global_symbol)
      --lower-->            Lowered      per piece, in composite order: <kind>.relay_to_runtime, else
                                         <kind>.relay_to_tir, else fuse_ops + lower_to_tir; then
                                         lift_workspaces (scratch memory -> workspace arguments)
      --plan-->             Lowered      plan_memory (the executor's plan: made once, carried into its
                                         codegen), check_memory_fit (each piece's share against its memories)
      --codegen-->          Built        per piece: its PrimFuncs -> a runtime module (the kind's
                                         tir_to_runtime hook, else its default_codegen kind's)
      --executor-->         artifact     <executor>_executor_codegen (given the plan and the composite)

The stages are :mod:`plait.pipeline.stages`; the steps' passes :mod:`~plait.pipeline.place`,
:mod:`~plait.pipeline.lower` and :mod:`~plait.pipeline.codegen`; how a step runs :mod:`~plait.pipeline.step`.
One :class:`~plait.lowering.cache.LoweringCache` is active for a build: the placement cost model and
default lowering share it, so no function is lowered twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from plait.ir.transform import Pass, PassContext
from plait.pipeline.codegen import CheckMemoryFit, CodegenPieces, ExecutorCodegen, PlanMemory, PlansAndGenerates
from plait.pipeline.lower import Lower, Partition
from plait.pipeline.place import Place, Placement, Price
from plait.pipeline.stages import BuildError, Built, Imported, Lowered, Partitioned, Placed, ProgramPlan, Priced
from plait.pipeline.step import Step, run_steps
from plait.relay.module import IRModule

if TYPE_CHECKING:
    from plait.placement.cost import CostModel
    from plait.placement.rules import Rule
    from plait.target import CompositeTarget


@dataclass(frozen=True)
class Options:
    """What a build asks of the pipeline: the composite target, the executor (None: stop before the
    memory plan, as ``plait explain`` does), what it asks of placement."""

    composite: CompositeTarget | None = None
    executor: PlansAndGenerates | None = None
    placement: Placement = Placement()


def import_passes() -> tuple[Pass, ...]:
    """Type inference, the quantized patterns made integer (QDQToInteger) and the folds that run
    before placement (each keeps the module typed; those ``ctx.opt_level`` allows run)."""
    from plait.relay.infer import InferType
    from plait.relay.passes import FoldBatchNorm, FoldConstant, QDQToInteger

    return (InferType(), QDQToInteger(), FoldConstant(), FoldBatchNorm())


def steps(o: Options) -> tuple[Step, ...]:
    """Every step of a build, in order: the one declaration of the pipeline."""
    from plait.memory.workspace import LiftWorkspaces

    ex = o.executor
    return (
        Step("import", Imported, import_passes()),
        Step("price", Priced, (Price(o.composite, o.placement),)),
        Step("place", Placed, (Place(),)),
        Step("partition", Partitioned, (Partition(o.composite),)),
        Step("lower", Lowered, (Lower(o.composite), LiftWorkspaces())),
        Step("plan", Lowered, () if ex is None else (PlanMemory(ex, o.composite), CheckMemoryFit(o.composite))),
        Step("codegen", Built, (CodegenPieces(o.composite),)),
        Step("executor", object, () if ex is None else (ExecutorCodegen(ex, o.composite),)),
    )


def run(o: Options, stage: Any, ctx: PassContext, start: str | None = None, stop: str | None = None) -> Any:
    """``stage`` through the steps of :func:`steps` from the one named ``start`` (default: the first)
    through the one named ``stop`` (default: the last)."""
    all_steps = steps(o)
    names = [s.name for s in all_steps]
    for n in (start, stop):
        if n is not None and n not in names:
            raise BuildError(f"the pipeline has no step '{n}' (its steps: {', '.join(names)})")
    lo = names.index(start) if start else 0
    hi = names.index(stop) + 1 if stop else len(names)
    return run_steps(all_steps[lo:hi], stage, ctx)


def import_stage(mod: IRModule, ctx: PassContext) -> Imported:
    """``mod`` through the import step (what placement and ``plait explain`` see)."""
    return run(Options(), mod, ctx, stop="import")


def place_stage(imported: Imported, composite: CompositeTarget, ctx: PassContext, rules: tuple[Rule, ...] = (),
                objective: str = "latency", weight: float = 0.5, cost_model: CostModel | None = None,
                always_solve: bool = False) -> Placed:
    """Imported -> Priced -> Placed (the price and place steps)."""
    o = Options(composite, None, Placement(tuple(rules), objective, weight, cost_model, always_solve))
    return run(o, imported, ctx, start="price", stop="place")


def lower_stage(placed: Placed, composite: CompositeTarget, ctx: PassContext) -> Lowered:
    """Placed -> Partitioned -> Lowered (the partition and lower steps; no memory plan)."""
    return run(Options(composite), placed, ctx, start="partition", stop="lower")


__all__ = ["BuildError", "Built", "CheckMemoryFit", "CodegenPieces", "ExecutorCodegen", "Imported", "Lowered",
           "Options", "Partitioned", "Placed", "Placement", "ProgramPlan", "PlanMemory", "Priced", "Step", "import_passes",
           "import_stage", "lower_stage", "place_stage", "run", "steps"]
