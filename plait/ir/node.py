"""Traversal methods of IR node classes derived from one declaration of their child fields.

A node class (a dataclass; TIR's and Relay's) names its child fields once, in evaluation order, in
``_child_fields``; :func:`derive_traversal` generates, once per class, ``_children()`` (the child
nodes, flat), ``_labels()`` (a name per child, for messages) and ``_rebuild(children)`` (a copy with
new children, the other fields kept). The shape of each child field comes from its annotation:

- ``tuple[...]``: a tuple of nodes (at most one per class; only plain fields may follow it);
- an annotation naming ``None`` or a ``Union`` (``Stmt | None``, ``Union[Op, Expr]``): a child only
  when its value is a node (an instance of the IR's base class);
- anything else: one node.

The methods are generated source (as :mod:`dataclasses` does), so traversal does no reflection.
"""

from __future__ import annotations

import types
import typing
from dataclasses import fields
from typing import Any


def _field_shape(cls: type, name: str) -> str:
    annotation = {f.name: f for f in fields(cls)}[name].type
    if not isinstance(annotation, str):  # evaluated annotations (no ``from __future__ import annotations``)
        origin = typing.get_origin(annotation)
        if origin is tuple:
            return "tuple"
        return "maybe" if origin in (typing.Union, types.UnionType) else "single"
    text = annotation.replace(" ", "").removeprefix("typing.")
    if text.startswith("tuple["):
        return "tuple"
    if "None" in text.split("|") or text.startswith(("Union[", "Optional[")):
        return "maybe"
    return "single"


def _children_source(names: tuple[str, ...], shapes: list[str]) -> tuple[str, str]:
    """The bodies of ``_children`` and ``_labels``: tuple segments joined with ``+``."""
    parts: list[str] = []
    labels: list[str] = []
    singles: list[str] = []

    def flush() -> None:
        if singles:
            parts.append("(" + "".join(f"self.{n}, " for n in singles).rstrip() + ")")
            labels.append(repr(tuple(singles)))
            singles.clear()

    for name, shape in zip(names, shapes):
        if shape == "single":
            singles.append(name)
            continue
        flush()
        if shape == "tuple":
            parts.append(f"self.{name}")
            labels.append(f"tuple(f'{name}[{{k}}]' for k in range(len(self.{name})))")
        else:
            parts.append(f"((self.{name},) if isinstance(self.{name}, _Node) else ())")
            labels.append(f"(({name!r},) if isinstance(self.{name}, _Node) else ())")
    flush()
    return " + ".join(parts) or "()", " + ".join(labels) or "()"


def _rebuild_source(cls: type, names: tuple[str, ...], shapes: list[str]) -> str:
    """The body of ``_rebuild(self, c)``: each child field taken from ``c`` in order."""
    lines: list[str] = []
    k, static, remaining = 0, True, None  # static: the next child's index is the constant k
    for name, shape in zip(names, shapes):
        here = str(k) if static else "i"
        if remaining is not None:  # after the tuple field: counted from the end
            lines.append(f"_{name} = c[{-remaining}]")
            remaining -= 1
        elif shape == "tuple":
            remaining = len(names) - names.index(name) - 1
            lines.append(f"_{name} = c[{here}:len(c) - {remaining}]")
        elif shape == "maybe":
            if static:
                lines.append(f"i = {k}")
                static = False
            lines += [f"if isinstance(self.{name}, _Node):", f"    _{name} = c[i]", "    i += 1",
                      "else:", f"    _{name} = self.{name}"]
        elif static:
            lines.append(f"_{name} = c[{k}]")
            k += 1
        else:
            lines += [f"_{name} = c[i]", "i += 1"]
    args = ", ".join(f"_{f.name}" if f.name in names else f"self.{f.name}" for f in fields(cls) if f.init)
    lines.append(f"return type(self)({args})")
    return "".join(f"    {line}\n" for line in lines)


def derive_traversal(cls: type, node_base: type) -> None:
    """Generate ``_children``/``_labels``/``_rebuild`` of the dataclass ``cls`` from its
    ``_child_fields`` (a method the class defines itself is kept). ``node_base``: the IR's node class
    (what a ``maybe`` child must be an instance of; the generated methods take its docstrings)."""
    names: tuple[str, ...] = cls._child_fields  # type: ignore[attr-defined]
    shapes = [_field_shape(cls, n) for n in names]
    tuple_at = [k for k, s in enumerate(shapes) if s == "tuple"]
    if len(tuple_at) > 1 or (tuple_at and any(s != "single" for s in shapes[tuple_at[0] + 1:])):
        raise TypeError(f"{cls.__name__}: unsupported child fields {names}")
    children, labels = _children_source(names, shapes)
    source = {
        "_children": f"def _children(self):\n    return {children}\n",
        "_labels": f"def _labels(self):\n    return {labels}\n",
        "_rebuild": "def _rebuild(self, c):\n" + _rebuild_source(cls, names, shapes),
    }
    for method, text in source.items():
        if method in cls.__dict__:
            continue
        namespace: dict[str, Any] = {}
        exec(text, {"_Node": node_base}, namespace)  # noqa: S102 - generated from field names, as dataclasses does
        fn = namespace[method]
        fn.__qualname__ = f"{cls.__qualname__}.{method}"
        fn.__doc__ = getattr(node_base, method, None).__doc__
        setattr(cls, method, fn)


__all__ = ["derive_traversal"]
