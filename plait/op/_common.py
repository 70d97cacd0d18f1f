"""Helpers shared by operator definitions: the :class:`Family` a definition file defines its
operators with, type-relation building blocks and costs.

Conventions every operator follows:

- type relations take ``(arg_types, attrs)`` and return a Type; on bad input they raise
  :class:`RelError` with a message of the form "<what>: expected <x>, got <y>";
- references take ``(args, attrs)`` (numpy arrays, an :class:`Attrs`) and return an array (or a
  tuple of arrays) whose dtype and shape are exactly what the relation says;
- negative axes are accepted in attrs and normalized by the relation/reference (``norm_axis``);
- symbolic dims (str) flow through relations wherever the output dim is a copy of an input dim;
  a dim that would need arithmetic on a symbol becomes ``"?"``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from plait.ir.attrs import Attrs
from plait.ir.onnx_map import OnnxMap
from plait.ir.op import AttrSpec, Cost, Op, OpPattern, RelError
from plait.ir.types import ANY_DIM, DTYPES, FLOAT_DTYPES, Dim, TensorType, TupleType, Type

__all__ = [
    "ANY_DIM", "AttrSpec", "Attrs", "Cost", "DTYPES", "FLOAT_DTYPES", "Family", "OnnxMap", "Op", "OpPattern", "RelError",
    "TensorType", "TupleType", "Type", "as_tensor", "broadcast_shapes", "dim_mul",
    "elementwise_cost", "itemsize", "norm_axis", "numel", "same_dtype", "tensor_bytes", "to_dtype", "view_cost",
]


ComputeFn = Callable[[list, Attrs, Type], Any]


class Family:
    """The operators of one definition file, in definition order. A file makes one
    (``defop = Family()``), defines each operator with ``defop(name, ...)``, attaches its TE
    compute with ``@defop.compute(name)`` and may declare ONNX mappings later with
    ``defop.onnx(name, OnnxMap(...))`` (when they need functions defined after the operator); the manifest in :mod:`plait.op` registers ``defop.ops``
    (nothing registers at import)."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def __call__(
        self,
        name: str,
        *,
        rel: Callable[[tuple[Type, ...], Attrs], Type],
        ref: Callable[[list, Attrs], Any],
        cost: Callable[[tuple[Type, ...], Type, Attrs], Cost] | None = None,
        pattern: OpPattern = OpPattern.OPAQUE,
        num_inputs: int | tuple[int, int | None] = 1,
        attrs: Sequence[AttrSpec] = (),
        doc: str = "",
        onnx: Sequence[OnnxMap] = (),
        check_constant_args: Callable[[list, tuple[Type, ...], Attrs], None] | None = None,
        view: bool = False,
        prim_func: Callable[[tuple[Type, ...], Attrs, str], Any] | None = None,
    ) -> Op:
        """Define an operator. ``cost`` defaults to one FLOP per output element (nothing for a
        ``view``: its output is its input's bytes under another shape, see :attr:`Op.view`)."""
        assert all(o.name != name for o in self.ops), name
        assert not view or (num_inputs == 1 and cost is None), name
        op = Op(name=name, rel=rel, ref=ref, cost=cost or (view_cost if view else elementwise_cost(1.0)),
                pattern=pattern, num_inputs=num_inputs, attrs=tuple(attrs), doc=doc, onnx=tuple(onnx),
                check_constant_args=check_constant_args, view=view, prim_func=prim_func)
        self.ops.append(op)
        return op

    def get(self, name: str) -> Op:
        """The operator ``name`` of this family (a definition-time lookup)."""
        for op in self.ops:
            if op.name == name:
                return op
        raise KeyError(name)

    def onnx(self, name: str, *maps: OnnxMap) -> None:
        """Declare ONNX mappings of this family's operator ``name`` (after those given to ``defop``)."""
        op = self.get(name)
        op.onnx = op.onnx + maps

    def compute(self, name: str) -> Callable[[ComputeFn], ComputeFn]:
        """Decorator: ``fn`` is the TE compute of this family's operator ``name``."""

        def deco(fn: ComputeFn) -> ComputeFn:
            op = self.get(name)
            assert op.compute is None, name
            op.compute = fn
            return fn

        return deco


# ---- type relation helpers --------------------------------------------------------------


def as_tensor(t: Type, what: str = "argument") -> TensorType:
    if not isinstance(t, TensorType):
        raise RelError(f"{what}: expected a tensor, got {t}")
    return t


def same_dtype(types: Sequence[TensorType], what: str = "arguments") -> str:
    dts = [t.dtype for t in types]
    if any(d != dts[0] for d in dts):
        raise RelError(f"{what} must have the same dtype: expected {dts[0]}, got {', '.join(dts)}")
    return dts[0]


def broadcast_shapes(*shapes: Sequence[Dim]) -> tuple[Dim, ...]:
    """Numpy/ONNX multidirectional broadcasting over possibly symbolic dims."""
    ndim = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for axis in range(-ndim, 0):
        dims = [s[axis] for s in shapes if len(s) >= -axis]
        known = {d for d in dims if d != 1}
        if not known:
            out.append(1)
        elif len(known) == 1:
            out.append(known.pop())
        else:
            ints = {d for d in known if isinstance(d, int)}
            if len(ints) > 1:
                shown = " and ".join(str(tuple(s)) for s in shapes)
                raise RelError(
                    f"shapes {shown} do not broadcast: at axis {axis} expected equal sizes or 1, "
                    f"got {', '.join(str(d) for d in dims)}")
            # a static size and symbol(s), or several symbols: the static size wins, else unknown
            out.append(ints.pop() if ints else ANY_DIM)
    return tuple(out)


def norm_axis(axis: int, ndim: int, what: str = "axis") -> int:
    if ndim == 0:
        raise RelError(f"{what}: a scalar has no axes, got {axis}")
    if not -ndim <= axis < ndim:
        raise RelError(f"{what}: expected a value in [{-ndim}, {ndim - 1}], got {axis}")
    return axis + ndim if axis < 0 else axis


def dim_mul(*dims: Dim) -> Dim:
    out = 1
    for d in dims:
        if isinstance(d, str):
            return ANY_DIM
        out *= d
    return out


# ---- cost helpers -------------------------------------------------------------------------


def itemsize(dtype: str) -> int:
    return DTYPES[dtype].itemsize


def numel(t: Type) -> float:
    """Number of elements; symbolic dims count as 1 (costs are estimates)."""
    if isinstance(t, TupleType):
        return float(sum(numel(f) for f in t.fields))
    assert isinstance(t, TensorType)
    n = 1.0
    for d in t.shape:
        n *= d if isinstance(d, int) else 1
    return n


def tensor_bytes(t: Type) -> float:
    if isinstance(t, TupleType):
        return float(sum(tensor_bytes(f) for f in t.fields))
    assert isinstance(t, TensorType)
    return numel(t) * itemsize(t.dtype)


def view_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    """Cost of a view (:attr:`Op.view`): nothing is read, computed or written."""
    return Cost()


def elementwise_cost(flops_per_element: float) -> Callable[[tuple[Type, ...], Type, Attrs], Cost]:
    """Cost of an op doing ``flops_per_element`` operations per output element."""

    def cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
        return Cost(
            flops=flops_per_element * numel(out),
            bytes_read=sum(tensor_bytes(a) for a in args),
            bytes_written=tensor_bytes(out),
        )

    return cost


def to_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    return np.asarray(x).astype(DTYPES[dtype], copy=False)
