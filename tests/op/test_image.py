"""image.resize2d (ONNX Resize), depth_to_space, space_to_depth: references vs ONNX Runtime; relations; errors."""

from __future__ import annotations

import numpy as np
import pytest
from ort_util import assert_close, run_onnx_node, run_plait_op
from test_transform import data, infer, rel_error

from plait.ir import Cost, OpPattern, TensorType
from plait.op import get_op

I64, F32 = np.int64, np.float32
COORD_MODES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
# (input H, W) -> (output H, W): up, down, mixed, to 1x1, exact 2x, width only
SIZES = [((4, 5), (7, 3)), ((3, 3), (6, 9)), ((6, 8), (3, 4)), ((5, 7), (1, 1)), ((2, 3), (4, 6)),
         ((5, 5), (5, 8)), ((7, 6), (10, 4))]


def resize_vs_ort(x, size, *, scales=None, roi=None, method="nearest", mode="half_pixel", **extra):
    """plait's image.resize2d vs ONNX Resize (opset 19: half_pixel_symmetric) given sizes or scales."""
    attrs = {"size": size, "method": method, "coordinate_transformation_mode": mode, "scales": scales,
             "roi": roi, **extra}
    got = run_plait_op("image.resize2d", [x], **attrs)
    onnx_attrs = {"mode": method, "coordinate_transformation_mode": mode}
    renames = {"nearest_mode": "nearest_mode", "cubic_alpha": "cubic_coeff_a", "exclude_outside": "exclude_outside",
               "extrapolation_value": "extrapolation_value"}
    onnx_attrs.update({renames[k]: (int(v) if isinstance(v, bool) else v) for k, v in extra.items()})
    onnx_roi = None if roi is None else np.array([0, 0, roi[0], roi[1], 1, 1, roi[2], roi[3]], F32)
    if scales is None:
        inputs = [x, onnx_roi, None, np.array(x.shape[:2] + tuple(size), I64)]
    else:
        inputs = [x, onnx_roi if onnx_roi is not None else np.zeros(0, F32), np.array((1, 1) + tuple(scales), F32)]
    (want,) = run_onnx_node("Resize", inputs, onnx_attrs, opset=19)
    if method == "linear" and x.dtype in (F32, np.int8, np.uint8):  # ONNX Runtime's operation order: bit for bit
        np.testing.assert_array_equal(got, want)
        return
    assert_close(got, want, **({"rtol": 1e-5, "atol": 1e-4} if method == "cubic" else {}))


@pytest.mark.parametrize("mode", COORD_MODES)
@pytest.mark.parametrize("nearest_mode", NEAREST_MODES)
def test_resize_nearest_vs_ort(mode, nearest_mode):
    for k, (hw, size) in enumerate(SIZES):
        resize_vs_ort(data((2, 3) + hw, key=k), size, mode=mode, nearest_mode=nearest_mode)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "float16"])
def test_resize_nearest_dtypes_vs_ort(dtype):
    for k, (hw, size) in enumerate(SIZES[:4]):
        resize_vs_ort(data((1, 2) + hw, dtype, key=k), size, mode="asymmetric", nearest_mode="floor")
        resize_vs_ort(data((1, 2) + hw, dtype, key=k), size)


@pytest.mark.parametrize("mode", COORD_MODES)
def test_resize_linear_vs_ort(mode):
    for k, (hw, size) in enumerate(SIZES):
        resize_vs_ort(data((2, 2) + hw, key=k), size, method="linear", mode=mode)
    x = data((1, 2, 4, 5), "float16")
    resize_vs_ort(x, (7, 3), method="linear", mode=mode)


@pytest.mark.parametrize("mode", COORD_MODES)
@pytest.mark.parametrize("alpha,exclude", [(-0.75, False), (-0.5, False), (-0.75, True), (-0.6, True)])
def test_resize_cubic_vs_ort(mode, alpha, exclude):
    for k, (hw, size) in enumerate(SIZES):
        resize_vs_ort(data((1, 2) + hw, key=k), size, method="cubic", mode=mode, cubic_alpha=alpha,
                      exclude_outside=exclude)


@pytest.mark.parametrize("method", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("mode", COORD_MODES)
def test_resize_with_scales_vs_ort(method, mode):
    # ONNX scales map coordinates with the given factor, not output / input size
    for k, (hw, scales) in enumerate([((5, 7), (0.6, 1.7)), ((4, 4), (2.5, 0.5)), ((6, 3), (1.0, 3.0))]):
        size = tuple(int(F32(s) * F32(d)) for s, d in zip(scales, hw))  # ONNX Runtime truncates
        resize_vs_ort(data((1, 2) + hw, key=k), size, scales=scales, method=method, mode=mode)


@pytest.mark.parametrize("method", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize_vs_ort(method):
    # note: ONNX Runtime copies the input when output size == input size (ignoring roi), so sizes differ here
    cases = [((4, 5), (3, 7), (0.2, 0.1, 0.9, 0.7)), ((6, 6), (5, 4), (-0.3, 0.4, 1.2, 1.6)),
             ((3, 4), (1, 1), (0.1, 0.2, 0.6, 0.9)), ((5, 3), (8, 2), (0.5, -0.5, 0.0, 0.5))]
    for k, (hw, size, roi) in enumerate(cases):
        resize_vs_ort(data((1, 2) + hw, key=k), size, roi=roi, method=method, mode="tf_crop_and_resize",
                      extrapolation_value=-7.5)
    resize_vs_ort(data((1, 1, 4, 4)), (6, 6), method=method, mode="tf_crop_and_resize")  # default roi


@pytest.mark.parametrize("method", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_unscaled_axis_follows_onnx_spec(method):
    """roi applies to an axis whose size does not change (ONNX reference); ONNX Runtime skips it there."""
    import onnx.helper as oh
    from onnx.reference import ReferenceEvaluator

    x, roi, size = data((1, 2, 5, 8)), (0.21, 0.49, 0.3, 0.43), (9, 8)
    node = oh.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode=method,
                        coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=3.0)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", 1, None),
                                        oh.make_tensor_value_info("roi", 1, None),
                                        oh.make_tensor_value_info("sizes", 7, None)],
                          [oh.make_empty_tensor_value_info("y")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 19)])
    (want,) = ReferenceEvaluator(model).run(None, {
        "x": x, "roi": np.array([0, 0, roi[0], roi[1], 1, 1, roi[2], roi[3]], F32), "sizes": np.array((1, 2, 9, 8), I64)})
    got = run_plait_op("image.resize2d", [x], size=size, roi=roi, method=method,
                       coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=3.0)
    assert_close(got, want, rtol=1e-5, atol=1e-4)


def test_resize_exact_values():
    x = np.arange(4, dtype=F32).reshape(1, 1, 2, 2)
    near = run_plait_op("image.resize2d", [x], size=(4, 4))
    np.testing.assert_array_equal(near[0, 0], [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]])
    lin = run_plait_op("image.resize2d", [x], size=(3, 3), method="linear", coordinate_transformation_mode="align_corners")
    np.testing.assert_allclose(lin[0, 0], [[0, 0.5, 1], [1, 1.5, 2], [2, 2.5, 3]])
    b = np.array([[[[True, False], [False, True]]]])
    np.testing.assert_array_equal(run_plait_op("image.resize2d", [b], size=(2, 4))[0, 0],
                                  [[True, True, False, False], [False, False, True, True]])


def test_resize_types_and_errors():
    assert infer("image.resize2d", ("n", 3, "h", "w"), size=(8, 9)) == TensorType(("n", 3, 8, 9))
    assert infer("image.resize2d", TensorType((1, 2, 3, 4), "int64"), size=(6, 8)) == TensorType((1, 2, 6, 8), "int64")
    assert rel_error("image.resize2d", (2, 3, 4), size=(4, 4)) == (
        "image.resize2d: data: expected a 4-D NCHW tensor, got Tensor[(2, 3, 4), float32]")
    assert rel_error("image.resize2d", TensorType((1, 1, 2, 2), "int32"), size=(4, 4), method="linear") == (
        "image.resize2d: linear interpolation: expected a floating-point, int8 or uint8 tensor, got int32")
    assert rel_error("image.resize2d", TensorType((1, 1, 2, 2), "int8"), size=(4, 4), method="cubic") == (
        "image.resize2d: cubic interpolation: expected a floating-point tensor, got int8")
    assert rel_error("image.resize2d", (1, 1, 2, 2), size=(4,)) == (
        "image.resize2d: expected size of 2 sizes >= 0 (out H, W), got (4,)")
    assert rel_error("image.resize2d", (1, 1, 2, 2), size=(4, 4), roi=(0.0, 1.0)) == (
        "image.resize2d: expected roi of 4 values (h_start, w_start, h_end, w_end), got (0.0, 1.0)")
    assert rel_error("image.resize2d", (1, 1, 2, 2), size=(4, 4), scales=(2.0, 0.0)) == (
        "image.resize2d: expected scales of 2 values > 0 (H, W), got (2.0, 0.0)")
    op = get_op("image.resize2d")
    assert op.pattern == OpPattern.INJECTIVE
    t_in, t_out = TensorType((1, 2, 4, 4)), TensorType((1, 2, 8, 8))
    assert op.cost((t_in,), t_out, op.make_attrs({"size": (8, 8), "method": "linear"})) == Cost(1024.0, 128.0, 512.0)
    assert op.cost((t_in,), t_out, op.make_attrs({"size": (8, 8)})).flops == 0.0


# ---- depth_to_space, space_to_depth ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "uint8", "int8"])  # ONNX Runtime's types
def test_depth_to_space_vs_ort(mode, dtype):
    for shape, b in [((2, 8, 3, 4), 2), ((1, 9, 2, 2), 3), ((1, 4, 1, 1), 1)]:
        x = data(shape, dtype)
        got = run_plait_op("depth_to_space", [x], block_size=b, mode=mode)
        (want,) = run_onnx_node("DepthToSpace", [x], {"blocksize": b, "mode": mode})
        assert_close(got, want)


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_space_to_depth_vs_ort_and_inverse(dtype):
    for shape, b in [((2, 3, 4, 6), 2), ((1, 2, 3, 6), 3)]:
        x = data(shape, dtype)
        got = run_plait_op("space_to_depth", [x], block_size=b)
        (want,) = run_onnx_node("SpaceToDepth", [x], {"blocksize": b})
        assert_close(got, want)
        for mode in ["DCR", "CRD"]:  # space_to_depth undoes depth_to_space in each mode
            s2d = run_plait_op("space_to_depth", [x], block_size=b, mode=mode)
            assert_close(run_plait_op("depth_to_space", [s2d], block_size=b, mode=mode), x)


def test_depth_space_any_dtype():
    x = data((1, 4, 2, 3), "bool")
    y = run_plait_op("depth_to_space", [x], block_size=2)
    assert y.dtype == np.bool_ and y.shape == (1, 1, 4, 6)
    assert_close(run_plait_op("space_to_depth", [y], block_size=2), x)


def test_depth_space_types_and_errors():
    assert infer("depth_to_space", ("n", 8, "h", 4), block_size=2) == TensorType(("n", 2, "?", 8))
    assert infer("space_to_depth", ("n", "c", 4, 6), block_size=2) == TensorType(("n", "?", 2, 3))
    assert rel_error("depth_to_space", (1, 6, 2, 2), block_size=2) == (
        "depth_to_space: expected channels divisible by block_size^2 = 4, got 6")
    assert rel_error("space_to_depth", (1, 1, 4, 5), block_size=2) == (
        "space_to_depth: expected axis 3 divisible by block_size 2, got 5")
    assert rel_error("depth_to_space", (1, 4, 2), block_size=2) == (
        "depth_to_space: data: expected a 4-D NCHW tensor, got Tensor[(1, 4, 2), float32]")
    assert rel_error("space_to_depth", (1, 4, 2, 2), block_size=0) == "space_to_depth: expected block_size >= 1, got 0"


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
@pytest.mark.parametrize("mode", ["half_pixel", "asymmetric", "align_corners"])
def test_resize_linear_integers_vs_ort(dtype, mode):
    """ONNX Runtime's NCHW kernel: float32 arithmetic, truncated toward zero (not rounded)."""
    for k, (hw, size) in enumerate(SIZES):
        resize_vs_ort(data((1, 2) + hw, dtype, key=k), size, method="linear", mode=mode)
    resize_vs_ort(data((1, 1, 5, 6), dtype, key=9), (7, 15), scales=(1.5, 2.5), method="linear", mode=mode)


@pytest.mark.parametrize("dtype", ["float32", "int8", "uint8"])
@pytest.mark.parametrize("mode", ["half_pixel", "align_corners", "tf_crop_and_resize"])
def test_resize_linear_compiled_is_onnx_runtime_bit_for_bit(mode, dtype):
    """The C of a float32 / int8 / uint8 linear resize (host flags: contraction allowed) equals ONNX Runtime's."""
    import plait
    from plait.executor import GraphModule
    from plait.relay import IRModule, call, var

    x = data((2, 3, 5, 6), dtype, key=3)
    roi = (0.1, 0.2, 0.9, 0.7) if mode == "tf_crop_and_resize" else None
    attrs = {"size": (10, 9), "method": "linear", "coordinate_transformation_mode": mode, "roi": roi}
    art = plait.build(IRModule.from_expr(call("image.resize2d", var("x", x.shape, dtype), **attrs)), "c")
    (got,) = GraphModule(art)(x=x)
    onnx_roi = None if roi is None else np.array([0, 0, roi[0], roi[1], 1, 1, roi[2], roi[3]], F32)
    (want,) = run_onnx_node("Resize", [x, onnx_roi, None, np.array((2, 3, 10, 9), I64)],
                            {"mode": "linear", "coordinate_transformation_mode": mode}, opset=19)
    np.testing.assert_array_equal(got, want)
