"""Parse TIR text (as printed by :mod:`plait.tir.printer`) back into PrimFuncs.

Blocks are handled with an explicit stack of open blocks (one per indentation level), and
expressions by :mod:`plait.tir.parse_expr`: nothing recurses per node. Errors are
:class:`plait.errors.ParseError` with the line and column.
"""

from __future__ import annotations

import json
import re
from typing import Any

from plait.errors import ParseError
from plait.ir.attrs import Attrs
from plait.tir.errors import TIRError
from plait.tir.expr import BufferLoad, PrimExpr, Var
from plait.tir.lexer import Line, Token, tokenize
from plait.tir.parse_expr import Cursor, Scope, describe, parse_expr
from plait.tir.stmt import (
    FOR_KINDS, Allocate, AssertStmt, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimFunc, Stmt, no_op, seq,
)


class _Block:
    """An open indented block and the statements (or flat let/allocate markers) parsed in it."""

    def __init__(self, kind: str, header: Token, header_indent: int, **info: Any):
        self.kind, self.header, self.header_indent, self.info = kind, header, header_indent, info
        self.indent: int | None = None
        self.items: list[Any] = []
        self.names: list[str] = []
        self.pending_if = False  # the last item is an if that an `else:` may still extend


class Parser:
    def __init__(self, text: str, source_name: str = "<tir>"):
        self.source_name = source_name
        self.lines = tokenize(text, source_name)
        self.scope = Scope()

    def fail(self, message: str, tok: Token) -> None:
        raise ParseError(message, tok.line, tok.col, self.source_name)

    def cursor(self, line: Line) -> Cursor:
        return Cursor(line.tokens, self.source_name)

    # -- functions ---------------------------------------------------------------------------------
    def parse_funcs(self) -> list[tuple[str, PrimFunc]]:
        out: list[tuple[str, PrimFunc]] = []
        i = 0
        while i < len(self.lines):
            name, fn, i = self.parse_func(i)
            out.append((name, fn))
        return out

    def parse_func(self, i: int) -> tuple[str, PrimFunc, int]:
        deco = self.lines[i]
        attrs = self.decorator(deco)
        if i + 1 >= len(self.lines):
            self.fail("expected 'def' after the decorator", deco.tokens[-1])
        header = self.lines[i + 1]
        if header.indent != deco.indent:
            self.fail("'def' must be aligned with its decorator", header.tokens[0])
        try:
            name, params = self.def_line(header)
        except TIRError as exc:
            self.fail(str(exc), header.tokens[0])
        end = i + 2
        while end < len(self.lines) and self.lines[end].indent > deco.indent:
            end += 1
        body = self.body(self.lines[i + 2:end], header)
        for p in params:
            self.scope.pop(p.name_in_text)  # type: ignore[union-attr]
        return name, PrimFunc(tuple(p.obj for p in params), body, attrs), end  # type: ignore[union-attr]

    def decorator(self, line: Line) -> Attrs:
        cur = self.cursor(line)
        cur.expect_op("@", " (a function starts with @prim_func)")
        tok = cur.expect_name("prim_func")
        if tok.text != "prim_func":
            self.fail(f"expected 'prim_func', got '{tok.text}'", tok)
        attrs: dict[str, Any] = {}
        if not cur.at_end():
            cur.expect_op("(")
            if cur.at_op("{"):
                attrs = self.attr_dict(cur)
            else:
                while not cur.at_op(")"):
                    key = cur.expect_name("an attribute name").text
                    cur.expect_op("=")
                    attrs[key] = attr_value(cur)
                    if not cur.at_op(")"):
                        cur.expect_op(",")
            cur.expect_op(")")
        cur.end()
        return Attrs(attrs)

    def attr_dict(self, cur: Cursor) -> dict[str, Any]:
        cur.expect_op("{")
        out: dict[str, Any] = {}
        while not cur.at_op("}"):
            key = cur.string()
            cur.expect_op(":")
            out[key] = attr_value(cur)
            if not cur.at_op("}"):
                cur.expect_op(",")
        cur.expect_op("}")
        return out

    def def_line(self, line: Line) -> tuple[str, list[Any]]:
        cur = self.cursor(line)
        if not cur.at_name("def"):
            cur.fail(f"expected 'def', got {describe(cur.peek())}")
        cur.next()
        tok = cur.peek()
        name = cur.string() if tok is not None and tok.kind == "str" else cur.expect_name("the function name").text
        cur.expect_op("(")
        params: list[Any] = []
        buffer_specs: list[tuple[Any, int]] = []
        while not cur.at_op(")"):
            ptok = cur.expect_name("a parameter name")
            cur.expect_op(":")
            p = _Param(ptok.text)
            if cur.at_name("Buffer"):
                cur.next()
                buffer_specs.append((p, cur.pos))
                _skip_brackets(cur)
            else:
                p.obj = Var(ptok.text, cur.dtype())
                self.scope.push(p.name_in_text, p.obj)
            params.append(p)
            if not cur.at_op(")"):
                cur.expect_op(",")
        cur.expect_op(")")
        cur.expect_op(":")
        cur.end()
        end = cur.pos
        for p, pos in buffer_specs:  # shapes may use scalar params declared later in the list
            cur.pos = pos
            cur.expect_op("(")
            shape, dtype, scope = self.buffer_decl(cur)
            cur.expect_op(")")
            p.obj = Buffer(p.name_in_text, shape, dtype, scope)
        for p, _ in buffer_specs:
            self.scope.push(p.name_in_text, p.obj)
        cur.pos = end
        return name, params

    def buffer_decl(self, cur: Cursor) -> tuple[tuple[PrimExpr, ...], str, str]:
        """``(shape...), dtype[, scope="..."]``"""
        cur.expect_op("(", " to start the shape")
        shape: list[PrimExpr] = []
        while not cur.at_op(")"):
            shape.append(parse_expr(cur, self.scope))
            if not cur.at_op(")"):
                cur.expect_op(",")
        cur.expect_op(")")
        cur.expect_op(",")
        dtype = cur.dtype()
        scope = "global"
        if cur.at_op(","):
            cur.next()
            key = cur.expect_name("scope=")
            if key.text != "scope":
                cur.fail(f"unknown buffer argument '{key.text}' (expected scope=)", key)
            cur.expect_op("=")
            scope = cur.string()
        return tuple(shape), dtype, scope

    # -- blocks ------------------------------------------------------------------------------------
    def body(self, lines: list[Line], header: Line) -> Stmt:
        stack = [_Block("func", header.tokens[0], header.indent)]
        for line in lines:
            while stack[-1].indent is not None and line.indent < stack[-1].indent:
                self.close(stack)
            top = stack[-1]
            if top.indent is None:
                if line.indent <= top.header_indent:
                    self.fail(f"expected an indented block after line {top.header.line}", line.tokens[0])
                top.indent = line.indent
            elif line.indent != top.indent:
                self.fail("unexpected indentation", line.tokens[0])
            try:
                self.line(line, stack)
            except TIRError as exc:  # a node constructor refused what the line says
                self.fail(str(exc), line.tokens[0])
        if stack[-1].indent is None and len(stack) == 1:
            self.fail("a function needs a body (write 'pass')", header.tokens[-1])
        while len(stack) > 1:
            self.close(stack)
        return self.build(stack[0])

    def close(self, stack: list[_Block]) -> None:
        block = stack.pop()
        if block.indent is None:
            self.fail(f"expected an indented block after line {block.header.line}", block.header)
        body = self.build(block)
        info = block.info
        parent = stack[-1]
        if block.kind == "for":
            stmt: Stmt = For(info["var"], info["min"], info["extent"], info["loop_kind"], body, info["annotations"])
        elif block.kind == "if":
            stmt = IfThenElse(info["cond"], body)
        elif block.kind == "else":
            stmt = IfThenElse(info["cond"], info["then"], body)
        elif block.kind == "let":
            stmt = LetStmt(info["var"], info["value"], body)
        else:
            stmt = Allocate(info["buffer"], body)
        parent.items.append(stmt)
        parent.pending_if = block.kind == "if"

    def build(self, block: _Block) -> Stmt:
        for name in block.names:
            self.scope.pop(name)
        tail: list[Stmt] = []
        for item in reversed(block.items):
            if isinstance(item, Stmt):
                tail.append(item)
                continue
            kind, obj, value, tok = item
            if not tail:
                self.fail(f"'{tok.text}' is bound on the last line of its block: nothing uses it (add 'pass')", tok)
            inner = seq(*reversed(tail))
            tail = [LetStmt(obj, value, inner) if kind == "let" else Allocate(obj, inner)]
        return seq(*reversed(tail)) if tail else no_op()

    def bind(self, block: _Block, name: str, obj: Any) -> None:
        self.scope.push(name, obj)
        block.names.append(name)

    def line(self, line: Line, stack: list[_Block]) -> None:  # noqa: C901 - one case per statement form
        cur = self.cursor(line)
        top = stack[-1]
        first, second = cur.peek(), cur.peek(1)
        assert first is not None
        pending_if, top.pending_if = top.pending_if, False
        if first.is_name("for"):
            cur.next()
            var_tok = cur.expect_name("the loop variable")
            dtype = None
            if cur.at_op(":"):
                cur.next()
                dtype = cur.dtype()
            if not cur.at_name("in"):
                cur.fail(f"expected 'in', got {describe(cur.peek())}")
            cur.next()
            kind_tok = cur.expect_name("a loop kind")
            if kind_tok.text not in FOR_KINDS:
                cur.fail(f"unknown loop kind '{kind_tok.text}' (expected {', '.join(FOR_KINDS)})", kind_tok)
            cur.expect_op("(")
            lo = parse_expr(cur, self.scope)
            cur.expect_op(",")
            extent = parse_expr(cur, self.scope)
            annotations: dict[str, Any] = {}
            if cur.at_op(","):
                cur.next()
                key = cur.expect_name("annotations=")
                if key.text != "annotations":
                    cur.fail(f"unknown loop argument '{key.text}' (expected annotations=)", key)
                cur.expect_op("=")
                annotations = self.attr_dict(cur)
            cur.expect_op(")")
            self.header_end(cur)
            var = Var(var_tok.text, dtype or lo.dtype)
            block = _Block("for", first, line.indent, var=var, min=lo, extent=extent, loop_kind=kind_tok.text,
                           annotations=Attrs(annotations))
            self.bind(block, var_tok.text, var)
            stack.append(block)
        elif first.is_name("if"):
            cur.next()
            cond = parse_expr(cur, self.scope)
            self.header_end(cur)
            stack.append(_Block("if", first, line.indent, cond=cond))
        elif first.is_name("else"):
            cur.next()
            self.header_end(cur)
            if not pending_if:
                self.fail("'else' without a matching 'if'", first)
            prev = top.items.pop()
            stack.append(_Block("else", first, line.indent, cond=prev.cond, then=prev.then_case))
        elif first.is_name("with"):
            cur.next()
            self.with_line(cur, first, line, stack)
        elif first.is_name("assert"):
            cur.next()
            cond = parse_expr(cur, self.scope)
            cur.expect_op(",")
            code = cur.next()
            if code.kind != "num" or not code.text.isdigit():
                cur.fail(f"expected the status code (an integer), got {describe(code)}", code)
            status = int(code.text)
            if not 1 <= status <= 2**31 - 1:
                cur.fail(f"status code {code.text} is out of range [1, 2147483647]", code)
            cur.end()
            top.items.append(AssertStmt(cond, status))
        elif first.is_name("pass") and second is None:
            top.items.append(no_op())
        elif first.kind == "name" and second is not None and second.is_op(":"):
            cur.next(), cur.next()
            dtype = cur.dtype()
            cur.expect_op("=")
            value = parse_expr(cur, self.scope)
            cur.end()
            var = Var(first.text, dtype)
            top.items.append(("let", var, value, first))
            self.bind(top, first.text, var)
        elif first.kind == "name" and second is not None and second.is_op("="):
            cur.next(), cur.next()
            alloc = cur.peek()
            if alloc is None or not alloc.is_name("allocate"):
                cur.fail(f"only allocate(...) can be assigned to a name (write '{first.text}: <dtype> = ...' for "
                         "a let binding)")
            cur.next()
            buffer = self.allocate_args(cur, first.text)
            cur.end()
            top.items.append(("allocate", buffer, None, first))
            self.bind(top, first.text, buffer)
        else:
            expr = parse_expr(cur, self.scope)
            if cur.at_op("="):
                eq = cur.next()
                if not isinstance(expr, BufferLoad):
                    self.fail("only a buffer element can be assigned (write 'x: <dtype> = ...' for a let)", eq)
                value = parse_expr(cur, self.scope)
                cur.end()
                top.items.append(BufferStore(expr.buffer, value, expr.indices))
            else:
                cur.end()
                top.items.append(Evaluate(expr))

    def with_line(self, cur: Cursor, first: Token, line: Line, stack: list[_Block]) -> None:
        what = cur.expect_name("let(...) or allocate(...)")
        if what.text == "let":
            cur.expect_op("(")
            var_tok = cur.expect_name("the let variable")
            cur.expect_op(":")
            dtype = cur.dtype()
            cur.expect_op("=")
            value = parse_expr(cur, self.scope)
            cur.expect_op(")")
            self.header_end(cur)
            var = Var(var_tok.text, dtype)
            block = _Block("let", first, line.indent, var=var, value=value)
            self.bind(block, var_tok.text, var)
        elif what.text == "allocate":
            cur.expect_op("(")
            shape, dtype, scope = self.buffer_decl(cur)
            cur.expect_op(")")
            if not cur.at_name("as"):
                cur.fail(f"expected 'as', got {describe(cur.peek())}")
            cur.next()
            name_tok = cur.expect_name("the buffer name")
            self.header_end(cur)
            buffer = Buffer(name_tok.text, shape, dtype, scope)
            block = _Block("alloc", first, line.indent, buffer=buffer)
            self.bind(block, name_tok.text, buffer)
        else:
            self.fail(f"expected let(...) or allocate(...) after 'with', got '{what.text}'", what)
        stack.append(block)

    def allocate_args(self, cur: Cursor, name: str) -> Buffer:
        cur.expect_op("(")
        shape, dtype, scope = self.buffer_decl(cur)
        cur.expect_op(")")
        return Buffer(name, shape, dtype, scope)

    def header_end(self, cur: Cursor) -> None:
        cur.expect_op(":", " at the end of the block header")
        cur.end()


class _Param:
    def __init__(self, name: str):
        self.name_in_text = name
        self.obj: Any = None


def _skip_brackets(cur: Cursor) -> None:
    depth = 0
    while True:
        tok = cur.next()
        if tok.kind == "op" and tok.text in "([{":
            depth += 1
        elif tok.kind == "op" and tok.text in ")]}":
            depth -= 1
            if depth == 0:
                return


def attr_value(cur: Cursor) -> Any:
    """A Python literal: None, True/False, int, float, inf/nan, "str", or a tuple of these."""
    tok = cur.next()
    if tok.is_op("("):
        items = []
        while not cur.at_op(")"):
            items.append(attr_value(cur))
            if not cur.at_op(")"):
                cur.expect_op(",")
        cur.next()
        return tuple(items)
    if tok.kind == "str":
        return json.loads(tok.text)
    negative = tok.is_op("-")
    if negative:
        tok = cur.next()
    if tok.kind == "num" and re.fullmatch(r"\d+(\.\d*)?([eE][+-]?\d+)?", tok.text):
        v: Any = float(tok.text) if any(c in tok.text for c in ".eE") else int(tok.text)
        return -v if negative else v
    if tok.kind == "name" and tok.text in ("inf", "nan"):
        return -float(tok.text) if negative else float(tok.text)
    if not negative and tok.kind == "name" and tok.text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[tok.text]
    cur.fail(f"expected an attribute value, got '{tok.text}'", tok)


def parse_prim_funcs(text: str, source_name: str = "<tir>") -> list[tuple[str, PrimFunc]]:
    """Every function in ``text``, as (name after ``def``, PrimFunc), in order."""
    return Parser(text, source_name).parse_funcs()


def parse_prim_func(text: str, source_name: str = "<tir>") -> PrimFunc:
    """The single function in ``text``."""
    funcs = parse_prim_funcs(text, source_name)
    if len(funcs) != 1:
        raise ParseError(f"expected exactly one function, found {len(funcs)}", 1, 1, source_name)
    return funcs[0][1]
