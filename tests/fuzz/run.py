"""Run the fuzz cases from the command line (the repository root is the working directory).

    python3 -m tests.fuzz.run --category all --cases 2000 --seed 7      # a big run: summary + failure groups
    python3 -m tests.fuzz.run --case models:7:123                       # one case, here, every leg printed
    python3 -m tests.fuzz.run --case models:7:123 --fork                # the same through the fork server

A big run prints a table (cases, passed-equal, plait-error, failures by kind) and the failures grouped
by cause, each with a reproduction command; ``--results FILE`` also writes every result as JSON lines.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from .case import CATEGORIES


def _one_here(case_id: str, work: Path) -> int:
    """Run one case in this process with full tracebacks (a crash kills this process: use --fork)."""
    for k, v in {"HOME": work / "home", "XDG_CACHE_HOME": work / "home" / ".cache"}.items():
        os.environ[k] = str(v)  # before plait.runtime.cc is imported: the CLI's default cache goes here
    from . import oracle
    from .case import Env
    from .cases import run_case

    oracle.VERBOSE = True
    if case_id.startswith("artifacts:"):
        from .gen_artifacts import build_bases

        build_bases(work / "bases", work / "home" / ".cache" / "plait" / "cc")
    env = Env(work=work, cache_dir=work / "home" / ".cache" / "plait" / "cc", bases=work / "bases", subprocess=True)
    d = work / "cases" / case_id.replace(":", "-")
    r = run_case(case_id, env, d)
    print(f"{r.id}: {r.description}\n  files: {d}")
    for leg in r.legs:
        print(f"  {leg.name:12s} {leg.outcome:12s} {leg.detail}")
    print(f"  => {r.outcome}")
    return 1 if r.failures else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m tests.fuzz.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--category", default="all", choices=["all", *CATEGORIES])
    p.add_argument("--cases", type=int, default=100, help="cases per category (default 100)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="index of the first case")
    p.add_argument("--case", help="run one case by id (category:seed:index)")
    p.add_argument("--fork", action="store_true", help="with --case: run it in the fork server")
    p.add_argument("--jobs", type=int, default=2, help="cases at once (default 2)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as a hang")
    p.add_argument("--subprocess-every", type=int, default=25,
                   help="run the CLI leg in a real subprocess for every K-th case (0: never; default 25)")
    p.add_argument("--targets", default="c", help="comma-separated compile targets (default c)")
    p.add_argument("--work", type=Path, help="work directory (default: a new temporary one)")
    p.add_argument("--keep", action="store_true", help="keep every case's directory (failing ones are always kept)")
    p.add_argument("--results", type=Path, help="also write every result here, one JSON line each")
    args = p.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="plait-fuzz-"))
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.case and not args.fork:
        return _one_here(args.case, work)

    from .cases import case_ids
    from .pool import run_ids
    from .report import failure_report, table

    ids = [args.case] if args.case else case_ids(args.category, args.seed, args.cases, args.start)
    print(f"{len(ids)} cases, work directory {work}", flush=True)
    done: list = []
    t0 = time.perf_counter()

    def progress(r) -> None:
        done.append(r)
        if len(done) % 100 == 0 or len(done) == len(ids):
            fails = sum(1 for x in done if x.failures)
            print(f"  [{len(done):5d}/{len(ids)}] {time.perf_counter() - t0:7.1f} s, {fails} failing", flush=True)

    results = run_ids(ids, work, jobs=args.jobs, timeout=args.timeout, subprocess_every=args.subprocess_every,
                      targets=tuple(t for t in args.targets.split(",") if t), keep=args.keep, on_result=progress)
    elapsed = time.perf_counter() - t0
    if args.results:
        args.results.write_text("".join(r.to_json() + "\n" for r in results), encoding="utf-8")
    print(f"\n{table(results)}\n\n{elapsed:.1f} s for {len(results)} cases ({args.jobs} jobs)\n")
    if any(r.failures for r in results):
        print("failures by cause (count, outcome, category/kind, [failing legs], what):")
        print(failure_report(results))
    return 1 if any(r.failures for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
