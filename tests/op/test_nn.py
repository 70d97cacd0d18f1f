"""Neural-network operators: numpy references vs ONNX Runtime, type relations, costs, exact errors."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from ort_util import assert_close, run_onnx_node, run_plait_op

from plait.errors import AttrError, TypeInferenceError
from plait.ir import OpPattern, TensorType
from plait.op import get_op
from plait.relay import IRModule, call, infer_type, var

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

F32 = dict(rtol=1e-4, atol=1e-4)


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def randn(rng: np.random.Generator, shape: tuple, dtype: str = "float32") -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def check(op: str, inputs: list, attrs: dict, onnx_op: str, onnx_attrs: dict, onnx_inputs: list | None = None,
          opset: int = 18, **tol) -> np.ndarray:
    got = run_plait_op(op, inputs, **attrs)
    (want,) = run_onnx_node(onnx_op, inputs if onnx_inputs is None else onnx_inputs, onnx_attrs, opset=opset)
    assert_close(got, want, **(tol or (F32 if got.dtype == np.float32 else {})))
    return got


def check_f64_via_f32(op: str, inputs: list, attrs: dict, onnx_op: str, onnx_attrs: dict, opset: int = 18) -> None:
    """For ops ONNX Runtime runs in float32 only: float64 result vs ORT on the float32-cast inputs."""
    got = run_plait_op(op, inputs, **attrs)
    (want,) = run_onnx_node(onnx_op, [np.asarray(a, np.float32) for a in inputs], onnx_attrs, opset=opset)
    assert got.dtype == np.float64
    assert_close(got.astype(np.float32), want, **F32)


def infer(expr) -> TensorType:
    return infer_type(IRModule.from_expr(expr))["main"].body.checked_type


def sig(op: str, *types, **attrs) -> TensorType:
    """The result type of ``op`` applied to variables of the given (shape, dtype?) types."""
    params = [var(f"x{i}", *t) if isinstance(t[0], tuple) else var(f"x{i}", t) for i, t in enumerate(types)]
    return infer(call(op, *params, **attrs))


# ---- conv2d -------------------------------------------------------------------------------------

# (data shape, weight shape, strides, padding (t, l, b, r), dilation, groups)
CONV_CASES = [
    ((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 3, 9, 7), (5, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((1, 4, 10, 11), (6, 4, 3, 2), (2, 1), (1, 0, 2, 1), (1, 1), 1),  # asymmetric padding, stride
    ((1, 6, 9, 9), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),  # groups
    ((2, 8, 12, 12), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 8),  # depthwise
    ((1, 4, 12, 12), (8, 1, 3, 3), (2, 2), (0, 1, 1, 0), (1, 1), 4),  # depthwise multiplier 2
    ((1, 2, 13, 13), (3, 2, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),  # dilation
    ((1, 4, 11, 10), (4, 2, 2, 3), (3, 2), (0, 2, 1, 0), (2, 3), 2),  # everything at once
    ((2, 5, 1, 16), (3, 5, 1, 4), (1, 2), (0, 1, 0, 2), (1, 1), 1),  # conv1d as H = 1
    ((1, 3, 5, 5), (2, 3, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 1x1
    ((1, 2, 4, 4), (3, 2, 4, 4), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # kernel = input
]


@pytest.mark.parametrize("dshape,wshape,strides,padding,dilation,groups", CONV_CASES)
def test_conv2d_vs_ort(dshape, wshape, strides, padding, dilation, groups):
    rng = rng_for("conv", dshape, wshape, strides, padding)
    x, w = randn(rng, dshape), randn(rng, wshape)
    got = check("nn.conv2d", [x, w], dict(strides=strides, padding=padding, dilation=dilation, groups=groups),
                "Conv", dict(kernel_shape=list(wshape[2:]), strides=list(strides), pads=list(padding),
                             dilations=list(dilation), group=groups))
    assert sig("nn.conv2d", dshape, wshape, strides=strides, padding=padding, dilation=dilation,
               groups=groups) == TensorType(got.shape)


def test_conv2d_float64():
    rng = rng_for("conv-dtypes")
    x, w = randn(rng, (1, 4, 7, 7), "float64"), randn(rng, (6, 2, 3, 3), "float64")
    check_f64_via_f32("nn.conv2d", [x, w], dict(groups=2, padding=(1, 1, 1, 1)), "Conv",
                      dict(group=2, pads=[1, 1, 1, 1]))


# float16 is computed in float32 and rounded once, like ONNX Runtime: (op, ORT op, input shapes, attrs, ORT attrs)
FP16_CASES = [
    ("nn.conv2d", "Conv", [(1, 4, 7, 7), (6, 2, 3, 3)], dict(groups=2), dict(group=2)),
    ("nn.conv2d_transpose", "ConvTranspose", [(1, 4, 5, 5), (4, 3, 3, 3)], dict(strides=(2, 2)),
     dict(strides=[2, 2])),
    ("nn.matmul", "MatMul", [(2, 7, 5), (5, 6)], {}, {}),
    ("nn.avg_pool2d", "AveragePool", [(1, 3, 7, 7)], dict(pool_size=(3, 3), padding=(1, 1, 1, 1)),
     dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("nn.global_avg_pool2d", "GlobalAveragePool", [(2, 3, 5, 5)], {}, {}),
    ("nn.batch_norm", "BatchNormalization", [(2, 4, 5, 5)] + [(4,)] * 4, {}, {}),
    ("nn.instance_norm", "InstanceNormalization", [(2, 4, 5, 5), (4,), (4,)], {}, {}),
    ("nn.lrn", "LRN", [(1, 6, 4, 4)], dict(size=3), dict(size=3)),
]


@pytest.mark.parametrize("op,onnx_op,shapes,attrs,onnx_attrs", FP16_CASES)
def test_float16_vs_ort(op, onnx_op, shapes, attrs, onnx_attrs):
    rng = rng_for("fp16", op)
    inputs = [randn(rng, s, "float16") for s in shapes]
    if op == "nn.batch_norm":
        inputs[4] = np.abs(inputs[4]) + np.float16(0.1)  # a variance
    got = check(op, inputs, attrs, onnx_op, onnx_attrs)
    assert got.dtype == np.float16


def test_conv2d_resnet_sized():
    rng = rng_for("resnet")
    x, w = randn(rng, (1, 64, 56, 56)), randn(rng, (64, 64, 3, 3)) * np.float32(0.05)
    check("nn.conv2d", [x, w], dict(padding=(1, 1, 1, 1)), "Conv", dict(pads=[1, 1, 1, 1]))


# ---- conv2d_transpose -------------------------------------------------------------------------

# (data shape, weight shape [C, O/groups, KH, KW], strides, padding, dilation, groups, output_padding)
TCONV_CASES = [
    ((1, 3, 5, 5), (3, 4, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0)),
    ((2, 4, 4, 6), (4, 2, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, (1, 1)),
    ((1, 4, 5, 4), (4, 3, 2, 3), (2, 3), (0, 1, 1, 2), (1, 1), 2, (1, 0)),  # groups, asymmetric
    ((1, 6, 4, 4), (6, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 6, (0, 1)),  # depthwise
    ((1, 2, 6, 5), (2, 3, 3, 2), (1, 1), (2, 1, 0, 1), (2, 3), 1, (0, 0)),  # dilation
    ((1, 4, 3, 5), (4, 2, 4, 3), (3, 2), (1, 0, 2, 1), (2, 2), 2, (2, 1)),  # everything at once
    ((2, 3, 1, 7), (3, 2, 1, 3), (1, 2), (0, 0, 0, 1), (1, 1), 1, (0, 1)),  # 1-D as H = 1
]


@pytest.mark.parametrize("dshape,wshape,strides,padding,dilation,groups,output_padding", TCONV_CASES)
def test_conv2d_transpose_vs_ort(dshape, wshape, strides, padding, dilation, groups, output_padding):
    rng = rng_for("tconv", dshape, wshape, strides, padding)
    x, w = randn(rng, dshape), randn(rng, wshape)
    got = check("nn.conv2d_transpose", [x, w],
                dict(strides=strides, padding=padding, dilation=dilation, groups=groups,
                     output_padding=output_padding),
                "ConvTranspose", dict(kernel_shape=list(wshape[2:]), strides=list(strides), pads=list(padding),
                                      dilations=list(dilation), group=groups,
                                      output_padding=list(output_padding)))
    assert got.shape[1] == wshape[1] * groups


def test_conv2d_transpose_float64():
    rng = rng_for("tconv64")
    x, w = randn(rng, (1, 2, 3, 3), "float64"), randn(rng, (2, 3, 2, 2), "float64")
    check_f64_via_f32("nn.conv2d_transpose", [x, w], dict(strides=(2, 2)), "ConvTranspose", dict(strides=[2, 2]))


# ---- matmul, dense ------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
    ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 1, 4, 6)),
    ((0, 3), (3, 2)), ((3, 0), (0, 2)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_vs_ort(sa, sb):
    rng = rng_for("matmul", sa, sb)
    a, b = randn(rng, sa), randn(rng, sb)
    got = check("nn.matmul", [a, b], {}, "MatMul", {})
    assert got.shape == np.matmul(a, b).shape


@pytest.mark.parametrize("dtype", ["float64", "int32", "int64"])
def test_matmul_dtypes(dtype):
    rng = rng_for("matmul", dtype)
    a = rng.integers(-5, 5, (2, 3, 4)).astype(dtype)
    b = rng.integers(-5, 5, (4, 3)).astype(dtype)
    check("nn.matmul", [a, b], {}, "MatMul", {})


@pytest.mark.parametrize("sx,units", [((3, 4), 5), ((1, 16), 8), ((7, 1), 3), ((0, 4), 2)])
def test_dense_vs_gemm(sx, units):
    rng = rng_for("dense", sx, units)
    x, w = randn(rng, sx), randn(rng, (units, sx[-1]))
    check("nn.dense", [x, w], {}, "Gemm", dict(transB=1))


@pytest.mark.parametrize("sx", [(2, 3, 4), (4,), (2, 1, 2, 4)])
def test_dense_nd_vs_matmul(sx):
    rng = rng_for("dense-nd", sx)
    x, w = randn(rng, sx), randn(rng, (6, 4))
    check("nn.dense", [x, w], {}, "MatMul", {}, onnx_inputs=[x, np.ascontiguousarray(w.T)])


def test_dense_int64():
    rng = rng_for("dense-int")
    x, w = rng.integers(-9, 9, (3, 4)), rng.integers(-9, 9, (2, 4))
    np.testing.assert_array_equal(run_plait_op("nn.dense", [x, w]), x @ w.T)


# ---- pooling ------------------------------------------------------------------------------------

# (data shape, pool_size, strides, padding, dilation, ceil_mode)
POOL_CASES = [
    ((1, 2, 6, 6), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),
    ((2, 3, 7, 8), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),
    ((1, 2, 7, 8), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True),
    ((1, 2, 6, 7), (3, 2), (2, 3), (0, 1, 2, 0), (1, 1), True),  # asymmetric; ceil drops a last window
    ((1, 1, 5, 5), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), True),  # ceil: partial window at the edge
    ((1, 2, 9, 9), (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), False),  # dilation
    ((1, 2, 10, 9), (2, 3), (3, 2), (1, 0, 1, 2), (2, 1), True),  # dilation + ceil
    ((1, 3, 4, 4), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False),
    ((1, 1, 1, 9), (1, 3), (1, 2), (0, 1, 0, 1), (1, 1), True),  # 1-D as H = 1
]


def _pool_attrs(k, s, p, d, ceil):
    return (dict(pool_size=k, strides=s, padding=p, dilation=d, ceil_mode=ceil),
            dict(kernel_shape=list(k), strides=list(s), pads=list(p), dilations=list(d), ceil_mode=int(ceil)))


@pytest.mark.parametrize("shape,k,s,p,d,ceil", POOL_CASES)
def test_max_pool2d_vs_ort(shape, k, s, p, d, ceil):
    x = randn(rng_for("maxpool", shape, k, s, p), shape)
    attrs, onnx_attrs = _pool_attrs(k, s, p, d, ceil)
    got = check("nn.max_pool2d", [x], attrs, "MaxPool", onnx_attrs)
    assert sig("nn.max_pool2d", shape, **attrs) == TensorType(got.shape)


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("shape,k,s,p,d,ceil", POOL_CASES)
def test_avg_pool2d_vs_ort(shape, k, s, p, d, ceil, count_include_pad):
    x = randn(rng_for("avgpool", shape, k, s, p), shape)
    attrs, onnx_attrs = _pool_attrs(k, s, p, d, ceil)
    check("nn.avg_pool2d", [x], dict(attrs, count_include_pad=count_include_pad), "AveragePool",
          dict(onnx_attrs, count_include_pad=int(count_include_pad)), opset=19)  # dilations since opset 19


def test_ceil_mode_last_window_rule():
    # height 6, window 3, stride 2, bottom padding 2: ceil((6 + 2 - 3) / 2) + 1 = 4 windows, but the
    # 4th would start at row 6, past the input and its top padding, so it is dropped
    attrs = dict(pool_size=(3, 3), strides=(2, 2), padding=(0, 0, 2, 0), ceil_mode=True)
    assert sig("nn.max_pool2d", (1, 1, 6, 6), **attrs) == TensorType((1, 1, 3, 3))
    assert sig("nn.avg_pool2d", (1, 1, 6, 6), **dict(attrs, ceil_mode=False)) == TensorType((1, 1, 3, 2))


@pytest.mark.parametrize("dtype", ["float64", "float16", "int8", "uint8"])
def test_max_pool2d_dtypes(dtype):
    rng = rng_for("maxpool", dtype)
    x = rng.integers(-100 if dtype != "uint8" else 0, 100, (1, 2, 7, 7)).astype(dtype)
    attrs, onnx_attrs = _pool_attrs((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True)
    check("nn.max_pool2d", [x], attrs, "MaxPool", onnx_attrs)


def test_avg_pool2d_float64():
    x = randn(rng_for("avg64"), (1, 2, 5, 6), "float64")
    attrs, onnx_attrs = _pool_attrs((2, 3), (1, 2), (1, 1, 0, 1), (1, 1), True)
    check_f64_via_f32("nn.avg_pool2d", [x], attrs, "AveragePool", onnx_attrs, opset=19)


@pytest.mark.parametrize("shape", [(2, 3, 5, 6), (1, 4, 7), (1, 2, 3, 4, 2), (1, 1, 1, 1)])
@pytest.mark.parametrize("kind", ["avg", "max"])
def test_global_pools_vs_ort(kind, shape):
    x = randn(rng_for("gpool", kind, shape), shape)
    got = check(f"nn.global_{kind}_pool2d", [x], {}, "GlobalAveragePool" if kind == "avg" else "GlobalMaxPool", {})
    assert got.shape == shape[:2] + (1,) * (len(shape) - 2)


def test_global_pools_other_dtypes():
    x = randn(rng_for("gpool64"), (2, 3, 4, 4), "float64")
    check_f64_via_f32("nn.global_avg_pool2d", [x], {}, "GlobalAveragePool", {})
    check_f64_via_f32("nn.global_max_pool2d", [x], {}, "GlobalMaxPool", {})


# ---- normalizations -----------------------------------------------------------------------------


@pytest.mark.parametrize("shape,eps", [((2, 3, 4, 5), 1e-5), ((4, 6), 1e-3), ((1, 2, 3), 0.1),
                                        ((2, 3, 2, 2, 2), 1e-5)])
def test_batch_norm_vs_ort(shape, eps):
    rng = rng_for("bn", shape)
    c = shape[1]
    x, gamma, beta, mean = randn(rng, shape), randn(rng, (c,)), randn(rng, (c,)), randn(rng, (c,))
    var_ = rng.uniform(0.1, 2.0, (c,)).astype(np.float32)
    check("nn.batch_norm", [x, gamma, beta, mean, var_], dict(epsilon=eps), "BatchNormalization",
          dict(epsilon=eps), opset=15)


def test_batch_norm_other_axis():
    rng = rng_for("bn-axis")
    x = randn(rng, (2, 5, 3))
    params = [randn(rng, (3,)), randn(rng, (3,)), randn(rng, (3,)), rng.uniform(0.5, 1, 3).astype(np.float32)]
    got = run_plait_op("nn.batch_norm", [x] + params, axis=-1)
    (want,) = run_onnx_node("BatchNormalization", [x.transpose(0, 2, 1)] + params, {}, opset=15)
    assert_close(got, np.ascontiguousarray(want.transpose(0, 2, 1)), **F32)


# (data shape, axis, gamma/beta shape)
LN_CASES = [((2, 3, 8), -1, (8,)), ((2, 3, 4, 5), 2, (4, 5)), ((2, 3, 4, 5), 1, (3, 4, 5)),
            ((2, 3, 4, 5), -2, (4, 1)), ((2, 3, 4, 5), 2, (5,)), ((3, 6), -1, (1,)), ((4, 5), 0, (4, 5)),
            ((7,), 0, (7,))]


@pytest.mark.parametrize("shape,axis,pshape", LN_CASES)
def test_layer_norm_vs_ort(shape, axis, pshape):
    rng = rng_for("ln", shape, axis, pshape)
    x, gamma, beta = randn(rng, shape) * 3 + 1, randn(rng, pshape), randn(rng, pshape)
    check("nn.layer_norm", [x, gamma, beta], dict(axis=axis), "LayerNormalization", dict(axis=axis), opset=17)
    check("nn.layer_norm", [x, gamma], dict(axis=axis, epsilon=1e-2), "LayerNormalization",
          dict(axis=axis, epsilon=1e-2), opset=17)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_layer_norm_dtypes(dtype):
    rng = rng_for("ln", dtype)
    x, gamma, beta = randn(rng, (2, 4, 16), dtype), randn(rng, (16,), dtype), randn(rng, (16,), dtype)
    got = check("nn.layer_norm", [x, gamma, beta], {}, "LayerNormalization", {}, opset=17)
    assert got.dtype == np.dtype(dtype)


@pytest.mark.parametrize("shape,eps", [((2, 3, 4, 5), 1e-5), ((1, 4, 7), 1e-3), ((2, 2, 3, 2, 2), 1e-5)])
def test_instance_norm_vs_ort(shape, eps):
    rng = rng_for("in", shape)
    x, gamma, beta = randn(rng, shape) * 2 - 1, randn(rng, (shape[1],)), randn(rng, (shape[1],))
    check("nn.instance_norm", [x, gamma, beta], dict(epsilon=eps), "InstanceNormalization", dict(epsilon=eps))


@pytest.mark.parametrize("size,alpha,beta,bias", [(1, 1e-4, 0.75, 1.0), (3, 0.1, 0.75, 1.0), (5, 1.0, 1.5, 0.5),
                                                  (9, 0.5, 0.75, 1.0)])
def test_lrn_vs_ort(size, alpha, beta, bias):
    x = randn(rng_for("lrn", size), (2, 6, 4, 5)) * 3
    check("nn.lrn", [x], dict(size=size, alpha=alpha, beta=beta, bias=bias), "LRN",
          dict(size=size, alpha=alpha, beta=beta, bias=bias))


@pytest.mark.parametrize("size", [2, 4])
def test_lrn_even_size_follows_the_spec(size):
    # ONNX Runtime only implements odd sizes; the spec sums channels c - floor((size-1)/2) .. c + ceil((size-1)/2)
    x = randn(rng_for("lrn-even", size), (2, 5, 2, 3), "float64")
    got = run_plait_op("nn.lrn", [x], size=size, alpha=0.3, beta=0.6, bias=1.5)
    want = np.empty_like(x)
    for c in range(5):
        lo, hi = max(0, c - (size - 1) // 2), min(4, c + size // 2)
        sq = (x[:, lo:hi + 1] ** 2).sum(axis=1)
        want[:, c] = x[:, c] / (1.5 + 0.3 / size * sq) ** 0.6
    assert_close(got, want)


def test_lrn_defaults_float64():
    x = randn(rng_for("lrn64"), (1, 5, 3, 3), "float64")
    check_f64_via_f32("nn.lrn", [x], dict(size=3), "LRN", dict(size=3))


# ---- relations with symbolic dims, patterns, costs ----------------------------------------------


@pytest.mark.parametrize("op,types,attrs,out", [
    ("nn.conv2d", [("n", 3, 8, 8), (16, 3, 3, 3)], dict(padding=(1, 1, 1, 1)), ("n", 16, 8, 8)),
    ("nn.conv2d", [("n", "c", "h", "w"), (16, 4, 3, 3)], dict(groups=2), ("n", 16, "?", "?")),
    ("nn.conv2d", [(1, 8, "h", "w"), (4, 8, 1, 1)], {}, (1, 4, "h", "w")),
    ("nn.conv2d", [(1, 8, "h", "w"), (4, 8, 3, 3)], dict(padding=(1, 1, 1, 1)), (1, 4, "h", "w")),
    ("nn.conv2d", [(1, 8, "h", 9), (4, 8, 3, 3)], dict(strides=(2, 2)), (1, 4, "?", 4)),
    ("nn.conv2d", [(1, 8, 5, 5), ("o", 8, 3, 3)], {}, (1, "o", 3, 3)),
    ("nn.conv2d_transpose", [("n", 4, 5, 5), (4, 3, 3, 3)], dict(strides=(2, 2), groups=2), ("n", 6, 11, 11)),
    ("nn.conv2d_transpose", [("n", 4, "h", 5), (4, 3, 3, 3)], dict(padding=(1, 1, 1, 1)), ("n", 3, "h", 5)),
    ("nn.matmul", [("b", "m", 4), (4, 5)], {}, ("b", "m", 5)),
    ("nn.matmul", [("b", 1, 3, "k"), (2, "k", 7)], {}, ("b", 2, 3, 7)),
    ("nn.matmul", [(4,), ("b", 4, 3)], {}, ("b", 3)),
    ("nn.dense", [("n", "s", 16), (8, 16)], {}, ("n", "s", 8)),
    ("nn.max_pool2d", [("n", "c", 8, 8)], dict(pool_size=(2, 2), strides=(2, 2)), ("n", "c", 4, 4)),
    ("nn.avg_pool2d", [("n", 3, "h", 8)], dict(pool_size=(3, 3), padding=(1, 1, 1, 1)), ("n", 3, "h", 8)),
    ("nn.global_avg_pool2d", [("n", "c", "h", "w")], {}, ("n", "c", 1, 1)),
    ("nn.global_max_pool2d", [("n", 5, 7)], {}, ("n", 5, 1)),
    ("nn.batch_norm", [("n", "c", 4, 4), ("c",), ("c",), ("c",), ("c",)], {}, ("n", "c", 4, 4)),
    ("nn.layer_norm", [("n", "s", 32), (32,), (32,)], {}, ("n", "s", 32)),
    ("nn.instance_norm", [("n", 3, "h", "w"), (3,), (3,)], {}, ("n", 3, "h", "w")),
    ("nn.lrn", [("n", 3, "h", "w")], dict(size=3), ("n", 3, "h", "w")),
])
def test_symbolic_relations(op, types, attrs, out):
    assert sig(op, *types, **attrs) == TensorType(out)


def test_patterns_and_attr_docs():
    fusable = ["nn.conv2d", "nn.conv2d_transpose", "nn.dense", "nn.matmul", "nn.max_pool2d", "nn.avg_pool2d",
               "nn.global_avg_pool2d", "nn.global_max_pool2d"]
    for name in fusable:
        assert get_op(name).pattern == OpPattern.OUT_ELEMWISE_FUSABLE, name
    for name in ["nn.batch_norm", "nn.layer_norm", "nn.instance_norm", "nn.lrn"]:
        assert get_op(name).pattern == OpPattern.OPAQUE, name
    for name in fusable + ["nn.batch_norm", "nn.layer_norm", "nn.instance_norm", "nn.lrn"]:
        assert get_op(name).doc and all(a.doc for a in get_op(name).attrs), name
    assert get_op("nn.conv2d").make_attrs() == dict(strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)
    assert get_op("nn.avg_pool2d").attr_names == ("pool_size", "strides", "padding", "dilation", "ceil_mode",
                                                  "count_include_pad")


def _cost(op: str, args: list, out, **attrs):
    o = get_op(op)
    c = o.cost(tuple(TensorType(*a) if isinstance(a[0], tuple) else TensorType(a) for a in args),
               TensorType(*out) if isinstance(out[0], tuple) else TensorType(out), o.make_attrs(attrs))
    return c.flops, c.bytes_read, c.bytes_written


def test_costs():
    # conv: 2 * N * O * OH * OW * (C / groups) * KH * KW
    assert _cost("nn.conv2d", [(2, 8, 10, 10), (6, 4, 3, 3)], (2, 6, 8, 8), groups=2) == (
        2 * 2 * 6 * 8 * 8 * 4 * 3 * 3, 4 * (2 * 8 * 100 + 6 * 4 * 9), 4 * 2 * 6 * 64)
    assert _cost("nn.conv2d", [(1, 8, 5, 5), (8, 1, 3, 3)], (1, 8, 5, 5), groups=8)[0] == 2 * 8 * 25 * 9
    # transposed conv: 2 * N * C * H * W * (O / groups) * KH * KW
    assert _cost("nn.conv2d_transpose", [(1, 4, 5, 5), (4, 3, 3, 3)], (1, 6, 11, 11), groups=2)[0] == (
        2 * 4 * 25 * 3 * 9)
    assert _cost("nn.matmul", [(2, 3, 4), (4, 5)], (2, 3, 5)) == (2 * 30 * 4, 4 * 44, 4 * 30)
    assert _cost("nn.matmul", [((4,), "float64"), ((4,), "float64")], ((), "float64")) == (8, 64, 8)
    assert _cost("nn.dense", [(3, 16), (8, 16)], (3, 8)) == (2 * 24 * 16, 4 * (48 + 128), 4 * 24)
    assert _cost("nn.max_pool2d", [(1, 2, 8, 8)], (1, 2, 4, 4), pool_size=(2, 3)) == (6 * 32, 512, 128)
    assert _cost("nn.avg_pool2d", [(1, 2, 8, 8)], (1, 2, 4, 4), pool_size=(2, 2)) == (5 * 32, 512, 128)
    assert _cost("nn.global_avg_pool2d", [(1, 2, 8, 8)], (1, 2, 1, 1)) == (128, 512, 8)
    assert _cost("nn.batch_norm", [(1, 2, 4, 4)] + [(2,)] * 4, (1, 2, 4, 4)) == (64, 128 + 32, 128)
    assert _cost("nn.lrn", [(1, 4, 2, 2)], (1, 4, 2, 2), size=3) == (10 * 16, 64, 64)


# ---- negative tests -------------------------------------------------------------------------------


def _msg(op: str, types: list, msg: str) -> str:
    shown = ", ".join(str(TensorType(*t)) for t in types)
    return f"type mismatch in @main: call (operator '{op}') with argument types ({shown}): {msg}"


F = "float32"
REL_ERRORS = [
    ("nn.conv2d", [(1, 6, 8, 8), (4, 4, 3, 3)], dict(groups=2),
     "conv2d: weight channels: expected 3 (input channels 6 / groups 2), got 4"),
    ("nn.conv2d", [(1, 5, 8, 8), (4, 1, 3, 3)], dict(groups=2),
     "conv2d: input channels: expected a multiple of groups 2, got 5"),
    ("nn.conv2d", [(1, 4, 8, 8), (3, 2, 3, 3)], dict(groups=2),
     "conv2d: output channels (weight dim 0): expected a multiple of groups 2, got 3"),
    ("nn.conv2d", [(1, 3, 8), (4, 3, 3, 3)], {}, "conv2d: data: expected a 4-D tensor [N, C, H, W], "
                                               "got Tensor[(1, 3, 8), float32]"),
    ("nn.conv2d", [(1, 3, 8, 8), (4, 3, 3)], {}, "conv2d: weight: expected a 4-D tensor [O, C/groups, KH, KW], "
                                               "got Tensor[(4, 3, 3), float32]"),
    ("nn.conv2d", [(1, 3, 2, 8), (4, 3, 3, 3)], {},
     "conv2d: height: expected padded input size >= window size 3, got 2 (input 2, padding 0 + 0)"),
    ("nn.conv2d", [(1, 3, 8, 8), (4, 3, 3, 3)], dict(padding=(1, 1)),
     "conv2d: padding: expected 4 values (top, left, bottom, right), got (1, 1)"),
    ("nn.conv2d", [(1, 3, 8, 8), (4, 3, 3, 3)], dict(strides=(0, 1)),
     "conv2d: strides: expected values >= 1, got (0, 1)"),
    ("nn.conv2d", [(1, 3, 8, 8), (4, 3, 3, 3)], dict(groups=0), "conv2d: groups: expected a value >= 1, got 0"),
    ("nn.conv2d", [((1, 3, 8, 8), "int32"), ((4, 3, 3, 3), "int32")], {},
     "conv2d: data: expected a floating-point tensor, got Tensor[(1, 3, 8, 8), int32]"),
    ("nn.conv2d", [(1, 3, 8, 8), ((4, 3, 3, 3), "float64")], {},
     "conv2d: data, weight must have the same dtype: expected float32, got float32, float64"),
    ("nn.conv2d_transpose", [(1, 4, 5, 5), (3, 2, 3, 3)], {},
     "conv2d_transpose: weight dim 0: expected 4 (input channels), got 3"),
    ("nn.conv2d_transpose", [(1, 3, 5, 5), (3, 2, 3, 3)], dict(groups=2),
     "conv2d_transpose: input channels: expected a multiple of groups 2, got 3"),
    ("nn.conv2d_transpose", [(1, 4, 5, 5), (4, 2, 3, 3)], dict(strides=(2, 1), output_padding=(1, 1)),
     "conv2d_transpose: output_padding: expected values below the strides (2, 1), got (1, 1)"),
    ("nn.conv2d_transpose", [(1, 4, 1, 5), (4, 2, 1, 3)], dict(padding=(1, 0, 0, 0)),
     "conv2d_transpose: height: expected a positive output size, got 0 (input 1, padding 1 + 0)"),
    ("nn.matmul", [(3, 4), (5, 6)], {}, "matmul: rows of b (columns of a): expected 4, got 5"),
    ("nn.matmul", [(3, 4), (5,)], {}, "matmul: length of b (columns of a): expected 4, got 5"),
    ("nn.matmul", [(2, 3, 4), (3, 4, 5)], {},
     "shapes (2,) and (3,) do not broadcast: at axis -1 expected equal sizes or 1, got 2, 3"),
    ("nn.matmul", [((), F), (3,)], {}, "matmul: a: expected a tensor of rank >= 1, got Tensor[(), float32]"),
    ("nn.matmul", [((3,), "bool"), ((3,), "bool")], {},
     "matmul: a: expected a numeric tensor, got Tensor[(3,), bool]"),
    ("nn.dense", [(2, 4), (3, 5)], {}, "dense: weight dim 1 (data dim -1): expected 4, got 5"),
    ("nn.dense", [(2, 4), (3, 5, 4)], {},
     "dense: weight: expected a 2-D tensor [units, K], got Tensor[(3, 5, 4), float32]"),
    ("nn.max_pool2d", [(1, 2, 4, 4)], dict(pool_size=(5, 2)),
     "max_pool2d: height: expected padded input size >= window size 5, got 4 (input 4, padding 0 + 0)"),
    ("nn.max_pool2d", [(1, 2, 4, 4)], dict(pool_size=(2,)),
     "max_pool2d: pool_size: expected 2 values (h, w), got (2,)"),
    ("nn.avg_pool2d", [((1, 2, 4, 4), "int32")], dict(pool_size=(2, 2)),
     "avg_pool2d: data: expected a floating-point tensor, got Tensor[(1, 2, 4, 4), int32]"),
    ("nn.avg_pool2d", [(2, 4, 4)], dict(pool_size=(2, 2)),
     "avg_pool2d: data: expected a 4-D tensor [N, C, H, W], got Tensor[(2, 4, 4), float32]"),
    ("nn.global_avg_pool2d", [(2, 4)], {},
     "global_avg_pool2d: data: expected a tensor [N, C, spatial...] of rank >= 3, got Tensor[(2, 4), float32]"),
    ("nn.batch_norm", [(1, 3, 4, 4), (3,), (3,), (4,), (3,)], {}, "batch_norm: mean: expected shape (3,), got (4,)"),
    ("nn.batch_norm", [(1, 3, 4, 4), (3, 1), (3,), (3,), (3,)], {},
     "batch_norm: gamma: expected shape (3,), got (3, 1)"),
    ("nn.batch_norm", [(1, 3), (3,), (3,), (3,), (3,)], dict(axis=2),
     "batch_norm: axis: expected a value in [-2, 1], got 2"),
    ("nn.layer_norm", [(2, 3, 8), (3, 8), (8,)], dict(axis=-1),
     "layer_norm: gamma: expected a shape that broadcasts to the normalized shape (8,), got (3, 8)"),
    ("nn.layer_norm", [(2, 3, 8), (3, 8), (2, 8)], dict(axis=1),
     "layer_norm: beta: expected a shape that broadcasts to the normalized shape (3, 8), got (2, 8)"),
    ("nn.layer_norm", [(2, 3, 8), (8,), ((8,), "float16")], {},
     "layer_norm: data, gamma, beta must have the same dtype: expected float32, got float32, float32, float16"),
    ("nn.instance_norm", [(2, 3, 5), (4,), (3,)], {}, "instance_norm: gamma: expected shape (3,), got (4,)"),
    ("nn.lrn", [(2, 3)], dict(size=3),
     "lrn: data: expected a tensor [N, C, spatial...] of rank >= 3, got Tensor[(2, 3), float32]"),
    ("nn.lrn", [(1, 2, 3, 3)], dict(size=0), "lrn: size: expected a value >= 1, got 0"),
]


@pytest.mark.parametrize("op,types,attrs,message", REL_ERRORS)
def test_rel_errors(op, types, attrs, message):
    types = [t if isinstance(t[0], tuple) else (t, F) for t in types]
    with pytest.raises(TypeInferenceError) as exc:
        sig(op, *types, **attrs)
    assert str(exc.value) == _msg(op, types, message)


def test_rel_error_names_the_call():
    x, w = var("x", (1, 6, 8, 8)), var("w", (4, 4, 3, 3))
    with pytest.raises(TypeInferenceError, match=r"^type mismatch in @main: call 'conv1' \(operator 'nn.conv2d'\)"):
        infer(call("nn.conv2d", x, w, groups=2, meta={"name": "conv1", "op_type": "Conv"}))


def test_attr_errors():
    with pytest.raises(AttrError, match=r"^operator 'nn.max_pool2d': missing required attribute 'pool_size'$"):
        call("nn.max_pool2d", var("x", (1, 1, 4, 4)))
    with pytest.raises(AttrError, match=r"^operator 'nn.lrn': missing required attribute 'size'$"):
        call("nn.lrn", var("x", (1, 1, 4, 4)))
    with pytest.raises(AttrError, match=r"^operator 'nn.conv2d': unknown attribute 'pads' "):
        call("nn.conv2d", var("x", (1, 1, 4, 4)), var("w", (1, 1, 1, 1)), pads=(0, 0, 0, 0))
    with pytest.raises(AttrError, match=r"^operator 'nn.conv2d', attribute 'groups': expected int, got 1.5$"):
        call("nn.conv2d", var("x", (1, 1, 4, 4)), var("w", (1, 1, 1, 1)), groups=1.5)
    with pytest.raises(TypeInferenceError, match=r"expected 2 to 3 arguments, got 1$"):
        infer(call("nn.layer_norm", var("x", (2, 3))))
