"""plait run --executor vm: the same outputs as the graph executor; compile --executor vm is refused (no export yet)."""

import json

import numpy as np
import pytest

from plait.cli import main


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


def test_run_vm_gives_the_graph_executors_outputs(mlp_path, tmp_path, cache, capsys):
    x = np.random.default_rng(3).standard_normal((1, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    for executor, out in (("vm", "v.npz"), ("graph", "g.npz")):
        assert main(["run", mlp_path, "--target", "c", "--executor", executor, "--cache-dir", cache,
                     "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / out)]) == 0
        got = capsys.readouterr()
        assert got.out == f"wrote 1 output(s) to {tmp_path / out}: y\n" and got.err == ""
    v, g = np.load(tmp_path / "v.npz"), np.load(tmp_path / "g.npz")
    assert list(v) == ["y"] and np.array_equal(v["y"], g["y"])


def test_run_vm_times_and_compile_vm_is_refused(mlp_path, tmp_path, cache, capsys):
    assert main(["run", mlp_path, "--executor", "vm", "--cache-dir", cache, "--fill", "ones", "--repeat", "2",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert doc["executor"] == "vm" and doc["runs"] == 2
    assert main(["compile", mlp_path, "--executor", "vm", "-o", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == ("plait: error: --executor vm: a VM executable cannot be exported yet; "
                                       "run it with plait run --executor vm\n")
