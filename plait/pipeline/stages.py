"""The typed stages of a build: what each step of the pipeline (:mod:`plait.pipeline`) hands the next.

A stage is a frozen dataclass holding the module and what its step added; it prints as its module.

    Imported     the model typed and folded (what placement sees)
    Priced       + ``pricing``: the placement problem in numbers (None for one piece)
    Placed       + ``assignment``: every operator call -> a piece (None for one piece)
    Partitioned  region functions ``<piece>_<k>`` called from ``main`` (copies between memories)
    Lowered      every region lowered to PrimFuncs (or an external declaration) + the external modules,
                 then ``plan``: the memory plan of the executor, made once, which the fit check and the
                 executor's codegen both read
    Built        the runtime module of every piece; ``lib`` the host's, importing the others
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from plait.errors import PlaitError
from plait.relay.module import IRModule

if TYPE_CHECKING:  # annotations only: these modules are loaded by the steps that make the values
    import numpy as np

    from plait.placement.solver import Assignment, Pricing
    from plait.runtime.module import Module


class BuildError(PlaitError):
    """``plait.build`` was called wrongly or a stage of the pipeline is missing for the target."""


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
class Priced(BuildStage):
    """``mod`` (unchanged) and ``pricing``: the placement problem in numbers (a
    :class:`~plait.placement.solver.Pricing`; None when the target has one piece)."""

    pricing: Pricing | None


@dataclass(frozen=True)
class Placed(BuildStage):
    """``mod`` (unchanged) and ``assignment``: every call's piece (a
    :class:`~plait.placement.solver.Assignment`; None when the target has one piece)."""

    assignment: Assignment | None


@dataclass(frozen=True)
class Partitioned(BuildStage):
    """Region functions ``<piece>_<k>`` (called from ``main``, which copies between memories) and the
    Assignment they came from."""

    assignment: Assignment | None


@dataclass(frozen=True)
class ProgramPlan:
    """An executor's memory plan of a lowered module, made once per build (:meth:`Executor.plan
    <plait.executor.base.Executor.plan>`): ``graph`` the planned graph form (nodes, entries, and the
    planner's ``storage``, ``pools``, ``memory``: :mod:`plait.memory.plan`), ``params`` the constants,
    ``functions`` the signature of every function it calls, ``state`` what the executor's codegen
    continues from (its own, e.g. the VM's program builder). The memory fit check reads ``graph``."""

    graph: dict[str, Any]
    params: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    functions: dict[str, Any] = field(default_factory=dict, repr=False)
    state: Any = field(default=None, repr=False)


@dataclass(frozen=True)
class Lowered(BuildStage):
    """Every region lowered: ``main`` calls the region functions (and copies between them); each region
    calls PrimFuncs or is one (an external declaration for a region compiled by a ``relay_to_runtime``
    hook, whose runtime modules are in ``external``, by piece name). ``plan``: the executor's memory
    plan (None until the ``plan_memory`` step, and for ``plait explain``, which plans for its report)."""

    assignment: Assignment | None
    external: Mapping[str, tuple[Module, ...]] = field(default_factory=dict)
    plan: ProgramPlan | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Built:
    """The host runtime module ``lib`` (importing the others), every piece's module (``modules``) and
    the compile checks of pieces on other devices when simulating on the host (``cross``)."""

    lowered: Lowered
    lib: Module
    modules: Mapping[str, Module]
    cross: Mapping[str, Module]

    def __str__(self) -> str:
        return str(self.lowered.mod)


__all__ = ["BuildError", "BuildStage", "Built", "Imported", "Lowered", "Partitioned", "Placed", "Priced",
           "ProgramPlan"]
