"""Quantized models made in the test: a small float CNN (conv, depthwise conv, 1x1 conv, each with
a bias and a Relu, a reshape and a matrix product) quantized by ONNX Runtime's own quantizer
(``quantize_static``, QDQ and QOperator forms, per tensor and per channel, uint8 and int8
activations) on calibration data from a fixed seed; nothing is downloaded. plait imports it, the
QDQ pass makes every convolution and matrix product integer, and the compiled C must give ONNX
Runtime's outputs: equal, or at most one quantization step apart on at most 0.1% of the elements."""

from __future__ import annotations


import numpy as np
import onnx
import onnx.helper as oh
import onnxruntime as ort
import pytest
from onnx import TensorProto, numpy_helper

import plait
from plait.executor import GraphModule
from plait.frontend import from_onnx
from plait.relay import Call
from plait.relay.visitor import post_order

from plait.testing.quantized import ort_session, quantize

SHAPE = (1, 3, 8, 8)


def float_cnn(seed: int = 0) -> onnx.ModelProto:
    r = np.random.default_rng(seed)

    def w(name, shape, s=0.3):
        return numpy_helper.from_array((r.standard_normal(shape) * s).astype(np.float32), name)

    inits = [w("w1", (8, 3, 3, 3)), w("b1", (8,), 0.1), w("w2", (8, 1, 3, 3)), w("b2", (8,), 0.1),
             w("w3", (16, 8, 1, 1)), w("b3", (16,), 0.1), w("fc", (16 * 4 * 4, 10), 0.05),
             numpy_helper.from_array(np.array([1, -1], np.int64), "shape")]
    nodes = [oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), oh.make_node("Relu", ["c1"], ["r1"]),
             oh.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], group=8, strides=[2, 2]),
             oh.make_node("Relu", ["c2"], ["r2"]),
             oh.make_node("Conv", ["r2", "w3", "b3"], ["c3"]), oh.make_node("Relu", ["c3"], ["r3"]),
             oh.make_node("Reshape", ["r3", "shape"], ["f"]), oh.make_node("MatMul", ["f", "fc"], ["y"])]
    g = oh.make_graph(nodes, "cnn", [oh.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                      [oh.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


_MODELS: dict[tuple, onnx.ModelProto] = {}


def quantized(fmt: str, per_channel: bool, act: str) -> onnx.ModelProto:
    key = (fmt, per_channel, act)
    if key not in _MODELS:
        _MODELS[key] = quantize(float_cnn(), fmt, per_channel, act)
    return _MODELS[key]


def _ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return ort_session(model).run(None, {"x": x})[0]


def _output_scale(model: onnx.ModelProto) -> float:
    last = [n for n in model.graph.node if n.op_type == "DequantizeLinear"][-1]
    init = {i.name: i for i in model.graph.initializer}
    return float(numpy_helper.to_array(init[last.input[1]]))


def _steps(got: np.ndarray, want: np.ndarray, scale: float) -> np.ndarray:
    return np.rint(np.abs(got.astype(np.float64) - want) / scale)


def _inputs(n: int = 4) -> list[np.ndarray]:
    r = np.random.default_rng(5)
    return [r.standard_normal(SHAPE).astype(np.float32) for _ in range(n)]


CONFIGS = [("qdq", True, "uint8"), ("qdq", False, "int8"), ("qdq", True, "int8"), ("qoperator", True, "int8"),
           ("qoperator", False, "uint8")]


@pytest.mark.parametrize("fmt,per_channel,act", CONFIGS)
def test_float_requantization_gives_onnx_runtimes_outputs(fmt, per_channel, act):
    model = quantized(fmt, per_channel, act)
    mod = from_onnx(model)
    art = plait.build(mod, target="c")
    scale = _output_scale(model)
    steps = np.concatenate([_steps(GraphModule(art)(x=x)[0], _ort(model, x), scale).ravel() for x in _inputs()])
    off = float((steps > 0).mean())
    print(f"{fmt} per_channel={per_channel} {act}: {off:.4%} of the outputs one step off, largest {steps.max()}")
    assert steps.max() <= 1 and off <= 0.001


@pytest.mark.parametrize("fmt,per_channel,act", CONFIGS[:1] + CONFIGS[3:4])
def test_convolutions_and_matmul_become_integer_and_weights_stay_int8(fmt, per_channel, act):
    from plait.ir.transform import PassContext
    from plait.pipeline import import_stage

    model = quantized(fmt, per_channel, act)
    mod = import_stage(from_onnx(model), PassContext()).mod
    ops = [n.op.name for n in post_order(mod["main"]) if isinstance(n, Call)]
    # (the MatMul with a constant weight: qnn.dense with the weight transposed at compile time)
    assert ops.count("qnn.conv2d") == 3 and ops.count("qnn.dense") == 1 and ops.count("qnn.requantize") == 4
    assert "qnn.matmul" not in ops
    assert not {"nn.conv2d", "nn.matmul", "nn.dense"} & set(ops)
    art = plait.build(from_onnx(model), target="c")
    params = {k: np.asarray(v) for k, v in art.params.items()}
    by_dtype: dict[str, int] = {}
    for v in params.values():
        by_dtype[v.dtype.name] = by_dtype.get(v.dtype.name, 0) + v.nbytes
    weights = 8 * 3 * 9 + 8 * 9 + 16 * 8 + 256 * 10  # the int8 weights, one byte each
    assert by_dtype["int8"] == weights
    assert by_dtype["int32"] == 4 * (8 + 8 + 16)  # the biases
    float_art = plait.build(from_onnx(float_cnn()), target="c")
    float_bytes = sum(np.asarray(v).nbytes for v in float_art.params.values())
    scales = by_dtype.get("float32", 0)
    assert scales <= 4 * (8 + 8 + 16 + 10) + 16  # per-channel requantization scales and a few scalars
    assert sum(by_dtype.values()) < 0.3 * float_bytes
    # plait explain's weight bytes say the same
    from plait.pipeline.explain import explain

    weights = explain(from_onnx(model), "c").memory["c"]["used"]
    float_weights = explain(from_onnx(float_cnn()), "c").memory["c"]["used"]
    print(f"explain's weight bytes: {weights} (float model: {float_weights})")
    # (explain also counts the scalar scales and zero points the compiled code holds as immediates)
    assert 0 <= weights - sum(by_dtype.values()) <= 16 and weights < 0.3 * float_weights


def _c_source(mod) -> str:
    """The C source ``plait.build(mod, "c")`` compiles."""
    from plait.backends.c.backend import codegen_c
    from plait.driver import _composite, lowered_module
    from plait.pipeline.codegen import piece_module
    from plait.ir.transform import PassContext

    ct = _composite("c")
    piece = ct.pieces[0]
    sub = piece_module(lowered_module(mod, ct, PassContext(config={})).mod, piece)
    return codegen_c([sub[k] for k in sorted(sub)], piece.target).source


def test_generated_c_of_a_quantized_conv_accumulates_int8_loads_in_int32():
    src = _c_source(from_onnx(quantized("qdq", True, "int8")))
    start = src.index("{", src.index("int32_t fused_qnn_conv2d"))  # (the body: a fused requantize's
    body = src[start:src.index("\n}\n", start)]  # float scale may be a parameter)
    print(body)
    assert "int32_t" in body and "int8_t" in body
    assert "float" not in body.split("nearbyint")[0]  # the accumulation is integer; float only to requantize


def test_fixed_requantization_stays_within_a_few_steps_of_onnx_runtime():
    """TensorFlow Lite's fixed-point arithmetic rounds the scale to 31 bits and ties away from zero:
    a few outputs move by a step; the largest difference is printed for the report."""
    from plait.ir.transform import PassContext
    from plait.relay.passes import FoldConstant, QDQToInteger
    from plait.relay.infer import infer_type

    model = quantized("qdq", True, "uint8")
    ctx = PassContext()
    mod = ctx.run(FoldConstant(), ctx.run(QDQToInteger(mode="fixed"), infer_type(from_onnx(model))))
    modes = {n.attrs["mode"] for n in post_order(mod["main"]) if isinstance(n, Call) and n.op.name == "qnn.requantize"}
    assert modes == {"fixed"}
    art = plait.build(mod, target="c")
    scale = _output_scale(model)
    steps = np.concatenate([_steps(GraphModule(art)(x=x)[0], _ort(model, x), scale).ravel() for x in _inputs()])
    print(f"fixed requantization: largest difference {steps.max()} steps, {float((steps > 0).mean()):.2%} differ")
    assert steps.max() <= 3


@pytest.mark.parametrize("target,mode", [("c", "float"), ("c -mcpu=cortex-m0", "fixed"), ("c -mcpu=cortex-m4f", "float"),
                                         ("c -mcpu=cortex-m0 -requantize=float", "float"),
                                         ("c -requantize=fixed", "fixed")])
def test_the_requantization_follows_the_piece(target, mode):
    from plait.backends.c.backend import requantize_mode
    from plait.target import Target

    assert requantize_mode(Target(target)) == mode


def test_a_fixed_point_piece_runs_tflite_arithmetic():
    """A piece with -requantize=fixed lowers every requantization to the fixed-point one: its outputs
    are exactly those of the QDQ pass run with mode="fixed"; the float piece's are ONNX Runtime's."""
    from plait.ir.transform import PassContext
    from plait.relay.infer import infer_type
    from plait.relay.passes import QDQToInteger

    model = quantized("qdq", True, "uint8")
    fixed_art = plait.build(from_onnx(model), target="c -requantize=fixed")
    want = plait.build(PassContext().run(QDQToInteger(mode="fixed"), infer_type(from_onnx(model))), target="c")
    # a Cortex-M0 has no FPU: fixed by default (its C built for this machine to run it here)
    m0_art = plait.build(from_onnx(model), target="c -mcpu=cortex-m0",
                         config={"c.host_simulation": True, "c.cross_check": False})
    x = _inputs(1)[0]
    np.testing.assert_array_equal(GraphModule(fixed_art)(x=x)[0], GraphModule(want)(x=x)[0])
    np.testing.assert_array_equal(GraphModule(m0_art)(x=x)[0], GraphModule(want)(x=x)[0])
    from plait.relay.passes import FixedPointRequantize

    fixed = PassContext().run(FixedPointRequantize(), import_stage_mod(from_onnx(model)))
    modes = [n.attrs["mode"] for n in post_order(fixed["main"]) if isinstance(n, Call) and n.op.name == "qnn.requantize"]
    assert modes == ["fixed"] * 4


def import_stage_mod(mod):
    from plait.ir.transform import PassContext
    from plait.pipeline import import_stage

    return import_stage(mod, PassContext()).mod
