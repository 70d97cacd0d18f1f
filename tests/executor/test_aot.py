"""The AOT executor: the same lowered module as the Graph executor, written as C with a fixed memory map,
run on the host (AotModule) bit for bit like the Graph executor, and close to ONNX Runtime."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import plait
from plait.executor import AotArtifact, AotError, AotModule, GraphModule
from plait.frontend.onnx import from_onnx
from plait.testing import onnx_models
from tests.executor.test_models import feeds_for, ort_run


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


def both(model: onnx.ModelProto, cache: str, **kw):
    """(Graph artifact, AOT artifact) of ``model`` built alike."""
    mod = from_onnx(model)
    config = {"cc.cache_dir": cache, **kw.pop("config", {})}
    graph = plait.build(mod, config={"cc.cache_dir": cache}, **kw)
    aot = plait.build(mod, executor="aot", config=config, **kw)
    return graph, aot


@pytest.mark.parametrize("name", sorted(onnx_models.MODELS))
def test_every_example_model_is_bit_identical_to_graph_and_close_to_ort(name, cache):
    model = onnx_models.MODELS[name]()
    graph, aot = both(model, cache)
    assert isinstance(aot, AotArtifact) and aot.name == "model"
    gm, am = GraphModule(graph), AotModule(aot)
    assert am.input_names == gm.input_names and am.output_names == gm.output_names
    for seed in (0, 1):
        feeds = feeds_for(model, seed)
        got, want, ref = am(**feeds), gm(**feeds), ort_run(model, feeds)
        assert len(got) == len(want) == len(ref)
        for a, g, r in zip(got, want, ref):
            assert a.dtype == g.dtype and a.shape == g.shape
            assert np.array_equal(a, g)
            np.testing.assert_allclose(a, r, rtol=0, atol=1e-4)
    check_memory_map(aot)


def check_memory_map(aot: AotArtifact) -> None:
    """memory.json: every buffer inside its pool, aligned, and no two buffers live at the same time
    overlap; each pool at least its lower bound."""
    mem = json.loads(aot.files["memory.json"])
    assert mem == json.loads(json.dumps(aot.memory))
    pools = {p["name"]: p for p in mem["pools"]}
    for p in pools.values():
        assert p["lower_bound"] <= p["bytes"] and p["bytes"] % mem["align"] == 0
    bufs = mem["buffers"]
    assert bufs, "a model computes something"
    for b in bufs:
        assert b["offset"] % mem["align"] == 0 and b["offset"] + b["bytes"] <= pools[b["pool"]]["bytes"]
    for i, a in enumerate(bufs):
        for b in bufs[i + 1:]:
            if a["pool"] != b["pool"] or a["live"][1] < b["live"][0] or b["live"][1] < a["live"][0]:
                continue
            same = a["offset"] == b["offset"] and a["kind"] == b["kind"] == "workspace" and a["live"] == b["live"]
            disjoint = a["offset"] + a["bytes"] <= b["offset"] or b["offset"] + b["bytes"] <= a["offset"]
            assert disjoint or same, (a, b)


def test_composite_target_copies_between_pieces_and_matches_graph(cache):
    """host: c; acc: c with the convolutions placed on acc: calls on acc go through the device interface,
    values crossing pieces are copied into the consumer's pool, each piece has its own pool."""
    model = onnx_models.ds_cnn(channels=16, blocks=2)
    graph, aot = both(model, cache, target="host: c; acc: c", place="Conv=acc", config={"aot.name": "kws"})
    nodes = aot.graph["nodes"]
    calls = [n for n in nodes if n["op"] == "call"]
    assert {n["piece"] for n in calls} == {"host", "acc"}
    copies = [n for n in nodes if n["op"] == "copy"]
    assert {(n["src"], n["dst"]) for n in copies} == {("host", "acc"), ("acc", "host")}
    # no call reads a value of the other piece's memory
    home = {}  # entry -> the piece whose memory holds it (constants are read in place)
    for n in nodes:
        if n["op"] == "param":
            continue
        if n["op"] == "view":  # the same bytes as its input
            if n["inputs"][0] in home:
                home[n["outputs"][0]] = home[n["inputs"][0]]
            continue
        piece = {"input": "host", "call": n.get("piece"), "copy": n.get("dst")}[n["op"]]
        if n["op"] == "call":
            assert all(home.get(e, piece) == piece for e in n["inputs"]), n
        for e in (*n["outputs"], *n.get("workspace", ())):
            home[e] = piece
    assert sorted(p["piece"] for p in aot.memory["pools"]) == ["acc", "host"]
    for b in aot.memory["buffers"]:
        assert "workspace_" + home[b["entry"]] == b["pool"]
    header = aot.files["include/plait_kws.h"]
    assert "int32_t plait_kws_acc_call(int32_t func, void *const *args);" in header
    assert "int32_t plait_kws_copy(int32_t src_piece, int32_t dst_piece, void *dst, const void *src, size_t bytes);" \
        in header
    assert "uint8_t *workspace_acc;" in header and "uint8_t *workspace_host;" in header
    entry = aot.files["src/plait_kws.c"]
    assert "plait_kws_acc_call(PLAIT_KWS_ACC_FUNC_" in entry and "plait_kws_copy(PLAIT_KWS_PIECE_HOST" in entry
    assert {"src/plait_kws_host_ops.c", "src/plait_kws_acc_ops.c"} <= set(aot.files)
    assert [s["piece"] for s in aot.metadata["sources"]][-2:] == ["host", "acc"]
    assert aot.metadata["placement"] and {p["piece"] for p in aot.metadata["placement"]} == {"host", "acc"}
    gm, am = GraphModule(graph), AotModule(aot)
    for seed in (0, 1):
        feeds = feeds_for(model, seed)
        assert all(np.array_equal(a, g) for a, g in zip(am(**feeds), gm(**feeds)))


def test_pieces_without_c_code_are_refused(cache):
    mod = from_onnx(onnx_models.mlp(sizes=(8, 16, 4)))
    with pytest.raises(AotError) as e:
        plait.build(mod, target="llvm", executor="aot", config={"cc.cache_dir": cache})
    assert str(e.value) == ("the AOT executor needs C code for every piece: piece 'llvm' (kind 'llvm') generates its "
                            "own code (tir_to_runtime); place its calls on a 'c' piece (--place) or use the graph "
                            "executor")
    with pytest.raises(AotError) as e:
        plait.build(mod, target="host: c; ort: onnxruntime", place="*=ort", executor="aot",
                    config={"cc.cache_dir": cache})
    assert str(e.value) == ("the AOT executor needs C code for every piece: piece 'ort' (kind 'onnxruntime') runs "
                            "its calls in an external runtime (relay_to_runtime); place its calls on a 'c' piece "
                            "(--place) or use the graph executor")


def test_bad_alignment_is_refused(cache):
    mod = from_onnx(onnx_models.mlp(sizes=(8, 16, 4)))
    for bad in (12, 0, "16"):
        with pytest.raises(AotError) as e:
            plait.build(mod, executor="aot", config={"cc.cache_dir": cache, "aot.align": bad})
        assert str(e.value) == f"aot.align: expected a power of two (1, 2, 4, ... bytes), got {bad!r}"


def hostile_model() -> onnx.ModelProto:
    """Inputs named like C keywords and with punctuation; outputs that could end a comment."""
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("int", "a-b.c", "x", "X")]
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("return", "*/ oops")]
    nodes = [helper.make_node("Add", ["int", "a-b.c"], ["s"]), helper.make_node("Mul", ["s", "x"], ["return"]),
             helper.make_node("Sub", ["return", "X"], ["*/ oops"])]
    return helper.make_model(helper.make_graph(nodes, "g", vi, vo), opset_imports=[helper.make_opsetid("", 17)])


def test_identifiers_from_the_model_are_sanitized(cache, tmp_path):
    model = hostile_model()
    graph, aot = both(model, cache, config={"aot.name": "3d model!"})
    assert aot.name == "model3d_model_"
    h = aot.files["include/plait_model3d_model_.h"]
    for field in ("const float *int_;", "const float *a_b_c;", "const float *x;", "const float *X;",
                  "float *return_;", "float *output___oops;"):
        assert field in h, field
    assert "#define PLAIT_MODEL3D_MODEL__X_SIZE 24u  /* input \"x\"" in h
    assert "#define PLAIT_MODEL3D_MODEL__X_1_SIZE 24u  /* input \"X\"" in h
    assert '/* output "\\x2a\\x2f oops": float32[2, 3] */' in h
    assert all("*/" not in line.split("/*", 1)[-1][:-2] for line in h.splitlines() if "/*" in line)
    assert [i["field"] for i in aot.metadata["inputs"]] == ["int_", "a_b_c", "x", "X"]
    feeds = {n: np.random.default_rng(k).standard_normal((2, 3)).astype(np.float32)
             for k, n in enumerate(("int", "a-b.c", "x", "X"))}
    for a, g in zip(AotModule(aot)(**feeds), GraphModule(graph)(**feeds)):
        assert np.array_equal(a, g)


def test_export_writes_the_directory(cache, tmp_path):
    _, aot = both(onnx_models.mlp(sizes=(8, 16, 4)), cache, config={"aot.name": "mlp", "aot.align": 64})
    out = aot.export(tmp_path / "mlp")
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == sorted(aot.files) == ["Makefile", "include/plait_mlp.h", "memory.json", "metadata.json",
                                             "src/plait_mlp.c", "src/plait_mlp_c_ops.c", "src/plait_mlp_constants.c",
                                             "src/plait_mlp_device.c", "src/plait_mlp_internal.h"]
    md = json.loads((out / "metadata.json").read_text())
    assert md["name"] == "mlp" and md["align"] == 64 and md["target"] == "c"
    assert md["inputs"] == [{"name": "x", "field": "x", "dtype": "float32", "shape": [1, 8], "bytes": 32}]
    assert md["outputs"] == [{"name": "y", "field": "y", "dtype": "float32", "shape": [1, 4], "bytes": 16}]
    assert all("-fopenmp-simd" in s["flags"] for s in md["sources"])
    assert "static uint8_t plait_mlp_pool_workspace_c[" in (out / "src/plait_mlp.c").read_text()
    assert "__attribute__((aligned(64)))" in (out / "src/plait_mlp_internal.h").read_text()
    summary = aot.memory_summary()
    pool = aot.memory["pools"][0]
    assert summary.splitlines()[1] == (f"  piece 'c': pool 'workspace_c' {pool['bytes']:,} B (lower bound {pool['lower_bound']:,} B, "
                                       f"align 64, {pool['algorithm']})")
