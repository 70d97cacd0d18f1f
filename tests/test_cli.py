"""The `plait` command: show, run, compile, explain, ops. Other tools script against these; keep them stable."""

import json
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest

import plait
from plait.cli import main
from plait.executor.graph.artifact import GraphArtifact
from plait.executor.graph.module import GraphModule
from plait.frontend.onnx import from_onnx, load_onnx
from plait.memory.plan import pool_lines
from plait.pipeline.explain import explain
from plait.relay import run
from plait.testing import onnx_models


@pytest.fixture(scope="module")
def mlp_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "mlp.onnx"
    onnx.save(onnx_models.mlp(sizes=(8, 16, 4)), str(path))
    return path


def test_show_prints_relay_text(mlp_path, capsys):
    assert main(["show", str(mlp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith('#[version = "0.1"]')
    assert "def @main(%x: Tensor[(1, 8), float32]) -> Tensor[(1, 4), float32] {" in out
    assert 'name="/fc0/Gemm"' in out


def test_run_with_inputs_writes_outputs_keyed_by_name(mlp_path, tmp_path, capsys):
    x = np.random.default_rng(5).standard_normal((1, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    out_path = tmp_path / "out.npz"
    assert main(["run", str(mlp_path), "--inputs", str(tmp_path / "in.npz"), "--output", str(out_path)]) == 0
    assert capsys.readouterr().out == f"wrote 1 output(s) to {out_path}: y\n"
    with np.load(out_path) as data:
        assert data.files == ["y"]
        expected = run(from_onnx(onnx.load(str(mlp_path))), {"x": x})
        np.testing.assert_array_equal(data["y"], expected)
        np.testing.assert_allclose(data["y"].sum(), 1.0, rtol=1e-5)  # softmax


def test_run_random_inputs_are_reproducible(mlp_path, tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    assert main(["run", str(mlp_path), "--output", str(a)]) == 0
    assert main(["run", str(mlp_path), "--output", str(b)]) == 0
    with np.load(a) as da, np.load(b) as db:
        np.testing.assert_array_equal(da["y"], db["y"])


def test_run_prints_outputs(mlp_path, capsys):
    assert main(["run", str(mlp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("y: float32[1, 4]\n[[")


def test_run_unknown_input_name(mlp_path, tmp_path, capsys):
    np.savez(tmp_path / "in.npz", z=np.zeros((1, 8), np.float32))
    assert main(["run", str(mlp_path), "--inputs", str(tmp_path / "in.npz")]) == 1
    assert capsys.readouterr().err == "plait: error: unknown input 'z' (inputs are: x)\n"


def test_malformed_model_is_a_clean_error(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07not a protobuf at all\xff\xff")
    assert main(["show", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"plait: error: cannot load ONNX model '{bad}': ")
    assert "Traceback" not in err


def test_ops_lists_and_details(capsys):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    for name in ("nn.conv2d", "nn.dense", "add", "reshape", "nn.softmax", "image.resize2d", "device_copy"):
        assert f"\n{name} " in "\n" + out
    assert main(["ops", "nn.leaky_relu"]) == 0
    assert "alpha: float = 0.01" in capsys.readouterr().out


def test_installed_entry_point_runs(mlp_path):
    r = subprocess.run([sys.executable, "-m", "plait.cli", "show", str(mlp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "nn.softmax" in r.stdout


# ---- placement: explain, compile, and the placement flags ---------------------------------------------

SEED = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"
HAS_DOT = shutil.which("dot") is not None


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("ds") / "ds_cnn.onnx"
    onnx.save(onnx_models.ds_cnn(), str(path))
    return path


@pytest.fixture(scope="module")
def ds_report(ds_path):
    return explain(load_onnx(str(ds_path)), SEED, place="/fc/*=low_power_cpu")


def test_explain_prints_the_report(ds_path, ds_report, tmp_path, capsys):
    assert main(["explain", str(ds_path), "--target", SEED, "--place", "/fc/*=low_power_cpu"]) == 0
    out = capsys.readouterr().out
    # the report, with the memory plan of the same placement before the facts of the pieces: the pools
    # plait.build plans for it (bytes, lower bound, algorithm) and their share of each piece's RAM
    head, rest = out.split("memory plan (activations and workspaces, per piece):\n")
    block, tail = rest.split("\n\n", 1)
    assert head + tail == ds_report.text()
    art = plait.build(load_onnx(str(ds_path)), SEED, place="/fc/*=low_power_cpu",
                      config={"c.host_simulation": True, "c.cross_check": False, "cc.cache_dir": str(tmp_path)})
    ram = {"inference_cpu": 320 * 1024, "low_power_cpu": 16 * 1024}
    assert block.splitlines() == [f"{line}; {p['bytes'] / ram[p['piece']]:.0%} of the piece's {ram[p['piece']]:,} B of RAM"
                                  for line, p in zip(pool_lines(art.graph), art.graph["pools"])]
    assert [p["piece"] for p in art.graph["pools"]] == ["inference_cpu", "low_power_cpu"]
    for c in ds_report.calls:
        assert f"  {c.label}  " in out
    assert out.count("pinned by --place rule '/fc/*=low_power_cpu'") == 2  # the Gemm's dense and bias add


def test_explain_json(ds_path, ds_report, capsys):
    assert main(["explain", str(ds_path), "--target", SEED, "--place", "/fc/*=low_power_cpu", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    memory = d.pop("memory_plan")
    assert d == ds_report.to_dict()
    assert [(p["piece"], p["ram_bytes"]) for p in memory["pools"]] == [("inference_cpu", 320 * 1024),
                                                                        ("low_power_cpu", 16 * 1024)]
    assert all(p["lower_bound"] <= p["bytes"] for p in memory["pools"])
    assert d["rules"] == ["/fc/*=low_power_cpu"] and len(d["calls"]) == 31
    assert {c["piece"] for c in d["calls"] if c["name"] == "/fc/Gemm"} == {"low_power_cpu"}


def test_explain_objectives(ds_path, capsys):
    assert main(["explain", str(ds_path), "--target", SEED, "--objective", "weighted", "--weight", "0.25",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["objective"], d["weight"]) == ("weighted", 0.25)
    assert d["totals"]["value"] == pytest.approx(0.25 * d["totals"]["seconds"] * 1e6
                                                 + 0.75 * d["totals"]["joules"] * 1e3)
    assert main(["explain", str(ds_path), "--target", SEED, "--objective", "energy"]) == 0
    assert "objective: energy; solver: ilp (optimal)" in capsys.readouterr().out


def test_explain_graph_dot(ds_path, ds_report, tmp_path, capsys):
    out = tmp_path / "p.dot"
    assert main(["explain", str(ds_path), "--target", SEED, "--place", "/fc/*=low_power_cpu", "--json",
                 "--graph", str(out)]) == 0
    got = capsys.readouterr()
    json.loads(got.out)  # stdout stays JSON
    assert got.err == f"wrote the placement drawing to {out}\n"
    assert out.read_text() == ds_report.to_dot()


@pytest.mark.skipif(not HAS_DOT, reason="graphviz's 'dot' is not installed")
def test_explain_graph_svg(ds_path, ds_report, tmp_path, capsys):
    out = tmp_path / "p.svg"
    assert main(["explain", str(ds_path), "--target", SEED, "--graph", str(out)]) == 0
    assert capsys.readouterr().out.endswith(f"wrote the placement drawing to {out}\n")
    svg = out.read_text()
    assert "<svg" in svg and all(f"<title>{c.id}</title>" in svg for c in ds_report.calls)


def test_explain_graph_without_graphviz(ds_path, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert main(["explain", str(ds_path), "--target", SEED, "--graph", str(tmp_path / "p.svg")]) == 1
    got = capsys.readouterr()
    assert got.out == ""
    assert got.err == ("plait: error: drawing needs graphviz's 'dot' program (apt install graphviz); "
                       "write a .dot file instead\n")


BAD_FLAGS = [
    (["--objective", "fast"], "unknown objective 'fast': expected latency, energy or weighted"),
    (["--objective", "weighted", "--weight", "1.5"],
     "weight must be between 0 and 1 (weighted = weight x us + (1 - weight) x mJ), got 1.5"),
    (["--weight", "abc"], "weight must be between 0 and 1 (weighted = weight x us + (1 - weight) x mJ), got 'abc'"),
    (["--place", "Conv"], "--place: rule 'Conv' has no '=': expected PATTERN=PIECE or PATTERN=PIECE?"),
    (["--place", ""], "--place: empty rule list; expected PATTERN=PIECE[,PATTERN=PIECE...]"),
    (["--place", "Conv=inference_cp"], "--place: rule 'Conv=inference_cp': unknown piece 'inference_cp'; did you "
                                       "mean 'inference_cpu'? (pieces: low_power_cpu, inference_cpu)"),
    (["--graph", "p.jpeg"], "--graph: cannot draw to 'p.jpeg': expected a .svg, .png, .pdf or .dot file"),
]


@pytest.mark.parametrize("cmd, flags, message", [(cmd, f, m) for cmd in ("explain", "compile", "run")
                                                 for f, m in BAD_FLAGS if cmd == "explain" or f[0] != "--graph"])
def test_bad_placement_flags_exit_2(ds_path, tmp_path, capsys, cmd, flags, message):
    extra = ["-o", str(tmp_path / "out")] if cmd == "compile" else []
    assert main([cmd, str(ds_path), "--target", SEED, *flags, *extra]) == 2
    got = capsys.readouterr()
    assert (got.out, got.err) == ("", f"plait: error: {message}\n")
    assert not (tmp_path / "out").exists()


def test_bad_target_and_flags_without_target(ds_path, capsys):
    assert main(["explain", str(ds_path), "--target", "a: nosuchkind"]) == 2
    assert capsys.readouterr().err == ("plait: error: composite target: piece 'a': unknown target kind or tag "
                                       "'nosuchkind'\n")
    assert main(["run", str(ds_path), "--place", "Conv=a", "--objective", "energy"]) == 2
    assert capsys.readouterr().err == ("plait: error: --objective and --place need --target: placement chooses "
                                       "among the pieces of a compiled target\n")
    assert main(["run", str(ds_path), "--weight", "0.2"]) == 2
    assert capsys.readouterr().err == ("plait: error: --weight needs --target: placement chooses among the pieces "
                                       "of a compiled target\n")
    with pytest.raises(SystemExit) as e:  # argparse: a missing required flag
        main(["explain", str(ds_path)])
    assert e.value.code == 2
    assert "the following arguments are required: --target" in capsys.readouterr().err


def test_bad_flag_exit_code_in_a_process(ds_path):
    r = subprocess.run([sys.executable, "-m", "plait.cli", "explain", str(ds_path), "--target", SEED,
                        "--place", "=cpu"], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", "plait: error: --place: rule '=cpu' has an empty pattern\n")
    r = subprocess.run([sys.executable, "-m", "plait.cli", "explain", str(ds_path), "--target", SEED, "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["calls"]) == 31  # nothing else on stdout (no solver banner)


def test_compile_exports_the_artifact(mlp_path, tmp_path, capsys):
    out = tmp_path / "mlp_c"
    assert main(["compile", str(mlp_path), "--target", "c", "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"wrote {out}: graph.json, lib.so, manifest.json, params.npz"
    assert re.fullmatch(r"memory: \d+ bytes at peak \(params 848, pools \d+, lower bound \d+\)", lines[-2])
    art = GraphArtifact.load(out)
    x = np.random.default_rng(1).standard_normal((1, 8)).astype(np.float32)
    (y,) = GraphModule(art)(x=x)
    np.testing.assert_allclose(y, run(from_onnx(onnx.load(str(mlp_path))), {"x": x}), rtol=1e-5, atol=1e-6)


def test_run_on_a_composite_target_prints_the_placement(ds_path, ds_report, tmp_path, capsys):
    x = np.random.default_rng(3).standard_normal((1, 1, 49, 10)).astype(np.float32)
    np.savez(tmp_path / "in.npz", input=x)
    out_path = tmp_path / "out.npz"
    assert main(["run", str(ds_path), "--target", SEED, "--place", "/fc/*=low_power_cpu",
                 "--inputs", str(tmp_path / "in.npz"), "--output", str(out_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    counts = ds_report.per_piece()  # explain and build place the same way
    # the head's gemm is pinned to the M0; the flatten before it, a view that costs nothing anywhere, goes with it
    assert counts == {"low_power_cpu": 3, "inference_cpu": 28}
    assert lines[0].startswith("placement (latency, ilp (optimal)): low_power_cpu 3 calls, inference_cpu 28 calls; "
                               "transfers ")
    assert lines[1] == ds_report.summary().splitlines()[1]
    assert lines[2] == f"wrote 1 output(s) to {out_path}: logits"
    with np.load(out_path) as data:
        expected = run(load_onnx(str(ds_path)), {"input": x})
        np.testing.assert_allclose(data["logits"], expected, rtol=1e-4, atol=1e-5)


def test_compile_on_a_composite_target(ds_path, tmp_path, capsys):
    out = tmp_path / "ds"
    roomy = SEED.replace("cortex-m0", "cortex-m0 -ram-kb=64")  # the pooled 32,000-byte value needs more than 16 KiB
    assert main(["compile", str(ds_path), "--target", roomy, "--objective", "energy", "--place",
                 "/pool/*=low_power_cpu", "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("placement (energy, ilp (optimal)): low_power_cpu ")
    assert lines[1].startswith("weights in memory: low_power_cpu ")
    assert re.fullmatch(r"memory: \d+ bytes at peak \(params 90416, pools \d+, lower bound \d+\)", lines[2])
    files = lines[3].split(": ", 1)[1].split(", ")
    assert lines[3].startswith(f"wrote {out}: ")
    assert sorted(files) == sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
    assert {"graph.json", "params.npz"} <= set(files)
    graph = json.loads((out / "graph.json").read_text())
    assert any(n.get("op") == "copy" for n in graph["nodes"])  # the pooled value crosses to the M0
