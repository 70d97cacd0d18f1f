"""Structural equality and hashing of Relay expressions, types and modules.

Two expressions are structurally equal when they have the same node kinds, operators, attributes,
call metadata, types and constant data, with variables matched by binding position: a bijection
between the variables of both sides is built where they are bound (function parameters, let
variables), and a use of a variable must agree with it. Variable name hints are ignored. Free
variables compare by identity, unless ``map_free_vars=True`` (then they too are matched up on
first use). Global variables compare by name. Constants are equal iff dtype, shape and raw bytes
are (so NaNs compare bitwise). Sharing need not match: a DAG equals its unfolded tree.

Attribute values compare exactly and by kind: ``1``, ``1.0`` and ``True`` differ, ``-0.0``
differs from ``0.0``, and every NaN equals every NaN.

Everything here is iterative (explicit stacks), so 20,000-call chains are fine.
:func:`structural_hash` is consistent with :func:`structural_equal` (equal => same hash) and
deterministic across processes.
"""

from __future__ import annotations

import hashlib
import math
import struct
from typing import Any, Iterable

import numpy as np

from plait.ir.attrs import Attrs
from plait.ir.op import Op
from plait.ir.types import Type
from plait.relay.expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Loop, Tuple, TupleGetItem, Var
from plait.relay.module import IRModule
from plait.relay.visitor import post_order

__all__ = ["assert_structural_equal", "attr_key", "structural_equal", "structural_hash"]


# ---- attribute values ---------------------------------------------------------------------


def _prim_func_ops(fn: Any) -> tuple[Any, Any] | None:
    """TIR's (structural_equal, structural_hash) when ``fn`` is a PrimFunc global, else None."""
    from plait.tir.stmt import PrimFunc

    if not isinstance(fn, PrimFunc):
        return None
    from plait.tir.equal import structural_equal as tir_equal, structural_hash as tir_hash

    return tir_equal, tir_hash


def attr_key(value: Any) -> Any:
    """A canonical, hashable key of an attribute value: equal keys <=> structurally equal values."""
    if value is None:
        return ("n",)
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("i", value)
    if isinstance(value, float):
        return ("f", "nan") if math.isnan(value) else ("f", struct.pack("<d", value).hex())
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, tuple):
        return ("t",) + tuple(attr_key(v) for v in value)
    raise TypeError(f"not an attribute value: {value!r}")


def _attrs_diff(a: Attrs, b: Attrs) -> tuple[str, str, str] | None:
    """None if equal, else (step, left, right) describing the first difference."""
    ka, kb = list(a), list(b)
    for k in sorted(set(ka) | set(kb)):
        if k not in a:
            return (f"[{k!r}]", "(absent)", repr(b[k]))
        if k not in b:
            return (f"[{k!r}]", repr(a[k]), "(absent)")
        if attr_key(a[k]) != attr_key(b[k]):
            return (f"[{k!r}]", repr(a[k]), repr(b[k]))
    return None


# ---- paths ------------------------------------------------------------------------------------

Path = Any  # None (root) or (parent_path, step)


def _render_path(root: str, path: Path) -> str:
    steps: list[str] = []
    while path is not None:
        path, step = path
        steps.append(step)
    steps.reverse()
    runs: list[tuple[str, int]] = []
    for s in steps:
        if runs and runs[-1][0] == s:
            runs[-1] = (s, runs[-1][1] + 1)
        else:
            runs.append((s, 1))
    parts = [s * n if n < 4 else f"({s})*{n}" for s, n in runs]
    if len(parts) > 16:
        parts = parts[:4] + [f"...({len(parts) - 12} more)..."] + parts[-8:]
    return root + "".join(parts)


class Mismatch(Exception):
    def __init__(self, path: Path, what: str, left: str, right: str):
        self.path, self.what, self.left, self.right = path, what, left, right


def _describe(e: Any) -> str:
    if isinstance(e, Expr):
        return repr(e)
    return str(e)


# ---- equality ---------------------------------------------------------------------------------


class _Equal:
    def __init__(self, map_free_vars: bool):
        self.map_free_vars = map_free_vars
        self.lmap: dict[Var, Var] = {}
        self.rmap: dict[Var, Var] = {}
        self.done: set[tuple[int, int]] = set()

    def bind(self, a: Var, b: Var, path: Path) -> None:
        self.types(a.type_annotation, b.type_annotation, (path, ".type_annotation"))
        old_b = self.lmap.pop(a, None)
        if old_b is not None:
            self.rmap.pop(old_b, None)
        old_a = self.rmap.pop(b, None)
        if old_a is not None:
            self.lmap.pop(old_a, None)
        self.lmap[a] = b
        self.rmap[b] = a

    def types(self, a: Type | None, b: Type | None, path: Path) -> None:
        if a != b:
            raise Mismatch(path, "types differ", str(a), str(b))

    def attrs(self, a: Attrs, b: Attrs, path: Path, what: str) -> None:
        d = _attrs_diff(a, b)
        if d is not None:
            raise Mismatch((path, d[0]), f"{what} differ", d[1], d[2])

    def var_use(self, a: Var, b: Var, path: Path) -> None:
        if a in self.lmap:
            if self.lmap[a] is not b:
                raise Mismatch(path, "variables differ", f"{a!r} (bound, maps to {self.lmap[a]!r})", repr(b))
            return
        if b in self.rmap:
            raise Mismatch(path, "variables differ", f"{a!r} (free)", f"{b!r} (bound)")
        if self.map_free_vars:
            self.bind(a, b, path)
        elif a is not b:
            raise Mismatch(path, "free variables differ", repr(a), repr(b))

    def exprs(self, a: Expr, b: Expr, path: Path) -> None:
        stack: list[tuple[Expr, Expr, Path]] = [(a, b, path)]
        while stack:
            a, b, path = stack.pop()
            key = (id(a), id(b))
            if key in self.done:
                continue
            self.done.add(key)
            if type(a) is not type(b):
                raise Mismatch(path, "node kinds differ", _describe(a), _describe(b))
            self.node(a, b, path, stack)

    def node(self, a: Any, b: Any, path: Path, stack: list) -> None:
        if isinstance(a, Var):
            self.var_use(a, b, path)
        elif isinstance(a, GlobalVar):
            if a.name != b.name:
                raise Mismatch(path, "global functions differ", "@" + a.name, "@" + b.name)
        elif isinstance(a, Constant):
            _constants(a, b, path)
        elif isinstance(a, Call):
            if isinstance(a.op, Op) or isinstance(b.op, Op):
                if a.op is not b.op:
                    raise Mismatch((path, ".op"), "callees differ", a.op_name, b.op_name)
            self.count(len(a.args), len(b.args), path, "numbers of arguments differ")
            self.attrs(a.attrs, b.attrs, (path, ".attrs"), "attributes")
            self.attrs(a.meta, b.meta, (path, ".meta"), "call metadata")
            for i in reversed(range(len(a.args))):
                stack.append((a.args[i], b.args[i], (path, f".args[{i}]")))
            if not isinstance(a.op, Op):
                stack.append((a.op, b.op, (path, ".op")))
        elif isinstance(a, Tuple):
            self.count(len(a.fields), len(b.fields), path, "numbers of tuple fields differ")
            for i in reversed(range(len(a.fields))):
                stack.append((a.fields[i], b.fields[i], (path, f".fields[{i}]")))
        elif isinstance(a, TupleGetItem):
            if a.index != b.index:
                raise Mismatch((path, ".index"), "tuple indices differ", str(a.index), str(b.index))
            stack.append((a.tuple_value, b.tuple_value, (path, ".tuple_value")))
        elif isinstance(a, Let):
            self.bind(a.var, b.var, (path, ".var"))
            stack.append((a.body, b.body, (path, ".body")))
            stack.append((a.value, b.value, (path, ".value")))
        elif isinstance(a, If):
            stack.append((a.false_branch, b.false_branch, (path, ".false_branch")))
            stack.append((a.true_branch, b.true_branch, (path, ".true_branch")))
            stack.append((a.cond, b.cond, (path, ".cond")))
        elif isinstance(a, Loop):
            if a.num_scan != b.num_scan:
                raise Mismatch((path, ".num_scan"), "loop scan counts differ", str(a.num_scan), str(b.num_scan))
            ka, kb = a._labels(), b._labels()
            if ka != kb:
                raise Mismatch(path, "loop operands differ", ", ".join(ka), ", ".join(kb))
            for label, ca, cb in reversed(list(zip(ka, a._children(), b._children()))):
                stack.append((ca, cb, (path, f".{label}")))
        elif isinstance(a, Function):
            self.count(len(a.params), len(b.params), path, "numbers of parameters differ")
            for i, (pa, pb) in enumerate(zip(a.params, b.params)):
                self.bind(pa, pb, (path, f".params[{i}]"))
            self.types(a.ret_type, b.ret_type, (path, ".ret_type"))
            self.attrs(a.attrs, b.attrs, (path, ".attrs"), "function attributes")
            stack.append((a.body, b.body, (path, ".body")))
        else:  # pragma: no cover - all node kinds are handled above
            raise TypeError(f"not a Relay expression: {a!r}")

    @staticmethod
    def count(na: int, nb: int, path: Path, what: str) -> None:
        if na != nb:
            raise Mismatch(path, what, str(na), str(nb))

    def modules(self, a: IRModule, b: IRModule) -> None:
        for name in sorted(set(a) | set(b)):
            if name not in b:
                raise Mismatch(None, "functions differ", f"@{name}", "(absent)")
            if name not in a:
                raise Mismatch(None, "functions differ", "(absent)", f"@{name}")
        self.attrs(a.attrs, b.attrs, (None, "attrs"), "module attributes")
        for name in a:
            fa, fb = a[name], b[name]
            if isinstance(fa, Expr) and isinstance(fb, Expr):
                self.exprs(fa, fb, (None, _global_step(name)))
            elif type(fa) is not type(fb):
                raise Mismatch((None, _global_step(name)), "functions differ", repr(fa), repr(fb))
            else:  # other function kinds: TIR PrimFuncs compare structurally, others with ==
                ops = _prim_func_ops(fa)
                same = ops[0](fa, fb) if ops is not None else fa == fb
                if not same:
                    raise Mismatch((None, _global_step(name)), "functions differ", repr(fa), repr(fb))


def _global_step(name: str) -> str:
    from plait.relay.text_lex import name_text

    return name_text("@", name)


def _constants(a: Constant, b: Constant, path: Path) -> None:
    da, db = a.data, b.data
    if da.dtype != db.dtype:
        raise Mismatch(path, "constant dtypes differ", str(da.dtype), str(db.dtype))
    if da.shape != db.shape:
        raise Mismatch(path, "constant shapes differ", str(da.shape), str(db.shape))
    ba, bb = _le_bytes(da), _le_bytes(db)
    if ba != bb:
        diff = np.frombuffer(ba, np.uint8) != np.frombuffer(bb, np.uint8)
        first = int(np.flatnonzero(diff)[0]) // da.dtype.itemsize
        idx = tuple(int(j) for j in np.unravel_index(first, da.shape)) if da.shape else ()
        flat_a, flat_b = da.reshape(-1), db.reshape(-1)
        raise Mismatch(path, f"constant data differ at index {idx}",
                       repr(flat_a[first].item()), repr(flat_b[first].item()))


def _le_bytes(arr: np.ndarray) -> bytes:
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()


def _compare(a: Any, b: Any, map_free_vars: bool) -> tuple[str, Mismatch] | None:
    eq = _Equal(map_free_vars)
    try:
        if isinstance(a, IRModule) or isinstance(b, IRModule):
            if not (isinstance(a, IRModule) and isinstance(b, IRModule)):
                raise Mismatch(None, "kinds differ", type(a).__name__, type(b).__name__)
            eq.modules(a, b)
            return None
        if isinstance(a, Expr) and isinstance(b, Expr):
            eq.exprs(a, b, None)
            return None
        if isinstance(a, Type) and isinstance(b, Type):
            eq.types(a, b, None)
            return None
        raise Mismatch(None, "kinds differ", type(a).__name__, type(b).__name__)
    except Mismatch as m:
        return ("" if isinstance(a, IRModule) else "root"), m


def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """Are ``a`` and ``b`` (expressions, types or modules) structurally equal? See the module doc."""
    return _compare(a, b, map_free_vars) is None


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> None:
    """Raise AssertionError naming the path of the first difference and both sides."""
    res = _compare(a, b, map_free_vars)
    if res is not None:
        root, m = res
        where = _render_path(root, m.path) or "module"
        raise AssertionError(f"structurally different at {where}: {m.what}: {m.left} vs {m.right}")


# ---- hashing -----------------------------------------------------------------------------------


def _h(*parts: Any) -> bytes:
    chunks: list[bytes] = []
    for p in parts:
        if not isinstance(p, bytes):
            p = (p if isinstance(p, str) else repr(p)).encode("utf-8", "surrogatepass")
        chunks.append(len(p).to_bytes(8, "little"))
        chunks.append(p)
    return hashlib.blake2b(b"".join(chunks), digest_size=16).digest()


def _attrs_bytes(a: Attrs) -> bytes:
    if not a:
        return b""
    return _h(*(repr((k, attr_key(v))) for k, v in a.items()))


def _expr_digest(root: Expr, map_free_vars: bool) -> bytes:
    binder: dict[Var, str] = {}
    nodes = list(post_order(root))
    for n in nodes:
        if isinstance(n, Function):
            for i, p in enumerate(n.params):
                binder.setdefault(p, f"param{i}")
        elif isinstance(n, Let):
            binder.setdefault(n.var, "let")
    memo: dict[int, bytes] = {}
    for n in nodes:
        memo[id(n)] = _node_digest(n, memo, binder, map_free_vars)
    return memo[id(root)]


def _node_digest(n: Expr, memo: dict[int, bytes], binder: dict[Var, str], map_free_vars: bool) -> bytes:
    if isinstance(n, Var):
        t = str(n.type_annotation)
        if n in binder:
            return _h("var", binder[n], t)
        return _h("freevar", t) if map_free_vars else _h("freevar", t, n.name_hint)
    if isinstance(n, GlobalVar):
        return _h("global", n.name)
    if isinstance(n, Constant):
        return _h("const", str(n.data.dtype), repr(n.data.shape), _le_bytes(n.data))
    if isinstance(n, Call):
        op = _h("op", n.op.name) if isinstance(n.op, Op) else memo[id(n.op)]
        return _h("call", op, *(memo[id(a)] for a in n.args), _attrs_bytes(n.attrs), _attrs_bytes(n.meta))
    if isinstance(n, Tuple):
        return _h("tuple", *(memo[id(f)] for f in n.fields))
    if isinstance(n, TupleGetItem):
        return _h("getitem", n.index, memo[id(n.tuple_value)])
    if isinstance(n, Let):
        return _h("let", memo[id(n.var)], memo[id(n.value)], memo[id(n.body)])
    if isinstance(n, If):
        return _h("if", memo[id(n.cond)], memo[id(n.true_branch)], memo[id(n.false_branch)])
    if isinstance(n, Loop):
        return _h("loop", n.num_scan, *n._labels(), *(memo[id(c)] for c in n._children()))
    if isinstance(n, Function):
        return _h("fn", *(memo[id(p)] for p in n.params), str(n.ret_type), _attrs_bytes(n.attrs),
                  memo[id(n.body)])
    raise TypeError(f"not a Relay expression: {n!r}")


def _foreign_digest(fn: Any) -> bytes:
    ops = _prim_func_ops(fn)
    if ops is not None:
        return _h("foreign", type(fn).__name__, str(ops[1](fn)))
    return _h("foreign", type(fn).__name__)


def structural_hash(x: Any, map_free_vars: bool = False) -> int:
    """A 64-bit hash consistent with :func:`structural_equal` (and the same in every process)."""
    if isinstance(x, IRModule):
        parts: Iterable[Any] = [_attrs_bytes(x.attrs)] + [
            _h(name, _expr_digest(fn, map_free_vars) if isinstance(fn, Expr) else _foreign_digest(fn))
            for name, fn in x.items()]
        d = _h("module", *parts)
    elif isinstance(x, Expr):
        d = _expr_digest(x, map_free_vars)
    elif isinstance(x, Type):
        d = _h("type", str(x))
    else:
        raise TypeError(f"structural_hash: expected an expression, type or module, got {type(x).__name__}")
    return int.from_bytes(d[:8], "little")
