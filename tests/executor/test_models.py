"""The reference models (bench models) built for target c and run by the graph executor match
ONNX Runtime; the artifact exports and loads back."""

import numpy as np
import pytest

import plait
from plait.executor import GraphArtifact, GraphModule
from plait.frontend.onnx import from_onnx
from plait.testing import onnx_models
from plait.testing.ort_reference import reference_run


def ort_run(model, feeds):
    return reference_run(model, feeds)


def feeds_for(model, seed):
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


@pytest.fixture(scope="module")
def cc_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


@pytest.mark.parametrize("name", sorted(onnx_models.MODELS))
def test_model_builds_for_c_and_matches_ort(name, cc_cache):
    model = onnx_models.MODELS[name]()
    art = plait.build(from_onnx(model), target="c", config={"cc.cache_dir": cc_cache})
    gm = GraphModule(art)
    assert gm.output_names == [o.name for o in model.graph.output]
    for seed in (0, 1):
        feeds = feeds_for(model, seed)
        got = gm(**feeds)
        want = ort_run(model, feeds)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-4)
    # every call of the lowered main is a PrimFunc call; the plan reuses buffers
    graph = art.graph
    assert all(n["func"] in art.ir for n in graph["nodes"] if n["op"] == "call")
    assert graph["memory"]["activation_bytes"] <= graph["memory"]["activation_bytes_naive"]


def test_artifact_export_load_roundtrip(tmp_path, cc_cache):
    model = onnx_models.ds_cnn()
    art = plait.build(from_onnx(model), target="c", config={"cc.cache_dir": cc_cache})
    back = GraphArtifact.load(art.export(tmp_path / "ds_cnn"))
    feeds = feeds_for(model, 3)
    for a, b in zip(GraphModule(art)(**feeds), GraphModule(back)(**feeds)):
        np.testing.assert_array_equal(a, b)
