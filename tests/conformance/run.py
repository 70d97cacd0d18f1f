"""Run the ONNX conformance harness.

    python -m tests.conformance.run [--filter PATTERN] [--json OUT] [--jobs N] [--unsupported]

Prints one line per unexpected failure, then ``N passed, M failed, K unsupported`` and
``E excluded``. Exit status 1 if any case failed (excluded cases do not count).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from onnx_conformance import all_cases, classify, iter_report, load_exclusions, run_cases, summary  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.conformance.run", description=__doc__.split("\n")[1])
    p.add_argument("--filter", help="only cases whose name matches this regular expression")
    p.add_argument("--json", help="write every case's result to this JSON file")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes (default 2)")
    p.add_argument("--unsupported", action="store_true", help="also list unsupported cases with the reason")
    p.add_argument("--slowest", type=int, default=0, help="print the N slowest cases")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    cases = all_cases(args.filter)
    results, stale = classify(run_cases(cases, args.jobs), load_exclusions())
    for line in iter_report(results, stale, args.unsupported):
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
