"""Visitors, mutators, substitution, fresh copies, structural equality and hashing."""

import pytest

from plait import tir
from plait.tir import (
    Allocate, Buffer, Evaluate, For, IntImm, LetStmt, PrimFunc, StmtExprMutator, StmtExprVisitor, Var, seq,
)

from .fixtures import FIXTURES, conv2d, matmul


def test_visitor_enter_and_visit_bracket_each_loop():
    class LoopNest(StmtExprVisitor):
        def __init__(self):
            self.stack, self.stores = [], []

        def enter_for(self, node):
            self.stack.append(node.loop_var.name)

        def visit_for(self, node):
            self.stack.pop()

        def visit_buffer_store(self, node):
            self.stores.append((node.buffer.name, tuple(self.stack)))

    v = LoopNest()
    v.visit(matmul())
    assert v.stores == [("C", ("i", "j")), ("C", ("i", "j", "k"))] and v.stack == []


def test_visitor_can_skip_children_and_sees_every_occurrence():
    e = tir.Var("x") + 1
    shared = e * e

    class Count(StmtExprVisitor):
        n = 0

        def visit_var(self, node):
            Count.n += 1

        def enter_select(self, node):
            return False

    Count().visit(shared)
    assert Count.n == 2
    Count.n = 0
    Count().visit(tir.select(tir.const(True), e, e) + e)
    assert Count.n == 1


def test_mutator_rebuilds_only_what_changed():
    f = conv2d()

    class UnrollToSerial(StmtExprMutator):
        def rewrite_for(self, pre, post):
            return For(post.loop_var, post.min, post.extent, "serial", post.body) if post.kind == "unrolled" else post

    g = UnrollToSerial().visit(f)
    assert g is not f and "unrolled" not in tir.print_prim_func(g)
    oc_f, oc_g = f.body.body, g.body.body
    store_f, store_g = oc_f.body.body.body.stmts[0], oc_g.body.body.body.stmts[0]
    assert store_f is store_g  # untouched subtree shared
    assert StmtExprMutator().visit(f) is f
    tir.verify(g)


def test_mutator_enter_hook_replaces_subtree_and_buffers_are_remapped():
    f = FIXTURES["softmax_workspace"]()
    old = f.body.buffer

    class ToLocal(StmtExprMutator):
        def rewrite_buffer(self, b):
            return Buffer(b.name, b.shape, b.dtype, "local") if b.scope == "global.workspace" else b

    g = ToLocal().visit(f)
    assert g.body.buffer.scope == "local" and old.scope == "global.workspace"
    tir.verify(g)
    assert 'exps = allocate((8,), float32, scope="local")' in tir.print_prim_func(g)

    class Stop(StmtExprMutator):
        def enter_allocate(self, node):
            return Evaluate(0)

    assert tir.is_no_op(Stop().visit(f).body)


def test_substitute_vars_and_buffers():
    A, B = Buffer("A", (4,)), Buffer("B", (4,))
    i, j, n = Var("i"), Var("j"), Var("n")
    T = Buffer("T", (n,), "float32", "local")
    s = For(i, 0, 4, "serial", Allocate(T, seq(T.store(0, A[i]), B.store(i, T[0]))))
    out = tir.substitute(s, {n: 2, i: j}, {A: B})
    assert str(out) == (
        "for j in serial(0, 4):\n"
        "    T = allocate((2,), float32, scope=\"local\")\n"
        "    T[0] = B[j]\n"
        "    B[j] = T[0]")
    assert out.loop_var is j and out.body.buffer is not T and out.body.buffer.shape[0].value == 2
    assert tir.substitute(s, {}) is s


def test_copy_with_fresh_vars_allows_duplicating_code():
    f = FIXTURES["softmax_workspace"]()
    twice = PrimFunc(f.params, seq(f.body, f.body))
    with pytest.raises(tir.TIRVerifyError) as e:
        tir.verify(twice)
    assert "is bound more than once" in str(e.value) or "allocated more than once" in str(e.value)
    copy = tir.copy_with_fresh_vars(f.body)
    ok = PrimFunc(f.params, seq(f.body, copy))
    tir.verify(ok)
    tir.assert_structural_equal(f.body, copy)
    assert copy.buffer is not f.body.buffer
    assert not set(tir.free_vars(copy))


def test_free_vars_and_used_buffers():
    f = FIXTURES["symbolic"]()
    n = f.params[0]
    assert tir.free_vars(f.body) == [n]
    assert [b.name for b in tir.used_buffers(f.body)] == ["B", "A"]
    t = Var("t")
    assert tir.free_vars(LetStmt(t, n + 1, Evaluate(t * n))) == [n]


# ---- structural equality -------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_equal_to_a_fresh_build_and_hash_consistent(name):
    a, b = FIXTURES[name](), FIXTURES[name]()
    assert a is not b and tir.structural_equal(a, b)
    assert tir.structural_hash(a) == tir.structural_hash(b)
    assert tir.structural_hash(a) == tir.structural_hash(tir.parse_prim_func(tir.print_prim_func(a)))


def test_differences_are_reported_with_a_path():
    a, b = matmul(), matmul()
    tir.assert_structural_equal(a, b)
    c = matmul(k=6)
    with pytest.raises(AssertionError) as e:
        tir.assert_structural_equal(a, c)
    assert str(e.value) == ("structural mismatch at PrimFunc.params[0].shape[1]: "
                            "IntImm `5` vs IntImm `6`")
    d = PrimFunc(a.params, For(a.body.loop_var, 0, 4, "serial", a.body.body), a.attrs)
    with pytest.raises(AssertionError) as e:
        tir.assert_structural_equal(a, d)
    assert str(e.value) == "structural mismatch at PrimFunc.body: loop kind parallel vs serial"
    assert tir.structural_hash(a) != tir.structural_hash(d)


def test_binding_versus_free_variables():
    i, j = Var("i"), Var("j")
    A = Buffer("A", (4,))
    s1 = For(i, 0, 4, "serial", A.store(i, 1.0))
    s2 = For(j, 0, 4, "serial", A.store(j, 1.0))
    assert tir.structural_equal(s1, s2)
    assert not tir.structural_equal(i + 1, j + 1)
    assert tir.structural_equal(i + 1, j + 1, map_free_vars=True)
    assert not tir.structural_equal(i + j, j + j, map_free_vars=True)
    with pytest.raises(AssertionError) as e:
        tir.assert_structural_equal(i + 1, j + 1)
    assert str(e.value) == "structural mismatch at Add.a: variable 'i' does not correspond to variable 'j'"
    # a loop that uses the outer variable vs one that uses its own
    k = Var("k")
    outer = For(i, 0, 4, "serial", For(j, 0, 4, "serial", A.store(i, 1.0)))
    inner = For(i, 0, 4, "serial", For(k, 0, 4, "serial", A.store(k, 1.0)))
    assert not tir.structural_equal(outer, inner)
    with pytest.raises(AssertionError) as e:
        tir.assert_structural_equal(IntImm(1), IntImm(1, "int32"))
    assert str(e.value) == "structural mismatch at IntImm: dtype int64 vs int32: IntImm `1` vs IntImm `1i32`"
    assert not tir.structural_equal(tir.const(0.0), tir.const(-0.0))
    assert tir.structural_equal(tir.const(float("nan")), tir.const(float("nan")))


def split(func, loop_var, factor):
    """A loop split written on the nodes, as a schedule primitive would (the docs/tir.md example)."""

    class Split(StmtExprMutator):
        def rewrite_for(self, pre, post):
            if pre.loop_var is not loop_var:
                return post
            outer, inner = Var(loop_var.name + "_o"), Var(loop_var.name + "_i")
            body = tir.substitute(post.body, {loop_var: post.min + outer * factor + inner})
            if post.extent.value % factor:
                body = tir.IfThenElse(outer * factor + inner < post.extent, body)
            n_outer = (post.extent.value + factor - 1) // factor
            return For(outer, 0, n_outer, "serial", For(inner, 0, factor, post.kind, body))

    return Split().visit(func)


def test_a_split_written_on_the_nodes_keeps_results():
    import numpy as np

    f = matmul(4, 6, 5)
    j = f.body.body.loop_var
    g = tir.simplify(split(f, j, 4))
    tir.verify(g)
    assert ("        for j_o in serial(0, 2):\n"
            "            for j_i in vectorized(0, 4):\n"
            "                if j_o * 4 + j_i < 6:\n") in tir.print_prim_func(g)
    a, b = np.random.rand(4, 5).astype("float32"), np.random.rand(5, 6).astype("float32")
    c1, c2 = np.zeros((4, 6), "float32"), np.zeros((4, 6), "float32")
    tir.evaluate(f, a, b, c1)
    tir.evaluate(g, a, b, c2)
    np.testing.assert_array_equal(c1, c2)
