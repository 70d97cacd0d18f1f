"""The steps after lowering: the memory plan (once), its fit, code generation per piece, the executor.

    Lowered --plan_memory-->      Lowered.plan    the executor's plan (Executor.plan), made once
            --check_memory_fit--> (unchanged)     each piece's share of that plan against its memories
            --codegen_pieces-->   Built           per piece: its PrimFuncs -> a runtime module
      Built --<name>_executor_codegen--> artifact the executor's codegen, given the plan and the composite

The executor is given to these passes as an object (:class:`PlansAndGenerates`, which every
:class:`plait.executor.Executor` is); nothing here knows an executor by name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Protocol

from plait.ir.transform import PassContext
from plait.pipeline.lower import has_run_time_shapes
from plait.pipeline.stages import BuildError, Built, Lowered, ProgramPlan
from plait.pipeline.step import StagePass
from plait.relay.module import IRModule
from plait.target.composite import piece_of

if TYPE_CHECKING:
    from plait.target import CompositeTarget
    from plait.target.composite import Piece


class PlansAndGenerates(Protocol):
    """What the pipeline asks of an executor (:class:`plait.executor.Executor` implements it)."""

    name: str

    def plan(self, mod: IRModule, composite: CompositeTarget, config: Mapping[str, Any]) -> ProgramPlan: ...

    def codegen(self, lowered: Lowered, built: Built, composite: CompositeTarget, ctx: PassContext) -> Any: ...


@dataclass(frozen=True)
class PlanMemory(StagePass):
    """Lowered -> Lowered with ``plan``: the executor's memory plan of the lowered module
    (:meth:`Executor.plan <plait.executor.base.Executor.plan>`), the one plan of the build."""

    executor: PlansAndGenerates | None = None
    composite: CompositeTarget | None = None
    name: ClassVar[str] = "plan_memory"

    def run(self, lowered: Lowered, ctx: PassContext) -> Lowered:
        return replace(lowered, plan=self.executor.plan(lowered.mod, self.composite, ctx.config))


@dataclass(frozen=True)
class CheckMemoryFit(StagePass):
    """Each piece's share of the build's memory plan (:func:`plait.memory.plan.piece_bytes` of
    ``Lowered.plan``) against its memories (:func:`plait.placement.fit.check_fit`); a piece simulated on
    the host is checked against its own facts. Raises a ``FitError``; returns the stage unchanged."""

    composite: CompositeTarget | None = None
    name: ClassVar[str] = "check_memory_fit"

    def run(self, lowered: Lowered, ctx: PassContext) -> Lowered:
        from plait.memory.plan import piece_bytes
        from plait.placement.fit import check_fit, piece_memory

        mems = [piece_memory(p.target) for p in self.composite.pieces]
        if all(m.ram_bytes is None and m.weights_bytes is None for m in mems):
            return lowered
        if lowered.plan is None or has_run_time_shapes(lowered.mod):  # no static plan: sized at run time
            return lowered
        check_fit(self.composite, piece_bytes(lowered.plan.graph))
        return lowered


@dataclass(frozen=True)
class Codegen(StagePass):
    """Lowered IRModule -> runtime module, through the target kind."""

    piece: Piece | None = None
    name: ClassVar[str] = "codegen"

    def run(self, mod: IRModule, ctx: PassContext) -> Any:
        from plait.target import run_tir_to_runtime

        kind = self.piece.target.kind
        if kind.hooks.get("tir_to_runtime") is None and not kind.backend.default_codegen:
            raise BuildError(f"target kind '{kind.name}' (piece '{self.piece.name}') cannot generate code: "
                             "it has no 'tir_to_runtime' hook and no default code generation")
        return run_tir_to_runtime(self.piece, mod, ctx)


def piece_module(mod: IRModule, piece: Piece) -> IRModule:
    """The PrimFuncs of ``mod`` that ``piece`` compiles (not external declarations)."""
    from plait.tir.stmt import PrimFunc

    funcs = {k: f for k, f in mod.items() if isinstance(f, PrimFunc) and piece_of(f) == piece.name
             and not f.attrs.get("external")}
    return IRModule(funcs, mod.attrs)


@dataclass(frozen=True)
class CodegenPieces(StagePass):
    """Lowered -> Built: code generation per piece; ``modules`` (runnable), ``cross`` (compile checks of
    pieces on another device when simulating on the host: a module's ``cross_module``, which its backend
    sets); ``lib`` the host module, importing the rest."""

    composite: CompositeTarget | None = None
    name: ClassVar[str] = "codegen_pieces"

    def run(self, lowered: Lowered, ctx: PassContext) -> Built:
        from plait.runtime.module import PyModule

        mod = lowered.mod
        modules: dict[str, Any] = {}
        cross: dict[str, Any] = {}
        external = lowered.external
        for piece in self.composite.pieces:
            sub = piece_module(mod, piece)
            ext = external.get(piece.name, [])
            if not len(sub) and not ext:
                continue
            m = None
            if len(sub):
                m = ctx.run(Codegen(piece), sub)
                if getattr(m, "cross_module", None) is not None:
                    cross[piece.name] = m.cross_module
            if ext:
                if m is None:
                    m = ext[0] if len(ext) == 1 else PyModule({})
                for e in ext:
                    if e is not m:
                        m.import_module(e)
            modules[piece.name] = m
        host_name = self.composite.host.name if self.composite._host is not None else None
        host = modules.get(host_name) if host_name else None
        if host is None:
            host = next(iter(modules.values())) if len(modules) == 1 else PyModule({})
        for name, m in modules.items():
            if m is not host:
                host.import_module(m)
        return Built(lowered, host, modules, cross)


@dataclass(frozen=True)
class ExecutorCodegen(StagePass):
    """Built -> the executor's artifact (:meth:`Executor.codegen <plait.executor.base.Executor.codegen>`,
    given the lowered stage with its plan, the runtime modules and the composite target)."""

    executor: PlansAndGenerates | None = None
    composite: CompositeTarget | None = None

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.executor.name}_executor_codegen"

    def run(self, built: Built, ctx: PassContext) -> Any:
        return self.executor.codegen(built.lowered, built, self.composite, ctx)


__all__ = ["CheckMemoryFit", "Codegen", "CodegenPieces", "ExecutorCodegen", "PlanMemory", "PlansAndGenerates",
           "piece_module"]
