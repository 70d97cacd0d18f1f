"""Indexing operators (take, gather_elements, gather_nd, one_hot, trilu) vs ONNX Runtime; relations; errors."""

from __future__ import annotations

import numpy as np
import pytest
from ort_util import assert_close, run_onnx_node, run_plait_op
from test_transform import data, infer, rel_error

from plait.errors import InterpreterError, PlaitError
from plait.ir import Cost, OpPattern, TensorType
from plait.op import get_op

I64 = np.int64


def check(op, inputs, attrs, onnx_op, onnx_inputs=None, onnx_attrs=None, opset=18):
    got = run_plait_op(op, inputs, **attrs)
    (want,) = run_onnx_node(onnx_op, onnx_inputs if onnx_inputs is not None else inputs, onnx_attrs or {},
                            opset=opset)
    assert_close(got, want)


# ---- take ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_take_vs_ort(dtype, index_dtype):
    x = data((5, 4, 3), dtype)
    cases = [([0, -1, 2, 4], 0), ([[1, -4], [3, 0]], 1), (-3, 2), ([], 0), (2, -1)]
    for idx, axis in cases:
        i = np.array(idx, index_dtype)
        check("take", [x, i], {"axis": axis}, "Gather", [x, i], {"axis": axis})


def test_take_types_and_errors():
    assert infer("take", ("n", 4, 3), TensorType(("k", 2), "int64"), axis=1) == TensorType(("n", "k", 2, 3))
    assert infer("take", ("n", 4), TensorType((), "int32")) == TensorType((4,))
    assert rel_error("take", (5, 4), TensorType((2,), "float32")) == (
        "take: indices: expected int32 or int64, got float32")
    assert rel_error("take", (5, 4), TensorType((2,), "int64"), axis=2) == (
        "take: axis: expected a value in [-2, 1], got 2")
    assert rel_error("take", (), TensorType((2,), "int64")) == (
        "take: data: expected a tensor of rank >= 1, got Tensor[(), float32]")
    with pytest.raises(InterpreterError) as e:
        run_plait_op("take", [data((5, 4)), np.array([1, -6], I64)])
    assert str(e.value) == "take: index -6 is out of range for axis 0 of size 5"


# ---- gather_elements -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_gather_elements_vs_ort(dtype):
    x = data((3, 4), dtype)
    cases = [([[0, -1, 2, 1], [2, 0, -3, 1]], 0), ([[3, 0], [-1, 1], [2, -4]], 1), ([[1, 2, 0]], -1),
             ([[0], [1]], 0)]
    for idx, axis in cases:
        i = np.array(idx, I64)
        check("gather_elements", [x, i], {"axis": axis}, "GatherElements", [x, i], {"axis": axis})
    x3 = data((2, 3, 4), dtype)
    i3 = np.random.default_rng(0).integers(-3, 3, (2, 5, 4)).astype(np.int32)
    check("gather_elements", [x3, i3], {"axis": 1}, "GatherElements", [x3, i3], {"axis": 1})


def test_gather_elements_types_and_errors():
    assert infer("gather_elements", ("n", 4), TensorType(("n", 7), "int64"), axis=1) == TensorType(("n", 7))
    assert rel_error("gather_elements", (3, 4), TensorType((3,), "int64")) == (
        "gather_elements: indices: expected rank 2 (as data), got 1")
    assert rel_error("gather_elements", (3, 4), TensorType((2, 5), "int64")) == (
        "gather_elements: indices: expected size <= 4 at axis 1 (as data), got 5")
    with pytest.raises(InterpreterError) as e:
        run_plait_op("gather_elements", [data((3, 4)), np.array([[0, 3]], I64)])
    assert str(e.value) == "gather_elements: index 3 is out of range for axis 0 of size 3"


# ---- gather_nd -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_gather_nd_vs_ort(dtype):
    x = data((2, 3, 4), dtype)
    cases = [([[0, 1, 2], [1, -1, -4]], 0), ([[1], [0]], 0), ([[[0, 1]], [[1, 2]]], 0), ([[2], [-1]], 1),
             ([[[1, 3], [0, 0]], [[2, 1], [-3, -1]]], 1), ([[[1], [2]], [[2], [0]]], 1), ([1, 2], 0)]
    for idx, b in cases:
        i = np.array(idx, I64)
        check("gather_nd", [x, i], {"batch_dims": b}, "GatherND", [x, i], {"batch_dims": b})
    y = data((2, 3, 4, 2), dtype)
    i = np.random.default_rng(1).integers(-4, 4, (2, 3, 1)).astype(I64)
    check("gather_nd", [y, i], {"batch_dims": 2}, "GatherND", [y, i], {"batch_dims": 2})


def test_gather_nd_types_and_errors():
    idx = TensorType(("b", 5, 2), "int64")
    assert infer("gather_nd", ("b", 3, 4, 6), idx, batch_dims=1) == TensorType(("b", 5, 6))
    assert rel_error("gather_nd", (2, 3), TensorType((4, 3), "int64")) == (
        "gather_nd: indices: expected a last dimension in [1, 2] (data rank 2 minus batch_dims 0), got 3")
    assert rel_error("gather_nd", (2, 3), TensorType((3, 1), "int64"), batch_dims=1) == (
        "gather_nd: batch dimension 0: expected indices size 2 (as data), got 3")
    assert rel_error("gather_nd", (2, 3), TensorType((2, 1), "int64"), batch_dims=2) == (
        "gather_nd: batch_dims: expected a value in [0, 1], got 2")
    assert rel_error("gather_nd", (2, 3), TensorType((2, "m"), "int64")) == (
        "gather_nd: indices: expected a static last dimension, got 'm'")
    with pytest.raises(InterpreterError) as e:
        run_plait_op("gather_nd", [data((2, 3)), np.array([[1, 3]], I64)])
    assert str(e.value) == "gather_nd: index 3 is out of range for axis 1 of size 3"


# ---- one_hot ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int64"])  # ONNX Runtime's value types
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_vs_ort(dtype, axis):
    idx = np.array([[0, 3, -1], [-4, 7, -5]], I64)  # 7 and -5 are outside [-4, 3]: all off
    got = run_plait_op("one_hot", [idx], depth=4, axis=axis, on_value=5, off_value=-2, dtype=dtype)
    (want,) = run_onnx_node("OneHot", [idx, np.array(4, I64), np.array([-2, 5]).astype(dtype)], {"axis": axis})
    assert_close(got, want)


def test_one_hot_other_dtypes_and_float_indices():
    idx = np.array([2.7, -1.2, 0.0], np.float32)  # truncated toward zero: 2, -1 (wraps to 2), 0
    got = run_plait_op("one_hot", [idx], depth=3, dtype="bool", axis=0)
    np.testing.assert_array_equal(got, np.array([[0, 0, 1], [0, 0, 0], [1, 1, 0]], bool))
    got = run_plait_op("one_hot", [idx.astype(np.int32)], depth=3, dtype="int32", on_value=7)
    np.testing.assert_array_equal(got, np.array([[0, 0, 7], [0, 0, 7], [7, 0, 0]], np.int32))


def test_one_hot_types_and_errors():
    assert infer("one_hot", TensorType(("n", 3), "int32"), depth=10, axis=1) == TensorType(("n", 10, 3))
    assert infer("one_hot", TensorType(("n",), "int64"), depth=2, dtype="bool") == TensorType(("n", 2), "bool")
    assert rel_error("one_hot", TensorType((3,), "int64"), depth=0) == "one_hot: expected depth >= 1, got 0"
    assert rel_error("one_hot", TensorType((3,), "int64"), depth=2, axis=2) == (
        "one_hot: axis: expected a value in [-2, 1], got 2")


# ---- trilu -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("upper", [True, False])
def test_trilu_vs_ort(dtype, upper):
    for shape in [(4, 5), (2, 3, 4), (5, 2)]:
        x = data(shape, dtype)
        for k in [0, 1, -2, 7]:
            check("trilu", [x], {"upper": upper, "k": k}, "Trilu", [x, np.array(k, I64)], {"upper": int(upper)})


def test_trilu_types_and_errors():
    assert infer("trilu", ("n", 3, 3), k=1) == TensorType(("n", 3, 3))
    assert rel_error("trilu", (3,)) == "trilu: data: expected a tensor of rank >= 2, got Tensor[(3,), float32]"


def test_patterns_and_costs():
    for name in ["take", "gather_elements", "gather_nd", "one_hot", "trilu"]:
        assert get_op(name).pattern == OpPattern.INJECTIVE
    op = get_op("take")
    data_t, idx_t = TensorType((1000, 16)), TensorType((4,), "int64")
    # reads only the gathered rows (4 x 16 floats) and the indices, not the whole table
    assert op.cost((data_t, idx_t), TensorType((4, 16)), op.make_attrs({})) == Cost(0.0, 256.0 + 32.0, 256.0)


# ---- out-of-range indices: constant ones fail early, run-time ones never leave the buffer --------------


def test_constant_indices_are_checked_like_the_reference():
    check = {n: get_op(n).check_constant_args for n in ("take", "gather_elements", "gather_nd")}
    attrs = {n: get_op(n).make_attrs(a) for n, a in
             (("take", {"axis": 1}), ("gather_elements", {"axis": 1}), ("gather_nd", {}))}
    data = TensorType((2, 3))
    check["take"]([None, np.array([2, -3])], (data, TensorType((2,), "int64")), attrs["take"])  # in range
    with pytest.raises(InterpreterError) as e:
        check["take"]([None, np.array([7])], (data, TensorType((1,), "int64")), attrs["take"])
    assert str(e.value) == "take: index 7 is out of range for axis 1 of size 3"
    with pytest.raises(InterpreterError) as e:
        check["gather_elements"]([None, np.array([[0], [-4]])], (data, TensorType((2, 1), "int64")),
                                 attrs["gather_elements"])
    assert str(e.value) == "gather_elements: index -4 is out of range for axis 1 of size 3"
    with pytest.raises(InterpreterError) as e:
        check["gather_nd"]([None, np.array([[1, 3]])], (data, TensorType((1, 2), "int64")), attrs["gather_nd"])
    assert str(e.value) == "gather_nd: index 3 is out of range for axis 1 of size 3"
    # a symbolic axis cannot be judged at compile time
    check["take"]([None, np.array([7])], (TensorType((2, "n")), TensorType((1,), "int64")), attrs["take"])


def test_compiled_gathers_refuse_out_of_range_run_time_indices():
    """The interpreter raises on an out-of-range index known only at run time; compiled code checks
    the indices before it gathers and stops with status 1 (docs/operators.md), whichever gather of a
    function has the bad index; the indices at the ends of each axis are fine."""
    import plait
    from plait.executor import GraphModule
    from plait.ir import status
    from plait.relay import IRModule, Tuple, call, infer_type, var

    d, i = var("d", (2, 3)), var("i", (2,), "int64")
    e, j = var("e", (2, 3)), var("j", (2, 1), "int64")
    n, k = var("n", (2, 3)), var("k", (1, 2), "int64")
    body = Tuple((call("take", d, i, axis=1), call("gather_elements", e, j, axis=1), call("gather_nd", n, k)))
    mod = infer_type(IRModule.from_expr(body))
    gm = GraphModule(plait.build(mod, target="c"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    good = {"d": x, "i": np.array([2, -3]), "e": x, "j": np.array([[-1], [0]]), "n": x, "k": np.array([[-2, 2]])}
    out = gm(**good)
    np.testing.assert_array_equal(out[0], x[:, [2, 0]])
    np.testing.assert_array_equal(out[1], [[2.0], [3.0]])
    np.testing.assert_array_equal(out[2], [x[0, 2]])
    big = np.int64(1 << 40)
    for key, bad in (("i", np.array([7, 0])), ("j", np.array([[big], [0]])), ("k", np.array([[0, -9]]))):
        with pytest.raises(PlaitError) as exc:
            gm(**{**good, key: bad})
        assert str(exc.value).endswith(f"stopped: {status.MESSAGES[1]} (status 1)"), str(exc.value)
