"""ONNX backend conformance: import every ONNX node test case (and the model folders shipped in
the onnx wheel) with ``from_onnx``, run plait's reference interpreter, compare with the expected
outputs using the case's own rtol/atol (``np.testing.assert_allclose``, NaN == NaN, same dtype).

Each case is classified:

- ``passed``;
- ``failed``: import raised something other than UnsupportedError, or the run raised, or an
  output differs (wrong dtype, shape or values);
- ``unsupported``: ``from_onnx`` raised :class:`~plait.errors.UnsupportedError` (an operator,
  attribute or dtype plait does not support; the reason is recorded);
- ``excluded``: the case is listed, with a reason, in ``exclusions.txt`` and did not pass.

Compiled mode (``compiled=True``): the imported module is built with ``plait.build(mod,
target="c -opt-level=N", executor="graph")`` (a compile cache directory per run) and run by the
:class:`~plait.executor.GraphModule` (``executor="aot"``: built by the AOT executor and run by its
:class:`~plait.executor.AotModule`); outputs are compared exactly as above. A case is also
``unsupported`` when the build refuses it for a documented reason (:data:`COMPILE_UNSUPPORTED`:
symbolic shapes, an operator without a TE compute, control flow the graph executor does not run);
any other build error (C that does not compile, an internal error in a pass), a crash or wrong
numbers is ``failed``. Exclusions
come from ``exclusions_compiled.txt`` (on top of ``exclusions.txt``).

``python -m tests.conformance.run [--filter PATTERN] [--json OUT] [--compiled]`` runs it from the
command line.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import multiprocessing
import os
import re
import shutil
import tempfile
import time
import warnings
from typing import Any, Iterator, Sequence

import numpy as np
import onnx
from onnx import numpy_helper

from plait.errors import PlaitError, UnsupportedError
from plait.frontend.onnx import from_onnx
from plait.relay import flatten_value, run

HERE = os.path.dirname(os.path.abspath(__file__))
EXCLUSIONS_FILE = os.path.join(HERE, "exclusions.txt")
COMPILED_EXCLUSIONS_FILE = os.path.join(HERE, "exclusions_compiled.txt")
DEFAULT_OPT_LEVEL = 1  # -O1: about half the gcc time of -O3 per case, still optimizes (restrict, simd)
DATA_DIRS = ("pytorch-converted", "pytorch-operator", "simple")
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-7  # what the ONNX backend test runner uses for model folders


@dataclasses.dataclass
class Case:
    name: str
    model: onnx.ModelProto | None
    data_sets: list[tuple[list[Any], list[Any]]] | None
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    model_dir: str | None = None  # model folders: loaded in the worker


@dataclasses.dataclass
class Result:
    name: str
    status: str  # passed | failed | unsupported | excluded
    message: str = ""
    seconds: float = 0.0
    bound: list[str] = dataclasses.field(default_factory=list)  # graph inputs bound as constants


# ---- collecting cases -------------------------------------------------------------------------


def node_cases() -> list[Case]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = collect_testcases(None)
    return [Case(c.name, c.model, c.data_sets, c.rtol, c.atol) for c in cases]


def data_dir_cases() -> list[Case]:
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    out = []
    for sub in DATA_DIRS:
        for d in sorted(glob.glob(os.path.join(root, sub, "*"))):
            if os.path.isfile(os.path.join(d, "model.onnx")):
                out.append(Case(f"{sub}/{os.path.basename(d)}", None, None, model_dir=d))
    return out


def sample(cases: Sequence[Case], every: int = 1) -> list[Case]:
    """Every ``every``-th case by sorted name (deterministic), starting with the first."""
    return sorted(cases, key=lambda c: c.name)[::max(1, every)]


def all_cases(pattern: str | None = None) -> list[Case]:
    cases = node_cases() + data_dir_cases()
    if pattern:
        rx = re.compile(pattern)
        cases = [c for c in cases if rx.search(c.name)]
    return cases


def load_exclusions(path: str = EXCLUSIONS_FILE, compiled: bool = False) -> dict[str, str]:
    """``name: reason`` per line; ``#`` starts a comment. Every entry must give a reason.
    ``compiled``: also the entries of ``exclusions_compiled.txt`` (they win on a name in both)."""
    out: dict[str, str] = {}
    if compiled:
        out.update(load_exclusions(path))
        path = COMPILED_EXCLUSIONS_FILE
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip() if line.lstrip().startswith("#") else line.strip()
            if not line:
                continue
            name, sep, reason = line.partition(":")
            if not sep or not reason.strip():
                raise ValueError(f"{path}:{lineno}: expected 'case_name: reason', got {line!r}")
            out[name.strip()] = reason.strip()
    return out


# ---- running one case -------------------------------------------------------------------------


def _array(v: Any) -> Any:
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, (list, tuple)) or v is None:
        return v
    return np.asarray(v)


def _load_pb(path: str) -> Any:
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def _load_dir(case: Case) -> None:
    d = case.model_dir
    assert d is not None
    case.model = onnx.load(os.path.join(d, "model.onnx"))
    case.data_sets = []
    for ds in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
        ins = [os.path.join(ds, f"input_{i}.pb") for i in range(len(glob.glob(os.path.join(ds, "input_*.pb"))))]
        outs = [os.path.join(ds, f"output_{i}.pb") for i in range(len(glob.glob(os.path.join(ds, "output_*.pb"))))]
        case.data_sets.append((ins, outs))  # paths, loaded after a successful import


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def _bind(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs in ``values`` are initializers holding those values."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    kept = [i for i in m.graph.input if i.name not in values]
    del m.graph.input[:]
    m.graph.input.extend(kept)
    m.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), n) for n, v in values.items())
    return m


def _shape_like(feeds: dict[str, Any], bound: Any, kinds: str = "iu") -> dict[str, np.ndarray]:
    """The scalar and 1-D graph inputs (of the dtype ``kinds``; default integers: shapes, axes) not bound yet."""
    return {n: v for n, v in feeds.items() if n not in bound and isinstance(v, np.ndarray)
            and v.dtype.kind in kinds and v.ndim <= 1}


def _import(model: onnx.ModelProto, feeds: dict[str, Any]) -> tuple[Any, list[str]]:
    """Import ``model``. Node tests pass shapes, axes, pads... as graph inputs; plait needs them
    at import time, so when the import says which run-time values must be constants and they are
    graph inputs, they are bound to the data set's values (as initializers) and the import retried
    (when they are computed from graph inputs, the integer scalar and 1-D graph inputs are bound)."""
    bound: dict[str, Any] = {}
    while True:
        try:
            return from_onnx(_bind(model, bound) if bound else model), sorted(bound)
        except UnsupportedError as exc:
            needed = getattr(exc, "needs_constant", [])
            want = [n for n in needed if n in feeds and n not in bound]
            if needed and not want:  # computed from graph inputs: bind the shape-like ones (and loop conditions)
                want = list(_shape_like(feeds, bound, "iub"))
            if not want:
                raise
            bound.update((n, feeds[n]) for n in want)


# Build errors that mean "this cannot be compiled, for a documented reason" rather than a bug:
# symbolic shapes (lowering needs static ones), an operator without a TE compute or a compute that
# says it cannot express the call, a construct the graph executor does not run (control flow).
# Any other build error (an internal KeyError wrapped by the pass manager, a PrimFunc type
# mismatch, C that does not compile...) is a failure.
COMPILE_UNSUPPORTED = re.compile(r"has a symbolic (dimension|shape)|not supported|has no TE compute|"
                                 r"graph executor: unsupported|VM executor does not run .* yet")


_RUN_TIME_FORM = re.compile(r"graph executor: unsupported|has a symbolic (dimension|shape)|does not run .* yet")


class _CompileUnsupported(Exception):
    pass


def _compile(mod: Any, opt_level: int, cache_dir: str | None, target: str | None = None,
             executor: str = "graph") -> Any:
    """``plait.build`` + a GraphModule (``executor="aot"``: an AotModule; ``"vm"``: a VirtualMachine); the runner maps feeds -> flat
    list of outputs. ``target``: default ``c -opt-level=<opt_level>``."""
    import plait
    from plait.executor import AotModule, GraphModule, VirtualMachine

    config = {"cc.cache_dir": cache_dir} if cache_dir else {}
    try:
        art = plait.build(mod, target=target or f"c -opt-level={opt_level}", executor=executor, config=config)
    except PlaitError as exc:
        if COMPILE_UNSUPPORTED.search(str(exc)) is None:
            raise
        raise _CompileUnsupported(_first_line(exc)) from exc
    gm = {"aot": AotModule, "vm": VirtualMachine}.get(executor, GraphModule)(art)

    def runner(feeds: dict[str, Any]) -> list[Any]:
        return gm(**{n: feeds[n] for n in gm.input_names})
    return runner


def run_case(case: Case, compiled: bool = False, opt_level: int = DEFAULT_OPT_LEVEL,
             cache_dir: str | None = None, target: str | None = None, executor: str = "graph") -> Result:
    """Import, run (the interpreter, or with ``compiled`` the C build), compare."""
    t0 = time.perf_counter()
    bound: list[str] = []
    try:
        if case.model is None:
            _load_dir(case)
        assert case.model is not None and case.data_sets is not None
        inits = {t.name for t in case.model.graph.initializer}
        in_names = [i.name for i in case.model.graph.input if i.name not in inits]
        for k, (ins, outs) in enumerate(case.data_sets):
            if case.model_dir is not None:
                ins, outs = [_load_pb(p) for p in ins], [_load_pb(p) for p in outs]
            feeds = {n: _array(v) for n, v in zip(in_names, ins)}
            try:
                if k == 0 or bound:
                    mod, bound = _import(case.model, feeds)
                    if compiled:
                        try:
                            runner = _compile(mod, opt_level, cache_dir, target, executor)
                        except _CompileUnsupported as exc:
                            ints = _shape_like(feeds, bound, "iuf")
                            if not ints and "symbolic shape" in str(exc):  # a data-dependent result (NonZero):
                                ints = {n: v for n, v in feeds.items() if n not in bound}  # fold it at import
                            if not _RUN_TIME_FORM.search(str(exc)) or not ints:
                                raise
                            # a loop with a run-time trip count the executor cannot run (the graph
                            # executor: none; the VM: one whose results have symbolic shapes): run it
                            # unrolled, with the scalar and 1-D inputs bound as constants
                            mod, bound = _import(_bind(case.model, ints), feeds)
                            bound = sorted({*bound, *ints})
                            runner = _compile(mod, opt_level, cache_dir, target, executor)
            except UnsupportedError as exc:
                reasons = "; ".join(f"{op}: {why}" for _, op, _, why in exc.nodes)
                return Result(case.name, "unsupported", reasons, time.perf_counter() - t0)
            except _CompileUnsupported as exc:
                return Result(case.name, "unsupported", f"compile: {exc}", time.perf_counter() - t0, bound)
            feeds = {n: v for n, v in feeds.items() if n not in bound}
            with np.errstate(all="ignore"):
                got = runner(feeds) if compiled else flatten_value(run(mod, feeds))
            expected = [_array(v) for v in outs]
            if len(got) != len(expected):
                raise AssertionError(f"data set {k}: {len(got)} outputs, expected {len(expected)}")
            for i, (g, e) in enumerate(zip(got, expected)):
                where = f"data set {k}, output {i}"
                if g.dtype != e.dtype:
                    raise AssertionError(f"{where}: dtype {g.dtype}, expected {e.dtype}")
                if g.shape != e.shape:
                    raise AssertionError(f"{where}: shape {g.shape}, expected {e.shape}")
                np.testing.assert_allclose(g, e, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                           err_msg=where, verbose=False)
    except Exception as exc:  # noqa: BLE001 - every failure is a result
        msg = " ".join(str(exc).split()) if isinstance(exc, AssertionError) else _first_line(exc)
        return Result(case.name, "failed", msg, time.perf_counter() - t0, bound)
    return Result(case.name, "passed", "", time.perf_counter() - t0, bound)


# ---- running all ------------------------------------------------------------------------------

def run_cases(cases: Sequence[Case], jobs: int = 1, compiled: bool = False,
              opt_level: int = DEFAULT_OPT_LEVEL, target: str | None = None, executor: str = "graph") -> list[Result]:
    """Run ``cases`` over ``jobs`` processes. ``compiled``: through ``plait.build`` with a fresh
    compile cache directory (removed afterwards).

    Worker processes are spawned, not forked: a fork of a process that has ONNX Runtime sessions
    (any earlier test in the same pytest worker) can deadlock in the child when the inherited
    sessions are garbage-collected (their thread pools' locks were held by threads that do not
    exist in the child)."""
    cache_dir = tempfile.mkdtemp(prefix="plait-conformance-cc-") if compiled else None
    run = functools.partial(run_case, compiled=compiled, opt_level=opt_level, cache_dir=cache_dir, target=target,
                            executor=executor)
    try:
        if jobs <= 1 or len(cases) < (10 if compiled else 50):
            return [run(c) for c in cases]
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            return pool.map(run, list(cases), chunksize=1 if compiled else 8)
    finally:
        if cache_dir:
            shutil.rmtree(cache_dir, ignore_errors=True)


def classify(results: list[Result], exclusions: dict[str, str]) -> tuple[list[Result], list[str]]:
    """Apply the exclusion list; also returns the excluded names that passed (stale entries)."""
    stale = []
    out = []
    for r in results:
        if r.name in exclusions:
            if r.status == "passed":
                stale.append(r.name)
            else:
                r = dataclasses.replace(r, status="excluded", message=f"{exclusions[r.name]} ({r.message})")
        out.append(r)
    return out, stale


def summary(results: list[Result]) -> tuple[str, str]:
    count = {s: sum(r.status == s for r in results) for s in ("passed", "failed", "unsupported", "excluded")}
    return (f"{count['passed']} passed, {count['failed']} failed, {count['unsupported']} unsupported",
            f"{count['excluded']} excluded")


_QUOTED = re.compile(r"'[^']*'")


def reason_group(message: str) -> str:
    """An unsupported case's reason without the quoted names in it (so that cases group)."""
    return _QUOTED.sub("'...'", message)


def grouped_reasons(results: list[Result]) -> list[tuple[int, str, str]]:
    """(count, reason group, first case) of the unsupported cases, most frequent first."""
    groups: dict[str, list[str]] = {}
    for r in results:
        if r.status == "unsupported":
            groups.setdefault(reason_group(r.message), []).append(r.name)
    return sorted(((len(v), k, v[0]) for k, v in groups.items()), key=lambda t: (-t[0], t[1]))


def iter_report(results: list[Result], stale: list[str], show_unsupported: bool = False,
                grouped: bool = False) -> Iterator[str]:
    for r in results:
        if r.status == "failed":
            yield f"FAILED {r.name}: {r.message}"
    if show_unsupported:
        for r in results:
            if r.status == "unsupported":
                yield f"UNSUPPORTED {r.name}: {r.message}"
        if grouped:
            for n, reason, first in grouped_reasons(results):
                yield f"UNSUPPORTED x{n} (e.g. {first}): {reason}"
    for name in stale:
        yield f"STALE exclusion (the case passes now): {name}"
