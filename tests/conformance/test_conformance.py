"""The ONNX conformance harness as a test: every case passes, is unsupported (from_onnx raised
UnsupportedError), or is listed with a reason in exclusions.txt."""

from __future__ import annotations

import os

from onnx_conformance import all_cases, classify, load_exclusions, run_cases, summary


def test_onnx_conformance():
    exclusions = load_exclusions()
    cases = all_cases()
    names = {c.name for c in cases}
    unknown = sorted(set(exclusions) - names)
    assert not unknown, f"exclusions.txt lists cases that do not exist: {unknown}"
    results, stale = classify(run_cases(cases, jobs=min(2, os.cpu_count() or 1)), exclusions)
    failed = [f"{r.name}: {r.message}" for r in results if r.status == "failed"]
    main_line, excluded_line = summary(results)
    print(f"\n{main_line}\n{excluded_line}")
    if stale:
        print("excluded cases that pass now (remove them from exclusions.txt):", ", ".join(stale))
    assert not failed, f"{len(failed)} unexpected failure(s):\n" + "\n".join(failed)
    # sanity: the harness really ran the suite
    assert sum(r.status == "passed" for r in results) > 1000
