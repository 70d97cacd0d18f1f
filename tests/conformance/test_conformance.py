"""The ONNX conformance harness as a test: every case passes, is unsupported (from_onnx raised
UnsupportedError), or is listed with a reason in exclusions.txt. The compiled mode runs a
deterministic sample (every COMPILED_EVERY-th case by name; the full compiled run is
``python -m tests.conformance.run --compiled``) through plait.build + the graph executor."""

from __future__ import annotations

import os

from onnx_conformance import all_cases, classify, load_exclusions, run_cases, sample, summary

JOBS = min(2, os.cpu_count() or 1)
COMPILED_EVERY = 4  # ~500 cases, about a minute on 2 cores


def _check(compiled: bool, every: int, min_passed: int) -> None:
    exclusions = load_exclusions(compiled=compiled)
    cases = all_cases()
    names = {c.name for c in cases}
    unknown = sorted(set(exclusions) - names)
    assert not unknown, f"the exclusion lists name cases that do not exist: {unknown}"
    results, stale = classify(run_cases(sample(cases, every), jobs=JOBS, compiled=compiled), exclusions)
    failed = [f"{r.name}: {r.message}" for r in results if r.status == "failed"]
    main_line, excluded_line = summary(results)
    print(f"\n{main_line}\n{excluded_line}")
    if stale:
        print("excluded cases that pass now (remove them from the exclusion list):", ", ".join(stale))
    assert not failed, f"{len(failed)} unexpected failure(s):\n" + "\n".join(failed)
    # sanity: the harness really ran the suite
    assert sum(r.status == "passed" for r in results) > min_passed


def test_onnx_conformance():
    _check(compiled=False, every=1, min_passed=1000)


def test_onnx_conformance_compiled_sample():
    _check(compiled=True, every=COMPILED_EVERY, min_passed=1000 // COMPILED_EVERY)
