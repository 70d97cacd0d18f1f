"""bind_shared_exprs: naming shared subexpressions without changing what gets evaluated."""

import numpy as np

from plait import tir
from plait.tir import Buffer, For, Let, PrimFunc, Var

from .fixtures import FIXTURES

A, B = Buffer("A", (4,)), Buffer("B", (4,))
i, j = Var("i"), Var("j")


def test_statement_gets_let_statements():
    a = A[i]
    s1 = a * 0.5 + a
    f = PrimFunc((A, B), For(i, 0, 4, "serial", B.store(i, tir.select(s1 > 0.0, s1, s1 * 0.1))))
    g = tir.bind_shared_exprs(f)
    assert str(g.body) == (
        "for i in serial(0, 4):\n"
        "    cse0: float32 = A[i]\n"
        "    cse1: float32 = cse0 * 0.5 + cse0\n"
        "    B[i] = select(cse1 > 0.0, cse1, cse1 * 0.1)")
    tir.verify(g)
    x = np.array([1.0, -2.0, 0.0, 3.0], np.float32)
    y1, y2 = np.zeros(4, np.float32), np.zeros(4, np.float32)
    tir.evaluate(f, x, y1)
    tir.evaluate(g, x, y2)
    np.testing.assert_array_equal(y1, y2)


def test_expression_gets_lets_and_unshared_trees_are_kept():
    e = (A[i] + 1.0) * (A[i] + 1.0)  # two different objects: nothing shared
    assert tir.bind_shared_exprs(e) is e
    s = A[i] + 1.0
    assert str(tir.bind_shared_exprs(s * s)) == "let(cse0: float32 = A[i] + 1.0, cse0 * cse0)"
    f = FIXTURES["conv2d"]()
    assert tir.bind_shared_exprs(f) is not f  # the padded index expressions are shared
    tir.verify(tir.bind_shared_exprs(f))


def test_never_evaluates_what_the_original_would_not():
    ld = A[j]
    guarded = tir.select(j < 4, ld * ld, 0.0)  # the load may be out of bounds when j >= 4
    assert tir.bind_shared_exprs(guarded) is guarded
    safe = j * 2 + 1
    out = tir.bind_shared_exprs(tir.select(j < 4, tir.cast("float32", safe * safe), 0.0))
    assert str(out) == "let(cse0: int64 = j * 2 + 1, select(j < 4, cast(float32, cse0 * cse0), 0.0))"
    used_anyway = tir.select(ld > 0.0, ld, 0.0)
    assert str(tir.bind_shared_exprs(used_anyway)) == "let(cse0: float32 = A[j], select(cse0 > 0.0, cse0, 0.0))"
    call = tir.call_extern("float32", "rand")
    assert tir.bind_shared_exprs(call + call) is not None and str(tir.bind_shared_exprs(call + call)) == (
        'call_extern(float32, "rand") + call_extern(float32, "rand")')
    t = Var("t", "float32")
    inner = t * 2.0
    e = Let(t, A[j], inner + inner)
    assert str(tir.bind_shared_exprs(e)) == "let(t: float32 = A[j], t * 2.0 + t * 2.0)"


def test_moderately_shared_chain_runs_the_same_before_and_after():
    e = A[i]
    for k in range(8):
        e = tir.select(e > float(k) / 8, e * 0.9, e + 0.25)
    f = PrimFunc((A, B), For(i, 0, 4, "serial", B.store(i, e)))
    g = tir.bind_shared_exprs(f)
    tir.verify(g)
    text = tir.print_prim_func(g)
    assert text.count(": float32 = ") == 8 and "cse8" not in text
    x = np.array([0.1, 0.9, -1.0, 2.0], np.float32)
    y1, y2 = np.zeros(4, np.float32), np.zeros(4, np.float32)
    tir.evaluate(f, x, y1)
    tir.evaluate(g, x, y2)
    np.testing.assert_array_equal(y1, y2)
