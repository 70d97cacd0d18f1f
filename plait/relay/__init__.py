"""Relay: plait's graph-level IR (functions of operator calls over typed tensors)."""

from plait.relay import expr as _expr, module as _module, text_print as _text_print
from plait.relay.expr import (
    Call, Constant, Expr, Function, GlobalVar, If, Let, Loop, Tuple, TupleGetItem, Var, call, const, var,
)
from plait.relay.infer import InferType, infer_expr, infer_type
from plait.relay.interpreter import flatten_value, run
from plait.relay.module import IRModule
from plait.relay.visitor import ExprMutator, ExprVisitor, children, free_vars, post_order
from plait.relay.analysis import assert_structural_equal, structural_equal, structural_hash
from plait.relay.text import parse_expr, parse_module, print_expr, print_module, print_with_constants

# The nodes and IRModule sit below the text printer (it imports them): their str() is bound to it here,
# once, when the package loads.
_expr.bind_printer(_text_print.print_expr)
_module.bind_printer(_text_print.print_module)

__all__ = [
    "Call", "Constant", "Expr", "ExprMutator", "ExprVisitor", "Function", "GlobalVar", "IRModule", "If",
    "InferType", "Let", "Loop", "Tuple", "TupleGetItem", "Var", "call", "children", "const", "flatten_value",
    "free_vars", "infer_expr", "infer_type", "post_order", "run", "var",
    "assert_structural_equal", "structural_equal", "structural_hash",
    "parse_expr", "parse_module", "print_expr", "print_module", "print_with_constants",
]
