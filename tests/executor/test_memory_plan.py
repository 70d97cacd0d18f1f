"""The graph executor's memory plan (the planner alone: tests/memory/test_plan.py): workspaces of
lifted PrimFuncs (interpreter and compiled C), copy nodes, pre-binding of raw() modules, export of
a library with imported modules."""

import json

import numpy as np
import pytest

from plait import relay, te
from plait.errors import PlaitError
from plait.executor.graph.artifact import GraphArtifact
from plait.executor.graph.module import GraphModule
from plait.executor.graph_check import check_graph
from plait.executor.graph_codegen import graph_codegen
from plait.memory.plan import MemoryPlan
from plait.relay import IRModule
from plait.relay.expr import call as relay_call
from plait.runtime import Module, PyModule
from plait.memory.workspace import LiftWorkspaces

from tests.executor.lowered import c_module, call, prim_funcs, tir_module


# ---- workspaces ---------------------------------------------------------------------------------


def softmax_rows(piece="c"):
    A = te.placeholder((4, 8), name="A")
    B = te.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((4,), lambda i: te.sum(B[i, k], axis=k), name="C")
    D = te.compute((4, 8), lambda i, j: B[i, j] / C[i], name="D")
    return te.create_prim_func([A, D], name="softmax_rows", inline=False).with_attrs(piece=piece)


def square_plus(piece="dsp"):
    A = te.placeholder((4, 8), name="A")
    B = te.compute((4, 8), lambda i, j: A[i, j] + 1.0, name="B")
    D = te.compute((4, 8), lambda i, j: B[i, j] * B[i, j], name="D")
    return te.create_prim_func([A, D], name="square_plus", inline=False).with_attrs(piece=piece)


def sm(a):
    return (2 * a) / (2 * a).sum(1, keepdims=True)


def ws_module():
    """y = softmax_rows(square_plus(device_copy(softmax_rows(x))))  (pieces c, dsp, c)."""
    x = relay.var("x", (4, 8))
    s = call("softmax_rows", x, node="/sm0")
    t = relay_call("device_copy", s, src="c", dst="dsp", meta={"name": "/copy"})
    u = call("square_plus", t, node="/sq")
    y = call("softmax_rows", u, node="/sm1")
    mod = IRModule({"main": relay.Function((x,), y), "softmax_rows": softmax_rows(), "square_plus": square_plus()},
                   attrs={"output_names": ["y"]})
    return LiftWorkspaces()(mod)


def ws_reference(x):
    return sm((sm(x) + 1) ** 2)


@pytest.fixture(scope="module")
def ws_c_lib(tmp_path_factory):
    from plait.backends.c.backend import build_c

    mod = ws_module()
    return build_c([mod["softmax_rows"], mod["square_plus"]], cache_dir=str(tmp_path_factory.mktemp("cc")))


def test_workspaces_in_the_graph_and_the_report():
    mod = ws_module()
    graph, _ = graph_codegen(mod)
    ops = [(n["op"], n["name"]) for n in graph["nodes"]]
    assert ops == [("input", "x"), ("call", "/sm0"), ("copy", "/copy"), ("call", "/sq"), ("call", "/sm1")]
    copy = graph["nodes"][2]
    assert (copy["src"], copy["dst"], copy["inputs"], copy["outputs"]) == ("c", "dsp", [1], [3])
    sm0, sq = graph["nodes"][1], graph["nodes"][3]
    assert sm0["piece"] == "c" and sq["piece"] == "dsp" and len(sm0["workspace"]) == 1
    # one storage per call's workspace, all in the one pool: the copy goes to dsp, but /sm1 (on c) reads
    # /sq's result directly, so c and dsp share a memory. Live bytes: /sm0 128 + 192, /copy 128 + 128,
    # /sq 128 + 128 + 128 (workspace), /sm1 128 + 128 + 192 = 448, the lower bound.
    assert [(s["kind"], s["bytes"]) for s in graph["storage"] if s["kind"] == "workspace"] == \
        [("workspace", 192), ("workspace", 128), ("workspace", 192)]
    assert graph["entries"][sm0["workspace"][0]] == {"shape": [48], "dtype": "float32", "storage": 2}
    assert [(p["name"], p["piece"], p["bytes"], p["lower_bound"]) for p in graph["pools"]] == \
        [("workspace_c", "c", 448, 448)]
    mem = graph["memory"]
    assert mem["activation_bytes"] == 448 and mem["activation_bytes_naive"] == 4 * 128 + 192 + 128 + 192
    assert mem["peak_bytes"] == mem["input_bytes"] + mem["param_bytes"] + 448
    art = GraphArtifact.from_module(mod, tir_module({"softmax_rows": mod["softmax_rows"],
                                                     "square_plus": mod["square_plus"]}))
    report = art.memory_report()
    assert report == MemoryPlan.from_graph(art.graph).report()
    lines = report.splitlines()
    assert lines[0] == f"memory plan: peak {mem['peak_bytes']:,} B"
    assert lines[3:5] == ["  pools                 448 B  1 pool (1,024 B with one buffer per value)",
                          "  pool 'workspace_c' (piece 'c'): 448 B, lower bound 448 B, algorithm "
                          f"{graph['pools'][0]['algorithm']}; 4 activations, 3 workspaces"]
    assert lines[5:] == ["biggest workspaces:",
                         "  softmax_rows                                       192 B  piece 'c', 2 calls",
                         "  square_plus                                        128 B  piece 'dsp', 1 call"]


@pytest.mark.parametrize("kind", ["tir", "c"])
def test_workspace_graph_runs(kind, ws_c_lib):
    mod = ws_module()
    lib = ws_c_lib if kind == "c" else tir_module({"softmax_rows": mod["softmax_rows"],
                                                   "square_plus": mod["square_plus"]})
    gm = GraphModule(GraphArtifact.from_module(mod, lib))
    for seed in (0, 1):
        x = np.random.default_rng(seed).random((4, 8)).astype(np.float32)
        (y,) = gm(x)
        np.testing.assert_allclose(y, ws_reference(x), rtol=1e-5)
    assert [p["func"] for p in gm.profile(1)] == ["softmax_rows", "copy", "square_plus", "softmax_rows"]


def test_check_graph_copy_nodes():
    graph, _ = graph_codegen(ws_module())
    bad = json.loads(json.dumps(graph))
    bad["nodes"][2]["inputs"] = [0, 1]
    with pytest.raises(PlaitError) as e:
        check_graph(bad)
    assert str(e.value) == ("graph: node 2 ('/copy'): a copy node copies one value (src, dst pieces; one input, "
                            "one output)")
    bad = json.loads(json.dumps(graph))
    bad["nodes"][1]["workspace"] = [99]
    with pytest.raises(PlaitError) as e:
        check_graph(bad)
    assert str(e.value) == "graph: node 1 ('/sm0'): workspace: 99 is not an entry id (the graph has 8 entries)"
    bad = json.loads(json.dumps(graph))
    bad["storage"][0]["kind"] = "scratch"
    with pytest.raises(PlaitError) as e:
        check_graph(bad)
    assert str(e.value) == ("graph: storage 0: unknown kind 'scratch' (expected one of input, param, activation, "
                            "workspace)")


def test_lowered_model_with_workspaces_end_to_end(tmp_path):
    """infer_type -> FuseOps -> LowerToTIR -> LiftWorkspaces -> build_c -> graph executor."""
    from plait.lowering.lower import LowerToTIR
    from plait.frontend.onnx import from_onnx
    from plait.ir.transform import PassContext
    from plait.relay import run
    from plait.relay.infer import InferType
    from plait.relay.passes import FoldBatchNorm, FoldConstant, FuseOps
    from plait.target import Target, run_tir_to_runtime
    from plait.testing import onnx_models

    model = onnx_models.ds_cnn(channels=8, blocks=1)
    mod = from_onnx(model)
    ctx = PassContext(config={"cc.cache_dir": str(tmp_path)})
    for p in (InferType(), FoldConstant(), FoldBatchNorm(), InferType(), FuseOps(), LowerToTIR(Target("c")),
              LiftWorkspaces()):
        mod = ctx.run(p, mod)
    lifted = [k for k in mod if getattr(mod[k], "attrs", {}).get("workspace_bytes")]
    assert lifted  # the padded input of the convolutions
    art = GraphArtifact.from_module(mod, run_tir_to_runtime(Target("c"), mod, ctx), "c")
    graph = art.graph
    ws = [s["bytes"] for s in graph["storage"] if s["kind"] == "workspace"]
    assert max(ws) == max(mod[k].attrs["workspace_bytes"] for k in lifted)
    assert graph["memory"]["lower_bound_bytes"] <= graph["memory"]["activation_bytes"]
    assert "biggest workspaces:" in art.memory_report()
    x = np.random.default_rng(0).standard_normal((1, 1, 49, 10)).astype(np.float32)
    (got,) = GraphModule(art)(x)
    want = run(from_onnx(model), {"input": x})
    np.testing.assert_allclose(got, np.asarray(want), rtol=0, atol=1e-4)


# ---- runtime modules ------------------------------------------------------------------------------


class RawModule(Module):
    """A compiled module that is not a DSOModule (like an LLVM JIT module): signatures + raw()."""

    def __init__(self, dso):
        super().__init__()
        self.dso, self.signatures, self.asked = dso, dso.signatures, []

    def function_names(self):
        return self.dso.function_names()

    def raw(self, name):
        self.asked.append(name)
        return self.dso.raw(name)


def test_any_module_with_raw_is_prebound(ws_c_lib):
    mod = ws_module()
    raw = RawModule(ws_c_lib)
    gm = GraphModule(GraphArtifact.from_module(mod, raw))
    assert raw.asked == ["softmax_rows", "square_plus", "softmax_rows"]
    x = np.random.default_rng(3).random((4, 8)).astype(np.float32)
    np.testing.assert_allclose(gm(x)[0], ws_reference(x), rtol=1e-5)


def test_export_a_library_with_imported_modules(tmp_path, ws_c_lib):
    from plait.backends.c.backend import build_c

    mod = ws_module()
    other = build_c([mod["square_plus"]], cache_dir=str(tmp_path / "cc"), name="dsp")
    host = build_c([mod["softmax_rows"]], cache_dir=str(tmp_path / "cc"), name="host")
    host.import_module(other)
    x = np.random.default_rng(4).random((4, 8)).astype(np.float32)
    art = GraphArtifact.from_module(mod, host)
    out = art.export(tmp_path / "two")
    assert sorted(p.name for p in out.iterdir()) == ["graph.json", "lib.so", "lib_1.so", "manifest.json", "params.npz"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["modules"] == [{"file": "lib.so", "imports": [1]}, {"file": "lib_1.so", "imports": []}]
    assert {k: f["module"] for k, f in manifest["functions"].items()} == {"softmax_rows": 0, "square_plus": 1}
    back = GraphArtifact.load(out)
    assert [m.function_names() for m in back.lib.walk()] == [["softmax_rows"], ["square_plus"]]
    np.testing.assert_allclose(GraphModule(back)(x)[0], ws_reference(x), rtol=1e-5)
    # a container host module (no functions of its own) has no file
    box = Module()
    box.import_module(ws_c_lib)
    back = GraphArtifact.load(GraphArtifact.from_module(mod, box).export(tmp_path / "box"))
    assert json.loads((tmp_path / "box" / "manifest.json").read_text())["modules"][0] == {"file": None, "imports": [1]}
    np.testing.assert_allclose(GraphModule(back)(x)[0], ws_reference(x), rtol=1e-5)
    # a single module: the manifest lists one module
    single = GraphArtifact.from_module(mod, ws_c_lib).export(tmp_path / "one")
    assert json.loads((single / "manifest.json").read_text())["modules"] == [{"file": "lib.so", "imports": []}]
    # Python modules cannot be written
    host.import_module(PyModule({"f": lambda: 0}))
    with pytest.raises(PlaitError) as e:
        art.export(tmp_path / "py")
    assert str(e.value) == ("cannot export module 2 imported by the library: it is a PyModule (functions f) and "
                            "Python functions cannot be written to a file")


def test_load_rejects_a_bad_module_manifest(tmp_path, ws_c_lib):
    mod = ws_module()
    box = Module()
    box.import_module(ws_c_lib)
    out = GraphArtifact.from_module(mod, box).export(tmp_path / "a")
    m = json.loads((out / "manifest.json").read_text())
    for change, msg in [
        (lambda m: m["modules"][1].update(file="../evil.so"), "malformed module 1"),
        (lambda m: m["modules"][1].update(imports=[1]), "malformed module 1"),
        (lambda m: m["modules"].append({"file": None, "imports": [1]}) or m["modules"][1].update(imports=[2]),
         "module 1 imports itself (a cycle)"),
    ]:
        bad = json.loads(json.dumps(m))
        change(bad)
        (out / "manifest.json").write_text(json.dumps(bad))
        with pytest.raises(PlaitError) as e:
            GraphArtifact.load(out)
        assert str(e.value) == f"cannot load graph artifact '{out}': manifest.json: {msg}"


def test_copy_node_between_hand_written_functions(tmp_path):
    """device_copy between two C functions of the hand-written library."""
    c_lib = c_module().compile(cache_dir=str(tmp_path))
    x = relay.var("x", (2, 3))
    t = call("twice", x)
    d = relay_call("device_copy", t, src="a", dst="b")
    mod = IRModule({"main": relay.Function((x,), call("relu", d)), **prim_funcs()})
    for lib in (c_lib, tir_module(prim_funcs())):
        gm = GraphModule(GraphArtifact.from_module(mod, lib))
        v = np.random.default_rng(5).standard_normal((2, 3)).astype(np.float32)
        np.testing.assert_array_equal(gm(v)[0], np.maximum(v * 2, 0))
        assert [n["op"] for n in gm.graph["nodes"]] == ["input", "call", "copy", "call"]


def test_values_in_bigger_shared_buffers_run_right(tmp_path):
    """A chain whose sizes change (16, 8, 16, 8, 4 floats): values of different sizes reuse the same
    bytes of the pool; the graph still computes the right numbers (interpreter and C)."""
    from plait.backends.c.backend import build_c

    def double(n):
        A = te.placeholder((n,), name="A")
        return te.create_prim_func([A, te.compute((2 * n,), lambda i: A[i // 2] * 1.5, name="B")],
                                   name=f"double{n}")

    def half(n):
        A = te.placeholder((2 * n,), name="A")
        return te.create_prim_func([A, te.compute((n,), lambda i: A[2 * i] - A[2 * i + 1] * 0.5, name="B")],
                                   name=f"half{n}")

    funcs = {"double8": double(8), "half8": half(8), "half4": half(4)}
    x = relay.var("x", (8,))
    y = call("half4", call("half8", call("double8", call("half8", call("double8", x)))))
    mod = IRModule({"main": relay.Function((x,), y), **funcs})
    graph, _ = graph_codegen(mod)
    # a value lives from its call to the next: at most 16 + 8 floats at a time, the lower bound
    assert graph["memory"]["activation_bytes"] == graph["memory"]["lower_bound_bytes"] == (16 + 8) * 4
    c_lib = build_c(list(funcs.values()), cache_dir=str(tmp_path))

    def ref(v):
        d = np.repeat(v, 2) * np.float32(1.5)
        h = d[0::2] - d[1::2] * np.float32(0.5)
        d = np.repeat(h, 2) * np.float32(1.5)
        h = d[0::2] - d[1::2] * np.float32(0.5)
        return h[0::2] - h[1::2] * np.float32(0.5)

    v = np.random.default_rng(6).standard_normal(8).astype(np.float32)
    for lib in (c_lib, tir_module(funcs)):
        np.testing.assert_allclose(GraphModule(GraphArtifact.from_module(mod, lib))(v)[0], ref(v), rtol=1e-6)



def test_blas_im2col_workspace_in_the_memory_plan(tmp_path):
    """plait.build for "host: c; blas: blas" with every call it can run on blas: the first
    convolution (10x4 kernel) goes through im2col, whose buffer is the blas piece's workspace."""
    pytest.importorskip("scipy_openblas32")
    import plait
    from plait.frontend.onnx import from_onnx
    from plait.relay import run
    from plait.testing import onnx_models

    model = onnx_models.ds_cnn(channels=8, blocks=1)
    art = plait.build(from_onnx(model), target="host: c; blas: blas", place="*=blas?",
                      config={"cc.cache_dir": str(tmp_path)})
    graph = art.graph
    im2col = 1 * 10 * 4 * 25 * 5 * 4  # C*KH*KW x OH*OW floats
    ws_calls = [n for n in graph["nodes"] if n.get("workspace") and n["piece"] == "blas"]
    assert [n["func"] for n in ws_calls] == ["blas_sgemm_conv2d"]  # the 1x1 convolution and the dense need none
    assert {n["func"] for n in graph["nodes"] if n.get("piece") == "blas"} == {
        "blas_sgemm_conv2d", "blas_sgemm_conv2d_1", "blas_sgemm_dense"}
    assert art.ir["blas_sgemm_conv2d"].attrs["workspace_bytes"] == im2col + 32  # rounded up to 64
    ws = graph["storage"][graph["entries"][ws_calls[0]["workspace"][0]]["storage"]]
    assert (ws["kind"], ws["bytes"]) == ("workspace", im2col + 32)
    report = art.memory_report().splitlines()
    assert report[report.index("biggest workspaces:") + 1] == \
        "  blas_sgemm_conv2d                               20,032 B  piece 'blas', 1 call"
    x = np.random.default_rng(0).standard_normal((1, 1, 49, 10)).astype(np.float32)
    np.testing.assert_allclose(GraphModule(art)(x)[0], np.asarray(run(from_onnx(model), {"input": x})),
                               rtol=0, atol=1e-4)
