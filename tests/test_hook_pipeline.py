"""The hook contract in the multi-piece pipeline: broken hooks are reported naming the hook, the kind,
the piece and the function; the region functions a hook sees; external runtimes."""

import json

import numpy as np
import pytest

import plait
from plait import relay
from plait.errors import PlaitError
from plait.target import piece_of
from plait.executor import GraphArtifact, GraphModule
from plait.runtime.formats import ModuleFormat
from plait.relay import IRModule
from plait.runtime.module import PyModule
from plait.target.testing import isolated_registry, register_test_backend
from plait.tir.expr import const
from plait.tir.stmt import Buffer, BufferStore, PrimFunc
from plait.testing.ort_reference import reference_session

TARGET = "cpu: c -simd-bits=256 -clock-mhz=2445; acc: broken"  # host facts pinned: placements do not depend on the machine


def model():
    x = relay.var("x", (2, 3))
    r = relay.call("nn.relu", x, meta={"name": "/relu"})
    y = relay.call("add", r, relay.const(np.full((2, 3), 0.5, np.float32)), meta={"name": "/add"})
    return IRModule({"main": relay.Function((x,), y)}, attrs={"output_names": ["y"]})


def my_regions(mod):
    piece = mod.attrs["piece"]  # the piece being lowered
    return [k for k, f in mod.items() if isinstance(f, relay.Function) and piece_of(f) == piece]


@pytest.fixture
def broken():
    with isolated_registry():
        yield


def build_with(hook_name, fn, place="/relu=acc"):
    hooks = {hook_name: fn}
    if hook_name == "relay_to_runtime":  # an external compiler runs nothing unless it says so
        hooks["supports"] = lambda call, target: call.op_name == "nn.relu"
    register_test_backend("broken", doc="test kind: hooks that go wrong", can_host=False, **hooks)
    return plait.build(model(), TARGET, place=place)


def message(fn, *args, **kwargs):
    with pytest.raises(PlaitError) as e:
        fn(*args, **kwargs)
    return str(e.value)


def test_relay_to_tir_hook_that_raises(broken):
    def hook(mod, target):
        raise ValueError("boom")

    assert message(build_with, "relay_to_tir", hook) == (
        "hook 'relay_to_tir' of target kind 'broken' on piece 'acc' failed on function 'acc_0': ValueError: boom")


def test_relay_to_tir_hook_that_returns_an_invalid_prim_func(broken):
    def hook(mod, target):
        (name,) = my_regions(mod)
        x, y = Buffer("x", (2, 3)), Buffer("y", (2, 3))
        stray = Buffer("stray", (4,))  # stored to, but neither a parameter nor allocated
        bad = PrimFunc((x, y), BufferStore(stray, const(1.0, "float32"), (const(0, "int64"),)),
                       {"global_symbol": "acc_relu", "num_inputs": 1})
        return mod.with_function(name, bad)

    msg = message(build_with, "relay_to_tir", hook)
    assert msg.startswith("hook 'relay_to_tir' of target kind 'broken' on piece 'acc' produced an invalid PrimFunc "
                          "'acc_0': ")
    assert "stray" in msg


def test_relay_to_tir_hook_that_leaves_operator_calls_or_returns_garbage(broken):
    assert message(build_with, "relay_to_tir", lambda mod, target: mod) == (
        "hook 'relay_to_tir' of target kind 'broken' on piece 'acc' left function 'acc_0' with operator calls "
        "(nn.relu); it must call PrimFuncs")


def test_relay_to_tir_hook_returning_a_non_module(broken):
    assert message(build_with, "relay_to_tir", lambda mod, target: 42) == (
        "hook 'relay_to_tir' of target kind 'broken' on piece 'acc' returned int; expected an IRModule "
        "(lowering function 'acc_0')")


def test_relay_to_runtime_hook_errors(broken):
    def wrong_name(func, target):
        return PyModule({"something_else": lambda *a: 0})

    assert message(build_with, "relay_to_runtime", wrong_name) == (
        "hook 'relay_to_runtime' of target kind 'broken' on piece 'acc': the module it returned for function 'acc_0' "
        "has no function 'acc_0' (it has: something_else)")


def test_relay_to_runtime_hook_that_raises(broken):
    def hook(func, target):
        raise KeyError("nope")

    assert message(build_with, "relay_to_runtime", hook) == (
        "hook 'relay_to_runtime' of target kind 'broken' on piece 'acc' failed on function 'acc_0': KeyError: 'nope'")


def test_relay_to_runtime_runs_the_region_in_an_external_module(broken):
    seen = {}

    def hook(func, target):
        name = func.attrs["global_symbol"]
        seen["params"] = [str(p.checked_type) for p in func.params]
        seen["ops"] = sorted({c.op_name for c in plait.relay.visitor.post_order(func.body)
                              if isinstance(c, relay.Call)})

        def run(x, out):  # destination passing: inputs, then outputs
            np.copyto(out, np.maximum(x, 0))
            return 0

        return PyModule({name: run})

    art = build_with("relay_to_runtime", hook)
    assert seen == {"params": ["Tensor[(2, 3), float32]"], "ops": ["nn.relu"]}
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    (y,) = GraphModule(art)(x=x)
    np.testing.assert_allclose(y, np.maximum(x, 0) + 0.5)
    assert [n["func"] for n in art.graph["nodes"] if n["op"] == "call"][0] == "acc_0"


@pytest.mark.parametrize("place", ["/sig=ort", "/split=ort,/cat=ort", "/relu=ort,/sig=ort"])
def test_tuple_values_cross_an_external_region_boundary_as_tensors(place):
    """A split on one piece feeding another, and a split inside an ONNX Runtime region whose results
    leave it: region boundaries carry tensors only."""
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    from plait.frontend.onnx import from_onnx

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])
    split = helper.make_tensor("split", TensorProto.INT64, [2], [2, 4])
    nodes = [helper.make_node("Split", ["x", "split"], ["a", "b"], axis=1, name="/split"),
             helper.make_node("Relu", ["a"], ["ra"], name="/relu"),
             helper.make_node("Sigmoid", ["b"], ["sb"], name="/sig"),
             helper.make_node("Concat", ["sb", "ra"], ["y"], axis=1, name="/cat")]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], initializer=[split]),
                          opset_imports=[helper.make_opsetid("", 17)])
    xv = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    (want,) = reference_session(m).run(None, {"x": xv})
    art = plait.build(from_onnx(m), "host: c -simd-bits=256 -clock-mhz=2445; ort: onnxruntime", place=place + ",*=host")
    pinned = {r.split("=")[0] for r in place.split(",")}
    assert {p.call.meta["name"] for p in art.placement if p.piece == "ort"} == pinned
    (got,) = GraphModule(art)(x=xv)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


class ReluModule(PyModule):
    """A plugin's own runtime module type: a relu under one symbol (what an external compiler's library
    would be); written into an artifact as ``.relu`` by the format its backend declares."""

    def __init__(self, symbol: str):
        def run(x, out):
            np.copyto(out, np.maximum(x, 0))
            return 0

        super().__init__({symbol: run})
        self.symbol = symbol


def _save_relu(m, path):
    path.write_text(m.symbol, encoding="utf-8")
    return []


RELU_FORMAT = ModuleFormat(".relu", ReluModule, save=_save_relu,
                           load=lambda data, path, entry, sigs: ReluModule(data.decode("utf-8")),
                           fields=lambda m: {"version": 1})


def test_a_plugin_runtime_module_type_is_exported_and_loaded_again_by_its_backends_format(broken, tmp_path):
    register_test_backend("broken", doc="test kind: its own runtime module type", can_host=False,
                          module_formats=(RELU_FORMAT,), supports=lambda call, target: call.op_name == "nn.relu",
                          relay_to_runtime=lambda func, target: ReluModule(func.attrs["global_symbol"]))
    art = plait.build(model(), TARGET, place="/relu=acc")
    out = art.export(tmp_path / "a")
    manifest = json.loads((out / "manifest.json").read_text())
    relu = [e for e in manifest["modules"] if e["file"] and e["file"].endswith(".relu")]
    assert len(relu) == 1 and relu[0]["version"] == 1
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    loaded = GraphArtifact.load(out)
    assert any(isinstance(m, ReluModule) for m in loaded.lib.walk())
    (y,) = GraphModule(loaded)(x=x)
    np.testing.assert_array_equal(y, np.maximum(x, 0) + np.float32(0.5))


def test_a_module_no_format_writes_is_a_clear_export_error(broken, tmp_path):
    class Stranger(PyModule):  # a PyModule subclass with functions and no format
        pass

    register_test_backend("broken", doc="test kind", can_host=False,
                          supports=lambda call, target: call.op_name == "nn.relu",
                          relay_to_runtime=lambda func, target: Stranger({func.attrs["global_symbol"]: lambda x, o: 0}))
    art = plait.build(model(), TARGET, place="/relu=acc")
    with pytest.raises(PlaitError) as e:
        art.export(tmp_path / "b")
    assert "it is a PyModule" in str(e.value) and "Python functions cannot be written to a file" in str(e.value)
