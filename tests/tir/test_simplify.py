"""The TIR simplifier: rules, and property tests against the interpreter on random expressions."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plait import tir
from plait.tir import (
    Add, BitwiseAnd, BitwiseOr, BitwiseXor, Buffer, Evaluate, FloatImm, FloorDiv, FloorMod, For, IfThenElse,
    IntImm, Let, LetStmt, Max, Min, Mul, PrimFunc, Select, ShiftLeft, Sub, TruncDiv, TruncMod, Var, seq,
    simplify,
)
from plait.tir.dtype import int_range

from .fixtures import FIXTURES

x, y = Var("x"), Var("y")
f = Var("f", "float32")
b = Var("b", "bool")


@pytest.mark.parametrize("expr,text", [
    (IntImm(3) + IntImm(4) * IntImm(5), "23"),
    ((x + 1) + 2, "x + 3"), ((x - 1) + 1, "x"), (3 + x, "x + 3"), ((x * 2) * 4, "x * 8"),
    (x * 1 + 0, "x"), (x * 0, "0"), (x - x, "0"), ((x // 4) // 2, "x // 8"), ((x % 8) % 4, "x % 4"),
    ((x % 8) % 3, "x % 8 % 3"), ((x // -4) // 2, "x // -4 // 2"), (x // 1 + x % 1, "x"),
    (tir.min(tir.min(x, 8), 3), "min(x, 3)"), (tir.max(3, tir.max(7, 2)), "7"), (tir.min(x, x), "x"),
    (tir.truncdiv(IntImm(-7), 2), "-3"), (tir.truncmod(IntImm(-7), 2), "-1"), (IntImm(-7) // 2, "-4"),
    (tir.select(tir.const(True), x, y), "x"), (tir.select(IntImm(3) < 2, x, y), "y"),
    (tir.logical_and(tir.const(True), b), "b"), (tir.logical_or(b, tir.const(True)), "True"),
    (tir.logical_and(b, tir.const(False)), "False"), (tir.logical_not(tir.logical_not(b)), "b"),
    (tir.eq(x, x), "True"), (x < x, "False"),
    (f * 1.0, "f"), (f + 0.0, "f + 0.0"), (f + -0.0, "f"), (f - 0.0, "f"), (f * 0.0, "f * 0.0"), (f / 1.0, "f"),
    (tir.const(0.1) + tir.const(0.2), "0.3"), (tir.const(1.0) / tir.const(0.0), "inf"),
    (tir.cast("int8", IntImm(300, "int32")), "44i8"), (tir.cast("int32", tir.const(2.75)), "2i32"),
    (tir.cast("int32", tir.const(3e9)), "2147483647i32"),
    (tir.cast("uint8", tir.const(float("nan"))), "0u8"), (tir.cast("int8", tir.const(-1e30)), "-128i8"),
    (tir.floordiv(IntImm(7, "int32"), IntImm(0, "int32")), "0i32"),
    (tir.truncdiv(IntImm(-2**31, "int32"), IntImm(-1, "int32")), "-2147483648i32"),
    (ShiftLeft(IntImm(1, "int32"), IntImm(40, "int32")), "0i32"), (tir.cast("float32", f), "f"),
    (IntImm(1) // IntImm(0), "0"), (IntImm(-3, "int8") >> IntImm(9, "int8"), "-1i8"),
    (IntImm(127, "int8") + IntImm(1, "int8"), "-128i8"), (tir.exp(tir.const(0.0)), "exp(0.0)"),
    (tir.let(Var("t"), 4, lambda t: t * x), "x * 4"),
])
def test_rules(expr, text):
    assert str(simplify(expr)) == text


def test_side_effects_are_kept():
    call = tir.call_extern("int64", "next_value")
    assert str(simplify(call * 0)) == 'call_extern(int64, "next_value") * 0'
    assert str(simplify(x * 0)) == "0"
    s = simplify(seq(Evaluate(x + 1), Evaluate(call)))
    assert str(s) == 'call_extern(int64, "next_value")'
    cond = tir.logical_and(tir.const(False), tir.call_extern("bool", "check"))
    assert str(simplify(cond)) == "False"  # never evaluated: `and` is lazy


def test_statements():
    A = Buffer("A", (4,))
    i, t = Var("i"), Var("t")
    body = seq(
        IfThenElse(IntImm(1) < 2, A.store(0, 1.0), A.store(0, 2.0)),
        IfThenElse(tir.const(False), A.store(1, 1.0)),
        For(i, 0, 0, "serial", A.store(i, 3.0)),
        For(i, 0, 1, "serial", A.store(i, 3.0)),
        LetStmt(t, IntImm(2), A.store(t + 1, 4.0)),
    )
    assert str(simplify(body)) == (
        "A[0] = 1.0\n"
        "for i in serial(0, 1):\n"
        "    A[i] = 3.0\n"
        "A[3] = 4.0"
    )


def test_unchanged_trees_are_returned_as_is():
    for mk in FIXTURES.values():
        fn = mk()
        out = simplify(fn)
        tir.verify(out)
    m = FIXTURES["matmul"]()
    assert simplify(m) is m


def test_simplified_function_computes_the_same():
    A, B = Buffer("A", (6,), "int32"), Buffer("B", (6,), "int32")
    i, t = Var("i"), Var("t", "int32")
    body = For(i, 0, 6, "serial", LetStmt(t, tir.const(3, "int32"),
               B.store(i * 1 + 0, tir.select(tir.const(True), (A[i] + t) * 1 + (A[i] - A[i]), A[i]) // 1)))
    fn = PrimFunc((A, B), body)
    s = simplify(fn)
    assert str(s.body) == "for i in serial(0, 6):\n    B[i] = A[i] + 3i32 + (A[i] - A[i])"
    a = np.arange(6, dtype=np.int32) - 2
    b1, b2 = np.zeros(6, np.int32), np.zeros(6, np.int32)
    tir.evaluate(fn, a, b1)
    tir.evaluate(s, a, b2)
    np.testing.assert_array_equal(b1, b2)


# ---- property tests ------------------------------------------------------------------------------

INT_OPS = [Add, Sub, Mul, FloorDiv, FloorMod, TruncDiv, TruncMod, Min, Max, BitwiseAnd, BitwiseOr, BitwiseXor]
CMPS = [tir.EQ, tir.NE, tir.LT, tir.LE, tir.GT, tir.GE]


def int_exprs(dtype, vs):
    lo, hi = int_range(dtype)
    imm = st.one_of(st.integers(-3, 9), st.sampled_from([lo, hi, 0, 1])).filter(lambda v: lo <= v <= hi)
    leaves = st.one_of(st.sampled_from(vs), imm.map(lambda v: IntImm(v, dtype)))

    def extend(kids):
        binary = st.tuples(st.sampled_from(INT_OPS), kids, kids).map(lambda t: t[0](t[1], t[2]))
        shift = st.tuples(kids, kids).map(lambda t: ShiftLeft(t[0], t[1]))  # every amount is defined
        sel = st.tuples(st.sampled_from(CMPS), kids, kids, kids, kids).map(
            lambda t: Select(t[0](t[1], t[2]), t[3], t[4]))
        logic = st.tuples(st.sampled_from(CMPS), kids, kids, st.booleans(), kids, kids).map(
            lambda t: Select((tir.And if t[3] else tir.Or)(t[0](t[1], t[2]), tir.LT(t[4], t[1])), t[5], t[4]))
        let = st.tuples(kids, kids).map(lambda t: (lambda v: Let(v, t[0], Add(t[1], v)))(Var("t", dtype)))
        return st.one_of(binary, binary, shift, sel, logic, let)

    return st.recursive(leaves, extend, max_leaves=14)


def same_values(expr, envs):
    s = simplify(expr)
    for env in envs:
        want = tir.evaluate_expr(expr, env)  # defined for every input (division by zero too)
        got = tir.evaluate_expr(s, env)
        assert got == want and got.dtype == want.dtype, (str(expr), str(s), env)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "int8"])
def test_simplify_preserves_integer_semantics(dtype):
    vs = [Var("x", dtype), Var("y", dtype)]
    lo, hi = int_range(dtype)
    values = st.one_of(st.integers(-20, 20), st.integers(lo, hi), st.sampled_from([lo, hi])).filter(
        lambda v: lo <= v <= hi)

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(int_exprs(dtype, vs), st.lists(st.tuples(values, values), min_size=3, max_size=3))
    def check(expr, envs):
        tir.verify(PrimFunc(tuple(vs), Evaluate(expr)))
        same_values(expr, [{vs[0]: a, vs[1]: c} for a, c in envs])

    check()


FLOATS = [0.0, -0.0, 1.0, -1.5, math.inf, -math.inf, math.nan, 1e-45, 3.4e38]


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.recursive(
    st.one_of(st.just(f), st.sampled_from(FLOATS).map(FloatImm)),
    lambda kids: st.tuples(st.sampled_from([Add, Sub, Mul, tir.Div, Min, Max]), kids, kids).map(
        lambda t: t[0](t[1], t[2])),
    max_leaves=8), st.sampled_from(FLOATS))
def test_simplify_preserves_float_semantics_bit_for_bit(expr, value):
    want = tir.evaluate_expr(expr, {f: value})
    got = tir.evaluate_expr(simplify(expr), {f: value})
    assert (np.isnan(want) and np.isnan(got)) or (want == got and np.signbit(want) == np.signbit(got)), (
        str(expr), str(simplify(expr)))


def _templates(x, c1, c2):
    for op1 in INT_OPS:
        for op2 in INT_OPS:
            yield op2(op1(x, c1), c2)
            yield op2(c2, op1(x, c1))
            yield op2(op1(c1, x), c2)


@pytest.mark.parametrize("dtype", ["int32", "uint8"])
def test_simplify_rule_templates_exhaustively(dtype):
    """Every pair of integer operators around one variable and two constants (where rules fire)."""
    lo, hi = int_range(dtype)
    xv = Var("x", dtype)
    pairs = [(3, 2), (-4, 2), (8, -3), (hi, 2)] if lo < 0 else [(3, 2), (8, 4), (200, 3), (hi, 2)]
    values = [v for v in (-7, -1, 0, 1, 9, lo, hi) if lo <= v <= hi]
    checked = 0
    for a, c in pairs:
        for expr in _templates(xv, IntImm(a, dtype), IntImm(c, dtype)):
            same_values(expr, [{xv: v} for v in values])
            checked += 1
    assert checked == 4 * 3 * len(INT_OPS) ** 2


@pytest.mark.parametrize("op", [Add, Sub, Mul, tir.Div, Min, Max])
def test_simplify_float_identities_exhaustively(op):
    for c in FLOATS:
        for expr in (op(f, FloatImm(c)), op(FloatImm(c), f)):
            s = simplify(expr)
            for value in FLOATS:
                want = tir.evaluate_expr(expr, {f: value})
                got = tir.evaluate_expr(s, {f: value})
                assert (np.isnan(want) and np.isnan(got)) or (
                    want == got and np.signbit(want) == np.signbit(got)), (str(expr), str(s), value)
