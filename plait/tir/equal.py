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

from plait.tir.expr import AddressOf, BufferLoad, Call, FloatImm, IntImm, Let, PrimExpr, TIRNode, Var
from plait.tir.stmt import Allocate, AssertStmt, Buffer, BufferStore, For, IfThenElse, LetStmt, PrimFunc, SeqStmt

_Path = Any  # nested tuples (parent, label), formatted on failure only
_DONE = ("done",)  # stack marker: the pair's subtrees are all equal


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
        self.extra: list[tuple[Any, Any, _Path]] = []
        self.equal_pairs: set[tuple[Any, Any]] = set()

    def run(self, a: Any, b: Any) -> tuple[str, str] | None:
        """None if equal, else (path, reason) of the first difference (pre-order, left to right)."""
        self.stack = [(a, b, (None, type(a).__name__))]
        while self.stack:
            x, y, path = self.stack.pop()
            if path is _DONE:  # every pair under (x, y) compared equal
                self.equal_pairs.add((x, y))
                continue
            if (x, y) in self.equal_pairs:
                continue  # a shared subexpression compared before, under the same bindings
            if isinstance(x, PrimExpr) and not isinstance(x, Var):
                self.stack.append((x, y, _DONE))
            self.extra: list[tuple[Any, Any, _Path]] = []
            reason = self.local(x, y, path)
            if reason is not None:
                return _format_path(path), reason
            if isinstance(x, TIRNode) and not isinstance(x, Buffer):
                kx, ky = x._children(), y._children()
                labels = x._labels()
                for k in range(len(kx) - 1, -1, -1):
                    self.stack.append((kx[k], ky[k], (path, labels[k])))
            self.stack.extend(reversed(self.extra))  # buffer shapes: compared before the children
        return None

    # -- binding ---------------------------------------------------------------------------------
    def bind_var(self, a: Var, b: Var) -> str | None:
        if a.dtype != b.dtype:
            return f"variables '{a.name}' and '{b.name}' have different dtypes: {a.dtype} vs {b.dtype}"
        if self.vmap.get(a, b) is not b or self.vrev.get(b, a) is not a:
            self.equal_pairs.clear()  # a variable is rebound: earlier results may not hold any more
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
        self.extra.extend((a.shape[k], b.shape[k], (path, f"shape[{k}]")) for k in range(a.ndim))
        if self.bmap.get(a, b) is not b or self.brev.get(b, a) is not a:
            self.equal_pairs.clear()
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
        if isinstance(x, AssertStmt):
            return None if x.status == y.status else f"assert status {x.status} vs {y.status}"
        if isinstance(x, PrimFunc):
            return self.local_func(x, y, path)
        return None  # operators: children and dtype say everything (Cast: dtype compared above)

    def local_func(self, x: PrimFunc, y: PrimFunc, path: _Path) -> str | None:
        if len(x.params) != len(y.params):
            return f"{len(x.params)} vs {len(y.params)} parameters"
        if x.attrs != y.attrs:
            return f"attrs {dict(x.attrs)} vs {dict(y.attrs)}"
        for k in range(len(x.params)):
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
    """A hash consistent with ``structural_equal(..., map_free_vars=True)`` on verified IR, stable
    across runs. Computed bottom-up once per node object, so shared subexpressions cost nothing.

    A bound variable hashes as where it is bound (parameter position, or its binder's kind and
    the hash of the loop bounds / let value); a free variable hashes as its dtype only.
    """
    memo: dict[Any, bytes] = {}
    sig: dict[Any, bytes] = {}

    def digest(*parts: Any) -> bytes:
        h = hashlib.blake2b(digest_size=8)
        for part in parts:
            h.update(part if isinstance(part, bytes) else str(part).encode())
            h.update(b"|")
        return h.digest()

    def buffer_sig(b: Buffer) -> bytes:
        if b not in sig:
            # a buffer only reached through its loads: its shape dims may not have been visited
            sig[b] = digest("freebuf", b.dtype, b.scope,
                            *(memo[d] if d in memo else digest("dim", structural_hash(d)) for d in b.shape))
        return sig[b]

    def local(n: Any) -> bytes:
        kids = [memo[c] for c in n._children()]
        parts: list[Any] = [type(n).__name__, getattr(n, "dtype", "")]
        if isinstance(n, Var):
            parts.append(sig.get(n, b"free"))
        elif isinstance(n, IntImm):
            parts.append(n.value)
        elif isinstance(n, FloatImm):
            parts.append("nan" if math.isnan(n.value) else repr(n.value))
        elif isinstance(n, Call):
            parts += [n.name, n.kind]
        elif isinstance(n, For):
            parts += [n.kind, repr(n.annotations)]
        elif isinstance(n, PrimFunc):
            parts.append(repr(n.attrs))
            parts += [sig[p] for p in n.params]
        elif isinstance(n, IfThenElse):
            parts.append(n.else_case is None)
        elif isinstance(n, AssertStmt):
            parts.append(n.status)
        buffer = getattr(n, "buffer", None)
        if isinstance(buffer, Buffer):
            parts.append(buffer_sig(buffer))
        return digest(*parts, len(kids), *kids)

    def shape_work(b: Buffer) -> list[tuple[int, Any]]:
        return [(0, d) for d in b.shape]

    work: list[tuple[int, Any]] = [(0, node)]  # 0 visit, 1 finish, 2 bind
    if isinstance(node, PrimFunc):
        for k, p in enumerate(node.params):
            if isinstance(p, Var):
                sig[p] = digest("param", k, p.dtype)
        work = [(0, node)] + [w for p in node.params if isinstance(p, Buffer) for w in shape_work(p)]
    elif isinstance(node, Buffer):
        work = [(1, node)] + shape_work(node)
    while work:
        op, n = work.pop()
        if op == 0:
            if n in memo:
                continue
            if isinstance(n, PrimFunc):
                for k, p in enumerate(n.params):
                    if isinstance(p, Buffer):
                        sig[p] = digest("parambuf", k, p.dtype, p.scope, *(memo[d] for d in p.shape))
            kids = n._children()
            if isinstance(n, (For, Let, LetStmt, Allocate)):
                work += [(1, n), (0, kids[-1]), (2, n)] + [(0, c) for c in reversed(kids[:-1])]
                if isinstance(n, Allocate):
                    work += shape_work(n.buffer)
            else:
                work.append((1, n))
                work.extend((0, c) for c in reversed(kids))
        elif op == 2:
            if isinstance(n, For):
                sig[n.loop_var] = digest("loop", n.loop_var.dtype, memo[n.min], memo[n.extent])
            elif isinstance(n, Allocate):
                b = n.buffer
                sig[b] = digest("alloc", b.dtype, b.scope, *(memo[d] for d in b.shape))
            else:
                sig[n.var] = digest("let", n.var.dtype, memo[n.value])
        elif n not in memo:
            memo[n] = buffer_sig(n) if isinstance(n, Buffer) else local(n)
    return int.from_bytes(memo[node], "little")
