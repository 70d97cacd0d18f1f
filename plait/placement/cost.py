"""Cost model for placement: latency and energy of a call on a piece, and of a transfer between pieces.

Sources, in order (every :class:`Estimate` says which one it came from):

1. ``measured``: a measured cost database (:class:`CostDatabase`, a JSON file) keyed by the call's
   signature (:func:`signature`) and the target string; or the database's tuning record of the function
   lowering makes of the call (or fusion group), keyed by its workload (:mod:`plait.lowering.tuning`,
   written by ``plait tune``);
2. ``hook``: the kind's ``cost`` hook (seconds; None means "no estimate" and falls through);
3. ``schedule``: the call lowered as its own function (its single-call function), scheduled by the
   target's default rules and priced by :func:`plait.schedule.estimate_cost` (what the piece would really
   run); the lowering goes through the build's :class:`~plait.lowering.cache.LoweringCache`, so default
   lowering of the same function later in the build reuses that TIR instead of lowering it again;
4. ``roofline``: the op's :class:`plait.ir.op.Cost` (FLOPs, bytes) against the target's machine
   (:func:`plait.schedule.machine_for`: clock, FMA/cycle x SIMD lanes, soft-float cycles per flop
   when ``fpu`` is 'none', memory bytes/cycle): ``max(compute, memory) + call overhead``.

A view (:attr:`plait.ir.op.Op.view`: reshape, flatten...) costs nothing on every piece (source
``view``): executors alias its input. Energy is latency x the piece's ``power_mw`` fact
(:data:`DEFAULT_POWER_MW` when unknown). A transfer
costs ``bytes / bandwidth + switch overhead`` (:class:`Link`), its energy at both pieces' power.
A fusion group (calls default lowering will fuse into one function when they share a piece:
:func:`plait.relay.passes.fuse_ops.find_groups`) is priced on a piece lowered by default as that one
function (:meth:`CostModel.fused_cost`), through the same cache, so lowering finds every group it
makes already lowered; on a piece with a ``relay_to_tir`` hook (which lowers call by call) it costs the
sum of its calls. A region claimed by a piece's pattern
(:mod:`plait.placement.pattern`) costs what the kind's ``cost`` hook says when it is called with the
:class:`~plait.placement.pattern.PatternRegion` (a number), else the sum of its calls (:meth:`CostModel.region_cost`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np

from plait.errors import PlaitError
from plait.ir.op import Op
from plait.ir.types import TensorType, TupleType, Type
from plait.lowering.tuning import TuningError
from plait.relay.expr import Call, Function
from plait.target.composite import Piece

DEFAULT_POWER_MW = 1000.0
CALL_OVERHEAD_CYCLES = 20.0
DEFAULT_LINK_BYTES_PER_S = 100e6  # an on-board bus / shared SRAM between two cores: order of 100 MB/s
DEFAULT_SWITCH_S = 10e-6  # handing control to another piece: a few thousand cycles of an MCU


class CostError(PlaitError):
    """A cost database is malformed, or a call cannot be priced."""


@dataclass(frozen=True)
class Estimate:
    seconds: float
    joules: float
    source: str  # "measured" | "hook" | "schedule" | "roofline" | "transfer" | "view"
    detail: str = ""

    def value(self, objective: str, weight: float = 0.5) -> float:
        return objective_value(self.seconds, self.joules, objective, weight)


def objective_value(seconds: float, joules: float, objective: str, weight: float = 0.5) -> float:
    """``latency`` (s), ``energy`` (J) or ``weighted``: ``weight * us + (1 - weight) * mJ``."""
    if objective == "latency":
        return seconds
    if objective == "energy":
        return joules
    if objective == "weighted":
        return weight * seconds * 1e6 + (1 - weight) * joules * 1e3
    raise CostError(f"unknown objective '{objective}': expected latency, energy or weighted")


def _leaves(t: Type) -> list[TensorType]:
    return [f for f in (t.fields if isinstance(t, TupleType) else (t,)) if isinstance(f, TensorType)]


def type_bytes(t: Type) -> int:
    """Bytes of a (tuple of) static tensor type(s); a symbolic dimension counts as 1."""
    n = 0
    for tt in _leaves(t):
        size = 1
        for d in tt.shape:
            size *= d if isinstance(d, int) else 1
        n += size * (1 if tt.dtype == "bool" else np.dtype(tt.dtype).itemsize)
    return n


def signature(call: Call) -> str:
    """``op(arg types) attrs``: the database key of a call (with the target string)."""
    types = ", ".join(str(a.checked_type) for a in call.args)
    attrs = ", ".join(f"{k}={v!r}" for k, v in sorted(call.attrs.items()))
    return f"{call.op_name}({types}){' {' + attrs + '}' if attrs else ''}"


class CostDatabase:
    """Measured costs: ``{"entries": [{"op": signature, "target": str, "seconds": s, "joules": j?, ...}]}``.

    An entry may carry more fields, kept as they are: ``plait measure`` writes ``instructions``,
    ``source`` ("measured qemu"), ``board``, ``cpi``, ``clock_mhz`` and ``calls``; ``plait tune`` writes
    ``source`` ("measured wall" or "analytic estimate") and ``name`` for each call a piece lowering calls
    itself (blas) may take, timed alone as the tuned functions are. An optional
    ``"calibration": [{"target": str, "op": op name or "*", "factor": k}]`` scales the analytic estimates
    (schedule, roofline) of calls not in the entries on that target: by the factor of their op, else "*".
    An optional ``"tuning": [{"workload": key, "target": str, "config": {knob: value}, "seconds": s,
    "source": ..., ...}]`` (``plait tune``) gives each workload's best knob config (lowering applies it,
    :func:`plait.lowering.tuning.applying`) and its measured cost (placement's source "measured")."""

    def __init__(self, entries: Mapping[tuple[str, str], tuple[float, float | None]] | None = None,
                 info: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
                 calibration: Mapping[str, Mapping[str, float]] | None = None):
        self._entries = dict(entries or {})
        self._info = {k: dict(v) for k, v in (info or {}).items()}
        self._calibration = {t: dict(f) for t, f in (calibration or {}).items()}
        self._tuning: dict[tuple[str, str], TuningRecord] = {}

    @classmethod
    def load(cls, path: str | os.PathLike) -> "CostDatabase":
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as exc:
            raise CostError(f"cost database '{path}': {exc}") from None
        return cls.from_dict(data, str(path))

    @classmethod
    def from_dict(cls, data: Any, where: str = "cost database") -> "CostDatabase":
        if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
            raise CostError(f"{where}: expected an object with a list 'entries'")
        out, info = {}, {}
        for k, e in enumerate(data["entries"]):
            if not (isinstance(e, dict) and isinstance(e.get("op"), str) and isinstance(e.get("target"), str)
                    and isinstance(e.get("seconds"), (int, float)) and e["seconds"] >= 0):
                raise CostError(f"{where}: entry {k} needs 'op' and 'target' strings and 'seconds' >= 0")
            j = e.get("joules")
            out[(e["op"], e["target"])] = (float(e["seconds"]), None if j is None else float(j))
            info[(e["op"], e["target"])] = {n: v for n, v in e.items() if n not in ("op", "target", "seconds", "joules")}
        cal: dict[str, dict[str, float]] = {}
        for k, c in enumerate(data.get("calibration", [])):
            if not (isinstance(c, dict) and isinstance(c.get("target"), str) and isinstance(c.get("op"), str)
                    and isinstance(c.get("factor"), (int, float)) and c["factor"] > 0):
                raise CostError(f"{where}: calibration {k} needs 'target' and 'op' strings and 'factor' > 0")
            cal.setdefault(c["target"], {})[c["op"]] = float(c["factor"])
        db = cls(out, info, cal)
        tuning = data.get("tuning", [])
        if not isinstance(tuning, list):
            raise CostError(f"{where}: 'tuning' must be a list of records")
        for k, r in enumerate(tuning):
            if not (isinstance(r, dict) and isinstance(r.get("workload"), str) and isinstance(r.get("target"), str)
                    and isinstance(r.get("config"), dict) and isinstance(r.get("seconds"), (int, float))
                    and r["seconds"] >= 0
                    and all(isinstance(v, (bool, int, float, str)) for v in r["config"].values())):
                raise CostError(f"{where}: tuning record {k} needs 'workload' and 'target' strings, a 'config' object "
                                "of knob values and 'seconds' >= 0")
            db.add_tuning(r["workload"], r["target"], r["config"], r["seconds"],
                          **{n: v for n, v in r.items() if n not in ("workload", "target", "config", "seconds")})
        return db

    def add_tuning(self, workload: str, target: str, config: Mapping[str, Any], seconds: float, **info: Any) -> None:
        """Record (or replace) the best knob ``config`` of ``workload`` on ``target`` and its cost."""
        self._tuning[(workload, str(target))] = TuningRecord(workload, str(target), dict(config), float(seconds),
                                                             dict(info))

    def tuned(self, workload: str, target: Any) -> "TuningRecord | None":
        """The tuning record of ``workload`` on ``target``, if any."""
        return self._tuning.get((workload, str(target)))

    def tuning(self) -> list["TuningRecord"]:
        """Every tuning record, in the order added."""
        return list(self._tuning.values())

    def tuning_configs(self) -> dict[tuple[str, str], dict[str, Any]]:
        """``(workload, target) -> config`` of every tuning record (what lowering applies)."""
        return {k: dict(r.config) for k, r in self._tuning.items()}

    def add(self, op: str, target: str, seconds: float, joules: float | None = None, **info: Any) -> None:
        """Record (or replace) the cost of the call signature ``op`` on ``target``; ``info``: more fields."""
        self._entries[(op, target)] = (float(seconds), None if joules is None else float(joules))
        self._info[(op, target)] = dict(info)

    def merge(self, other: "CostDatabase") -> None:
        """Add ``other``'s entries and calibration (replacing those with the same keys)."""
        self._entries.update(other._entries)
        self._info.update({k: dict(v) for k, v in other._info.items()})
        for t, f in other._calibration.items():
            self._calibration.setdefault(t, {}).update(f)
        self._tuning.update(other._tuning)

    def set_factor(self, target: str, op: str, factor: float) -> None:
        """Calibrate the analytic estimates of ``op`` (an op name, or "*" for any) on ``target`` by ``factor``."""
        self._calibration.setdefault(target, {})[op] = float(factor)

    def factor(self, op: str, target: Any) -> float | None:
        """The calibration factor of ``op`` on ``target`` (its own, else "*"); None when not calibrated."""
        f = self._calibration.get(str(target), {})
        return f.get(op, f.get("*"))

    def calibrates(self, target: Any) -> bool:
        return bool(self._calibration.get(str(target)))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"entries": [{"op": op, "target": t, "seconds": s, **({} if j is None else {"joules": j}),
                                            **self._info.get((op, t), {})} for (op, t), (s, j) in self._entries.items()]}
        if self._calibration:
            out["calibration"] = [{"target": t, "op": op, "factor": k} for t, f in self._calibration.items()
                                  for op, k in sorted(f.items())]
        if self._tuning:
            out["tuning"] = [{"workload": r.workload, "target": r.target, "config": r.config, "seconds": r.seconds,
                              **r.info} for r in self._tuning.values()]
        return out

    def save(self, path: str | os.PathLike) -> None:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")

    def lookup(self, call: Call, target: Any) -> tuple[float, float | None] | None:
        return self._entries.get((signature(call), str(target)))

    def info(self, call: Call, target: Any) -> dict[str, Any]:
        """The entry's other fields (``instructions``, ``source``...); empty when none or no entry."""
        return dict(self._info.get((signature(call), str(target)), {}))

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class TuningRecord:
    """A workload's best knob ``config`` on ``target`` and its cost (``info``: ``source``, ``name``...)."""

    workload: str
    target: str
    config: dict
    seconds: float
    info: dict

    def describe(self) -> str:
        knobs = ", ".join(f"{k}={v}" for k, v in sorted(self.config.items())) or "the default schedule"
        return f"tuning record ({self.info.get('source', 'measured')}) of workload {self.workload}: {knobs}"


def applying_tuning(cost_model: "CostModel | None") -> Any:
    """The context in which lowering applies the tuning records of ``cost_model``'s database (none: a no-op)."""
    from plait.lowering.tuning import applying

    db = getattr(cost_model, "database", None)
    return applying(db.tuning_configs() if db is not None else {})


def _power_mw(target: Any) -> float:
    from plait.schedule.machine import fact

    return float(fact(target, "power_mw", DEFAULT_POWER_MW))


def _as_piece(p: Piece | Any) -> Piece:
    return p if isinstance(p, Piece) else Piece(p.kind_name, p)


class CostModel:
    """Prices calls on pieces. ``use_schedule=False`` skips lowering (roofline only: faster)."""

    def __init__(self, database: CostDatabase | None = None, use_schedule: bool = True,
                 link_bytes_per_s: float = DEFAULT_LINK_BYTES_PER_S, switch_s: float = DEFAULT_SWITCH_S,
                 composite: Any = None):
        self.database = database
        self.use_schedule = use_schedule
        self.link_bytes_per_s = float(link_bytes_per_s)
        self.switch_s = float(switch_s)
        self.composite = composite  # a CompositeTarget: which pieces share memory (no transfer)
        self._cache: dict[tuple[str, str], Estimate] = {}

    @classmethod
    def for_target(cls, composite: Any, database: CostDatabase | None = None, use_schedule: bool = True) -> "CostModel":
        """A cost model whose transfers follow the composite target's ``transfer`` settings."""
        from plait.target import CompositeTarget

        ct = CompositeTarget(composite)
        t = ct.transfer
        return cls(database, use_schedule, link_bytes_per_s=t.bandwidth, switch_s=t.switch, composite=ct)

    def with_target(self, composite: Any) -> "CostModel":
        """This model (same database and cache) with the composite target's transfer settings."""
        from plait.target import CompositeTarget

        ct = CompositeTarget(composite)
        out = CostModel.for_target(ct, self.database, self.use_schedule)
        out._cache = self._cache
        return out

    def call_cost(self, call: Call, piece: Piece | Any) -> Estimate:
        if isinstance(call.op, Op) and call.op.view:
            return Estimate(0.0, 0.0, "view", "a view of its input (executors alias it): nothing runs")
        piece = _as_piece(piece)
        known = self._known(call, piece)
        if known is not None:
            return known
        target = piece.target
        key = (signature(call), str(target))
        if key not in self._cache:
            e = self._analytic(call, target, _power_mw(target) * 1e-3)
            self._cache[key] = e if e.source == "measured" else self._calibrated(e, call, target)
        return self._cache[key]

    def _calibrated(self, e: Estimate, call: Call, target: Any) -> Estimate:
        k = None if self.database is None else self.database.factor(call.op_name, target)
        if k is None:
            return e
        return Estimate(e.seconds * k, e.joules * k, e.source, f"{e.detail}; calibrated x{k:.3g} (measured)")

    def fused_cost(self, fn: Function, calls: list[Call], piece: Piece | Any) -> Estimate | None:
        """The fusion group ``calls`` (its Primitive function ``fn``, typed) on a piece lowered by default,
        priced as that one function: lowered (through the build's cache, so lowering reuses it), scheduled
        and estimated. None when nothing needs lowering to price the calls (every one has a database or
        hook cost, or ``use_schedule`` is off, or the database calibrates the piece's target: calls are then
        priced one by one, calibrated), when the function cannot be lowered, and in a subclass that
        overrides :meth:`call_cost` without overriding this: the calls are then priced and placed one by one
        (lowering still fuses those that share a piece, lowering each once)."""
        if type(self).call_cost is not CostModel.call_cost and type(self).fused_cost is CostModel.fused_cost:
            return None
        piece = _as_piece(piece)
        if not self.use_schedule or all(self._known(c, piece) is not None for c in calls):
            return None
        if self.database is not None and self.database.calibrates(piece.target):
            return None  # calibrated per call: the factors were fitted to single-call estimates
        from plait.lowering.cache import lower_cached
        from plait.lowering.lower import legalized_group
        from plait.schedule import estimate_cost

        target = piece.target
        try:
            func = lower_cached(legalized_group(calls, target) or fn, "placement_cost", target)
            tuned = self._tuned(func, target, _power_mw(target) * 1e-3)
            if tuned is not None:
                return tuned
            c = estimate_cost(func, target)
        except TuningError:
            raise  # a stale tuning file: say so, do not price around it
        except PlaitError:
            return None
        if c is None:
            return None
        return Estimate(c.seconds, c.seconds * _power_mw(target) * 1e-3, "schedule",
                        f"fused group '{fn.attrs.get('name')}' of {len(calls)} calls: {c}")

    def _known(self, call: Call, piece: Piece) -> Estimate | None:
        """The database's or the kind's cost hook's estimate of ``call``, if either has one."""
        power = _power_mw(piece.target) * 1e-3
        if self.database is not None:
            got = self.database.lookup(call, piece.target)
            if got is not None:
                s, j = got
                more = self.database.info(call, piece.target)
                if "instructions" in more and "source" in more:
                    detail = f"{more['source']}: {more['instructions']:,.0f} instructions on {more.get('board', '?')}"
                elif "source" in more:  # plait tune: the call alone on a piece whose kind lowers it itself
                    detail = f"cost database entry ({more['source']}) of the call alone"
                else:
                    detail = "the cost database"
                return Estimate(s, s * power if j is None else j, "measured", detail)
        from plait.target import call_cost

        s = call_cost(piece, call)
        if s is not None:
            return Estimate(s, s * power, "hook", f"the 'cost' hook of target kind '{piece.target.kind_name}'")
        return None

    def group_cost(self, calls: Iterable[Call], piece: Piece | Any) -> Estimate:
        return _sum([self.call_cost(c, piece) for c in calls], "sum of calls")

    def region_cost(self, region: Any, piece: Piece | Any) -> Estimate | None:
        """The kind's ``cost`` hook called with the claimed ``region`` (a PatternRegion); None when the kind has no
        such hook or the hook has no estimate for it (the region then costs the sum of its calls)."""
        piece = _as_piece(piece)
        from plait.target import call_cost

        s = call_cost(piece, region)
        if s is None:
            return None
        return Estimate(s, s * _power_mw(piece.target) * 1e-3, "hook",
                        f"the 'cost' hook of target kind '{piece.target.kind_name}' on region '{region.name}' "
                        f"({len(region.calls)} calls)")

    def transfer_cost(self, nbytes: int, a: Piece | Any, b: Piece | Any) -> Estimate:
        """Moving ``nbytes`` from piece ``a`` to piece ``b`` (zero when they are the same piece)."""
        a, b = _as_piece(a), _as_piece(b)
        if a.name == b.name:
            return Estimate(0.0, 0.0, "transfer", "same piece")
        if self.composite is not None and self.composite.shares_memory(a, b):
            return Estimate(0.0, 0.0, "transfer", f"shared memory (device '{a.target.device}')")
        s = nbytes / self.link_bytes_per_s + self.switch_s
        j = s * (_power_mw(a.target) + _power_mw(b.target)) * 1e-3
        return Estimate(s, j, "transfer", f"{nbytes} bytes / {self.link_bytes_per_s:g} B/s + {self.switch_s:g} s")

    # ---- analytic ------------------------------------------------------------------------------

    def _analytic(self, call: Call, target: Any, power: float) -> Estimate:
        if self.use_schedule:
            from plait.lowering.cache import lower_cached
            from plait.lowering.lower import legalized_group, single_call_function
            from plait.schedule import estimate_cost

            try:
                # the function default lowering makes of a call alone (after the kind's legalization), through
                # the build's cache: lowering reuses it
                fn = legalized_group([call], target) or single_call_function(call)
                func = lower_cached(fn, "placement_cost", target)
                tuned = self._tuned(func, target, power)
                if tuned is not None:
                    return tuned
                c = estimate_cost(func, target)
            except TuningError:
                raise
            except PlaitError:
                c = None
            if c is not None:
                return Estimate(c.seconds, c.seconds * power, "schedule", str(c))
        return _roofline(call, target, power)

    def _tuned(self, func: Any, target: Any, power: float) -> Estimate | None:
        """The measured cost of the lowered ``func`` from its workload's tuning record, if the database has one."""
        from plait.lowering.tuning import WORKLOAD_ATTR

        key = func.attrs.get(WORKLOAD_ATTR)
        r = self.database.tuned(key, target) if self.database is not None and key else None
        return None if r is None else Estimate(r.seconds, r.seconds * power, "measured", r.describe())


def _sum(ests: list[Estimate], detail: str) -> Estimate:
    srcs = sorted({e.source for e in ests})
    return Estimate(sum(e.seconds for e in ests), sum(e.joules for e in ests), "+".join(srcs), detail)


def _roofline(call: Call, target: Any, power: float) -> Estimate:
    from plait.schedule import machine_for

    op = call.op
    assert isinstance(op, Op)
    work = op.cost(tuple(a.checked_type for a in call.args), call.checked_type, call.attrs)
    m = machine_for(target)
    dtypes = [t.dtype for t in _leaves(call.checked_type)] or ["float32"]
    dt = dtypes[0]
    if dt.startswith("float") and not m.has_fpu(dt):
        compute = work.flops * m.soft_float_cycles  # each float operation is a library call
    else:
        compute = work.flops / (2 * m.fma_per_cycle * m.lanes(dt))
    memory = work.bytes / m.bytes_per_cycle
    cycles = max(compute, memory) + CALL_OVERHEAD_CYCLES
    s = cycles / (m.clock_mhz * 1e6)
    return Estimate(s, s * power, "roofline",
                    f"{work.flops:g} flops, {work.bytes:g} bytes: {cycles:.4g} cycles at {m.clock_mhz:g} MHz")
