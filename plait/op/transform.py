"""Shape and data-movement operators (ONNX semantics): reshape, transpose, flatten, squeeze,
expand_dims, broadcast_to, tile, concatenate, split, device_copy, range.

strided_slice and nn.pad are in :mod:`plait.op.slicing`; gathers (take, gather_elements,
gather_nd), one_hot and trilu in :mod:`plait.op.gather`; image.resize2d in :mod:`plait.op.image`;
depth_to_space and space_to_depth in :mod:`plait.op.space`.

Parameters that ONNX passes as tensor inputs (Reshape's shape, Tile's repeats, ...) are attributes
here: the ONNX frontend folds them to constants. Symbolic dims flow through wherever an output dim
is a copy of an input dim; anything needing arithmetic on a symbol is "?".

TE computes: every one is an injective index mapping from the output index to one input element
(concatenate chooses its input with nested ``select`` s, constant padding guards its load with one),
so they are inlined into their consumers by ``create_prim_func``. ``split`` returns one tensor per
section.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plait.ir.attrs import Attrs
from plait.ir.numeric import cast_array
from plait.ir.types import DTYPES, Dim, TensorType
from plait.op._common import (
    ANY_DIM, AttrSpec, Cost, Family, OnnxMap, Op, OpPattern, RelError, TupleType, Type, as_tensor, broadcast_shapes,
    norm_axis, tensor_bytes,
)
from plait.op._compute import (
    bcast_index, dim_max, dim_min, dims_agree, down, make, out_tensor_type, relay_shape, reshaped_type, scalar_const, shape_of, tir,
    up,
)
from plait.te.tensor import Tensor
from plait.tir.expr import PrimExpr

defop = Family()

INJ = OpPattern.INJECTIVE

# ---- helpers shared with plait.op.gather, plait.op.image and plait.op.space ------------------------


def fmt(dims: Sequence[object]) -> str:
    """A shape or int list as the user wrote it: (2, n, -1), (3,)."""
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def sym_prod(dims: Sequence[Dim]) -> Dim:
    """Product of dims; a lone symbol times static 1s stays that symbol, other symbolic products are '?'."""
    syms = [d for d in dims if isinstance(d, str)]
    static = 1
    for d in dims:
        if isinstance(d, int):
            static *= d
    if not syms or static == 0:
        return static
    return syms[0] if len(syms) == 1 and static == 1 else ANY_DIM


def norm_axes(axes: Sequence[int], ndim: int, op: str) -> list[int]:
    """Normalize (negative) axes into [0, ndim); duplicates are an error."""
    out = [norm_axis(a, ndim, f"{op}: axis") for a in axes]
    if len(set(out)) != len(out):
        raise RelError(f"{op}: expected distinct axes, got {fmt(axes)}")
    return out


def move_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    """Pure data movement: no arithmetic, every input read once, the output written once."""
    return Cost(0.0, float(sum(tensor_bytes(a) for a in args)), tensor_bytes(out))


def select_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    """Ops that read only the elements they write (slices, gathers), plus any index tensors."""
    return Cost(0.0, tensor_bytes(out) + float(sum(tensor_bytes(a) for a in args[1:])), tensor_bytes(out))


def one_tensor(args: tuple[Type, ...], op: str) -> TensorType:
    return as_tensor(args[0], f"{op}: data")


# ---- reshape -------------------------------------------------------------------------------------


def reshape_target(shape: Sequence[Dim], newshape: Sequence[int]) -> tuple[Dim, ...]:
    """The output shape of ONNX Reshape (allowzero=0) over possibly symbolic ``shape``."""
    shown = fmt(newshape)
    if any(d < -1 for d in newshape):
        raise RelError(f"reshape: expected newshape values >= -1, got {shown}")
    if list(newshape).count(-1) > 1:
        raise RelError(f"reshape: expected at most one -1 in newshape, got {shown}")
    out: list[Dim] = []
    rest_in = list(shape)  # input dims not copied by a 0
    for i, d in enumerate(newshape):
        if d == 0:
            if i >= len(shape):
                raise RelError(
                    f"reshape: newshape {shown} copies dimension {i} with 0, but the input has rank {len(shape)}")
            out.append(shape[i])
            rest_in[i] = 1
        else:
            out.append(d)
    rest_out = [d for d, n in zip(out, newshape) if n > 0]
    s_out = int(np.prod(rest_out, dtype=np.int64))
    syms = [d for d in rest_in if isinstance(d, str)]
    s_in = int(np.prod([d for d in rest_in if isinstance(d, int)], dtype=np.int64))
    if syms:  # cannot check; -1 is known only if it stands for exactly one leftover symbol
        if -1 in newshape:
            out[list(newshape).index(-1)] = syms[0] if len(syms) == 1 and s_in == s_out else ANY_DIM
        return tuple(out)
    what = f"{s_in} elements" if all(isinstance(d, int) for d in shape) else f"shape {fmt(shape)}"
    if -1 in newshape:
        if s_out == 0 or s_in % s_out:
            raise RelError(f"reshape: cannot reshape {what} into shape {shown}")
        out[list(newshape).index(-1)] = s_in // s_out
    elif s_in != s_out:
        raise RelError(f"reshape: cannot reshape {what} into shape {shown}")
    return tuple(out)


def _reshape_rel(args, attrs):
    x = one_tensor(args, "reshape")
    return TensorType(reshape_target(x.shape, attrs["newshape"]), x.dtype)


def _reshape_ref(args, attrs):
    (x,) = args
    return np.reshape(x, reshape_target(x.shape, attrs["newshape"]))


defop("reshape", rel=_reshape_rel, ref=_reshape_ref, view=True, pattern=INJ, attrs=[
    AttrSpec("newshape", "ints", doc="target shape: 0 copies the input dim at that position, -1 infers one dim"),
], doc="ONNX Reshape (allowzero=0)")


# ---- transpose, flatten, squeeze, expand_dims ------------------------------------------------------


def _perm(x: TensorType, axes) -> list[int]:
    if axes is None:
        return list(range(x.ndim))[::-1]
    if len(axes) != x.ndim:
        raise RelError(f"transpose: expected {x.ndim} axes (one per input dim), got {fmt(axes)}")
    perm = [a + x.ndim if a < 0 else a for a in axes]
    if sorted(perm) != list(range(x.ndim)):
        raise RelError(f"transpose: expected a permutation of 0..{x.ndim - 1}, got {fmt(axes)}")
    return perm


def _transpose_rel(args, attrs):
    x = one_tensor(args, "transpose")
    return TensorType(tuple(x.shape[p] for p in _perm(x, attrs["axes"])), x.dtype)


defop("transpose", rel=_transpose_rel, cost=move_cost, pattern=INJ,
      ref=lambda args, attrs: np.transpose(args[0], _perm(TensorType(args[0].shape), attrs["axes"])),
      attrs=[AttrSpec("axes", "ints", None, "output dim i is input dim axes[i]; None reverses", optional=True)],
      doc="ONNX Transpose")


def _flatten_axis(x: TensorType, axis: int) -> int:
    if not -x.ndim <= axis <= x.ndim:
        raise RelError(f"flatten: axis: expected a value in [{-x.ndim}, {x.ndim}], got {axis}")
    return axis + x.ndim if axis < 0 else axis


def _flatten_rel(args, attrs):
    x = one_tensor(args, "flatten")
    a = _flatten_axis(x, attrs["axis"])
    return TensorType((sym_prod(x.shape[:a]), sym_prod(x.shape[a:])), x.dtype)


def _flatten_ref(args, attrs):
    (x,) = args
    a = _flatten_axis(TensorType(x.shape), attrs["axis"])
    return np.reshape(x, (int(np.prod(x.shape[:a], dtype=np.int64)), int(np.prod(x.shape[a:], dtype=np.int64))))


defop("flatten", rel=_flatten_rel, ref=_flatten_ref, view=True, pattern=INJ, attrs=[
    AttrSpec("axis", "int", 1, "dims before axis form the first output dim, the rest the second"),
], doc="ONNX Flatten: always a 2-D result")


def _squeeze_axes(x: TensorType, axes) -> list[int]:
    if axes is None:
        sym = [(i, d) for i, d in enumerate(x.shape) if isinstance(d, str)]
        if sym:
            raise RelError(
                f"squeeze: without axes the result depends on symbolic dimension '{sym[0][1]}' "
                f"(axis {sym[0][0]}): expected explicit axes, got None")
        return [i for i, d in enumerate(x.shape) if d == 1]
    norm = norm_axes(axes, x.ndim, "squeeze")
    for a, n in zip(axes, norm):
        if isinstance(x.shape[n], int) and x.shape[n] != 1:
            raise RelError(f"squeeze: axis {a}: expected a dimension of size 1, got {x.shape[n]}")
    return norm


def _squeeze_rel(args, attrs):
    x = one_tensor(args, "squeeze")
    drop = set(_squeeze_axes(x, attrs["axes"]))
    return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in drop), x.dtype)


def _squeeze_ref(args, attrs):
    (x,) = args
    return np.squeeze(x, axis=tuple(_squeeze_axes(TensorType(x.shape), attrs["axes"])))


defop("squeeze", rel=_squeeze_rel, ref=_squeeze_ref, view=True, pattern=INJ, attrs=[
    AttrSpec("axes", "ints", None, "size-1 dims to remove; None removes every size-1 dim", optional=True),
], doc="ONNX Squeeze")


def _expand_dims_rel(args, attrs):
    x = one_tensor(args, "expand_dims")
    axes = set(norm_axes(attrs["axes"], x.ndim + len(attrs["axes"]), "expand_dims"))
    it = iter(x.shape)
    return TensorType(tuple(1 if i in axes else next(it) for i in range(x.ndim + len(axes))), x.dtype)


def _expand_dims_ref(args, attrs):
    (x,) = args
    return np.reshape(x, _expand_dims_rel((TensorType(x.shape, x.dtype.name),), attrs).shape)


defop("expand_dims", rel=_expand_dims_rel, ref=_expand_dims_ref, view=True, pattern=INJ, attrs=[
    AttrSpec("axes", "ints", doc="positions of the new size-1 dims, in the output's rank"),
], doc="ONNX Unsqueeze")


# ---- broadcast_to, tile --------------------------------------------------------------------------


def _broadcast_to_rel(args, attrs):
    x = one_tensor(args, "broadcast_to")
    shape = attrs["shape"]
    if any(d < 0 for d in shape):
        raise RelError(f"broadcast_to: expected a shape of sizes >= 0, got {fmt(shape)}")
    try:
        return TensorType(broadcast_shapes(x.shape, shape), x.dtype)
    except RelError as exc:
        raise RelError(f"broadcast_to: {exc}") from None


def _broadcast_to_ref(args, attrs):
    (x,) = args
    return np.array(np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(attrs["shape"]))))


defop("broadcast_to", rel=_broadcast_to_rel, ref=_broadcast_to_ref, cost=move_cost, pattern=OpPattern.BROADCAST,
      attrs=[AttrSpec("shape", "ints", doc="broadcast bidirectionally with the input shape (ONNX Expand)")],
      doc="ONNX Expand: the result has the broadcast of the input shape and `shape`")


def _tile_rel(args, attrs):
    x = one_tensor(args, "tile")
    reps = attrs["reps"]
    if len(reps) != x.ndim:
        raise RelError(f"tile: expected {x.ndim} reps (one per input dim), got {fmt(reps)}")
    if any(r < 0 for r in reps):
        raise RelError(f"tile: expected reps >= 0, got {fmt(reps)}")
    return TensorType(tuple(d if r == 1 else (0 if r == 0 else sym_prod((d, r))) for d, r in zip(x.shape, reps)),
                      x.dtype)


defop("tile", rel=_tile_rel, cost=move_cost, pattern=INJ,
      ref=lambda args, attrs: np.tile(args[0], attrs["reps"]).reshape(
          [d * r for d, r in zip(args[0].shape, attrs["reps"])]),
      attrs=[AttrSpec("reps", "ints", doc="repetitions per input dim")], doc="ONNX Tile")


# ---- concatenate, split --------------------------------------------------------------------------


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


# ---- device_copy, range ---------------------------------------------------------------------------


defop("device_copy", rel=lambda args, attrs: one_tensor(args, "device_copy"),
      ref=lambda args, attrs: np.array(args[0], copy=True), cost=move_cost, pattern=OpPattern.OPAQUE, attrs=[
          AttrSpec("src", "str", "", "the piece the data comes from"),
          AttrSpec("dst", "str", "", "the piece the data goes to"),
      ], doc="copy a tensor between pieces (identity on the data); inserted by placement")


def _range_len(attrs: Attrs) -> int:
    start, limit, delta = attrs["start"], attrs["limit"], attrs["delta"]
    if delta == 0:
        raise RelError("range: expected a non-zero delta, got 0.0")
    return max(int(np.ceil((limit - start) / delta)), 0)


def _range_rel(args, attrs):
    if attrs["dtype"] == "bool":
        raise RelError("range: expected a numeric dtype, got bool")
    return TensorType((_range_len(attrs),), attrs["dtype"])


def _range_ref(args, attrs):
    n, dt = _range_len(attrs), DTYPES[attrs["dtype"]]
    start, delta = cast_array(attrs["start"], dt.name), cast_array(attrs["delta"], dt.name)
    return (start + np.arange(n).astype(dt) * delta).astype(dt)


defop("range", rel=_range_rel, ref=_range_ref, pattern=INJ, num_inputs=0, attrs=[
    AttrSpec("start", "float", doc="first value"),
    AttrSpec("limit", "float", doc="exclusive bound"),
    AttrSpec("delta", "float", 1.0, "step (non-zero)"),
    AttrSpec("dtype", "dtype", "int64", "element type of the result"),
], doc="ONNX Range: start, start + delta, ... up to (excluding) limit")


# ---- TE computes ----------------------------------------------------------------------------------


def ravel(idx: Sequence[PrimExpr], shape: Sequence[int]) -> PrimExpr | int:
    """The row-major linear offset of ``idx`` in ``shape``."""
    flat: Any = 0
    for i, d in zip(idx, shape):
        flat = i if isinstance(flat, int) and flat == 0 else flat * d + i
    return flat


def unravel(flat: Any, shape: Sequence[int]) -> tuple[Any, ...]:
    """The index of row-major linear offset ``flat`` in ``shape`` (every dimension > 0)."""
    out: list[Any] = []
    strides: list[Any] = []
    stride: Any = 1
    for d in reversed(shape):  # suffix products: static unless a later dimension is symbolic
        strides.append(stride)
        stride = stride * d
    for k, (d, st) in enumerate(zip(shape, reversed(strides))):
        v = flat if isinstance(st, int) and st == 1 else flat // st
        out.append(v if k == 0 else v % d)
    return tuple(out)


def empty_tensor(op: str, shape: Sequence[int], dtype: str) -> Tensor:
    """A stage with no elements (its body is never evaluated)."""
    return make(op, shape, lambda *i: scalar_const(0, dtype))


def _copy_reshaped(op: str, x: Tensor, out_type: Any) -> Tensor:
    """``x``'s elements in row-major order, in the result's shape (reshape, flatten, ...)."""
    in_shape = shape_of(x, op)
    shape, dtype = reshaped_type(out_type, in_shape, op)
    if 0 in shape or 0 in in_shape:
        return empty_tensor(op, shape, dtype)
    if tuple(shape) == tuple(in_shape):
        return make(op, shape, lambda *i: x[i])
    return make(op, shape, lambda *i: x[unravel(ravel(i, shape), in_shape)])


for _name in ("reshape", "flatten"):
    defop.compute(_name)(lambda inputs, attrs, out_type, _n=_name: _copy_reshaped(_n, inputs[0], out_type))


@defop.compute("squeeze")
def _squeeze(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "squeeze")
    drop = set(_squeeze_axes(TensorType(relay_shape(in_shape)), attrs["axes"]))
    shape, _ = out_tensor_type(out_type, "squeeze")

    def body(*i: PrimExpr) -> PrimExpr:
        it = iter(i)
        return x[tuple(0 if k in drop else next(it) for k in range(len(in_shape)))]

    return make("squeeze", shape, body)


@defop.compute("expand_dims")
def _expand_dims(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    shape, _ = out_tensor_type(out_type, "expand_dims")
    new = set(norm_axes(attrs["axes"], len(shape), "expand_dims"))
    return make("expand_dims", shape, lambda *i: x[tuple(v for k, v in enumerate(i) if k not in new)])


@defop.compute("transpose")
def _transpose(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "transpose")
    perm = _perm(TensorType(relay_shape(in_shape)), attrs["axes"])
    shape = tuple(in_shape[p] for p in perm)  # (a "?" dim of the input is its size variable here)

    def body(*i: PrimExpr) -> PrimExpr:
        idx: list[Any] = [0] * len(perm)
        for k, p in enumerate(perm):
            idx[p] = i[k]
        return x[tuple(idx)]

    return make("transpose", shape, body)


@defop.compute("broadcast_to")
def _broadcast_to(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    shape, _ = out_tensor_type(out_type, "broadcast_to")
    return make("broadcast_to", shape, lambda *i: x[bcast_index(x, i, "broadcast_to")])


@defop.compute("tile")
def _tile(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "tile")
    shape, dtype = out_tensor_type(out_type, "tile", like=[d * r for d, r in zip(in_shape, attrs["reps"])])
    if 0 in shape:
        return empty_tensor("tile", shape, dtype)
    reps = attrs["reps"]
    return make("tile", shape, lambda *i: x[tuple(v if r == 1 else v % d for v, d, r in zip(i, in_shape, reps))])


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


@defop.compute("device_copy")
def _device_copy(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    shape, _ = out_tensor_type(out_type, "device_copy")
    return make("device_copy", shape, lambda *i: x[i])


@defop.compute("range")
def _range(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    shape, dtype = out_tensor_type(out_type, "range")
    start, delta = scalar_const(attrs["start"], dtype), scalar_const(attrs["delta"], dtype)

    def body(i: PrimExpr) -> PrimExpr:
        # start + i * delta with each operation rounded to the dtype, as the reference's numpy
        t = down(up(tir.cast(dtype, i)) * up(delta), dtype)
        return down(up(start) + up(t), dtype)

    return make("range", shape, body)


# ---- ONNX -----------------------------------------------------------------------------------------


def _reshape_onnx(ex: Any) -> str:
    return ex.node("Reshape", [ex.ins[0], ex.ints(ex.attrs["newshape"], "shape")])


def _transpose_onnx(ex: Any) -> str:
    axes = ex.attrs["axes"]
    return ex.node("Transpose", ex.ins, perm=None if axes is None else list(axes))


def _squeeze_onnx(ex: Any) -> str:
    axes = ex.attrs["axes"]
    if axes is None:
        return ex.node("Squeeze", ex.ins)
    return ex.node("Squeeze", [ex.ins[0], ex.ints(axes, "axes")])


def _unsqueeze_onnx(ex: Any) -> str:
    return ex.node("Unsqueeze", [ex.ins[0], ex.ints(ex.attrs["axes"], "axes")])


def _expand_onnx(ex: Any) -> str:
    return ex.node("Expand", [ex.ins[0], ex.ints(ex.attrs["shape"], "shape")])


def _tile_onnx(ex: Any) -> str:
    return ex.node("Tile", [ex.ins[0], ex.ints(ex.attrs["reps"], "repeats")])


def _split_onnx(ex: Any) -> list[str]:
    sections = ex.attrs["sections"]
    if all(s == -1 for s in sections):
        ex.need_opset(18, "Split into equal parts of a symbolic axis (num_outputs)")
        outs = ex.node("Split", [ex.ins[0]], n_out=len(sections), axis=ex.attrs["axis"], num_outputs=len(sections))
    else:
        outs = ex.node("Split", [ex.ins[0], ex.ints(sections, "split")], n_out=len(sections),
                       axis=ex.attrs["axis"])
    return outs if len(sections) > 1 else [outs]


def _range_onnx(ex: Any) -> str:
    """No inputs: the value is known, so it becomes an initializer (routed through Identity)."""
    op: Op = ex.call.op  # type: ignore[assignment]
    value = np.asarray(op.ref([], ex.attrs))
    return ex.node("Identity", [ex.const(value, hint="value")])


# imported by the frontend's converters (the shape, axes and repeats inputs folded to attributes,
# symbolic shapes); exported 1:1 or by code
defop.onnx("reshape", OnnxMap("Reshape", convert=False, export=_reshape_onnx))
defop.onnx("transpose", OnnxMap("Transpose", convert=False, export=_transpose_onnx))
defop.onnx("flatten", OnnxMap("Flatten", attrs={"axis": "axis"}, convert=False))
defop.onnx("squeeze", OnnxMap("Squeeze", convert=False, export=_squeeze_onnx))
defop.onnx("expand_dims", OnnxMap("Unsqueeze", convert=False, export=_unsqueeze_onnx))
defop.onnx("broadcast_to", OnnxMap("Expand", convert=False, export=_expand_onnx))
defop.onnx("tile", OnnxMap("Tile", convert=False, export=_tile_onnx))
defop.onnx("concatenate", OnnxMap("Concat", attrs={"axis": "axis"}, convert=False))
defop.onnx("split", OnnxMap("Split", convert=False, export=_split_onnx))
defop.onnx("device_copy", OnnxMap("Identity", convert=False))
defop.onnx("range", OnnxMap("Range", convert=False, export=_range_onnx))
