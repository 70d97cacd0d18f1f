"""Passes and pass contexts.

A pass is a small class with a ``name``, options as fields and ``run(mod, ctx) -> mod``; a
pipeline is a list of passes (:class:`Sequential`). A :class:`PassContext` carries the opt level,
a config dict and instruments (objects with optional ``before(pass, mod)``/``after(pass, mod)``
methods: print-after, timing, verify-each, ...).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

from plait.errors import PlaitError


@dataclass
class PassContext:
    opt_level: int = 2
    config: dict[str, Any] = field(default_factory=dict)
    instruments: list[Any] = field(default_factory=list)
    disabled: frozenset[str] = frozenset()

    def run(self, p: "Pass", mod: Any) -> Any:
        if p.name in self.disabled or p.opt_level > self.opt_level:
            return mod
        for ins in self.instruments:
            if hasattr(ins, "before"):
                ins.before(p, mod)
        try:
            out = p.run(mod, self)
        except PlaitError:
            raise
        except Exception as exc:  # a bug in a pass: say which pass
            raise PlaitError(f"pass '{p.name}' failed: {type(exc).__name__}: {exc}") from exc
        for ins in self.instruments:
            if hasattr(ins, "after"):
                ins.after(p, out)
        return out


@dataclass(frozen=True)
class Pass:
    """Base class. Subclasses set ``name`` and implement ``run``."""

    name: ClassVar[str] = "pass"
    opt_level: ClassVar[int] = 0
    reprices: ClassVar[bool] = True
    """(A backend's legalization, ``Backend.legalize``.) Whether placement prices a call's function
    after this pass (``plait.lowering.lower.legalized_group``); False for a pass whose rewrite of a
    chain is not the sum of its rewrites of single calls (the channels-last layout)."""

    def run(self, mod: Any, ctx: PassContext) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, mod: Any, ctx: PassContext | None = None) -> Any:
        return (ctx or PassContext()).run(self, mod)


@dataclass(frozen=True)
class Sequential(Pass):
    passes: Sequence[Pass] = ()
    name: ClassVar[str] = "sequential"

    def run(self, mod: Any, ctx: PassContext) -> Any:
        for p in self.passes:
            mod = ctx.run(p, mod)
        return mod


@dataclass
class PrintAfter:
    """Instrument: print the module after the named passes (all passes if ``names`` is empty)."""

    names: Sequence[str] = ()

    def after(self, p: Pass, mod: Any) -> None:
        if not self.names or p.name in self.names:
            print(f"// after {p.name}\n{mod}")


@dataclass
class Timing:
    """Instrument: wall time per pass, in seconds, in ``self.times`` as (name, seconds)."""

    times: list[tuple[str, float]] = field(default_factory=list)
    _start: list[float] = field(default_factory=list)

    def before(self, p: Pass, mod: Any) -> None:
        self._start.append(time.perf_counter())

    def after(self, p: Pass, mod: Any) -> None:
        self.times.append((p.name, time.perf_counter() - self._start.pop()))
