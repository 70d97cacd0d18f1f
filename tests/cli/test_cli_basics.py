"""plait --version, the global -v/-q flags, `plait ops` with ONNX names, and the progress display."""

import io
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

import plait
from plait.cli import main
from plait.cli import messages
from plait.cli.progress import Progress, display
from plait.frontend.onnx import load_onnx

from .conftest import RANDOM_X

ROOT = Path(__file__).resolve().parents[2]
SEED = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"


# ---- --version ---------------------------------------------------------------------------------------


def test_version_agrees_with_pyproject():
    with open(ROOT / "pyproject.toml", "rb") as f:
        assert plait.__version__ == tomllib.load(f)["project"]["version"]


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"plait {plait.__version__}\n"
    r = subprocess.run([sys.executable, "-m", "plait.cli", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert (r.returncode, r.stdout, r.stderr) == (0, f"plait {plait.__version__}\n", "")


# ---- messages and verbosity ------------------------------------------------------------------------------


@pytest.fixture
def level():
    yield messages.set_verbosity
    messages.set_verbosity(messages.NORMAL)


def test_note_info_detail_by_level(level, capsys):
    for lv in (messages.QUIET, messages.NORMAL, messages.VERBOSE):
        level(lv)
        messages.note("inputs are random\n(seed 0)")
        messages.info("placement summary")
        messages.detail("stage lower: 1 ms")
        messages.say("wrote x")
    got = capsys.readouterr()
    assert got.err == ("plait: note: inputs are random; (seed 0)\nplait: placement summary\n"
                       "plait: note: inputs are random; (seed 0)\nplait: placement summary\nplait: stage lower: 1 ms\n")
    assert got.out == "wrote x\nwrote x\n"


def test_verbose_and_quiet_together_is_a_usage_error(mlp_path, capsys):
    assert main(["-v", "run", "-q", mlp_path]) == 2
    assert capsys.readouterr().err == "plait: error: -v/--verbose and -q/--quiet cannot be used together\n"


def test_main_resets_the_level(mlp_path, tmp_path, capsys):
    assert main(["-q", "run", mlp_path, "--output", str(tmp_path / "o.npz")]) == 0
    assert main(["run", mlp_path, "--output", str(tmp_path / "o.npz")]) == 0
    assert capsys.readouterr().out == f"wrote 1 output(s) to {tmp_path / 'o.npz'}: y\n"
    assert messages.verbosity() == messages.NORMAL


STAGE = re.compile(r"plait: stage ([a-z_]+): \d+\.\d (ms|s)")


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_lists_cache_entries_and_stage_times(mlp_path, tmp_path, capsys, where):
    cache = tmp_path / "cc"
    argv = ["run", mlp_path, "--target", "c", "--cache-dir", str(cache)]
    argv = ["-v", *argv] if where == "before" else [*argv, "-v"]
    art = plait.build(load_onnx(mlp_path), "c", config={"cc.cache_dir": str(tmp_path / "other")})
    for what in ("built", "hit"):
        assert main(argv) == 0
        got = capsys.readouterr()
        assert got.out.startswith("y: float32[1, 4]\n[[")
        lines = got.err.splitlines()
        entry = next(cache.glob("*.so"))
        assert lines[0] == f"plait: compile cache: {what} module ({entry})"
        stages = [STAGE.fullmatch(ln) for ln in lines[1:-2]]
        assert all(stages), lines
        assert [m.group(1) for m in stages] == [name for name, _ in art.timings[:-1]]
        assert re.fullmatch(r"plait: build total: \d+\.\d+ (ms|s)", lines[-2])
        assert lines[-1] + "\n" == RANDOM_X  # then the note, once the model is ready to run


def test_quiet_drops_confirmations_placement_and_warnings(mlp_path, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    bad = tmp_path / "file" / "cc"  # an unusable cache directory: a warning without -q
    out = tmp_path / "o.npz"
    assert main(["-q", "run", mlp_path, "--target", SEED, "--cache-dir", str(bad), "--output", str(out)]) == 0
    assert capsys.readouterr() == ("", "")
    with np.load(out) as data:
        assert data.files == ["y"]
    assert main(["compile", mlp_path, "--target", SEED, "-o", str(tmp_path / "art"), "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    assert (tmp_path / "art" / "graph.json").is_file()
    assert main(["compile", mlp_path, "--target", SEED, "-o", str(tmp_path / "art2")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(" ")[0] for ln in lines] == ["placement", "weights", "memory:", "wrote"]


def test_quiet_keeps_results(mlp_path, capsys):
    assert main(["run", mlp_path]) == 0
    normal = capsys.readouterr()
    assert main(["run", "-q", mlp_path]) == 0
    assert capsys.readouterr() == (normal.out, "")  # the same result, without the note
    assert normal.out.startswith("y: float32[1, 4]\n[[")
    assert normal.err == RANDOM_X


# ---- plait ops NAME with ONNX names --------------------------------------------------------------------


def test_ops_onnx_name_shows_what_it_imports_to(capsys):
    assert main(["ops", "nn.conv2d"]) == 0
    detail = capsys.readouterr().out
    assert main(["ops", "Conv"]) == 0
    assert capsys.readouterr().out == (
        "ONNX Conv imports to: nn.conv2d, squeeze, add, reshape, expand_dims (the first; the others for some "
        "attributes, types or shapes)\n\n" + detail)
    assert detail.startswith("nn.conv2d  [out_elemwise_fusable]  inputs: 2\n")
    assert main(["ops", "Relu"]) == 0
    assert capsys.readouterr().out == "ONNX Relu imports to: nn.relu\n\nnn.relu  [elemwise]  inputs: 1\n  max(x, 0)\n"
    assert main(["ops", "ReduceMean"]) == 0
    assert capsys.readouterr().out.startswith("ONNX ReduceMean imports to: mean\n\nmean  [")
    assert main(["ops", "Identity"]) == 0
    assert capsys.readouterr().out == ("ONNX Identity imports to no plait operator of its own (a constant, an "
                                       "input passed on, or IR structure)\n")


@pytest.mark.parametrize("name, message", [
    ("Cnv", "unknown operator 'Cnv'; did you mean 'Conv'?"),
    ("nn.conv", "unknown operator 'nn.conv'; did you mean 'nn.conv2d' or 'qnn.conv2d' or 'nn.lrn'?"),
    ("Sofmax", "unknown operator 'Sofmax'; did you mean 'Softmax' or 'LogSoftmax' or 'max'?"),
    ("xyzzy", "unknown operator 'xyzzy': neither a plait nor an ONNX operator name"),
])
def test_ops_unknown_name_suggests_plait_and_onnx_names(capsys, name, message):
    assert main(["ops", name]) == 1
    assert capsys.readouterr() == ("", f"plait: error: {message}\n")


# ---- progress --------------------------------------------------------------------------------------------


def fake_console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=True, width=100), buf


class Record:
    def __init__(self):
        self.names = []

    def before(self, p, mod):
        self.names.append(p.name)


def test_progress_stages_follow_the_build_passes(mlp_path, tmp_path):
    console, buf = fake_console()
    record = Record()
    with Progress("compile", console=console, delay=0) as progress:
        plait.build(load_onnx(mlp_path), "c", config={"cc.cache_dir": str(tmp_path)}, instruments=[progress, record])
    assert progress.stages == [f"building: {n}" for n in record.names]
    assert progress.stages[:4] == ["building: infer_type", "building: qdq_to_integer", "building: fold_constant",
                                   "building: fold_batch_norm"]
    text = buf.getvalue()
    assert "plait compile: building: " in text
    assert text.endswith("\x1b[2K")  # transient: the line is erased at the end


def test_progress_line_hides_when_stdout_is_written(capsys):
    console, buf = fake_console()
    with Progress("run", console=console, delay=0) as progress:
        progress.stage("building: lower")
        assert progress._live is not None
        print("result")
        assert progress._live is None  # erased before the result
        progress.stage("running")
        assert progress._live is not None
    assert progress._live is None and progress.stages == ["building: lower", "running"]
    assert capsys.readouterr().out == "result\n"
    assert "plait run: running" in buf.getvalue()


def test_progress_waits_for_its_delay():
    console, buf = fake_console()
    with Progress("run", console=console, delay=60) as progress:
        progress.stage("building: lower")
    assert buf.getvalue() == "" and progress.stages == ["building: lower"]


def test_no_progress_when_not_a_terminal_or_quiet(mlp_path, tmp_path, capsys, level):
    with display("run") as progress:  # stderr is not a terminal under pytest
        assert not progress.enabled
    level(messages.QUIET)
    with display("run", enabled=None) as progress:
        assert not progress.enabled
    level(messages.NORMAL)
    assert main(["run", mlp_path, "--target", "c", "--cache-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().err == RANDOM_X  # the note only: no progress line
