"""TE computes of convolutions, matmul/dense, pools and normalizations vs their numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from computes_util import check, rand, rng_for

SUM_ATOL = 1e-5  # sums of products of values in [-3, 3] whose summation order differs from numpy's

# (data shape, weight shape, strides, padding (t, l, b, r), dilation, groups): tests/op/test_nn.py's cases
CONV_CASES = [
    ((1, 3, 8, 8), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 3, 9, 7), (5, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ((1, 4, 10, 11), (6, 4, 3, 2), (2, 1), (1, 0, 2, 1), (1, 1), 1),
    ((1, 6, 9, 9), (4, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),
    ((2, 8, 12, 12), (8, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 8),
    ((1, 4, 12, 12), (8, 1, 3, 3), (2, 2), (0, 1, 1, 0), (1, 1), 4),
    ((1, 2, 13, 13), (3, 2, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),
    ((1, 4, 11, 10), (4, 2, 2, 3), (3, 2), (0, 2, 1, 0), (2, 3), 2),
    ((2, 5, 1, 16), (3, 5, 1, 4), (1, 2), (0, 1, 0, 2), (1, 1), 1),
    ((1, 3, 5, 5), (2, 3, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 2, 4, 4), (3, 2, 4, 4), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((1, 4, 9, 8), (6, 4, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),  # strided 1x1: a subsampled copy first
    ((1, 4, 7, 9), (4, 2, 1, 1), (2, 3), (0, 0, 0, 0), (1, 1), 2),
]


@pytest.mark.parametrize("dshape,wshape,strides,padding,dilation,groups", CONV_CASES)
def test_conv2d(dshape, wshape, strides, padding, dilation, groups):
    rng = rng_for("conv", dshape, wshape)
    check("nn.conv2d", [rand(rng, dshape), rand(rng, wshape)], strides=strides, padding=padding,
          dilation=dilation, groups=groups, atol=SUM_ATOL)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_conv2d_dtypes(dtype):
    rng = rng_for("conv", dtype)
    check("nn.conv2d", [rand(rng, (1, 4, 5, 5), dtype), rand(rng, (4, 2, 3, 3), dtype)], padding=(1, 0, 0, 1),
          groups=2, rtol=1e-5 if dtype != "float16" else 2e-3, atol=1e-5 if dtype != "float16" else 2e-3)


# data, weight [C, O/groups, KH, KW], strides, padding, dilation, groups, output_padding
TCONV_CASES = [
    ((1, 3, 4, 4), (3, 2, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0)),
    ((1, 2, 3, 4), (2, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, (1, 0)),
    ((2, 4, 3, 3), (4, 1, 2, 3), (2, 3), (0, 1, 1, 0), (1, 1), 2, (1, 2)),
    ((1, 2, 4, 3), (2, 2, 3, 2), (1, 2), (2, 0, 1, 1), (2, 2), 1, (0, 1)),
    ((1, 4, 3, 3), (4, 1, 3, 3), (3, 3), (1, 1, 1, 1), (1, 1), 4, (2, 2)),
    # the gather form's tap patterns: one tap per output (kernel = stride, U-Net upsampling), phases
    # without a tap (kernel < stride), taps of each phase reaching below row 0 and past the last row
    ((1, 3, 4, 5), (3, 2, 2, 2), (2, 2), (0, 0, 0, 0), (1, 1), 1, (0, 0)),
    ((1, 2, 3, 3), (2, 3, 1, 2), (2, 3), (0, 0, 0, 0), (1, 1), 1, (1, 2)),
    ((1, 2, 4, 3), (2, 2, 5, 4), (3, 2), (2, 1, 0, 2), (1, 1), 1, (2, 1)),
    ((1, 4, 3, 4), (4, 2, 4, 4), (2, 2), (1, 1, 1, 1), (1, 1), 2, (0, 0)),
]


@pytest.mark.parametrize("dshape,wshape,strides,padding,dilation,groups,output_padding", TCONV_CASES)
def test_conv2d_transpose(dshape, wshape, strides, padding, dilation, groups, output_padding):
    rng = rng_for("tconv", dshape, wshape)
    check("nn.conv2d_transpose", [rand(rng, dshape), rand(rng, wshape)], strides=strides, padding=padding,
          dilation=dilation, groups=groups, output_padding=output_padding, atol=SUM_ATOL)


MATMUL_SHAPES = [((3, 4), (4, 5)), ((4,), (4, 3)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 2)),
                 ((2, 1, 3, 4), (3, 4, 2)), ((1, 3, 4), (2, 4, 5)), ((2, 3, 0), (0, 4))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb):
    rng = rng_for("matmul", sa, sb)
    check("nn.matmul", [rand(rng, sa), rand(rng, sb)], atol=SUM_ATOL)


@pytest.mark.parametrize("dtype", ["float16", "float64", "int32", "int64"])
def test_matmul_dtypes(dtype):
    rng = rng_for("matmul", dtype)
    check("nn.matmul", [rand(rng, (2, 3, 4), dtype, -9, 9), rand(rng, (4, 5), dtype, -9, 9)],
          rtol=1e-5 if dtype != "float16" else 2e-3, atol=1e-5 if dtype != "float16" else 2e-2)


@pytest.mark.parametrize("sx,units", [((3, 4), 5), ((1, 16), 8), ((2, 3, 4), 2), ((4,), 3), ((0, 4), 2)])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_dense(sx, units, dtype):
    rng = rng_for("dense", sx, dtype)
    check("nn.dense", [rand(rng, sx, dtype, -9, 9), rand(rng, (units, sx[-1]), dtype, -9, 9)], atol=SUM_ATOL * 30)


# (data shape, pool_size, strides, padding, dilation, ceil_mode): tests/op/test_nn.py's cases
POOL_CASES = [
    ((1, 2, 6, 6), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),
    ((2, 3, 7, 8), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),
    ((1, 2, 7, 8), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True),
    ((1, 2, 6, 7), (3, 2), (2, 3), (0, 1, 2, 0), (1, 1), True),
    ((1, 1, 5, 5), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), True),
    ((1, 2, 9, 9), (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), False),
    ((1, 2, 10, 9), (2, 3), (3, 2), (1, 0, 1, 2), (2, 1), True),
    ((1, 3, 4, 4), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False),
    ((1, 1, 1, 9), (1, 3), (1, 2), (0, 1, 0, 1), (1, 1), True),
    ((1, 1, 3, 3), (3, 3), (1, 1), (2, 2, 2, 2), (1, 1), False),  # windows of padding only (max: lowest)
]


def _pool_attrs(k, s, p, d, ceil):
    return dict(pool_size=k, strides=s, padding=p, dilation=d, ceil_mode=ceil)


@pytest.mark.parametrize("shape,k,s,p,d,ceil", POOL_CASES)
def test_max_pool2d(shape, k, s, p, d, ceil):
    check("nn.max_pool2d", [rand(rng_for("maxpool", shape, k), shape)], **_pool_attrs(k, s, p, d, ceil))


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("shape,k,s,p,d,ceil", POOL_CASES)
def test_avg_pool2d(shape, k, s, p, d, ceil, count_include_pad):
    x = rand(rng_for("avgpool", shape, k), shape)
    check("nn.avg_pool2d", [x], count_include_pad=count_include_pad, **_pool_attrs(k, s, p, d, ceil))


@pytest.mark.parametrize("dtype", ["float64", "float16", "int8", "uint8"])
def test_max_pool2d_dtypes(dtype):
    x = rand(rng_for("maxpool", dtype), (1, 2, 7, 7), dtype, -100 if dtype != "uint8" else 0, 100)
    x.reshape(-1)[3] = np.nan if dtype[0] == "f" else x.reshape(-1)[3]
    check("nn.max_pool2d", [x], **_pool_attrs((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True))


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_avg_pool2d_dtypes(dtype):
    x = rand(rng_for("avg", dtype), (1, 2, 5, 6), dtype)
    check("nn.avg_pool2d", [x], **_pool_attrs((2, 3), (1, 2), (1, 1, 0, 1), (1, 1), True))


@pytest.mark.parametrize("shape", [(2, 3, 5, 6), (1, 4, 7), (1, 2, 3, 4, 2), (1, 1, 1, 1)])
@pytest.mark.parametrize("kind", ["avg", "max"])
def test_global_pool(shape, kind):
    check(f"nn.global_{kind}_pool2d", [rand(rng_for("global", kind, shape), shape)])
    check(f"nn.global_{kind}_pool2d", [rand(rng_for("global16", kind, shape), shape, "float16")])
    if kind == "max":
        check("nn.global_max_pool2d", [rand(rng_for("global8", shape), shape, "int8", -100, 100)])


# ---- normalizations ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape,axis", [((2, 3, 4, 5), 1), ((4, 6), 1), ((1, 2, 3), -1)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_batch_norm(shape, axis, dtype):
    rng = rng_for("bn", shape, dtype)
    c = shape[axis]
    params = [rand(rng, (c,), dtype), rand(rng, (c,), dtype), rand(rng, (c,), dtype), rand(rng, (c,), dtype, 0.1, 2)]
    check("nn.batch_norm", [rand(rng, shape, dtype)] + params, axis=axis, epsilon=1e-3)


LN_CASES = [((2, 3, 8), -1, (8,)), ((2, 3, 4, 5), 2, (4, 5)), ((2, 3, 4, 5), 1, (3, 4, 5)), ((3, 4), 0, (1, 4)),
            ((2, 6), -1, (1,))]


@pytest.mark.parametrize("shape,axis,pshape", LN_CASES)
@pytest.mark.parametrize("with_beta", [True, False])
def test_layer_norm(shape, axis, pshape, with_beta):
    rng = rng_for("ln", shape, axis)
    args = [rand(rng, shape), rand(rng, pshape)] + ([rand(rng, pshape)] if with_beta else [])
    check("nn.layer_norm", args, axis=axis, epsilon=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_layer_norm_dtypes(dtype):
    rng = rng_for("ln", dtype)
    check("nn.layer_norm", [rand(rng, (2, 3, 4), dtype), rand(rng, (4,), dtype), rand(rng, (4,), dtype)])


@pytest.mark.parametrize("shape,eps", [((2, 3, 4, 5), 1e-5), ((1, 4, 7), 1e-3), ((2, 2, 3, 2, 2), 1e-5)])
def test_instance_norm(shape, eps):
    rng = rng_for("in", shape)
    c = shape[1]
    check("nn.instance_norm", [rand(rng, shape), rand(rng, (c,)), rand(rng, (c,))], epsilon=eps)


@pytest.mark.parametrize("size,alpha,beta,bias", [(1, 1e-4, 0.75, 1.0), (3, 0.1, 0.75, 1.0), (5, 1.0, 1.5, 0.5),
                                                  (2, 0.5, 0.5, 2.0), (4, 0.2, 1.0, 1.0)])
def test_lrn(size, alpha, beta, bias):
    x = rand(rng_for("lrn", size), (2, 5, 3, 2))
    check("nn.lrn", [x], size=size, alpha=alpha, beta=beta, bias=bias)
    check("nn.lrn", [x.astype("float16")], size=size, alpha=alpha, beta=beta, bias=bias)
