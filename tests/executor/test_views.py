"""Zero-copy views (reshape, flatten, squeeze, expand_dims): no PrimFunc, a ``view`` node sharing its
input's storage, the base value kept alive as long as the view is read; the same numbers as the
reference interpreter; an exported artifact with pools and views loads back and runs the same."""

import json

import numpy as np
import pytest

import plait
from plait import relay
from plait.errors import PlaitError
from plait.executor.graph.artifact import GraphArtifact
from plait.executor.graph.module import GraphModule
from plait.executor.graph_check import check_graph
from plait.executor.graph_codegen import graph_codegen
from plait.relay import IRModule
from plait.relay.expr import call as relay_call
from plait.tir.stmt import PrimFunc

from tests.executor.lowered import call, prim_funcs, tir_module


def dense_reshape_model() -> IRModule:
    """y = dense(flatten(expand_dims(reshape(dense(x, w0), [2, 4]))), w1); z = squeeze(expand_dims(x))."""
    rng = np.random.default_rng(0)
    x = relay.var("x", (1, 24))
    d = relay_call("nn.dense", x, relay.const(rng.standard_normal((8, 24)).astype(np.float32)))
    r = relay_call("reshape", d, newshape=[2, 4])
    f = relay_call("flatten", relay_call("expand_dims", r, axes=[0]), axis=1)
    y = relay_call("nn.dense", f, relay.const(rng.standard_normal((3, 8)).astype(np.float32)))
    z = relay_call("squeeze", relay_call("expand_dims", x, axes=[0]), axes=[0])
    return IRModule({"main": relay.Function((x,), relay.Tuple((y, z)))})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return plait.build(dense_reshape_model(), "c", config={"cc.cache_dir": str(tmp_path_factory.mktemp("cc"))})


def test_views_are_not_lowered_and_allocate_nothing(built):
    art = built
    prim = sorted(k for k in art.ir if isinstance(art.ir[k], PrimFunc))
    assert prim == ["fused_nn_dense", "fused_nn_dense_1"]  # no function copies the reshaped values
    graph = art.graph
    assert [n["op"] for n in graph["nodes"]] == ["input", "param", "call", "view", "view", "view", "param", "call",
                                                 "view", "view"]
    store = [e["storage"] for e in graph["entries"]]
    assert store[2] == store[3] == store[4] == store[5]  # dense's result and its three views
    assert store[0] == store[8] == store[9]  # the second output is the input itself, seen as [1, 24]
    kinds = [s["kind"] for s in graph["storage"]]
    assert kinds == ["input", "param", "activation", "param", "activation"]  # 2 activations for 7 values
    # the 32-byte dense result (live until the second dense) and the 12-byte result: 32 + 16 bytes
    assert graph["pools"][0]["bytes"] == graph["pools"][0]["lower_bound"] == 48
    x = np.random.default_rng(1).standard_normal((1, 24)).astype(np.float32)
    want = relay.run(dense_reshape_model(), {"x": x})
    got = GraphModule(art)(x)
    np.testing.assert_allclose(got[0], np.asarray(want[0]), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[1], x)


def test_an_exported_artifact_with_pools_and_views_round_trips(built, tmp_path):
    out = built.export(tmp_path / "art")
    back = GraphArtifact.load(out)
    assert back.graph == built.graph and back.graph["pools"] == built.graph["pools"]
    assert back.memory_report() == built.memory_report()
    x = np.random.default_rng(2).standard_normal((1, 24)).astype(np.float32)
    for a, b in zip(GraphModule(back)(x), GraphModule(built)(x)):
        np.testing.assert_array_equal(a, b)


def view_module():
    """c = add(reshape(reshape(twice(x), [3, 2]), [2, 3]), relu(x)): twice's result is read through
    its views after relu ran, so relu's result must not take its bytes."""
    x = relay.var("x", (2, 3))
    a = call("twice", x, node="/twice")
    v = relay_call("reshape", relay_call("reshape", a, newshape=[3, 2], meta={"name": "/r0"}), newshape=[2, 3],
                   meta={"name": "/r1"})
    b = call("relu", x, node="/relu")
    return IRModule({"main": relay.Function((x,), call("add", v, b, node="/add")), **prim_funcs()})


def test_a_view_keeps_its_base_alive():
    mod = view_module()
    graph, _ = graph_codegen(mod)
    assert [(n["op"], n["name"]) for n in graph["nodes"]] == [("input", "x"), ("call", "/twice"), ("view", "/r0"),
                                                             ("view", "/r1"), ("call", "/relu"), ("call", "/add")]
    assert [e["storage"] for e in graph["entries"]] == [0, 1, 1, 1, 2, 3]
    # twice's result lives from node 1 to /add (node 5), through its views; at /add it, relu's result and
    # add's are live: three 24-byte values, 32 bytes each with the alignment
    offsets = [graph["storage"][s]["offset"] for s in (1, 2, 3)]
    assert len(set(offsets)) == 3 and graph["pools"][0]["bytes"] == graph["pools"][0]["lower_bound"] == 96
    gm = GraphModule(GraphArtifact.from_module(mod, tir_module(prim_funcs())))
    x = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(gm(x)[0], np.maximum(x, 0) + 2 * x, rtol=1e-6)
    # relu's result moved onto twice's bytes: refused, naming both and their live ranges
    bad = json.loads(json.dumps(graph))
    bad["storage"][1]["offset"], bad["storage"][2]["offset"], bad["storage"][3]["offset"] = 0, 0, 32
    with pytest.raises(PlaitError) as e:
        check_graph(bad)
    assert str(e.value) == ("graph: pool 0 ('workspace_c'): storage 1 at bytes 0 to 24, live from node 1 ('/twice') "
                            "to node 5 ('/add') overlaps storage 2 at bytes 0 to 24, live from node 4 ('/relu') to "
                            "node 5 ('/add')")


def test_malformed_view_nodes_are_refused():
    graph, _ = graph_codegen(view_module())
    for change, msg in [
        (lambda g: g["nodes"][2].update(inputs=[0, 1]), "node 2 ('/r0'): a view node reinterprets one value (one "
                                                        "input, one output)"),
        (lambda g: g["entries"][2].update(dtype="int32"), "node 2 ('/r0'): a view node gives a value another shape "
                                                          "of the same dtype and size; entry 1 is float32[2, 3] (24 "
                                                          "bytes), entry 2 is int32[3, 2] (24 bytes)"),
        (lambda g: g["entries"][2].update(shape=[2, 2]), "node 2 ('/r0'): a view node gives a value another shape "
                                                         "of the same dtype and size; entry 1 is float32[2, 3] (24 "
                                                         "bytes), entry 2 is float32[2, 2] (16 bytes)"),
        (lambda g: g["entries"][2].update(storage=2), "node 2 ('/r0'): a view shares its input's storage, but entry "
                                                      "2 is in storage 2 and entry 1 in storage 1"),
    ]:
        bad = json.loads(json.dumps(graph))
        change(bad)
        with pytest.raises(PlaitError) as e:
            check_graph(bad)
        assert str(e.value) == f"graph: {msg}"
