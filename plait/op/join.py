"""Joining and cutting along an axis (ONNX semantics): concatenate, split.

Symbolic dims: the joined axis of ``concatenate`` is the sum of its inputs' (an expression of their size
variables in the compute, "?" in the type unless every part is static); the other axes must agree, checked
when the function runs where a symbolic dim meets another (status ``SHAPE_MISMATCH``). ``split`` cuts a
symbolic axis into static sections (they must sum to its size at run time) or into ``k`` equal parts
(sections of ``-1``: ONNX Split-18's ``num_outputs``).

TE computes are injective index mappings (``concatenate`` chooses its input with nested ``select`` s,
``split`` returns one tensor per section), inlined into their consumers.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plait.ir.attrs import Attrs
from plait.ir.types import Dim, TensorType
from plait.op._common import ANY_DIM, AttrSpec, Family, OnnxMap, OpPattern, RelError, TupleType, as_tensor, norm_axis
from plait.op._compute import dim_max, dim_min, dims_agree, make, out_tensor_type, shape_of, tir
from plait.op.transform import empty_tensor, fmt, move_cost, one_tensor
from plait.te.tensor import Tensor
from plait.tir.expr import PrimExpr

defop = Family()
INJ = OpPattern.INJECTIVE


def _unify(dims: Sequence[Dim]) -> Dim:
    ints = {d for d in dims if isinstance(d, int)}
    if ints:
        return ints.pop()
    return dims[0] if len(set(dims)) == 1 else ANY_DIM


def _concat_rel(args, attrs):
    ts = [as_tensor(t, f"concatenate: argument {i}") for i, t in enumerate(args)]
    first = ts[0]
    axis = norm_axis(attrs["axis"], first.ndim, "concatenate: axis")
    for i, t in enumerate(ts):
        if t.dtype != first.dtype:
            raise RelError(f"concatenate: argument {i}: expected dtype {first.dtype}, got {t.dtype}")
        if t.ndim != first.ndim:
            raise RelError(f"concatenate: argument {i}: expected rank {first.ndim}, got {t.ndim}")
    out: list[Dim] = []
    for k in range(first.ndim):
        dims = [t.shape[k] for t in ts]
        if k == axis:
            out.append(sum(dims) if all(isinstance(d, int) for d in dims) else ANY_DIM)
            continue
        static = [(i, d) for i, d in enumerate(dims) if isinstance(d, int)]
        for i, d in static:
            if d != static[0][1]:
                raise RelError(f"concatenate: argument {i}: expected size {static[0][1]} at axis {k} "
                               f"(as argument {static[0][0]}), got {d}")
        out.append(_unify(dims))
    return TensorType(tuple(out), first.dtype)


defop("concatenate", rel=_concat_rel, cost=move_cost, pattern=INJ, num_inputs=(1, None),
      ref=lambda args, attrs: np.concatenate(args, axis=attrs["axis"]),
      attrs=[AttrSpec("axis", "int", doc="the axis to join along")], doc="ONNX Concat (variadic arguments)")


def equal_parts(d: Any, k: int) -> list[Any]:
    """The sizes of ``k`` parts of a dim ``d`` (an int or an int64 expression) as ONNX Split-18's
    ``num_outputs`` cuts it: ``ceil(d / k)`` each, the last ones smaller (possibly empty)."""
    chunk = -(-d // k) if isinstance(d, int) else (d + (k - 1)) // k
    return [chunk if i == 0 else dim_min(chunk, dim_max(d - chunk * i, 0)) for i in range(k)]


def _split_sections(x: TensorType, axis: int, sections: Sequence[int]) -> list[Dim]:
    d = x.shape[axis]
    if sections and all(s == -1 for s in sections):  # equal parts of the (symbolic) axis
        return list(equal_parts(d, len(sections))) if isinstance(d, int) else [ANY_DIM] * len(sections)
    if not sections or any(s < 0 for s in sections):
        raise RelError(f"split: expected one or more sections >= 0 (or all -1), got {fmt(sections)}")
    if isinstance(d, int) and sum(sections) != d:
        raise RelError(f"split: sections {fmt(sections)} must sum to the size of axis {axis}: "
                       f"expected {d}, got {sum(sections)}")
    return list(sections)


def _split_rel(args, attrs):
    x = one_tensor(args, "split")
    axis = norm_axis(attrs["axis"], x.ndim, "split: axis")
    sizes = _split_sections(x, axis, attrs["sections"])
    return TupleType(tuple(TensorType(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype) for s in sizes))


def _split_ref(args, attrs):
    (x,) = args
    axis = norm_axis(attrs["axis"], x.ndim)
    bounds = np.cumsum(_split_sections(TensorType(x.shape), axis, attrs["sections"]))[:-1]
    return tuple(np.split(x, bounds, axis=axis))


defop("split", rel=_split_rel, ref=_split_ref, cost=move_cost, pattern=INJ, attrs=[
    AttrSpec("sections", "ints", doc="sizes of the pieces along axis (they sum to its size); k times -1: k parts "
             "of ceil(size / k), the last ones smaller (ONNX Split-18's num_outputs, for a symbolic axis)"),
    AttrSpec("axis", "int", 0, "the axis to split"),
], doc="ONNX Split: a tuple of tensors")


# ---- TE computes ----------------------------------------------------------------------------------


@defop.compute("concatenate")
def _concatenate(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    first = shape_of(inputs[0], "concatenate")
    axis = norm_axis(attrs["axis"], len(first))
    total: Any = 0
    for x in inputs:
        total = total + shape_of(x, "concatenate")[axis]
    shape, dtype = out_tensor_type(out_type, "concatenate", like=first[:axis] + (total,) + first[axis + 1:])
    checks = dims_agree("concatenate", [(d, shape[k]) for x in inputs for k, d in enumerate(shape_of(x, "concatenate"))
                                        if k != axis])
    parts = [(x, shape_of(x, "concatenate")[axis]) for x in inputs]
    parts = [(x, n) for x, n in parts if not (isinstance(n, int) and n == 0)]
    if not parts or 0 in shape:
        return empty_tensor("concatenate", shape, dtype)

    def body(*i: PrimExpr) -> PrimExpr:
        def at(x: Tensor, offset: Any) -> PrimExpr:
            first = isinstance(offset, int) and offset == 0
            return x[tuple(i[:axis]) + (i[axis] if first else i[axis] - offset,) + tuple(i[axis + 1:])]

        offsets: list[Any] = [0]
        for _, n in parts:  # symbolic sizes along the axis give expressions
            offsets.append(offsets[-1] + n)
        value = at(parts[-1][0], offsets[-2])
        for k in range(len(parts) - 2, -1, -1):
            value = tir.select(i[axis] < offsets[k + 1], at(parts[k][0], offsets[k]), value)
        return value

    return make("concatenate", shape, body, checks=checks)


@defop.compute("split")
def _split(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "split")
    axis = norm_axis(attrs["axis"], len(in_shape))
    sections = list(attrs["sections"])
    d = in_shape[axis]
    equal = all(s == -1 for s in sections)
    sizes = equal_parts(d, len(sections)) if equal else sections
    # a symbolic axis cut into static sections: they must sum to its size at run time
    checks = [] if equal or isinstance(d, int) else dims_agree("split", [(d, sum(sections))])
    outs = []
    offset: Any = 0
    for k, n in enumerate(sizes):
        shape, dtype = out_tensor_type(out_type, "split", k, like=in_shape[:axis] + (n,) + in_shape[axis + 1:])

        def body(*i: PrimExpr, _o: Any = offset) -> PrimExpr:
            plain = isinstance(_o, int) and _o == 0
            return x[tuple(i[:axis]) + (i[axis] if plain else i[axis] + _o,) + tuple(i[axis + 1:])]

        empty = isinstance(n, int) and n == 0
        outs.append(empty_tensor("split", shape, dtype) if empty else
                    make("split", shape, body, str(k), checks=checks if k == 0 else ()))
        offset = offset + n
    return outs


# ---- ONNX -----------------------------------------------------------------------------------------


def _split_onnx(ex: Any) -> list[str]:
    sections = ex.attrs["sections"]
    if all(s == -1 for s in sections):
        ex.need_opset(18, "Split into equal parts of a symbolic axis (num_outputs)")
        outs = ex.node("Split", [ex.ins[0]], n_out=len(sections), axis=ex.attrs["axis"], num_outputs=len(sections))
    else:
        outs = ex.node("Split", [ex.ins[0], ex.ints(sections, "split")], n_out=len(sections),
                       axis=ex.attrs["axis"])
    return outs if len(sections) > 1 else [outs]


defop.onnx("concatenate", OnnxMap("Concat", attrs={"axis": "axis"}, convert=False))
defop.onnx("split", OnnxMap("Split", convert=False, export=_split_onnx))
