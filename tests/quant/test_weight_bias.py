"""ONNX Runtime's ``WeightBiasQuantization``: a float Conv / ConvTranspose whose input is dequantized per
tensor has its float32 weight quantized to int8 (per tensor) and its bias to int32 by ONNX Runtime's
optimizer (what the QOperator unet's ConvTranspose gets); plait's QDQ pass does the same
(plait/relay/passes/qdq.py), so the outputs are ONNX Runtime's. Models made here, nothing downloaded."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto, numpy_helper

import plait
from plait.executor import GraphModule
from plait.relay.passes.qdq import weight_quantization
from plait.testing.quantized import ort_session

X_SCALE, X_ZP = 0.05, 3


def _model(op: str, quantized_out: bool, bias: bool = True) -> onnx.ModelProto:
    r = np.random.default_rng(11)
    w_shape = (4, 6, 2, 2) if op == "ConvTranspose" else (6, 4, 3, 3)
    inits = [numpy_helper.from_array((r.standard_normal(w_shape) * 0.3 + 0.05).astype(np.float32), "w"),
             numpy_helper.from_array((r.standard_normal(6) * 0.2).astype(np.float32), "b"),
             numpy_helper.from_array(np.array(X_SCALE, np.float32), "xs"),
             numpy_helper.from_array(np.array(X_ZP, np.int8), "xz"),
             numpy_helper.from_array(np.array(0.02, np.float32), "ys"),
             numpy_helper.from_array(np.array(-5, np.int8), "yz")]
    attrs = {"strides": [2, 2]} if op == "ConvTranspose" else {"pads": [1, 1, 1, 1]}
    nodes = [oh.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             oh.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             oh.make_node(op, ["xd", "w", "b"] if bias else ["xd", "w"], ["c"], **attrs)]
    if quantized_out:
        nodes += [oh.make_node("QuantizeLinear", ["c", "ys", "yz"], ["cq"]),
                  oh.make_node("DequantizeLinear", ["cq", "ys", "yz"], ["y"])]
    else:
        nodes += [oh.make_node("Identity", ["c"], ["y"])]
    g = oh.make_graph(nodes, "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                      [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 19)])


def _run(model: onnx.ModelProto) -> tuple[np.ndarray, np.ndarray]:
    x = (np.random.default_rng(2).standard_normal((1, 4, 5, 5)) * 2).astype(np.float32)
    (want,) = ort_session(model).run(None, {"x": x})
    (got,) = GraphModule(plait.build(plait.from_onnx(model), target="c"))(x=x)
    return np.asarray(got), want


@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_float_convolution_after_a_dequantize_equals_onnx_runtime(op):
    got, want = _run(_model(op, quantized_out=True))
    np.testing.assert_array_equal(got, want)  # quantized outputs: bit for bit
    got, want = _run(_model(op, quantized_out=False))  # float output: the quantized weights, float sums
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    got, want = _run(_model(op, quantized_out=False, bias=False))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_weight_quantization_is_onnx_runtime_s():
    """The range widened to hold 0, (max - min) / 255, the zero point rounded half to even."""
    assert weight_quantization(np.array([-1.0, 0.5, 3.0], np.float32)) == (np.float32(4.0 / 255), np.int8(-64))
    assert weight_quantization(np.array([0.5, 2.0], np.float32)) == (np.float32(2.0 / 255), np.int8(-128))
    assert weight_quantization(np.zeros(3, np.float32)) == (np.float32(1.0), np.int8(-128))
