"""A few small cases of every registered operator, shared by the coverage test (TIR interpreter)
and the C backend test (every case compiled into one library).

``CASES`` is a list of ``(op name, input arrays, attrs)``; ``case_ids`` names them. The cases that
per-operator test modules declare (tests/op/declared_cases.py) come last.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from plait.op import get_op
from computes_util import rand, rng_for

sys.path.insert(0, str(Path(__file__).parents[1] / "op"))
from declared_cases import declared_cases  # noqa: E402

CASES: list[tuple[str, list[np.ndarray], dict]] = []


def add(op: str, inputs: list, **attrs) -> None:
    CASES.append((op, inputs, attrs))


def data(shape, dtype="float32", lo=-3.0, hi=3.0, key=0):
    return rand(rng_for("case", len(CASES), shape, dtype, key), shape, dtype, lo, hi)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -1.5, 2.5], np.float32)

# ---- elementwise -------------------------------------------------------------------------------
for _op in ["add", "subtract", "multiply", "maximum", "minimum"]:
    add(_op, [data((2, 3)), data((3,))])
    add(_op, [data((3, 1), "int8", -100, 100), data((1, 4), "int8", -100, 100)])
    add(_op, [data((2, 3), "float16"), data((2, 1), "float16")])
add("maximum", [SPECIAL, SPECIAL[::-1].copy()])
add("divide", [data((2, 3)), data((3,), lo=0.5)])
add("divide", [np.array([-7, 7, -8, 9], "int32"), np.array([2, -2, 3, -4], "int32")])
add("power", [data((2, 3), lo=0.1), data((3,))])
add("power", [np.array([3, -2, 2, 5], "int64"), np.array([-1, 3, 10, 0], "int64")])
add("mod", [np.array([-7, 7, -8, 9], "int32"), np.array([2, -2, 3, -4], "int32")])
add("mod", [np.array([-7, 7, -8, 9], "int32"), np.array([2, -2, 3, -4], "int32")], fmod=True)
add("mod", [data((2, 3), lo=-9, hi=9), data((3,), lo=1, hi=4)], fmod=True)
add("mod", [np.array([-7.5, 7.5, -8.0, 9.0], "float64"), np.array([2.0, -2.0, 4.0, -4.5], "float64")])
for _op in ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]:
    add(_op, [data((2, 3), "int32", -2, 2), data((3,), "int32", -2, 2)])
    add(_op, [SPECIAL, SPECIAL[::-1].copy()])
add("less", [data((4,), "bool"), data((4,), "bool")])
for _op in ["logical_and", "logical_or", "logical_xor"]:
    add(_op, [data((3, 1), "bool"), data((1, 4), "bool")])
for _op in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
    add(_op, [data((2, 3), "int16", -100, 100), data((3,), "int16", -100, 100)])
add("left_shift", [data((2, 4), "uint8", 0, 255), data((4,), "uint8", 0, 7)])
add("right_shift", [data((2, 4), "int32", -1000, 1000), data((4,), "int32", 0, 31)])
add("where", [data((3, 1), "bool"), data((1, 4)), data((2, 1, 1))])
add("where", [data((4,), "bool"), data((4,), "int64", -9, 9), data((4,), "int64", -9, 9)])
add("nn.prelu", [data((2, 3, 4)), data((3, 1))])

UNARY_RANGES = {
    "log": (0.01, 10), "sqrt": (0, 10), "rsqrt": (0.01, 10), "reciprocal": (0.1, 5), "asin": (-1, 1),
    "acos": (-1, 1), "acosh": (1, 5), "atanh": (-0.99, 0.99), "tan": (-1.4, 1.4), "sigmoid": (-30, 30),
    "nn.softplus": (-30, 30),
}
UNARY = ["nn.relu", "nn.leaky_relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "erf", "abs", "negative",
         "sign", "floor", "ceil", "round", "reciprocal", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
         "asinh", "acosh", "atanh", "nn.gelu", "nn.hard_sigmoid", "nn.hard_swish", "nn.elu", "nn.selu", "nn.celu",
         "nn.softplus", "nn.softsign", "nn.mish", "nn.silu", "nn.thresholded_relu", "isnan", "isinf"]
for _op in UNARY:
    _x = data((3, 5), "float32", *UNARY_RANGES.get(_op, (-4, 4)))
    if _op not in UNARY_RANGES:
        _x = np.concatenate([_x.reshape(-1), SPECIAL])
    add(_op, [_x])
    add(_op, [_x.astype("float16")])
add("round", [np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.49, -3.51], "float32")])
add("nn.gelu", [data((6,), lo=-4, hi=4)], approximate="tanh")
add("clip", [data((3, 4), lo=-5, hi=5)], a_min=-1.0, a_max=2.0)
add("clip", [data((3, 4), "int8", -100, 100)], a_min=-20.5, a_max=1e9)
for _op in ["nn.relu", "abs", "negative", "sign"]:
    add(_op, [np.array([-128, -3, 0, 5, 127], "int8")])
add("logical_not", [data((3, 4), "bool")])
add("bitwise_not", [data((3, 4), "int32", -100, 100)])
for _dst in ["int32", "uint8", "uint32", "int64", "bool", "float16", "float64"]:
    # NaN, infinities and out-of-range values too: plait defines them (truncation, NaN -> 0, saturation)
    _v = [0.0, 1.7, 200.5, 3.0, -1.7, np.nan, np.inf, -np.inf, 3e9, -3e9, 1e20, -1e20]
    add("cast", [np.array(_v, "float32")], dtype=_dst)
add("cast", [np.array([-5, 0, 7, 300], "int32")], dtype="int8")
add("cast", [np.array([-2.5, 0.0, 7.9, 300.0], "float16")], dtype="int32")
add("cast", [np.array([1.0 + 2.0**-11, 1.0 + 2.0**-11 + 2.0**-30, 65519.0, 1e-8], "float64")], dtype="float16")

# ---- reductions ----------------------------------------------------------------------------------
for _op in ["sum", "mean", "max", "min", "prod", "sum_square", "l1_norm", "l2_norm", "log_sum", "log_sum_exp"]:
    _lo = 0.1 if _op == "log_sum" else -3
    add(_op, [data((2, 3, 4), lo=_lo)], axis=(1,), keepdims=True)
    add(_op, [data((2, 3, 4), lo=_lo)], axis=(2, 0), keepdims=False)
    add(_op, [data((2, 3), "float16", lo=_lo)], axis=None, keepdims=True)
    if _op not in ("log_sum", "log_sum_exp"):
        add(_op, [data((3, 4), "int32", -9, 9)], axis=(-1,), keepdims=False)
add("max", [np.array([[1.0, np.nan, 2.0], [0.0, -1.0, np.inf]], "float32")], axis=(1,))
add("max", [data((0, 3))], axis=(0,))  # empty: the lowest value
add("mean", [data((3, 0))], axis=(1,), keepdims=False)  # empty: 0
for _op in ["argmax", "argmin"]:
    add(_op, [data((3, 4, 5), "int8", -2, 2)], axis=1, keepdims=False)
    add(_op, [data((3, 4, 5), "int8", -2, 2)], axis=-1, select_last_index=True)
    add(_op, [np.array([[1.0, np.nan, 2.0, np.nan], [-np.inf, -np.inf, 0.0, 0.0]], "float32")], axis=1)
    add(_op, [data((2, 6), "float16")], axis=0)
for _op in ["nn.softmax", "nn.log_softmax"]:
    add(_op, [data((2, 3, 4), lo=-5, hi=5)], axis=1)
    add(_op, [data((2, 5), "float16", lo=-5, hi=5)])
add("cumsum", [data((2, 3, 4))], axis=1)
add("cumsum", [data((2, 5), "int32", -9, 9)], axis=-1, exclusive=True, reverse=True)
add("cumsum", [data((6,), "float16")], axis=0, reverse=True)

# ---- nn ------------------------------------------------------------------------------------------
add("nn.conv2d", [data((1, 4, 6, 7)), data((6, 2, 3, 2))], strides=(2, 1), padding=(1, 0, 2, 1), dilation=(1, 2),
    groups=2)
add("nn.conv2d", [data((1, 3, 5, 5), "float16"), data((2, 3, 3, 3), "float16")], padding=(1, 1, 1, 1))
add("nn.conv2d_transpose", [data((1, 4, 3, 3)), data((4, 1, 2, 3))], strides=(2, 3), padding=(0, 1, 1, 0),
    groups=2, output_padding=(1, 2))
add("nn.conv2d_transpose", [data((1, 4, 3, 5)), data((4, 3, 2, 2))], strides=(2, 2))
add("nn.matmul", [data((2, 1, 3, 4)), data((3, 4, 2))])
add("nn.matmul", [data((4,)), data((4, 3))])
add("nn.matmul", [data((3, 4), "int32", -9, 9), data((4,), "int32", -9, 9)])
add("nn.dense", [data((2, 3, 4)), data((5, 4))])
add("nn.dense", [data((3, 4), "float16"), data((2, 4), "float16")])
add("nn.max_pool2d", [data((1, 2, 7, 8))], pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1), ceil_mode=True)
add("nn.max_pool2d", [data((1, 2, 7, 7), "uint8", 0, 255)], pool_size=(2, 3), strides=(2, 2), padding=(1, 0, 1, 2))
add("nn.avg_pool2d", [data((1, 2, 10, 9))], pool_size=(2, 3), strides=(3, 2), padding=(1, 0, 1, 2), dilation=(2, 1),
    ceil_mode=True)
add("nn.avg_pool2d", [data((1, 2, 7, 8))], pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1),
    count_include_pad=True)
add("nn.global_avg_pool2d", [data((2, 3, 4, 5))])
add("nn.global_max_pool2d", [data((1, 2, 3, 4, 2))])
add("nn.batch_norm", [data((2, 3, 4)), data((3,)), data((3,)), data((3,)), data((3,), lo=0.1)], epsilon=1e-3)
add("nn.layer_norm", [data((2, 3, 4, 5)), data((4, 5)), data((1, 5))], axis=2)
add("nn.layer_norm", [data((3, 6), "float16"), data((6,), "float16")])
add("nn.instance_norm", [data((2, 3, 4, 5)), data((3,)), data((3,))], epsilon=1e-3)
add("nn.lrn", [data((2, 5, 3, 2))], size=3, alpha=0.1, beta=0.75, bias=1.0)

# ---- transforms, gathers, image --------------------------------------------------------------------
add("reshape", [data((2, 3, 4), "int64", -9, 9)], newshape=(0, -1))
add("flatten", [data((2, 3, 4), "bool")], axis=2)
add("squeeze", [data((1, 3, 1, 2))], axes=(0, -2))
add("expand_dims", [data((2, 3), "float16")], axes=(0, 3))
add("transpose", [data((2, 3, 4))], axes=(2, 0, 1))
add("broadcast_to", [data((2, 1, 4), "int8", -9, 9)], shape=(3, 2, 5, 4))
add("tile", [data((2, 3))], reps=(2, 3))
add("concatenate", [data((2, 3)), data((2, 1)), data((2, 0)), data((2, 4))], axis=1)
add("split", [data((6, 4), "int32", -9, 9)], sections=(1, 2, 3))
add("strided_slice", [data((5, 7))], begin=(-1, 6), end=(-6, 0), strides=(-2, -3))
add("strided_slice", [data((4, 6, 5), "int64", -9, 9)], begin=(1, -8), end=(3, 3), axes=(2, 1))
for _mode in ["constant", "reflect", "edge", "wrap"]:
    add("nn.pad", [data((3, 4))], pad_width=(0, -1, 0, 2) if _mode != "constant" else (-1, 2, 1, -2),
        pad_mode=_mode, pad_value=2.5)
add("nn.pad", [data((3, 4), "int32", -9, 9)], pad_width=(2, 3, 2, 3), pad_mode="reflect")
add("device_copy", [data((2, 3), "float16")], src="a", dst="b")
add("range", [], start=0.5, limit=2.0, delta=0.25, dtype="float32")
add("range", [], start=10, limit=0, delta=-3, dtype="int32")
add("take", [data((3, 4, 5)), np.array([[0, -1, 2], [-4, 1, 3]], "int32")], axis=1)
add("gather_elements", [data((3, 4), "int64", -9, 9), np.array([[0, -1, 2, 1], [2, 0, -3, 1]], "int64")], axis=0)
add("gather_nd", [data((2, 3, 4)), np.array([[[0, -1], [2, 3]], [[1, 0], [-3, 2]]], "int64")], batch_dims=1)
add("one_hot", [np.array([[0, -1, 3], [5, -6, 2]], "int64")], depth=4, axis=1, on_value=3.0, off_value=-1.5)
add("one_hot", [np.array([1.7, -0.5, 2.0], "float32")], depth=3, dtype="int8")
add("trilu", [data((2, 3, 4))], upper=True, k=1)
add("trilu", [data((3, 3), "bool")], upper=False, k=-1)
_MODES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"]
for _k, _mode in enumerate(_MODES):
    add("image.resize2d", [data((1, 2, 4, 5), key=_k)], size=(7, 3), coordinate_transformation_mode=_mode,
        nearest_mode=["round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "round_prefer_floor"][_k])
    add("image.resize2d", [data((1, 1, 3, 3), key=_k)], size=(6, 2), method="linear",
        coordinate_transformation_mode=_mode)
    add("image.resize2d", [data((1, 1, 5, 4), key=_k)], size=(3, 7), method="cubic",
        coordinate_transformation_mode=_mode, exclude_outside=_k % 2 == 1)
for _method in ["nearest", "linear", "cubic"]:
    add("image.resize2d", [data((1, 2, 6, 6))], size=(5, 4), method=_method, roi=(-0.3, 0.4, 1.2, 1.6),
        coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-7.5)
add("image.resize2d", [data((1, 1, 4, 4), "int8", -100, 100)], size=(2, 5), scales=(0.6, 1.7))
add("image.resize2d", [data((1, 1, 4, 5), "float16")], size=(7, 3), method="linear")
add("depth_to_space", [data((1, 8, 2, 3))], block_size=2, mode="CRD")
add("depth_to_space", [data((1, 9, 2, 2), "uint8", 0, 255)], block_size=3)
add("space_to_depth", [data((1, 2, 4, 6))], block_size=2)
add("space_to_depth", [data((1, 2, 3, 6), "int8", -9, 9)], block_size=3, mode="CRD")

for _op, _cases in declared_cases().items():
    for _inputs, _attrs in _cases:
        if get_op(_op).compute is not None:  # (an operator writing its own TIR is tested in its module)
            add(_op, _inputs, **_attrs)


def case_ids() -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for op, inputs, _ in CASES:
        k = seen[op] = seen.get(op, -1) + 1
        dt = inputs[0].dtype.name if inputs else "none"
        out.append(f"{op}-{k}-{dt}")
    return out
