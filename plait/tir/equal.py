"""Structural equality and hashing of TIR.

Two trees are structurally equal when they have the same shape, the same immediates, dtypes,
names of calls, loop kinds, annotations and attributes, and their variables and buffers correspond
*by binding*: loop variables, let variables, parameters and allocated buffers are matched where
they are bound, names are ignored. Variables and buffers that are not bound inside the compared
trees must be the same objects, unless ``map_free_vars=True`` (then they are matched on first use).

Iterative: expressions thousands deep are fine.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from plait.tir.expr import AddressOf, BufferLoad, Call, FloatImm, IntImm, Let, TIRNode, Var
from plait.tir.stmt import Allocate, Buffer, BufferStore, For, IfThenElse, LetStmt, PrimFunc, SeqStmt

_Path = Any  # nested tuples (parent, label), formatted on failure only


def _format_path(path: _Path) -> str:
    labels: list[str] = []
    while path is not None:
        path, label = path
        labels.append(label)
    out = ""
    for label in reversed(labels):
        out += label if not out or label.startswith("[") else "." + label
    return out


def _describe(n: Any) -> str:
    if isinstance(n, Buffer):
        return f"buffer '{n.name}'"
    text = str(n).split("\n")[0]
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(n).__name__} `{text}`"


def _floats_equal(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


class _Equal:
    def __init__(self, map_free_vars: bool):
        self.map_free = map_free_vars
        self.vmap: dict[Var, Var] = {}
        self.vrev: dict[Var, Var] = {}
        self.bmap: dict[Buffer, Buffer] = {}
        self.brev: dict[Buffer, Buffer] = {}
        self.stack: list[tuple[Any, Any, _Path]] = []

    def run(self, a: Any, b: Any) -> tuple[str, str] | None:
        """None if equal, else (path, reason) of the first difference (pre-order, left to right)."""
        self.stack = [(a, b, (None, type(a).__name__))]
        while self.stack:
            x, y, path = self.stack.pop()
            reason = self.local(x, y, path)
            if reason is not None:
                return _format_path(path), reason
            if isinstance(x, TIRNode) and not isinstance(x, Buffer):
                kx, ky = x._children(), y._children()
                labels = x._labels()
                for k in range(len(kx) - 1, -1, -1):
                    self.stack.append((kx[k], ky[k], (path, labels[k])))
        return None

    # -- binding ---------------------------------------------------------------------------------
    def bind_var(self, a: Var, b: Var) -> str | None:
        if a.dtype != b.dtype:
            return f"variables '{a.name}' and '{b.name}' have different dtypes: {a.dtype} vs {b.dtype}"
        self.vmap[a], self.vrev[b] = b, a
        return None

    def use_var(self, a: Var, b: Var) -> str | None:
        if a in self.vmap:
            ok = self.vmap[a] is b and self.vrev.get(b) is a
        elif b in self.vrev:
            ok = False
        elif self.map_free:
            return self.bind_var(a, b)
        else:
            ok = a is b
        return None if ok else f"variable '{a.name}' does not correspond to variable '{b.name}'"

    def bind_buffer(self, a: Buffer, b: Buffer, path: _Path) -> str | None:
        for what in ("dtype", "scope"):
            if getattr(a, what) != getattr(b, what):
                return f"buffers '{a.name}' and '{b.name}' differ in {what}: {getattr(a, what)} vs {getattr(b, what)}"
        if a.ndim != b.ndim:
            return f"buffers '{a.name}' and '{b.name}' differ in rank: {a.ndim} vs {b.ndim}"
        for k in range(a.ndim - 1, -1, -1):
            self.stack.append((a.shape[k], b.shape[k], (path, f"shape[{k}]")))
        self.bmap[a], self.brev[b] = b, a
        return None

    def use_buffer(self, a: Buffer, b: Buffer, path: _Path) -> str | None:
        if a in self.bmap:
            ok = self.bmap[a] is b and self.brev.get(b) is a
        elif b in self.brev:
            ok = False
        elif self.map_free:
            return self.bind_buffer(a, b, (path, "buffer"))
        else:
            ok = a is b
        return None if ok else f"buffer '{a.name}' does not correspond to buffer '{b.name}'"

    # -- one node pair ---------------------------------------------------------------------------
    def local(self, x: Any, y: Any, path: _Path) -> str | None:  # noqa: C901 - one case per node kind
        if type(x) is not type(y):
            return f"{_describe(x)} vs {_describe(y)}"
        if isinstance(x, Var):
            return self.use_var(x, y)
        if isinstance(x, Buffer):
            return self.use_buffer(x, y, path)
        if getattr(x, "dtype", None) != getattr(y, "dtype", None):
            return f"dtype {x.dtype} vs {y.dtype}: {_describe(x)} vs {_describe(y)}"
        if isinstance(x, IntImm):
            return None if x.value == y.value else f"{_describe(x)} vs {_describe(y)}"
        if isinstance(x, FloatImm):
            return None if _floats_equal(x.value, y.value) else f"{_describe(x)} vs {_describe(y)}"
        if isinstance(x, Call):
            if (x.name, x.kind, len(x.args)) != (y.name, y.kind, len(y.args)):
                return f"{_describe(x)} vs {_describe(y)}"
            return None
        if isinstance(x, (BufferLoad, AddressOf, BufferStore)):
            if len(x.indices) != len(y.indices):
                return f"{len(x.indices)} vs {len(y.indices)} indices"
            return self.use_buffer(x.buffer, y.buffer, path)
        if isinstance(x, (Let, LetStmt)):
            return self.bind_var(x.var, y.var)
        if isinstance(x, For):
            if x.kind != y.kind:
                return f"loop kind {x.kind} vs {y.kind}"
            if x.annotations != y.annotations:
                return f"loop annotations {dict(x.annotations)} vs {dict(y.annotations)}"
            return self.bind_var(x.loop_var, y.loop_var)
        if isinstance(x, Allocate):
            return self.bind_buffer(x.buffer, y.buffer, (path, "buffer"))
        if isinstance(x, SeqStmt):
            return None if len(x.stmts) == len(y.stmts) else f"{len(x.stmts)} vs {len(y.stmts)} statements"
        if isinstance(x, IfThenElse):
            if (x.else_case is None) != (y.else_case is None):
                return "one if has an else branch, the other has not"
            return None
        if isinstance(x, PrimFunc):
            return self.local_func(x, y, path)
        return None  # operators: children and dtype say everything (Cast: dtype compared above)

    def local_func(self, x: PrimFunc, y: PrimFunc, path: _Path) -> str | None:
        if len(x.params) != len(y.params):
            return f"{len(x.params)} vs {len(y.params)} parameters"
        if x.attrs != y.attrs:
            return f"attrs {dict(x.attrs)} vs {dict(y.attrs)}"
        for k in range(len(x.params) - 1, -1, -1):
            p, q = x.params[k], y.params[k]
            if type(p) is not type(q):
                return f"parameter {k}: {_describe(p)} vs {_describe(q)}"
            r = self.bind_var(p, q) if isinstance(p, Var) else self.bind_buffer(p, q, (path, f"params[{k}]"))
            if r is not None:
                return f"parameter {k}: {r}"
        return None


def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """True if ``a`` and ``b`` (expressions, statements, buffers or PrimFuncs) are structurally equal."""
    return _Equal(map_free_vars).run(a, b) is None


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> None:
    """Raise AssertionError naming the path to the first difference and what differs."""
    r = _Equal(map_free_vars).run(a, b)
    if r is not None:
        path, reason = r
        raise AssertionError(f"structural mismatch at {path}: {reason}")


def structural_hash(node: Any) -> int:
    """A hash consistent with ``structural_equal(..., map_free_vars=True)``, stable across runs."""
    h = hashlib.blake2b(digest_size=8)
    var_ids: dict[Var, int] = {}
    buf_ids: dict[Buffer, int] = {}

    def buf_token(b: Buffer) -> str:
        if b not in buf_ids:
            buf_ids[b] = len(buf_ids)
            stack.extend(reversed(b.shape))
        return f"B{buf_ids[b]}:{b.dtype}:{b.scope}:{b.ndim}"

    stack: list[Any] = [node]
    if isinstance(node, PrimFunc):
        for p in node.params:
            if isinstance(p, Var):
                var_ids[p] = len(var_ids)
    while stack:
        n = stack.pop()
        parts = [type(n).__name__, str(getattr(n, "dtype", ""))]
        if isinstance(n, Var):
            parts.append(str(var_ids.setdefault(n, len(var_ids))))
        elif isinstance(n, IntImm):
            parts.append(str(n.value))
        elif isinstance(n, FloatImm):
            parts.append("nan" if math.isnan(n.value) else repr(n.value))
        elif isinstance(n, Call):
            parts += [n.name, n.kind, str(len(n.args))]
        elif isinstance(n, For):
            var_ids[n.loop_var] = len(var_ids)
            parts += [n.kind, repr(n.annotations), n.loop_var.dtype]
        elif isinstance(n, (Let, LetStmt)):
            var_ids[n.var] = len(var_ids)
            parts.append(n.var.dtype)
        elif isinstance(n, PrimFunc):
            parts += [repr(n.attrs)] + [buf_token(p) if isinstance(p, Buffer) else f"V:{p.dtype}" for p in n.params]
        elif isinstance(n, Buffer):
            parts.append(buf_token(n))
        elif isinstance(n, SeqStmt):
            parts.append(str(len(n.stmts)))
        elif isinstance(n, IfThenElse):
            parts.append(str(n.else_case is None))
        buffer = getattr(n, "buffer", None)
        if isinstance(buffer, Buffer):
            parts.append(buf_token(buffer))
        h.update(("|".join(parts) + ";").encode())
        if isinstance(n, TIRNode) and not isinstance(n, Buffer):
            stack.extend(reversed(n._children()))
    return int.from_bytes(h.digest(), "little")
