"""Shape and data-movement operators (ONNX semantics): reshape, transpose, flatten, squeeze,
expand_dims, broadcast_to, tile, device_copy, range.

concatenate and split are in :mod:`plait.op.join`; strided_slice and nn.pad in :mod:`plait.op.slicing`;
gathers (take, gather_elements, gather_nd), one_hot and trilu in :mod:`plait.op.gather`; image.resize2d in
:mod:`plait.op.image`; depth_to_space and space_to_depth in :mod:`plait.op.space`.

Parameters that ONNX passes as tensor inputs (Reshape's shape, Tile's repeats, ...) are attributes
here: the ONNX frontend folds them to constants. Symbolic dims flow through wherever an output dim
is a copy of an input dim; anything needing arithmetic on a symbol is "?" in the type and an int64
expression in the compute. Where symbolic dims must agree when the function runs (a reshape keeps its
element count, a squeezed dim is 1, a dim that is not statically 1 is not broadcast) the compute
carries a run-time check (status ``SHAPE_MISMATCH``). ``broadcast_to`` may take a second argument whose
dims give some of the target's (ONNX Expand to a ``Shape`` of another tensor).

TE computes: every one is an injective index mapping from the output index to one input element, so they
are inlined into their consumers by ``create_prim_func``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plait.ir.attrs import Attrs
from plait.ir.numeric import cast_array
from plait.ir.types import DTYPES, Dim, TensorType
from plait.op._common import (
    ANY_DIM, AttrSpec, Cost, Family, OnnxMap, Op, OpPattern, RelError, Type, as_tensor, broadcast_shapes, norm_axis,
    tensor_bytes,
)
from plait.op._compute import (
    bcast_index, broadcast_checks, count_checks, down, make, out_tensor_type, relay_shape, reshaped_type,
    scalar_const, shape_checks, shape_of, tir, up,
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


def broadcast_target(shape: Sequence[int], like_axes: Sequence[int], like: Sequence[Any] | None) -> list[Any]:
    """The target shape of ``broadcast_to``: ``shape``, except that dim ``k`` is ``like[like_axes[k]]`` where
    that axis is >= 0 (the dims of the ``like`` argument: symbolic ones of an ONNX Expand to a ``Shape``)."""
    if any(d < 0 for d in shape):
        raise RelError(f"broadcast_to: expected a shape of sizes >= 0, got {fmt(shape)}")
    if not like_axes:
        if like is not None:
            raise RelError("broadcast_to: a like argument needs like_axes")
        return list(shape)
    if like is None or len(like_axes) != len(shape):
        raise RelError(f"broadcast_to: like_axes {fmt(like_axes)} needs a like argument and one axis (or -1) per "
                       f"dim of the shape {fmt(shape)}")
    out: list[Any] = []
    for d, a in zip(shape, like_axes):
        if not -1 <= a < len(like):
            raise RelError(f"broadcast_to: like_axes {fmt(like_axes)}: expected axes of the like argument "
                           f"(rank {len(like)}) or -1")
        out.append(like[a] if a >= 0 else d)
    return out


def _broadcast_to_rel(args, attrs):
    x = one_tensor(args, "broadcast_to")
    like = as_tensor(args[1], "broadcast_to: like").shape if len(args) > 1 else None
    shape = broadcast_target(attrs["shape"], attrs["like_axes"], like)
    try:
        return TensorType(broadcast_shapes(x.shape, shape), x.dtype)
    except RelError as exc:
        raise RelError(f"broadcast_to: {exc}") from None


def _broadcast_to_ref(args, attrs):
    x = args[0]
    shape = broadcast_target(attrs["shape"], attrs["like_axes"], args[1].shape if len(args) > 1 else None)
    return np.array(np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(shape))))


def _broadcast_to_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    return Cost(0.0, float(tensor_bytes(args[0])), tensor_bytes(out))  # like gives its shape only


defop("broadcast_to", rel=_broadcast_to_rel, ref=_broadcast_to_ref, cost=_broadcast_to_cost,
      pattern=OpPattern.BROADCAST, num_inputs=(1, 2), attrs=[
          AttrSpec("shape", "ints", doc="broadcast bidirectionally with the input shape (ONNX Expand)"),
          AttrSpec("like_axes", "ints", (), "per dim of shape: the axis of the like argument whose size it is "
                   "(-1: the value in shape); empty without a like argument"),
      ], doc="ONNX Expand: the result has the broadcast of the input shape and `shape`; an optional second "
             "argument gives dims of `shape` known only at run time (Expand to a Shape of another tensor: "
             "only its shape is read)")


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
    checks = count_checks(op, in_shape, shape)  # symbolic dims: the element count must stay (a -1 must divide)
    if tuple(shape) == tuple(in_shape):
        return make(op, shape, lambda *i: x[i], checks=checks)
    return make(op, shape, lambda *i: x[unravel(ravel(i, shape), in_shape)], checks=checks)


for _name in ("reshape", "flatten"):
    defop.compute(_name)(lambda inputs, attrs, out_type, _n=_name: _copy_reshaped(_n, inputs[0], out_type))


@defop.compute("squeeze")
def _squeeze(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "squeeze")
    drop = set(_squeeze_axes(TensorType(relay_shape(in_shape)), attrs["axes"]))
    shape, _ = out_tensor_type(out_type, "squeeze", like=[d for k, d in enumerate(in_shape) if k not in drop])

    def body(*i: PrimExpr) -> PrimExpr:
        it = iter(i)
        return x[tuple(0 if k in drop else next(it) for k in range(len(in_shape)))]

    # a squeezed symbolic dim must be 1 when the function runs
    ones = [tir.eq(in_shape[k], 1) for k in sorted(drop) if not isinstance(in_shape[k], int)]
    return make("squeeze", shape, body, checks=shape_checks("squeeze", ones))


@defop.compute("expand_dims")
def _expand_dims(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    xs = shape_of(x, "expand_dims")
    new = set(norm_axes(attrs["axes"], len(xs) + len(attrs["axes"]), "expand_dims"))
    it = iter(xs)
    shape, _ = out_tensor_type(out_type, "expand_dims", like=[1 if k in new else next(it)
                                                              for k in range(len(xs) + len(new))])
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
    op = "broadcast_to"
    x = inputs[0]
    xs = shape_of(x, op)
    target = broadcast_target(attrs["shape"], attrs["like_axes"], shape_of(inputs[1], op) if len(inputs) > 1 else None)
    rank = max(len(xs), len(target))
    padded_x = (1,) * (rank - len(xs)) + tuple(xs)
    padded_t = (1,) * (rank - len(target)) + tuple(target)
    like = tuple(d if isinstance(t, int) and t == 1 else t for d, t in zip(padded_x, padded_t))
    shape, _ = out_tensor_type(out_type, op, like=like)
    # a dim of x that is not statically 1 is not broadcast: it must equal the result's when the function runs
    return make(op, shape, lambda *i: x[bcast_index(x, i, op)], checks=broadcast_checks(op, [xs], shape))


@defop.compute("tile")
def _tile(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    in_shape = shape_of(x, "tile")
    shape, dtype = out_tensor_type(out_type, "tile", like=[d * r for d, r in zip(in_shape, attrs["reps"])])
    if 0 in shape:
        return empty_tensor("tile", shape, dtype)
    reps = attrs["reps"]
    return make("tile", shape, lambda *i: x[tuple(v if r == 1 else v % d for v, d, r in zip(i, in_shape, reps))])


@defop.compute("device_copy")
def _device_copy(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    shape, _ = out_tensor_type(out_type, "device_copy", like=shape_of(x, "device_copy"))
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
    shape, axes = ex.attrs["shape"], ex.attrs["like_axes"]
    if not axes:
        return ex.node("Expand", [ex.ins[0], ex.ints(shape, "shape")])
    like = ex.node("Shape", [ex.ins[1]])  # the run-time dims: gathered from the like argument's shape
    parts = [ex.node("Gather", [like, ex.ints([a], "axis")], axis=0) if a >= 0 else ex.ints([d], "dim")
             for d, a in zip(shape, axes)]
    return ex.node("Expand", [ex.ins[0], ex.node("Concat", parts, axis=0) if len(parts) > 1 else parts[0]])


def _tile_onnx(ex: Any) -> str:
    return ex.node("Tile", [ex.ins[0], ex.ints(ex.attrs["reps"], "repeats")])


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
defop.onnx("device_copy", OnnxMap("Identity", convert=False))
defop.onnx("range", OnnxMap("Range", convert=False, export=_range_onnx))
