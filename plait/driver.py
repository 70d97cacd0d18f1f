"""The build driver: ``plait.build(mod, target, executor)`` -> an executor artifact.

    art = plait.build(mod, target="c", executor="graph")
    y, = plait.executor.GraphModule(art)(x=x)

The pipeline itself is declared once in :mod:`plait.pipeline` (its steps, their passes and the typed
stages they make); this module resolves what the caller gave (the composite target, the placement
rules, the executor from the registry :data:`plait.executor.EXECUTORS`), checks it early, and runs the
steps: all but the last under one lowering cache and the tuning records, then the executor's codegen.
Nothing here branches on a kind's or an executor's name.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from plait.ir.transform import PassContext, Timing
from plait.pipeline import Options, Placement, run
from plait.pipeline.stages import BuildError, Built, Lowered
from plait.pipeline.codegen import PlansAndGenerates
from plait.relay.module import IRModule

if TYPE_CHECKING:
    from plait.placement.cost import CostModel
    from plait.placement.rules import Rule
    from plait.target import CompositeTarget


def lowered_module(mod: IRModule, composite: CompositeTarget, ctx: PassContext, *, rules: tuple[Rule, ...] = (),
                   objective: str = "latency", weight: float = 0.5, cost_model: CostModel | None = None,
                   executor: PlansAndGenerates | None = None) -> Lowered:
    """The steps of :func:`build` from an IRModule up to Lowered (code generation not run); with an
    ``executor`` (an Executor), its memory plan made and checked too."""
    o = Options(composite, executor, Placement(tuple(rules), objective, weight, cost_model))
    return run(o, mod, ctx, stop="plan")


# ---- build -----------------------------------------------------------------------------------------


def _composite(target: Any) -> CompositeTarget:
    from plait.target import CompositeTarget, Piece

    if isinstance(target, Piece):
        return CompositeTarget({"pieces": {target.name: target.target}})
    return CompositeTarget(target)


def _rules(place: Any, ct: CompositeTarget) -> tuple[Rule, ...]:
    from plait.placement import parse_place

    if place is None:
        return ()
    if isinstance(place, str):
        return parse_place(place, ct)
    return tuple(place)


def build(mod: IRModule, target: Any = "c", executor: str = "graph", opt_level: int = 2,
          config: Mapping[str, Any] | None = None, instruments: Sequence[Any] = (),
          ctx: PassContext | None = None, *, place: Any = None, objective: str = "latency",
          weight: float = 0.5, cost_model: Any = None) -> Any:
    """Compile ``mod`` for ``target`` and return the executor's artifact (a ``GraphArtifact``).

    ``target``: a Target, a target string, or a composite target (``"a: c; b: blas"``): every call is
    placed on a piece by cost (``objective``: latency, energy or weighted, with ``weight``), or by the
    ``place`` rules (``"Conv=b,/head/*=a,*=b?"``, see docs/placement.md) and ``on_target``
    annotations. ``config`` goes to the PassContext (e.g. ``{"cc.cache_dir": ...,
    "c.host_simulation": True}``); ``instruments`` are added to it. The artifact has ``timings``
    (stage, seconds), ``placement`` (the Assignment; None for one piece), ``piece_modules`` and
    ``cross_modules`` (compile checks of pieces on other devices when simulating on the host).
    ``cost_model``: a :class:`~plait.placement.cost.CostModel`; its database's tuning records (``plait
    tune``) give lowering each workload's knob config (:mod:`plait.lowering.tuning`).
    """
    from plait.executor import get_executor
    from plait.lowering.cache import LoweringCache
    from plait.placement.cost import applying_tuning, objective_value

    if not isinstance(mod, IRModule):
        raise BuildError(f"plait.build expects an IRModule, got {type(mod).__name__}; import a model "
                         "with plait.from_onnx(...) or use plait.driver.build_onnx")
    if "main" not in mod:
        raise BuildError("plait.build: the module has no 'main' function")
    ex = get_executor(executor)  # unknown names fail before any work
    _check_static_inputs(mod, executor)
    ct = _composite(target)
    objective_value(0.0, 0.0, objective, weight)  # unknown objective / bad weight fail early
    o = Options(ct, ex, Placement(_rules(place, ct), objective, weight, cost_model))
    timing = Timing()
    if ctx is None:
        ctx = PassContext(opt_level=opt_level, config=dict(config or {}), instruments=[*instruments, timing])
    else:
        ctx.instruments = [*ctx.instruments, *instruments, timing]
    start = time.perf_counter()
    try:
        # per build: placement's pricing and lowering share the cache; a tuning file's configs are applied
        with LoweringCache().active(), applying_tuning(cost_model):
            built: Built = run(o, mod, ctx, stop="codegen")
        art = run(o, built, ctx, start="executor")
    finally:
        ctx.instruments = [i for i in ctx.instruments if i is not timing]
    if hasattr(art, "timings"):
        art.timings = [*timing.times, ("total", time.perf_counter() - start)]
    for value, attr in ((built.lowered.assignment, "placement"), (built.modules, "piece_modules"),
                        (built.cross, "cross_modules")):
        try:
            setattr(art, attr, value)
        except AttributeError:
            pass
    return art


def _check_static_inputs(mod: IRModule, executor: str) -> None:
    """For an executor that needs static shapes: a LowerError naming the first input with a symbolic dim,
    the shape_overrides that fix it, and the executor that takes it as it is (the VM)."""
    from plait.executor import executors, get_executor
    from plait.lowering.lower import LowerError
    from plait.relay.io import symbolic_dim_error

    if get_executor(executor).capabilities.symbolic_shapes:
        return
    takes = " or ".join(f"executor='{e.name}'" for e in executors() if e.capabilities.symbolic_shapes)
    msg = symbolic_dim_error(mod, lambda ex: f"import the model with shape_overrides={ex!r} "
                                             f"(plait.load_onnx or plait.from_onnx), or build with {takes}",
                             need=f"the {executor} executor needs static shapes")
    if msg is not None:
        raise LowerError(msg)


def build_onnx(model: Any, target: Any = "c", executor: str = "graph", **kwargs: Any) -> Any:
    """``build`` for an ONNX model (an ``onnx.ModelProto`` or a path to a .onnx file)."""
    from plait.frontend.onnx import from_onnx, load_onnx

    mod = load_onnx(str(model)) if not hasattr(model, "graph") else from_onnx(model)
    return build(mod, target, executor, **kwargs)


__all__ = ["BuildError", "build", "build_onnx", "lowered_module"]
