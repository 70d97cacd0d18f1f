"""Tuned schedules in lowering: each workload scheduled with its tuning record's knob config.

    with applying({(workload, "c"): {"p0_y_c.vector_block": 16}}):   # plait.build does this for --tuning
        lower_function(fn, "name", "c")     # scheduled under knobs.using(that config)

    with recording() as seen:               # plait tune: every function lowering schedules
        ...lower...
    seen[(workload, target)]                # -> the unscheduled PrimFunc

A *workload* is what a tuning record is keyed by (with the canonical target string of the piece): the
PrimFunc lowering makes of a Primitive function **before scheduling**, as a short digest of its printed
TIR (:func:`workload_key`; its name left out), so that the same function in another model, or called
differently, is the same workload. The schedule of a workload depends only on it, the target and the
knob config (:mod:`plait.schedule.knobs`).

Outside :func:`applying` and :func:`recording` nothing is computed (no digest): an untuned build is
unchanged. Inside :func:`applying`, a record whose config names a knob the function does not declare,
or a value not among that knob's choices, is a :class:`TuningError` (a tuning file made by another
version of the rules). The lowering cache (:mod:`plait.lowering.cache`) keys its entries by
:func:`fingerprint` too, so a function lowered under one config is never served under another.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from plait.errors import PlaitError
from plait.tir.stmt import PrimFunc

#: the attribute a function lowered under :func:`applying` or :func:`recording` carries: its workload key
WORKLOAD_ATTR = "workload"


class TuningError(PlaitError):
    """A tuning record does not fit the function it names (stale or garbled tuning file)."""


def workload_key(func: PrimFunc) -> str:
    """The workload of an unscheduled PrimFunc: 16 hex digits of the SHA-256 of its printed TIR."""
    from plait.tir.printer import print_prim_func

    text = print_prim_func(func.with_attrs(global_symbol="workload"), "workload")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class _Tuning:
    configs: Mapping[tuple[str, str], Mapping[str, Any]]
    record: dict[tuple[str, str], PrimFunc] | None = None
    fingerprint: str = field(default="")


_CURRENT: contextvars.ContextVar["_Tuning | None"] = contextvars.ContextVar("plait_tuning", default=None)


def fingerprint() -> str:
    """A digest of the active configs ("" when none): part of the lowering cache's key."""
    t = _CURRENT.get()
    return t.fingerprint if t is not None else ""


@contextlib.contextmanager
def _active(t: _Tuning | None) -> Iterator[None]:
    token = _CURRENT.set(t)
    try:
        yield
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def applying(configs: Mapping[tuple[str, str], Mapping[str, Any]]) -> Iterator[None]:
    """Lower under ``configs``: ``(workload, target string) -> knob config``. Empty: no tuning at all."""
    if not configs:
        with _active(None):
            yield
        return
    text = json.dumps(sorted([list(k), dict(v)] for k, v in configs.items()), sort_keys=True, default=str)
    with _active(_Tuning(dict(configs), None, hashlib.sha256(text.encode()).hexdigest()[:16])):
        yield


@contextlib.contextmanager
def recording(configs: Mapping[tuple[str, str], Mapping[str, Any]] | None = None
              ) -> Iterator[dict[tuple[str, str], PrimFunc]]:
    """Lower (under ``configs``, if given) and collect ``(workload, target string) -> unscheduled PrimFunc``
    of every function scheduled meanwhile (what a tuner searches)."""
    seen: dict[tuple[str, str], PrimFunc] = {}
    text = json.dumps(sorted([list(k), dict(v)] for k, v in (configs or {}).items()), sort_keys=True, default=str)
    with _active(_Tuning(dict(configs or {}), seen, "rec:" + hashlib.sha256(text.encode()).hexdigest()[:16])):
        yield seen


def schedule_with(func: PrimFunc, target: Any, config: Mapping[str, Any] | None) -> tuple[PrimFunc, dict[str, Any]]:
    """``func`` scheduled by the target's rules under the knob ``config`` (None: the rules' defaults);
    returns it and the knob space it declared (name -> :class:`plait.schedule.knobs.Knob`)."""
    from plait.schedule import default_schedule, knobs

    with knobs.using(config or {}) as space:
        out = default_schedule(func, target)
    return out, dict(space.knobs)


def misfit(config: Mapping[str, Any], space: Mapping[str, Any]) -> str | None:
    """Why ``config`` does not fit the declared knob ``space`` (None when it does)."""
    for name, value in config.items():
        knob = space.get(name)
        if knob is None:
            return f"knob '{name}' is not a knob of this function (it has {', '.join(space) or 'none'})"
        if value not in knob.choices:
            return f"knob '{name}': {value!r} is not one of {list(knob.choices)}"
    return None


def schedule(func: PrimFunc, target: Any) -> PrimFunc:
    """The scheduling step of lowering: the target's default schedule, under the active tuning's config of
    ``func``'s workload (if any); the result carries :data:`WORKLOAD_ATTR` when tuning is active."""
    t = _CURRENT.get()
    if t is None:
        from plait.schedule import default_schedule

        return default_schedule(func, target)
    key = workload_key(func)
    if t.record is not None:
        t.record.setdefault((key, str(target)), func)
    config = t.configs.get((key, str(target)))
    out, space = schedule_with(func, target, config)
    if config is not None:
        why = misfit(config, space)
        if why is not None:
            raise TuningError(f"the tuning record of workload {key} ('{func.name}') on target '{target}' does not "
                              f"fit: {why}; the tuning file is stale (re-run plait tune)")
    return out.with_attrs({WORKLOAD_ATTR: key})


__all__ = ["TuningError", "WORKLOAD_ATTR", "applying", "fingerprint", "misfit", "recording", "schedule",
           "schedule_with", "workload_key"]
