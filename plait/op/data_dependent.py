"""Operators whose output shape depends on the input's values: ``nonzero`` (ONNX NonZero).

Their result type has an unknown dim (``"?"``). TE cannot express them (a compaction scatters to
positions that depend on how many elements came before), so instead of a TE compute they carry
:attr:`plait.ir.op.Op.prim_func`: their TIR written directly, in the protocol of
:mod:`plait.lowering.shape_func` (an upper-bound output buffer written compactly plus an int64 count
output, described by the PrimFunc attribute ``data_dependent`` and trimmed by
:func:`plait.lowering.shape_func.trim_outputs`). Lowering uses it for a Primitive function that is
one call of such an operator (they are opaque: FuseOps gives each call a group of its own); the VM
executor allocates the upper bound, calls, and trims.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plait import tir
from plait.errors import PlaitError
from plait.ir.attrs import Attrs
from plait.ir.op import Cost
from plait.ir.types import ANY_DIM, Type, check_dtype
from plait.op._common import Family, OnnxMap, OpPattern, RelError, TensorType, numel
from plait.op.transform import one_tensor, unravel
from plait.te import size_var
from plait.tir.expr import IntImm, PrimExpr, Var
from plait.tir.simplify import simplify
from plait.tir.stmt import Allocate, Buffer, BufferStore, For, IfThenElse, PrimFunc, Stmt, seq
from plait.tir.verify import verify


def _nonzero_at(x: Buffer, idx: Sequence[Any]) -> PrimExpr:
    v = x[tuple(idx)]
    if x.dtype == "bool":
        return v
    return tir.ne(v, tir.const(False if x.dtype == "bool" else 0.0 if "float" in x.dtype else 0, x.dtype))


def nonzero_func(shape: Sequence[int | str], dtype: str, name: str = "nonzero") -> PrimFunc:
    """The PrimFunc of ONNX NonZero for an input of ``shape`` (ints, names of symbolic dims, ``"?"``) and
    ``dtype``: params ``p0`` (the input), ``T_nonzero`` (int64, ``(rank, numel)``: row ``d`` holds the
    axis-``d`` indices of the non-zero elements in row-major order, written compactly with a row stride of
    ``count``), ``T_nonzero_count`` (int64, ``(1,)``), then the size variables; attrs ``num_inputs`` 1 and
    ``data_dependent`` ``(0, 1, rank)`` (output, count, rows). Two passes: count, then write."""
    check_dtype(dtype)
    if not shape:
        raise PlaitError(f"{name}: NonZero of a scalar (rank 0) is not supported")
    dims = [d if isinstance(d, int) else size_var(f"p0_d{j}" if d == ANY_DIM else d) for j, d in enumerate(shape)]
    x = Buffer("p0", tuple(dims), dtype)
    static, numel = 1, None
    for d in dims:
        if isinstance(d, int):
            static *= d
        else:
            numel = d if numel is None else numel * d
    numel = static if numel is None else numel if static == 1 else numel * static
    rank = len(dims)
    out = Buffer("T_nonzero", (rank, numel), "int64")
    count = Buffer("T_nonzero_count", (1,), "int64")
    k = Buffer("T_nonzero_k", (1,), "int64", "local")
    zero, one = IntImm(0, "int64"), IntImm(1, "int64")
    i, j = Var("T_nonzero_i", "int64"), Var("T_nonzero_j", "int64")
    count_pass: Stmt = For(i, 0, numel, "serial", IfThenElse(
        _nonzero_at(x, unravel(i, dims)), BufferStore(count, count[zero] + one, (zero,))),
        {"stage": "T_nonzero_count", "op": "nonzero", "pattern": "opaque"})
    idx = unravel(j, dims)
    writes = []
    for d in range(rank):
        q = IntImm(d, "int64") * count[zero] + k[zero]  # row d, column k, row stride = count
        writes.append(BufferStore(out, tir.cast("int64", idx[d]), (tir.floordiv(q, numel), tir.floormod(q, numel))))
    write_pass: Stmt = For(j, 0, numel, "serial", IfThenElse(
        _nonzero_at(x, idx), seq(*writes, BufferStore(k, k[zero] + one, (zero,)))),
        {"stage": "T_nonzero", "op": "nonzero", "pattern": "opaque"})
    body = seq(BufferStore(count, zero, (zero,)), count_pass, Allocate(k, seq(BufferStore(k, zero, (zero,)),
                                                                             write_pass)))
    sizes = list(dict.fromkeys(v for d in dims if isinstance(d, Var) for v in (d,)))
    func = PrimFunc((x, out, count, *sizes), body, {
        "global_symbol": name, "num_inputs": 1, "data_dependent": (0, 1, rank)})
    func = simplify(func)
    verify(func, name)
    return func


# ---- the operator --------------------------------------------------------------------------------

defop = Family()


def _nonzero_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x = one_tensor(args, "nonzero")
    if x.ndim == 0:
        raise RelError("nonzero: NonZero of a scalar (rank 0) is not supported")
    return TensorType((x.ndim, ANY_DIM), "int64")


def _nonzero_ref(args: list, attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


def _nonzero_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    n = numel(args[0])  # two passes over the input; at most rank x numel indices written
    return Cost(flops=2 * n, bytes_read=2 * n * np.dtype(args[0].dtype if args[0].dtype != "bool" else "u1").itemsize,
                bytes_written=8 * n * len(args[0].shape))


def _nonzero_prim_func(args: tuple[Type, ...], attrs: Attrs, name: str) -> tir.PrimFunc:
    x = args[0]
    assert isinstance(x, TensorType)
    return nonzero_func(x.shape, x.dtype, name)


defop("nonzero", rel=_nonzero_rel, ref=_nonzero_ref, cost=_nonzero_cost, pattern=OpPattern.OPAQUE,
      prim_func=_nonzero_prim_func, onnx=[OnnxMap("NonZero", convert=False)],
      doc="ONNX NonZero: the indices of the non-zero elements, one row per axis (row-major order); the "
          "number of columns is known only at run time")


__all__ = ["defop", "nonzero_func"]
