"""docs/executors.md's executor guide runs: its plugin block is installed as the module plait_trace (a
module plus a .dist-info with the guide's entry point, on a path), then found through the entry point by
``plait executors``, ``plait run --help`` and ``plait run --executor trace``, and its Python example runs;
the traced run's outputs equal the graph executor's bit for bit. No file of plait/ is edited for it."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "executors.md"
ROOT = DOC.parents[1]
PLUGIN_MARK = "<!-- not run: installed as the plugin module plait_trace by tests/test_executors_guide.py -->"
USE_MARK = "<!-- not run: needs the plugin module plait_trace; tests/test_executors_guide.py runs it -->"


def block_after(text: str, mark: str, lang: str = "python") -> str:
    (src,) = re.findall(re.escape(mark) + rf"\n```{lang}\n(.*?)^```$", text, flags=re.S | re.M)
    return src


def entry_point(text: str) -> str:
    (toml,) = [b for b in re.findall(r"^```toml\n(.*?)^```$", text, flags=re.S | re.M) if "plait.executors" in b]
    (line,) = [ln for ln in toml.splitlines() if ln.startswith("trace = ")]
    return line.replace('"', "")


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    """The guide's plugin installed on a fresh path: plait_trace.py plus its .dist-info."""
    where = tmp_path_factory.mktemp("plugin")
    text = DOC.read_text(encoding="utf-8")
    (where / "plait_trace.py").write_text(block_after(text, PLUGIN_MARK))
    dist = where / "plait_trace-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plait-trace\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[plait.executors]\n{entry_point(text)}\n")
    return where


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    from plait.testing import onnx_models

    path = tmp_path_factory.mktemp("model") / "mlp.onnx"
    onnx.save(onnx_models.mlp(sizes=(8, 16, 4)), str(path))
    return path


@pytest.fixture(scope="module")
def graph_calls(model, tmp_path_factory) -> list[str]:
    """The names of the calls the graph executor runs for the model, in order."""
    import plait

    art = plait.build(plait.load_onnx(str(model)), "c", config={"cc.cache_dir": str(tmp_path_factory.mktemp("cc"))})
    return [n["name"] for n in art.graph["nodes"] if n["op"] == "call"]


def plait_cli(plugin: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "plait.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_the_guide_is_one_small_class_file_and_one_entry_point():
    text = DOC.read_text(encoding="utf-8")
    src = block_after(text, PLUGIN_MARK)
    assert len(src.splitlines()) <= 40
    assert "class TracingExecutor(Executor):" in src and "def codegen(self, lowered, built, composite, ctx):" in src
    assert entry_point(text) == "trace = plait_trace:TracingExecutor"


def test_plait_executors_lists_the_plugin_with_its_capabilities_and_flag(plugin):
    r = plait_cli(plugin, "executors")
    assert r.returncode == 0, r.stderr
    block = r.stdout[r.stdout.index("trace: "):]
    assert block.splitlines()[:3] == ["trace: the graph executor, printing each call",
                                      "  capabilities: runs_in_process", "  flags: --trace-prefix (run)"]


def test_its_flag_is_in_plait_run_help(plugin):
    r = plait_cli(plugin, "run", "--help")
    assert r.returncode == 0, r.stderr
    assert "--trace-prefix" in r.stdout and "--executor trace: each line's prefix" in " ".join(r.stdout.split())


def test_plait_run_traces_every_call_and_gives_the_graph_executors_outputs(plugin, model, graph_calls, tmp_path):
    cache = str(tmp_path / "cc")
    r = plait_cli(plugin, "run", str(model), "--executor", "trace", "--trace-prefix", "T ", "--fill", "ones",
                  "--cache-dir", cache, "--output", str(tmp_path / "t.npz"))
    assert r.returncode == 0, r.stderr
    calls = [ln for ln in r.stdout.splitlines() if ln.startswith("T ")]
    assert [ln.split(" -> ")[0] for ln in calls] == [f"T {n}" for n in graph_calls], r.stdout
    g = plait_cli(plugin, "run", str(model), "--target", "c", "--fill", "ones", "--cache-dir", cache,
                  "--output", str(tmp_path / "g.npz"))
    assert g.returncode == 0, g.stderr
    traced, graph = np.load(tmp_path / "t.npz"), np.load(tmp_path / "g.npz")
    assert sorted(traced) == sorted(graph) and all(np.array_equal(traced[k], graph[k]) for k in graph)


def test_another_executor_refuses_its_flag(plugin, model):
    r = plait_cli(plugin, "run", str(model), "--target", "c", "--trace-prefix", "T ", "--fill", "ones")
    assert r.returncode != 0
    assert "--trace-prefix needs --executor trace" in r.stderr


def test_the_python_example_runs(plugin, model, graph_calls):
    text = DOC.read_text(encoding="utf-8")
    prelude = ("import numpy as np, plait\n"
               f"mod = plait.load_onnx({str(model)!r})\n"
               "x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)\n")
    src = prelude + block_after(text, USE_MARK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), str(ROOT)])}
    r = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    assert [ln.split(" -> ")[0] for ln in r.stdout.splitlines()] == [f"call {n}" for n in graph_calls]
