"""Schedule knobs: the parameters a schedule rule may take from a tuning config instead of choosing them.

A rule that has a free parameter (a tile size, a vector width, an unroll factor, a layout block)
declares it where it uses it::

    from plait.schedule import knobs
    oc = knobs.choose(f"{root}.oc_block", (4, 8, 16), default=8)

Outside :func:`using`, ``choose`` returns ``default`` and records nothing: a plain build is unchanged.
Inside ``using(config)``, it returns ``config[name]`` when the config has it (the value must be one of
``choices``) and ``default`` otherwise, and records the knob in the space the context returns. Scheduling
one PrimFunc under ``using({})`` therefore lists its knobs (the search space a tuner explores), and
under ``using(best)`` applies a tuning record. Names are unique within one PrimFunc (prefix them with
the stage's root loop name).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from plait.schedule.errors import ScheduleError


@dataclass(frozen=True)
class Knob:
    """One declared parameter: its ``choices`` (in a stable order) and the rule's own ``default``."""

    name: str
    choices: tuple
    default: Any


@dataclass
class KnobSpace:
    """The knobs declared while scheduling under :func:`using`, in declaration order, and the config used."""

    config: Mapping[str, Any]
    knobs: dict[str, Knob] = field(default_factory=dict)

    def chosen(self) -> dict[str, Any]:
        """The value each declared knob took (the config's, else the default)."""
        return {n: self.config.get(n, k.default) for n, k in self.knobs.items()}


_state = threading.local()


def _current() -> KnobSpace | None:
    stack = getattr(_state, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def using(config: Mapping[str, Any] | None = None) -> Iterator[KnobSpace]:
    """Schedule under ``config`` (knob name -> value); yields the :class:`KnobSpace` being recorded."""
    space = KnobSpace(dict(config or {}))
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(space)
    try:
        yield space
    finally:
        stack.pop()


def choose(name: str, choices: tuple | list, default: Any) -> Any:
    """The value of knob ``name``: the active config's (checked against ``choices``), else ``default``."""
    choices = tuple(choices)
    if default not in choices:
        raise ScheduleError(f"knob '{name}': default {default!r} is not one of its choices {list(choices)}")
    space = _current()
    if space is None:
        return default
    known = space.knobs.get(name)
    if known is not None and known.choices != choices:
        raise ScheduleError(f"knob '{name}' declared twice with different choices: "
                            f"{list(known.choices)} and {list(choices)}")
    space.knobs[name] = Knob(name, choices, default)
    if name not in space.config:
        return default
    value = space.config[name]
    if value not in choices:
        raise ScheduleError(f"knob '{name}': the config's value {value!r} is not one of {list(choices)}")
    return value
