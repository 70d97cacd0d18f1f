"""The fuzz harness itself: the oracle's comparisons and CLI judgement, and the fork server pinning a
signal, an abort, a hang and a traceback to their case and leg without harm to pytest."""

import numpy as np

from .case import Leg
from .cases import case_ids
from .oracle import CliRun, Reference, compare, judge_cli
from .pool import run_ids


def test_compare_is_dtype_and_nan_aware():
    f = np.array([1.0, np.nan, np.inf, -np.inf], np.float32)
    assert compare([f], [f.copy()]) is None
    assert compare([f + np.float32(1e-6)], [f]) is None  # within float32 tolerance
    assert compare([np.array([1.0, 0.0, np.inf, -np.inf], np.float32)], [f]) == (
        "output 0 (float32[4]): 1 of 4 values differ; first at [1]: got np.float32(0.0), the reference has "
        "np.float32(nan)")
    assert compare([np.array([1.0, np.nan, -np.inf, -np.inf], np.float32)], [f]).startswith(
        "output 0 (float32[4]): 1 of 4 values differ; first at [2]")
    assert compare([f.astype(np.float64)], [f]) == "output 0: dtype float64, the reference has float32"
    assert compare([f[None]], [f]) == "output 0: shape [1, 4], the reference has [4]"
    assert compare([], [f]) == "0 outputs, the reference has 1"
    assert compare([np.array([2**62 + 1], np.int64)], [np.array([2**62], np.int64)]).startswith(
        "output 0 (int64[1]): 1 of 1 values differ")


def test_judge_cli_wants_one_plait_error_line(tmp_path):
    ref = Reference(None, why="refuses", strict=True)
    out = tmp_path / "o.npz"
    assert judge_cli("cli", CliRun(1, "", "plait: error: bad model\n"), out, ref) == Leg(
        "cli", "error", "plait: error: bad model")
    assert judge_cli("cli", CliRun(1, "", "plait: error: a\n  b\n"), out, ref).outcome == "bad-stderr"
    assert judge_cli("cli", CliRun(1, "", "Traceback (most recent call last):\nKeyError: 1\n"), out,
                     ref).outcome == "traceback"
    assert judge_cli("cli", CliRun(1, "", "plait: error: " + "x" * 3000 + "\n"), out, ref).outcome == "long-message"
    assert judge_cli("cli", CliRun(-11, "", ""), out, ref) == Leg("cli", "signal", "SIGSEGV; stderr: ")
    assert judge_cli("cli", CliRun(3, "", ""), out, ref).outcome == "exit-code"
    np.savez(out, y=np.ones(2, np.float32))
    assert judge_cli("cli", CliRun(0, "", ""), out, ref).outcome == "unchecked"  # a result the reference refuses
    assert judge_cli("cli", CliRun(0, "", ""), out, Reference([np.ones(2, np.float32)])) == Leg("cli", "equal")


def test_fork_server_pins_signals_hangs_and_tracebacks(tmp_path):
    ids = case_ids("selftest", 0, 7)
    results = {r.description.split("]")[0][1:]: r for r in run_ids(ids, tmp_path, jobs=2, timeout=3)}
    outcome = {kind: [(leg.name, leg.outcome) for leg in r.legs] for kind, r in results.items()}
    assert outcome == {
        "equal": [("before", "equal"), ("boom", "equal")],
        "segfault": [("before", "equal"), ("boom", "signal")],
        "abort": [("before", "equal"), ("boom", "signal")],
        "hang": [("before", "equal"), ("boom", "hang")],
        "traceback": [("before", "equal"), ("boom", "traceback")],
        "plait-error": [("before", "equal"), ("boom", "error")],
        "differs": [("before", "equal"), ("boom", "differs")],
    }
    assert results["segfault"].legs[-1].detail.startswith("SIGSEGV")
    assert results["abort"].legs[-1].detail.startswith("SIGABRT")
    assert results["traceback"].legs[-1].detail.startswith("KeyError: 'deep inside' at ")


def test_compare_finite_only_ignores_nan_and_inf_positions():
    a = np.array([np.nan, 1.0, np.inf], np.float32)
    b = np.array([0.5, 1.0, np.nan], np.float32)
    assert compare([a], [b]) is not None
    assert compare([a], [b], finite_only=True) is None
    assert compare([a], [np.array([0.5, 2.0, 1.0], np.float32)], finite_only=True).startswith(
        "output 0 (float32[3]): 1 of 3 values differ; first at [1]")
