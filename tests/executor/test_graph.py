"""Graph executor on hand-built lowered modules: serialization, storage plan, running, errors, export."""

import json
import tracemalloc

import numpy as np
import pytest

from plait import relay
from plait.errors import PlaitError
from plait.executor.graph.artifact import GraphArtifact
from plait.executor.graph.module import GraphModule
from plait.executor.graph_codegen import graph_codegen
from plait.memory.algorithms import LiveBuffer, check_plan
from plait.memory.plan import live_ranges
from plait.relay import IRModule
from plait.runtime import CSourceModule, PyModule

from tests.executor.lowered import (
    c_module, call, chain, diamond, diamond_reference, prim_funcs, tir_module,
)


@pytest.fixture(scope="module")
def c_lib(tmp_path_factory):
    return c_module().compile(cache_dir=tmp_path_factory.mktemp("cc"))


@pytest.fixture(params=["c", "tir"])
def lib(request, c_lib):
    return c_lib if request.param == "c" else tir_module(prim_funcs())


def x_input(seed=1):
    return np.random.default_rng(seed).standard_normal((2, 3)).astype(np.float32)


def test_diamond_runs_and_matches_numpy(lib):
    mod, c = diamond()
    gm = GraphModule(GraphArtifact.from_module(mod, lib))
    assert gm.input_names == ["x"] and gm.output_names == ["y", "z"]
    assert gm.get_num_inputs() == 1 and gm.get_num_outputs() == 2
    for seed in (1, 2):  # buffers are reused across runs
        x = x_input(seed)
        got = gm(x=x)
        for g, e in zip(got, diamond_reference(x, c)):
            np.testing.assert_allclose(g, e, rtol=0, atol=1e-6)
    gm.set_input("x", x_input(3))
    gm.run()
    np.testing.assert_allclose(gm.get_output(1), diamond_reference(x_input(3), c)[1], atol=1e-6)
    assert gm.run_with({"x": x_input(3)})["z"].shape == (2, 3)
    prof = gm.profile(repeat=2)
    assert [(p["name"], p["func"]) for p in prof] == [("/add0", "add"), ("/relu", "relu"), ("/twice", "twice"),
                                                      ("/add1", "add"), ("/split", "split2")]
    assert all(p["ms"] >= 0 for p in prof)
    assert repr(gm.artifact).startswith("GraphArtifact(target='', 5 calls, 1 params, lib=")


def test_diamond_graph_and_storage_plan():
    mod, c = diamond()
    graph, params = graph_codegen(mod)
    assert list(params) == ["p0"]
    np.testing.assert_array_equal(params["p0"], c)
    calls = [(n["name"], n["func"], n["inputs"], n["outputs"]) for n in graph["nodes"] if n["op"] == "call"]
    assert calls == [("/add0", "add", [0, 1], [2]), ("/relu", "relu", [2], [3]), ("/twice", "twice", [3], [4]),
                     ("/add1", "add", [2, 4], [5]), ("/split", "split2", [2], [6, 7])]
    assert [e["storage"] for e in graph["entries"]] == list(range(8))  # one storage per value
    assert graph["outputs"] == [5, 7] and graph["output_names"] == ["y", "z"]
    # each (2, 3) float32 value is 24 bytes, 32 aligned to 16; at /split (node 6) the values 2 (read),
    # 5 (an output), 6 and 7 are live: the lower bound is 4 * 32 bytes, and the plan reaches it
    assert graph["memory"] == {"input_bytes": 24, "param_bytes": 24, "activation_bytes": 128,
                               "activation_bytes_naive": 6 * 32, "lower_bound_bytes": 128, "peak_bytes": 176}
    # the offsets: every activation in pool 0, and no two live at the same time share bytes
    first, last = live_ranges(graph)
    pooled = graph["storage"][2:]
    assert [s["pool"] for s in pooled] == [0] * 6
    check_plan([LiveBuffer(s["bytes"], first[k + 2], last[k + 2]) for k, s in enumerate(pooled)],
               [s["offset"] for s in pooled], 16)
    assert [(p["name"], p["piece"], p["bytes"], p["lower_bound"]) for p in graph["pools"]] == \
        [("workspace_c", "c", 128, 128)]
    # deterministic text
    a, b = GraphArtifact.from_module(mod, PyModule({})), GraphArtifact.from_module(diamond()[0], PyModule({}))
    assert a.graph_json == b.graph_json and json.loads(a.graph_json)["nodes"] == graph["nodes"]


def test_chain_reuses_two_buffers(c_lib):
    mod = chain(6)
    graph, _ = graph_codegen(mod)
    # a value is live from its call to the next: two 32-byte (24 aligned to 16) slots, alternating
    assert [s.get("offset") for s in graph["storage"]] == [None, 0, 32, 0, 32, 0, 32]
    assert graph["memory"]["activation_bytes"] == 64 and graph["memory"]["activation_bytes_naive"] == 6 * 32
    x = x_input()
    (y,) = GraphModule(GraphArtifact.from_module(mod, c_lib))(x)
    np.testing.assert_array_equal(y, x * 64)


def test_outputs_are_not_overwritten_by_later_calls():
    # y0 = twice(x) is an output; later calls of the same size must not reuse its buffer
    x = relay.var("x", (2, 3))
    y0 = call("twice", x)
    y1 = call("twice", call("twice", call("twice", y0)))
    mod = IRModule({"main": relay.Function((x,), relay.Tuple((y0, y1))), "twice": prim_funcs()["twice"]})
    gm = GraphModule(GraphArtifact.from_module(mod, tir_module(prim_funcs())))
    xv = x_input()
    a, b = gm(xv)
    np.testing.assert_array_equal(a, xv * 2)
    np.testing.assert_array_equal(b, xv * 16)


def test_inputs_and_constants_as_outputs_without_calls():
    x = relay.var("x", (3,), "int32")
    k = relay.const(np.array([1.5, 2.5], np.float32))
    mod = IRModule({"main": relay.Function((x,), relay.Tuple((k, x, x)))})
    gm = GraphModule(GraphArtifact.from_module(mod, PyModule({})))
    a, b, c = gm(x=np.array([1, 2, 3], np.int32))
    np.testing.assert_array_equal(a, [1.5, 2.5])
    np.testing.assert_array_equal(b, [1, 2, 3])
    b[0] = 99  # outputs are copies
    np.testing.assert_array_equal(gm.get_output(2), [1, 2, 3])
    assert gm.get_input("x").tolist() == [1, 2, 3]


def test_run_allocates_nothing_and_binds_ctypes(c_lib):
    big = (64, 64)
    lib = c_module(big).compile(cache_dir=c_lib.path.parent)
    mod = chain(8, big)
    gm = GraphModule(GraphArtifact.from_module(mod, lib))
    gm.set_input("x", np.ones(big, np.float32))
    out = gm.get_output(0, copy=False)
    gm.run()
    tracemalloc.start()
    gm.run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4096, peak  # one buffer is 16 KiB
    assert gm.get_output(0, copy=False) is out
    assert float(out[5, 7]) == 256.0


def test_input_errors(c_lib):
    gm = GraphModule(GraphArtifact.from_module(diamond()[0], c_lib))
    cases = [
        (lambda: gm.set_input("x", np.zeros((2, 3), np.float64)), "input 'x': expected dtype float32, got float64"),
        (lambda: gm.set_input("x", np.zeros((3, 2), np.float32)), "input 'x': expected shape (2, 3), got (3, 2)"),
        (lambda: gm.set_input("y", np.zeros((2, 3), np.float32)), "unknown input 'y' (inputs are: x)"),
        (lambda: gm.set_input(1, np.zeros((2, 3), np.float32)), "input index 1 out of range (the graph has 1 inputs)"),
        (lambda: gm(), "missing input 'x' (inputs are: x)"),
        (lambda: gm(x_input(), x=x_input()), "input 'x' given twice"),
        (lambda: gm(x_input(), x_input()), "expected 1 inputs, got 2"),
        (lambda: gm(x=x_input(), w=1), "unknown input 'w' (inputs are: x)"),
        (lambda: gm.get_output(2), "output index 2 out of range (the graph has 2 outputs)"),
    ]
    gm.set_input("x", x_input().astype(">f4"))  # float32 in the other byte order is accepted, converted
    np.testing.assert_array_equal(gm.get_input("x"), x_input())
    cases.append((lambda: gm.set_input("x", np.zeros((2, 3), ">f8")), "input 'x': expected dtype float32, got >f8"))
    for fn, msg in cases:
        with pytest.raises(PlaitError) as e:
            fn()
        assert str(e.value) == msg


def test_unlowered_and_unsupported_mains():
    x = relay.var("x", (2, 3))
    op_call = relay.call("nn.relu", x, meta={"name": "/r"})
    cases = [
        (IRModule({"main": relay.Function((x,), op_call)}),
         "graph executor: main calls the operator 'nn.relu' at call nn.relu (node '/r'): lower the module first "
         "(plait.build runs FuseOps and LowerToTIR)"),
        (IRModule({"main": relay.Function((x,), call("g", x)), "g": relay.Function((x,), x)}),
         "graph executor: main calls a Relay function at call @g: lower the module first "
         "(plait.build runs FuseOps and LowerToTIR)"),
    ]
    for mod, msg in cases:
        with pytest.raises(PlaitError) as e:
            graph_codegen(mod)
        assert str(e.value) == msg
    n = relay.var("x", ("n", 3))
    with pytest.raises(PlaitError) as e:
        graph_codegen(IRModule({"main": relay.Function((n,), n)}))
    assert str(e.value) == ("graph executor: input 'x' has a symbolic shape Tensor[(n, 3), float32]; "
                            "the graph executor needs static shapes (build with executor='vm', plait --executor vm)")
    a, b = relay.var("x", (1,)), relay.var("x", (1,))
    with pytest.raises(PlaitError) as e:
        graph_codegen(IRModule({"main": relay.Function((a, b), a)}))
    assert str(e.value) == "graph executor: main has two parameters named 'x'"


def test_runtime_function_errors(c_lib, tmp_path):
    mod, _ = diamond()
    funcs = prim_funcs()
    # the library lacks a function
    partial = PyModule({k: v for k, v in tir_module(funcs).functions.items() if k != "split2"})
    with pytest.raises(PlaitError) as e:
        GraphModule(GraphArtifact.from_module(mod, partial))
    assert str(e.value) == "unknown runtime function 'split2'"
    # signature mismatch: relu is called where the graph expects 'add' (3 buffers)
    src = CSourceModule("#include <stdint.h>\nint32_t add(float* a, float* b) { return 0; }\n", {"add": ("ptr", "ptr")})
    with pytest.raises(PlaitError) as e:
        GraphModule(GraphArtifact.from_module(chain_of("add"), src.compile(cache_dir=tmp_path)))
    assert str(e.value) == ("node 1 ('add'): runtime function 'add' has signature (ptr, ptr); "
                            "the graph executor passes 3 buffers (inputs, then outputs)")
    # not compiled
    with pytest.raises(PlaitError) as e:
        GraphModule(GraphArtifact.from_module(mod, c_module()))
    assert str(e.value) == "function 'add' is in a C source module that is not compiled yet: call compile()"
    # a failing function
    gm = GraphModule(GraphArtifact.from_module(chain_of("failing"), c_lib))
    with pytest.raises(PlaitError) as e:
        gm(x=x_input())
    assert str(e.value) == "graph node '/n': runtime function 'failing' returned error status 7"


def chain_of(func: str) -> IRModule:
    """main(x) = func(x[, x]) with a PrimFunc declaration of the right arity."""
    x = relay.var("x", (2, 3))
    base = {"failing": prim_funcs()["relu"], "add": prim_funcs()["add"]}[func]
    fn = base.with_attrs(global_symbol=func)
    args = (x, x) if func == "add" else (x,)
    return IRModule({"main": relay.Function((x,), call(func, *args, node="/n" if func == "failing" else None)),
                     func: fn})


def test_export_and_load(c_lib, tmp_path):
    mod, c = diamond()
    art = GraphArtifact.from_module(mod, c_lib, target="c")
    out = art.export(tmp_path / "art")
    assert sorted(p.name for p in out.iterdir()) == ["graph.json", "lib.so", "manifest.json", "params.npz"]
    back = GraphArtifact.load(out)
    assert back.graph_json == art.graph_json and back.target == "c"
    x = x_input()
    for g, e in zip(GraphModule(back)(x=x), diamond_reference(x, c)):
        np.testing.assert_allclose(g, e, atol=1e-6)
    with pytest.raises(PlaitError) as e:
        GraphArtifact.load(tmp_path / "missing")
    assert str(e.value) == f"cannot load graph artifact '{tmp_path / 'missing'}': no such directory"
    (out / "graph.json").write_text('{"format": "plait.graph", "version": 9}')
    with pytest.raises(PlaitError) as e:
        GraphArtifact.load(out)
    assert str(e.value) == (f"cannot load graph artifact '{out}': graph.json: graph version 9 is not supported "
                            "(this plait reads version 2)")
    with pytest.raises(PlaitError) as e:
        GraphArtifact.from_module(mod, tir_module(prim_funcs())).export(tmp_path / "py")
    assert str(e.value) == ("cannot export the library: it is a PyModule (functions add, relu, split2, ...) and "
                            "Python functions cannot be written to a file")


def test_diamond_through_the_c_backend(tmp_path):
    from plait.ir.transform import PassContext
    from plait.target import Target, run_tir_to_runtime

    mod, c = diamond()
    lib = run_tir_to_runtime(Target("c"), mod, PassContext(config={"cc.cache_dir": str(tmp_path)}))
    gm = GraphModule(GraphArtifact.from_module(mod, lib, target="c"))
    x = x_input()
    for g, e in zip(gm(x), diamond_reference(x, c)):
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-6)
