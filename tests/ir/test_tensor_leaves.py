"""Flattening tuple types into their tensors (plait.ir.types.tuple_fields / tensor_leaves)."""

from plait.ir.types import FuncType, TensorType, TupleType, tensor_leaves, tuple_fields

A, B, C = TensorType((2, 3)), TensorType((4,), "int8"), TensorType(("n",), "float16")


def test_tuple_fields_is_one_level():
    assert tuple_fields(A) == (A,)
    inner = TupleType((B, C))
    assert tuple_fields(TupleType((A, inner))) == (A, inner)
    assert tuple_fields(TupleType(())) == ()


def test_tensor_leaves_flattens_nested_tuples_in_order():
    assert tensor_leaves(A) == [A]
    assert tensor_leaves(TupleType((A, TupleType((B, TupleType((C,)))), A))) == [A, B, C, A]
    assert tensor_leaves(TupleType(())) == []


def test_tensor_leaves_is_none_for_other_types():
    f = FuncType((A,), B)
    assert tensor_leaves(f) is None
    assert tensor_leaves(TupleType((A, TupleType((f,))))) is None
