"""Tokenizer for TIR text: logical lines (brackets join physical lines) with their indentation."""

from __future__ import annotations

import re
from dataclasses import dataclass

from plait.errors import ParseError

_TOKEN = re.compile(r"""
    (?P<ws>[ ]+)
  | (?P<comment>\#[^\n]*)
  | (?P<nl>\r?\n)
  | (?P<num>(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)(?:[iu](?:8|16|32|64)|f(?:16|32|64))?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<op>//|==|!=|<=|>=|<<|>>|[-+*/%<>()\[\],:=@{}~&|^])
""", re.VERBOSE)

_OPEN, _CLOSE = "([{", ")]}"


@dataclass(frozen=True)
class Token:
    kind: str  # num | name | str | op
    text: str
    line: int
    col: int

    def is_op(self, text: str) -> bool:
        return self.kind == "op" and self.text == text

    def is_name(self, text: str) -> bool:
        return self.kind == "name" and self.text == text


@dataclass
class Line:
    indent: int
    tokens: list[Token]

    @property
    def line(self) -> int:
        return self.tokens[0].line


def tokenize(text: str, source_name: str = "<tir>") -> list[Line]:
    """Split ``text`` into logical lines of tokens. Tabs are not allowed."""
    lines: list[Line] = []
    current: list[Token] = []
    indent = 0
    depth: list[Token] = []
    line, line_start, pos = 1, 0, 0
    at_line_start = True
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        col = pos - line_start + 1
        if m is None:
            ch = text[pos]
            what = "a tab (indent with spaces)" if ch == "\t" else repr(ch)
            raise ParseError(f"unexpected character {what}", line, col, source_name)
        kind, value = m.lastgroup, m.group()
        pos = m.end()
        if kind == "nl":
            if current and not depth:
                lines.append(Line(indent, current))
                current = []
            line, line_start, at_line_start = line + 1, pos, not depth
            continue
        if kind == "ws":
            if at_line_start:
                indent = len(value)
            continue
        if kind == "comment":
            continue
        if at_line_start:
            if pos - len(value) == line_start:
                indent = 0
            at_line_start = False
        if kind == "num" and pos < len(text) and (text[pos].isalnum() or text[pos] in "_."):
            raise ParseError(f"invalid number literal starting with '{value}'", line, col, source_name)
        tok = Token(kind or "?", value, line, col)
        if kind == "op" and value in _OPEN:
            depth.append(tok)
        elif kind == "op" and value in _CLOSE:
            if not depth or _OPEN.index(depth[-1].text) != _CLOSE.index(value):
                raise ParseError(f"unmatched '{value}'", line, col, source_name)
            depth.pop()
        current.append(tok)
    if depth:
        t = depth[-1]
        raise ParseError(f"'{t.text}' is never closed", t.line, t.col, source_name)
    if current:
        lines.append(Line(indent, current))
    return lines
