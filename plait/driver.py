"""The build driver: ``plait.build(mod, target, executor)`` -> an executor artifact.

    art = plait.build(mod, target="c", executor="graph")
    y, = plait.executor.GraphModule(art)(x=x)

The pipeline is a list of passes run by one :class:`~plait.ir.transform.PassContext` (so its
instruments, e.g. ``Timing`` or ``PrintAfter``, see every stage):

    infer_type, [fold_constant], fuse_ops, lower_to_tir | <kind>.relay_to_tir,   (IRModule -> IRModule)
    codegen            lowered IRModule -> runtime module (the kind's tir_to_runtime hook, else
                       the kind's ``build`` attribute, registered by its backend)
    <executor>         lowered IRModule + runtime module -> artifact (plait.executor.EXECUTORS)

Lowering runs with ``Target.current()`` set to the piece. Nothing here branches on a kind's name.
Placement across several pieces of a composite target is a later stage of the pipeline; for now a
composite target must have exactly one piece.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

from plait.errors import PlaitError
from plait.ir.transform import Pass, PassContext, Timing
from plait.relay.module import IRModule


class BuildError(PlaitError):
    """``plait.build`` was called wrongly or a stage of the pipeline is missing for the target."""


def resolve_piece(target: Any):
    """The single piece to build for: from a Target, a target string, a CompositeTarget or a Piece."""
    from plait.target import CompositeTarget, Piece

    if isinstance(target, Piece):
        return target
    ct = CompositeTarget(target)
    if len(ct) != 1:
        names = ", ".join(p.name for p in ct.pieces)
        raise BuildError(f"placement across several pieces is not supported yet: the target has "
                         f"{len(ct)} pieces ({names}); build for one piece")
    return ct.pieces[0]


def _load_backends() -> None:
    """Import the in-tree backends so that they attach their hooks and build functions to kinds."""
    try:
        importlib.import_module("plait.backend")
    except ModuleNotFoundError as exc:
        if exc.name not in ("plait.backend",):
            raise


# ---- the stages as passes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Lower(Pass):
    """Default lowering (or the kind's ``relay_to_tir`` hook) with the piece entered."""

    piece: Any = None
    name: ClassVar[str] = "lower"

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        from plait.target import run_relay_to_tir

        if self.piece.target.kind.hooks.get("relay_to_tir") is not None:
            return run_relay_to_tir(self.piece, mod, ctx)
        with self.piece:
            for p in default_lowering(self.piece):
                mod = ctx.run(p, mod)
        return mod


def default_lowering(piece: Any) -> list[Pass]:
    """Fusion and lowering to TIR: what every kind without a ``relay_to_tir`` hook runs."""
    from plait.backend.lower import LowerToTIR
    from plait.relay.passes import FuseOps

    return [FuseOps(), LowerToTIR(piece.target)]


@dataclass(frozen=True)
class Codegen(Pass):
    """Lowered IRModule -> runtime module, through the target kind."""

    piece: Any = None
    name: ClassVar[str] = "codegen"

    def run(self, mod: IRModule, ctx: PassContext) -> Any:
        from plait.target import run_tir_to_runtime

        kind = self.piece.target.kind
        if kind.hooks.get("tir_to_runtime") is not None:
            return run_tir_to_runtime(self.piece, mod)
        build = kind.attrs.get("build")
        if build is None:
            raise BuildError(f"target kind '{kind.name}' (piece '{self.piece.name}') cannot generate code: "
                             "it has no 'tir_to_runtime' hook and no 'build' attribute")
        with self.piece:
            return build(mod, self.piece.target, ctx)


@dataclass(frozen=True)
class ExecutorCodegen(Pass):
    """(lowered IRModule, runtime module) -> the executor's artifact."""

    executor: str = "graph"
    lib: Any = None
    target: str = ""

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.executor}_executor_codegen"

    def run(self, mod: IRModule, ctx: PassContext) -> Any:
        from plait.executor import EXECUTORS

        return EXECUTORS.get(self.executor)(mod, self.lib, self.target)


def relay_pipeline(piece: Any, opt_level: int = 2) -> list[Pass]:
    """The IRModule -> IRModule part of the pipeline, for ``piece``."""
    from plait.relay.infer import InferType

    passes: list[Pass] = [InferType()]
    from plait.relay.passes import FoldBatchNorm, FoldConstant

    passes += [FoldConstant(), FoldBatchNorm()]
    passes += [Lower(piece), InferType()]
    return passes


# ---- build -----------------------------------------------------------------------------------------


def build(mod: IRModule, target: Any = "c", executor: str = "graph", opt_level: int = 2,
          config: Mapping[str, Any] | None = None, instruments: Sequence[Any] = (),
          ctx: PassContext | None = None) -> Any:
    """Compile ``mod`` for ``target`` and return the executor's artifact (a ``GraphArtifact``).

    ``target``: a Target, a target string, or a composite target with one piece. ``config`` goes
    to the PassContext (e.g. ``{"cc.cache_dir": ...}``); ``instruments`` are added to it. The
    artifact's ``timings`` lists (stage, seconds).
    """
    from plait.executor import EXECUTORS

    if not isinstance(mod, IRModule):
        raise BuildError(f"plait.build expects an IRModule, got {type(mod).__name__}; import a model "
                         "with plait.from_onnx(...) or use plait.driver.build_onnx")
    if "main" not in mod:
        raise BuildError("plait.build: the module has no 'main' function")
    EXECUTORS.get(executor)  # unknown names fail before any work
    piece = resolve_piece(target)
    _load_backends()
    timing = Timing()
    if ctx is None:
        ctx = PassContext(opt_level=opt_level, config=dict(config or {}), instruments=[*instruments, timing])
    else:
        ctx.instruments = [*ctx.instruments, *instruments, timing]
    start = time.perf_counter()
    try:
        for p in relay_pipeline(piece, ctx.opt_level):
            mod = ctx.run(p, mod)
        lib = ctx.run(Codegen(piece), mod)
        art = ctx.run(ExecutorCodegen(executor, lib, str(piece.target)), mod)
    finally:
        ctx.instruments = [i for i in ctx.instruments if i is not timing]
    if hasattr(art, "timings"):
        art.timings = [*timing.times, ("total", time.perf_counter() - start)]
    return art


def build_onnx(model: Any, target: Any = "c", executor: str = "graph", **kwargs: Any) -> Any:
    """``build`` for an ONNX model (an ``onnx.ModelProto`` or a path to a .onnx file)."""
    from plait.frontend.onnx import from_onnx, load_onnx

    mod = load_onnx(str(model)) if not hasattr(model, "graph") else from_onnx(model)
    return build(mod, target, executor, **kwargs)


__all__ = ["BuildError", "Codegen", "ExecutorCodegen", "Lower", "build", "build_onnx", "default_lowering",
           "relay_pipeline", "resolve_piece"]
