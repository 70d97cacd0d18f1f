"""`plait run --repeat N --profile --json` and `bench/run.py FILE`: the format, counts and schema
(never the times themselves)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import plait
from plait.cli import main
from plait.frontend.onnx import from_onnx
from plait.relay import run
from plait.testing import onnx_models

from .conftest import save

REPO = Path(__file__).resolve().parents[2]
MS = r"(\d+\.\d{4})"
TIME = re.compile(rf"time: min {MS} ms, median {MS} ms, max {MS} ms over (\d+) runs?")
ROW = re.compile(r"(\S+)  +(\S+)  +(\S+)  +(\d+\.\d{4})  +(\d+\.\d)%")
SEED = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"
PROFILE_KEYS = {"runs", "order", "total_ms", "calls"}
CALL_KEYS = {"call", "op", "piece", "ms", "share"}
DOC_KEYS = {"format", "executor", "runs", "warmup", "min_ms", "median_ms", "max_ms", "times_ms", "profile"}


def check_time_line(line: str, runs: int) -> None:
    m = TIME.fullmatch(line)
    assert m, line
    lo, med, hi = (float(g) for g in m.groups()[:3])
    assert lo <= med <= hi
    assert int(m.group(4)) == runs


def check_table(lines: list[str], runs: int) -> list[tuple[str, str, str]]:
    """The profile table's (call, op, piece) rows, after checking its header, shares and total."""
    assert lines[0] == f"profile (median of {runs} run{'s' if runs != 1 else ''} per call, in execution order):"
    assert re.fullmatch(r"call +op +piece +ms +share", lines[1])
    rows = [ROW.fullmatch(ln) for ln in lines[2:-1]]
    assert all(rows), lines
    total = re.fullmatch(rf"total +{MS} +100\.0%", lines[-1])
    assert total
    assert sum(float(r.group(5)) for r in rows) == pytest.approx(100.0, abs=0.05 * len(rows) + 0.01)
    assert sum(float(r.group(4)) for r in rows) == pytest.approx(float(total.group(1)), abs=1e-4 * len(rows) + 1e-9)
    return [r.groups()[:3] for r in rows]


def graph_calls(art) -> list[tuple[str, str, str]]:
    """(name, func, piece) of each call and copy of an artifact, in execution order."""
    out = []
    for n in art.graph["nodes"]:
        if n["op"] == "call":
            out.append((n["name"], n["func"], n["piece"]))
        elif n["op"] == "copy":
            out.append((n["name"], "copy", f"{n['src']}->{n['dst']}"))
    return out


def test_without_the_flags_the_output_is_as_before(mlp_path, capsys):
    assert main(["run", mlp_path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0] == "y: float32[1, 4]"


@pytest.mark.parametrize("target", [[], ["--target", "c"]])
def test_repeat_prints_one_time_line_after_the_outputs(mlp_path, capsys, target):
    assert main(["run", mlp_path, *target]) == 0
    plain = capsys.readouterr().out
    assert main(["run", mlp_path, "--repeat", "3", *target]) == 0
    out = capsys.readouterr().out
    assert out.startswith(plain)  # the outputs are those of the first run, printed as before
    rest = out[len(plain):].splitlines()
    assert len(rest) == 1
    check_time_line(rest[0], 3)


def test_repeat_one_says_run(mlp_path, tmp_path, capsys):
    out = tmp_path / "o.npz"
    assert main(["run", mlp_path, "--repeat", "1", "--output", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"wrote 1 output(s) to {out}: y"
    check_time_line(lines[1], 1)
    assert lines[1].endswith(" over 1 run")


def test_profile_table_one_row_per_call(mlp_path, tmp_path, capsys):
    out = str(tmp_path / "o.npz")
    assert main(["run", mlp_path, "--target", "c", "--repeat", "4", "--profile", "--output", out]) == 0
    lines = capsys.readouterr().out.splitlines()
    check_time_line(lines[1], 4)
    rows = check_table(lines[2:], 4)
    art = plait.build(from_onnx(onnx.load(mlp_path)), target="c")
    assert rows == graph_calls(art)
    assert [r[2] for r in rows] == ["c", "c", "c"]


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    return save(onnx_models.ds_cnn(), tmp_path_factory.mktemp("ds") / "ds_cnn.onnx")


def test_profile_on_a_composite_target_names_the_pieces_and_copies(ds_path, tmp_path, capsys):
    place = "/fc/*=low_power_cpu"
    assert main(["run", ds_path, "--target", SEED, "--place", place, "--profile", "--json",
                 "--output", str(tmp_path / "o.npz")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("placement (latency, ")  # the placement summary is printed as before
    doc = json.loads(lines[-1])
    assert doc["runs"] == 1 and doc["profile"]["runs"] == 1
    art = plait.build(from_onnx(onnx.load(ds_path)), target=SEED, place=place, config={"c.host_simulation": True})
    calls = doc["profile"]["calls"]
    assert [(c["call"], c["op"], c["piece"]) for c in calls] == graph_calls(art)
    pieces = {c["piece"] for c in calls}
    assert {"low_power_cpu", "inference_cpu", "low_power_cpu->inference_cpu", "inference_cpu->low_power_cpu"} <= pieces
    assert sum(c["share"] for c in calls) == pytest.approx(100.0)


@pytest.mark.parametrize("target, executor, warmup", [([], "interpreter", 0), (["--target", "c"], "graph", 1)])
def test_json_schema(mlp_path, capsys, target, executor, warmup):
    assert main(["run", mlp_path, "--repeat", "5", "--json", *target]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "y: float32[1, 4]" and len(lines) == 3
    doc = json.loads(lines[-1])
    assert set(doc) == DOC_KEYS
    assert doc["format"] == "plait.run.timing/1"
    assert (doc["executor"], doc["runs"], doc["warmup"], doc["profile"]) == (executor, 5, warmup, None)
    assert len(doc["times_ms"]) == 5 and all(isinstance(t, float) and t >= 0 for t in doc["times_ms"])
    assert doc["min_ms"] == min(doc["times_ms"]) and doc["max_ms"] == max(doc["times_ms"])
    assert doc["median_ms"] == float(np.median(doc["times_ms"]))


def test_json_with_profile_and_default_repeat(mlp_path, tmp_path, capsys):
    assert main(["run", mlp_path, "--target", "c", "--profile", "--json", "--output", str(tmp_path / "o.npz")]) == 0
    doc = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert set(doc) == DOC_KEYS and doc["runs"] == 1
    prof = doc["profile"]
    assert set(prof) == PROFILE_KEYS and prof["order"] == "execution" and prof["runs"] == 1
    assert len(prof["calls"]) == 3 and all(set(c) == CALL_KEYS for c in prof["calls"])
    assert prof["total_ms"] == pytest.approx(sum(c["ms"] for c in prof["calls"]))
    assert sum(c["share"] for c in prof["calls"]) == pytest.approx(100.0)


def test_outputs_under_repeat_match_the_reference(mlp_path, tmp_path, capsys):
    x = np.random.default_rng(1).standard_normal((1, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "o.npz"
    assert main(["run", mlp_path, "--target", "c", "--inputs", str(tmp_path / "x.npy"), "--output", str(out),
                 "--repeat", "3", "--profile"]) == 0
    capsys.readouterr()
    with np.load(out) as d:
        np.testing.assert_allclose(d["y"], run(from_onnx(onnx.load(mlp_path)), {"x": x}), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("value, shown", [("0", "0"), ("-2", "-2"), ("x", "'x'")])
def test_bad_repeat_is_a_usage_error(mlp_path, capsys, value, shown):
    with pytest.raises(SystemExit) as exc:
        main(["run", mlp_path, f"--repeat={value}"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.endswith(
        f"plait run: error: argument --repeat: expected a positive integer, got {shown}\n")


def test_profile_without_target_is_a_usage_error(mlp_path, capsys):
    assert main(["run", mlp_path, "--profile", "--repeat", "2"]) == 2
    got = capsys.readouterr()
    assert got.out == ""
    assert got.err == ("plait: error: --profile needs --target: it times each call of the compiled graph; the "
                       "reference interpreter has no per-call times (--repeat times it as a whole)\n")


# ---- bench/run.py FILE ---------------------------------------------------------------------------


def bench(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "bench" / "run.py"), *argv], capture_output=True, text=True,
                          timeout=600, cwd=REPO)


def test_bench_measures_an_onnx_file(mlp_path, tmp_path):
    r = bench(mlp_path, "--rows", "c", "--repeat", "2", "--warmup", "1", "--no-numpy",
              "--json", str(tmp_path / "b.json"))
    assert r.returncode == 0, r.stderr
    row = next(ln for ln in r.stdout.splitlines() if ln.startswith(mlp_path))
    assert re.search(r"\s\d+\.\d{2}x\s", row)  # the plait/ORT ratio
    res = json.loads((tmp_path / "b.json").read_text())["models"][mlp_path]
    assert res["rows"]["c"]["ratio"] == pytest.approx(res["rows"]["c"]["plait_ms"] / res["ort_ms"])
    assert res["rows"]["c"]["max_abs_diff"] < 1e-5


def test_bench_refuses_a_missing_or_bad_file(tmp_path):
    from plait.testing.onnx_models import MODELS

    bundled = f"(bundled models: {', '.join(MODELS)})"
    missing = tmp_path / "nope.onnx"
    r = bench(str(missing))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.endswith(f"run.py: error: no such file '{missing}' {bundled}\n")
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a model")
    r = bench(str(bad))
    assert r.returncode == 2 and r.stdout == ""
    last = r.stderr.splitlines()[-1]
    assert last.startswith(f"run.py: error: '{bad}' is not a valid ONNX model: ") and last.endswith(bundled)
    r = bench("--models", "foo")
    assert r.returncode == 2
    assert r.stderr.endswith(f"run.py: error: unknown model 'foo' (models: {', '.join(MODELS)}; "
                             "or give an ONNX file as an argument)\n")
