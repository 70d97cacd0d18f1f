"""GraphModule.get_inputs() / get_outputs(): the same names, shapes and type strings as ONNX Runtime's
InferenceSession for the same model."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import plait
from plait.executor import GraphModule
from plait.executor.graph.module import ORT_TYPES, TensorInfo
from plait.frontend.onnx import from_onnx
from plait.testing import onnx_models
from plait.testing.ort_reference import reference_session


def both(model) -> tuple[GraphModule, ort.InferenceSession]:
    gm = GraphModule(plait.build(from_onnx(model), target="c"))
    return gm, reference_session(model)


def described(args) -> list[tuple]:
    return [(a.name, list(a.shape), a.type) for a in args]


@pytest.mark.parametrize("name", ["mlp", "ds_cnn"])
def test_like_onnx_runtime_for_a_bundled_model(name):
    model = onnx_models.MODELS[name]()
    gm, sess = both(model)
    assert described(gm.get_inputs()) == described(sess.get_inputs())
    assert described(gm.get_outputs()) == described(sess.get_outputs())
    assert [i.name for i in gm.get_inputs()] == gm.input_names
    assert [o.name for o in gm.get_outputs()] == gm.output_names
    for info in gm.get_inputs() + gm.get_outputs():
        assert isinstance(info, TensorInfo) and all(type(d) is int for d in info.shape)
        assert info.dtype == "float32" and info.type == "tensor(float)"


def test_other_dtypes_and_several_inputs_and_outputs():
    a = helper.make_tensor_value_info("a", TensorProto.INT64, [2, 3])
    b = helper.make_tensor_value_info("b", TensorProto.INT64, [2, 3])
    c = helper.make_tensor_value_info("c", TensorProto.DOUBLE, [3])
    s = helper.make_tensor_value_info("sum", TensorProto.INT64, [2, 3])
    n = helper.make_tensor_value_info("neg", TensorProto.DOUBLE, [3])
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("Neg", ["c"], ["neg"])],
                              "g", [a, b, c], [s, n])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    gm, sess = both(model)
    assert described(gm.get_inputs()) == described(sess.get_inputs()) == [
        ("a", [2, 3], "tensor(int64)"), ("b", [2, 3], "tensor(int64)"), ("c", [3], "tensor(double)")]
    assert described(gm.get_outputs()) == described(sess.get_outputs())
    assert [i.dtype for i in gm.get_inputs()] == ["int64", "int64", "float64"]
    # the dtype is what set_input expects
    feeds = {i.name: np.ones(i.shape, i.dtype) for i in gm.get_inputs()}
    for got, want in zip(gm(**feeds), sess.run(None, feeds)):
        np.testing.assert_array_equal(got, want)


def test_every_plait_dtype_has_an_onnx_runtime_type_string():
    from plait.ir.types import DTYPES

    assert set(ORT_TYPES) == set(DTYPES)
    assert repr(TensorInfo.of("x", np.zeros((1, 2), np.uint8))) == (
        "TensorInfo(name='x', shape=[1, 2], type='tensor(uint8)', dtype='uint8')")
