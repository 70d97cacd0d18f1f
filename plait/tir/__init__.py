"""TIR: plait's tensor-level IR (PrimFuncs: buffers, loops, stores, extern calls). See docs/tir.md.

Shared by default lowering (TE -> TIR), schedules, target hooks (``relay_to_tir``), memory planning
and C codegen. Nodes are immutable and compared by identity; :func:`structural_equal` compares
structure. Text form: :func:`print_prim_func` / :func:`parse_prim_func` (round trip exact).
"""

from plait.tir import expr as _expr, op as _op, printer as _printer
from plait.tir.dtype import HANDLE, VOID
from plait.tir.equal import assert_structural_equal, structural_equal, structural_hash
from plait.tir.errors import TIRCheckError, TIREvalError, TIRError, TIRVerifyError
from plait.tir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, AddressOf, And, BinaryOp, BitwiseAnd, BitwiseNot, BitwiseOr, BitwiseXor,
    BufferLoad, Call, Cast, Div, FloatImm, FloorDiv, FloorMod, IntImm, Let, Max, Min, Mul, Not, Or, PrimExpr,
    Select, ShiftLeft, ShiftRight, Sub, TIRNode, TruncDiv, TruncMod, UnaryOp, Var, const,
)
from plait.tir.functor import (
    StmtExprMutator, StmtExprVisitor, copy_with_fresh_vars, free_vars, post_order, pre_order, substitute,
    used_buffers,
)
from plait.tir.intrin import INTRINSICS, Intrinsic, get_intrinsic
from plait.tir.op import *  # noqa: F401,F403 - checked builders: add, select, cast, exp, call_extern...
from plait.tir.op import __all__ as _op_all
from plait.tir.parser import parse_prim_func, parse_prim_funcs
from plait.tir.printer import print_prim_func, print_prim_funcs
from plait.tir.stmt import (
    FOR_KINDS, SCOPES, Allocate, AssertStmt, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt,
    is_no_op, no_op, seq,
)
from plait.tir.share import bind_shared_exprs
from plait.tir.simplify import simplify
from plait.tir.verify import verify
from plait.tir.interpreter import evaluate, evaluate_expr

# The nodes sit below the printer and the checked builders (both import plait.tir.expr): str(node) and
# the Python operators on expressions are bound to them here, once, when the package loads.
_expr.bind(_printer.print_node, _op)

__all__ = [
    "EQ", "FOR_KINDS", "GE", "GT", "HANDLE", "INTRINSICS", "LE", "LT", "NE", "SCOPES", "VOID", "Add", "AddressOf",
    "Allocate", "And", "AssertStmt", "BinaryOp", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "Buffer", "BufferLoad",
    "BufferStore", "Call", "Cast", "Div", "Evaluate", "FloatImm", "FloorDiv", "FloorMod", "For", "IfThenElse",
    "IntImm", "Intrinsic", "Let", "LetStmt", "Max", "Min", "Mul", "NE", "Not", "Or", "PrimExpr", "PrimFunc",
    "Select", "SeqStmt", "ShiftLeft", "ShiftRight", "Stmt", "StmtExprMutator", "StmtExprVisitor", "Sub",
    "TIRCheckError", "TIREvalError", "TIRError", "TIRNode", "TIRVerifyError", "TruncDiv", "TruncMod", "UnaryOp", "Var",
    "assert_structural_equal", "bind_shared_exprs", "const", "copy_with_fresh_vars", "evaluate", "evaluate_expr", "free_vars",
    "get_intrinsic", "is_no_op", "no_op", "parse_prim_func", "parse_prim_funcs", "post_order", "pre_order",
    "print_prim_func", "print_prim_funcs", "seq", "simplify", "structural_equal", "structural_hash",
    "substitute", "used_buffers", "verify", *_op_all,
]
