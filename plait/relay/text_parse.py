"""Relay text parser. See docs/text-format.md for the format.

Recursive descent inside one expression (a printed line nests only atoms), iterative over the
lines of a block, so a 20,000-line dataflow chain parses without deep recursion. ``%N = ...;``
bindings name values (the same node wherever ``%N`` is used: sharing is reconstructed);
``let %x = ...;`` builds a real :class:`Let`. Errors are :class:`ParseError` with the 1-based line
and column of the offending token.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from plait.errors import AttrError, ParseError, PlaitError, RegistryError
from plait.ir.attrs import Attrs
from plait.op import get_op
from plait.ir.types import DTYPES, FuncType, TensorType, TupleType, Type, check_dtype
from plait.relay.expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Loop, Tuple, TupleGetItem, Var
from plait.relay.module import IRModule
from plait.relay.text_lex import PLAIN_NAME_RE, PRIMFN_KEYWORD, Source, Token, describe, name_text, read_name, tokenize
from plait.relay.text_print import VERSION, float_from_text

def _cut_foreign(text: str, source_name: str) -> tuple[str, list[tuple[str, Any, int, int]]]:
    """Cut the ``primfn`` blocks (TIR PrimFuncs) out of ``text`` (keeping line numbers): returns the
    remaining text and (name, function, line, column of the name) per block."""
    if PRIMFN_KEYWORD not in text:
        return text, []
    from plait.relay.text_primfn import parse_block

    lines = text.split("\n")
    out: list[tuple[str, Any, int, int]] = []
    i = 0
    while i < len(lines):
        word = lines[i].split(" ", 1)[0]
        if word == PRIMFN_KEYWORD and lines[i][len(word):].lstrip().startswith("@"):
            j = i
            while j < len(lines) and lines[j].rstrip() != "}":
                j += 1
            block = "\n".join(lines[i:j + 1])
            func = parse_block(block, source_name, i + 1)
            at = lines[i].index("@")
            out.append((read_name(Source(lines[i], source_name), at), func, i + 1, at + 1))
            for k in range(i, min(j + 1, len(lines))):
                lines[k] = ""
            i = j
        i += 1
    return "\n".join(lines), out


_NOT_EXPRESSIONS = {"let", "def", "else", "None", "True", "False", "Tensor"}

ConstantTable = Sequence[Any]  # Constants or arrays; entry i is meta[constant][i]


class _Parser:
    def __init__(self, text: str, source_name: str, constants: ConstantTable | None):
        text, self.foreign = _cut_foreign(text, source_name)
        self.src = Source(text, source_name)
        self.toks: list[Token] = tokenize(self.src)
        self.i = 0
        self.scopes: list[dict[Any, Expr]] = []
        self.global_refs: dict[str, Token] = {}
        self.table: dict[int, Constant] = {}
        self.has_table = constants is not None
        self.read_metadata()
        for i, c in enumerate(constants or ()):
            self.table[i] = c if isinstance(c, Constant) else Constant(np.asarray(c))

    # -- tokens ---------------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def advance(self) -> Token:
        t = self.toks[self.i]
        if t[0] != "eof":
            self.i += 1
        return t

    def at(self, kind: str, value: Any = None) -> bool:
        t = self.toks[self.i]
        return t[0] == kind and (value is None or t[1] == value)

    def error(self, message: str, tok: Token | None = None) -> ParseError:
        return self.src.error(message, (tok or self.tok)[2])

    def expect(self, kind: str, value: Any = None, what: str | None = None) -> Token:
        if self.at(kind, value):
            return self.advance()
        if what is None:
            what = f"'{value if value is not None else kind}'"
        raise self.error(f"expected {what} but found {describe(self.src, self.tok)}")

    def keyword(self, word: str) -> Token:
        return self.expect("ident", word)

    def accept(self, kind: str) -> bool:
        if self.at(kind):
            self.advance()
            return True
        return False

    def separator(self, close: str, first: bool) -> bool:
        """In a comma-separated list: True if another item follows, False at ``close`` (consumed)."""
        if self.accept(close):
            return False
        if not first:
            if not self.accept(","):
                raise self.error(f"expected ',' or '{close}' but found {describe(self.src, self.tok)}")
            if self.accept(close):  # trailing comma
                return False
        return True

    # -- scopes ---------------------------------------------------------------------------------
    def lookup(self, key: Any) -> Expr | None:
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        return None

    # -- metadata section -----------------------------------------------------------------------
    def read_metadata(self) -> None:
        toks = self.toks
        for m in range(len(toks) - 2):
            if toks[m][0] == "#[" and toks[m + 1][:2] == ("ident", "metadata") and toks[m + 2][0] == "]":
                break
        else:
            return
        self.has_table = True
        self.i = m + 3
        while not self.at("eof"):
            start = self.tok
            index = self.meta_index()
            if index in self.table:
                raise self.error(f"meta[constant][{index}] is defined twice", start)
            self.expect("=")
            if not self.at("ident", "const"):
                raise self.error(f"expected 'const' but found {describe(self.src, self.tok)}")
            self.table[index] = self.constant()
        self.toks = toks[:m] + [("eof", None, toks[m][2], toks[m][2])]
        self.i = 0

    def meta_index(self) -> int:
        self.keyword("meta")
        self.expect("[")
        kind = self.expect("ident", what="a metadata kind")
        if kind[1] != "constant":
            raise self.error(f"unknown metadata kind '{kind[1]}' (expected 'constant')", kind)
        self.expect("]")
        self.expect("[")
        index = self.expect("int", what="a constant index")[1]
        self.expect("]")
        return index

    def meta_ref(self) -> Constant:
        start = self.tok
        index = self.meta_index()
        c = self.table.get(index)
        if c is None:
            if not self.has_table:
                raise self.error(f"meta[constant][{index}] is not defined: the text has no metadata section "
                                 "and no constants table was given (print with metadata=True)", start)
            raise self.error(f"meta[constant][{index}] is not defined (the constants table has "
                             f"{len(self.table)} entries)", start)
        return c

    # -- module ---------------------------------------------------------------------------------
    def header(self) -> None:
        if self.at("#[") and self.peek(1)[:2] == ("ident", "version") and self.peek(2)[0] == "=":
            self.advance(), self.advance(), self.advance()
            v = self.expect("str", what="a version string")
            if v[1] != VERSION:
                raise self.error(f"unsupported text format version '{v[1]}' (this plait reads '{VERSION}')", v)
            self.expect("]")

    def module(self) -> IRModule:
        self.header()
        attrs = self.attr_list() if self.at("#[") else {}
        funcs: dict[str, Any] = {}
        for name, func, line, col in self.foreign:
            if name in funcs:
                raise ParseError(f"global function {name_text('@', name)} is already defined", line, col,
                                 self.src.name)
            funcs[name] = func
        while not self.at("eof"):
            self.expect("ident", "def", what="'def'")
            name = self.expect("global", what="a global function name like @main")
            if name[1] in funcs:
                raise self.error(f"global function {name_text('@', name[1])} is already defined", name)
            funcs[name[1]] = self.function_rest()
        for name, tok in self.global_refs.items():
            if name not in funcs:
                raise self.error(f"undefined global function {name_text('@', name)}", tok)
        return IRModule(funcs, attrs)

    def function_rest(self) -> Function:
        """``(params) [-> type] [#[attrs]] { block }`` after ``def @name`` or ``fn``."""
        self.expect("(")
        scope: dict[Any, Expr] = {}
        params: list[Var] = []
        while self.separator(")", not params):
            t = self.expect("local", what="a parameter like %x")
            if t[1] in scope:
                raise self.error(f"duplicate parameter {name_text('%', t[1])}", t)
            ann = self.type_() if self.accept(":") else None
            v = scope[t[1]] = Var(t[1], ann)
            params.append(v)
        ret = self.type_() if self.accept("->") else None
        attrs = self.attr_list() if self.at("#[") else {}
        self.expect("{")
        self.scopes.append(scope)
        body = self.block("}")
        self.scopes.pop()
        return Function(tuple(params), body, ret, Attrs(attrs))

    def block(self, end: str) -> Expr:
        """Lines ``%N = e;`` and ``let %x = e;`` then the result; consumes ``end`` ('}' or eof)."""
        scope: dict[Any, Expr] = {}
        self.scopes.append(scope)
        lets: list[tuple[Var, Expr]] = []
        while True:
            t = self.tok
            if t[0] == "temp" and self.peek()[0] == "=":
                if self.lookup(t[1]) is not None:
                    raise self.error(f"%{t[1]} is already defined", t)
                self.advance(), self.advance()
                value = self.expr()
                self.expect(";")
                scope[t[1]] = value
            elif t[:2] == ("ident", "let"):
                self.advance()
                name = self.expect("local", what="a variable like %x")
                ann = self.type_() if self.accept(":") else None
                v = scope[name[1]] = Var(name[1], ann)  # in scope in its value: recursive closures
                self.expect("=")
                value = self.expr()
                self.expect(";")
                lets.append((v, value))
            else:
                break
        result = self.expr()
        self.expect(end, what=None if end != "eof" else "end of input")
        self.scopes.pop()
        for v, value in reversed(lets):
            result = Let(v, value, result)
        return result

    # -- expressions ----------------------------------------------------------------------------
    def expr(self) -> Expr:
        e = self.primary()
        while True:
            if self.at("("):
                e = self.call_rest(e, self.tok)
            elif self.at("."):
                self.advance()
                e = TupleGetItem(e, self.expect("int", what="a tuple index")[1])
            else:
                return e

    def primary(self) -> Expr:
        t = self.tok
        kind = t[0]
        if kind == "temp" or kind == "local":
            e = self.lookup(t[1])
            if e is None:
                what = "temporary" if kind == "temp" else "variable"
                raise self.error(f"undefined {what} {self.src.text[t[2]:t[3]]}", t)
            self.advance()
            return e
        if kind == "global":
            self.advance()
            self.global_refs.setdefault(t[1], t)
            return GlobalVar(t[1])
        if kind == "(":
            return self.tuple_or_paren()
        if kind == "{":
            self.advance()
            return self.block("}")
        if kind == "ident":
            word = t[1]
            if word == "fn":
                self.advance()
                return self.function_rest()
            if word == "if":
                return self.if_()
            if word == "loop" and self.peek()[0] == "(":
                return self.loop_()
            if word == "const":
                return self.constant()
            if word == "meta":
                return self.meta_ref()
            if word not in _NOT_EXPRESSIONS and self.peek()[0] == "(":
                try:
                    op = get_op(word)
                except RegistryError as exc:
                    raise self.error(str(exc), t) from None
                self.advance()
                return self.call_rest(op, t)
        raise self.error(f"expected an expression but found {describe(self.src, t)}")

    def tuple_or_paren(self) -> Expr:
        self.expect("(")
        if self.at(")"):
            self.advance()
            return Tuple(())
        first = self.expr()
        if self.at(")"):
            self.advance()
            return first
        if not self.at(","):
            raise self.error(f"expected ',' or ')' but found {describe(self.src, self.tok)}")
        fields = [first]
        while self.separator(")", False):
            fields.append(self.expr())
        return Tuple(tuple(fields))

    def if_(self) -> Expr:
        self.keyword("if")
        self.expect("(")
        cond = self.expr()
        self.expect(")")
        self.expect("{")
        then = self.block("}")
        self.keyword("else")
        self.expect("{")
        return If(cond, then, self.block("}"))

    def loop_(self) -> Expr:
        """``loop(body, (init...), [trip_count=e,] [cond=e,] num_scan=k)``."""
        start = self.keyword("loop")
        self.expect("(")
        body = self.expr()
        self.expect(",")
        init = self.tuple_or_paren()
        if not isinstance(init, Tuple):
            raise self.error("a loop's initial state is a tuple: write (x,) for one value", start)
        named: dict[str, Any] = {}
        while self.separator(")", False):
            t = self.expect("ident", what="trip_count=, cond= or num_scan=")
            if t[1] not in ("trip_count", "cond", "num_scan") or t[1] in named:
                raise self.error(f"unexpected loop argument '{t[1]}'", t)
            self.expect("=")
            named[t[1]] = self.expect("int", what="an int")[1] if t[1] == "num_scan" else self.expr()
        if not isinstance(body, Function):
            raise self.error("a loop's body must be a function", start)
        try:
            return Loop(named.get("trip_count"), named.get("cond"), init.fields, body, named.get("num_scan", 0))
        except PlaitError as exc:
            raise self.error(str(exc), start) from None

    def call_rest(self, callee: Any, start: Token) -> Call:
        """``(args, key=value...) [#[meta]]`` after the callee."""
        self.expect("(")
        args: list[Expr] = []
        attrs: dict[str, Any] = {}
        keys: dict[str, Token] = {}
        while self.separator(")", not (args or attrs)):
            t = self.tok
            if t[0] in ("ident", "str") and self.peek()[0] == "=":
                self.attr_entry(attrs, keys)
            elif attrs:
                raise self.error("expected an attribute 'name=value' (arguments come before attributes)", t)
            else:
                args.append(self.expr())
        meta = self.attr_list() if self.at("#[") else {}
        try:
            return Call(callee, tuple(args), Attrs(attrs), Attrs(meta))
        except AttrError as exc:
            msg = str(exc)
            where = next((k for k in keys if f"attribute '{k}'" in msg), None)
            raise self.error(msg, keys[where] if where is not None else start) from None

    # -- constants -------------------------------------------------------------------------------
    def constant(self) -> Constant:
        self.keyword("const")
        self.expect("(")
        dt = self.expect("ident", what="a dtype")
        try:
            dtype = check_dtype(dt[1])
        except PlaitError as exc:
            raise self.error(str(exc), dt) from None
        self.expect(",")
        shape = self.shape()
        self.expect(",")
        size = int(np.prod(shape, dtype=np.int64))
        start = self.tok
        if self.at("ident", "base64"):
            self.advance()
            s = self.expect("str", what="a base64 string")
            try:
                raw = base64.b64decode(s[1], validate=True)
            except (binascii.Error, ValueError):
                raise self.error("invalid base64 data", s) from None
            want = size * DTYPES[dtype].itemsize
            if len(raw) != want:
                raise self.error(f"constant data has {len(raw)} bytes but {dtype}{list(shape)} needs {want}", s)
            arr = np.frombuffer(raw, dtype=DTYPES[dtype].newbyteorder("<")).astype(dtype).reshape(shape)
        else:
            self.expect("[", what="'[' or base64")
            vals: list[np.ndarray] = []
            while self.separator("]", not vals):
                vals.append(self.element(dtype))
            if len(vals) != size:
                raise self.error(f"constant has {len(vals)} values but shape {shape} needs {size}", start)
            arr = (np.concatenate(vals) if vals else np.zeros(0, dtype)).reshape(shape)
        self.expect(")")
        return Constant(arr)

    def shape(self) -> tuple[int, ...]:
        self.expect("(")
        dims: list[int] = []
        while self.separator(")", not dims):
            t = self.expect("int", what="a dimension")
            if t[1] < 0:
                raise self.error(f"invalid dimension {t[1]}", t)
            dims.append(t[1])
        return tuple(dims)

    def element(self, dtype: str) -> np.ndarray:
        t = self.advance()
        kind, v = t[0], t[1]
        try:
            if dtype == "bool":
                if kind == "ident" and v in ("True", "False"):
                    return np.array([v == "True"])
            elif DTYPES[dtype].kind in "iu":
                if kind == "int":
                    return np.array([v], dtype=dtype)
            elif kind in ("int", "float") or (kind == "ident" and v in ("inf", "nan")):
                return float_from_text(str(v), dtype)
        except OverflowError:
            raise self.error(f"value {v} is out of range for {dtype}", t) from None
        raise self.error(f"expected a {dtype} value but found {describe(self.src, t)}", t)

    # -- types and attributes ---------------------------------------------------------------------
    def type_(self) -> Type:
        t = self.tok
        if t[:2] == ("ident", "Tensor"):
            self.advance()
            self.expect("[")
            self.expect("(")
            dims: list[Any] = []
            while self.separator(")", not dims):
                dims.append(self.dim())
            self.expect(",")
            dt = self.expect("ident", what="a dtype")
            self.expect("]")
            try:
                return TensorType(tuple(dims), check_dtype(dt[1]))
            except PlaitError as exc:
                raise self.error(str(exc), dt) from None
        if t[0] == "(":
            self.advance()
            fields: list[Type] = []
            while self.separator(")", not fields):
                fields.append(self.type_())
            paren = len(fields) == 1 and self.toks[self.i - 2][0] != ","
            return fields[0] if paren else TupleType(tuple(fields))
        if t[:2] == ("ident", "fn"):
            self.advance()
            self.expect("(")
            args: list[Type] = []
            while self.separator(")", not args):
                args.append(self.type_())
            self.expect("->")
            return FuncType(tuple(args), self.type_())
        raise self.error(f"expected a type but found {describe(self.src, t)}")

    def dim(self) -> Any:
        t = self.advance()
        if t[0] == "int" and t[1] >= 0:
            return t[1]
        if t[0] == "?":
            return "?"
        if t[0] == "ident" and PLAIN_NAME_RE.match(t[1]):
            return t[1]
        raise self.error(f"expected a dimension (an int >= 0, a name or ?) but found {describe(self.src, t)}", t)

    def attr_list(self) -> dict[str, Any]:
        """``#[key=value, ...]``."""
        self.expect("#[")
        out: dict[str, Any] = {}
        keys: dict[str, Token] = {}
        while self.separator("]", not out):
            self.attr_entry(out, keys)
        return out

    def attr_entry(self, out: dict[str, Any], keys: dict[str, Token]) -> None:
        t = self.tok
        if t[0] not in ("ident", "str"):
            raise self.error(f"expected an attribute name but found {describe(self.src, t)}")
        if t[1] in out:
            raise self.error(f"duplicate attribute '{t[1]}'", t)
        self.advance()
        self.expect("=")
        out[t[1]] = self.value()
        keys[t[1]] = t

    def value(self) -> Any:
        t = self.tok
        kind, v = t[0], t[1]
        if kind in ("int", "float", "str"):
            self.advance()
            return v
        if kind == "ident" and v in _WORDS:
            self.advance()
            return _WORDS[v]
        if kind == "[":
            self.advance()
            items: list[Any] = []
            while self.separator("]", not items):
                items.append(self.value())
            return tuple(items)
        raise self.error(f"expected an attribute value but found {describe(self.src, t)}")


_WORDS = {"None": None, "True": True, "False": False, "inf": float("inf"), "nan": float("nan")}


def _run(p: _Parser, fn):
    try:
        return fn()
    except RecursionError:
        raise p.error("expression nested too deeply") from None


def parse_module(text: str, source_name: str = "<text>", constants: ConstantTable | None = None) -> IRModule:
    """Parse a module. ``constants`` defines ``meta[constant][i]`` (see ``print_with_constants``)
    when the text has no metadata section (entries given here take precedence)."""
    p = _Parser(text, source_name, constants)
    return _run(p, p.module)


def parse_expr(text: str, source_name: str = "<text>", constants: ConstantTable | None = None,
               free_vars: Mapping[str, Var] | Iterable[Var] | None = None) -> Expr:
    """Parse an expression (the output of ``print_expr``). ``free_vars`` (Vars, or a name -> Var
    map) are the variables the text may use without binding them; by name hint for a list."""
    p = _Parser(text, source_name, constants)
    if free_vars is not None:
        fv = dict(free_vars) if isinstance(free_vars, Mapping) else {v.name_hint: v for v in free_vars}
        p.scopes.append(dict(fv))

    def go() -> Expr:
        p.header()
        return p.block("eof")

    return _run(p, go)
