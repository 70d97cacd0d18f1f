"""How the pipeline runs: a :class:`Step` is a named list of passes that produces one stage type.

A pass is either a :class:`StagePass` (``run(stage, ctx) -> stage``: it makes the next stage) or an
ordinary module pass (``run(mod, ctx) -> mod``, :class:`plait.ir.transform.Pass`), which runs on the
stage's module and leaves the stage's other fields as they are. Every pass runs through the
:class:`~plait.ir.transform.PassContext`, so its instruments (``Timing``, ``PrintAfter``) see each one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

from plait.ir.transform import Pass, PassContext
from plait.pipeline.stages import BuildError, BuildStage
from plait.relay.module import IRModule


class StagePass(Pass):
    """A pass from one stage to the next (``run(stage, ctx)``); not run on a module alone."""


@dataclass(frozen=True)
class Step:
    """``passes`` in order, making a ``produces`` stage (a :class:`BuildStage` subclass, or ``object``
    for the last step's artifact) from the one before."""

    name: str
    produces: type
    passes: tuple[Pass, ...]


def run_step(step: Step, stage: Any, ctx: PassContext) -> Any:
    """``stage`` through ``step``'s passes; a BuildError if the result is not a ``step.produces``."""
    for p in step.passes:
        if isinstance(p, StagePass):
            stage = ctx.run(p, stage)
        else:
            stage = dataclasses.replace(stage, mod=ctx.run(p, stage.mod))
    if not isinstance(stage, step.produces):
        if isinstance(stage, BuildStage) and [f.name for f in dataclasses.fields(step.produces)] == ["mod"]:
            return step.produces(stage.mod)  # a step of module passes (import): the module is now that stage
        raise BuildError(f"pipeline step '{step.name}' made a {type(stage).__name__}, not a {step.produces.__name__}")
    return stage


def run_steps(steps: Sequence[Step], stage: Any, ctx: PassContext) -> Any:
    """``stage`` (an IRModule is taken as the model's stage) through every step in order."""
    if isinstance(stage, IRModule):
        stage = BuildStage(stage)
    for step in steps:
        stage = run_step(step, stage, ctx)
    return stage


__all__ = ["StagePass", "Step", "run_step", "run_steps"]
