"""The ``com.microsoft`` operators of ONNX Runtime's QOperator form (QGemm, QLinearAdd, QLinearMul,
QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearConcat, QLinearAveragePool,
QLinearGlobalAveragePool) have no ONNX conformance cases: a float model using every one of them is
made here, quantized by ``onnxruntime.quantization.quantize_static`` (QOperator, per channel,
calibration data from a fixed seed), and every intermediate value is a model output, compared with
ONNX Runtime's in the quantized domain: at most one step apart, on at most 0.1% of the elements."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto, numpy_helper

import plait
from plait.errors import FrontendError
from plait.executor import GraphModule
from plait.frontend import from_onnx

from plait.testing.quantized import ort_session, quantize

SHAPE = (1, 3, 8, 8)
OUTPUTS = ["a", "m", "s", "l", "cat", "p", "g", "gm", "y"]
CONTRIB = {"QGemm", "QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax", "QLinearConcat",
           "QLinearAveragePool", "QLinearGlobalAveragePool"}


def float_model(seed: int = 0) -> onnx.ModelProto:
    r = np.random.default_rng(seed)

    def w(name, shape, s=0.3):
        return numpy_helper.from_array((r.standard_normal(shape) * s).astype(np.float32), name)

    inits = [w("w1", (8, 3, 3, 3)), w("b1", (8,), 0.1), w("w2", (8, 3, 1, 1)), w("fc", (10, 16), 0.2), w("fcb", (10,), 0.1)]
    nodes = [oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), oh.make_node("Conv", ["x", "w2"], ["c2"]),
             oh.make_node("Add", ["c1", "c2"], ["a"]), oh.make_node("Mul", ["a", "c2"], ["m"]),
             oh.make_node("Sigmoid", ["m"], ["s"]), oh.make_node("LeakyRelu", ["a"], ["l"], alpha=0.1),
             oh.make_node("Concat", ["s", "l"], ["cat"], axis=1),
             oh.make_node("AveragePool", ["cat"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             oh.make_node("GlobalAveragePool", ["p"], ["g"]), oh.make_node("Flatten", ["g"], ["f"]),
             oh.make_node("Gemm", ["f", "fc", "fcb"], ["gm"], transB=1), oh.make_node("Softmax", ["gm"], ["y"], axis=-1)]
    g = oh.make_graph(nodes, "contrib", [oh.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                      [oh.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in OUTPUTS], inits)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


@pytest.fixture(scope="module", params=["uint8", "int8"])
def model(request) -> onnx.ModelProto:
    return quantize(float_model(), "qoperator", per_channel=True, activation=request.param)


def _output_scales(m: onnx.ModelProto) -> dict[str, float]:
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    return {n.output[0]: float(init[n.input[1]]) for n in m.graph.node if n.op_type == "DequantizeLinear"}


def test_every_contrib_operator_gives_onnx_runtimes_values(model):
    ms = {n.op_type for n in model.graph.node if n.domain == "com.microsoft"}
    assert ms == CONTRIB
    sess = ort_session(model)
    names = [o.name for o in model.graph.output]
    scales = _output_scales(model)
    art = GraphModule(plait.build(from_onnx(model), target="c"))
    r = np.random.default_rng(5)
    steps: dict[str, list] = {n: [] for n in names}
    for _ in range(8):
        x = r.standard_normal(SHAPE).astype(np.float32)
        for n, got, want in zip(names, art(x=x), sess.run(None, {"x": x})):
            steps[n].append(np.rint(np.abs(got.astype(np.float64) - want) / scales[n]).ravel())
    for n in names:
        s = np.concatenate(steps[n])
        print(f"{n}: {(s > 0).mean():.3%} one step off, largest {s.max()}")
        assert s.max() <= 1 and (s > 0).mean() <= 0.001, n


def test_other_contrib_operators_are_still_refused():
    node = oh.make_node("QAttention", ["x"], ["y"], domain="com.microsoft")
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [oh.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("com.microsoft", 1)])
    with pytest.raises(FrontendError, match="QAttention.*operator domain 'com.microsoft' not supported"):
        from_onnx(m)
