"""The parent side: start the fork server on a list of case ids and collect one result per case.

    results = run_ids(case_ids("models", 0, 100), work_dir, jobs=2)

The server runs in the repository root (so the worktree's ``plait`` is imported) with its own
``HOME``/``XDG_CACHE_HOME`` under ``work_dir``: the fuzz run compiles into a private cache, and
the CLI legs (which use the default cache) share it with the API legs. If the server itself dies
(it never runs case code, so it should not), it is restarted on the cases it did not report.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable

from .case import CaseResult, Env, Leg

ROOT = Env.root
#: How long the server may take to import everything and report ready.
STARTUP_SECONDS = 120.0


def server_env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HOME=str(work / "home"), XDG_CACHE_HOME=str(work / "home" / ".cache"), OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def _serve(ids: list[str], work: Path, jobs: int, timeout: float, subprocess_every: int, targets: tuple[str, ...],
           keep: bool, on_result: Callable[[CaseResult], None]) -> dict[str, CaseResult]:
    """One server run; returns the results it reported (maybe fewer than ``ids`` if it died)."""
    ids_file = work / "ids.txt"
    ids_file.write_text("\n".join(ids) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "tests.fuzz.server", "--work", str(work), "--ids", str(ids_file), "--jobs", str(jobs),
           "--timeout", str(timeout), "--subprocess-every", str(subprocess_every), "--targets", ",".join(targets)]
    if keep:
        cmd.append("--keep")
    results: dict[str, CaseResult] = {}
    with open(work / "server.log", "ab") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, env=server_env(work),
                                start_new_session=True)
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        # the server enforces each case's timeout; this only guards against the server itself stalling
        patience = STARTUP_SECONDS
        try:
            while True:
                if not sel.select(timeout=patience):
                    os.killpg(proc.pid, signal.SIGKILL)
                    break
                line = proc.stdout.readline()
                if not line:
                    break
                patience = timeout * max(1, jobs) + 60
                msg = json.loads(line)
                if msg.get("ready"):
                    continue
                r = CaseResult.from_json(line)
                results[r.id] = r
                on_result(r)
        finally:
            sel.close()
            proc.stdout.close()
            proc.wait()
    return results


def run_ids(ids: list[str], work: Path, *, jobs: int = 2, timeout: float = 60.0, subprocess_every: int = 0,
            targets: tuple[str, ...] = ("c",), keep: bool = False,
            on_result: Callable[[CaseResult], None] = lambda r: None) -> list[CaseResult]:
    """Run every case in ``ids`` in fork-server children; results in the order of ``ids``."""
    work.mkdir(parents=True, exist_ok=True)
    if any(i.startswith("artifacts:") for i in ids):
        from .gen_artifacts import build_bases

        build_bases(work / "bases", work / "home" / ".cache" / "plait" / "cc")
    results: dict[str, CaseResult] = {}
    for _attempt in range(3):
        todo = [i for i in ids if i not in results]
        if not todo:
            break
        results.update(_serve(todo, work, jobs, timeout, subprocess_every, targets, keep, on_result))
    for i in ids:
        if i not in results:
            results[i] = CaseResult(i, "", [Leg("server", "harness", f"the fork server never reported this case; "
                                                                     f"see {work / 'server.log'}")])
    return [results[i] for i in ids]
