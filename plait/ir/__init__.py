"""Base IR definitions shared by every layer: types, attributes, the operator machinery."""

from plait.ir.attrs import EMPTY, Attrs
from plait.ir.op import REQUIRED, AttrSpec, Cost, Op, OpPattern, RelError, get_op, list_ops, register_op
from plait.ir.types import ANY_DIM, DTYPES, Dim, FuncType, TensorType, TupleType, Type, tensor_type_of

__all__ = [
    "ANY_DIM", "DTYPES", "EMPTY", "REQUIRED", "AttrSpec", "Attrs", "Cost", "Dim", "FuncType", "Op",
    "OpPattern", "RelError", "TensorType", "TupleType", "Type", "get_op", "list_ops", "register_op",
    "tensor_type_of",
]
