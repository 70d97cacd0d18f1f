"""Base IR definitions shared by every layer: types, attributes, the operator machinery."""

from plait.ir.attrs import EMPTY, Attrs
from plait.ir.onnx_map import OnnxMap
from plait.ir.op import REQUIRED, AttrSpec, Cost, Op, OpPattern, RelError
from plait.ir.types import ANY_DIM, DTYPES, Dim, FuncType, TensorType, TupleType, Type, tensor_type_of

__all__ = [
    "ANY_DIM", "DTYPES", "EMPTY", "REQUIRED", "AttrSpec", "Attrs", "Cost", "Dim", "FuncType", "Op",
    "OnnxMap", "OpPattern", "RelError", "TensorType", "TupleType", "Type", "tensor_type_of",
]
