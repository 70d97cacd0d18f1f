"""Deep expressions (2,000+ levels) and long statement chains: no recursion limit anywhere."""

import sys

import numpy as np
import pytest

from plait import tir
from plait.tir import Buffer, Evaluate, For, Let, LetStmt, PrimFunc, StmtExprMutator, StmtExprVisitor, Var, seq

DEPTH = 2000


def deep_exprs(x):
    chain = x
    for k in range(DEPTH):
        chain = chain * 1.0001 + 0.5 if k % 2 else chain - 0.25  # left-deep: no parentheses needed
    right = x
    for _ in range(DEPTH):
        right = x - right  # right-deep: 2,000 nested parentheses
    calls = x
    for _ in range(DEPTH):
        calls = tir.tanh(calls)
    sel = x
    for k in range(DEPTH):
        sel = tir.select(x > float(k), sel, x + 1.0)
    lets = x
    for k in range(DEPTH):
        v = Var(f"t{k}", "float32")
        lets = Let(v, lets + 1.0, v * 0.5)
    return {"chain": chain, "right": right, "calls": calls, "select": sel, "lets": lets}


@pytest.mark.parametrize("kind", ["chain", "right", "calls", "select", "lets"])
def test_deep_expression_everywhere(kind):
    X, Y = Buffer("X", (2,)), Buffer("Y", (2,))
    i = Var("i")
    x = X[i]
    expr = deep_exprs(x)[kind]
    f = PrimFunc((X, Y), For(i, 0, 2, "serial", Y.store(i, expr)), {"global_symbol": kind})
    tir.verify(f)
    text = tir.print_prim_func(f)
    g = tir.parse_prim_func(text)
    tir.assert_structural_equal(f, g)
    assert tir.print_prim_func(g) == text
    assert tir.structural_hash(f) == tir.structural_hash(g)
    s = tir.simplify(f)
    tir.verify(s)
    xs = np.array([0.5, -3.0], np.float32)
    y1, y2 = np.zeros(2, np.float32), np.zeros(2, np.float32)
    tir.evaluate(f, xs, y1)
    tir.evaluate(s, xs, y2)
    np.testing.assert_array_equal(y1, y2)

    class Count(StmtExprVisitor):
        n = 0

        def visit_buffer_load(self, node):
            Count.n += 1

    Count().visit(f)
    assert Count.n >= 1
    assert StmtExprMutator().visit(f) is f
    j = Var("j")
    moved = tir.substitute(f.body.body, {i: j})
    assert tir.free_vars(moved) == [j]


def fused_chain(n: int = 16):
    """50 elementwise ops, inlined the way TE does it: a producer read twice is one shared object."""
    X, B, Y = Buffer("x", (n,)), Buffer("bias", (n,)), Buffer("y", (n,))
    i = Var("i")
    e = X[i]
    steps = []
    for k in range(50):
        c = 0.01 * (k + 1)
        op = k % 5
        steps.append((op, c))
        if op == 0:
            e = e + B[i]
        elif op == 1:
            e = tir.max(e * c, 0.0)
        elif op == 2:
            e = tir.tanh(e) + c
        elif op == 3:
            e = tir.select(e > c, e, e * 0.5)  # e three times
        else:
            e = e / (tir.fabs(e) + 1.0)  # e twice
    f = PrimFunc((X, B, Y), For(i, 0, n, "vectorized", Y.store(i, e)), {"global_symbol": "fused", "num_inputs": 2})
    return f, steps


def test_shared_fused_chain_is_linear_for_analyses():
    f, _ = fused_chain()  # as a tree: about 6**10 nodes
    tir.verify(f)
    g, _ = fused_chain()
    assert tir.structural_equal(f, g) and tir.structural_hash(f) == tir.structural_hash(g)
    assert tir.simplify(f) is f and tir.free_vars(f.body) == []

    class Loads(StmtExprVisitor):
        visit_shared_once = True
        n = 0

        def visit_buffer_load(self, node):
            Loads.n += 1

    Loads().visit(f)
    assert Loads.n == 11  # x[i] once, bias[i] ten times


def test_fused_chain_of_fifty_elementwise_ops_matches_numpy():
    f, steps = fused_chain()
    g = tir.bind_shared_exprs(f)
    tir.verify(g)
    tir.assert_structural_equal(tir.parse_prim_func(tir.print_prim_func(g)), g)
    n = 16
    x = np.linspace(-2, 2, n).astype(np.float32)
    b = np.linspace(1, -1, n).astype(np.float32)
    got = np.zeros(n, np.float32)
    tir.evaluate(tir.simplify(g), x, b, got)
    want = x.copy()
    for op, c in steps:
        c = np.float32(c)
        if op == 0:
            want = want + b
        elif op == 1:
            want = np.maximum(want * c, np.float32(0))
        elif op == 2:
            want = np.tanh(want) + c
        elif op == 3:
            want = np.where(want > c, want, want * np.float32(0.5))
        else:
            want = want / (np.abs(want) + np.float32(1))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_long_let_statement_chain():
    A = Buffer("A", (1,), "int64")
    vs = [Var(f"v{k}") for k in range(DEPTH)]
    body = A.store(0, vs[-1])
    for k in range(DEPTH - 1, -1, -1):
        body = LetStmt(vs[k], (vs[k - 1] if k else Var("n")) + 1, body)
    n = body.value.a
    f = PrimFunc((n, A), seq(Evaluate(0), body))
    tir.verify(f)
    text = tir.print_prim_func(f)
    assert text.count("\n    v") == DEPTH  # flat lets: no growing indentation
    tir.assert_structural_equal(tir.parse_prim_func(text), f)
    a = np.zeros(1, np.int64)
    tir.evaluate(f, 5, a)
    assert a[0] == 5 + DEPTH
    assert tir.simplify(f).body is body  # only the no-op goes


def test_deep_loop_nest_runs_in_the_interpreter():
    A = Buffer("A", (1,), "int64")
    loops = [Var(f"l{k}") for k in range(40)]
    body = A.store(0, A[0] + 1)
    for v in reversed(loops):
        body = For(v, 0, 1 if v is not loops[-1] else 3, "serial", body)
    f = PrimFunc((A,), body)
    a = np.zeros(1, np.int64)
    tir.evaluate(f, a)
    assert a[0] == 3
