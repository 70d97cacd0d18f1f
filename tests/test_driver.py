"""plait.build: target resolution, the pipeline as passes, hooks, executors, errors."""

import numpy as np
import pytest

import plait
from plait import relay
from plait.driver import build
from plait.pipeline.codegen import Codegen
from plait.errors import PlaitError
from plait.executor import GraphModule
from plait.ir.transform import PassContext, Timing
from plait.relay import ExprMutator, IRModule
from plait.target import piece_of
from plait.target import Target
from plait.target.testing import isolated_registry, register_test_backend

from tests.executor.lowered import c_module, prim_funcs


def relu_add_model(shape=(2, 3)):
    x = relay.var("x", shape)
    c = relay.const(np.full(shape, 0.5, np.float32))
    y = relay.call("add", relay.call("nn.relu", x, meta={"name": "/relu"}), c, meta={"name": "/add"})
    return IRModule({"main": relay.Function((x,), y)}, attrs={"output_names": ["y"]})


class _ToHandWritten(ExprMutator):
    """A relay_to_tir hook's work: calls of add / nn.relu -> calls of the hand-written PrimFuncs."""

    NAMES = {"add": "add", "nn.relu": "relu"}

    def rewrite_call(self, pre, post):
        return relay.Call(relay.GlobalVar(self.NAMES[post.op_name]), post.args, meta=post.meta)


def lower_my_regions(mod, funcs):
    """The hook contract: replace the region functions placed on the piece being lowered."""
    for name, fn in list(mod.items()):
        if isinstance(fn, relay.Function) and piece_of(fn) == mod.attrs["piece"]:
            mod = mod.with_function(name, relay.Function(fn.params, _ToHandWritten().visit(fn.body), None, fn.attrs))
    for name, f in funcs.items():
        mod = mod.with_function(name, f)
    return mod


@pytest.fixture
def hand_kind(tmp_path):
    """A kind whose hooks lower to hand-written PrimFuncs and build hand-written C."""
    seen = {}
    with isolated_registry():
        def relay_to_tir(mod, target):
            seen["target"] = str(target)
            funcs = prim_funcs()
            return lower_my_regions(mod, {"add": funcs["add"], "relu": funcs["relu"]})

        def tir_to_runtime(mod, target):
            seen["funcs"] = sorted(k for k in mod if k != "main")
            return c_module().compile(cache_dir=tmp_path)

        register_test_backend("handwritten", doc="test kind: hand-written kernels", relay_to_tir=relay_to_tir,
                              tir_to_runtime=tir_to_runtime)
        yield seen


def test_build_with_hooks_runs_the_whole_pipeline(hand_kind):
    timing = Timing()
    art = plait.build(relu_add_model(), target="handwritten", instruments=[timing])
    assert hand_kind == {"target": "handwritten", "funcs": ["add", "relu"]}
    assert art.target == "handwritten"
    names = [n for n, _ in timing.times]
    assert names == ["infer_type", "qdq_to_integer", "fold_constant", "fold_batch_norm", "price", "place", "partition",
                     "handwritten.relay_to_tir", "lower", "lift_workspaces",
                     "plan_memory", "check_memory_fit", "codegen", "codegen_pieces",
                     "graph_executor_codegen"]
    assert [n for n, _ in art.timings][-1] == "total"
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    gm = GraphModule(art)
    assert gm.output_names == ["y"]
    (y,) = gm(x=x)
    np.testing.assert_allclose(y, np.maximum(x, 0) + 0.5, atol=1e-6)
    assert art.graph["nodes"][-1]["name"] == "/add"


def test_build_errors():
    mod = relu_add_model()
    with pytest.raises(PlaitError) as e:
        build(mod, executor="bytecode")
    assert str(e.value) == "unknown executor 'bytecode'"
    with pytest.raises(PlaitError) as e:
        build(mod.main)
    assert str(e.value) == ("plait.build expects an IRModule, got Function; import a model with "
                            "plait.from_onnx(...) or use plait.driver.build_onnx")
    with pytest.raises(PlaitError) as e:
        build(IRModule({}))
    assert str(e.value) == "plait.build: the module has no 'main' function"
    with pytest.raises(PlaitError) as e:
        build(mod, target="c -mcpu=nonsense -foo=1")
    assert "-foo" in str(e.value)


def test_kind_without_code_generator():
    from plait.target import CompositeTarget

    with isolated_registry():
        register_test_backend("nocodegen", doc="test kind: lowers by default, generates nothing",
                              default_codegen=None)
        piece = CompositeTarget("nocodegen").pieces[0]
        with pytest.raises(PlaitError) as e:
            Codegen(piece)(relu_add_model(), PassContext())
    assert str(e.value) == ("target kind 'nocodegen' (piece 'nocodegen') cannot generate code: it has no "
                            "'tir_to_runtime' hook and no default code generation")


def test_cli_run_with_target(hand_kind, tmp_path, capsys):
    from plait.cli import main
    from plait.relay.text import print_module

    path = tmp_path / "m.relay"
    path.write_text(print_module(relu_add_model()), encoding="utf-8")
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.savez(tmp_path / "in.npz", x=x)
    out = tmp_path / "out.npz"
    assert main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--output", str(out),
                 "--target", "handwritten"]) == 0
    assert capsys.readouterr().out == f"wrote 1 output(s) to {out}: y\n"
    with np.load(out) as data:
        np.testing.assert_allclose(data["y"], np.maximum(x, 0) + 0.5, atol=1e-6)
    assert main(["run", str(path), "--target", "handwritten"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("y: float32[2, 3]\n")
    np.savez(tmp_path / "bad.npz", x=x.astype(np.float64))
    assert main(["run", str(path), "--inputs", str(tmp_path / "bad.npz"), "--target", "handwritten"]) == 1
    assert capsys.readouterr().err == "plait: error: input 'x': expected dtype float32, got float64\n"
    assert main(["run", str(path), "--target", "a: c; b: c", "--place", "/relu=b,/add=a"]) == 0
    printed = capsys.readouterr().out
    assert "a 1 call, b 1 call;" in printed
    assert main(["run", str(path), "--target", "a: c; b: c", "--place", "/relu=z"]) == 2
    assert "unknown piece 'z'" in capsys.readouterr().err


def test_cortex_m_build_is_a_cross_module_unless_host_simulated(tmp_path):
    import shutil

    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed (.ci/run installs it)")
    mod = relu_add_model()
    art = build(mod, target="c -mcpu=cortex-m7f", config={"cc.cache_dir": str(tmp_path)})
    assert art.lib.kind == "c-cross" and art.target == str(Target("c -mcpu=cortex-m7f"))
    with pytest.raises(PlaitError) as e:
        GraphModule(art)
    assert "cannot run in this process; build with host_simulation=True" in str(e.value)
    exported = sorted(p.name for p in art.export(tmp_path / "m7").iterdir())
    assert exported == ["graph.json", "lib.c", "lib.o", "manifest.json", "params.npz"]
    sim = build(mod, target="c -mcpu=cortex-m7f", config={"cc.cache_dir": str(tmp_path), "c.host_simulation": True})
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(GraphModule(sim)(x)[0], np.maximum(x, 0) + 0.5, atol=1e-6)


def test_build_for_c_runs_and_instruments_see_default_lowering(tmp_path):
    timing = Timing()
    art = build(relu_add_model(), target="c", config={"cc.cache_dir": str(tmp_path)}, instruments=[timing])
    legal = [p.name for p in Target("c").kind.backend.legalize(Target("c"))]  # (channels_last on VNNI hosts)
    assert [n for n, _ in timing.times] == ["infer_type", "qdq_to_integer", "fold_constant", "fold_batch_norm", "price",
                                            "place", "partition", *legal, "fuse_ops", "lower_to_tir", "lower",
                                            "lift_workspaces", "plan_memory", "check_memory_fit", "codegen", "codegen_pieces", "graph_executor_codegen"]
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    (y,) = GraphModule(art)(x=x)
    np.testing.assert_allclose(y, np.maximum(x, 0) + 0.5, atol=1e-6)
    assert [n["func"] for n in art.graph["nodes"] if n["op"] == "call"] == ["fused_nn_relu_add"]


def test_cli_run_onnx_with_target_c_matches_the_interpreter(tmp_path, capsys):
    import onnx

    from plait.cli import main
    from plait.testing import onnx_models

    path = tmp_path / "mlp.onnx"
    onnx.save(onnx_models.mlp(), str(path))
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    assert main(["run", str(path), "--output", str(a)]) == 0
    assert main(["run", str(path), "--output", str(b), "--target", "c"]) == 0
    assert capsys.readouterr().out == f"wrote 1 output(s) to {a}: y\nwrote 1 output(s) to {b}: y\n"
    with np.load(a) as ref, np.load(b) as got:
        assert got["y"].shape == (1, 10)
        np.testing.assert_allclose(got["y"], ref["y"], rtol=0, atol=1e-5)


def test_region_functions_stay_until_code_generation_and_the_graph_reads_them(tmp_path):
    """Partitioning's region functions are not inlined back into main: lowering turns each into a
    function calling PrimFuncs, and the graph executor serializes a region's calls where main calls it."""
    from plait.driver import _composite, lowered_module
    from plait.lowering.cache import LoweringCache
    from plait.placement import parse_place
    from plait.relay.expr import Call, Function, GlobalVar
    from plait.relay.visitor import post_order
    from plait.tir.stmt import PrimFunc

    target = "a: c; b: c"
    ct = _composite(target)
    with LoweringCache().active():
        low = lowered_module(relu_add_model(), ct, PassContext(), rules=parse_place("/add=b,*=a", ct))
    regions = {k: f for k, f in low.mod.items() if isinstance(f, Function) and f.attrs.get("region")}
    assert sorted(regions) == ["a_0", "b_0"]
    called = [n.op.name for n in post_order(low.mod.main.body) if isinstance(n, Call) and isinstance(n.op, GlobalVar)]
    assert called == ["a_0", "b_0"]
    for name, fn in regions.items():
        inner = [n.op.name for n in post_order(fn.body) if isinstance(n, Call)]
        assert inner and all(isinstance(low.mod[k], PrimFunc) for k in inner), (name, inner)
    art = build(relu_add_model(), target, place="/add=b,*=a", config={"cc.cache_dir": str(tmp_path)})
    calls = [(n["func"], n["piece"], n["region"]) for n in art.graph["nodes"] if n["op"] == "call"]
    assert calls == [("fused_nn_relu", "a", "a_0"), ("fused_add", "b", "b_0")]
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    (y,) = GraphModule(art)(x=x)
    np.testing.assert_array_equal(y, np.maximum(x, 0) + np.float32(0.5))
