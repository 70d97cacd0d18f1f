"""The QDQ patterns ONNX Runtime's optimized session runs as integer operators (its
QDQSelectorActionTransformer: DQ -> Softmax / Sigmoid / LeakyRelu -> Q become QLinearSoftmax and
table lookups) become plait's ``qnn.softmax`` and ``qnn.lookup``, so plait gives the optimized
session's outputs exactly: a float model using each is built and quantized here by
``quantize_static`` (QDQ and QOperator, int8 and uint8 activations, calibration from a fixed seed)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto, numpy_helper

import plait
from plait.errors import UnsupportedError
from plait.executor import GraphModule
from plait.frontend import from_onnx
from plait.ir.transform import PassContext
from plait.pipeline import import_stage
from plait.relay import Call
from plait.relay.visitor import post_order
from plait.testing.quantized import int8_steps, ort_session, output_scales, quantize

SHAPE = (4, 12)


def float_model(seed: int = 0) -> onnx.ModelProto:
    """A chain (each quantized value has one consumer: ONNX Runtime on x86-64 fuses a DQ -> op -> Q
    of int8 activations only when its S8-to-U8 conversion turned both ends uint8, see
    docs/quantization.md)."""
    r = np.random.default_rng(seed)

    def w(name, shape, s=0.5):
        return numpy_helper.from_array((r.standard_normal(shape) * s).astype(np.float32), name)

    nodes = [oh.make_node("Gemm", ["x", "w1", "b1"], ["h1"]), oh.make_node("Sigmoid", ["h1"], ["sg"]),
             oh.make_node("Gemm", ["sg", "w2", "b2"], ["h2"]), oh.make_node("LeakyRelu", ["h2"], ["lr"], alpha=0.2),
             oh.make_node("Gemm", ["lr", "w3", "b3"], ["h3"]), oh.make_node("Softmax", ["h3"], ["y"], axis=-1)]
    g = oh.make_graph(nodes, "elem", [oh.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                      [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      [w("w1", (12, 16)), w("b1", (16,), 0.2), w("w2", (16, 16), 0.8), w("b2", (16,), 0.2),
                       w("w3", (16, 10), 0.8), w("b3", (10,), 0.2)])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


_MODELS: dict[tuple, onnx.ModelProto] = {}


def quantized(fmt: str, act: str) -> onnx.ModelProto:
    if (fmt, act) not in _MODELS:
        _MODELS[fmt, act] = quantize(float_model(), fmt, per_channel=False, activation=act)
    return _MODELS[fmt, act]


def _ops(model: onnx.ModelProto) -> list[str]:
    mod = import_stage(from_onnx(model), PassContext()).mod
    return [n.op.name for n in post_order(mod["main"]) if isinstance(n, Call)]


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
@pytest.mark.parametrize("act", ["int8", "uint8"])
def test_softmax_sigmoid_leaky_relu_are_integer_and_exact(fmt, act):
    model = quantized(fmt, act)
    ops = _ops(model)
    assert ops.count("qnn.softmax") == 1 and ops.count("qnn.lookup") == 2 and \
        ops.count("qnn.matmul") + ops.count("qnn.dense") == 3  # (products with a constant matrix: dense)
    assert not {"nn.softmax", "sigmoid", "nn.leaky_relu", "nn.matmul"} & set(ops)
    sess = ort_session(model)
    scale = output_scales(model)["y"]
    art = GraphModule(plait.build(from_onnx(model), target="c"))
    r = np.random.default_rng(3)
    for _ in range(8):
        x = (r.standard_normal(SHAPE) * 1.5).astype(np.float32)
        assert int8_steps(art(x=x)[0], sess.run(None, {"x": x})[0], scale).max() == 0


def pool_add_mul_model(seed: int = 1) -> onnx.ModelProto:
    """Conv, GlobalAveragePool, then two Gemms whose results are added and multiplied."""
    r = np.random.default_rng(seed)

    def w(name, shape, s=0.5):
        return numpy_helper.from_array((r.standard_normal(shape) * s).astype(np.float32), name)

    nodes = [oh.make_node("Conv", ["x", "wc", "bc"], ["c"], pads=[1, 1, 1, 1]), oh.make_node("GlobalAveragePool", ["c"], ["g"]),
             oh.make_node("Flatten", ["g"], ["f"]), oh.make_node("Gemm", ["f", "wa", "ba"], ["a"]),
             oh.make_node("Gemm", ["f", "wb", "bb"], ["b"]), oh.make_node("Add", ["a", "b"], ["s"]),
             oh.make_node("Mul", ["s", "b"], ["y"])]
    g = oh.make_graph(nodes, "pam", [oh.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 8, 8))],
                      [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      [w("wc", (8, 3, 3, 3)), w("bc", (8,), 0.2), w("wa", (8, 6)), w("ba", (6,), 0.2), w("wb", (8, 6)),
                       w("bb", (6,), 0.2)])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


@pytest.mark.parametrize("fmt", ["qdq", "qoperator"])
@pytest.mark.parametrize("act", ["int8", "uint8"])
def test_global_average_pool_add_mul_are_integer_and_exact(fmt, act):
    model = quantize(pool_add_mul_model(), fmt, per_channel=True, activation=act)
    ops = _ops(model)
    assert {"qnn.add", "qnn.mul", "qnn.conv2d"} <= set(ops) and ops.count("qnn.requantize") == 4  # conv, pool, gemms
    assert not {"nn.global_avg_pool2d", "multiply", "nn.matmul", "nn.dense", "qnn.dequantize"} & set(ops[1:-1])
    sess = ort_session(model)
    scale = output_scales(model)["y"]
    art = GraphModule(plait.build(from_onnx(model), target="c"))
    r = np.random.default_rng(4)
    for _ in range(8):
        x = r.standard_normal((1, 3, 8, 8)).astype(np.float32)
        assert int8_steps(art(x=x)[0], sess.run(None, {"x": x})[0], scale).max() == 0


def concat_model(seed: int = 2) -> onnx.ModelProto:
    """Two convolutions (different output scales) concatenated, then a third one."""
    r = np.random.default_rng(seed)

    def w(name, shape, s=0.5):
        return numpy_helper.from_array((r.standard_normal(shape) * s).astype(np.float32), name)

    nodes = [oh.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), oh.make_node("Conv", ["x", "w2"], ["c2"]),
             oh.make_node("Concat", ["c1", "c2"], ["cat"], axis=1), oh.make_node("Conv", ["cat", "w3"], ["y"])]
    g = oh.make_graph(nodes, "cat", [oh.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 6, 6))],
                      [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      [w("w1", (4, 3, 3, 3)), w("w2", (5, 3, 1, 1), 2.0), w("w3", (6, 9, 1, 1))])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


@pytest.mark.parametrize("fmt,act", [("qdq", "uint8"), ("qoperator", "int8"), ("qoperator", "uint8")])
def test_concat_requantizes_through_tables_and_is_exact(fmt, act):
    """(QDQ with int8 activations: ONNX Runtime on x86-64 leaves these convolutions in float, the
    input's quantization having two consumers, see docs/quantization.md.)"""
    model = quantize(concat_model(), fmt, per_channel=False, activation=act)
    ops = _ops(model)
    assert "qnn.lookup" in ops and "concatenate" in ops and "qnn.dequantize" not in ops[:-1]
    sess = ort_session(model)
    scale = output_scales(model)["y"]
    art = GraphModule(plait.build(from_onnx(model), target="c"))
    r = np.random.default_rng(5)
    for _ in range(8):
        x = r.standard_normal((1, 3, 6, 6)).astype(np.float32)
        assert int8_steps(art(x=x)[0], sess.run(None, {"x": x})[0], scale).max() == 0


@pytest.mark.parametrize("dtype,include_pad", [("uint8", 0), ("int8", 1)])
def test_qlinear_average_pool_rounds_as_onnx_runtime(dtype, include_pad):
    """QLinearAveragePool (float window sums, then nearbyint(y / y_scale + y_zero_point)) exactly."""
    tp = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8}[dtype]
    inits = [oh.make_tensor("xs", TensorProto.FLOAT, [], [0.037]), oh.make_tensor("xz", tp, [], [5]),
             oh.make_tensor("ys", TensorProto.FLOAT, [], [0.021]), oh.make_tensor("yz", tp, [], [-3 if dtype == "int8" else 9])]
    node = oh.make_node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft",
                        kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=include_pad)
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", tp, [2, 8, 9, 9])],
                      [oh.make_tensor_value_info("y", tp, None)], inits)
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("com.microsoft", 1)])
    lo = -128 if dtype == "int8" else 0
    x = np.random.default_rng(6).integers(lo, lo + 256, (2, 8, 9, 9)).astype(dtype)
    (want,) = ort_session(m).run(None, {"x": x})
    (got,) = GraphModule(plait.build(from_onnx(m), target="c"))(x=x)
    np.testing.assert_array_equal(np.asarray(got), want)


def _qlinear_add(scale_is_input: bool) -> onnx.ModelProto:
    tp = TensorProto.UINT8
    inits = [oh.make_tensor("sa", TensorProto.FLOAT, [], [0.031]), oh.make_tensor("za", tp, [], [3]),
             oh.make_tensor("zb", tp, [], [200]), oh.make_tensor("sc", TensorProto.FLOAT, [], [0.041]),
             oh.make_tensor("zc", tp, [], [5])]
    inputs = [oh.make_tensor_value_info("a", tp, [4, 64]), oh.make_tensor_value_info("b", tp, [4, 64])]
    if scale_is_input:
        inputs.append(oh.make_tensor_value_info("sb", TensorProto.FLOAT, []))
    else:
        inits.append(oh.make_tensor("sb", TensorProto.FLOAT, [], [0.017]))
    node = oh.make_node("QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["c"], domain="com.microsoft")
    g = oh.make_graph([node], "g", inputs, [oh.make_tensor_value_info("c", tp, None)], inits)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("com.microsoft", 1)])


def test_qlinear_add_with_a_run_time_scale_runs_in_float():
    """A scale computed at run time cannot give compile-time constants: the node imports as
    dequantize, add, quantize (ties may round apart from MLAS's fused multiply-adds)."""
    const_ops, runtime_ops = _ops(_qlinear_add(False)), _ops(_qlinear_add(True))
    assert const_ops == ["qnn.add"]
    assert "qnn.add" not in runtime_ops and {"qnn.dequantize", "add", "qnn.quantize"} <= set(runtime_ops)
    r = np.random.default_rng(8)
    a, b = (r.integers(0, 256, (4, 64)).astype(np.uint8) for _ in range(2))
    feed = {"a": a, "b": b, "sb": np.array(0.017, np.float32)}
    m = _qlinear_add(True)
    (want,) = ort_session(m).run(None, feed)
    (got,) = GraphModule(plait.build(from_onnx(m), target="c"))(**feed)
    s = int8_steps(np.asarray(got), want, 1.0)
    print(f"{(s > 0).mean():.2%} one step off")
    assert s.max() <= 1 and (s > 0).mean() <= 0.01


def test_qlinear_concat_with_a_wrong_input_count_is_refused():
    node = oh.make_node("QLinearConcat", ["ys", "yz", "x", "xs"], ["y"], domain="com.microsoft", axis=1)
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", TensorProto.UINT8, [1, 2])],
                      [oh.make_tensor_value_info("y", TensorProto.UINT8, None)],
                      [oh.make_tensor("ys", TensorProto.FLOAT, [], [0.1]), oh.make_tensor("yz", TensorProto.UINT8, [], [0]),
                       oh.make_tensor("xs", TensorProto.FLOAT, [], [0.1])])
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("com.microsoft", 1)])
    with pytest.raises(UnsupportedError, match=r"QLinearConcat.*expected Y_scale, Y_zero_point and triples "
                                               r"\(X, X_scale, X_zero_point\), got 4 inputs"):
        from_onnx(m)
