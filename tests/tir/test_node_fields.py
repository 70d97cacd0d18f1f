"""TIR node traversal (_children/_labels/_rebuild) is derived from each class's `_child_fields`."""

from typing import ClassVar

import pytest

from plait import tir
from plait.tir.expr import PrimExpr, tir_node


def test_derived_children_labels_and_rebuild_follow_the_declared_fields():
    i, b = tir.Var("i"), tir.Buffer("B", (4, 5))
    store = tir.BufferStore(b, tir.FloatImm(1.0), (i, tir.IntImm(2)))
    assert store._children() == (i, store.indices[1], store.value)
    assert store._labels() == ("indices[0]", "indices[1]", "value")
    new = store._rebuild((tir.IntImm(0), i, tir.FloatImm(2.0)))
    assert str(new) == "B[0, i] = 2.0" and new.buffer is b
    loop = tir.For(i, 0, 4, "parallel", store, {"pragma": 1})
    again = loop._rebuild((tir.IntImm(1), tir.IntImm(3), store))
    assert (again.loop_var, again.kind, again.annotations, again.body) == (i, "parallel", loop.annotations, store)
    assert (again.min.value, again.extent.value) == (1, 3)
    cond = tir.IfThenElse(i < 2, store)
    assert cond._labels() == ("cond", "then_case") and cond._rebuild(cond._children()).else_case is None
    both = tir.IfThenElse(i < 2, store, store)
    assert both._labels() == ("cond", "then_case", "else_case")
    assert both._rebuild(both._children()).else_case is store
    add = tir.Add(i, tir.IntImm(1))
    assert type(add._rebuild((tir.IntImm(3), i))) is tir.Add and add._labels() == ("a", "b")
    call = tir.Call("float32", "exp", (tir.FloatImm(1.0),))
    assert call._rebuild((tir.FloatImm(2.0),)).name == "exp" and call._labels() == ("args[0]",)


def test_seq_keeps_its_own_rebuild_that_flattens():
    b = tir.Buffer("B", (4,))
    s = tir.seq(b.store(0, 1.0), b.store(1, 2.0))
    inner = tir.seq(b.store(2, 3.0), b.store(3, 4.0))
    flat = s._rebuild((s.stmts[0], inner))
    assert flat.stmts == (s.stmts[0], inner.stmts[0], inner.stmts[1])


def test_unsupported_child_fields_are_refused_when_the_class_is_made():
    with pytest.raises(TypeError) as e:
        @tir_node
        class Two(PrimExpr):
            xs: tuple[PrimExpr, ...]
            ys: tuple[PrimExpr, ...]
            dtype: str = "int64"
            _child_fields: ClassVar[tuple[str, ...]] = ("xs", "ys")
    assert str(e.value) == "Two: unsupported child fields ('xs', 'ys')"
