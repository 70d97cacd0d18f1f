"""Print TIR as Python-like text (the syntax is described in docs/tir.md).

The output is deterministic and parses back with :mod:`plait.tir.parser` into a structurally equal
tree; printing that again gives the same text byte for byte. Variable and buffer names are
sanitized into identifiers and made unique among the names visible where they are bound
(``i``, ``i_1``...). Expressions are printed iteratively, so depth is not limited.
"""

from __future__ import annotations

import json
import keyword
import math
import re
from typing import Any

import numpy as np

from plait.ir.attrs import Attrs
from plait.tir.expr import (
    CMP_OPS, AddressOf, BinaryOp, BufferLoad, Call, Cast, FloatImm, IntImm, Let, Max, Min, Not, PrimExpr, Select,
    TIRNode, TruncDiv, TruncMod, UnaryOp, Var,
)
from plait.tir.intrin import INTRINSICS
from plait.tir.stmt import (
    Allocate, AssertStmt, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt, is_no_op,
)

INDENT = "    "
RESERVED = frozenset(keyword.kwlist) | {"inf", "nan"}
LITERAL_WORD = re.compile(r"^(inf|nan)(f16|f32|f64)?$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

INT_SUFFIX = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "", "uint8": "u8", "uint16": "u16",
              "uint32": "u32", "uint64": "u64"}
FLOAT_SUFFIX = {"float16": "f16", "float32": "", "float64": "f64"}

# precedence, loosest first (Python's): or, and, not, comparisons, |, ^, &, shifts, + -, * / // %, unary
P_OR, P_AND, P_NOT, P_CMP, P_BOR, P_BXOR, P_BAND, P_SHIFT, P_ADD, P_MUL, P_UNARY, P_ATOM = range(1, 13)
BINARY_PREC = {"or": P_OR, "and": P_AND, "|": P_BOR, "^": P_BXOR, "&": P_BAND, "<<": P_SHIFT, ">>": P_SHIFT,
               "+": P_ADD, "-": P_ADD, "*": P_MUL, "/": P_MUL, "//": P_MUL, "%": P_MUL}
BINARY_PREC.update({c.symbol: P_CMP for c in CMP_OPS})
FUNCTION_OPS = (Min, Max, TruncDiv, TruncMod)


def sanitize(name: str) -> str:
    """An identifier for ``name``: other characters become ``_``; keywords get a trailing ``_``."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", name) or "v"
    if s[0].isdigit():
        s = "_" + s
    if s in RESERVED or LITERAL_WORD.match(s):
        s += "_"
    return s


def format_int(value: int, dtype: str) -> str:
    if dtype == "bool":
        return "True" if value else "False"
    return f"{value}{INT_SUFFIX[dtype]}"


def format_float(value: float, dtype: str) -> str:
    suffix = FLOAT_SUFFIX[dtype]
    if math.isnan(value):
        return "nan" + suffix
    if math.isinf(value):
        return ("inf" if value > 0 else "-inf") + suffix
    text = repr(value) if dtype == "float64" else str(np.dtype(dtype).type(value))
    if not any(c in text for c in ".en"):
        text += ".0"
    return text + suffix


def format_attr_value(v: Any) -> str:
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, tuple):
        inner = ", ".join(format_attr_value(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    raise TypeError(f"unprintable attribute value {v!r}")


def format_attrs_dict(attrs: Attrs) -> str:
    return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {format_attr_value(v)}" for k, v in attrs.items()) + "}"


def format_global_name(name: str) -> str:
    return name if _IDENT.match(name) and name not in RESERVED and not LITERAL_WORD.match(name) else json.dumps(name)


class Namer:
    """Printed names of variables and buffers, unique among the names visible at each point."""

    def __init__(self) -> None:
        self.visible: set[str] = set()
        self.names: dict[Any, list[str]] = {}

    def bind(self, obj: Var | Buffer) -> str:
        base = sanitize(obj.name)
        name, k = base, 0
        while name in self.visible:
            k += 1
            name = f"{base}_{k}"
        self.visible.add(name)
        self.names.setdefault(obj, []).append(name)
        return name

    def unbind(self, obj: Var | Buffer) -> None:
        self.visible.discard(self.names[obj].pop())

    def get(self, obj: Var | Buffer) -> str:
        stack = self.names.get(obj)
        return stack[-1] if stack else self.bind(obj)  # a free name: bound for good


class TIRPrinter:
    def __init__(self, namer: Namer | None = None):
        self.namer = namer or Namer()
        self.lines: list[str] = []

    # -- expressions -------------------------------------------------------------------------------
    def expr(self, root: PrimExpr) -> str:
        return self._expr(root)[0]

    def _expr(self, root: PrimExpr) -> tuple[str, int]:
        out: list[tuple[str, int]] = []
        let_names: list[str] = []
        work: list[tuple[int, Any]] = [(0, root)]  # 0 visit, 1 build, 2 bind let var, 3 unbind
        while work:
            op, node = work.pop()
            if op == 0:
                leaf = self._leaf(node)
                if leaf is not None:
                    out.append(leaf)
                elif isinstance(node, Let):
                    work += [(1, node), (3, node), (0, node.body), (2, node), (0, node.value)]
                else:
                    work.append((1, node))
                    work.extend((0, c) for c in reversed(node._children()))
            elif op == 2:
                let_names.append(self.namer.bind(node.var))
            elif op == 3:
                self.namer.unbind(node.var)
            else:
                n = len(node._children())
                args = out[len(out) - n:] if n else []
                del out[len(out) - n:]
                out.append(self._compose(node, args, let_names))
        return out[0]

    def _leaf(self, node: PrimExpr) -> tuple[str, int] | None:
        if isinstance(node, Var):
            return self.namer.get(node), P_ATOM
        if isinstance(node, IntImm):
            return format_int(node.value, node.dtype), P_UNARY if node.value < 0 else P_ATOM
        if isinstance(node, FloatImm):
            text = format_float(node.value, node.dtype)
            return text, P_UNARY if text.startswith("-") else P_ATOM
        return None

    def _compose(self, node: PrimExpr, args: list[tuple[str, int]], let_names: list[str]) -> tuple[str, int]:
        texts = [t for t, _ in args]
        if isinstance(node, FUNCTION_OPS):
            return f"{node.symbol}({texts[0]}, {texts[1]})", P_ATOM
        if isinstance(node, BinaryOp):
            p = BINARY_PREC[node.symbol]
            (lt, lp), (rt, rp) = args
            if lp < p or (p == P_CMP and lp == P_CMP):
                lt = f"({lt})"
            if rp <= p:
                rt = f"({rt})"
            return f"{lt} {node.symbol} {rt}", p
        if isinstance(node, UnaryOp):
            p = P_NOT if isinstance(node, Not) else P_UNARY
            t = texts[0] if args[0][1] >= p else f"({texts[0]})"
            return (f"not {t}" if isinstance(node, Not) else f"~{t}"), p
        if isinstance(node, Select):
            return f"select({', '.join(texts)})", P_ATOM
        if isinstance(node, Cast):
            return f"cast({node.dtype}, {texts[0]})", P_ATOM
        if isinstance(node, BufferLoad):
            return self._index(node.buffer, texts), P_ATOM
        if isinstance(node, AddressOf):
            return f"address_of({self._index(node.buffer, texts)})", P_ATOM
        if isinstance(node, Call):
            if node.kind in ("extern", "kernel"):
                return f"call_{node.kind}({', '.join([node.dtype, json.dumps(node.name)] + texts)})", P_ATOM
            if node.name in INTRINSICS and node.args and node.dtype == INTRINSICS.get(node.name).result_dtype(
                    node.args[0].dtype):
                return f"{node.name}({', '.join(texts)})", P_ATOM
            return f"call_intrin({', '.join([node.dtype, json.dumps(node.name)] + texts)})", P_ATOM
        if isinstance(node, Let):
            return f"let({let_names.pop()}: {node.var.dtype} = {texts[0]}, {texts[1]})", P_ATOM
        raise TypeError(f"cannot print {type(node).__name__}")

    def _index(self, buffer: Buffer, texts: list[str]) -> str:
        return f"{self.namer.get(buffer)}[{', '.join(texts) if texts else '()'}]"

    def buffer_decl(self, b: Buffer) -> str:
        shape = [self.expr(d) for d in b.shape]
        text = f"({shape[0]},)" if len(shape) == 1 else f"({', '.join(shape)})"
        scope = "" if b.scope == "global" else f", scope={json.dumps(b.scope)}"
        return f"{text}, {b.dtype}{scope}"

    # -- statements --------------------------------------------------------------------------------
    def stmt(self, root: Stmt, indent: int = 0) -> None:
        work: list[tuple[str, int, Any]] = [("block", indent, root)]
        while work:
            op, ind, item = work.pop()
            if op == "line":
                self.lines.append(INDENT * ind + item)
            elif op == "unbind":
                self.namer.unbind(item)
            elif op == "block":
                stmts = item.stmts if isinstance(item, SeqStmt) else (item,)
                for k in range(len(stmts) - 1, -1, -1):
                    work.append(("last" if k == len(stmts) - 1 else "stmt", ind, stmts[k]))
            else:
                self._stmt(item, ind, op == "last", work)

    def _stmt(self, s: Stmt, ind: int, last: bool, work: list) -> None:
        pad = INDENT * ind
        if isinstance(s, BufferStore):
            self.lines.append(f"{pad}{self._index(s.buffer, [self.expr(i) for i in s.indices])} = {self.expr(s.value)}")
        elif isinstance(s, Evaluate):
            self.lines.append(pad + ("pass" if is_no_op(s) else self.expr(s.value)))
        elif isinstance(s, AssertStmt):
            self.lines.append(f"{pad}assert {self.expr(s.cond)}, {s.status}")
        elif isinstance(s, For):
            lo, ext = self.expr(s.min), self.expr(s.extent)
            ann = "" if not s.annotations else f", annotations={format_attrs_dict(s.annotations)}"
            name = self.namer.bind(s.loop_var)
            typed = "" if s.loop_var.dtype == s.min.dtype else f": {s.loop_var.dtype}"
            self.lines.append(f"{pad}for {name}{typed} in {s.kind}({lo}, {ext}{ann}):")
            work += [("unbind", ind, s.loop_var), ("block", ind + 1, s.body)]
        elif isinstance(s, IfThenElse):
            self.lines.append(f"{pad}if {self.expr(s.cond)}:")
            if s.else_case is not None:
                work += [("block", ind + 1, s.else_case), ("line", ind, "else:")]
            work.append(("block", ind + 1, s.then_case))
        elif isinstance(s, LetStmt):
            value = self.expr(s.value)
            binding = f"{self.namer.bind(s.var)}: {s.var.dtype} = {value}"
            self.lines.append(pad + (binding if last else f"with let({binding}):"))
            work += [("unbind", ind, s.var), ("block", ind if last else ind + 1, s.body)]
        elif isinstance(s, Allocate):
            decl = f"allocate({self.buffer_decl(s.buffer)})"
            name = self.namer.bind(s.buffer)
            self.lines.append(pad + (f"{name} = {decl}" if last else f"with {decl} as {name}:"))
            work += [("unbind", ind, s.buffer), ("block", ind if last else ind + 1, s.body)]
        else:
            raise TypeError(f"cannot print {type(s).__name__}")

    # -- functions ---------------------------------------------------------------------------------
    def func(self, f: PrimFunc, name: str | None = None) -> None:
        name = name or f.name or "func"
        attrs = f.attrs
        if not attrs:
            deco = "@prim_func"
        elif all(_IDENT.match(k) and k not in RESERVED for k in attrs):
            deco = "@prim_func(" + ", ".join(f"{k}={format_attr_value(v)}" for k, v in attrs.items()) + ")"
        else:
            deco = f"@prim_func({format_attrs_dict(attrs)})"
        names = [self.namer.bind(p) for p in f.params]
        params = [f"{n}: Buffer({self.buffer_decl(p)})" if isinstance(p, Buffer) else f"{n}: {p.dtype}"
                  for n, p in zip(names, f.params)]
        self.lines += [deco, f"def {format_global_name(name)}({', '.join(params)}):"]
        self.stmt(f.body, 1)
        for p in reversed(f.params):
            self.namer.unbind(p)


def print_prim_func(f: PrimFunc, name: str | None = None) -> str:
    """The text of ``f``; ``name`` (default: its global_symbol, else ``func``) follows ``def``."""
    p = TIRPrinter()
    p.func(f, name)
    return "\n".join(p.lines) + "\n"


def print_prim_funcs(funcs: dict[str, PrimFunc] | list[tuple[str, PrimFunc]]) -> str:
    """Several functions, in the given order, separated by blank lines."""
    items = list(funcs.items()) if isinstance(funcs, dict) else list(funcs)
    return "\n".join(print_prim_func(f, n) for n, f in items)


def print_node(node: TIRNode) -> str:
    """Text of any node: an expression, a statement block, a buffer, or a function."""
    p = TIRPrinter()
    if isinstance(node, PrimFunc):
        return print_prim_func(node).rstrip("\n")
    if isinstance(node, PrimExpr):
        return p.expr(node)
    if isinstance(node, Buffer):
        return f"{p.namer.get(node)}: Buffer({p.buffer_decl(node)})"
    if isinstance(node, Stmt):
        p.stmt(node)
        return "\n".join(p.lines)
    raise TypeError(f"cannot print {node!r}")
