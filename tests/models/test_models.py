"""End-to-end on the reference models: import, type-check, text round trip, match ONNX Runtime."""

import numpy as np
import pytest

from plait.frontend.onnx import from_onnx
from plait.ir import TensorType
from plait.relay import flatten_value, infer_type, run
from plait.relay.analysis import structural_equal
from plait.relay.text import parse_module, print_module
from plait.testing import onnx_models
from plait.testing.ort_reference import reference_run


def ort_run(model, feeds):
    return reference_run(model, feeds)


def random_feeds(model, seed=0, dims=None):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in model.graph.input:
        shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param] for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


@pytest.mark.parametrize("name", sorted(onnx_models.MODELS))
def test_model_imports_roundtrips_and_matches_ort(name):
    model = onnx_models.MODELS[name]()
    mod = from_onnx(model)
    infer_type(mod)
    text = print_module(mod)
    back = parse_module(text)
    assert structural_equal(back, mod)
    assert print_module(back) == text
    feeds = random_feeds(model)
    expected = ort_run(model, feeds)
    got = flatten_value(run(mod, feeds))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-4)
    # every call carries its ONNX node name (the last node produces the output: never folded)
    assert f'name="{model.graph.node[-1].name}"' in text
    from plait.relay import Call, post_order

    assert all(c.meta.get("name") for c in post_order(mod.main.body) if isinstance(c, Call))


def test_transformer_with_symbolic_batch():
    model = onnx_models.transformer_encoder(batch="batch")
    mod = from_onnx(model)
    infer_type(mod)
    (x,) = mod.main.params
    assert x.checked_type == TensorType(("batch", 32, 64))
    assert mod.main.checked_type.ret_type == TensorType(("batch", 32, 64))
    assert structural_equal(parse_module(print_module(mod)), mod)
    feeds = random_feeds(model, seed=1, dims={"batch": 3})
    (expected,) = ort_run(model, feeds)
    np.testing.assert_allclose(run(mod, feeds), expected, rtol=0, atol=1e-4)
