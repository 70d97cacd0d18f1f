"""Converters vs ONNX Runtime, especially where the lowering depends on the opset (attributes that
became inputs, Softmax's 2-D coercion) or is a composition (Gemm, 1-D conv, Einsum, OneHot...)."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_util import assert_matches_ort, make_model, one_node, ort_run, plait_run, tensor_info
from onnx import TensorProto, helper

RNG = np.random.default_rng(7)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def i64(*values):
    return np.array(values, dtype=np.int64)


CASES = [
    # (id, op_type, inputs, attrs, opset, constants, n_outputs)
    ("softmax11_axis1", "Softmax", {"x": f32(2, 3, 4)}, {"axis": 1}, 11, (), 1),
    ("softmax13_axis1", "Softmax", {"x": f32(2, 3, 4)}, {"axis": 1}, 13, (), 1),
    ("logsoftmax11_axis0", "LogSoftmax", {"x": f32(2, 3, 4)}, {"axis": 0}, 11, (), 1),
    ("hardmax11", "Hardmax", {"x": f32(2, 3, 4)}, {"axis": 1}, 11, (), 1),
    ("hardmax13", "Hardmax", {"x": f32(2, 3, 4)}, {"axis": 1}, 13, (), 1),
    ("split11_attr", "Split", {"x": f32(6, 2)}, {"split": [1, 5]}, 11, (), 2),
    ("split13_input", "Split", {"x": f32(6, 2), "s": i64(4, 2)}, {}, 13, ("s",), 2),
    ("split18_uneven", "Split", {"x": f32(7, 2)}, {"num_outputs": 3}, 18, (), 3),
    ("squeeze11", "Squeeze", {"x": f32(1, 3, 1)}, {"axes": [0, -1]}, 11, (), 1),
    ("squeeze13", "Squeeze", {"x": f32(1, 3, 1), "a": i64(2)}, {}, 13, ("a",), 1),
    ("unsqueeze11", "Unsqueeze", {"x": f32(3, 2)}, {"axes": [0, 3]}, 11, (), 1),
    ("unsqueeze13", "Unsqueeze", {"x": f32(3, 2), "a": i64(-1, 0)}, {}, 13, ("a",), 1),
    ("reducesum11", "ReduceSum", {"x": f32(2, 3, 4)}, {"axes": [1], "keepdims": 0}, 11, (), 1),
    ("reducesum13", "ReduceSum", {"x": f32(2, 3, 4), "a": i64(0, 2)}, {}, 13, ("a",), 1),
    ("reducemean18_noop", "ReduceMean", {"x": f32(2, 3)}, {"noop_with_empty_axes": 1}, 18, (), 1),
    ("reducemax18_all", "ReduceMax", {"x": f32(2, 3)}, {"keepdims": 0}, 18, (), 1),
    ("reducel2_11", "ReduceL2", {"x": f32(2, 3)}, {"axes": [1]}, 11, (), 1),
    ("clip6_attrs", "Clip", {"x": f32(4, 3)}, {"min": -0.5, "max": 0.5}, 6, (), 1),
    ("clip11_inputs", "Clip", {"x": f32(4, 3), "lo": np.float32(-0.2), "hi": np.float32(0.3)}, {}, 11,
     ("lo", "hi"), 1),
    ("clip13_int_runtime_min", "Clip", {"x": np.arange(-4, 4, dtype=np.int32), "lo": np.int32(-2)}, {}, 13, (), 1),
    ("pad11_reflect", "Pad", {"x": f32(3, 4), "p": i64(1, 2, 1, 2)}, {"mode": "reflect"}, 11, ("p",), 1),
    ("pad19_wrap_axes", "Pad", {"x": f32(2, 3, 4), "p": i64(2, 1), "v": None, "ax": i64(-1)},
     {"mode": "wrap"}, 19, ("p", "ax"), 1),
    ("pad18_constant_value", "Pad", {"x": f32(2, 3), "p": i64(0, 1, 2, 0), "v": np.float32(7.5)}, {}, 18,
     ("p", "v"), 1),
    ("pad2_attrs_edge", "Pad", {"x": f32(2, 3)}, {"pads": [1, 0, 0, 2], "mode": "edge"}, 7, (), 1),
    ("gemm_trans_alpha_beta", "Gemm", {"a": f32(4, 3), "b": f32(5, 4), "c": f32(5)},
     {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}, 13, ("b",), 1),
    ("gemm_runtime_b", "Gemm", {"a": f32(2, 3), "b": f32(3, 4)}, {}, 13, (), 1),
    ("conv1d_same_bias", "Conv", {"x": f32(1, 2, 9), "w": f32(4, 2, 3), "b": f32(4)},
     {"auto_pad": "SAME_UPPER", "strides": [2]}, 13, ("w", "b"), 1),
    ("conv2d_groups_dilation", "Conv", {"x": f32(1, 4, 7, 7), "w": f32(6, 2, 3, 3)},
     {"group": 2, "dilations": [2, 1], "pads": [1, 0, 2, 1]}, 13, ("w",), 1),
    ("convtranspose_output_shape", "ConvTranspose", {"x": f32(1, 2, 3, 3), "w": f32(2, 3, 3, 3)},
     {"strides": [3, 2], "output_shape": [10, 8]}, 13, ("w",), 1),
    ("maxpool1d", "MaxPool", {"x": f32(1, 2, 9)}, {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}, 13, (), 1),
    ("avgpool_same_lower", "AveragePool", {"x": f32(1, 1, 5, 6)},
     {"kernel_shape": [3, 2], "auto_pad": "SAME_LOWER", "strides": [2, 2]}, 13, (), 1),
    ("avgpool_include_pad_ceil", "AveragePool", {"x": f32(1, 1, 5, 5)},
     {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1, "ceil_mode": 1, "strides": [2, 2]}, 13,
     (), 1),
    ("global_avg_3d", "GlobalAveragePool", {"x": f32(2, 3, 5)}, {}, 13, (), 1),
    ("resize_scales_linear", "Resize", {"x": f32(1, 2, 3, 4), "roi": None, "s": np.array([1, 1, 2, 1.5], np.float32)},
     {"mode": "linear"}, 13, ("s",), 1),
    ("resize_sizes_axes_nearest", "Resize", {"x": f32(2, 5, 3), "roi": None, "s": None, "z": i64(7)},
     {"axes": [1], "nearest_mode": "ceil"}, 18, ("z",), 1),
    ("slice_negative_steps", "Slice", {"x": f32(5, 6), "s": i64(-1, 4), "e": i64(-100, 0), "a": i64(0, 1),
                                       "t": i64(-2, -1)}, {}, 13, ("s", "e", "a", "t"), 1),
    ("gather_negative", "Gather", {"x": f32(4, 3), "i": np.array([[-1, 0], [2, -4]], np.int64)}, {"axis": 0}, 13,
     ("i",), 1),
    ("expand", "Expand", {"x": f32(3, 1), "s": i64(2, 1, 4)}, {}, 13, ("s",), 1),
    ("tile", "Tile", {"x": f32(2, 3), "r": i64(2, 1)}, {}, 13, ("r",), 1),
    ("onehot_axis0", "OneHot", {"i": np.array([[1, -1], [5, 0]], np.int64), "d": np.float32(4),
                                "v": np.array([-2, 3], np.float32)}, {"axis": 0}, 13, ("d", "v"), 1),
    ("trilu_lower_k", "Trilu", {"x": f32(2, 3, 4), "k": np.int64(1)}, {"upper": 0}, 14, ("k",), 1),
    ("depth_to_space_crd", "DepthToSpace", {"x": f32(1, 8, 2, 3)}, {"blocksize": 2, "mode": "CRD"}, 13, (), 1),
    ("space_to_depth", "SpaceToDepth", {"x": f32(1, 2, 4, 6)}, {"blocksize": 2}, 13, (), 1),
    ("pow_int_float", "Pow", {"x": np.array([1, 2, 3], np.int32), "y": np.array([2.0, 0.5, 3], np.float32)}, {},
     15, (), 1),
    ("mean_variadic", "Mean", {"a": f32(2, 3), "b": f32(3), "c": f32(1, 3)}, {}, 13, (), 1),
    ("max_variadic", "Max", {"a": f32(2, 3), "b": f32(3)}, {}, 13, (), 1),
    ("bitshift_right", "BitShift", {"x": np.array([16, 5], np.uint32), "y": np.array([2, 1], np.uint32)},
     {"direction": "RIGHT"}, 13, (), 1),
    ("mod_fmod", "Mod", {"x": f32(5), "y": f32(5)}, {"fmod": 1}, 13, (), 1),
    ("cast_to_int", "Cast", {"x": f32(6) * 10}, {"to": TensorProto.INT32}, 13, (), 1),
    ("castlike", "CastLike", {"x": f32(6) * 10, "t": np.zeros(1, np.float16)}, {}, 15, (), 1),
    ("layernorm_no_bias", "LayerNormalization", {"x": f32(2, 3, 4), "s": f32(3, 4)}, {"axis": -2}, 17, ("s",), 1),
    ("batchnorm", "BatchNormalization", {"x": f32(2, 3, 4), "g": f32(3), "b": f32(3), "m": f32(3),
                                         "v": np.abs(f32(3)) + 0.5}, {"epsilon": 1e-3}, 15, ("g", "b", "m", "v"), 1),
    ("instancenorm", "InstanceNormalization", {"x": f32(2, 3, 4, 5), "g": f32(3), "b": f32(3)}, {}, 13, ("g", "b"), 1),
    ("einsum_batch_matmul", "Einsum", {"a": f32(2, 3, 4), "b": f32(2, 4, 5)}, {"equation": "bij,bjk->bik"}, 13, (), 1),
    ("einsum_transpose_sum", "Einsum", {"a": f32(2, 3, 4)}, {"equation": "ijk->ki"}, 13, (), 1),
    ("einsum_implicit_outer", "Einsum", {"a": f32(3), "b": f32(4)}, {"equation": "i,j"}, 13, (), 1),
    ("einsum_ellipsis", "Einsum", {"a": f32(2, 3, 4), "b": f32(4, 5)}, {"equation": "...j,jk->...k"}, 13, (), 1),
    ("swish_alpha", "HardSigmoid", {"x": f32(4, 3)}, {"alpha": 0.3, "beta": 0.4}, 13, (), 1),
    ("lpnormalization_l1", "LpNormalization", {"x": f32(3, 4)}, {"p": 1, "axis": 0}, 13, (), 1),
    ("dequantize_per_axis", "DequantizeLinear", {"x": RNG.integers(0, 255, (2, 3, 2)).astype(np.uint8),
                                                 "s": np.array([0.1, 0.2, 0.5], np.float32),
                                                 "z": np.array([1, 2, 3], np.uint8)}, {"axis": 1}, 13, ("s", "z"), 1),
    ("quantize_int8", "QuantizeLinear", {"x": f32(10) * 40, "s": np.float32(0.5), "z": np.int8(-3)}, {}, 13,
     ("s", "z"), 1),
    ("topk_smallest_ties", "TopK", {"x": np.array([[3, 1, 1, 2], [0, 0, 5, 5], [2, 2, 2, 2]], np.float32),
                                     "k": i64(3)}, {"axis": 1, "largest": 0}, 11, ("k",), 2),
    ("topk_int_axis0", "TopK", {"x": RNG.integers(-5, 5, (4, 3)).astype(np.int64), "k": i64(2)}, {"axis": 0}, 11,
     ("k",), 2),
    ("scatter_elements_add_dup", "ScatterElements", {"d": f32(3, 4), "i": np.array([[1, 1], [2, -1]], np.int64),
                                                     "u": f32(2, 2)}, {"axis": 1, "reduction": "add"}, 18, ("i",), 1),
    ("scatternd_max", "ScatterND", {"d": f32(4, 3), "i": np.array([[1], [3], [1]], np.int64), "u": f32(3, 3)},
     {"reduction": "max"}, 18, ("i",), 1),
    ("scatternd_none", "ScatterND", {"d": f32(2, 3), "i": np.array([[1, 2], [0, 0]], np.int64), "u": f32(2)}, {},
     13, ("i",), 1),
    ("reverse_sequence", "ReverseSequence", {"x": f32(3, 5, 2), "l": np.array([1, 5, 3], np.int64)},
     {"batch_axis": 0, "time_axis": 1}, 13, ("l",), 1),
    ("range_folded", "Range", {"a": np.int64(10), "b": np.int64(-2), "c": np.int64(-3)}, {}, 13, ("a", "b", "c"), 1),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_converter_matches_onnxruntime(case):
    _, op_type, inputs, attrs, opset, constants, n_out = case
    inputs = {k: (None if v is None else np.asarray(v)) for k, v in inputs.items()}
    model, feeds = one_node(op_type, inputs, attrs, n_outputs=n_out, opset=opset, constants=constants)
    assert_matches_ort(model, feeds)


def test_legacy_broadcast_opset6():
    # ONNX Runtime has no kernels for these old versions: compare with numpy
    x, y = f32(2, 3, 4), f32(3)
    model, feeds = one_node("Add", {"x": x, "y": y}, {"broadcast": 1, "axis": 1}, opset=6)
    np.testing.assert_allclose(plait_run(model, feeds)[0], x + y.reshape(3, 1), rtol=1e-6)
    model, feeds = one_node("PRelu", {"x": x, "s": y}, {}, opset=6, constants=("s",))
    np.testing.assert_allclose(plait_run(model, feeds)[0], np.where(x < 0, x * y.reshape(3, 1), x), rtol=1e-6)


def test_if_with_runtime_condition_matches_ort():
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [3])])
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)
    model = make_model([node], [tensor_info("c", np.bool_, ()), tensor_info("x", np.float32, (3,))],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    x = np.array([-1.0, 2.0, -3.0], np.float32)
    for c in (True, False):
        feeds = {"c": np.array(c), "x": x}
        np.testing.assert_array_equal(plait_run(model, feeds)[0], ort_run(model, feeds)[0])


def _rnn_case(op, gates, direction, layout, extra_attrs, with_states=True, peepholes=False):
    d = 2 if direction == "bidirectional" else 1
    seq, batch, inp, hid = 4, 3, 5, 6
    x = f32(batch, seq, inp) if layout else f32(seq, batch, inp)
    inputs = {"x": x, "w": f32(d, gates * hid, inp) * 0.5, "r": f32(d, gates * hid, hid) * 0.5,
              "b": f32(d, 2 * gates * hid) * 0.5, "lens": None}
    state_shape = (batch, d, hid) if layout else (d, batch, hid)
    if with_states:
        inputs["h0"] = f32(*state_shape)
        if op == "LSTM":
            inputs["c0"] = f32(*state_shape)
    if peepholes:
        inputs["p"] = f32(d, 3 * hid)
    attrs = {"hidden_size": hid, "direction": direction, "layout": layout, **extra_attrs}
    n_out = 3 if op == "LSTM" else 2
    return one_node(op, inputs, attrs, n_outputs=n_out, opset=14, constants=("w", "r", "b", "p"))


@pytest.mark.parametrize("op, gates, direction, layout, attrs, peep", [
    ("LSTM", 4, "bidirectional", 0, {}, True),
    ("LSTM", 4, "reverse", 0, {"clip": 0.7}, False),
    ("GRU", 3, "bidirectional", 0, {"linear_before_reset": 1}, False),
    ("GRU", 3, "forward", 0, {"activations": ["HardSigmoid", "LeakyRelu"], "activation_alpha": [0.3, 0.2],
                              "activation_beta": [0.4]}, False),
    ("RNN", 1, "reverse", 0, {"activations": ["Relu"], "clip": 1.5}, False),
])
def test_recurrent_layers_unrolled_match_ort(op, gates, direction, layout, attrs, peep):
    # (ONNX Runtime has no layout=1 kernels; the ONNX conformance cases cover batchwise layouts)
    model, feeds = _rnn_case(op, gates, direction, layout, attrs, peepholes=peep)
    assert_matches_ort(model, feeds, rtol=1e-4, atol=1e-5)


def test_scan_unrolled_matches_ort():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Mul", ["s_out", "x_t"], ["y_t"])],
        "body", [tensor_info("s_in", np.float32, (2,)), tensor_info("x_t", np.float32, (2,))],
        [tensor_info("s_out", np.float32, (2,)), tensor_info("y_t", np.float32, (2,))])
    node = helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], num_scan_inputs=1, body=body,
                            scan_input_directions=[1], scan_output_axes=[1])
    model = make_model([node], [tensor_info("s0", np.float32, (2,)), tensor_info("xs", np.float32, (3, 2))],
                       [tensor_info("s", np.float32, (2,)), tensor_info("ys", np.float32, (2, 3))], opset=16)
    assert_matches_ort(model, {"s0": f32(2), "xs": f32(3, 2)})


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumprod_matches_numpy(exclusive, reverse):
    model, feeds = one_node("CumProd", {"x": f32(3, 4), "a": np.int64(1)}, {"exclusive": exclusive, "reverse": reverse},
                            opset=26, constants=("a",))
    x = feeds["x"][:, ::-1] if reverse else feeds["x"]
    y = np.cumprod(x, axis=1)
    if exclusive:
        y = np.concatenate([np.ones((3, 1), np.float32), y[:, :-1]], axis=1)
    np.testing.assert_allclose(plait_run(model, feeds)[0], y[:, ::-1] if reverse else y, rtol=1e-6)
