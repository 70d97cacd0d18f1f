"""The fork server: runs every case in a fresh child process, so that a signal, a hang or a corrupted
heap pins exactly one case and never reaches pytest.

    python3 -m tests.fuzz.server --work DIR --ids FILE [--jobs 2] [--timeout 60] [--subprocess-every K]

It imports numpy, onnx, onnxruntime and plait once, then for each case id (one per line of FILE)
forks a child in its own process group. The child writes what it does to ``cases/<id>/`` (each leg's
start and end in ``events.jsonl``, its stdout/stderr in ``output.txt``); the server waits for it
(killing the whole group after ``--timeout`` seconds) and prints one JSON :class:`CaseResult` per
line on its stdout, in the order cases finish. A child that dies is judged from its events: the leg
that was running gets ``signal``, ``hang`` or ``crash``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import sys
import time
import traceback
from collections import deque
from pathlib import Path

from .case import CaseResult, Env, Leg, parse_id, read_events

#: Address-space cap of a case (a safety net: every huge size a case asks for is 2^40 or more, far
#: above both this and plait's default limit; a correct plait refuses before allocating).
CASE_ADDRESS_SPACE = 4 * 1024**3


def preload(cache: Path) -> None:
    """Import everything a case uses, once, so that forked children start warm. Not onnxruntime: its
    import starts a thread, and a process with threads must not fork (children import it, in 0.05 s)."""
    import numpy  # noqa: F401
    import onnx  # noqa: F401

    import plait.backends.c.backend  # noqa: F401
    import plait.cli  # noqa: F401
    import plait.executor.graph.module  # noqa: F401
    import plait.frontend.onnx  # noqa: F401
    import plait.relay.interpreter  # noqa: F401
    import plait.relay.io  # noqa: F401
    from plait.target.plugins import load_in_tree
    from plait.frontend.onnx_registry import load_converters
    from plait.runtime import cc

    load_in_tree()
    load_converters()
    for warm in ("compiler_version", "native_flags"):  # cached gcc queries
        fn = getattr(cc, warm, None)
        if callable(fn):
            try:
                fn("gcc")
            except Exception:  # noqa: BLE001 - a missing compiler shows up in the cases
                pass
    from . import flows, gen_artifacts, gen_inputs, gen_models  # noqa: F401

    flows.run_flags()
    warm_up(cache)


def warm_up(cache: Path) -> None:
    """Import, interpret and compile one valid model (not run: nothing is loaded into the server), so
    that the modules plait imports lazily are imported once here instead of in every child."""
    import numpy as np

    import plait
    from plait.relay import run

    from .bases import mlp

    base = mlp(0)
    mod = plait.from_onnx(base.model)
    run(mod, base.inputs(np.random.default_rng(0)))
    plait.build(mod, target="c", config={"cc.cache_dir": str(cache)})


def case_dir(work: Path, case_id: str) -> Path:
    return work / "cases" / case_id.replace(":", "-")


def child(case_id: str, env: Env, d: Path) -> None:
    """In the forked child: run one case, write ``result.json``, exit without returning."""
    code = 3
    try:
        os.setpgid(0, 0)
        resource.setrlimit(resource.RLIMIT_AS, (CASE_ADDRESS_SPACE, CASE_ADDRESS_SPACE))
        fd = os.open(d / "output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        from .cases import run_case

        result = run_case(case_id, env, d, events=d / "events.jsonl")
        (d / "result.json").write_text(result.to_json(), encoding="utf-8")
        code = 0
    except BaseException:  # noqa: BLE001 - report anything, never return into the server's loop
        try:
            (d / "harness.txt").write_text(traceback.format_exc(), encoding="utf-8")
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def _tail(path: Path, n: int = 300) -> str:
    try:
        return " ".join(path.read_text(encoding="utf-8", errors="replace")[-n:].split())
    except OSError:
        return ""


def _description(case_id: str) -> str:
    try:
        from .cases import make_case

        return make_case(case_id).description
    except Exception as exc:  # noqa: BLE001
        return f"(cannot rebuild the case: {exc})"


def collect(case_id: str, d: Path, status: int, hung: bool, seconds: float, timeout: float) -> CaseResult:
    """The result of a finished child: its own, or what its events say about how it died."""
    result_file = d / "result.json"
    if not hung and status == 0 and result_file.exists():
        r = CaseResult.from_json(result_file.read_text(encoding="utf-8"))
        r.seconds = seconds
        return r
    legs, current, description = read_events(d / "events.jsonl")
    leg = current or "build"
    out = _tail(d / "output.txt")
    if hung:
        death = Leg(leg, "hang", f"no end after {timeout:g} s; output: {out}")
    elif os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        death = Leg(leg, "signal", f"{sig}; output: {out}")
    elif (d / "harness.txt").exists():
        lines = (d / "harness.txt").read_text(encoding="utf-8").strip().splitlines()
        death = Leg(leg, "harness", f"the harness failed: {lines[-1] if lines else '?'}")
    else:
        death = Leg(leg, "crash", f"exit status {os.WEXITSTATUS(status)} without a result; output: {out}")
    if leg == "ort":  # the reference died, not plait
        death = Leg(leg, "harness", f"ONNX Runtime (the reference) died: {death.detail}")
    return CaseResult(case_id, description or _description(case_id), [*legs, death], seconds)


def serve(ids: list[str], work: Path, jobs: int, timeout: float, subprocess_every: int, targets: tuple[str, ...],
          keep: bool, out) -> None:
    cache = work / "home" / ".cache" / "plait" / "cc"
    queue = deque(ids)
    running: dict[int, tuple[str, Path, float, float, bool]] = {}  # pid -> (id, dir, start, deadline, killed)
    while queue or running:
        while queue and len(running) < jobs:
            case_id = queue.popleft()
            d = case_dir(work, case_id)
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            index = parse_id(case_id)[2]
            env = Env(work=work, cache_dir=cache, bases=work / "bases", targets=targets,
                      subprocess=subprocess_every > 0 and index % subprocess_every == 0)
            pid = os.fork()
            if pid == 0:
                child(case_id, env, d)
            try:
                os.setpgid(pid, pid)
            except OSError:
                pass  # the child did it first
            now = time.monotonic()
            running[pid] = (case_id, d, now, now + timeout, False)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            case_id, d, start, _, killed = running.pop(pid)
            try:
                os.killpg(pid, signal.SIGKILL)  # stray grandchildren (gcc, a CLI subprocess) of a dead case
            except OSError:
                pass
            r = collect(case_id, d, status, killed, time.monotonic() - start, timeout)
            out.write(r.to_json() + "\n")
            out.flush()
            if not keep and not r.failures:
                shutil.rmtree(d, ignore_errors=True)
            continue
        now = time.monotonic()
        for pid, (case_id, d, start, deadline, killed) in list(running.items()):
            if not killed and now > deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                running[pid] = (case_id, d, start, deadline, True)
        time.sleep(0.005)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m tests.fuzz.server")
    p.add_argument("--work", required=True, type=Path)
    p.add_argument("--ids", required=True, type=Path)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--subprocess-every", type=int, default=0)
    p.add_argument("--targets", default="c")
    p.add_argument("--keep", action="store_true", help="keep the directories of passing cases too")
    args = p.parse_args(argv)
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")  # the protocol; stray prints go to stderr
    os.dup2(2, 1)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    preload(args.work / "home" / ".cache" / "plait" / "cc")
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    if threads > 1:  # forking a process with threads can deadlock children on a lock a thread held
        print(f"fuzz server: warning: {threads} threads after preloading; children may deadlock", file=sys.stderr)
    out.write('{"ready": true}\n')
    out.flush()
    ids = [line.strip() for line in args.ids.read_text(encoding="utf-8").splitlines() if line.strip()]
    targets = tuple(t for t in args.targets.split(",") if t)
    serve(ids, args.work, args.jobs, args.timeout, args.subprocess_every, targets, args.keep, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
