"""Traversal methods derived from `_child_fields` (plait.ir.node), on a toy IR and on Relay nodes."""

from dataclasses import dataclass
from typing import ClassVar, Union

import pytest

from plait import relay
from plait.ir.node import derive_traversal
from plait.relay.expr import Call, Function, GlobalVar, Let


class Node:
    _child_fields: ClassVar[tuple[str, ...]] = ()


@dataclass(frozen=True)
class Leaf(Node):
    name: str


@dataclass(frozen=True)
class Mixed(Node):
    """A maybe-child first, then a tuple, then a plain child after it; `tag` is not a child."""

    head: Union[str, Node]
    items: tuple[Node, ...]
    tag: str
    last: Node
    _child_fields: ClassVar[tuple[str, ...]] = ("head", "items", "last")


derive_traversal(Mixed, Node)
A, B, C, D = (Leaf(x) for x in "abcd")


def test_a_maybe_child_counts_only_when_it_is_a_node():
    with_head = Mixed(A, (B, C), "t", D)
    assert with_head._children() == (A, B, C, D)
    assert with_head._labels() == ("head", "items[0]", "items[1]", "last")
    assert with_head._rebuild((D, C, B, A)) == Mixed(D, (C, B), "t", A)
    no_head = Mixed("op", (B,), "t", D)
    assert no_head._children() == (B, D) and no_head._labels() == ("items[0]", "last")
    assert no_head._rebuild((C, A)) == Mixed("op", (C,), "t", A)


def test_a_field_after_the_tuple_must_be_plain():
    @dataclass(frozen=True)
    class Bad(Node):
        items: tuple[Node, ...]
        tail: Union[str, Node]
        _child_fields: ClassVar[tuple[str, ...]] = ("items", "tail")

    with pytest.raises(TypeError) as e:
        derive_traversal(Bad, Node)
    assert str(e.value) == "Bad: unsupported child fields ('items', 'tail')"


def test_relay_nodes_declare_their_children_once():
    x, y = relay.var("x", (2,)), relay.var("y", (2,))
    c = relay.call("add", x, y, meta={"name": "a1"})
    assert relay.children(c) == (x, y)  # an operator is not a child
    back = c._rebuild((y, x))
    assert back.args == (y, x) and back.op is c.op and back.meta == c.meta
    g = Call(GlobalVar("f"), (x,))
    assert relay.children(g) == (g.op, x) and g._labels() == ("op", "args[0]")
    let = Let(x, y, c)
    assert relay.children(let) == (y, x, c)  # the value is evaluated before its variable is bound
    f = Function((x, y), c)
    assert f._rebuild((y, x, c)).params == (y, x) and f._labels() == ("params[0]", "params[1]", "body")
