"""Parsing TIR expressions (iterative operator-precedence parsing: no recursion per nesting level).

Parsing is faithful: operators build raw nodes without dtype checks (the verifier checks types),
so any printed tree, even an ill-typed one, parses back to the same structure.
"""

from __future__ import annotations

import json
import re
from typing import Any

from plait.errors import ParseError
from plait.tir.dtype import ALL_DTYPES
from plait.tir.errors import TIRError
from plait.tir.expr import (
    BINARY_OPS, AddressOf, BitwiseNot, BufferLoad, Call, Cast, FloatImm, IntImm, Let, Not, PrimExpr, Select, Var,
)
from plait.tir.intrin import INTRINSICS
from plait.tir.op import neg
from plait.tir.printer import BINARY_PREC, FLOAT_SUFFIX, INT_SUFFIX, LITERAL_WORD, P_CMP, P_NOT, P_UNARY
from plait.tir.lexer import Token
from plait.tir.stmt import Buffer

_BINARY = {c.symbol: c for c in BINARY_OPS}
_SUFFIX_DTYPE = {v: k for k, v in INT_SUFFIX.items() if v} | {v: k for k, v in FLOAT_SUFFIX.items() if v}
_NUM = re.compile(r"^(.*?)((?:[iu](?:8|16|32|64)|f(?:16|32|64))?)$")
_ARITY = {"select": 3, "min": 2, "max": 2, "truncdiv": 2, "truncmod": 2, "cast": 1, "address_of": 1, "let": 2}


class Cursor:
    """A position in one logical line's tokens."""

    def __init__(self, tokens: list[Token], source_name: str):
        self.tokens, self.pos, self.source_name = tokens, 0, source_name

    def peek(self, k: int = 0) -> Token | None:
        i = self.pos + k
        return self.tokens[i] if i < len(self.tokens) else None

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            self.fail("unexpected end of line")
        self.pos += 1
        return tok  # type: ignore[return-value]

    def at_op(self, text: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok is not None and tok.is_op(text)

    def at_name(self, text: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok is not None and tok.is_name(text)

    def at_end(self) -> bool:
        return self.pos >= len(self.tokens)

    def fail(self, message: str, tok: Token | None = None) -> None:
        """Raise a ParseError at ``tok`` (default: the current token, or just past the line's end)."""
        tok = tok or self.peek()
        if tok is None:
            last = self.tokens[-1] if self.tokens else Token("op", "", 0, 0)
            raise ParseError(message, last.line, last.col + len(last.text), self.source_name)
        raise ParseError(message, tok.line, tok.col, self.source_name)

    def expect_op(self, text: str, context: str = "") -> Token:
        tok = self.peek()
        if tok is None or not tok.is_op(text):
            self.fail(f"expected '{text}'{context}, got {describe(tok)}")
        return self.next()

    def expect_name(self, what: str = "a name") -> Token:
        tok = self.peek()
        if tok is None or tok.kind != "name":
            self.fail(f"expected {what}, got {describe(tok)}")
        return self.next()

    def dtype(self) -> str:
        tok = self.expect_name("a dtype")
        if tok.text not in ALL_DTYPES:
            self.fail(f"unknown dtype '{tok.text}'", tok)
        return tok.text

    def string(self) -> str:
        tok = self.peek()
        if tok is None or tok.kind != "str":
            self.fail(f"expected a string, got {describe(tok)}")
        return json.loads(self.next().text)

    def end(self) -> None:
        if not self.at_end():
            self.fail(f"unexpected {describe(self.peek())}")


def describe(tok: Token | None) -> str:
    return "end of line" if tok is None else f"'{tok.text}'"


class Scope:
    """Names visible at a point: variables and buffers, with shadowing."""

    def __init__(self) -> None:
        self.names: dict[str, list[Any]] = {}

    def push(self, name: str, obj: Any) -> None:
        self.names.setdefault(name, []).append(obj)

    def pop(self, name: str) -> None:
        self.names[name].pop()

    def lookup(self, tok: Token, cur: Cursor) -> Any:
        stack = self.names.get(tok.text)
        if not stack:
            cur.fail(f"undefined name '{tok.text}'", tok)
        return stack[-1]  # type: ignore[index]


def parse_literal(tok: Token, cur: Cursor, negative: bool = False) -> PrimExpr:
    text = tok.text
    try:
        if tok.kind == "name":
            if text in ("True", "False"):
                return IntImm(int(text == "True"), "bool")
            m = LITERAL_WORD.match(text)
            value = float(m.group(1))  # type: ignore[union-attr]
            return FloatImm(-value if negative else value, _SUFFIX_DTYPE.get(m.group(2) or "", "float32"))  # type: ignore
        m = _NUM.match(text)
        body, suffix = m.group(1), m.group(2)  # type: ignore[union-attr]
        dtype = _SUFFIX_DTYPE.get(suffix, "")
        is_float_text = any(c in body for c in ".eE")
        if dtype.startswith("float") or (not dtype and is_float_text):
            value = float(body)
            return FloatImm(-value if negative else value, dtype or "float32")
        if is_float_text:
            cur.fail(f"'{text}': an integer literal cannot have a fraction or an exponent", tok)
        return IntImm(-int(body) if negative else int(body), dtype or "int64")
    except TIRError as exc:
        cur.fail(str(exc).replace("IntImm: ", "").replace("FloatImm: ", ""), tok)
    raise AssertionError("unreachable")


def is_literal_word(tok: Token) -> bool:
    return tok.kind == "name" and (tok.text in ("True", "False") or LITERAL_WORD.match(tok.text) is not None)


class _Frame:
    """An open bracket on the operator stack: (...), f(...) or A[...]."""

    def __init__(self, kind: str, tok: Token, **info: Any):
        self.kind, self.tok, self.info, self.args = kind, tok, info, []


def parse_expr(cur: Cursor, scope: Scope) -> PrimExpr:
    """Parse one expression starting at ``cur``; stops before the first token it cannot use."""
    vals: list[PrimExpr] = []
    ops: list[Any] = []  # ("bin"|"un", symbol, prec, tok) or _Frame
    operand = True
    while True:
        tok = cur.peek()
        if operand:
            if tok is None:
                cur.fail("expected an expression, got end of line")
            operand = _operand(cur, scope, tok, vals, ops)  # type: ignore[arg-type]
            continue
        if tok is not None and (tok.kind == "op" or tok.text in ("and", "or")) and tok.text in BINARY_PREC:
            p = BINARY_PREC[tok.text]
            _reduce(ops, vals, p + 1, cur)
            top = ops[-1] if ops and not isinstance(ops[-1], _Frame) else None
            if p == P_CMP and top is not None and top[2] == P_CMP:
                cur.fail("comparisons cannot be chained: use parentheses", tok)
            _reduce(ops, vals, p, cur)
            ops.append(("bin", cur.next().text, p, tok))
            operand = True
            continue
        if tok is not None and tok.kind == "op" and tok.text in ",)]":
            _reduce(ops, vals, 0, cur)
            frame = ops[-1] if ops else None
            if frame is None:
                break
            if tok.text == "," and frame.kind in ("call", "index"):
                cur.next()
                frame.args.append(vals.pop())
                if frame.info.get("let") is not None and len(frame.args) == 1:
                    scope.push(frame.info["name"], frame.info["let"])
                operand = True
                continue
            closes = {")": ("paren", "call"), "]": ("index",)}.get(tok.text, ())
            if frame.kind not in closes:
                want = {"paren": ")", "call": ")", "index": "]"}[frame.kind]
                cur.fail(f"expected '{want}' to close '{frame.tok.text}' (line {frame.tok.line}, column "
                         f"{frame.tok.col}), got '{tok.text}'", tok)
            cur.next()
            ops.pop()
            if frame.kind != "paren":
                frame.args.append(vals.pop())
                vals.append(_finish(frame, cur, scope))
            continue
        break
    _reduce(ops, vals, 0, cur)
    if ops:
        frame = ops[-1]
        cur.fail(f"'{frame.tok.text}' is not closed before {describe(cur.peek())}", frame.tok)
    return vals.pop()


def _operand(cur: Cursor, scope: Scope, tok: Token, vals: list, ops: list) -> bool:
    """Consume what starts an operand; return True if an operand is still expected."""
    nxt = cur.peek(1)
    if tok.is_op("-") and nxt is not None and (nxt.kind == "num" or (is_literal_word(nxt) and nxt.text[0] in "in")):
        cur.next()
        vals.append(parse_literal(cur.next(), cur, negative=True))
        return False
    if tok.is_op("-") or tok.is_op("~") or tok.is_name("not"):
        cur.next()
        ops.append(("un", tok.text, P_NOT if tok.text == "not" else P_UNARY, tok))
        return True
    if tok.is_op("("):
        cur.next()
        ops.append(_Frame("paren", tok))
        return True
    if tok.kind == "num" or is_literal_word(tok):
        vals.append(parse_literal(cur.next(), cur))
        return False
    if tok.kind != "name":
        cur.fail(f"expected an expression, got {describe(tok)}", tok)
    if nxt is not None and nxt.is_op("("):
        return _open_call(cur, scope, vals, ops)
    obj = scope.lookup(tok, cur)
    if nxt is not None and nxt.is_op("["):
        if not isinstance(obj, Buffer):
            cur.fail(f"'{tok.text}' is a variable, not a buffer", tok)
        cur.next()
        bracket = cur.next()
        if cur.at_op("(") and cur.at_op(")", 1):
            cur.next(), cur.next()
            cur.expect_op("]")
            vals.append(BufferLoad(obj, ()))
            return False
        ops.append(_Frame("index", bracket, buffer=obj))
        return True
    if not isinstance(obj, Var):
        cur.fail(f"'{tok.text}' is a buffer: index it as {tok.text}[...]", tok)
    cur.next()
    vals.append(obj)
    return False


def _open_call(cur: Cursor, scope: Scope, vals: list, ops: list) -> bool:
    name_tok = cur.next()
    paren = cur.next()
    name = name_tok.text
    frame = _Frame("call", paren, fn=name, fn_tok=name_tok)
    if name == "cast":
        frame.info["dtype"] = cur.dtype()
        cur.expect_op(",", " after the dtype")
    elif name in ("call_extern", "call_intrin", "call_kernel"):
        frame.info["dtype"] = cur.dtype()
        cur.expect_op(",", " after the dtype")
        frame.info["callee"] = cur.string()
        if cur.at_op(")"):
            cur.next()
            vals.append(Call(frame.info["dtype"], frame.info["callee"], (), name[5:]))
            return False
        cur.expect_op(",")
    elif name == "let":
        var_tok = cur.expect_name("the let variable")
        cur.expect_op(":", " after the let variable")
        dtype = cur.dtype()
        cur.expect_op("=")
        frame.info.update(let=Var(var_tok.text, dtype), name=var_tok.text)
    elif name not in _ARITY and name not in INTRINSICS:
        cur.fail(f"unknown function '{name}'", name_tok)
    elif cur.at_op(")"):
        cur.fail(f"'{name}' needs arguments", cur.peek())
    ops.append(frame)
    return True


def _finish(frame: _Frame, cur: Cursor, scope: Scope) -> PrimExpr:
    if frame.kind == "index":
        return BufferLoad(frame.info["buffer"], tuple(frame.args))
    name, args, tok = frame.info["fn"], frame.args, frame.info["fn_tok"]
    if name in _ARITY and len(args) != _ARITY[name]:
        cur.fail(f"'{name}' takes {_ARITY[name]} argument(s), got {len(args)}", tok)
    if name == "let":
        scope.pop(frame.info["name"])
        return Let(frame.info["let"], args[0], args[1])
    if name == "cast":
        return Cast(frame.info["dtype"], args[0])
    if name in ("call_extern", "call_intrin", "call_kernel"):
        return Call(frame.info["dtype"], frame.info["callee"], tuple(args), name[5:])
    if name == "select":
        return Select(*args)
    if name == "address_of":
        if not isinstance(args[0], BufferLoad):
            cur.fail("address_of takes a buffer element such as A[0, 0]", tok)
        return AddressOf(args[0].buffer, args[0].indices)
    if name in _BINARY:
        return _BINARY[name](args[0], args[1])
    return Call(INTRINSICS.get(name).result_dtype(args[0].dtype), name, tuple(args), "intrin")


def _reduce(ops: list, vals: list, prec: int, cur: Cursor) -> None:
    """Apply stacked operators binding at least as tightly as ``prec`` (stops at brackets)."""
    while ops and not isinstance(ops[-1], _Frame) and ops[-1][2] >= prec:
        kind, sym, _, tok = ops.pop()
        if kind == "bin":
            b, a = vals.pop(), vals.pop()
            vals.append(_BINARY[sym](a, b))
        elif sym == "not":
            vals.append(Not(vals.pop()))
        elif sym == "~":
            vals.append(BitwiseNot(vals.pop()))
        else:
            try:
                vals.append(neg(vals.pop()))
            except TIRError as exc:
                cur.fail(str(exc), tok)
