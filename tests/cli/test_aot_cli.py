"""plait run/compile --executor aot: the same contract as the graph executor, the AOT directory and its
memory summary, and the usage errors of its flags."""

import json

import numpy as np
import pytest

from plait.cli import main


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


def test_run_aot_gives_the_graph_executors_outputs(mlp_path, tmp_path, cache, capsys):
    x = np.random.default_rng(3).standard_normal((1, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    for executor, out in (("aot", "a.npz"), ("graph", "g.npz")):
        assert main(["run", mlp_path, "--target", "c", "--executor", executor, "--cache-dir", cache,
                     "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / out)]) == 0
        got = capsys.readouterr()
        assert got.out == f"wrote 1 output(s) to {tmp_path / out}: y\n" and got.err == ""
    a, g = np.load(tmp_path / "a.npz"), np.load(tmp_path / "g.npz")
    assert list(a) == ["y"] and np.array_equal(a["y"], g["y"])


def test_run_aot_without_target_compiles_for_c_and_times(mlp_path, cache, capsys):
    assert main(["run", mlp_path, "--executor", "aot", "--cache-dir", cache, "--fill", "ones", "--repeat", "2",
                 "--json"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "y: float32[1, 4]"
    doc = json.loads(out[-1])
    assert doc["executor"] == "aot" and doc["runs"] == 2 and doc["profile"] is None


def test_compile_aot_writes_the_directory_and_the_memory_summary(mlp_path, tmp_path, cache, capsys):
    out = tmp_path / "kws"
    assert main(["compile", mlp_path, "--executor", "aot", "--name", "kws", "--align", "64", "--cache-dir", cache,
                 "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    md = json.loads((out / "metadata.json").read_text())
    mem = json.loads((out / "memory.json").read_text())
    pool = mem["pools"][0]
    assert md["name"] == "kws" and md["align"] == mem["align"] == 64
    assert lines == [
        "memory of 'kws' (AOT):",
        f"  piece 'c': pool 'workspace_c' {pool['bytes']:,} B (lower bound {pool['lower_bound']:,} B, align 64, "
        f"{pool['algorithm']})",
        f"  constants {mem['constant_bytes']:,} B (read-only: flash / .rodata)",
        f"wrote {out}: Makefile, include/plait_kws.h, memory.json, metadata.json, src/plait_kws.c, "
        "src/plait_kws_c_ops.c, src/plait_kws_constants.c, src/plait_kws_device.c, src/plait_kws_internal.h",
    ]
    assert "#define PLAIT_KWS_POOL_ALIGN 64u" in (out / "include" / "plait_kws.h").read_text()


def test_compile_aot_names_the_model_after_its_file(mlp_path, tmp_path, cache, capsys):
    import shutil

    model = tmp_path / "my-model.v2.onnx"
    shutil.copy(mlp_path, model)
    out = tmp_path / "out"
    assert main(["compile", str(model), "--executor", "aot", "--cache-dir", cache, "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "memory of 'my_model_v2' (AOT):"
    assert json.loads((out / "metadata.json").read_text())["name"] == "my_model_v2"
    assert "int32_t plait_my_model_v2_run(" in (out / "include" / "plait_my_model_v2.h").read_text()


@pytest.mark.parametrize("argv, code, message", [
    (["compile", "{m}", "-o", "{d}", "--name", "kws"], 2, "plait: error: --name needs --executor aot\n"),
    (["compile", "{m}", "-o", "{d}", "--name", "kws", "--align", "8"], 2,
     "plait: error: --name and --align need --executor aot\n"),
    (["compile", "{m}", "--executor", "aot", "-o", "{d}", "--align", "12"], 2,
     "plait: error: --align: expected a power of two, got 12\n"),
    (["run", "{m}", "--executor", "aot", "--profile"], 2,
     "plait: error: --profile needs --executor graph: the AOT entry point runs the whole model in one call\n"),
    (["run", "{m}", "--executor", "aot", "--target", "llvm"], 1,
     "plait: error: the AOT executor needs C code for every piece: piece 'llvm' (kind 'llvm') generates its own "
     "code (tir_to_runtime); place its calls on a 'c' piece (--place) or use the graph executor\n"),
])
def test_usage_errors(mlp_path, tmp_path, cache, capsys, argv, code, message):
    argv = [a.format(m=mlp_path, d=tmp_path / "out") for a in argv]
    assert main([*argv, "--cache-dir", cache]) == code
    err = capsys.readouterr().err
    assert err.endswith(message), err
    assert not (tmp_path / "out").exists()
