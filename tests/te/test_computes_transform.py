"""TE computes of the shape, data-movement and indexing operators vs their numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from computes_util import check, lower, rand, rng_for

from plait import tir

INT_MAX, INT_MIN = 2**63 - 1, -(2**63)
DTYPES = ["float32", "int64", "bool", "float16"]


def data(shape, dtype="float32", key=0):
    return rand(rng_for("data", shape, dtype, key), shape, dtype, -50, 50)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_flatten_squeeze_expand(dtype):
    x = data((2, 3, 4), dtype)
    for newshape in [(4, 6), (0, -1), (-1,), (2, 0, 2, 2), (24, 1)]:
        check("reshape", [x], newshape=newshape)
    check("reshape", [data((), dtype)], newshape=(1, 1))
    check("reshape", [data((0, 3), dtype)], newshape=(3, -1))
    for axis in (0, 1, 2, 3, -1):
        check("flatten", [x], axis=axis)
    y = data((1, 3, 1, 2), dtype)
    for axes in (None, (0,), (-2, 0)):
        check("squeeze", [y], axes=axes)
    for axes in ((0,), (1, -1), (0, 2, 5)):
        check("expand_dims", [x], axes=axes)


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_broadcast_tile(dtype):
    x = data((2, 3, 4), dtype)
    for axes in (None, (0, 2, 1), (2, 0, 1), (-1, 0, 1)):
        check("transpose", [x], axes=axes)
    for shape in [(2, 3, 4), (5, 2, 3, 4), (2, 1, 1), (3, 1)]:
        check("broadcast_to", [data((2, 1, 4), dtype)], shape=shape)
    for reps in [(1, 1, 1), (2, 1, 3), (1, 0, 2)]:
        check("tile", [x], reps=reps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_concatenate_split(dtype):
    parts = [data((2, 3), dtype, 1), data((2, 1), dtype, 2), data((2, 0), dtype, 3), data((2, 4), dtype, 4)]
    check("concatenate", parts, axis=1)
    check("concatenate", parts, axis=-1)
    check("concatenate", [data((1, 3), dtype), data((2, 3), dtype)], axis=0)
    check("concatenate", [data((4,), dtype)], axis=0)
    x = data((6, 4), dtype)
    check("split", [x], sections=(1, 2, 3), axis=0)
    check("split", [x], sections=(2, 0, 2), axis=-1)
    check("split", [x], sections=(6,))


SLICES = [  # (begin, end, strides, axes) on a (5, 7) tensor: tests/op/test_transform.py's cases
    ((1, 2), (4, 6), None, None), ((0,), (3,), None, None), ((-3, -100), (INT_MAX, 100), None, None),
    ((4,), (INT_MIN,), (-1,), None), ((-1, 6), (-6, 0), (-2, -3), None), ((2,), (5,), (2,), (-1,)),
    ((10,), (20,), None, None), ((3,), (1,), None, None), ((6,), (-8,), (-1,), (1,)),
    ((0, 1), (INT_MAX, INT_MAX), (3, 2), (1, 0)), ((-8,), (3,), (1,), (1,)), ((4,), (-6,), (-1,), (0,)),
]


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_strided_slice(dtype):
    x = data((5, 7), dtype)
    for begin, end, strides, axes in SLICES:
        check("strided_slice", [x], begin=begin, end=end, strides=strides, axes=axes)


def test_strided_slice_random():
    rng = rng_for("slice")
    x = data((4, 6, 5), "int64")
    for _ in range(20):
        axes = tuple(int(a) for a in rng.permutation(3)[: rng.integers(1, 4)])
        begin = tuple(int(v) for v in rng.integers(-8, 8, len(axes)))
        end = tuple(int(v) for v in rng.integers(-8, 8, len(axes)))
        strides = tuple(int(v) or 1 for v in rng.integers(-3, 4, len(axes)))
        check("strided_slice", [x], begin=begin, end=end, strides=strides, axes=axes)


PADS = [(0, 1, 2, 0), (1, 1, 1, 1), (0, -1, 0, 2), (-1, 2, 1, -2), (2, 0, 0, 3), (0, 0, 0, 0), (2, 3, 2, 3)]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_pad(mode, dtype):
    x = data((3, 4), dtype)
    for pads in [p for p in PADS if mode != "reflect" or p != (-1, 2, 1, -2)]:
        check("nn.pad", [x], pad_width=pads, pad_mode=mode, pad_value=2.5)
    check("nn.pad", [data((2, 3, 4), dtype)], pad_width=(1, 0, 2, 0, 1, 1), pad_mode=mode, pad_value=-1.0)


def test_pad_wide_wrap_and_bool_constant():
    check("nn.pad", [data((3, 4))], pad_width=(0, 5, 0, 9), pad_mode="wrap")
    check("nn.pad", [data((2, 3), "bool")], pad_width=(1, 0, 0, 2), pad_value=1.0)


def test_device_copy():
    for dtype in DTYPES:
        check("device_copy", [data((2, 3), dtype)], src="a", dst="b")
    check("device_copy", [data((), "float32")])


@pytest.mark.parametrize("start,limit,delta,dtype", [
    (0, 10, 3, "int64"), (10, 0, -3, "int32"), (0.5, 2.0, 0.25, "float32"), (5, 1, 1, "int64"),
    (-2.0, 2.0, 0.5, "float64"), (1, 2, 5, "int16"), (0.1, 3.0, 0.3, "float16"), (-1.7, 4.2, 1.3, "int32"),
])
def test_range(start, limit, delta, dtype):
    check("range", [], start=start, limit=limit, delta=delta, dtype=dtype)


def test_injective_ops_are_inlined_into_one_nest():
    func, _ = lower("transpose", [data((2, 3, 4))], axes=(2, 0, 1))
    nests = [s for s in tir.pre_order(func.body) if isinstance(s, tir.For) and "stage" in s.annotations]
    assert [n.annotations["op"] for n in nests] == ["transpose"]
    assert not [s for s in tir.pre_order(func.body) if isinstance(s, tir.Allocate)]


# ---- gathers, one_hot, trilu ----------------------------------------------------------------------


def _indices(shape, size, dtype, key=0):
    return rng_for("idx", shape, size, key).integers(-size, size, shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_take(dtype, index_dtype):
    x = data((3, 4, 5), dtype)
    for axis in (0, 1, -1):
        size = x.shape[axis]
        for ishape in [(), (2,), (2, 3)]:
            check("take", [x, _indices(ishape, size, index_dtype)], axis=axis)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_gather_elements(dtype):
    x = data((3, 4), dtype)
    for axis, ishape in [(0, (2, 4)), (1, (3, 2)), (-1, (2, 6)), (0, (5, 1))]:
        check("gather_elements", [x, _indices(ishape, x.shape[axis], "int64", axis)], axis=axis)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_gather_nd(dtype):
    x = data((2, 3, 4), dtype)
    rng = rng_for("gnd", dtype)
    for b, ishape in [(0, (2, 1)), (0, (3, 2)), (0, (2, 2, 3)), (1, (2, 2)), (1, (2, 3, 1)), (2, (2, 3, 1))]:
        m = ishape[-1]
        idx = np.stack([rng.integers(-x.shape[b + j], x.shape[b + j], ishape[:-1]) for j in range(m)], -1)
        check("gather_nd", [x, idx.astype("int64")], batch_dims=b)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(dtype, axis):
    idx = np.array([[0, -1, 3], [5, -6, 2]], "int64")  # 5 and -6 are outside depth 4: all off
    check("one_hot", [idx], depth=4, axis=axis, on_value=3.0, off_value=-1.5, dtype=dtype)
    check("one_hot", [np.array([1.7, -0.5, 2.0], "float32")], depth=3, axis=axis if axis != 1 else 0, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("upper", [True, False])
def test_trilu(dtype, upper):
    for k in (-5, -1, 0, 2, 6):
        check("trilu", [data((2, 3, 4), dtype)], upper=upper, k=k)
