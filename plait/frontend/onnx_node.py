"""What an ONNX converter sees: one node, its inputs as plait values, its attributes.

A value flowing between ONNX nodes during import is one of

- a numpy array: a constant (an initializer, a ``Constant`` node, or a folded node);
- a Relay :class:`~plait.relay.Expr` whose type is already known (``checked_type`` is set as the
  call is built, so converters can look at shapes);
- a :class:`SymTensor`: a small int tensor some of whose elements are symbolic dims (what ``Shape``
  of a tensor with symbolic dims produces); it can feed the inputs plait takes as attributes
  (``Reshape``'s shape, ``Expand``'s shape) but not a computation.

Converters raise :class:`Unsupported` with a reason; the importer collects every unsupported node
and reports them all at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from plait.errors import AttrError, FrontendError, RegistryError
from plait.frontend.unsupported import Unsupported  # noqa: F401 (converters import it from here)
from plait.ir.attrs import Attrs
from plait.ir.op import Op, RelError
from plait.op import get_op
from plait.frontend.onnx_budget import ImportBudget, type_bytes
from plait.ir.types import DTYPES, TensorType, TupleType
from plait.relay.expr import Call, Constant, Expr, TupleGetItem
from plait.relay.passes.fold_constant import NOT_FOLDED

# ONNX element type -> plait dtype (every other element type is unsupported)
ONNX_DTYPES: dict[int, str] = {
    TensorProto.FLOAT: "float32", TensorProto.DOUBLE: "float64", TensorProto.FLOAT16: "float16",
    TensorProto.INT8: "int8", TensorProto.INT16: "int16", TensorProto.INT32: "int32",
    TensorProto.INT64: "int64", TensorProto.UINT8: "uint8", TensorProto.UINT16: "uint16",
    TensorProto.UINT32: "uint32", TensorProto.UINT64: "uint64", TensorProto.BOOL: "bool",
}
ONNX_OF_DTYPE = {v: k for k, v in ONNX_DTYPES.items()}




def short(values: Any, limit: int = 8) -> str:
    """A list for a message: ``[1, 2, 3]``, or its first ``limit`` values and the count when longer
    (a model may hold a million of them)."""
    values = list(values)
    if len(values) <= limit:
        return str(values)
    return "[" + ", ".join(str(v) for v in values[:limit]) + f", ... ({len(values)} values)]"


def onnx_dtype_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"#{elem_type}"


def plait_dtype(elem_type: int) -> str:
    """The plait dtype of an ONNX element type; raises :class:`Unsupported` for the others."""
    if elem_type not in ONNX_DTYPES:
        raise Unsupported(f"dtype '{onnx_dtype_name(elem_type)}' not supported")
    return ONNX_DTYPES[elem_type]


# the typed field holding a tensor's values when it has no raw_data (one value per element)
_TYPED_FIELD = {
    TensorProto.FLOAT: "float_data", TensorProto.DOUBLE: "double_data", TensorProto.INT64: "int64_data",
    TensorProto.UINT32: "uint64_data", TensorProto.UINT64: "uint64_data",
}


def tensor_to_array(t: onnx.TensorProto, what: str | None = None) -> np.ndarray:
    """An ONNX tensor (initializer or attribute) as a numpy array of a plait dtype.

    Its dims must be >= 0 and its data (raw or typed) exactly as long as the dims and dtype say;
    otherwise a :class:`FrontendError` names ``what`` (default: ``tensor '<name>'``)."""
    what = what or f"tensor '{t.name}'"
    dtype = plait_dtype(t.data_type)
    dims = [int(d) for d in t.dims]
    for k, d in enumerate(dims):
        if d < 0:
            raise FrontendError(f"{what}: dimension {k} is {d} (dimensions must be >= 0)")
    n = math.prod(dims)
    nbytes = n * DTYPES[dtype].itemsize
    if nbytes >= 1 << 62:
        raise FrontendError(f"{what}: dims {short(dims)} are absurdly large ({n} elements)")
    if t.HasField("data_location") and t.data_location == TensorProto.EXTERNAL and not t.raw_data:
        location = next((e.value for e in t.external_data if e.key == "location"), "?")
        raise FrontendError(f"{what}: its data is in the external file '{location}', which was not read "
                            "(import the model with plait.load_onnx(path) to read the files next to it)")
    if t.raw_data:
        if len(t.raw_data) != nbytes:
            raise FrontendError(f"{what}: raw_data holds {len(t.raw_data)} bytes, dims {short(dims)} of {dtype} "
                                f"need {nbytes}")
    else:
        field = _TYPED_FIELD.get(t.data_type, "int32_data")
        count = len(getattr(t, field))
        if count != n:
            raise FrontendError(f"{what}: {field} holds {count} values, dims {short(dims)} need {n}")
    arr = numpy_helper.to_array(t)
    return np.asarray(arr, dtype=DTYPES[dtype])


class SymDim(str):
    """A symbolic dim (its name, or "?") that ``Shape`` read from a tensor: it also remembers that tensor
    (``source``, a Relay expression) and the axis, so that a converter needing the dim's value at run time
    (Expand to a Shape of another tensor) can take it from there. It equals its name."""

    source: Expr
    axis: int

    def __new__(cls, name: str, source: Expr, axis: int) -> "SymDim":
        d = super().__new__(cls, name)
        d.source, d.axis = source, axis
        return d


@dataclass(frozen=True, eq=False)
class SymTensor:
    """An integer tensor whose elements are ints or symbolic dim names (numpy object array)."""

    values: np.ndarray
    dtype: str = "int64"

    @property
    def is_static(self) -> bool:
        return all(isinstance(v, int) for v in self.values.flat)

    def to_array(self) -> np.ndarray:
        return np.asarray(self.values.tolist(), dtype=DTYPES[self.dtype]).reshape(self.values.shape)


Value = Union[np.ndarray, Expr, SymTensor]


def value_type(v: Value) -> TensorType:
    if isinstance(v, np.ndarray):
        return TensorType(v.shape, v.dtype.name)
    if isinstance(v, SymTensor):
        return TensorType(v.values.shape, v.dtype)
    t = v.checked_type
    if not isinstance(t, TensorType):
        raise Unsupported(f"expected a tensor, got a value of type {t}")
    return t


def _evaluate(call: Call) -> np.ndarray:
    from plait.relay.interpreter import Interpreter
    from plait.relay.module import IRModule

    return np.asarray(Interpreter(IRModule()).eval(call, {}))


def parse_attribute(a: onnx.AttributeProto) -> Any:
    """An attribute's value: str for strings, lists for repeated fields, TensorProto/GraphProto as is."""
    v = helper.get_attribute_value(a)
    if a.type == onnx.AttributeProto.STRING:
        return v.decode("utf-8", errors="replace")
    if a.type == onnx.AttributeProto.STRINGS:
        return [s.decode("utf-8", errors="replace") for s in v]
    if a.type in (onnx.AttributeProto.INTS, onnx.AttributeProto.FLOATS):
        return list(v)
    return v


_REQUIRED = object()


class NodeContext:
    """One node being converted: typed access to its inputs and attributes, and call building.

    ``version`` is the version of the operator's schema in effect (its ``since_version``), which
    is what converters dispatch on; ``opset`` is the model's opset for the node's domain.
    """

    def __init__(self, node: onnx.NodeProto, inputs: Sequence[Value | None], attrs: dict[str, Any],
                 version: int, opset: int, meta: Attrs, constant: Callable[[np.ndarray], Constant],
                 needs_constant: list[str] | None = None,
                 subgraph: Callable[..., list[Value]] | None = None, budget: ImportBudget | None = None):
        self.node = node
        self.op_type = node.op_type
        self.inputs = list(inputs)
        self.attrs = attrs
        self.version = version
        self.opset = opset
        self.meta = meta
        self._constant = constant
        self._needs_constant = needs_constant if needs_constant is not None else []
        self._subgraph = subgraph
        self.budget = budget if budget is not None else ImportBudget()

    # ---- inputs ---------------------------------------------------------------------------
    @property
    def num_outputs(self) -> int:
        return len(self.node.output)

    def output_used(self, i: int) -> bool:
        return i < len(self.node.output) and self.node.output[i] != ""

    def has(self, i: int) -> bool:
        """Is optional input ``i`` given?"""
        return i < len(self.inputs) and self.inputs[i] is not None

    def value(self, i: int) -> Value:
        if not self.has(i):
            raise Unsupported(f"input {i} is required")
        return self.inputs[i]  # type: ignore[return-value]

    def is_const(self, i: int) -> bool:
        return self.has(i) and isinstance(self.inputs[i], np.ndarray)

    def type(self, i: int) -> TensorType:
        return value_type(self.value(i))

    def shape(self, i: int) -> tuple:
        return self.type(i).shape

    def ndim(self, i: int) -> int:
        return self.type(i).ndim

    def dtype(self, i: int) -> str:
        return self.type(i).dtype

    def static_shape(self, i: int, what: str = "") -> tuple[int, ...]:
        shape = self.shape(i)
        if not all(isinstance(d, int) for d in shape):
            what = what or f"input {i}"
            raise Unsupported(f"{what} must have a static shape, got {TensorType(shape, self.dtype(i))}")
        return shape  # type: ignore[return-value]

    def expr(self, i: int) -> Expr:
        """Input ``i`` as a Relay expression (constants become shared ``Constant`` nodes)."""
        return self.as_expr(self.value(i))

    def as_expr(self, v: Value | Expr) -> Expr:
        if isinstance(v, Expr):
            return v
        if isinstance(v, SymTensor):
            if not v.is_static:
                raise Unsupported("a value computed from a symbolic shape is used as data "
                                  "(plait computes shapes at import time only)")
            v = v.to_array()
        return self._constant(np.asarray(v))

    def const(self, i: int, what: str) -> np.ndarray:
        """Input ``i`` as a constant array; it must be known at import time."""
        v = self.value(i)
        if isinstance(v, SymTensor) and v.is_static:
            return v.to_array()
        if not isinstance(v, np.ndarray):
            if i < len(self.node.input):
                self._needs_constant.append(self.node.input[i])
            raise Unsupported(f"input '{what}' must be a constant (it is computed at run time)")
        return v

    def ints(self, i: int, what: str) -> tuple[int, ...]:
        return tuple(int(x) for x in self.const(i, what).reshape(-1))

    def sym_ints(self, i: int, what: str) -> tuple[int | str, ...]:
        """A 1-D int input whose elements may be symbolic dims (from ``Shape``)."""
        v = self.value(i)
        if isinstance(v, SymTensor):
            return tuple(v.values.reshape(-1).tolist())
        return self.ints(i, what)

    def subgraph(self, g: onnx.GraphProto, inputs: Sequence[Value | Expr] | None = None) -> list[Value]:
        """Convert a graph attribute (an If branch, a loop body with its ``inputs`` bound) in the
        current scope; its output values."""
        if self._subgraph is None:
            raise Unsupported("subgraphs not supported here")
        return self._subgraph(g, list(inputs) if inputs is not None else None)

    # ---- attributes -----------------------------------------------------------------------
    def attr(self, name: str, default: Any = _REQUIRED) -> Any:
        if name in self.attrs:
            return self.attrs[name]
        if default is _REQUIRED:
            raise Unsupported(f"attribute '{name}' is required")
        return default

    def attr_array(self, name: str) -> np.ndarray:
        return tensor_to_array(self.attrs[name], f"attribute '{name}'")

    # ---- building -------------------------------------------------------------------------
    def constant(self, array: Any, dtype: str | None = None) -> Constant:
        with np.errstate(over="ignore"):  # e.g. an alpha of 1e30 in float16 is inf, as in ONNX
            return self._constant(np.asarray(array, dtype=DTYPES[dtype] if dtype else None))

    def call(self, op_name: str, *args: Value | Expr, **attrs: Any) -> Expr:
        """Build ``op_name(*args, **attrs)`` carrying this node's meta; its type is inferred now.

        A call on constants only is evaluated at once (with the operator's reference) and
        returned as a ``Constant``, unless its result does not fit the import's folding budget or
        its operator is never folded (``FoldConstant``'s ``NOT_FOLDED``: an int8 weight's dequantize).
        An operator's ``check_constant_args`` (e.g. an index out of range) runs on the constant
        arguments here, so a model that would fail on every input fails at import."""
        self.budget.tick()
        try:
            op: Op = get_op(op_name)
        except RegistryError:
            raise Unsupported(f"plait operator '{op_name}' is not available") from None
        exprs = tuple(self.as_expr(a) for a in args)
        try:
            call = Call(op, exprs, Attrs(attrs), self.meta)
        except AttrError as exc:
            raise Unsupported(str(exc)) from None
        want = op.check_arity(len(exprs))
        if want is not None:
            raise Unsupported(f"operator '{op_name}' expects {want} arguments, got {len(exprs)}")
        arg_types = tuple(e.checked_type for e in exprs)
        try:
            t = op.rel(arg_types, call.attrs)
        except RelError as exc:
            shown = ", ".join(str(a) for a in arg_types)
            raise Unsupported(f"plait operator '{op_name}' rejects ({shown}): {exc}") from None
        call._set_type(t)
        check = op.check_constant_args
        if check is not None and any(isinstance(e, Constant) for e in exprs):
            check([e.data if isinstance(e, Constant) else None for e in exprs], arg_types, call.attrs)
        if (isinstance(t, TensorType) and all(isinstance(e, Constant) for e in exprs) and op_name not in NOT_FOLDED
                and self.budget.fold(type_bytes(t))):  # fold at once: constants stay constants
            return self._constant(_evaluate(call))
        return call

    def get(self, tup: Expr, index: int) -> Expr:
        item = TupleGetItem(tup, index)
        tt = tup.checked_type
        assert isinstance(tt, TupleType)
        item._set_type(tt.fields[index])
        return item

    def cast(self, x: Value | Expr, dtype: str) -> Expr:
        e = self.as_expr(x)
        return e if value_type(e).dtype == dtype else self.call("cast", e, dtype=dtype)

    def reshape(self, x: Value | Expr, shape: Sequence[int]) -> Expr:
        return self.call("reshape", x, newshape=tuple(int(d) for d in shape))

    def full(self, shape: Sequence[int], value: Any, dtype: str) -> np.ndarray | Expr:
        """A constant tensor filled with ``value``: an array when it fits the folding budget, else
        a ``broadcast_to`` of the scalar, computed at run time."""
        shape = tuple(int(d) for d in shape)
        if self.budget.fold(math.prod(shape) * DTYPES[dtype].itemsize):
            return np.full(shape, value, dtype=DTYPES[dtype])
        return self.call("broadcast_to", self.constant(value, dtype), shape=shape)

    def check_bytes(self, nbytes: int, what: str) -> None:
        """Refuse (MemoryLimitError) an import-time array the converter cannot do without."""
        self.budget.check(nbytes, what)

    # ---- validation -----------------------------------------------------------------------
    def axis(self, value: int, rank: int, what: str = "axis") -> int:
        """``value`` as an axis of a rank-``rank`` tensor, normalized to [0, rank); an axis outside
        [-rank, rank - 1] makes the model invalid (FrontendError)."""
        value = int(value)
        if not -rank <= value < rank:
            raise FrontendError(f"{what} {value} is out of range for rank {rank}")
        return value + rank if value < 0 else value

    def axes(self, values: Sequence[int], rank: int, what: str = "axes") -> tuple[int, ...]:
        """Several distinct axes, each checked as by :meth:`axis`."""
        out = tuple(self.axis(v, rank, f"{what}: axis") for v in values)
        if len(set(out)) != len(out):
            raise FrontendError(f"{what} {short(values)} repeat an axis")
        return out
