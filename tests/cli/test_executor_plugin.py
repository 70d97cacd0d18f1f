"""An executor is one class and its registration (issue 28): a tracing executor defined here, with no edit
to plait/cli/ or plait/driver.py, builds through plait.build, runs through `plait run --executor trace`,
shows its own flag in `plait run --help`, is listed by `plait executors`, and its flag is refused with
another executor. Capabilities, not names, decide what the CLI and the driver allow."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.cli import main
from plait.errors import PlaitError
from plait.executor import EXECUTORS, Capabilities, Executor, Flag, executors, get_executor, register_executor
from plait.executor.graph.artifact import graph_executor_codegen
from plait.executor.graph.module import GraphModule
from plait.frontend.onnx import from_onnx
from plait.testing import onnx_models


class TracingModule:
    """Runs a graph artifact and prints each call it made (name and runtime function)."""

    def __init__(self, art, prefix: str):
        self.gm, self.prefix = GraphModule(art), prefix
        self.output_names = self.gm.output_names

    def __call__(self, **inputs):
        outs = self.gm(**inputs)
        for row in self.gm.profile(repeat=1):
            print(f"{self.prefix}{row['name']} -> {row['func']}")
        return outs


class TracingExecutor(Executor):
    name = "trace"
    summary = "the graph executor, printing each call"
    capabilities = Capabilities(runs_in_process=True, exports=False)
    flags = (Flag("run", ("--trace-prefix",), {"default": "call ", "help": "--executor trace: each line's prefix"}),)

    def codegen(self, lowered, built, composite, ctx):
        return graph_executor_codegen(lowered, built, composite)

    def runner(self, art, options):
        options.progress("tracing")
        return TracingModule(art, options.flag("trace_prefix", "call "))


@pytest.fixture
def tracing():
    saved = EXECUTORS.snapshot()
    register_executor(TracingExecutor)
    yield get_executor("trace")
    EXECUTORS.restore(saved)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


def test_build_with_a_registered_executor_runs_its_codegen(tracing, cache):
    model = onnx_models.mlp(sizes=(8, 16, 4))
    art = plait.build(from_onnx(model), "c", executor="trace", config={"cc.cache_dir": cache})
    x = np.random.default_rng(0).standard_normal((1, 8)).astype(np.float32)
    (want,) = GraphModule(plait.build(from_onnx(model), "c", config={"cc.cache_dir": cache}))(x=x)
    (got,) = TracingModule(art, "")(x=x)
    assert np.array_equal(got, want)


def test_cli_runs_the_plugin_executor_with_its_own_flag(tracing, mlp_path, tmp_path, cache, capsys):
    assert main(["run", mlp_path, "--executor", "trace", "--trace-prefix", "T ", "--cache-dir", cache,
                 "--fill", "ones", "--output", str(tmp_path / "o.npz")]) == 0
    out = capsys.readouterr().out.splitlines()
    calls = [line for line in out if line.startswith("T ")]
    assert calls and all(" -> " in line for line in calls)
    assert out[-1] == f"wrote 1 output(s) to {tmp_path / 'o.npz'}: y"
    assert main(["run", mlp_path, "--target", "c", "--cache-dir", cache, "--fill", "ones",
                 "--output", str(tmp_path / "g.npz")]) == 0
    capsys.readouterr()
    assert np.array_equal(np.load(tmp_path / "o.npz")["y"], np.load(tmp_path / "g.npz")["y"])


def test_its_flag_is_in_the_help_and_refused_with_another_executor(tracing, mlp_path, capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    assert "--trace-prefix" in text and "trace: the graph executor, printing each call" in " ".join(text.split())
    assert main(["run", mlp_path, "--executor", "graph", "--trace-prefix", "x"]) == 2
    assert capsys.readouterr().err == "plait: error: --trace-prefix needs --executor trace\n"


def test_capabilities_decide_what_the_cli_allows(tracing, mlp_path, capsys):
    assert main(["run", mlp_path, "--executor", "trace", "--profile"]) == 2
    assert capsys.readouterr().err == "plait: error: --profile needs --executor graph\n"
    assert main(["compile", mlp_path, "--executor", "trace", "-o", "out"]) == 2
    assert capsys.readouterr().err == ("plait: error: the trace executor's artifacts cannot be exported; plait "
                                       "compile takes --executor graph, aot, vm\n")


def test_plait_executors_lists_every_executor_with_capabilities_and_flags(tracing, capsys):
    assert main(["executors"]) == 0
    out = capsys.readouterr().out
    names = [e.name for e in executors()]
    assert names[:3] == ["graph", "aot", "vm"] and "trace" in names  # in-tree first, in MANIFEST order
    assert out.startswith("graph: JSON graph + params + library, run in process (the default)\n"
                          "  capabilities: runs_in_process, exports, profiles\n  flags: none\n")
    assert "vm: bytecode with control flow (If, Loop) and symbolic shapes, run in process\n" \
           "  capabilities: symbolic_shapes, control_flow, runs_in_process, exports\n" \
           "  flags: --print (compile)\n" in out
    assert ("trace: the graph executor, printing each call\n  capabilities: runs_in_process\n"
            "  flags: --trace-prefix (run)\n") in out


def test_a_symbolic_input_needs_an_executor_with_the_capability(tracing):
    from onnx import TensorProto, helper

    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    mod = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(PlaitError, match=r"the trace executor needs static shapes.*executor='vm'"):
        plait.build(mod, "c", executor="trace")


def test_bad_registrations_are_clear_errors():
    class NoCodegen(Executor):
        name = "nocodegen"

    class BadName(TracingExecutor):
        name = "not a name"

    with pytest.raises(PlaitError) as e:
        register_executor(object())
    assert str(e.value) == "an executor must be an instance of plait.executor.Executor, got object"
    with pytest.raises(PlaitError) as e:
        register_executor(NoCodegen)
    assert str(e.value) == "executor 'nocodegen' (NoCodegen) does not implement codegen"
    with pytest.raises(PlaitError) as e:
        register_executor(BadName)
    assert str(e.value) == "executor BadName: its name must be an identifier, got 'not a name'"
    with pytest.raises(PlaitError) as e:
        get_executor("grpah")
    assert str(e.value) == "unknown executor 'grpah'; did you mean 'graph'?"
