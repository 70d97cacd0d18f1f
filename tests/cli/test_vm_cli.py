"""plait run --executor vm: the same outputs as the graph executor; plait compile --executor vm exports a VM
artifact (--print shows its bytecode) and plait run DIR runs it."""

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


def test_run_vm_times_and_print_needs_the_vm(mlp_path, tmp_path, cache, capsys):
    assert main(["run", mlp_path, "--executor", "vm", "--cache-dir", cache, "--fill", "ones", "--repeat", "2",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert doc["executor"] == "vm" and doc["runs"] == 2
    assert main(["compile", mlp_path, "--print", "-o", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == "plait: error: --print needs --executor vm (it prints the VM's bytecode)\n"
    assert main(["compile", mlp_path, "--executor", "vm"]) == 2
    assert capsys.readouterr().err == ("plait: error: -o/--output is required (the directory to write the artifact "
                                       "into)\n")


def test_compile_vm_prints_exports_and_run_dir_runs_it(tmp_path, cache, capsys):
    import onnx

    from tests.executor.test_vm_control import onnx_loop_model

    model_path = tmp_path / "loop.onnx"
    onnx.save(onnx_loop_model(with_cond=True), model_path)
    out = tmp_path / "art"
    assert main(["compile", str(model_path), "--executor", "vm", "--print", "--cache-dir", cache, "-o", str(out)]) == 0
    got = capsys.readouterr()
    assert got.out.startswith("# vm: 13 instructions, 11 registers, 1 constants\n")
    assert "  call %9 = fused_multiply_add(%8, %1)  # fused_multiply_add @c\n" in got.out  # the body is fused
    assert "loop %4, %5 = trip %0 cond %3 init (%1) scan 1 body(%6, %7, %8) {\n" in got.out
    assert got.out.endswith(f"wrote {out}: lib.so, manifest.json, params.npz, vm.json\n")
    feeds = {"M": np.array(5, np.int64), "x": np.full((2, 3), 0.5, np.float32), "limit": np.array(4.0, np.float32)}
    np.savez(tmp_path / "in.npz", **feeds)  # scalars stay scalars
    assert main(["run", str(out), "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "o.npz")]) == 0
    capsys.readouterr()
    from plait.testing.ort_reference import reference_session

    sess = reference_session(onnx_loop_model(with_cond=True))
    got_outs = np.load(tmp_path / "o.npz")
    for name, want in zip(("s_final", "scans"), sess.run(None, feeds)):
        np.testing.assert_allclose(got_outs[name], want, rtol=1e-6)
    assert main(["run", str(out), "--profile", "--fill", "ones"]) == 2
    assert capsys.readouterr().err == f"plait: error: --profile needs a graph artifact; '{out}' is a VM artifact\n"
