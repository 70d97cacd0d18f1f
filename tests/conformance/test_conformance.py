"""The ONNX conformance harness as a test: every case passes, is unsupported (from_onnx raised
UnsupportedError), or is listed with a reason in exclusions.txt. The compiled mode runs a
deterministic sample (every COMPILED_EVERY-th case by name; every case as a ``long`` test, or
``python -m tests.conformance.run --compiled``) through plait.build + the graph executor."""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_conformance import (Case, Result, all_cases, classify, grouped_reasons, load_exclusions, run_case, run_cases,
                              sample, summary)

JOBS = min(2, os.cpu_count() or 1)
COMPILED_EVERY = 8  # ~250 cases, about 20 s on 2 cores


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


@pytest.mark.long
def test_onnx_conformance_compiled_every_case():
    _check(compiled=True, every=1, min_passed=1000)


def _relu_case(dims: list, expected_shift: float = 0.0) -> Case:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    x = np.array([[-1.0, 2.0, 3.0]], np.float32)
    return Case("relu", m, [([x], [np.maximum(x, 0) + np.float32(expected_shift)])])


def test_compiled_mode_classifies_build_refusals_and_compares_numbers():
    sym = run_case(_relu_case(["N", 3]), compiled=True)  # the graph executor needs static shapes: documented
    assert (sym.status, sym.message.split(": ")[:2]) == ("unsupported", ["compile", "LowerError"])
    assert "has a symbolic dimension" in sym.message
    assert run_case(_relu_case(["N", 3])).status == "passed"  # the interpreter runs it
    assert run_case(_relu_case([1, 3]), compiled=True).status == "passed"
    wrong = run_case(_relu_case([1, 3], expected_shift=1.0), compiled=True)
    assert wrong.status == "failed" and "Mismatched elements: 3 / 3" in wrong.message


def test_unsupported_reasons_group_without_quoted_names():
    results = [Result("a", "unsupported", "input: dtype 'bfloat16' not supported"),
               Result("b", "unsupported", "input: dtype 'string' not supported"),
               Result("c", "unsupported", "Det: operator not supported"), Result("d", "passed")]
    assert grouped_reasons(results) == [(2, "input: dtype '...' not supported", "a"),
                                        (1, "Det: operator not supported", "c")]
