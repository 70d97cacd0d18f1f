"""``simplify``: semantics-preserving arithmetic simplification of TIR.

Rules (every one exact under TIR semantics: wrapping integers, IEEE floats, lazy select/and/or):

- constant folding of every operator and cast on immediates, with the interpreter's own scalar
  semantics (:mod:`plait.tir.scalar`), which define every case C leaves undefined exactly as the
  generated code computes it (division by zero, out-of-range shifts and float -> int casts: see
  docs/tir.md); never folded: math intrinsics (libm results may differ in the last bit);
- integers: ``x + 0``, ``x - 0``, ``x * 1``, ``x * 0`` (when ``x`` has no side effect: no extern
  call), ``x // 1``, ``x % 1``, ``x - x``; constants move right (``3 + x`` -> ``x + 3``) and
  chains of constants fold (``(x + 1) + 2`` -> ``x + 3``, ``(x * 2) * 4`` -> ``x * 8``);
  ``(x // 4) // 2`` -> ``x // 8`` and ``(x % 8) % 4`` -> ``x % 4`` (positive constants);
  ``min``/``max`` of constants and nested constant bounds; ``x cmp x``;
- floats: only exact identities: ``x * 1.0``, ``x / 1.0``, ``x - 0.0``, ``x + -0.0``;
- ``select``/``if`` with a constant condition, ``and``/``or``/``not`` with constants, ``not not x``;
- lets bound to an immediate or a variable are inlined;
- statements: no-ops (``pass``, expressions without side effects) are dropped from sequences,
  loops with a constant extent <= 0 disappear. Loops of extent 1 are kept (schedules rely on them).

Repeats bottom-up rewriting until nothing changes (at most a few rounds).
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable

import numpy as np

from plait.tir import scalar
from plait.tir.dtype import int_range, is_bool, is_float, is_int
from plait.tir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, And, BinaryOp, BitwiseAnd, BitwiseNot, BitwiseOr, BitwiseXor, Call, Cast, Div,
    FloatImm, FloorDiv, FloorMod, IntImm, Let, Max, Min, Mul, Not, Or, PrimExpr, Select, ShiftLeft, ShiftRight,
    Sub, TruncDiv, TruncMod, Var,
)
from plait.tir.functor import StmtExprMutator, post_order, substitute
from plait.tir.stmt import AssertStmt, Evaluate, For, IfThenElse, LetStmt, SeqStmt, Stmt, is_no_op, no_op, seq

_FOLD: dict[type, Callable[[Any, Any], Any]] = {
    Add: operator.add, Sub: operator.sub, Mul: operator.mul, Div: operator.truediv,
    FloorDiv: scalar.floordiv, FloorMod: scalar.floormod, TruncDiv: scalar.truncdiv, TruncMod: scalar.truncmod,
    Min: scalar.minimum, Max: scalar.maximum, BitwiseAnd: operator.and_, BitwiseOr: operator.or_,
    BitwiseXor: operator.xor, ShiftLeft: scalar.shift_left, ShiftRight: scalar.shift_right,
    EQ: operator.eq, NE: operator.ne, LT: operator.lt, LE: operator.le, GT: operator.gt, GE: operator.ge,
    And: lambda a, b: a and b, Or: lambda a, b: a or b,
}
_SAME_VAR = {EQ: True, LE: True, GE: True, NE: False, LT: False, GT: False}


def _imm(e: PrimExpr) -> Any:
    """The Python value of an immediate, else None."""
    return e.value if isinstance(e, (IntImm, FloatImm)) else None


def _is(e: PrimExpr, value: float) -> bool:
    v = _imm(e)
    return v is not None and v == value and (not isinstance(e, FloatImm) or math.copysign(1, v) == math.copysign(1, value))


def _make(value: Any, dtype: str) -> PrimExpr:
    if is_float(dtype):
        return FloatImm(float(value), dtype)
    return IntImm(int(bool(value)) if dtype == "bool" else int(value), dtype)


def _fits(value: int, dtype: str) -> bool:
    lo, hi = int_range(dtype)
    return lo <= value <= hi


class _Simplifier(StmtExprMutator):
    def __init__(self) -> None:
        super().__init__()
        self.pure_memo: dict[PrimExpr, bool] = {}

    def pure(self, e: PrimExpr) -> bool:
        """No side effects: contains no extern or kernel call (memoized per node: linear on shared trees)."""
        memo = self.pure_memo
        if e not in memo:
            for n in post_order(e, unique=True):
                if n not in memo:
                    memo[n] = not (isinstance(n, Call) and n.kind != "intrin") and all(
                        memo[c] for c in n._children())
        return memo[e]

    # -- binary operators ------------------------------------------------------------------------
    def fold(self, e: BinaryOp) -> PrimExpr | None:
        a, b = _imm(e.a), _imm(e.b)
        if a is None or b is None or e.a.dtype != e.b.dtype:
            return None
        with np.errstate(all="ignore"):
            r = _FOLD[type(e)](scalar.make_scalar(a, e.a.dtype), scalar.make_scalar(b, e.b.dtype))
        return _make(r, e.dtype)

    def binary(self, e: PrimExpr) -> PrimExpr:  # noqa: C901 - one rule group per operator
        if not isinstance(e, BinaryOp):
            return e
        folded = self.fold(e)
        if folded is not None:
            return folded
        a, b, t = e.a, e.b, type(e)
        if a.dtype != b.dtype:
            return e
        if is_int(a.dtype):
            if t in (Add, Mul, Min, Max) and _imm(a) is not None and _imm(b) is None:
                return self.binary(t(b, a))  # constants on the right
            if t is Add and _is(b, 0) or t is Sub and _is(b, 0) or t is Mul and _is(b, 1):
                return a
            if t is Mul and _is(b, 0) and self.pure(a):
                return b
            if t in (FloorDiv, TruncDiv) and _is(b, 1):
                return a
            if t in (FloorMod, TruncMod) and _is(b, 1) and self.pure(a):
                return IntImm(0, a.dtype)
            if t is Sub and isinstance(a, Var) and a is b:
                return IntImm(0, a.dtype)
            if t in (Add, Sub) and _imm(b) is not None and type(a) in (Add, Sub) and _imm(a.b) is not None:
                # (x +- c1) +- c2 -> x + c (wrapping arithmetic is associative)
                c1 = a.b.value if type(a) is Add else -a.b.value
                c2 = b.value if t is Add else -b.value
                c = scalar.make_scalar(c1 + c2, a.dtype)
                return self.binary(Add(a.a, IntImm(int(c), a.dtype)))
            if t is Mul and type(a) is Mul and _imm(b) is not None and _imm(a.b) is not None:
                c = scalar.make_scalar(a.b.value * b.value, a.dtype)
                return self.binary(Mul(a.a, IntImm(int(c), a.dtype)))
            if t is FloorDiv and type(a) is FloorDiv and _imm(b) is not None and _imm(a.b) is not None:
                c1, c2 = a.b.value, b.value
                if c1 > 0 and c2 > 0 and _fits(c1 * c2, a.dtype):
                    return self.binary(FloorDiv(a.a, IntImm(c1 * c2, a.dtype)))
            if t is FloorMod and type(a) is FloorMod and _imm(b) is not None and _imm(a.b) is not None:
                c1, c2 = a.b.value, b.value
                if c1 > 0 and c2 > 0 and c1 % c2 == 0:
                    return self.binary(FloorMod(a.a, b))
            if t in (Min, Max) and type(a) is t and _imm(b) is not None and _imm(a.b) is not None:
                return t(a.a, self.binary(t(a.b, b)))
            if t in _SAME_VAR and isinstance(a, Var) and a is b:
                return IntImm(int(_SAME_VAR[t]), "bool")
        if t in (Min, Max) and isinstance(a, Var) and a is b:
            return a
        if is_float(a.dtype):
            if t is Mul and _is(b, 1.0) or t is Div and _is(b, 1.0) or t is Sub and _is(b, 0.0) or t is Add and \
                    _is(b, -0.0):
                return a
            if t is Mul and _is(a, 1.0) or t is Add and _is(a, -0.0):
                return b
        if is_bool(a.dtype) and t in (And, Or):
            neutral, absorbing = (1, 0) if t is And else (0, 1)
            if _is(a, neutral):
                return b
            if _is(a, absorbing):
                return a  # b is never evaluated
            if _is(b, neutral):
                return a
            if _is(b, absorbing) and self.pure(a):
                return b
        return e

    # -- hooks: every binary operator kind -------------------------------------------------------
    def rewrite_not(self, pre: PrimExpr, post: Not) -> PrimExpr:
        v = _imm(post.a)
        if v is not None and is_bool(post.a.dtype):
            return IntImm(int(not v), "bool")
        if isinstance(post.a, Not) and is_bool(post.a.a.dtype):
            return post.a.a
        return post

    def rewrite_bitwise_not(self, pre: PrimExpr, post: BitwiseNot) -> PrimExpr:
        v = _imm(post.a)
        if v is not None and is_int(post.a.dtype):
            return _make(~scalar.make_scalar(v, post.a.dtype), post.a.dtype)
        return post

    def rewrite_select(self, pre: PrimExpr, post: Select) -> PrimExpr:
        c = _imm(post.cond)
        if c is not None and is_bool(post.cond.dtype):
            return post.true_value if c else post.false_value
        if post.true_value is post.false_value and self.pure(post.cond):
            return post.true_value
        return post

    def rewrite_cast(self, pre: PrimExpr, post: Cast) -> PrimExpr:
        v, src = _imm(post.value), post.value.dtype
        if src == post.dtype:
            return post.value
        if v is None:
            return post
        return _make(scalar.cast(post.dtype, scalar.make_scalar(v, src)), post.dtype)

    def rewrite_let(self, pre: PrimExpr, post: Let) -> PrimExpr:
        if isinstance(post.value, (IntImm, FloatImm, Var)) and post.value.dtype == post.var.dtype:
            return substitute(post.body, {post.var: post.value})
        return post

    # -- statements ------------------------------------------------------------------------------
    def rewrite_let_stmt(self, pre: Stmt, post: LetStmt) -> Stmt:
        if isinstance(post.value, (IntImm, FloatImm, Var)) and post.value.dtype == post.var.dtype:
            return substitute(post.body, {post.var: post.value})
        return post

    def rewrite_if_then_else(self, pre: Stmt, post: IfThenElse) -> Stmt:
        c = _imm(post.cond)
        if c is not None and is_bool(post.cond.dtype):
            return post.then_case if c else (post.else_case if post.else_case is not None else no_op())
        return post

    def rewrite_assert(self, pre: Stmt, post: AssertStmt) -> Stmt:
        c = _imm(post.cond)
        return no_op() if c is not None and is_bool(post.cond.dtype) and c else post

    def rewrite_for(self, pre: Stmt, post: For) -> Stmt:
        n = _imm(post.extent)
        return no_op() if n is not None and n <= 0 else post

    def rewrite_evaluate(self, pre: Stmt, post: Evaluate) -> Stmt:
        if not is_no_op(post) and self.pure(post.value):
            return no_op()
        return post

    def rewrite_seq(self, pre: Stmt, post: Stmt) -> Stmt:
        if isinstance(post, SeqStmt) and any(is_no_op(s) for s in post.stmts):
            return seq(*(s for s in post.stmts if not is_no_op(s)))
        return post


for _cls in _FOLD:
    setattr(_Simplifier, "rewrite_" + _cls._kind, lambda self, pre, post: self.binary(post))


def simplify(node: Any, max_rounds: int = 8) -> Any:
    """``node`` (an expression, a statement or a PrimFunc) simplified; see the module docstring."""
    for _ in range(max_rounds):
        new = _Simplifier().visit(node)
        if new is node:
            break
        node = new
    return node
