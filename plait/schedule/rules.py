"""Default schedules: rule sets, chosen through the target kind.

``default_schedule(func, target)`` asks the target which rule set to use: the kind attribute
``schedule_rules`` (a name, or a function of the target returning one; the ``c`` kind answers
``"microcontroller"`` for Cortex-M CPUs and ``"cpu"`` otherwise). A kind without the attribute gets
``"cpu"``. Nothing here looks at a kind's name: vector widths and FPU come from the tag's facts.

Each stage (top-level loop nest) is scheduled on its own; when a rule's primitive refuses (a
:class:`ScheduleError`: unexpected loop structure, or a transformation that would change results),
the stage keeps the schedule it had before that rule. See docs/schedules.md for the rules and
the measurements behind them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from plait.errors import PlaitError
from plait.registry import Registry
from plait.tir import verify
from plait.tir.stmt import For, PrimFunc, Stmt
from plait.schedule import knobs
from plait.schedule.int_rules import int_stage
from plait.schedule.analysis import const_int, get_loop
from plait.schedule.chain_rules import interleave_outputs, scalar_reduction
from plait.schedule.errors import ScheduleError
from plait.schedule.isolate import clashing_names, isolate, splice
from plait.schedule.machine import Machine, fact, fma_bits, mcu_integer
from plait.schedule.schedule import Schedule
from plait.schedule.stage import Stage, analyze, buffers_with_guards, contiguous, stage_roots, uses

StageRule = Callable[[PrimFunc, str, Machine], PrimFunc]


@dataclass(frozen=True)
class RuleSet:
    """A named set of default rules: ``machine(target)`` gives the numbers, ``schedule_stage(func,
    root_loop_name, machine)`` schedules one stage."""

    name: str
    machine: Callable[[Any], Machine]
    schedule_stage: StageRule
    doc: str = ""


RULE_SETS: Registry[RuleSet] = Registry("schedule rule set")


def register_rules(rules: RuleSet) -> RuleSet:
    """Register a rule set (a kind's ``schedule_rules`` attribute names it). Duplicates raise."""
    return RULE_SETS.register(rules.name, rules)


def _as_target(target: Any, who: str) -> Any:
    """The Target of ``target`` (a Target, a target string or a Piece of a composite target)."""
    from plait.target import Piece, Target, TargetError

    if target is None:
        raise TargetError(f"{who}: no target given (pass a Target, a target string or a Piece)")
    if isinstance(target, Piece):
        target = target.target
    return target if isinstance(target, Target) else Target(target)


def rules_for(target: Any) -> RuleSet:
    """The rule set the target's backend selects (``Backend.schedule_rules(target)``, ``cpu`` by default)."""
    t = _as_target(target, "rules_for")
    return RULE_SETS.get(t.backend.schedule_rules(t))


def machine_for(target: Any) -> Machine:
    """The numbers (vector lanes, FPU, caches, clock) the target's rule set schedules and prices with."""
    t = _as_target(target, "machine_for")
    return rules_for(t).machine(t)


def default_schedule(func: PrimFunc, target: Any, trace: list[str] | None = None) -> PrimFunc:
    """``func`` scheduled by the target's rule set, stage by stage (a stage whose rule fails keeps its
    previous schedule; ``trace`` collects one line per stage saying what happened).

    Each stage is scheduled in a PrimFunc of its own (:func:`plait.schedule.isolate.isolate`) and the
    results are spliced back at once, so that scheduling is linear in the size of the function. If a
    stage's schedule made a loop name another stage has (which the whole function would have refused),
    the stages are scheduled one after the other in the whole function instead: the result is always
    what that would give."""
    t = _as_target(target, "default_schedule")
    rules = rules_for(t)
    m = rules.machine(t)
    scheduled: dict[For, Stmt] = {}
    lines: list[str] = []
    stages = isolate(func)
    for stage in stages:
        root = stage.root.loop_var.name
        try:
            new = stage.scheduled_root(rules.schedule_stage(stage.func, root, m))
        except PlaitError as exc:
            lines.append(f"{root}: unscheduled ({exc})")
            continue
        if new is None:
            lines.append(f"{root}: unscheduled (the rule changed more than the stage: the function's parameters "
                         "or the allocations around the stage)")
            continue
        if new is not stage.root:
            scheduled[stage.root] = new
        lines.append(f"{root}: {rules.name}")
    if clashing_names(stages, scheduled):
        return _schedule_in_place(func, rules, m, trace)
    out = splice(func, scheduled)
    if trace is not None:
        trace.extend(lines)
    verify(out)
    return out


def _schedule_in_place(func: PrimFunc, rules: RuleSet, m: Machine, trace: list[str] | None) -> PrimFunc:
    """The stages scheduled one after the other in the whole function (quadratic in the number of
    stages: only when isolated scheduling would make two loops of one name)."""
    for root in stage_roots(func):
        before = func
        try:
            func = rules.schedule_stage(func, root, m)
            if trace is not None:
                trace.append(f"{root}: {rules.name}")
        except PlaitError as exc:
            func = before
            if trace is not None:
                trace.append(f"{root}: unscheduled ({exc})")
    verify(func)
    return func


# ---- helpers ------------------------------------------------------------------------------------------


def _try(sch: Schedule, method: str, *args: Any) -> bool:
    try:
        getattr(sch, method)(*args)
        return True
    except ScheduleError:
        return False


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _stage(func: PrimFunc, root: str) -> Stage:
    return analyze(func, get_loop(func, root, f"stage '{root}'"))


def _name(lp: For) -> str:
    return lp.loop_var.name


def _contig(access: Any, v: Any, max_stride: int = 1) -> bool | None:
    return contiguous(access.indices, v, max_stride, access.buffer.static_shape)


def _out_dtype(st: Stage) -> str:
    return st.output.buffer.dtype if st.output is not None else "float32"


def _lane_dtype(st: Stage) -> str:
    """The dtype whose lanes a stage's vectors hold: an integer reduction's accumulator (an int8
    convolution sums in int32 and stores int8 after requantization), else the output's."""
    if st.update is not None and st.update.buffer.dtype in ("int32", "int64"):
        return st.update.buffer.dtype
    return _out_dtype(st)


# ---- the "cpu" rules ----------------------------------------------------------------------------------


def cpu_machine(target: Any) -> Machine:
    simd = int(fact(target, "simd_bits", 128))  # type: ignore[arg-type]
    fpu = str(fact(target, "fpu", "dp"))
    return Machine(
        rules="cpu", clock_mhz=float(fact(target, "clock_mhz", 2000)),  # type: ignore[arg-type]
        simd_bits=simd if simd >= 64 else 0, fpu=fpu, vector_registers=32 if simd >= 512 else 16,
        ops_per_cycle=4.0, fma_per_cycle=2.0, fma_bits=fma_bits(target, simd), loads_per_cycle=2.0, bytes_per_cycle=8.0,
        cache_bytes=8 << 20, soft_float_cycles=30.0, l1_bytes=32 << 10, l2_bytes_per_cycle=20.0, auto_unroll=16)


def cpu_stage(func: PrimFunc, root: str, m: Machine) -> PrimFunc:
    """One stage by the cpu rules. Knobs (:mod:`plait.schedule.knobs`, named ``<root>.<knob>``; the
    defaults are the rules' own choices): ``vectorize`` (an elementwise stage), ``lanes`` (the vector
    width a reduction is tiled for), ``fuse_rows``, ``vector_block`` and ``reuse_block`` (the register
    tile), ``rfactor`` and ``rfactor_block`` (a reduction vectorized along its reduce loop), ``unroll``
    (a scalar reduction's innermost reduce loop). Integer dot-product kernels and their packing stages
    are scheduled by :func:`plait.schedule.int_rules.int_stage` (knob ``dot``)."""
    done = int_stage(func, root, m)
    if done is not None:
        return done
    knob = root
    st = _stage(func, root)
    lanes = m.lanes(_lane_dtype(st))
    if not st.is_reduction:
        return _elementwise(func, st, lanes, knob) if lanes > 1 else func
    sch = Schedule(func)
    padded = []
    for b in buffers_with_guards(st):
        if _try(sch, "pad_input", b.name):
            padded.append(f"{b.name}_pad")
            for loop in (f"{b.name}_pad_{b.ndim - 1}", f"{b.name}_copy_{b.ndim - 1}"):
                _try(sch, "vectorize", loop)
    if padded:
        from plait.schedule.conv_rules import deinterleave_strided_inputs

        deinterleave_strided_inputs(sch, _stage(sch.func, root), padded)
    for lp in _stage(sch.func, root).reduce:  # a 1x1 kernel's reduce loops
        if const_int(lp.extent) == 1:
            _try(sch, "remove_unit_loop", _name(lp))
    st = _stage(sch.func, root)
    if lanes < 2:
        return scalar_reduction(sch, st, knob)
    lanes = knobs.choose(f"{knob}.lanes", [w for w in (2, 4, 8, 16, 32, 64) if w <= lanes] or [lanes], lanes)
    budget = max(4, m.vector_registers // 2)
    v = _vector_axis(st, lanes)
    if len(st.spatial) > 1:  # rows shorter than half a vector count too when fusing them gives a vector axis
        short = v or _vector_axis(st, lanes, min_extent=2)
        if short is not None:
            st, v2, root = _fuse_short_rows(sch, st, short, root, lanes, budget, knob)
            v = v2 if v2 is not short else v or (short if const_int(short.extent) >= 4 else None)  # type: ignore[operator]
    if v is not None:
        assert st.update is not None
        if st.update.buffer.scope != "local":  # accumulate in registers, store once
            if _try(sch, "cache_write", _name(st.spatial[-1]), st.update.buffer.name):
                st = _stage(sch.func, root)
        _tile(sch, st, v, lanes, budget, knob)
        return sch.func
    r = _rfactor_axis(st, lanes) if _out_dtype(st) != "float16" else None  # fp16 sums: keep their order
    if r is not None and knobs.choose(f"{knob}.rfactor", (True, False), True):
        _rfactor(sch, st, r, lanes, knob)
    else:
        interleave_outputs(sch, st, knob)
    return sch.func


def _elementwise(func: PrimFunc, st: Stage, lanes: int, knob: str) -> PrimFunc:
    """Vectorize the innermost loop when every store and load is contiguous in it (or does not use it)."""
    inner = st.spatial[-1]
    n = const_int(inner.extent)
    v = inner.loop_var
    if n is None or n < 2 or not st.stores or not all(_contig(s, v) for s in st.stores):
        return func
    if any(_contig(ld, v) is False for ld in st.loads()):
        return func  # a transposing load: scalar code is as good as gathers
    if not knobs.choose(f"{knob}.vectorize", (True, False), True):
        return func
    sch = Schedule(func)
    sch.vectorize(_name(inner))
    return sch.func


def _vector_axis(st: Stage, lanes: int, min_extent: int = 0) -> For | None:
    """The innermost spatial loop contiguous in the output and in every load that uses it, of at least
    ``min_extent`` iterations (default: half a vector)."""
    out = st.output
    assert out is not None and st.update is not None
    for lp in reversed(st.spatial):
        n, v = const_int(lp.extent), lp.loop_var
        if n is None or n < (min_extent or max(2, lanes // 2)) or not _contig(out, v):
            continue
        if _contig(st.update, v) is False:
            continue
        if all(_contig(ld, v, max_stride=2) is not False for ld in st.loads()):
            return lp
    return None


def _tile_score(st: Stage, v: For, lanes: int, budget: int) -> float:
    u = _reuse_axis(st, v)
    eu = const_int(u.extent) if u is not None else 1
    return _best_tile(const_int(v.extent), eu, lanes, budget)[2]  # type: ignore[arg-type]


def _fuse_short_rows(sch: Schedule, st: Stage, v: For, root: str, lanes: int,
                     budget: int, knob: str) -> tuple[Stage, For, str]:
    """Rows shorter than a few vectors (a 1x1 convolution over 25x5 pixels): fuse the vector loop with
    the loop above it when every access stays contiguous in the fused loop (the C backend prints a
    fused loop's ``x / n, x % n`` as ``x``) and the register tile gets better."""
    k = st.spatial.index(v)
    if k == 0 or v is not st.spatial[-1] or const_int(v.extent) >= 4 * lanes:  # type: ignore[operator]
        return st, v, root
    outer = st.spatial[k - 1]
    trial = Schedule(sch.func)
    try:
        fused = trial.fuse(_name(outer), _name(v))
    except ScheduleError:
        return st, v, root
    new_root = fused if outer is st.root else root
    st2 = _stage(trial.func, new_root)
    v2 = _vector_axis(st2, lanes)
    if v2 is None or _name(v2) != fused:
        return st, v, root
    whole = const_int(v2.extent) % lanes == 0 and const_int(v.extent) % lanes != 0  # type: ignore[operator]
    # (fused rows of whole vectors always win: LLVM runs partial vectors 10x slower)
    better = whole or _tile_score(st2, v2, lanes, budget) > _tile_score(st, v, lanes, budget)
    if not knobs.choose(f"{knob}.fuse_rows", (False, True), better):
        return st, v, root
    sch.func, sch.trace = trial.func, sch.trace + trial.trace
    return st2, v2, new_root


def _reuse_axis(st: Stage, v: For) -> For | None:
    """A spatial loop of the output whose loads never involve ``v`` (a register tile over it reuses
    each vector load), the longest one."""
    assert st.output is not None
    best = None
    for lp in st.spatial:
        n = const_int(lp.extent)
        if lp is v or n is None or n < 2 or not uses(st.output.indices, lp.loop_var):
            continue
        if any(uses(ld.indices, lp.loop_var) and uses(ld.indices, v.loop_var) for ld in st.loads()):
            continue
        if best is None or n > const_int(best.extent):  # type: ignore[operator]
            best = lp
    return best


ACCUMULATORS = 8
"""Independent vector accumulators a register tile aims for (FMA latency x FMA pipes: 4 x 2)."""


def tile_sizes(ev: int, eu: int, lanes: int, budget: int, max_ub: int = 0) -> tuple[int, int]:
    """(VB, UB): the register tile over the vector axis (extent ``ev``) and the reuse axis (``eu``)
    with at most ``budget`` vector accumulators (``UB <= max_ub`` when given: :func:`reuse_block_limit`):
    enough accumulators to hide the FMA latency (:data:`ACCUMULATORS`), then as few vectors per
    row as possible (gcc keeps a tile of one vector per row in registers; 2 or 4 vectors per row
    ran 1.3-1.6x slower on AVX-512 convolutions), then the most vector work per load (``UB * VB /
    lanes`` multiply-adds for ``UB`` broadcasts and ``ceil(VB / lanes)`` vector loads)."""
    return _best_tile(ev, eu, lanes, budget, max_ub)[:2]


def _vector_width(ev: int, lanes: int) -> int:
    """The vector width a register tile over a vector axis of extent ``ev`` uses."""
    if ev % lanes and ev > 2 * lanes and lanes >= 16 and ev % (lanes // 2) == 0:
        # rows of 56 on AVX-512: 8-wide vectors (1.2x ORT) beat 3.5 16-wide ones (1.8x); rows of 24 do not
        return lanes // 2
    return lanes


def _vector_blocks(ev: int, lanes: int) -> list[int]:
    """The register tile widths over a vector axis of extent ``ev`` (vectors of :func:`_vector_width`)."""
    width = _vector_width(ev, lanes)
    if ev % width == 0:
        return [d for d in _divisors(ev) if d % width == 0 and d <= 8 * width]
    if ev <= 8 * lanes:  # a fused 25x5 row: tiles of 25 (2 vectors x 8 channels: 1.1x ORT) beat 125 x 2 (1.3x)
        return sorted({d for d in _divisors(ev) if lanes <= d} | {ev})
    return [d for d in _divisors(ev) if lanes <= d <= 8 * lanes] or [ev]


L1_BYTES = 32 << 10
"""First-level data cache of the x86 hosts the cpu rules target (32 KiB on Zen 2-4 and Skylake-X)."""

MAX_REUSE_BLOCK = 8
"""At most this many broadcasts per register tile: with 16 (16 output channels x one AVX-512 vector)
gcc no longer keeps the tile in registers, 2.6x slower than 8 x 1 (32 x 8, also 16 accumulators, is fine)."""


def reuse_block_limit(st: Stage, u: For, v: For) -> int:
    """The largest block of the reuse axis ``u``: :data:`MAX_REUSE_BLOCK`, and small enough that its
    broadcast operands stay in the L1 cache while the reduce loops run: the loads that use ``u`` and
    not ``v`` (a convolution's weights) read ``prod(reduce extents they use)`` elements per ``u``
    index, re-read for every tile (a 256-channel 3x3 kernel: 9 KiB per output channel, blocks of 3).
    The L1 bound is a guard for wide layers, not measured on the bench models (docs/schedules.md)."""
    per_u = 0
    for ld in st.loads():
        if not uses(ld.indices, u.loop_var) or uses(ld.indices, v.loop_var):
            continue
        n = 1
        for lp in st.reduce:
            if uses(ld.indices, lp.loop_var):
                n *= const_int(lp.extent) or 16
        per_u += n * (np.dtype(ld.buffer.dtype).itemsize if ld.buffer.dtype != "bool" else 1)
    return min(MAX_REUSE_BLOCK, max(1, L1_BYTES // per_u)) if per_u else MAX_REUSE_BLOCK


OVERLAP_VECTORS = 4
"""A vector axis of at least this many vectors, not a multiple of one, is tiled in whole vectors with
the last tile shifted back over the one before (knob ``<root>.overlap``): rows of 125 (DS-CNN's 25 x 5
pixels fused) in 8 vectors of 16, 128 outputs for 125 (pointwise 12.7 -> 9.4 us, the stem's product
the same); shorter rows would repeat too much of their work (36 in 3 vectors: 48)."""

MAX_TAPS = 16
"""A tile without a reuse axis (a depthwise convolution) unrolls its reduce loops when they run at most
this many iterations in all (knob ``<root>.unroll_taps``): DS-CNN's depthwise 3x3, 6.3 -> 5.6 us."""

MAX_ROW_BLOCK = 4
"""At most this many output rows in a register tile (the ``row_block`` knob's choices)."""

DEFAULT_ROW_BLOCK = 2
"""At most this many output rows in a register tile by default (:func:`row_block`)."""


def _row_axis(st: Stage, u: For, v: For) -> For | None:
    """A spatial loop of the output, besides the reuse axis ``u`` and the vector axis ``v``, that the
    broadcast loads (those using ``u`` and not ``v``: a convolution's weights) do not use while some
    load using ``v`` does (a convolution's output rows: each row of a tile loads its own input vector
    and shares the weights' broadcasts); the innermost one."""
    assert st.output is not None
    for lp in reversed(st.spatial):
        n = const_int(lp.extent)
        if lp.loop_var in (u.loop_var, v.loop_var) or n is None or n < 2 or not uses(st.output.indices, lp.loop_var):
            continue
        if any(uses(ld.indices, u.loop_var) and not uses(ld.indices, v.loop_var) and uses(ld.indices, lp.loop_var)
               for ld in st.loads()):
            continue
        if any(uses(ld.indices, v.loop_var) and uses(ld.indices, lp.loop_var) for ld in st.loads()):
            return lp
    return None


def row_block(width: int, lanes: int, accumulators: int, choices: list[int]) -> int:
    """Output rows per register tile (of ``choices``) for a tile of ``accumulators`` vectors of
    ``width`` elements each. :data:`ACCUMULATORS` counts full-width vectors: a tile of narrower
    vectors (rows of 56 in 8-wide vectors on AVX-512, :func:`_vector_width`; rows of 8 with 16 lanes)
    takes output rows until it has as many lanes in flight, at most :data:`DEFAULT_ROW_BLOCK`.
    Measured on AVX-512 (gcc 12): the 64 -> 64 3x3 convolution at 56x56, 8 channels x 8 columns 2.97
    ms, x 2 rows 2.11 ms (ONNX Runtime 2.05 ms); at 8x8, 51 -> 42 us; 4 channels x 4 rows x 8 columns
    was not kept in registers by gcc (3.9 ms at 56x56), hence the cap. Full-width tiles keep one row:
    with 4 or 2 channels x 16 columns, 2 rows were 0.9-1.7x the time of one (a tuner may still try
    them: the ``row_block`` knob)."""
    want = -(-ACCUMULATORS * lanes // width)
    if width >= lanes or accumulators >= want:
        return 1
    fits = [d for d in choices if d <= DEFAULT_ROW_BLOCK]
    return min((d for d in fits if d * accumulators >= want), default=max(fits, default=1))


def _best_tile(ev: int, eu: int, lanes: int, budget: int, max_ub: int = 0) -> tuple[int, int, float]:
    width = _vector_width(ev, lanes)
    vbs = _vector_blocks(ev, lanes)
    best: tuple = (-1.0, -1, 0, 0.0, 0, 0, 0)
    for vb in vbs:
        nvec = math.ceil(vb / width)
        for ub in _divisors(eu):
            if ub * nvec > budget and not (ub == 1 and nvec > budget) or max_ub and 1 < ub > max_ub:
                continue
            score = (ub * vb / width) / (ub + nvec)
            key = (min(ub * nvec, ACCUMULATORS), -nvec, round(score, 9), ub * vb, vb, ub)
            if key > best[1:]:
                best = (score, *key)
    return best[5], best[6], best[0]


def _tile(sch: Schedule, st: Stage, v: For, lanes: int, budget: int, knob: str) -> None:
    """Register tile: the row block (:func:`row_block`), the reuse axis and the vector axis innermost,
    in that order, below the reduce loops."""
    u = _reuse_axis(st, v)
    ev, eu = const_int(v.extent), (const_int(u.extent) if u is not None else 1)
    max_ub = reuse_block_limit(st, u, v) if u is not None else 0
    width = _vector_width(ev, lanes)  # type: ignore[arg-type]
    over = bool(ev % width) and ev > width and knobs.choose(  # type: ignore[operator]
        f"{knob}.overlap", (False, True), ev >= OVERLAP_VECTORS * width)  # type: ignore[operator]
    if over:  # whole vectors, the last tile shifted back (:func:`plait.schedule.loops.split_overlapping`)
        vb, ub = width, tile_sizes(-(-ev // width) * width, eu, lanes, budget, max_ub)[1]  # type: ignore[operator]
    else:
        vb, ub = tile_sizes(ev, eu, lanes, budget, max_ub)  # type: ignore[arg-type]
        vb = knobs.choose(f"{knob}.vector_block", _vector_blocks(ev, lanes), vb)  # type: ignore[arg-type]
    if u is not None:
        ubs = [d for d in _divisors(eu) if d <= budget or d == ub]  # type: ignore[arg-type]
        ub = knobs.choose(f"{knob}.reuse_block", ubs, ub)
    r = _row_axis(st, u, v) if u is not None else None
    rb = 1
    if r is not None:
        nvec = math.ceil(vb / width)  # type: ignore[operator]
        rbs = [d for d in _divisors(const_int(r.extent))  # type: ignore[arg-type]
               if d == 1 or d <= MAX_ROW_BLOCK and d * ub * nvec <= budget]
        default = row_block(min(vb, width), lanes, ub * nvec, rbs)  # type: ignore[arg-type]
        rb = knobs.choose(f"{knob}.row_block", rbs, default)
    order = [_name(lp) for lp in st.spatial]
    inner = []
    for lp, block in ((r, rb), (u, ub), (v, vb)):
        if lp is None or block == 1 and lp is not v:  # the vector axis is always in the tile
            continue
        name = _name(lp)
        if lp is v and over:
            outer, name = sch.split_overlapping(name, block)
            order[order.index(_name(lp))] = outer
        elif block < const_int(lp.extent):  # type: ignore[operator]
            outer, name = sch.split(name, [None, block])
            order[order.index(_name(lp))] = outer
        else:
            order.remove(name)
        inner.append(name)
    vi = inner[-1]
    sch.reorder(*order, *inner)
    for loop in reversed(inner):
        if not _try(sch, "decompose_reduction", loop):
            break
    reduce = [_name(lp) for lp in st.reduce]
    _try(sch, "reorder", *reduce, *inner)
    for loop in (vi, f"{vi}_init", f"{vi}_epi"):
        if loop in sch.loops():
            _try(sch, "vectorize", loop)
    if u is None and knobs.choose(f"{knob}.unroll_taps", (False, True), math.prod(
            const_int(lp.extent) or 99 for lp in st.reduce) <= MAX_TAPS):  # type: ignore[misc]
        for name in reduce:  # a depthwise 3x3 window: one chain of 9 FMAs per vector, unrolled
            _try(sch, "unroll", name)


def _rfactor_axis(st: Stage, lanes: int) -> For | None:
    """The innermost reduce loop contiguous in every load that uses it, a multiple of the lanes."""
    for lp in reversed(st.reduce):
        n, r = const_int(lp.extent), lp.loop_var
        if n is None or n % lanes or n < 2 * lanes:
            continue
        flags = [_contig(ld, r) for ld in st.loads()]
        if any(f is False for f in flags) or not any(flags):
            continue
        return lp
    return None


def _rfactor(sch: Schedule, st: Stage, r: For, lanes: int, knob: str) -> None:
    """Vectorize a reduction along its contiguous reduce loop with lane-wise partial accumulators,
    over a small block of outputs that share some of the loads (dense: 4 rows of the weight)."""
    rn = _name(r)
    ro, ri = sch.split(rn, [None, lanes])
    assert st.output is not None
    u = None
    loads = [ld for ld in st.loads() if uses(ld.indices, r.loop_var)]
    for lp in reversed(st.spatial):
        n = const_int(lp.extent)
        if n and n >= 2 and uses(st.output.indices, lp.loop_var) and \
                any(uses(ld.indices, lp.loop_var) for ld in loads) and \
                not all(uses(ld.indices, lp.loop_var) for ld in loads):
            u = lp
            break
    inner = None
    if u is not None:
        eu = const_int(u.extent)
        ub = max(d for d in _divisors(eu) if d <= 4)  # type: ignore[arg-type]
        ub = knobs.choose(f"{knob}.rfactor_block", [d for d in _divisors(eu) if d <= 8], ub)  # type: ignore[arg-type]
        if ub > 1:
            un = _name(u)
            order = [_name(lp) for lp in st.spatial]
            if ub < eu:  # type: ignore[operator]
                uo, inner = sch.split(un, [None, ub])
                order[order.index(un)] = uo
            else:
                inner = un
                order.remove(un)
            sch.reorder(*order, inner)
            if not _try(sch, "decompose_reduction", inner):
                inner = None
    sch.rfactor(ri)
    if inner is not None:
        reduce = [_name(lp) for lp in st.reduce if _name(lp) != rn] + [ro]
        _try(sch, "reorder", *reduce, inner)
    _try(sch, "vectorize", ri)


register_rules(RuleSet("cpu", cpu_machine, cpu_stage,
                       "SIMD CPUs (x86 AVX2/AVX-512 hosts): register tiles, vectorized inner loops"))


# ---- the "microcontroller" rules --------------------------------------------------------------------


def mcu_machine(target: Any) -> Machine:
    fpu = str(fact(target, "fpu", "none"))
    simd = int(fact(target, "simd_bits", 0))  # type: ignore[arg-type]
    return Machine(
        rules="microcontroller", clock_mhz=float(fact(target, "clock_mhz", 100)),  # type: ignore[arg-type]
        simd_bits=simd if simd >= 64 else 0, fpu=fpu, vector_registers=8 if simd >= 128 else 0,
        ops_per_cycle=1.0, fma_per_cycle=1.0 if fpu != "none" else 0.0, loads_per_cycle=1.0, bytes_per_cycle=4.0,
        cache_bytes=int(fact(target, "ram_kb", 64)) * 1024, soft_float_cycles=60.0,  # type: ignore[arg-type]
        **mcu_integer(target))  # type: ignore[arg-type]


def mcu_stage(func: PrimFunc, root: str, m: Machine) -> PrimFunc:
    """Keep code small: no vectorization, no padded copies (RAM is scarce); unroll 3-tap loops (knob
    ``<root>.unroll``); integer dot-product kernels as :func:`plait.schedule.int_rules.int_stage` says."""
    done = int_stage(func, root, m)
    if done is not None:
        return done
    st = _stage(func, root)
    if not st.is_reduction:
        return func
    return scalar_reduction(Schedule(func), st, root)


register_rules(RuleSet("microcontroller", mcu_machine, mcu_stage,
                       "Cortex-M class cores: scalar loops, small unrolls, no extra buffers"))

__all__ = ["RULE_SETS", "RuleSet", "cpu_machine", "default_schedule", "machine_for", "mcu_machine",
           "register_rules", "rules_for", "tile_sizes"]
