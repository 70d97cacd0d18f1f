"""TE: tensor expressions (index-lambda computes) and their lowering to TIR. See docs/lowering.md.

    A = te.placeholder((n, k), "float32", "A")
    r = te.reduce_axis((0, k), "r")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    func = te.create_prim_func([A, B, C], "matmul")

Operator computes are registered with :func:`register_compute` (the standard ones live in
:mod:`plait.te.computes`).
"""

from plait.te.prim_func import create_prim_func
from plait.te.registry import COMPUTES, get_compute, has_compute, register_compute
from plait.te.tensor import (
    Check, CommReducer, ComputeOp, Operation, PlaceholderOp, Reduce, TEError, Tensor, annotate, argmax, argmin,
    axis_range, check, comm_reducer, compute, max, min, placeholder, prod, reduce_axis, size_var, sum,
)

__all__ = [
    "COMPUTES", "Check", "CommReducer", "ComputeOp", "Operation", "PlaceholderOp", "Reduce", "TEError", "Tensor",
    "annotate", "argmax", "argmin", "axis_range", "check", "comm_reducer", "compute", "create_prim_func", "get_compute",
    "has_compute", "max", "min", "placeholder", "prod", "reduce_axis", "register_compute", "size_var", "sum",
]
