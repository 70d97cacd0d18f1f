"""The candidate schedules of a workload: knob configs, found by scheduling it.

A rule declares a knob where it uses it (:mod:`plait.schedule.knobs`), so which knobs a function has
can depend on the values of the knobs declared before them (a narrower vector width makes a row
vectorizable and declares its register tile). The configs are therefore the leaves of a tree: schedule
under the values chosen so far, take the first knob declared that has no value yet, branch over its
choices. :func:`candidates` lists the whole tree (a grid) when it has at most ``trials`` leaves, else
``trials`` random descents from a generator seeded by ``seed`` and the workload (the same seed gives
the same candidates wherever they are enumerated). Every config is complete (a value for each knob
the schedule under it declares, and nothing else), and the rules' own default config comes first.
"""

from __future__ import annotations

import random
from typing import Any

from plait.lowering.tuning import schedule_with
from plait.tir.stmt import PrimFunc

Config = dict[str, Any]


def _free(func: PrimFunc, target: Any, config: Config) -> tuple[str, tuple] | None:
    """The first knob declared under ``config`` that has no value in it (and its choices), or None."""
    _, space = schedule_with(func, target, config)
    for name, knob in space.items():
        if name not in config:
            return name, knob.choices
    return None


def default_config(func: PrimFunc, target: Any) -> Config:
    """The rules' own choices, as a complete config."""
    _, space = schedule_with(func, target, {})
    return {name: knob.default for name, knob in space.items()}


def _grid(func: PrimFunc, target: Any, limit: int) -> list[Config] | None:
    """Every leaf config (depth first, choices in their declared order); None when more than ``limit``."""
    out: list[Config] = []
    stack: list[Config] = [{}]
    while stack:
        config = stack.pop()
        free = _free(func, target, config)
        if free is None:
            out.append(config)
            if len(out) > limit:
                return None
            continue
        name, choices = free
        stack.extend({**config, name: c} for c in reversed(choices))
    return out


def _key(config: Config) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in config.items()))


def candidates(func: PrimFunc, target: Any, trials: int, seed: int, workload: str) -> list[Config]:
    """At most ``trials`` (at least 1) distinct complete configs of ``func`` on ``target``, the default first."""
    default = default_config(func, target)
    grid = _grid(func, target, max(trials, 1))
    if grid is not None:
        return [default, *(c for c in grid if _key(c) != _key(default))]
    rng = random.Random(f"{seed}:{workload}")
    out, seen = [default], {_key(default)}
    for _ in range(8 * trials):
        if len(out) >= trials:
            break
        config: Config = {}
        while (free := _free(func, target, config)) is not None:
            config[free[0]] = rng.choice(free[1])
        if _key(config) not in seen:
            seen.add(_key(config))
            out.append(config)
    return out


__all__ = ["Config", "candidates", "default_config"]
