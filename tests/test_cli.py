"""The `plait` command: show, run, ops. Other tools script against these; keep them stable."""

import subprocess
import sys

import numpy as np
import onnx
import pytest

from plait.cli import main
from plait.frontend.onnx import from_onnx
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
