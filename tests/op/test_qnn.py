"""The quantization operators (plait/op/qnn.py, plait/op/qnn_nn.py): references against ONNX
Runtime (QuantizeLinear, DequantizeLinear, ConvInteger, MatMulInteger, and QLinearConv for the
float requantization), the fixed-point requantization against a scalar TensorFlow Lite
transcription, and both requantization modes compiled to C bit for bit. ``OP_CASES`` also runs
through the TE compute coverage test and the ONNX export round trip (tests/op/declared_cases.py)."""

from __future__ import annotations

import numpy as np
import pytest
from ort_util import run_onnx_node, run_plait_op

from plait.errors import TypeInferenceError
from plait.op import get_op
from plait.op.qnn import fixed_point_multiplier
from plait.testing.ort_reference import exact_u8s8_operands


def _i8(shape, dtype="int8", seed=0):
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


def _f(shape, seed=0, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


F32 = np.float32
TIES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, -128.5, 1e9, -1e9, np.nan], F32)
ACC = np.random.default_rng(7).integers(-40000, 40000, (2, 3, 4, 4)).astype(np.int32)
SCALES = np.array([0.0123, 0.0071, 0.000913], F32)

# 16-bit types need ONNX opset 21 (the export round trip runs at the exporter's default opset)
WIDE_CASES = {
    "qnn.quantize": [
        ([_f((3, 5), 2), np.array(0.001, F32), np.array(-20, np.int16)], {}),
        ([_f((4,), 3), np.array(0.01, F32), np.array(100, np.uint16)], {}),
    ],
    "qnn.dequantize": [
        ([_i8((5,)).astype(np.int16) * 200, np.array(0.001, F32), np.array(-20, np.int16)], {}),
        ([_i8((5,), "uint8").astype(np.uint16) * 250, np.array(0.01, F32), np.array(100, np.uint16)], {}),
    ],
}

# blocked quantization (ONNX opset 21 block_size): the scale / zero point have the input's rank,
# ceil(D / block_size) along axis (the last block may be partial)
BLOCKED_CASES = [
    ("qnn.quantize", [_f((3, 7), 4), _f((3, 3), 5, 0.05) ** 2 + F32(0.01), _i8((3, 3), seed=6)],
     {"axis": 1, "block_size": 3}),
    ("qnn.quantize", [_f((4, 2, 5), 7, 100.0), np.array([[[0.5] * 5] * 2, [[0.25] * 5] * 2], F32),
                      np.array([[[-300] * 5] * 2, [[7] * 5] * 2], np.int16)], {"axis": 0, "block_size": 2}),
    ("qnn.dequantize", [_i8((2, 6), "uint8", 8), np.array([[0.1, 0.2], [0.3, 0.4]], F32),
                        np.array([[0, 128], [1, 255]], np.uint8)], {"axis": -1, "block_size": 4}),
]

OP_CASES = {
    "qnn.quantize": [
        ([TIES, np.array(1.0, F32), np.array(0, np.int8)], {}),
        ([_f((2, 3, 4)), np.array(0.02, F32), np.array(7, np.uint8)], {}),
        ([_f((2, 3, 4), 1), np.array([0.05, 0.1, 0.2], F32), np.array([-3, 0, 5], np.int8)], {"axis": 1}),
    ],
    "qnn.dequantize": [
        ([_i8((2, 3, 4)), np.array(0.05, F32), np.array(3, np.int8)], {}),
        ([_i8((3, 4), "uint8", 1), np.array([0.1, 0.2, 0.3, 0.4], F32), np.array([0, 128, 1, 255], np.uint8)],
         {"axis": -1}),
        ([np.array([-70000, 5, 1 << 20], np.int32), np.array(0.5, F32), np.array(-2, np.int32)], {}),
    ],
    "qnn.requantize": [
        ([ACC, np.array(0.0039, F32)], {"zero_point": -5}),
        ([ACC, SCALES], {"zero_point": 128, "out_dtype": "uint8", "axis": 1}),
        ([ACC, SCALES], {"zero_point": -128, "axis": 1, "clamp_min": -128, "clamp_max": 20}),
        ([ACC.reshape(-1, 3), SCALES], {"zero_point": 3, "axis": -1, "clamp_min": 3}),
        ([ACC, *fixed_point_multiplier(SCALES)], {"zero_point": -128, "axis": 1, "mode": "fixed", "clamp_max": 90}),
        ([ACC.reshape(-1, 3), *fixed_point_multiplier(np.array([3.5, 0.0002, 0.75], F32))],
         {"zero_point": 7, "axis": -1, "mode": "fixed", "out_dtype": "int16"}),
        ([ACC, *fixed_point_multiplier(np.array([0.37], F32))], {"mode": "fixed", "out_dtype": "int32"}),
    ],
    "qnn.conv2d": [
        ([_i8((1, 4, 6, 6), "uint8"), _i8((6, 4, 3, 3), seed=1)],
         {"padding": (1, 1, 1, 1), "input_zero_point": 131, "kernel_zero_point": 0}),
        ([_i8((2, 4, 7, 5), seed=2), _i8((4, 1, 3, 3), seed=3)],
         {"groups": 4, "strides": (2, 1), "padding": (1, 0, 1, 2), "input_zero_point": -3, "kernel_zero_point": 2}),
        ([_i8((1, 2, 5, 5), "uint8", 4), _i8((4, 1, 2, 2), "uint8", 5)],
         {"groups": 2, "dilation": (2, 2), "input_zero_point": 0, "kernel_zero_point": 128}),
    ],
    "qnn.dense": [
        ([_i8((3, 16), "uint8"), _i8((5, 16), seed=1)], {"input_zero_point": 120}),
        ([_i8((2, 3, 8), seed=2), _i8((4, 8), seed=3)], {"input_zero_point": -1, "kernel_zero_point": 3}),
        # K >= 32: dot products over packed rows (int8 data shifted to uint8; uint8 data; int16 with zero points)
        ([_i8((2, 5, 64), seed=4), _i8((24, 64), seed=5)], {"input_zero_point": -7}),
        ([_i8((6, 48), "uint8", 6), _i8((10, 48), seed=7)], {"input_zero_point": 133}),
        ([_i8((3, 40), seed=8), _i8((7, 40), "uint8", 9)], {"input_zero_point": 2, "kernel_zero_point": 130}),
        ([np.full((2, 64), -128, np.int8), np.full((3, 64), -128, np.int8)], {"input_zero_point": 127}),
    ],
    "qnn.matmul": [
        ([_i8((2, 3, 8), "uint8"), _i8((8, 5), seed=1)], {"a_zero_point": 128}),
        ([_i8((4, 8), seed=2), _i8((2, 8, 3), seed=3)], {"a_zero_point": 5, "b_zero_point": -7}),
        # K >= 32 with a matrix b: b transposed into dot-product rows
        ([_i8((1, 9, 64), seed=10), _i8((64, 20), seed=11)], {"a_zero_point": 3}),
        ([_i8((5, 33), "uint8", 12), _i8((33, 6), seed=13)], {"a_zero_point": 128, "b_zero_point": -2}),
    ],
}


# ---- references against ONNX Runtime ------------------------------------------------------------


@pytest.mark.parametrize("inputs,attrs", OP_CASES["qnn.quantize"] + WIDE_CASES["qnn.quantize"])
def test_quantize_matches_onnx_runtime(inputs, attrs):
    (want,) = run_onnx_node("QuantizeLinear", inputs, attrs, opset=21)
    np.testing.assert_array_equal(run_plait_op("qnn.quantize", inputs, **attrs), want)


@pytest.mark.parametrize("inputs,attrs", OP_CASES["qnn.dequantize"] + WIDE_CASES["qnn.dequantize"])
def test_dequantize_matches_onnx_runtime(inputs, attrs):
    (want,) = run_onnx_node("DequantizeLinear", inputs, attrs, opset=21)
    np.testing.assert_array_equal(run_plait_op("qnn.dequantize", inputs, **attrs), want)


def test_quantize_to_int32_saturates():
    """ONNX Runtime has no int32 QuantizeLinear at the opsets plait exports: the numbers by hand."""
    x = np.array([2.5, -3.5, 3e9, -3e9, np.nan], F32)
    got = run_plait_op("qnn.quantize", [x, np.array(0.5, F32), np.array(10, np.int32)])
    assert got.tolist() == [15, 3, 2**31 - 1, -2**31, -2**31]


def _zps(inputs, attrs, names):
    return [np.array(attrs.get(n, 0), x.dtype) for x, n in zip(inputs, names)]


@pytest.mark.parametrize("inputs,attrs", OP_CASES["qnn.conv2d"])
def test_conv2d_matches_conv_integer(inputs, attrs):
    inputs = exact_u8s8_operands(inputs)
    onnx_attrs = {"pads": list(attrs.get("padding", (0,) * 4)), "strides": list(attrs.get("strides", (1, 1))),
                  "dilations": list(attrs.get("dilation", (1, 1))), "group": attrs.get("groups", 1)}
    (want,) = run_onnx_node("ConvInteger", inputs + _zps(inputs, attrs, ("input_zero_point", "kernel_zero_point")),
                            onnx_attrs)
    np.testing.assert_array_equal(run_plait_op("qnn.conv2d", inputs, **attrs), want)


@pytest.mark.parametrize("op,inputs,attrs", [("qnn.matmul", *c) for c in OP_CASES["qnn.matmul"]]
                         + [("qnn.dense", *c) for c in OP_CASES["qnn.dense"]])
def test_matmul_and_dense_match_matmul_integer(op, inputs, attrs):
    a, b = inputs = exact_u8s8_operands(inputs)
    names = ("a_zero_point", "b_zero_point") if op == "qnn.matmul" else ("input_zero_point", "kernel_zero_point")
    bb = b if op == "qnn.matmul" else np.ascontiguousarray(b.T)
    (want,) = run_onnx_node("MatMulInteger", [a, bb] + _zps(inputs, attrs, names))
    np.testing.assert_array_equal(run_plait_op(op, inputs, **attrs), want)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_conv_and_float_requantize_equal_qlinear_conv(per_channel, dtype):
    """qnn.conv2d + int32 bias + qnn.requantize(float) with QLinearConv's scale computation
    (x_scale * w_scale / y_scale in float32) give ONNX Runtime's QLinearConv bit for bit."""
    x, w = exact_u8s8_operands([_i8((1, 8, 9, 9), dtype, seed=11), _i8((16, 8, 3, 3), "int8", seed=12)])
    bias = np.random.default_rng(13).integers(-3000, 3000, 16).astype(np.int32)
    xs, ys = F32(0.037), F32(0.11)
    ws = (np.random.default_rng(14).uniform(0.002, 0.02, 16) if per_channel else np.array([0.01])).astype(F32)
    zx, zy = (np.array(131, np.uint8), np.array(117, np.uint8)) if dtype == "uint8" else \
        (np.array(-3, np.int8), np.array(9, np.int8))
    feeds = [x, xs, zx, w, ws if per_channel else ws.reshape(()), np.array(0, np.int8), ys, zy, bias]
    (want,) = run_onnx_node("QLinearConv", feeds, {"pads": [1, 1, 1, 1]})
    acc = run_plait_op("qnn.conv2d", [x, w], padding=(1, 1, 1, 1), input_zero_point=int(zx))
    acc = acc + bias.reshape(-1, 1, 1)
    scale = (xs * ws) / ys  # float32 arithmetic, QLinearConv's order
    got = run_plait_op("qnn.requantize", [acc, scale], zero_point=int(zy), out_dtype=dtype)
    np.testing.assert_array_equal(got, want)


# ---- fixed-point requantization --------------------------------------------------------------------


def _tflite_scalar(acc: int, mult: int, shift: int) -> int:
    """TensorFlow Lite's MultiplyByQuantizedMultiplier, transcribed one value at a time."""
    left, right = max(shift, 0), max(-shift, 0)
    x = max(min(acc * (1 << left), (1 << 31) - 1), -(1 << 31))
    ab = x * mult
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    high = int((ab + nudge) / (1 << 31)) if abs(ab + nudge) < 1 << 52 else \
        (abs(ab + nudge) >> 31) * (1 if ab + nudge >= 0 else -1)
    mask = (1 << right) - 1
    rem, threshold = high & mask, (mask >> 1) + (1 if high < 0 else 0)
    return (high >> right) + (1 if rem > threshold else 0)


def test_fixed_point_multiplier_is_tflite_quantize_multiplier():
    mult, shift = fixed_point_multiplier(np.array([0.5, 0.75, 0.0123, 1.0, 3.0, 0.0, 1e-12], F32))
    assert mult.tolist()[:4] == [1 << 30, 3 << 29, 1690499072, 1 << 30]
    assert shift.tolist() == [0, 0, -6, 1, 2, 0, 0]
    assert mult.tolist()[4:] == [3 << 29, 0, 0]
    with pytest.raises(ValueError, match="requantize: scale -1.0 is not a finite value >= 0"):
        fixed_point_multiplier(np.array([-1.0]))


def test_fixed_requantize_reference_is_tflite_arithmetic():
    acc = np.concatenate([ACC.reshape(-1), [0, 1, -1, 2**31 - 1, -2**31, 127, -129]]).astype(np.int32)
    scales = np.array([0.0123, 0.5, 0.25, 1.5, 0.000913], F32)
    mult, shift = fixed_point_multiplier(scales)
    for s, m, sh in zip(scales, mult, shift):
        got = run_plait_op("qnn.requantize", [acc, m, sh], zero_point=-7, mode="fixed")
        want = [min(max(_tflite_scalar(int(a), int(m), int(sh)) - 7, -128), 127) for a in acc]
        assert got.tolist() == want, s
    # the two modes differ by at most one step (the scales are the same numbers)
    fl = run_plait_op("qnn.requantize", [acc, scales[0]], zero_point=-7).astype(int)
    fx = run_plait_op("qnn.requantize", [acc, mult[0], shift[0]], zero_point=-7, mode="fixed").astype(int)
    assert np.abs(fl - fx).max() <= 1


def _build_c(op: str, inputs, **attrs):
    import plait
    from plait.executor import GraphModule
    from plait.relay import IRModule, call, var

    params = [var(f"x{i}", a.shape, a.dtype.name) for i, a in enumerate(inputs)]
    mod = IRModule.from_expr(call(op, *params, **attrs))
    return GraphModule(plait.build(mod, target="c"))(**{f"x{i}": a for i, a in enumerate(inputs)})[0]


@pytest.mark.parametrize("mode", ["float", "fixed"])
def test_both_requantize_modes_compile_to_c_bit_for_bit(mode):
    acc = np.concatenate([ACC.reshape(2, 3, -1), np.full((2, 3, 3), [2**31 - 1, -2**31, 0], np.int32)], axis=2)
    scales = np.array([0.0123, 1.5, 0.000913], F32)
    args = [acc, scales] if mode == "float" else [acc, *fixed_point_multiplier(scales)]
    attrs = dict(zero_point=12, out_dtype="uint8", axis=1, mode=mode, clamp_max=200)
    np.testing.assert_array_equal(_build_c("qnn.requantize", args, **attrs),
                                  run_plait_op("qnn.requantize", args, **attrs))


@pytest.mark.parametrize("op,inputs,attrs", BLOCKED_CASES)
def test_blocked_quantization_matches_onnx_runtime_reference_and_c(op, inputs, attrs):
    onnx_op = "QuantizeLinear" if op == "qnn.quantize" else "DequantizeLinear"
    (want,) = run_onnx_node(onnx_op, inputs, attrs, opset=21)
    np.testing.assert_array_equal(run_plait_op(op, inputs, **attrs), want)
    np.testing.assert_array_equal(_build_c(op, inputs, **attrs), want)


def test_blocked_quantization_exports_at_opset_21():
    from plait.frontend.onnx import from_onnx
    from plait.frontend.onnx_export import exportable, to_onnx
    from plait.relay import Function, call, run, var

    op, inputs, attrs = BLOCKED_CASES[0]
    params = [var(f"x{i}", a.shape, a.dtype.name) for i, a in enumerate(inputs)]
    y = call(op, *params, **attrs)
    assert exportable(y, opset=20) == (
        False, "call of 'qnn.quantize': blocked QuantizeLinear needs ONNX opset >= 21 (exporting opset 20)")
    model = to_onnx(Function(tuple(params), y), opset=21)
    (node,) = model.graph.node
    assert (node.op_type, {a.name: a.i for a in node.attribute}) == ("QuantizeLinear", {"axis": 1, "block_size": 3})
    back = from_onnx(model)
    feeds = {f"x{i}": a for i, a in enumerate(inputs)}
    np.testing.assert_array_equal(run(back, feeds), run_plait_op(op, inputs, **attrs))


# ---- relations --------------------------------------------------------------------------------------


@pytest.mark.parametrize("op,inputs,attrs,message", [
    ("qnn.quantize", [_f((2, 3)), np.array([0.1, 0.2], F32), np.array([0, 0], np.int8)], {},
     "quantize: scale: expected 3 values (dim 1 of the input), got Tensor[(2,), float32]"),
    ("qnn.dequantize", [_i8((2,)), np.array(0.1, F32), np.array(0, np.uint8)], {},
     "dequantize: zero_point: expected int8 (the input's dtype), got Tensor[(), uint8]"),
    ("qnn.requantize", [ACC, SCALES], {"axis": 1, "mode": "fixed"},
     "requantize: mode 'fixed' takes (input, multiplier, shift), got 2 arguments"),
    ("qnn.requantize", [ACC, SCALES], {"axis": 1, "zero_point": 300},
     "requantize: zero_point: expected a value in [-128, 127], got 300"),
    ("qnn.conv2d", [_i8((1, 2, 4, 4)), _i8((2, 2, 3, 3))], {"input_zero_point": 200},
     "conv2d: input_zero_point: expected a value in [-128, 127] (int8), got 200"),
    ("qnn.dense", [_f((2, 4)), _i8((3, 4))], {}, "dense: data: expected int8 or uint8, got Tensor[(2, 4), float32]"),
    ("qnn.quantize", [_f((3, 7)), np.full((3, 2), 0.1, F32), np.zeros((3, 2), np.int8)], {"block_size": 3},
     "quantize: scale: dim 1: expected 3 (ceil(7 / block_size 3)), got Tensor[(3, 2), float32]"),
    ("qnn.dequantize", [_i8((3, 6)), np.full((2, 2), 0.1, F32), np.zeros((2, 2), np.int8)], {"block_size": 3},
     "dequantize: scale: dim 0: expected 3 (the input's), got Tensor[(2, 2), float32]"),
    ("qnn.dequantize", [_i8((3, 6)), np.full((3, 2), 0.1, F32), np.zeros((2,), np.int8)], {"block_size": 3},
     "dequantize: zero_point: blocked quantization expects the input's rank 2 (>= 1), got Tensor[(2,), int8]"),
])
def test_relations_reject_bad_arguments(op, inputs, attrs, message):
    with pytest.raises(TypeInferenceError) as exc:
        run_plait_op(op, inputs, **attrs)
    assert message in str(exc.value)


def test_integer_convolution_cost_is_the_float_ones():
    from plait.ir import TensorType

    args = (TensorType((1, 4, 8, 8), "int8"), TensorType((8, 4, 3, 3), "int8"))
    attrs = get_op("qnn.conv2d").make_attrs({"padding": (1, 1, 1, 1)})
    out = get_op("qnn.conv2d").rel(args, attrs)
    assert out == TensorType((1, 8, 8, 8), "int32")
    cost = get_op("qnn.conv2d").cost(args, out, attrs)
    assert cost.flops == 2 * 8 * 64 * 36 and cost.bytes_read == 256 + 288 and cost.bytes_written == 4 * 512
