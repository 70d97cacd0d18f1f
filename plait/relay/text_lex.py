"""Lexical layer of the Relay text format: tokens, string escapes, name quoting.

Shared by the printer (:mod:`plait.relay.text_print`) and the parser
(:mod:`plait.relay.text_parse`), so both agree on what a bare name and a string literal are.
"""

from __future__ import annotations

import bisect
import re

from plait.errors import ParseError

# A name printed bare after '%' or '@' (or as an attribute key); anything else is quoted.
PLAIN_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
PRIMFN_KEYWORD = "primfn"  # starts the block of a TIR PrimFunc global (plait.relay.text_primfn)

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_UNESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}


def quote(s: str) -> str:
    """A double-quoted string literal; non-printable characters become \\uXXXX / \\UXXXXXXXX."""
    out = ['"']
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def name_text(sigil: str, name: str) -> str:
    """``%x`` / ``@main`` for identifier-like names, ``%"a/b:0"`` otherwise."""
    return sigil + (name if PLAIN_NAME_RE.match(name) else quote(name))


def key_text(key: str) -> str:
    """An attribute key: bare if identifier-like, else quoted."""
    return key if PLAIN_NAME_RE.match(key) else quote(key)


# ---- tokens ---------------------------------------------------------------------------------
#
# A token is a tuple (kind, value, start, end). Punctuation tokens have kind == their text.
# Other kinds: "ident" (may contain dots: nn.conv2d), "int", "float", "str", "temp" (%3, value
# int), "local" (%x, value the name), "global" (@f), "eof".

_STR = r'"(?:[^"\\\n]|\\.)*"'
_TOKEN_RE = re.compile(rf"""
  (?P<ws>(?:[ \t\r\n]+|//[^\n]*)+)
| (?P<float>(?<![.])-?(?:\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)|-inf(?![A-Za-z0-9_]))
| (?P<int>-?\d+)
| (?P<ident>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)
| (?P<temp>%\d+)
| (?P<local>%[A-Za-z_][A-Za-z0-9_]*)
| (?P<global>@[A-Za-z_][A-Za-z0-9_]*)
| (?P<qname>[%@]{_STR})
| (?P<str>{_STR})
| (?P<punct>\#\[|->|[()\[\]{{}},;:=.?])
| (?P<bad>[%@]?"|.)
""", re.VERBOSE | re.DOTALL)

Token = tuple  # (kind, value, start, end)


class Source:
    """The text being parsed, with line/column lookup for error messages."""

    def __init__(self, text: str, name: str):
        self.text = text
        self.name = name
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def error(self, message: str, offset: int) -> ParseError:
        line, col = self.position(offset)
        return ParseError(message, line, col, self.name)


def unescape(body: str, src: Source, offset: int) -> str:
    """Decode the inside of a string literal starting at ``offset`` (the first char after '"')."""
    if "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        esc = body[i + 1]
        if esc in _UNESCAPES:
            out.append(_UNESCAPES[esc])
            i += 2
            continue
        width = {"u": 4, "U": 8}.get(esc)
        digits = body[i + 2:i + 2 + width] if width else ""
        if width is None or len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
            raise src.error(f"invalid escape sequence '\\{esc}' in string", offset + i)
        code = int(digits, 16)
        if code > 0x10FFFF:
            raise src.error(f"invalid escape sequence '\\{esc}{digits}' in string", offset + i)
        out.append(chr(code))
        i += 2 + width
    return "".join(out)


def tokenize(src: Source) -> list[Token]:
    text = src.text
    toks: list[Token] = []
    append = toks.append
    for m in _TOKEN_RE.finditer(text):
        kind = m.lastgroup
        if kind == "ws":
            continue
        start, end = m.span()
        if kind == "punct":
            append((m.group(), None, start, end))
        elif kind == "ident":
            append(("ident", m.group(), start, end))
        elif kind == "temp":
            append(("temp", int(m.group()[1:]), start, end))
        elif kind == "int":
            append(("int", int(m.group()), start, end))
        elif kind == "local" or kind == "global":
            append((kind, m.group()[1:], start, end))
        elif kind == "float":
            append(("float", float(m.group()), start, end))
        elif kind == "str":
            append(("str", unescape(m.group()[1:-1], src, start + 1), start, end))
        elif kind == "qname":
            value = unescape(m.group()[2:-1], src, start + 2)
            append(("local" if text[start] == "%" else "global", value, start, end))
        else:
            bad = m.group()
            if bad.endswith('"'):
                raise src.error("unterminated string literal", end - 1)
            raise src.error(f"unexpected character {bad!r}", start)
    toks.append(("eof", None, len(text), len(text)))
    return toks


def read_name(src: Source, pos: int) -> str:
    """The name of the ``%name`` / ``@name`` / ``@"quoted"`` token at ``pos``."""
    m = _TOKEN_RE.match(src.text, pos)
    if m is None or m.lastgroup not in ("local", "global", "qname"):
        raise src.error("expected a name like @f or @\"quoted\"", pos)
    if m.lastgroup == "qname":
        return unescape(m.group()[2:-1], src, pos + 2)
    return m.group()[1:]


def describe(src: Source, tok: Token) -> str:
    """How a token is named in 'expected X but found Y' messages."""
    if tok[0] == "eof":
        return "end of input"
    s = src.text[tok[2]:tok[3]]
    if len(s) > 24:
        s = s[:21] + "..."
    return repr(s) if "'" not in s else '"' + s + '"'
