"""Run the ONNX conformance harness.

    python -m tests.conformance.run [--filter PATTERN] [--json OUT] [--jobs N] [--unsupported]
                                    [--compiled [--opt-level N | --target T] [--executor aot|vm]] [--every K]

Prints one line per unexpected failure, then ``N passed, M failed, K unsupported`` and
``E excluded``. Exit status 1 if any case failed (excluded cases do not count). ``--compiled``
runs the compiled path (``plait.build(..., target="c -opt-level=N", executor="graph")``) instead of
the interpreter, with exclusions from ``exclusions.txt`` and ``exclusions_compiled.txt``;
``--unsupported`` then also prints the reasons grouped with counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from onnx_conformance import (DEFAULT_OPT_LEVEL, all_cases, classify, iter_report, load_exclusions,  # noqa: E402
                              run_cases, sample, summary)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.conformance.run", description=__doc__.split("\n")[1])
    p.add_argument("--filter", help="only cases whose name matches this regular expression")
    p.add_argument("--json", help="write every case's result to this JSON file")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes (default 2)")
    p.add_argument("--unsupported", action="store_true", help="also list unsupported cases with the reason")
    p.add_argument("--slowest", type=int, default=0, help="print the N slowest cases")
    p.add_argument("--compiled", action="store_true", help="run the compiled path (C build + graph executor)")
    p.add_argument("--opt-level", type=int, default=DEFAULT_OPT_LEVEL, choices=(0, 1, 2, 3),
                   help=f"with --compiled: the C target's -opt-level (default {DEFAULT_OPT_LEVEL})")
    p.add_argument("--target", help='with --compiled: build for this target instead of "c -opt-level=N" (e.g. llvm)')
    p.add_argument("--executor", choices=("graph", "aot", "vm"), default="graph",
                   help="with --compiled: the executor (default graph; aot: the AOT C run on this machine; "
                        "vm: the VM executor)")
    p.add_argument("--every", type=int, default=1, help="only every K-th case by sorted name (what the test samples)")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    cases = sample(all_cases(args.filter), args.every)
    results, stale = classify(run_cases(cases, args.jobs, compiled=args.compiled, opt_level=args.opt_level,
                                        target=args.target, executor=args.executor),
                              load_exclusions(compiled=args.compiled))
    for line in iter_report(results, stale, args.unsupported, grouped=args.compiled):
        print(line)
    if args.slowest:
        for r in sorted(results, key=lambda r: -r.seconds)[:args.slowest]:
            print(f"{r.seconds:8.2f}s {r.name} ({r.status})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([dataclasses.asdict(r) for r in results], f, indent=1)
    main_line, excluded_line = summary(results)
    print(main_line)
    print(excluded_line)
    n_bound = sum(1 for r in results if r.bound)
    print(f"({len(results)} cases in {time.perf_counter() - t0:.1f} s; {n_bound} with graph inputs bound as "
          f"constants)", file=sys.stderr)
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
