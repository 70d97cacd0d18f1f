"""Tuning a model: its workloads per piece, the jobs on a local process pool or on Ray, the records kept.

    db, info = tune(mod, "host: c; blas: blas", trials=16, measure="analytic", jobs=2)
    db.save("tuning.json")              # plait compile/run/explain --tuning tuning.json

The workloads are every function lowering schedules while ``mod`` goes through the build up to
lowering (:func:`plait.driver.lowered_module` under :func:`plait.lowering.tuning.recording`): each
call or fusion group as placement prices it on every piece that may run it, and as lowering makes it.
Each becomes one :class:`~plait.tune.jobs.Job`; its best candidate is a tuning record of the returned
:class:`~plait.placement.cost.CostDatabase`. A KeyboardInterrupt (Ctrl-C) stops the search: the
records of the jobs finished so far are returned, with ``info.interrupted`` set.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from plait.errors import PlaitError
from plait.tune.jobs import (
    MEASURES, SOURCES, Job, JobResult, TuneError, chunk_job, confirm, enumerate_job, measure_libraries,
)


@dataclass
class TuneInfo:
    """What a tuning run did: the jobs' results (in job order; those not finished missing) and whether
    it was interrupted."""

    jobs: list[Job]
    results: dict[int, JobResult] = field(default_factory=dict)
    interrupted: bool = False


def workloads(mod: Any, target: Any, opt_level: int = 2, place: Any = None) -> list[tuple[str, str, Any]]:
    """``(workload, target string, unscheduled PrimFunc)`` of every function the build of ``mod`` for
    ``target`` schedules, in the order first lowered (the cost model's pricing on every piece, then lowering)."""
    return _survey(mod, target, opt_level, place)[0]


def hook_calls(mod: Any, target: Any, opt_level: int = 2, place: Any = None) -> list[HookCall]:
    """Every call placement prices by a kind's ``cost`` hook on a piece whose kind lowers calls itself
    (``relay_to_tir``: nothing there to tune), once per signature and piece target, in call order."""
    return _survey(mod, target, opt_level, place)[1]


@dataclass(frozen=True)
class HookCall:
    """A call a hook piece may take: its ``op`` signature, the piece's ``target`` string, the PrimFunc the
    kind's ``relay_to_tir`` hook makes of it alone (``func``), the hook's ``estimate`` (seconds) and a ``name``."""

    op: str
    target: str
    func: Any
    estimate: float
    name: str


def _survey(mod: Any, target: Any, opt_level: int, place: Any) -> tuple[list[tuple[str, str, Any]], list[HookCall]]:
    """The build of ``mod`` up to lowering: the functions it schedules (:func:`workloads`) and the calls
    its placement priced by a cost hook on a piece lowering calls itself (:func:`hook_calls`)."""
    from plait.driver import _composite, _rules, lowered_module
    from plait.ir.transform import PassContext
    from plait.lowering.cache import LoweringCache
    from plait.lowering.tuning import recording
    from plait.placement.cost import signature
    from plait.placement.explain import quiet_solver_banner

    ct = _composite(target)
    quiet_solver_banner()
    with LoweringCache().active(), recording() as seen:
        low = lowered_module(mod, ct, PassContext(opt_level=opt_level), rules=_rules(place, ct))
        pieces = {p.name: p for p in ct.pieces}
        calls: dict[tuple[str, str], HookCall] = {}
        for cp in (low.assignment.placed if low.assignment is not None else ()):
            for pn, e in cp.alternatives.items():
                piece = pieces[pn]
                if isinstance(e, str) or e.source != "hook" or "relay_to_tir" not in piece.target.kind.hooks:
                    continue
                key = (signature(cp.call), str(piece.target))
                if key not in calls:
                    func = _hook_function(cp.call, piece)
                    if func is not None:
                        calls[key] = HookCall(key[0], key[1], func, e.seconds, _call_name(cp.call))
    return [(w, t, f) for (w, t), f in seen.items()], list(calls.values())


def _hook_function(call: Any, piece: Any) -> Any:
    """The one PrimFunc the kind's ``relay_to_tir`` hook makes of ``call`` alone on ``piece`` (None when it
    makes several: not one function to time)."""
    from plait.ir.attrs import Attrs
    from plait.lowering.lower import single_call_function
    from plait.relay.expr import Function
    from plait.relay.infer import infer_expr
    from plait.relay.module import IRModule
    from plait.target import run_relay_to_tir
    from plait.target.composite import PIECE_ATTR
    from plait.tir.stmt import PrimFunc

    fn = single_call_function(call)
    region = Function(fn.params, fn.body, fn.ret_type, Attrs({PIECE_ATTR: piece.name, "region": 1}))
    infer_expr(region)
    out = run_relay_to_tir(piece, IRModule({"region": region}, {PIECE_ATTR: piece.name}))
    funcs = [f for _, f in out.items() if isinstance(f, PrimFunc)]
    return funcs[0] if len(funcs) == 1 else None


def _call_name(call: Any) -> str:
    """A call for people, as :func:`describe` names a function (``nn_conv2d 1x64x25x5``)."""
    from plait.ir.types import tuple_fields

    shape = "x".join(str(d) for d in tuple_fields(call.checked_type)[-1].shape) or "scalar"
    return f"{call.op_name.replace('.', '_')} {shape}"


def make_jobs(mod: Any, target: Any, trials: int = 32, seed: int = 0, measure: str = "wall",
              opt_level: int = 2, cache_dir: str | None = None, repeat: int = 5, place: Any = None) -> list[Job]:
    """One :class:`Job` per workload of ``mod`` on ``target``, then one per call a hook piece may take
    (:func:`hook_calls`: measured alone, no knobs)."""
    if measure not in MEASURES:
        raise TuneError(f"--measure {measure}: expected one of {', '.join(MEASURES)}")
    if trials < 1:
        raise TuneError(f"--trials {trials}: expected a positive number of candidates per workload")
    tuned, hooked = _survey(mod, target, opt_level, place)
    return ([Job(w, t, describe(f), f, trials, seed, measure, repeat, cache_dir) for w, t, f in tuned]
            + [Job(h.op, h.target, h.name, h.func, 1, seed, measure, repeat, cache_dir, op=h.op, estimate=h.estimate)
               for h in hooked])


def describe(func: Any) -> str:
    """A workload for people: its stages' operators and its last output's shape (``nn_conv2d 1x64x25x5``)."""
    from plait.schedule.stage import stage_roots

    ops = dict.fromkeys(r.rsplit("_", 1)[0].removeprefix("T_") for r in stage_roots(func))
    out = func.params[-1]
    shape = "x".join(str(getattr(d, "value", d)) for d in out.shape) or "scalar"
    return f"{'+'.join(ops)} {shape}"


def tune(mod: Any, target: Any, trials: int = 32, seed: int = 0, measure: str = "wall", jobs: int = 1,
         ray: str | None = None, opt_level: int = 2, cache_dir: str | None = None, repeat: int = 5,
         on_result: Callable[[Job, JobResult, TuneInfo], None] | None = None,
         on_start: Callable[[list[Job]], None] | None = None) -> tuple[Any, TuneInfo]:
    """Tune every workload of ``mod`` on ``target``: ``jobs`` local worker processes, or the Ray cluster at
    ``ray`` ("auto", or an address). Returns the tuning records (a CostDatabase) and a :class:`TuneInfo`.
    ``on_start(jobs)`` and ``on_result(job, result, info)`` report progress (an exception they raise
    propagates; a KeyboardInterrupt ends the search with the records so far).

    The work is split in tasks: per workload, enumerating its candidates, then chunks of
    :data:`CHUNK` candidates (estimated; or compiled, and timed one workload at a time in this process
    once all its chunks are built; on Ray, compiled and timed by the worker)."""
    from plait.placement.cost import CostDatabase

    if jobs < 1:
        raise TuneError(f"--jobs {jobs}: expected a positive number of worker processes")
    all_jobs = make_jobs(mod, target, trials, seed, measure, opt_level, cache_dir, repeat)
    info = TuneInfo(all_jobs)
    if on_start is not None:
        on_start(all_jobs)
    ex: _Executor = _Ray(ray) if ray is not None else (_Inline() if jobs == 1 else _Pool(jobs))
    try:
        for k, res in _search(ex, all_jobs, measure):
            info.results[k] = res
            if on_result is not None:
                on_result(all_jobs[k], res, info)
        if measure == "wall":
            _confirm(ex, all_jobs, info)
    except KeyboardInterrupt:
        info.interrupted = True
    finally:
        ex.close(stop=info.interrupted or len(info.results) < len(all_jobs))
    db = CostDatabase()
    for k in sorted(info.results):
        res, job = info.results[k], all_jobs[k]
        b, secs = res.chosen()
        if job.op is not None:  # a hook piece's call: a measured entry
            db.add(job.op, job.target, secs, source=res.source, name=res.name)
            continue
        d = res.confirmed.get(0, res.seconds[0])
        db.add_tuning(res.workload, res.target, res.configs[b], secs,
                      source=res.source, name=res.name, candidates=len(res.configs),
                      **({} if d is None else {"default_seconds": d}))
    return db, info


def _confirm(ex: "_Executor", jobs: list[Job], info: TuneInfo) -> None:
    """The final measurement (:func:`plait.tune.jobs.confirm`, one task: on Ray, one worker's machine):
    every workload's best candidate, its default when that is another, and every hook piece's call, timed
    together in alternating rounds. The records and entries then carry these seconds, so that placement
    compares a tuned c function with a blas call measured in the same rounds, and a candidate replaces
    the default only if it was faster there as well. Skipped when nothing was measured."""
    items, owners = [], []
    for k in sorted(info.results):
        res = info.results[k]
        if not any(s is not None for s in res.seconds):
            continue
        for i in res.finalists():
            items.append((jobs[k], res.configs[i], res.paths[i] if i < len(res.paths) else None))
            owners.append((k, i))
    if not items:
        return
    h = ex.submit(confirm, items)
    ex.wait([h])
    for (k, i), (secs, err) in zip(owners, ex.result(h)):
        if secs is not None:
            info.results[k].confirmed[i] = secs
        elif i not in info.results[k].errors:
            info.results[k].errors[i] = f"final measurement: {err}"


CHUNK = 4  #: candidates per task


def _search(ex: "_Executor", jobs: list[Job], measure: str) -> Iterator[tuple[int, JobResult]]:
    """Every job's result as its last task finishes (see :func:`tune`)."""
    mode = "estimate" if measure == "analytic" else ("time" if isinstance(ex, _Ray) else "compile")
    results = {k: JobResult(j.workload, j.target, j.name, SOURCES[measure]) for k, j in enumerate(jobs)}
    values: dict[int, list[Any]] = {}
    left: dict[int, int] = {}
    pending: dict[Any, tuple[int, int]] = {ex.submit(enumerate_job, job): (k, -1) for k, job in enumerate(jobs)}
    while pending:
        for h in ex.wait(list(pending)):
            k, start = pending.pop(h)
            got = ex.result(h)
            res, job = results[k], jobs[k]
            if start < 0:
                res.configs = got
                values[k] = [None] * len(got)
                for i in range(0, len(got), CHUNK):
                    pending[ex.submit(chunk_job, job, got[i:i + CHUNK], mode)] = (k, i)
                left[k] = len(range(0, len(got), CHUNK))
                continue
            for i, (v, e) in enumerate(got):
                values[k][start + i] = v
                if e is not None:
                    res.errors[start + i] = e
            left[k] -= 1
            if left[k]:
                continue
            if mode == "compile":
                res.paths = list(values[k])
                secs, errors = measure_libraries(job, values[k])
                res.errors.update(errors)
                values[k] = secs
            res.seconds = values[k]
            yield k, res


class _Executor:
    """Where tasks run: ``submit(fn, *args)`` -> a handle; ``wait(handles)`` -> those finished (at least
    one); ``result(handle)`` (raises the task's error); ``close(stop)`` (``stop``: tasks may still run,
    end them)."""

    def submit(self, fn: Callable, *args: Any) -> Any:
        raise NotImplementedError

    def wait(self, handles: list[Any]) -> list[Any]:
        raise NotImplementedError

    def result(self, handle: Any) -> Any:
        raise NotImplementedError

    def close(self, stop: bool) -> None:
        pass


class _Inline(_Executor):
    """This process, one task after the other (``--jobs 1``)."""

    def submit(self, fn: Callable, *args: Any) -> Any:
        return _Done(fn, args)

    def wait(self, handles: list[Any]) -> list[Any]:
        return handles[:1]

    def result(self, handle: Any) -> Any:
        return handle.fn(*handle.args)


@dataclass(eq=False)
class _Done:
    fn: Callable
    args: tuple


class _Pool(_Executor):
    """A local process pool (fork where there is one: the workers start with plait imported)."""

    def __init__(self, workers: int):
        ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
        self.pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)

    def submit(self, fn: Callable, *args: Any) -> Any:
        return self.pool.submit(fn, *args)

    def wait(self, handles: list[Any]) -> list[Any]:
        return list(wait(handles, return_when=FIRST_COMPLETED)[0])

    def result(self, handle: Any) -> Any:
        return handle.result()

    def close(self, stop: bool) -> None:
        if not stop:
            self.pool.shutdown()
            return
        procs = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:  # Ctrl-C: do not wait for running tasks
            p.terminate()


class _Ray(_Executor):
    """Ray tasks (``ray.init(address)`` unless this process is already connected); each worker compiles and
    times its candidates on its own machine."""

    def __init__(self, address: str):
        try:
            import ray
        except ImportError:
            raise TuneError("--ray needs Ray: pip install 'plait[ray]'") from None
        self.ray = ray
        if not ray.is_initialized():
            root = str(Path(__file__).resolve().parent.parent.parent)  # the workers import this plait
            env = {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
            try:
                ray.init(address=address, runtime_env={"env_vars": env}, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise TuneError(f"--ray {address}: cannot connect to a Ray cluster: {exc}") from None
        self.remote = {f: ray.remote(num_cpus=1)(f) for f in (enumerate_job, chunk_job, confirm)}
        self.live: set[Any] = set()

    def submit(self, fn: Callable, *args: Any) -> Any:
        ref = self.remote[fn].remote(*args)
        self.live.add(ref)
        return ref

    def wait(self, handles: list[Any]) -> list[Any]:
        return self.ray.wait(handles, num_returns=1)[0]

    def result(self, handle: Any) -> Any:
        self.live.discard(handle)
        try:
            return self.ray.get(handle)
        except self.ray.exceptions.RayTaskError as exc:
            cause = exc.as_instanceof_cause()
            if isinstance(cause, PlaitError):
                raise TuneError(str(cause).splitlines()[-1]) from None
            raise TuneError(f"a Ray task failed: {str(exc).splitlines()[-1]}") from None

    def close(self, stop: bool) -> None:
        for ref in self.live:
            self.ray.cancel(ref, force=True)


__all__ = ["HookCall", "TuneInfo", "hook_calls", "make_jobs", "tune", "workloads"]
