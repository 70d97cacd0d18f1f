"""`plait run DIR`: a directory written by `plait compile -o` runs with the graph executor, with the
contract of running a model (--inputs, --output, --seed, --fill, --max-memory); bad directories and
building flags give one exact line."""

import shutil

import numpy as np
import pytest

from plait.cli import main
from plait.limits import format_bytes

from .conftest import RANDOM_X

X = np.random.default_rng(11).standard_normal((1, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def exported(mlp_path, tmp_path_factory):
    """The bundled mlp (plait.testing.onnx_models) compiled by `plait compile -o`."""
    out = tmp_path_factory.mktemp("art") / "out"
    assert main(["compile", mlp_path, "-o", str(out)]) == 0
    return out


def outputs(path):
    with np.load(path) as d:
        return {k: d[k] for k in d.files}


def test_artifact_equals_the_interpreter_on_given_inputs(exported, mlp_path, tmp_path, capsys):
    capsys.readouterr()
    np.savez(tmp_path / "in.npz", x=X)
    a, b = tmp_path / "art.npz", tmp_path / "ref.npz"
    assert main(["run", str(exported), "--inputs", str(tmp_path / "in.npz"), "--output", str(a)]) == 0
    assert capsys.readouterr() == (f"wrote 1 output(s) to {a}: y\n", "")
    assert main(["run", mlp_path, "--inputs", str(tmp_path / "in.npz"), "--output", str(b)]) == 0
    got, ref = outputs(a), outputs(b)
    assert list(got) == ["y"]
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-5, atol=1e-6)


def test_artifact_random_inputs_are_the_models(exported, mlp_path, tmp_path, capsys):
    capsys.readouterr()
    a, b = tmp_path / "art.npz", tmp_path / "ref.npz"
    assert main(["run", str(exported), "--seed", "3", "--output", str(a)]) == 0
    assert capsys.readouterr().err == RANDOM_X.replace("seed 0", "seed 3")
    assert main(["run", mlp_path, "--seed", "3", "--output", str(b)]) == 0
    np.testing.assert_allclose(outputs(a)["y"], outputs(b)["y"], rtol=1e-5, atol=1e-6)


def test_artifact_prints_outputs_and_fills(exported, mlp_path, capsys):
    capsys.readouterr()
    assert main(["run", str(exported), "--fill", "zeros"]) == 0
    art = capsys.readouterr()
    assert art.err == ""
    assert main(["run", mlp_path, "--fill", "zeros"]) == 0
    ref = capsys.readouterr()
    assert art.out.splitlines()[0] == ref.out.splitlines()[0] == "y: float32[1, 4]"


@pytest.mark.parametrize("flags,named", [
    (["--target", "c"], "--target"),
    (["--place", "*=c", "--cache-dir", "cc"], "--place and --cache-dir"),
    (["--objective", "energy"], "--objective"),
])
def test_building_flags_are_a_usage_error(exported, capsys, flags, named):
    capsys.readouterr()
    assert main(["run", str(exported), *flags]) == 2
    assert capsys.readouterr() == ("", f"plait: error: {named} cannot be used with '{exported}': an exported artifact "
                                       "is already built (for the target it was compiled for); give a model file to "
                                       "build it again\n")


def test_a_directory_that_is_not_an_artifact(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    assert main(["run", str(tmp_path / "out")]) == 1
    assert capsys.readouterr() == ("", f"plait: error: '{tmp_path / 'out'}' is a directory but not an exported "
                                       "artifact (no manifest.json); run a model file, or a directory written by "
                                       "plait compile -o\n")


def test_tampered_and_half_exported_artifacts(exported, tmp_path, capsys):
    bad = tmp_path / "bad"
    shutil.copytree(exported, bad)
    size = (bad / "params.npz").stat().st_size
    with open(bad / "params.npz", "ab") as f:
        f.write(b"x")
    capsys.readouterr()
    assert main(["run", str(bad)]) == 1
    assert capsys.readouterr() == ("", f"plait: error: cannot load graph artifact '{bad}': params.npz is {size + 1} "
                                       f"bytes, the manifest says {size} (the file was changed or truncated after "
                                       "export)\n")
    old = tmp_path / "old"
    shutil.copytree(exported, old)
    (old / "manifest.json").unlink()
    assert main(["run", str(old)]) == 1
    assert capsys.readouterr().err == (f"plait: error: cannot load graph artifact '{old}': no manifest.json (it was "
                                       "exported by an older plait or the export did not finish: export it again)\n")


def test_artifact_input_errors_and_memory_limit(exported, tmp_path, capsys):
    np.savez(tmp_path / "z.npz", z=X)
    np.savez(tmp_path / "x64.npz", x=X.astype(np.float64))
    capsys.readouterr()
    assert main(["run", str(exported), "--inputs", str(tmp_path / "z.npz")]) == 1
    assert capsys.readouterr().err == "plait: error: unknown input 'z' (inputs are: x)\n"
    assert main(["run", str(exported), "--inputs", str(tmp_path / "x64.npz")]) == 1
    assert capsys.readouterr().err == "plait: error: input 'x': expected dtype float32, got float64\n"
    size = (exported / "manifest.json").stat().st_size
    assert main(["run", str(exported), "--max-memory", "100B"]) == 1
    assert capsys.readouterr().err == (f"plait: error: '{exported / 'manifest.json'}' needs {format_bytes(size)} "
                                       f"({size} bytes), more than the memory limit of 100 B; raise it with "
                                       "--max-memory or the config key 'memory.limit'\n")


def test_an_artifact_for_another_device_says_how_to_simulate(mlp_path, tmp_path, capsys):
    out = tmp_path / "cm"
    assert main(["compile", mlp_path, "--target", "c -mcpu=cortex-m0", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["run", str(out)]) == 1
    assert capsys.readouterr() == ("", f"plait: error: '{out}' was compiled for another device (target 'c "
                                       "-mcpu=cortex-m0'; its library is C source for that device), which this "
                                       "machine cannot run; to simulate it here, run the model with plait run MODEL "
                                       "--target 'c -mcpu=cortex-m0'\n")
