"""Import-time evaluation: constant folding and symbolic shape values.

A node whose inputs are all constants is converted as usual and then evaluated with the
operators' numpy references (the reference interpreter), so it becomes a constant: shape
subgraphs (``Shape``/``Gather``/``Concat``/``Cast``...) on static shapes disappear this way and
the inputs plait takes as attributes (``Reshape``'s shape, ``Slice``'s starts...) become known.

``Shape`` of a tensor with symbolic dims gives a :class:`SymTensor`; the few ops exporters apply
to shapes (``Gather``, ``Slice``, ``Concat``, ``Squeeze``, ``Unsqueeze``, ``Cast``, integer
arithmetic) are evaluated on it here, element by element, so that e.g. a ``Reshape`` target
``[batch, seq, 4, 16]`` built from ``Shape(x)`` stays importable.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plait.frontend.onnx_budget import ImportBudget, type_bytes
from plait.frontend.onnx_node import NodeContext, SymTensor, Unsupported
from plait.ir.types import ANY_DIM
from plait.relay.expr import Call, Constant, Expr, Tuple, TupleGetItem
from plait.relay.interpreter import Interpreter
from plait.relay.module import IRModule
from plait.relay.passes.fold_constant import NOT_FOLDED
from plait.relay.visitor import post_order


def fold_outputs(outs: list[Any], budget: ImportBudget | None = None) -> list[Any]:
    """Evaluate the Relay expressions among ``outs`` (built from constants only) to arrays
    (except those calling an operator in ``FoldConstant``'s ``NOT_FOLDED``).

    An output is left an expression (computed at run time) when what evaluating it allocates (every
    call and tuple item in it) does not fit ``budget``."""
    todo = [i for i, o in enumerate(outs) if isinstance(o, Expr)]
    if not todo:
        return outs
    folded = list(outs)
    pending = []
    for i in todo:
        if isinstance(outs[i], Constant):
            folded[i] = outs[i].data
        elif _never_folded(outs[i]):
            continue
        elif budget is None or budget.fold(_eval_bytes(outs[i])):
            pending.append(i)
    if pending:
        values = Interpreter(IRModule()).eval(Tuple(tuple(outs[i] for i in pending)), {})
        for i, v in zip(pending, values):
            folded[i] = np.asarray(v)
    return folded


def _never_folded(e: Expr) -> bool:
    """Does ``e`` call an operator FoldConstant never folds (``qnn.dequantize`` of an int8 weight)?"""
    return any(isinstance(n, Call) and getattr(n.op, "name", None) in NOT_FOLDED for n in post_order(e))


def _eval_bytes(e: Expr) -> int | None:
    """Bytes the values evaluating ``e`` computes (None: unknown)."""
    total = 0
    for n in post_order(e):
        if isinstance(n, (Call, TupleGetItem)):
            b = type_bytes(n.checked_type) if n.has_type else None
            if b is None:
                return None
            total += b
    return total


# ---- symbolic shape values --------------------------------------------------------------------


def has_sym(cx: NodeContext) -> bool:
    """Does the node take a non-static :class:`SymTensor` (and otherwise only constants)?"""
    syms = [v for v in cx.inputs if isinstance(v, SymTensor) and not v.is_static]
    rest_const = all(v is None or isinstance(v, (SymTensor, np.ndarray)) for v in cx.inputs)
    return bool(syms) and rest_const


def sym_values(cx: NodeContext, i: int) -> np.ndarray:
    """Input ``i`` as an object array of ints and dim names."""
    v = cx.value(i)
    if isinstance(v, SymTensor):
        return v.values
    arr = np.asarray(v)
    if arr.dtype.kind not in "iu":
        raise Unsupported("symbolic shape arithmetic with non-integer values")
    out = np.empty(arr.shape, dtype=object)
    for idx, x in np.ndenumerate(arr):
        out[idx] = int(x)
    return out


def sym_result(values: Any, dtype: str = "int64") -> SymTensor | np.ndarray:
    values = np.asarray(values, dtype=object)
    st = SymTensor(values, dtype)
    return st.to_array() if st.is_static else st


def _sym_op(f: Callable[[int, int], int]) -> Callable[[Any, Any], Any]:
    def g(a: Any, b: Any) -> Any:
        if isinstance(a, int) and isinstance(b, int):
            return int(f(a, b))
        return ANY_DIM

    return g


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


SYM_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "Add": _sym_op(lambda a, b: a + b),
    "Sub": _sym_op(lambda a, b: a - b),
    "Mul": _sym_op(lambda a, b: a * b),
    "Div": _sym_op(_trunc_div),
}


def sym_binary(cx: NodeContext) -> SymTensor | np.ndarray:
    a, b = sym_values(cx, 0), sym_values(cx, 1)
    f = SYM_BINARY[cx.op_type]
    if cx.op_type == "Mul":  # x * 1 keeps the name
        def f(x: Any, y: Any, g=f) -> Any:  # type: ignore[misc]
            return x if y == 1 else y if x == 1 else g(x, y)
    if cx.op_type in ("Add", "Sub"):
        def f(x: Any, y: Any, g=f) -> Any:  # type: ignore[misc]
            return x if y == 0 else g(x, y)
    out = np.frompyfunc(f, 2, 1)(a, b)
    return sym_result(out, cx.dtype(0))


def _sym_equal(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if a == b and a != ANY_DIM:
        return True  # the same named dim
    if (isinstance(a, int) and a < 0) or (isinstance(b, int) and b < 0):
        return False  # a dim is never negative (exporters compare shapes with -1)
    raise Unsupported("comparison of a symbolic dimension whose result is unknown at import time")


def sym_equal(cx: NodeContext) -> np.ndarray:
    """``Equal`` on symbolic shape values: a constant bool tensor when the result is decidable."""
    out = np.frompyfunc(_sym_equal, 2, 1)(sym_values(cx, 0), sym_values(cx, 1))
    return np.asarray(out.tolist(), dtype=bool).reshape(np.shape(out))


def sym_where(cx: NodeContext) -> SymTensor | np.ndarray:
    """``Where`` with a constant condition choosing between symbolic shape values."""
    cond = cx.const(0, "condition").astype(bool)
    a, b = sym_values(cx, 1), sym_values(cx, 2)
    return sym_result(np.where(cond, a, b), cx.dtype(1))
