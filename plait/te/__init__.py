"""TE: tensor expressions (index-lambda computes) and their lowering to TIR. See docs/lowering.md.

    A = te.placeholder((n, k), "float32", "A")
    r = te.reduce_axis((0, k), "r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    func = te.create_prim_func([A, B, C], "matmul")

An operator's compute is the ``compute`` attribute of its :class:`plait.ir.Op`, defined next to the
operator in :mod:`plait.op`.
"""

from plait.te.prim_func import create_prim_func
from plait.te.tensor import (
    Check, CommReducer, ComputeOp, Operation, PlaceholderOp, Reduce, TEError, Tensor, annotate, argmax, argmin,
    axis_range, check, comm_reducer, compute, max, min, placeholder, prod, reduce_axis, size_var, sum,
)

__all__ = [
    "Check", "CommReducer", "ComputeOp", "Operation", "PlaceholderOp", "Reduce", "TEError", "Tensor",
    "annotate", "argmax", "argmin", "axis_range", "check", "comm_reducer", "compute", "create_prim_func", "max",
    "min", "placeholder", "prod", "reduce_axis", "size_var", "sum",
]
