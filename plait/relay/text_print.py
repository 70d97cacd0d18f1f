"""Relay text printer. See docs/text-format.md for the format.

Layout. Every non-atomic node (call, tuple, tuple item, if, function, let, shared constant) is
bound to a numbered temporary ``%N = ...;`` line in the innermost block (function body, if
branch, braced let) that encloses all its uses, so a line nests only atoms and a 20,000-call
chain prints as 20,000 short lines. Exceptions, printed in place: a block's result expression and
a let's value when they are used exactly once. A let in result position continues its block
(``let %x = ...;`` lines); elsewhere it is a braced block ``{ let %x = ...; ... }``.

Names. Variables print as their name hint, quoted when not identifier-like, suffixed ``_1``,
``_2``... when distinct variables share a hint within a def. Temporaries are numbered per def in
text order. Large constants (> 16 elements) print as ``meta[constant][i]`` references to a side
table, numbered module-wide in text order. Nothing depends on dict order or hashes, so the output
is byte-deterministic.
"""

from __future__ import annotations

import base64
from typing import Any, Iterable

import numpy as np

from plait.errors import PlaitError
from plait.ir.base import BaseFunc
from plait.ir.attrs import Attrs
from plait.ir.op import Op
from plait.ir.types import FuncType, TensorType, TupleType, Type
from plait.relay.expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Loop, Tuple, TupleGetItem, Var
from plait.relay.module import IRModule
from plait.relay.text_lex import key_text, name_text, quote
from plait.relay.visitor import post_order

VERSION = "0.1"

def foreign_function_text(name: str, fn: BaseFunc) -> str:
    """The text of a module global that is not a Relay function: a TIR PrimFunc's ``primfn`` block."""
    from plait.tir.stmt import PrimFunc

    if isinstance(fn, PrimFunc):
        from plait.relay.text_primfn import print_block

        return print_block(name, fn).rstrip("\n")
    raise PlaitError(f"cannot print global {name_text('@', name)}: no text printer for {type(fn).__name__}")


INLINE_CONSTANT_LIMIT = 16
INDENT = "  "

# ---- types, attribute values, constants --------------------------------------------------


def type_text(t: Type) -> str:
    if isinstance(t, TensorType):
        dims = ", ".join(str(d) for d in t.shape)
        return f"Tensor[({dims}{',' if len(t.shape) == 1 else ''}), {t.dtype}]"
    if isinstance(t, TupleType):
        fields = ", ".join(type_text(f) for f in t.fields)
        return f"({fields}{',' if len(t.fields) == 1 else ''})"
    if isinstance(t, FuncType):
        return f"fn ({', '.join(type_text(a) for a in t.arg_types)}) -> {type_text(t.ret_type)}"
    raise TypeError(f"cannot print type {t!r}")


def value_text(v: Any) -> str:
    """An attribute value: None, True/False, ints, floats (repr: exact), strings, [lists]."""
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(value_text(x) for x in v) + "]"
    raise TypeError(f"cannot print attribute value {v!r}")


def attrs_text(a: Attrs, order: Iterable[str] | None = None) -> str:
    keys = list(order) if order is not None else list(a)
    return ", ".join(f"{key_text(k)}={value_text(a[k])}" for k in keys)


def float_from_text(s: str, dtype: str) -> np.ndarray:
    """How the parser turns a float token into an element: via float64, rounded once to dtype."""
    return np.array([float(s)], dtype=np.float64).astype(dtype)


def _float_text(x: np.generic, dtype: str) -> str | None:
    """Decimal text of a float element that parses back to the same bits; None if impossible."""
    bits = np.array([x]).view(f"u{x.itemsize}")[0]
    if np.isnan(x):
        canonical = np.array([np.nan], dtype=dtype).view(f"u{x.itemsize}")[0]
        return "nan" if bits == canonical else None
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    for s in (str(x), repr(float(x))):  # shortest for the dtype first, exact float64 repr second
        if float_from_text(s, dtype).view(f"u{x.itemsize}")[0] == bits:
            return s
    return None  # pragma: no cover - repr(float) of a float16/32/64 value is always exact


def shape_text(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def raw_bytes(arr: np.ndarray) -> bytes:
    return np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()


def constant_text(c: Constant, inline_values: bool = True) -> str:
    """``const(dtype, shape, [values])``, or ``const(dtype, shape, base64"...")`` for raw bytes."""
    arr = c.data
    dtype = arr.dtype.name
    head = f"const({dtype}, {shape_text(arr.shape)}, "
    if inline_values:
        flat = arr.reshape(-1)
        if arr.dtype.kind == "f":
            vals = [_float_text(x, dtype) for x in flat]
            if all(v is not None for v in vals):
                return head + "[" + ", ".join(vals) + "])"  # type: ignore[arg-type]
        else:
            return head + "[" + ", ".join(repr(v) for v in flat.tolist()) + "])"
    return head + "base64" + quote(base64.b64encode(raw_bytes(arr)).decode("ascii")) + ")"


# ---- printer ----------------------------------------------------------------------------------


class _Scope:
    __slots__ = ("parent", "depth")

    def __init__(self, parent: "_Scope | None"):
        self.parent = parent
        self.depth = 0 if parent is None else parent.depth + 1


def _lca(a: _Scope, b: _Scope) -> _Scope:
    while a.depth > b.depth:
        a = a.parent  # type: ignore[assignment]
    while b.depth > a.depth:
        b = b.parent  # type: ignore[assignment]
    while a is not b:
        a, b = a.parent, b.parent  # type: ignore[assignment]
    return a


_TAIL_SLOTS = ("letbody", "then", "else", "fnbody")


def _slots(n: Expr) -> list[tuple[Expr, str]]:
    if isinstance(n, Call):
        head = [(n.op, "plain")] if isinstance(n.op, Expr) else []
        return head + [(a, "plain") for a in n.args]
    if isinstance(n, Tuple):
        return [(f, "plain") for f in n.fields]
    if isinstance(n, TupleGetItem):
        return [(n.tuple_value, "plain")]
    if isinstance(n, Let):
        return [(n.value, "letval"), (n.body, "letbody")]
    if isinstance(n, If):
        return [(n.cond, "plain"), (n.true_branch, "then"), (n.false_branch, "else")]
    if isinstance(n, Loop):
        return [(c, "plain") for c in n._children()]
    if isinstance(n, Function):
        return [(n.body, "fnbody")]
    return []


class RelayPrinter:
    def __init__(self, inline_limit: int = INLINE_CONSTANT_LIMIT):
        self.inline_limit = inline_limit
        self.meta: list[Constant] = []
        self.meta_index: dict[Constant, int] = {}

    # -- per-def state -----------------------------------------------------------------------
    def begin(self) -> None:
        self.var_names: dict[Var, str] = {}
        self.used_names: set[str] = set()
        self.temps: dict[Expr, int] = {}
        self.counter = 0
        self.mode: dict[Expr, str] = {}
        self.scope: dict[Expr, _Scope] = {}
        self.sub: dict[Expr, tuple[_Scope, ...]] = {}

    def var_text(self, v: Var) -> str:
        name = self.var_names.get(v)
        if name is None:
            name = hint = v.name_hint
            i = 0
            while name in self.used_names:
                i += 1
                name = f"{hint}_{i}"
            self.used_names.add(name)
            self.var_names[v] = name
        return name_text("%", name)

    def binder_text(self, v: Var) -> str:
        s = self.var_text(v)
        return s if v.type_annotation is None else f"{s}: {type_text(v.type_annotation)}"

    def is_large(self, c: Constant) -> bool:
        return c.data.size > self.inline_limit

    # -- analysis: mode and scope of every node ----------------------------------------------
    def analyze(self, tail: Expr, root: _Scope) -> None:
        order = list(post_order(tail))
        uses: dict[Expr, list[tuple[Expr, str]]] = {}
        for p in order:
            for c, slot in _slots(p):
                if not isinstance(c, (Var, GlobalVar)):
                    uses.setdefault(c, []).append((p, slot))
        mode, scope, sub = self.mode, self.scope, self.sub
        for n in reversed(order):  # parents before children
            if isinstance(n, (Var, GlobalVar)):
                continue
            if n is tail:
                s, m = root, "tail"
            else:
                us = uses[n]
                s = None
                for p, slot in us:
                    ps = self.slot_scope(p, slot)
                    s = ps if s is None else _lca(s, ps)
                if isinstance(n, Constant):
                    m = "atom" if len(us) == 1 or self.is_large(n) else "bound"
                elif len(us) == 1 and us[0][1] in _TAIL_SLOTS:
                    m = "tail"
                elif len(us) == 1 and us[0][1] == "letval":
                    m = "inline"
                else:
                    m = "bound"
            if isinstance(n, Constant) and self.is_large(n):
                m = "atom"
            mode[n], scope[n] = m, s  # type: ignore[assignment]
            if isinstance(n, Function):
                sub[n] = (_Scope(s),)
            elif isinstance(n, If):
                sub[n] = (_Scope(s), _Scope(s))
            elif isinstance(n, Let):
                sub[n] = (s,) if m == "tail" else (_Scope(s),)  # type: ignore[assignment]

    def slot_scope(self, p: Expr, slot: str) -> _Scope:
        if slot == "plain":
            return self.scope[p]
        if slot == "else":
            return self.sub[p][1]
        return self.sub[p][0]  # then, fnbody, letval, letbody

    # -- emission -----------------------------------------------------------------------------
    def ref(self, e: Expr) -> str:
        """Text of an expression in an argument position: an atom or a temporary."""
        if isinstance(e, Var):
            return self.var_text(e)
        if isinstance(e, GlobalVar):
            return name_text("@", e.name)
        if e in self.temps:
            return f"%{self.temps[e]}"
        assert isinstance(e, Constant) and self.mode.get(e, "atom") == "atom", e
        return self.constant_ref(e)

    def constant_ref(self, c: Constant) -> str:
        if not self.is_large(c):
            return constant_text(c)
        i = self.meta_index.get(c)
        if i is None:
            i = self.meta_index[c] = len(self.meta)
            self.meta.append(c)
        return f"meta[constant][{i}]"

    def block(self, scope: _Scope, tail: Expr, depth: int, first_let: Let | None = None) -> list[str]:
        """The lines of a block: temporaries and lets in dependency order, then the result."""
        ind = INDENT * depth
        lines: list[str] = []
        visited: set[Expr] = set()
        e = tail
        while isinstance(e, Let) and (e is first_let or self.mode[e] == "tail"):
            var = self.binder_text(e.var)
            self.emit_deps(e.value, scope, depth, lines, visited)
            val = self.inline(e.value, depth)
            val[0] = f"{ind}let {var} = {val[0]}"
            val[-1] += ";"
            lines += val
            e = e.body
        self.emit_deps(e, scope, depth, lines, visited)
        res = self.inline(e, depth)
        res[0] = ind + res[0]
        return lines + res

    def inline(self, e: Expr, depth: int) -> list[str]:
        if isinstance(e, (Var, GlobalVar)) or e in self.temps or self.mode.get(e) == "atom":
            return [self.ref(e)]
        return self.form(e, depth)

    def emit_deps(self, root: Expr, scope: _Scope, depth: int, lines: list[str], visited: set[Expr]) -> None:
        """Emit, children first, every not-yet-printed temporary of ``scope`` that ``root`` needs."""
        mode, temps = self.mode, self.temps
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            n, done = stack.pop()
            if done:
                if mode[n] == "bound" and self.scope[n] is scope and n not in temps:
                    k = temps[n] = self.counter
                    self.counter += 1
                    text = self.form(n, depth)
                    text[0] = f"{INDENT * depth}%{k} = {text[0]}"
                    text[-1] += ";"
                    lines += text
                continue
            if n in visited or isinstance(n, (Var, GlobalVar)) or n in temps or mode[n] == "atom":
                continue
            visited.add(n)
            stack.append((n, True))
            for c, _ in reversed(_slots(n)):
                stack.append((c, False))

    def form(self, n: Expr, depth: int) -> list[str]:
        """The lines of a non-atomic node; the first line is unindented, the others absolute."""
        ind = INDENT * depth
        if isinstance(n, Call):
            callee = n.op.name if isinstance(n.op, Op) else self.ref(n.op)
            parts = [self.ref(a) for a in n.args]
            if n.attrs:
                order = [a.name for a in n.op.attrs] if isinstance(n.op, Op) else None
                parts.append(attrs_text(n.attrs, order))
            meta = f" #[{attrs_text(n.meta)}]" if n.meta else ""
            return [f"{callee}({', '.join(parts)}){meta}"]
        if isinstance(n, Tuple):
            fields = [self.ref(f) for f in n.fields]
            return ["(" + ", ".join(fields) + ("," if len(fields) == 1 else "") + ")"]
        if isinstance(n, TupleGetItem):
            return [f"{self.ref(n.tuple_value)}.{n.index}"]
        if isinstance(n, Constant):
            return [constant_text(n)]
        if isinstance(n, Loop):
            init = [self.ref(x) for x in n.init]
            parts = [self.ref(n.body), "(" + ", ".join(init) + ("," if len(init) == 1 else "") + ")"]
            parts += [f"{k}={self.ref(x)}" for k, x in (("trip_count", n.trip_count), ("cond", n.cond)) if x is not None]
            return [f"loop({', '.join(parts)}, num_scan={n.num_scan})"]
        if isinstance(n, If):
            then_s, else_s = self.sub[n]
            return ([f"if ({self.ref(n.cond)}) {{"] + self.block(then_s, n.true_branch, depth + 1)
                    + [f"{ind}}} else {{"] + self.block(else_s, n.false_branch, depth + 1) + [f"{ind}}}"])
        if isinstance(n, Function):
            head = "fn " + self.signature(n)
            return [head] + self.block(self.sub[n][0], n.body, depth + 1) + [f"{ind}}}"]
        if isinstance(n, Let):
            return ["{"] + self.block(self.sub[n][0], n, depth + 1, first_let=n) + [f"{ind}}}"]
        raise TypeError(f"cannot print {n!r}")  # pragma: no cover

    def signature(self, f: Function) -> str:
        params = ", ".join(self.binder_text(p) for p in f.params)
        ret = f" -> {type_text(f.ret_type)}" if f.ret_type is not None else ""
        attrs = f" #[{attrs_text(f.attrs)}]" if f.attrs else ""
        return f"({params}){ret}{attrs} {{"

    # -- entry points ----------------------------------------------------------------------------
    def expr_text(self, e: Expr) -> str:
        self.begin()
        root = _Scope(None)
        self.analyze(e, root)
        return "\n".join(self.block(root, e, 0))

    def def_text(self, name: str, f: Function) -> str:
        self.begin()
        head = f"def {name_text('@', name)}{self.signature(f)}"
        root = _Scope(None)
        self.analyze(f.body, root)
        return "\n".join([head] + self.block(root, f.body, 1) + ["}"])

    def module_text(self, mod: IRModule) -> str:
        head = [f'#[version = "{VERSION}"]']
        if mod.attrs:
            head.append(f"#[{attrs_text(mod.attrs)}]")
        defs = [self.def_text(name, fn) if isinstance(fn, Function) else foreign_function_text(name, fn)
                for name, fn in mod.items()]
        return "\n".join(head) + "\n" + "\n\n".join(defs) + ("\n" if defs else "")

    def metadata_text(self) -> str:
        lines = ["#[metadata]"]
        for i, c in enumerate(self.meta):
            lines.append(f"meta[constant][{i}] = {constant_text(c, inline_values=False)}")
        return "\n".join(lines) + "\n"


def print_expr(e: Expr, metadata: bool = False) -> str:
    """The text of an expression (no version header). Large constants are ``meta[constant][i]``
    references; ``metadata=True`` appends the metadata section that defines them."""
    p = RelayPrinter()
    text = p.expr_text(e)
    if metadata and p.meta:
        text += "\n\n" + p.metadata_text().rstrip("\n")
    return text


def print_module(mod: IRModule, metadata: bool = True) -> str:
    """The text of a module. With ``metadata=True`` (the default) the section defining large
    constants is appended, making the text self-contained; with ``metadata=False`` it is replaced
    by a comment line, and the parser needs the table of :func:`print_with_constants`."""
    p = RelayPrinter()
    text = p.module_text(mod)
    if p.meta:
        text += "\n" + (p.metadata_text() if metadata else omitted_comment(len(p.meta)))
    return text


def omitted_comment(n: int) -> str:
    return (f"// metadata section omitted: {n} large constant{'s' if n != 1 else ''} "
            "(include it with metadata=True or plait show --metadata)\n")


def print_with_constants(x: IRModule | Expr) -> tuple[str, list[Constant]]:
    """``(text without metadata section, constants)``: ``constants[i]`` is ``meta[constant][i]``.
    The text is ``print_module(x, metadata=False)`` (or ``print_expr(x)``)."""
    if isinstance(x, IRModule):
        p = RelayPrinter()
        text = p.module_text(x)
        if p.meta:
            text += "\n" + omitted_comment(len(p.meta))
        return text, list(p.meta)
    p = RelayPrinter()
    return p.expr_text(x), list(p.meta)
