"""Shape and data-movement operators: references vs ONNX Runtime, type relations (symbolic dims), errors."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from ort_util import assert_close, run_onnx_node, run_plait_op

from plait.errors import TypeInferenceError
from plait.ir import Cost, OpPattern, TensorType, TupleType
from plait.op import get_op
from plait.relay import IRModule, call, infer_type, var

I64 = np.int64
INT_MAX, INT_MIN = 2**63 - 1, -(2**63)


def rng_for(*key: object) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def data(shape, dtype="float32", key=0) -> np.ndarray:
    rng = rng_for(shape, dtype, key)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-100 if np.dtype(dtype).kind == "i" else 0, 100, shape).astype(dtype)
    return rng.uniform(-10, 10, shape).astype(dtype)


def ints(*v) -> np.ndarray:
    return np.array(v, I64)


def check(op, inputs, attrs, onnx_op, onnx_inputs, onnx_attrs=None, opset=18):
    got = run_plait_op(op, inputs, **attrs)
    want = run_onnx_node(onnx_op, onnx_inputs, onnx_attrs or {}, opset=opset,
                         n_outputs=len(got) if isinstance(got, tuple) else 1)
    if isinstance(got, tuple):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w)
    else:
        assert_close(got, want[0])


def infer(op, *arg_types, **attrs):
    """The checked type of one call on parameters of the given types (shape tuples or TensorTypes)."""
    ts = [t if isinstance(t, TensorType) else TensorType(t) for t in arg_types]
    params = [var(f"x{i}", t.shape, t.dtype) for i, t in enumerate(ts)]
    c = call(op, *params, **attrs)
    infer_type(IRModule.from_expr(c))
    return c.checked_type


def rel_error(op, *arg_types, **attrs) -> str:
    """The operator's own message of the type error of one call (the inference prefix is checked too)."""
    ts = [t if isinstance(t, TensorType) else TensorType(t) for t in arg_types]
    with pytest.raises(TypeInferenceError) as e:
        infer(op, *ts, **attrs)
    prefix = (f"type mismatch in @main: call (operator '{op}') with argument types "
              f"({', '.join(str(t) for t in ts)}): ")
    msg = str(e.value)
    assert msg.startswith(prefix), msg
    return msg[len(prefix):]


# ---- reshape ---------------------------------------------------------------------------------------

RESHAPES = [((2, 3, 4), (4, -1)), ((2, 3, 4), (0, -1)), ((2, 3, 4), (0, 0, -1)), ((2, 3, 4), (-1,)),
            ((2, 3, 4), (24,)), ((2, 3, 4), (-1, 0, 2, 1)), ((1,), ()), ((), (1, 1)), ((6,), (3, 2))]


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_reshape_vs_ort(dtype):
    for shape, new in RESHAPES:
        x = data(shape, dtype)
        check("reshape", [x], {"newshape": new}, "Reshape", [x, np.array(new, I64)])


def test_reshape_full_message_and_errors():
    x = var("x", (2, 3, 4))
    mod = IRModule.from_expr(call("reshape", x, newshape=(5, -1), meta={"name": "Reshape_7"}))
    with pytest.raises(TypeInferenceError) as e:
        infer_type(mod)
    assert str(e.value) == ("type mismatch in @main: call 'Reshape_7' (operator 'reshape') with argument types "
                            "(Tensor[(2, 3, 4), float32]): reshape: cannot reshape 24 elements into shape (5, -1)")
    assert rel_error("reshape", (2, 3, 4), newshape=(5, 5)) == "reshape: cannot reshape 24 elements into shape (5, 5)"
    assert rel_error("reshape", (2, 3, 4), newshape=(-1, -1)) == (
        "reshape: expected at most one -1 in newshape, got (-1, -1)")
    assert rel_error("reshape", (2, 3, 4), newshape=(-2, 12)) == (
        "reshape: expected newshape values >= -1, got (-2, 12)")
    assert rel_error("reshape", (2, 12), newshape=(0, 3, 0)) == (
        "reshape: newshape (0, 3, 0) copies dimension 2 with 0, but the input has rank 2")
    assert rel_error("reshape", ("n", 12), newshape=(0, 5)) == (
        "reshape: cannot reshape shape (n, 12) into shape (0, 5)")
    assert rel_error("reshape", ("n", 12), newshape=(0, 5, -1)) == (
        "reshape: cannot reshape shape (n, 12) into shape (0, 5, -1)")


def test_reshape_symbolic_dims():
    assert infer("reshape", ("n", 3, 4), newshape=(0, -1)) == TensorType(("n", 12))
    assert infer("reshape", ("n", 3, 4), newshape=(0, 12)) == TensorType(("n", 12))
    assert infer("reshape", ("n", 12), newshape=(-1, 3, 4)) == TensorType(("n", 3, 4))  # -1 is the lone n
    assert infer("reshape", ("n", 12), newshape=(-1, 6)) == TensorType(("?", 6))
    assert infer("reshape", ("n", "m", 4), newshape=(0, -1)) == TensorType(("n", "?"))
    assert infer("reshape", ("n", 3), newshape=(3, 0)) == TensorType((3, 3))  # copies the static dim 1
    assert infer("reshape", (2, 3, 4), newshape=(0, -1, 2)) == TensorType((2, 6, 2))


# ---- transpose, flatten, squeeze, expand_dims ------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_transpose_vs_ort(dtype):
    x = data((2, 3, 4), dtype)
    for perm in [None, (1, 0, 2), (2, 0, 1), (0, 1, 2)]:
        check("transpose", [x], {"axes": perm}, "Transpose", [x], {} if perm is None else {"perm": list(perm)})
    np.testing.assert_array_equal(run_plait_op("transpose", [x], axes=(-1, 0, -2)), x.transpose(2, 0, 1))


def test_transpose_types_and_errors():
    assert infer("transpose", ("n", 3, 4)) == TensorType((4, 3, "n"))
    assert infer("transpose", ("n", 3, 4), axes=(1, 0, 2)) == TensorType((3, "n", 4))
    assert rel_error("transpose", (2, 3), axes=(0,)) == "transpose: expected 2 axes (one per input dim), got (0,)"
    assert rel_error("transpose", (2, 3, 4), axes=(0, 0, 1)) == (
        "transpose: expected a permutation of 0..2, got (0, 0, 1)")


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_flatten_vs_ort(dtype):
    x = data((2, 3, 4), dtype)
    for axis in [0, 1, 2, 3, -1, -3]:
        check("flatten", [x], {"axis": axis}, "Flatten", [x], {"axis": axis})


def test_flatten_types_and_errors():
    assert infer("flatten", ("n", 3, 4)) == TensorType(("n", 12))
    assert infer("flatten", ("n", 3, 4), axis=2) == TensorType(("?", 4))
    assert infer("flatten", ("n", 3, 4), axis=0) == TensorType((1, "?"))
    assert infer("flatten", (2, 0, 4), axis=2) == TensorType((0, 4))
    assert rel_error("flatten", (2, 3), axis=3) == "flatten: axis: expected a value in [-2, 2], got 3"


def test_squeeze_vs_ort():
    x = data((1, 3, 1, 4))
    for axes in [None, (0,), (-2,), (0, 2)]:
        check("squeeze", [x], {"axes": axes}, "Squeeze", [x] if axes is None else [x, np.array(axes, I64)])
    b = data((1, 1), "bool")
    check("squeeze", [b], {}, "Squeeze", [b])


def test_squeeze_types_and_errors():
    assert infer("squeeze", ("n", 1, 3), axes=(1,)) == TensorType(("n", 3))
    assert infer("squeeze", ("n", 1, 3), axes=(0,)) == TensorType((1, 3))  # a symbol may be 1
    assert rel_error("squeeze", (1, "n", 1)) == (
        "squeeze: without axes the result depends on symbolic dimension 'n' (axis 1): expected explicit axes, "
        "got None")
    assert rel_error("squeeze", (1, 3), axes=(-1,)) == "squeeze: axis -1: expected a dimension of size 1, got 3"
    assert rel_error("squeeze", (1, 1), axes=(0, -2)) == "squeeze: expected distinct axes, got (0, -2)"
    assert rel_error("squeeze", (1, 1), axes=(2,)) == "squeeze: axis: expected a value in [-2, 1], got 2"


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_expand_dims_vs_ort(dtype):
    x = data((3, 4), dtype)
    for axes in [(0,), (-1,), (0, 3), (1, 2), (2, 0), (-1, 0)]:
        check("expand_dims", [x], {"axes": axes}, "Unsqueeze", [x, np.array(axes, I64)])


def test_expand_dims_types_and_errors():
    assert infer("expand_dims", ("n", 4), axes=(0, -1)) == TensorType((1, "n", 4, 1))
    assert infer("expand_dims", (), axes=(0,)) == TensorType((1,))
    assert rel_error("expand_dims", (3, 4), axes=(1, -3)) == "expand_dims: expected distinct axes, got (1, -3)"
    assert rel_error("expand_dims", (3, 4), axes=(3,)) == "expand_dims: axis: expected a value in [-3, 2], got 3"


# ---- broadcast_to, tile ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_broadcast_to_vs_ort(dtype):
    cases = [((3, 1), (2, 3, 4)), ((3, 4), (3, 1)), ((1,), ()), ((2, 1, 3), (1, 4, 1)), ((), (2, 2)),
             ((3, 1), (0, 1, 1))]
    for shape, target in cases:
        x = data(shape, dtype)
        check("broadcast_to", [x], {"shape": target}, "Expand", [x, np.array(target, I64)])


def test_broadcast_to_types_and_errors():
    assert infer("broadcast_to", ("n", 1), shape=(1, 5)) == TensorType(("n", 5))
    assert infer("broadcast_to", ("n", 1), shape=(3, 1)) == TensorType((3, 1))
    assert rel_error("broadcast_to", (2, 3), shape=(4,)) == (
        "broadcast_to: shapes (2, 3) and (4,) do not broadcast: at axis -1 expected equal sizes or 1, got 3, 4")
    assert rel_error("broadcast_to", (2, 3), shape=(-1, 3)) == (
        "broadcast_to: expected a shape of sizes >= 0, got (-1, 3)")
    assert get_op("broadcast_to").pattern == OpPattern.BROADCAST


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_tile_vs_ort(dtype):
    x = data((2, 3, 1), dtype)
    for reps in [(2, 1, 3), (1, 1, 1), (0, 2, 1), (3, 2, 2)]:
        check("tile", [x], {"reps": reps}, "Tile", [x, np.array(reps, I64)])


def test_tile_types_and_errors():
    assert infer("tile", ("n", "m", 3), reps=(1, 2, 0)) == TensorType(("n", "?", 0))
    assert rel_error("tile", (2, 3), reps=(2,)) == "tile: expected 2 reps (one per input dim), got (2,)"
    assert rel_error("tile", (2, 3), reps=(2, -1)) == "tile: expected reps >= 0, got (2, -1)"


# ---- concatenate, split ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_concatenate_vs_ort(dtype):
    a, b, c = data((2, 3), dtype, 1), data((2, 1), dtype, 2), data((2, 0), dtype, 3)
    check("concatenate", [a, b, c], {"axis": 1}, "Concat", [a, b, c], {"axis": 1})
    check("concatenate", [a, b], {"axis": -1}, "Concat", [a, b], {"axis": -1})
    d = data((4, 3), dtype, 4)
    check("concatenate", [a, d], {"axis": 0}, "Concat", [a, d], {"axis": 0})
    check("concatenate", [a], {"axis": 0}, "Concat", [a], {"axis": 0})


def test_concatenate_types_and_errors():
    assert infer("concatenate", ("n", 3), ("n", 4), axis=1) == TensorType(("n", 7))
    assert infer("concatenate", ("n", 3), (2, 3), axis=0) == TensorType(("?", 3))
    assert infer("concatenate", ("n", 3), (2, 4), axis=1) == TensorType((2, 7))
    assert infer("concatenate", ("n", 3), ("m", 4), axis=1) == TensorType(("?", 7))
    assert rel_error("concatenate", (2, 3), TensorType((2, 3), "int32"), axis=0) == (
        "concatenate: argument 1: expected dtype float32, got int32")
    assert rel_error("concatenate", (2, 3), (2,), axis=0) == "concatenate: argument 1: expected rank 2, got 1"
    assert rel_error("concatenate", (2, 3), (2, 3), (5, 4), axis=0) == (
        "concatenate: argument 2: expected size 3 at axis 1 (as argument 0), got 4")
    assert rel_error("concatenate", (2, 3), axis=2) == "concatenate: axis: expected a value in [-2, 1], got 2"


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_split_vs_ort(dtype):
    x = data((6, 4), dtype)
    for sections, axis in [((1, 2, 3), 0), ((2, 2), -1), ((6,), 0), ((0, 4), 1)]:
        check("split", [x], {"sections": sections, "axis": axis}, "Split", [x, np.array(sections, I64)],
              {"axis": axis})


def test_split_types_and_errors():
    assert infer("split", ("n", 6), sections=(2, 4), axis=1) == TupleType(
        (TensorType(("n", 2)), TensorType(("n", 4))))
    assert infer("split", ("n", 6), sections=(1, 1)) == TupleType((TensorType((1, 6)), TensorType((1, 6))))
    assert rel_error("split", (6, 4), sections=(2, 3)) == (
        "split: sections (2, 3) must sum to the size of axis 0: expected 6, got 5")
    assert rel_error("split", (6, 4), sections=(7, -1)) == (
        "split: expected one or more sections >= 0 (or all -1), got (7, -1)")


# ---- strided_slice ---------------------------------------------------------------------------------

SLICES = [  # (begin, end, strides, axes) on a (5, 7) tensor
    ((1, 2), (4, 6), None, None), ((0,), (3,), None, None), ((-3, -100), (INT_MAX, 100), None, None),
    ((4,), (INT_MIN,), (-1,), None), ((-1, 6), (-6, 0), (-2, -3), None), ((2,), (5,), (2,), (-1,)),
    ((10,), (20,), None, None), ((3,), (1,), None, None), ((6,), (-8,), (-1,), (1,)),
    ((0, 1), (INT_MAX, INT_MAX), (3, 2), (1, 0)), ((-8,), (3,), (1,), (1,)), ((4,), (-6,), (-1,), (0,)),
]


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_strided_slice_vs_ort(dtype):
    x = data((5, 7), dtype)
    for begin, end, strides, axes in SLICES:
        n = len(begin)
        onnx_in = [x, np.array(begin, I64), np.array(end, I64), np.array(axes if axes else range(n), I64),
                   np.array(strides if strides else (1,) * n, I64)]
        check("strided_slice", [x], {"begin": begin, "end": end, "strides": strides, "axes": axes}, "Slice",
              onnx_in)


def test_strided_slice_random_vs_ort():
    rng = rng_for("slice")
    x = data((4, 6, 5), "int64")
    for _ in range(30):
        axes = tuple(int(a) for a in rng.permutation(3)[: rng.integers(1, 4)])
        begin = tuple(int(v) for v in rng.integers(-8, 8, len(axes)))
        end = tuple(int(v) for v in rng.integers(-8, 8, len(axes)))
        strides = tuple(int(v) or 1 for v in rng.integers(-3, 4, len(axes)))
        onnx_in = [x, np.array(begin, I64), np.array(end, I64), np.array(axes, I64), np.array(strides, I64)]
        check("strided_slice", [x], {"begin": begin, "end": end, "strides": strides, "axes": axes}, "Slice",
              onnx_in)


def test_strided_slice_types_and_errors():
    assert infer("strided_slice", ("n", 7), begin=(0, 1), end=(INT_MAX, 5)) == TensorType(("n", 4))
    assert infer("strided_slice", ("n", 7), begin=(1,), end=(INT_MAX,)) == TensorType(("?", 7))
    assert infer("strided_slice", (5, 7), begin=(4,), end=(INT_MIN,), strides=(-1,)) == TensorType((5, 7))
    assert infer("strided_slice", ("n",), begin=(-1,), end=(INT_MIN,), strides=(-1,)) == TensorType(("n",))
    assert infer("strided_slice", ("n",), begin=(-2,), end=(INT_MIN,), strides=(-1,)) == TensorType(("?",))
    assert rel_error("strided_slice", (5, 7), begin=(0, 1), end=(3,)) == (
        "strided_slice: expected end of length 2 (as begin), got (3,)")
    assert rel_error("strided_slice", (5, 7), begin=(0,), end=(3,), strides=(0,)) == (
        "strided_slice: expected non-zero strides, got (0,)")
    assert rel_error("strided_slice", (5, 7), begin=(0, 0), end=(3, 3), axes=(1, -1)) == (
        "strided_slice: expected distinct axes, got (1, -1)")
    assert rel_error("strided_slice", (5,), begin=(0, 0), end=(3, 3)) == (
        "strided_slice: expected at most 1 begin values (the input rank), got 2")


# ---- nn.pad ----------------------------------------------------------------------------------------

PADS = [(0, 1, 2, 0), (1, 1, 1, 1), (0, -1, 0, 2), (-1, 2, 1, -2), (2, 0, 0, 3), (0, 0, 0, 0)]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_pad_vs_ort(mode, dtype):
    x = data((3, 4), dtype)
    # reflect may not pad more than the (cropped) axis size minus 1: (-1, 2, 1, -2) is an error there
    for pads in [p for p in PADS if mode != "reflect" or p != (-1, 2, 1, -2)] + [(2, 3, 2, 3)]:
        onnx_in = [x, np.array(pads, I64)] + ([np.array(2.5).astype(dtype)] if mode == "constant" else [])
        check("nn.pad", [x], {"pad_width": pads, "pad_mode": mode, "pad_value": 2.5}, "Pad", onnx_in,
              {"mode": mode}, opset=19)


def test_pad_wide_wrap_and_bool_constant_vs_ort():
    x = data((3, 4))
    check("nn.pad", [x], {"pad_width": (0, 5, 0, 9), "pad_mode": "wrap"}, "Pad", [x, ints(0, 5, 0, 9)],
          {"mode": "wrap"}, opset=19)
    b = data((2, 3), "bool")
    check("nn.pad", [b], {"pad_width": (1, 0, 0, 2), "pad_value": 1.0}, "Pad", [b, ints(1, 0, 0, 2), np.array(True)])


def test_pad_types_and_errors():
    assert infer("nn.pad", ("n", 4), pad_width=(0, 1, 0, 2)) == TensorType(("n", 7))
    assert infer("nn.pad", ("n", 4), pad_width=(1, 0, -1, 0)) == TensorType(("?", 4))
    assert rel_error("nn.pad", (3, 4), pad_width=(1, 1)) == (
        "nn.pad: expected 4 pad_width values (begins then ends), got (1, 1)")
    assert rel_error("nn.pad", (3, 4), pad_width=(0, -3, 0, -2)) == (
        "nn.pad: axis 1 of size 4 padded by (-3, -2): expected a size >= 0, got -1")
    assert rel_error("nn.pad", (3, 4), pad_width=(0, 4, 0, 0), pad_mode="reflect") == (
        "nn.pad: reflect padding at axis 1: expected pads <= 3 (the cropped size 4 minus 1), got (4, 0)")
    assert rel_error("nn.pad", (0, 4), pad_width=(1, 0, 0, 0), pad_mode="edge") == (
        "nn.pad: edge padding at axis 0: expected a non-empty axis, got size 0")


# ---- device_copy, range ----------------------------------------------------------------------------


def test_device_copy_is_an_opaque_identity_copy():
    x = data((2, 3), "int64")
    out = run_plait_op("device_copy", [x], src="a", dst="b")
    assert_close(out, x)
    assert not np.shares_memory(out, x)
    op = get_op("device_copy")
    assert op.pattern == OpPattern.OPAQUE
    assert infer("device_copy", ("n", 3)) == TensorType(("n", 3))
    assert op.cost((TensorType((2, 3)),), TensorType((2, 3)), op.make_attrs({})) == Cost(0.0, 24.0, 24.0)


@pytest.mark.parametrize("start,limit,delta,dtype", [
    (0, 10, 3, "int64"), (10, 0, -3, "int32"), (0.5, 2.0, 0.25, "float32"), (5, 1, 1, "int64"),
    (-2.0, 2.0, 0.5, "float64"), (1, 2, 5, "int16"),
])
def test_range_vs_ort(start, limit, delta, dtype):
    got = run_plait_op("range", [], start=start, limit=limit, delta=delta, dtype=dtype)
    (want,) = run_onnx_node("Range", [np.array(v).astype(dtype) for v in (start, limit, delta)])
    assert_close(got, want)


def test_range_errors():
    assert rel_error("range", start=0, limit=3, delta=0) == "range: expected a non-zero delta, got 0.0"
    assert rel_error("range", start=0, limit=3, dtype="bool") == "range: expected a numeric dtype, got bool"


# ---- patterns and costs ----------------------------------------------------------------------------

INJECTIVE_OPS = ["reshape", "transpose", "flatten", "squeeze", "expand_dims", "tile", "concatenate", "split",
                 "strided_slice", "nn.pad", "range"]


@pytest.mark.parametrize("name", INJECTIVE_OPS)
def test_pattern_injective(name):
    assert get_op(name).pattern == OpPattern.INJECTIVE


def test_costs_are_data_movement():
    t = TensorType((2, 3, 4), "float32")
    for name in ("reshape", "flatten", "squeeze", "expand_dims"):  # views: executors alias them, nothing moves
        assert get_op(name).view
    r = get_op("reshape")
    assert r.cost((t,), TensorType((24,)), r.make_attrs({"newshape": (24,)})) == Cost()
    assert not get_op("transpose").view and not get_op("strided_slice").view
    s = get_op("strided_slice")
    out = TensorType((1, 3, 4))
    assert s.cost((t,), out, s.make_attrs({"begin": (0,), "end": (1,)})) == Cost(0.0, 48.0, 48.0)
    sp = get_op("split")
    outs = TupleType((TensorType((1, 3, 4)), TensorType((1, 3, 4))))
    assert sp.cost((t,), outs, sp.make_attrs({"sections": (1, 1)})) == Cost(0.0, 96.0, 96.0)
