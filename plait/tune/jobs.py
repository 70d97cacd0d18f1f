"""One tuning job: a workload's candidates enumerated, built and measured, in a worker process or a Ray task.

The tasks (:func:`enumerate_job`, :func:`chunk_job`) are plain functions of a picklable :class:`Job`
(the unscheduled PrimFunc travels with it), so this process, the local process pool and Ray run exactly
the same code. Measurements:

- ``analytic``: :func:`plait.schedule.estimate_cost` of each candidate (deterministic: any number of
  jobs may run at once, anywhere);
- ``wall``: each candidate compiled as the build compiles it (its scratch memory lifted into a workspace
  arena, then its piece's code generation, ``tir_to_runtime``: the C compiler for ``c``) and called on
  fixed random inputs; the candidates of the job are timed in alternation (one timing of each per
  round, ``repeat`` rounds, each timing as many calls as last about 2 ms, sized per candidate), the
  median kept (:func:`measure_libraries`). A candidate whose outputs differ from the default schedule's
  is rejected. Timings on one machine disturb each other: with a local pool the tuning process times
  one workload at a time while the pool compiles (:mod:`plait.tune.runner`); a Ray worker compiles and
  times its chunk on its own machine. Once every job is done, :func:`confirm` times every job's best
  candidate, its default and every hook piece's call together (the final measurement: what the
  records and entries keep).

A job with an ``op`` (a call signature, :func:`plait.placement.cost.signature`) is a call a piece whose
kind lowers calls itself (a ``relay_to_tir`` hook: blas) may take: its ``func`` is the PrimFunc that hook
makes of the call alone, already final (no knobs: one candidate, the empty config), measured exactly
as the candidates of a tuned function are (``wall``), or priced by the kind's ``cost`` hook
(``analytic``: the ``estimate`` carried by the job). Its result is a measured entry of the cost
database (keyed by the signature and the target string), not a tuning record.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plait.errors import PlaitError
from plait.tir.stmt import PrimFunc
from plait.tune.space import Config, candidates

MEASURES = ("wall", "analytic")
SOURCES = {"wall": "measured wall", "analytic": "analytic estimate"}


class TuneError(PlaitError):
    """``plait tune`` cannot run: bad arguments, no Ray, a workload that cannot be built."""


@dataclass(frozen=True)
class Job:
    """A workload to tune: its unscheduled ``func`` on ``target`` (canonical string), ``name`` for display."""

    workload: str
    target: str
    name: str
    func: PrimFunc
    trials: int
    seed: int
    measure: str = "wall"
    repeat: int = 5
    cache_dir: str | None = None
    op: str | None = None  #: a hook piece's call (its signature): ``func`` is final, nothing to tune
    estimate: float | None = None  #: that call's ``cost`` hook seconds (``--measure analytic``)


@dataclass
class JobResult:
    """Every candidate's config and seconds (None: rejected, with ``errors``), in enumeration order."""

    workload: str
    target: str
    name: str
    source: str
    configs: list[Config] = field(default_factory=list)
    seconds: list[float | None] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)
    paths: list[Any] = field(default_factory=list)  #: the CompiledCandidate of each (local runs), by index
    confirmed: dict[int, float] = field(default_factory=dict)  #: :func:`confirm`'s seconds, by index

    def best(self) -> int:
        """The index of the fastest candidate (the first of equals: the default wins ties)."""
        ok = [k for k, s in enumerate(self.seconds) if s is not None]
        if not ok:
            raise TuneError(f"workload {self.workload} ('{self.name}') on '{self.target}': no candidate could be "
                            f"measured ({'; '.join(self.errors.values())})")
        return min(ok, key=lambda k: (self.seconds[k], k))

    def finalists(self) -> list[int]:
        """What the final measurement times again: the search's best, and the default when it is another."""
        b = self.best()
        return [b] if b == 0 or self.seconds[0] is None else [0, b]

    def chosen(self) -> tuple[int, float]:
        """The candidate kept and its seconds: once confirmed, the best of the finalists in the final
        measurement (the default unless another was faster there too), else the search's best."""
        if self.confirmed:
            k = min(self.confirmed, key=lambda i: (self.confirmed[i], i))
            return k, self.confirmed[k]
        b = self.best()
        return b, self.seconds[b]  # type: ignore[return-value]


def scheduled(job: Job, config: Config) -> PrimFunc:
    """The job's function scheduled under ``config``, simplified and verified as lowering does."""
    from plait.lowering.tuning import misfit, schedule_with
    from plait.tir.simplify import simplify
    from plait.tir.verify import verify

    if job.op is not None:  # a hook piece's call: already final
        return job.func.with_attrs(global_symbol="plait_tune_candidate")
    func, space = schedule_with(job.func, job.target, config)
    why = misfit(config, space)
    if why is not None:
        raise TuneError(f"candidate {config}: {why}")
    func = simplify(func).with_attrs(global_symbol="plait_tune_candidate")
    verify(func, job.name)
    return func


def enumerate_job(job: Job) -> list[Config]:
    """The job's candidate configs (:func:`plait.tune.space.candidates`), the default first."""
    if job.measure not in MEASURES:
        raise TuneError(f"unknown measurement '{job.measure}': expected one of {', '.join(MEASURES)}")
    if job.op is not None:
        return [{}]
    return candidates(job.func, job.target, job.trials, job.seed, job.workload)


def chunk_job(job: Job, configs: list[Config], mode: str) -> list[tuple[Any, str | None]]:
    """Candidates of one job: ``(value, error)`` for each config. ``mode``: ``estimate`` (value: seconds,
    analytic), ``compile`` (value: a :class:`CompiledCandidate`, for a measurement elsewhere on this
    machine) or ``time`` (compiled and timed here: seconds)."""
    out: list[tuple[Any, str | None]] = []
    for c in configs:
        try:
            if mode == "estimate":
                out.append((_estimate(job, c), None))
            else:
                out.append((_compile(job, c), None))
        except PlaitError as exc:
            out.append((None, str(exc)))
    if mode == "time":
        secs, errors = measure_libraries(job, [p for p, _ in out])
        out = [(s, e or errors.get(k)) for k, ((_, e), s) in enumerate(zip(out, secs))]
    return out


def run_job(job: Job) -> JobResult:
    """The whole job in this process: enumerate, build and measure every candidate."""
    res = JobResult(job.workload, job.target, job.name, SOURCES[job.measure])
    res.configs = enumerate_job(job)
    got = chunk_job(job, res.configs, "estimate" if job.measure == "analytic" else "time")
    res.seconds = [v for v, _ in got]
    res.errors = {k: e for k, (_, e) in enumerate(got) if e is not None}
    return res


def _estimate(job: Job, config: Config) -> float:
    from plait.schedule import estimate_cost

    if job.op is not None:
        if job.estimate is None:
            raise TuneError(f"{job.name} on '{job.target}': its kind's cost hook has no estimate")
        return float(job.estimate)
    cost = estimate_cost(scheduled(job, config), job.target)
    if cost is None:
        raise TuneError(f"candidate {config}: no estimate")
    return float(cost.seconds)


@dataclass(frozen=True)
class CompiledCandidate:
    """A compiled candidate: its library's ``path`` and its workspace arena (``workspace_bytes``, one
    parameter per dtype in ``arena_dtypes``, after the function's own parameters)."""

    path: str
    workspace_bytes: int = 0
    arena_dtypes: tuple[str, ...] = ()


def _compile(job: Job, config: Config) -> CompiledCandidate:
    """The candidate compiled as the build compiles it: scheduled, its scratch memory (a padded input, an
    im2col matrix) lifted into a workspace arena parameter (:func:`plait.memory.workspace.lift_workspaces`,
    as ``plait.build`` does: the C code of a static array and of an arena slice differ, and so may their
    speed), then the piece's code generation."""
    from plait.ir.transform import PassContext
    from plait.memory.workspace import lift_workspaces, workspace_params
    from plait.relay.module import IRModule
    from plait.target import Piece, Target, run_tir_to_runtime

    func = lift_workspaces(scheduled(job, config))
    if func.attrs.get("dynamic_workspaces"):
        raise TuneError(f"{job.name}: a workspace of symbolic size cannot be timed")
    ctx = PassContext(config={"cc.cache_dir": job.cache_dir} if job.cache_dir else {})
    lib = run_tir_to_runtime(Piece("tune", Target(job.target)), IRModule({func.name: func}), ctx)
    if getattr(lib, "path", None) is None:
        raise TuneError(f"target '{job.target}' does not build a host library: its candidates cannot be timed "
                        "(use --measure analytic)")
    return CompiledCandidate(str(lib.path), int(func.attrs.get("workspace_bytes", 0) or 0),
                 tuple(str(b.dtype) for b in workspace_params(func)))


def _arguments(func: PrimFunc) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for p in func.params:
        shape = tuple(int(getattr(d, "value", d)) for d in p.shape)
        dt = np.dtype(p.dtype)
        if dt.kind == "f":
            out.append(rng.standard_normal(shape).astype(dt))
        else:
            out.append(rng.integers(0, 2 if dt.kind == "b" else 3, shape).astype(dt))
    return out


def _caller(built: CompiledCandidate, args: list[np.ndarray]) -> Any:
    """A no-argument function calling the compiled candidate on ``args`` and a workspace arena of its own
    (allocated and aligned as the graph executor allocates its pool), bound once; it keeps the library
    loaded and the arrays alive."""
    import ctypes

    from plait.runtime.module import load_module

    lib = load_module(built.path)
    if built.arena_dtypes:
        raw_arena = np.zeros(built.workspace_bytes + 64, np.uint8)
        off = (-raw_arena.ctypes.data) % 64
        arena = raw_arena[off:off + built.workspace_bytes]
        args = [*args, *(arena.view(np.dtype(d)) for d in built.arena_dtypes)]
    name = "plait_tune_candidate"
    if all(k == "ptr" for k in getattr(lib, "signatures", {}).get(name, ("?",))):
        raw = lib.raw(name)  # type: ignore[attr-defined]
        ptrs = [ctypes.c_void_p(a.ctypes.data) for a in args]
        return lambda keep=(lib, args): raw(*ptrs)  # the library and the arrays live as long as the caller
    fn = lib[name]
    return lambda keep=lib: fn(*args)


def measure_libraries(job: Job, paths: list[CompiledCandidate | None]) -> tuple[list[float | None], dict[int, str]]:
    """Wall time of each compiled candidate (None: not built or rejected, with its reason): alternating
    rounds, medians (see the module docstring)."""
    args = _arguments(job.func)
    n_in = int(job.func.attrs.get("num_inputs", len(args)))
    errors: dict[int, str] = {}
    callers: dict[int, Any] = {}
    want: list[np.ndarray] | None = None
    for k, path in enumerate(paths):  # warm up; outputs checked against the first that runs
        if path is None:
            continue
        work = [a.copy() for a in args]
        status = _caller(path, work)()
        if status:
            errors[k] = f"it returned status {status}"
            continue
        if want is None:
            want = work[n_in:]
        elif not all(np.allclose(g, w, rtol=1e-3, atol=1e-3 * (float(np.abs(w).max()) if w.size else 1.0))
                     for g, w in zip(work[n_in:], want)):
            errors[k] = "its outputs differ from the default schedule's"
            continue
        callers[k] = _caller(path, args)
    secs: list[float | None] = [None] * len(paths)
    for k, t in time_alternating(callers, job.repeat).items():
        secs[k] = t
    return secs, errors


BATCH_S = 2e-3  #: one timing of a function: about this long, in calls of it (at least one)


def time_alternating(callers: dict[int, Any], rounds: int, batch_s: float = BATCH_S) -> dict[int, float]:
    """The median seconds per call of each no-argument function: ``rounds`` rounds, each timing every
    function once in turn, a timing being as many calls of it as last about ``batch_s`` (sized per
    function: a 1 us call and a 2 ms one are each timed over ~2 ms; 0: one call, so that between two calls
    of a function run all the others, as in a model)."""
    number: dict[int, int] = {}
    for k, call in callers.items():
        t0 = time.perf_counter()
        call()
        number[k] = max(1, min(10_000, int(batch_s / max(time.perf_counter() - t0, 1e-7))))
    times: dict[int, list[float]] = {k: [] for k in callers}
    for _ in range(rounds):
        for k, call in callers.items():
            n = number[k]
            t0 = time.perf_counter()
            for _ in range(n):
                call()
            times[k].append((time.perf_counter() - t0) / n)
    return {k: statistics.median(ts) for k, ts in times.items()}


CONFIRM_ROUNDS = 100  #: rounds of the final measurement of a tuning run (:func:`confirm`)


def confirm(items: list[tuple[Job, Config, CompiledCandidate | None]],
            rounds: int = CONFIRM_ROUNDS) -> list[tuple[float | None, str | None]]:
    """The final measurement of a wall-clock tuning run: each ``(job, config, compiled library or None)`` (a
    workload's best candidate and its default, a hook piece's call alone), compiled when it has no path
    (a Ray worker's libraries stay on its machine), all timed together in ``rounds`` alternating rounds
    (:func:`time_alternating`): the costs placement compares across pieces come from the same rounds on
    the same machine, not from searches minutes apart. Each timing is one call: between two calls of a
    function run all the others, whose data evict its own from the caches as the rest of a model does (a
    matrix-vector product whose matrix stays in L2 when timed in a loop streams it from L3 in the MLP).
    ``(seconds, None)`` or ``(None, error)`` each."""
    out: list[tuple[float | None, str | None]] = [(None, None)] * len(items)
    callers: dict[int, Any] = {}
    for k, (job, config, path) in enumerate(items):
        try:
            if path is None:
                path = _compile(job, config)
            args = _arguments(job.func)
            call = _caller(path, args)
            status = call()
        except PlaitError as exc:
            out[k] = (None, str(exc))
            continue
        if status:
            out[k] = (None, f"it returned status {status}")
            continue
        callers[k] = call
    for k, t in time_alternating(callers, rounds, batch_s=0.0).items():
        out[k] = (t, None)
    return out


__all__ = ["CONFIRM_ROUNDS", "CompiledCandidate", "Job", "JobResult", "MEASURES", "SOURCES", "TuneError", "chunk_job",
           "confirm", "enumerate_job", "measure_libraries", "run_job", "scheduled", "time_alternating"]
