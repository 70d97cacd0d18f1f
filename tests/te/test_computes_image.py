"""TE computes of image.resize2d, depth_to_space and space_to_depth vs their numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from computes_util import check, rand, rng_for, run

F32 = np.float32
COORD_MODES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
# (input H, W) -> (output H, W): tests/op/test_image.py's sizes
SIZES = [((4, 5), (7, 3)), ((3, 3), (6, 9)), ((6, 8), (3, 4)), ((5, 7), (1, 1)), ((2, 3), (4, 6)),
         ((5, 5), (5, 8)), ((7, 6), (10, 4))]


def data(shape, dtype="float32", key=0):
    return rand(rng_for("img", shape, dtype, key), shape, dtype, -20, 20)


def resize(x, size, **attrs):
    return check("image.resize2d", [x], size=size, **attrs)


@pytest.mark.parametrize("mode", COORD_MODES)
def test_resize_nearest(mode):
    for k, (hw, size) in enumerate(SIZES):
        for nearest_mode in NEAREST_MODES:
            resize(data((1, 2) + hw, key=k), size, coordinate_transformation_mode=mode, nearest_mode=nearest_mode)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "float16", "bool"])
def test_resize_nearest_dtypes(dtype):
    for k, (hw, size) in enumerate(SIZES[:4]):
        resize(data((1, 2) + hw, dtype, key=k), size, coordinate_transformation_mode="asymmetric",
               nearest_mode="floor")
        resize(data((1, 2) + hw, dtype, key=k), size)


@pytest.mark.parametrize("mode", COORD_MODES)
def test_resize_linear(mode):
    for k, (hw, size) in enumerate(SIZES):
        # float32: every product and sum rounded as the reference rounds it (no contraction): exact
        resize(data((1, 2) + hw, key=k), size, method="linear", coordinate_transformation_mode=mode, rtol=0, atol=0)
    for dtype in ("float16", "float64", "int8", "uint8"):
        resize(data((1, 1, 4, 5), dtype), (7, 3), method="linear", coordinate_transformation_mode=mode)


@pytest.mark.parametrize("mode", COORD_MODES)
@pytest.mark.parametrize("alpha,exclude", [(-0.75, False), (-0.5, False), (-0.75, True), (-0.6, True)])
def test_resize_cubic(mode, alpha, exclude):
    for k, (hw, size) in enumerate(SIZES[::3]):
        resize(data((1, 1) + hw, key=k), size, method="cubic", coordinate_transformation_mode=mode,
               cubic_alpha=alpha, exclude_outside=exclude, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("method", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("mode", COORD_MODES)
def test_resize_with_scales(method, mode):
    for k, (hw, scales) in enumerate([((5, 7), (0.6, 1.7)), ((4, 4), (2.5, 0.5)), ((6, 3), (1.0, 3.0))]):
        size = tuple(int(F32(s) * F32(d)) for s, d in zip(scales, hw))
        resize(data((1, 1) + hw, key=k), size, scales=scales, method=method, coordinate_transformation_mode=mode,
               rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("method", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize(method):
    cases = [((4, 5), (3, 7), (0.2, 0.1, 0.9, 0.7)), ((6, 6), (5, 4), (-0.3, 0.4, 1.2, 1.6)),
             ((3, 4), (1, 1), (0.1, 0.2, 0.6, 0.9)), ((5, 3), (8, 2), (0.5, -0.5, 0.0, 0.5)),
             ((5, 8), (9, 8), (0.21, 0.49, 0.3, 0.43))]
    for k, (hw, size, roi) in enumerate(cases):
        resize(data((1, 2) + hw, key=k), size, roi=roi, method=method,
               coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-7.5, rtol=1e-5, atol=1e-4)
    resize(data((1, 1, 4, 4)), (6, 6), method=method, coordinate_transformation_mode="tf_crop_and_resize")


def test_resize_exact_values_and_empty():
    x = np.arange(4, dtype=F32).reshape(1, 1, 2, 2)
    np.testing.assert_array_equal(run("image.resize2d", [x], size=(4, 4))[0][0, 0],
                                  [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 3, 3], [2, 2, 3, 3]])
    lin = run("image.resize2d", [x], size=(3, 3), method="linear", coordinate_transformation_mode="align_corners")
    np.testing.assert_allclose(lin[0][0, 0], [[0, 0.5, 1], [1, 1.5, 2], [2, 2.5, 3]])
    resize(data((1, 2, 3, 3)), (0, 4))
    resize(data((0, 2, 3, 3)), (2, 4), method="linear")


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("dtype", ["float32", "uint8", "bool"])
def test_depth_to_space_space_to_depth(mode, dtype):
    for shape, b in [((2, 8, 3, 4), 2), ((1, 9, 2, 2), 3), ((1, 4, 1, 1), 1)]:
        check("depth_to_space", [data(shape, dtype)], block_size=b, mode=mode)
    for shape, b in [((2, 3, 4, 6), 2), ((1, 2, 3, 6), 3), ((1, 2, 2, 2), 1)]:
        check("space_to_depth", [data(shape, dtype)], block_size=b, mode=mode)
