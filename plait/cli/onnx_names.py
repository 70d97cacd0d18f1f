"""``plait ops NAME`` for an ONNX operator name: which plait operators its converter builds.

The converter table (:mod:`plait.frontend.onnx_registry`) maps an ONNX ``op_type`` to a function, not
to operator names, so the names are read from the converter's source: the entry for ``op_type`` in a
table of its module (``_UNARY["Relu"] == "nn.relu"``), else the operator names the converter, the
helpers of its module and the ``NodeContext`` methods it calls write as string literals (in the order
they appear; some are built only for some attributes or shapes, e.g. ``squeeze`` for a 1-D Conv).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any, Callable


def onnx_op_types() -> list[str]:
    """The ONNX operator names plait imports, sorted."""
    from plait.frontend.onnx_registry import load_converters

    return sorted(load_converters())


def imports_to(op_type: str) -> list[str]:
    """The plait operators the converter of ONNX ``op_type`` builds (see the module docstring); [] when
    it builds none by name (Identity, Constant, Reshape of a constant shape...)."""
    from plait.frontend.onnx_registry import load_converters
    from plait.op import list_ops

    ops = set(list_ops())
    fn = load_converters()[op_type].fn
    module = inspect.getmodule(fn)
    for value in vars(module).values() if module is not None else ():
        if isinstance(value, dict) and op_type in value:
            entry = value[op_type]
            name = entry[0] if isinstance(entry, tuple) and entry else entry
            if isinstance(name, str) and name in ops:
                return [name]
    found: list[str] = []
    _scan(fn, ops, found, set(), 0)
    return found


def _scan(fn: Callable[..., Any], ops: set[str], found: list[str], seen: set, depth: int) -> None:
    """Add to ``found`` the operator names written in ``fn``'s source, then those of the same-module
    functions and NodeContext methods it calls (to depth 3)."""
    from plait.frontend.onnx_node import NodeContext

    if fn in seen:
        return
    seen.add(fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return
    callees: list[Callable[..., Any]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ops:
            if node.value not in found:
                found.append(node.value)
        elif depth < 3 and isinstance(node, ast.Call):
            f = node.func
            callee = None
            if isinstance(f, ast.Name):
                g = fn.__globals__.get(f.id)
                if inspect.isfunction(g) and g.__module__ == fn.__module__:
                    callee = g
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "cx":
                callee = getattr(NodeContext, f.attr, None)
                callee = callee if inspect.isfunction(callee) and f.attr != "call" else None
            if callee is not None:
                callees.append(callee)
    for callee in callees:
        _scan(callee, ops, found, seen, depth + 1)
