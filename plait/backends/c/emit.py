"""One PrimFunc -> one C99 function (the body of :func:`plait.backends.c.backend.codegen_c`).

Expressions follow TIR's semantics (:mod:`plait.tir.expr`):

- every operation is defined for every input (docs/tir.md, "Numeric semantics"), and the C has no
  undefined behaviour for any input (no ``-fwrapv``; the sanitizer test compiles it with
  ``-fsanitize=undefined,float-cast-overflow``): integer ``+ - *`` that may wrap (an interval
  analysis, :mod:`plait.tir.int_bounds`, cannot prove they stay in range) are computed in the
  unsigned type of the same width and converted back, 8/16-bit ones in ``int`` (``uint16 *`` in
  ``uint32_t``); ``<<`` is done in unsigned arithmetic; a shift by an amount that is not a constant
  in ``[0, width)`` goes through a helper giving numpy's result (0, or -1 for ``>>`` of a negative
  value); floordiv/floormod/truncdiv/truncmod go through helpers for ``b == 0`` (result 0) and
  ``INT_MIN / -1`` (wraps; it traps in C) unless the divisor is a safe literal; float -> integer
  casts go through a helper that clamps before converting (truncation, NaN -> 0, saturation);
  conversions to a narrower integer type are C's (modulo 2**bits in gcc and clang, which define
  it); ``min``/``max`` are ``a < b ? a : b``;
- ``Select``, ``And``, ``Or`` are lazy in TIR and in C (``?:``, ``&&``, ``||``), so a select may
  guard an out-of-bounds load. When a lazy operand needs statements first (a ``Let`` binding or a
  hoisted sub-expression) the select becomes ``if``/``else`` assigning a temporary, so nothing is
  evaluated that TIR would not evaluate;
- ``Let`` binds a ``const`` local before the statement that uses it; expressions nested deeper
  than 40 levels are split into temporaries (gcc and the Python side never recurse deeply).

Operands are parenthesized by C precedence (with extra parentheses wherever gcc's -Wparentheses
would ask for them). Traversals are iterative. Every name comes from a :class:`NameTable`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from plait.backends.c.divisions import simplify_divisions
from plait.backends.c.kernels import c_kernel
from plait.backends.c.rounding import magic_operand
from plait.backends.c.libm import C_CALL as LIBM_CALL
from plait.backends.c.helpers import float_class, float_literal, int_class, int_literal
from plait.tir.codegen import FunctionEmitterBase, has_extern_call, static_index_terms, static_size
from plait.tir.int_bounds import fits
from plait.runtime.c_lang import NameTable, comment_text, storage_type, value_type
from plait.errors import PlaitError
from plait.memory.workspace import workspace_params
from plait.tir.dtype import bits, int_range, is_float, is_int, is_uint
from plait.tir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, AddressOf, And, BitwiseAnd, BitwiseNot, BitwiseOr, BitwiseXor, BufferLoad, Call,
    Cast, Div, FloatImm, FloorDiv, FloorMod, IntImm, Let, Max, Min, Mul, Not, Or, PrimExpr, Select, ShiftLeft,
    ShiftRight, Sub, TruncDiv, TruncMod, Var,
)
from plait.tir.functor import pre_order
from plait.tir.intrin import INTRINSICS
from plait.tir.stmt import Allocate, AssertStmt, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt


class CodegenError(PlaitError):
    """TIR that the C backend cannot express (the message names the PrimFunc)."""


# C precedence levels (smaller binds tighter)
ATOM, UNARY, MUL, ADD, SHIFT, REL, EQL, BAND, BXOR, BOR, LAND, LOR, COND = 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13
_ARITH = {Add: ("+", ADD), Sub: ("-", ADD), Mul: ("*", MUL), Div: ("/", MUL)}
_BITS = {BitwiseAnd: ("&", BAND), BitwiseOr: ("|", BOR), BitwiseXor: ("^", BXOR), ShiftLeft: ("<<", SHIFT),
         ShiftRight: (">>", SHIFT)}
_CMP = {EQ: ("==", EQL), NE: ("!=", EQL), LT: ("<", REL), LE: ("<=", REL), GT: (">", REL), GE: (">=", REL)}
_DIVS = {FloorDiv: "floordiv", FloorMod: "floormod", TruncDiv: "truncdiv", TruncMod: "truncmod"}
_MAX_LEVEL = 40
_SMALL_INTS = ("int8", "int16", "uint8", "uint16")

Lines = list[tuple[int, str]]  # (relative depth, text)
Work = list[tuple[Any, int]]  # statements (or closing text) to emit, with their indentation


@dataclass
class R:
    """An emitted expression: C text, its precedence, statements that must run first, nesting."""

    code: str
    prec: int = ATOM
    pre: Lines = field(default_factory=list)
    level: int = 0
    exact: bool = True  # False: an int64 literal printed as a (32-bit) int
    op: str = ""  # the top operator, for chains such as a && b && c


def _p(r: R, ok: bool) -> str:
    return r.code if ok else f"({r.code})"


_ROUNDING = ("nearbyint", "rint", "round", "floor", "ceil", "trunc")


def clamped_within(e: PrimExpr, dtype: str) -> bool:
    """Is every value of the float expression ``e`` finite and inside ``dtype``'s range, so that a C
    conversion gives TIR's (saturating, NaN -> 0) result without the helper's checks? True for
    ``min(max(v, lo), hi)`` / ``max(min(v, hi), lo)`` with literal bounds second (the C ``min``/``max``
    return the literal for a NaN first operand), maybe rounded (also by the magic number), or a select of such values: a
    requantization's clamp."""
    lo_t, hi_t = int_range(dtype)
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, Call) and n.kind != "extern" and n.name in _ROUNDING and len(n.args) == 1:
            stack.append(n.args[0])
        elif magic_operand(n) is not None:  # rounded by the magic number (rounding.py)
            stack.append(magic_operand(n))
        elif isinstance(n, Select):
            stack.extend((n.true_value, n.false_value))
        elif isinstance(n, FloatImm):
            if not (lo_t <= n.value <= hi_t):
                return False
        elif isinstance(n, (Min, Max)) and isinstance(n.b, FloatImm) and isinstance(n.a, (Min, Max)) and \
                type(n.a) is not type(n) and isinstance(n.a.b, FloatImm):
            stack.extend((n.b, n.a.b))  # both literals in range, NaN and everything else clamped between them
        else:
            return False
    return True


def _indent(lines: Lines, k: int = 1) -> Lines:
    return [(d + k, t) for d, t in lines]


def _is_pure_simple(e: PrimExpr) -> bool:
    """No loads, calls or lets: re-evaluating it gives the same value (loop bounds)."""
    return not any(isinstance(n, (BufferLoad, Call, Let)) for n in pre_order(e))


class CFunctionEmitter(FunctionEmitterBase[R]):
    """One PrimFunc -> one C function (:meth:`function`)."""

    language = "C"
    error = CodegenError

    def __init__(self, func: PrimFunc, cname: str, module_names: NameTable, where: str, libm: str = "system"):
        super().__init__(simplify_divisions(func), where)
        func = self.func
        self.cname = cname
        self.names = NameTable(module_names)
        self.var_names: dict[Var, str] = {}
        self.buf_names: dict[Buffer, str] = {}
        self.helpers: set[str] = set()
        self.libm = libm  # "plait": float32 intrinsics call plait's routines (plait.backends.c.libm)
        self.routines: set[str] = set()  # the intrinsics whose routines the function calls
        self.uses_align = False
        casts = [n for n in pre_order(self.func.body, unique=True) if isinstance(n, Cast)]
        clamp_chain = sum(1 for n in casts if is_float(n.value.dtype) and is_int(n.dtype)
                          and clamped_within(n.value, n.dtype)) >= 2
        narrows = any(n.value.dtype == "float64" and n.dtype == "float32" for n in casts)
        # gcc options of this function (helpers.OPTIMIZE_MACRO says why)
        self.optimize = [o for o, on in (("no-thread-jumps", clamp_chain), ("no-tree-slp-vectorize", narrows)) if on]
        self.lines: list[str] = []
        nodes = list(pre_order(func.body))
        self.used_vars = {n for n in nodes if isinstance(n, Var)}
        accessed = [n.buffer for n in nodes if isinstance(n, (BufferLoad, BufferStore, AddressOf))]
        self.used_bufs = set(accessed)
        for b in set(accessed) | {n.buffer for n in nodes if isinstance(n, Allocate)}:
            for d in b.shape:
                self.used_vars.update(n for n in pre_order(d) if isinstance(n, Var))

    # ---- names ----------------------------------------------------------------------------------
    def bind_var(self, v: Var) -> str:
        self.var_names[v] = self.names.fresh(v.name)
        return self.var_names[v]

    def bind_buf(self, b: Buffer) -> str:
        self.buf_names[b] = self.names.fresh(b.name, "buf")
        return self.buf_names[b]

    def temp(self, base: str, dtype: str, r: R) -> R:
        name = self.names.fresh(base)
        const = "" if dtype == "handle" else "const "
        return R(name, ATOM, r.pre + [(0, f"{const}{value_type(dtype)} {name} = {r.code};")])

    # ---- expressions ----------------------------------------------------------------------------
    def expr(self, root: PrimExpr) -> R:
        stack: list[tuple[Any, int]] = [(root, 0)]
        out: list[R] = []
        while stack:
            node, state = stack.pop()
            if state == 2:
                self.bind_var(node.var)
                continue
            if state == 0:
                stack.append((node, 1))
                if isinstance(node, Let):
                    stack += [(node.body, 0), (node, 2), (node.value, 0)]
                else:
                    stack.extend((c, 0) for c in reversed(node._children()))
                continue
            n = len(node._children())
            args = out[len(out) - n:] if n else []
            if n:
                del out[len(out) - n:]
            r = self.compose(node, args)
            if r.level > _MAX_LEVEL:
                r = self.temp("t", node.dtype, r)
            out.append(r)
        return out[0]

    def compose(self, node: PrimExpr, a: list[R]) -> R:
        pre = [ln for r in a for ln in r.pre]
        level = 1 + max((r.level for r in a), default=0)
        if isinstance(node, Select):
            return self.select(node, a, level)
        if isinstance(node, (And, Or)):
            return self.logical(node, a, level)
        if isinstance(node, Let):
            name = self.var_names[node.var]
            const = "" if node.var.dtype == "handle" else "const "
            decl = [(0, f"{const}{value_type(node.var.dtype)} {name} = {a[0].code};")]
            if node.var not in self.used_vars:
                decl.append((0, f"(void){name};"))
            return R(a[1].code, a[1].prec, a[0].pre + decl + a[1].pre, a[1].level, a[1].exact, a[1].op)
        code, prec, exact, op = self.code(node, a)
        return R(code, prec, pre, level, exact, op)

    def code(self, node: PrimExpr, a: list[R]) -> tuple[str, int, bool, str]:
        d = node.dtype
        if isinstance(node, Var):
            return self.var_names[node], ATOM, True, ""
        if isinstance(node, IntImm):
            text, exact = int_literal(node.value, d)
            return text, UNARY if text.startswith("-") else ATOM, exact, ""
        if isinstance(node, FloatImm):
            text = float_literal(node.value, d)
            return text, UNARY if text[0] in "-(" else ATOM, True, ""
        if type(node) in _ARITH:
            sym, prec = _ARITH[type(node)]
            x, y = self.int64_pair(node, a)
            if d in ("int32", "int64") and isinstance(node, (Add, Sub, Mul)) and not self.never_wraps(node):
                u = "uint32_t" if d == "int32" else "uint64_t"  # wraps: unsigned arithmetic, defined
                return f"({value_type(d)})(({u}){_p(x, x.prec <= UNARY)} {sym} ({u}){_p(y, y.prec <= UNARY)})", \
                    UNARY, True, ""
            if d == "uint16" and isinstance(node, Mul):  # 65535 * 65535 overflows int
                return f"(uint16_t)((uint32_t){_p(x, x.prec <= UNARY)} * (uint32_t){_p(y, y.prec <= UNARY)})", \
                    UNARY, True, ""
            text = f"{_p(x, x.prec <= prec)} {sym} {_p(y, y.prec < prec)}"
            if d == "float16":
                return self.use("plait_c_rh") + f"({text})", ATOM, True, ""
            if d in _SMALL_INTS:
                return f"({storage_type(d)})({text})", UNARY, True, ""
            return text, prec, True, sym
        if isinstance(node, (ShiftLeft, ShiftRight)):
            return self.shift(node, a)
        if type(node) in _BITS:
            sym, prec = _BITS[type(node)]
            x, y = a[0], a[1]
            text = f"{_p(x, x.prec <= UNARY or x.op == sym)} {sym} {_p(y, y.prec <= UNARY)}"
            # & | ^ of two values in int range stay in int range: no cast needed for int64 literals
            return text, prec, x.exact or y.exact, sym
        if type(node) in _CMP:
            sym, prec = _CMP[type(node)]
            return f"{_p(a[0], a[0].prec < REL)} {sym} {_p(a[1], a[1].prec < REL)}", prec, True, sym
        if type(node) in _DIVS:
            return self.division(node, a)
        if isinstance(node, (Min, Max)):
            cls = "f32" if d in ("float16", "float32") else "f64" if d == "float64" else int_class(d)
            fn = self.use(f"plait_c_{'min' if isinstance(node, Min) else 'max'}_{cls}")
            return f"{fn}({a[0].code}, {a[1].code})", ATOM, True, ""
        if isinstance(node, Not):
            return f"!{_p(a[0], a[0].prec <= UNARY)}", UNARY, True, ""
        if isinstance(node, BitwiseNot):
            text = f"~{_p(a[0], a[0].prec <= UNARY)}"
            if is_uint(d) and bits(d) < 32:
                return f"({storage_type(d)}){text}", UNARY, True, ""
            return text, UNARY, a[0].exact, ""
        if isinstance(node, Cast):
            return self.cast(node, a[0])
        if isinstance(node, BufferLoad):
            text = f"{self.buf_names[node.buffer]}[{self.flat_index(node.buffer, node.indices, a)}]"
            if node.buffer.dtype == "float16":
                return self.use("plait_c_h2f") + f"({text})", ATOM, True, ""
            return text, ATOM, True, ""
        if isinstance(node, AddressOf):
            return f"&{self.buf_names[node.buffer]}[{self.flat_index(node.buffer, node.indices, a)}]", UNARY, True, ""
        if isinstance(node, Call):
            return self.call(node, a)
        raise self.fail(f"cannot emit {type(node).__name__}")  # pragma: no cover - verify rejects it first

    def use(self, helper: str) -> str:
        self.helpers.add(helper)
        return helper

    def int64_pair(self, node: PrimExpr, a: list[R]) -> tuple[R, R]:
        """Both operands; an int64 literal printed as int on the left is cast when C would otherwise
        compute in 32 bits (two literals, or the left operand of a shift)."""
        x, y = a
        if node.dtype == "int64" and not x.exact and (not y.exact or isinstance(node, (ShiftLeft, ShiftRight))):
            x = R(f"(int64_t){_p(x, x.prec <= UNARY)}", UNARY)
        return x, y

    def nonnegative(self, node: PrimExpr) -> bool:
        """Is every value of the integer expression ``node`` at least 0?"""
        r = self.int_bounds.bounds(node)
        return r is not None and r[0] >= 0

    def never_wraps(self, node: PrimExpr) -> bool:
        """Does the integer ``+ - *`` ``node`` provably stay in its dtype's range?"""
        r = self.int_bounds.exact(node)
        return r is not None and fits(r, node.dtype)

    def shift(self, node: PrimExpr, a: list[R]) -> tuple[str, int, bool, str]:
        """``<<`` / ``>>``: inline for a literal amount in ``[0, width)`` (``<<`` in unsigned arithmetic),
        else the helper defining every amount."""
        d = node.dtype
        x, y = self.int64_pair(node, a)
        left = isinstance(node, ShiftLeft)
        n = node.b.value if isinstance(node.b, IntImm) else -1
        if not 0 <= n < bits(d):
            fn = self.use(f"plait_c_{'shl' if left else 'shr'}_{d}")
            return f"{fn}({x.code}, {y.code})", ATOM, True, ""
        if not left:
            return f"{_p(x, x.prec <= UNARY)} >> {_p(y, y.prec <= UNARY)}", SHIFT, True, ">>"
        if d in ("uint32", "uint64"):
            return f"{_p(x, x.prec <= UNARY)} << {_p(y, y.prec <= UNARY)}", SHIFT, True, "<<"
        u = "uint64_t" if bits(d) == 64 else "uint32_t"
        return f"({storage_type(d)})(({u}){_p(x, x.prec <= UNARY)} << {n})", UNARY, True, ""

    def division(self, node: PrimExpr, a: list[R]) -> tuple[str, int, bool, str]:
        d, kind = node.dtype, _DIVS[type(node)]
        x, y = self.int64_pair(node, a)
        mod = kind.endswith("mod")
        lit = node.b.value if isinstance(node.b, IntImm) else None
        # a literal divisor that is not 0 (nor -1 or negative for signed floor division) is safe inline;
        # a signed floor division by a positive literal is C's when the dividend is never negative
        literal_ok = lit is not None and (lit != 0 if is_uint(d) else lit > 0 and (
            kind.startswith("trunc") or self.nonnegative(node.a)))
        if literal_ok:
            sym = "%" if mod else "/"
            return f"{_p(x, x.prec <= MUL)} {sym} {_p(y, y.prec < MUL)}", MUL, True, sym
        fn = self.use(f"plait_c_{kind}_{int_class(d)}")
        text = f"{fn}({x.code}, {y.code})"
        if d in _SMALL_INTS:
            return f"({storage_type(d)}){text}", UNARY, True, ""
        return text, ATOM, True, ""

    def cast(self, node: Cast, x: R) -> tuple[str, int, bool, str]:
        src, dst = node.value.dtype, node.dtype
        if dst == "float16":
            if src == "float16":
                return x.code, x.prec, True, x.op
            return self.use("plait_c_rh") + f"({x.code})", ATOM, True, ""
        if src == "float16" and dst == "float32":
            return x.code, x.prec, True, x.op
        if is_float(src) and is_int(dst):
            if clamped_within(node.value, dst):  # a requantization's clamp: C's conversion is exact
                return f"({value_type(dst)}){_p(x, x.prec <= UNARY)}", UNARY, True, ""
            return self.use(f"plait_c_{float_class(src)}_to_{dst}") + f"({x.code})", ATOM, True, ""
        return f"({value_type(dst)}){_p(x, x.prec <= UNARY)}", UNARY, True, ""

    def call(self, node: Call, a: list[R]) -> tuple[str, int, bool, str]:
        args = [r.code for r in a]
        if node.kind == "kernel":  # (its C function: the file's head has its source, codegen_c's _kernels)
            return f"{c_kernel(node.name).symbol}({', '.join(args)})", ATOM, True, ""
        if node.kind == "extern":
            text = f"{node.name}({', '.join(args)})"
            if node.dtype == "float16":  # declared as returning float: keep float16 values exact
                text = self.use("plait_c_rh") + f"({text})"
            return text, ATOM, True, ""
        intr = INTRINSICS.get(node.name)
        argd = node.args[0].dtype
        if self.libm == "plait" and node.name in LIBM_CALL and argd in ("float32", "float16"):
            self.routines.add(node.name)
            text = LIBM_CALL[node.name].format(*args)
        else:
            text = intr.c[argd].format(*args)
        if argd == "float16" and intr.result == "same":
            text = self.use("plait_c_rh") + f"({text})"
        return text, ATOM, True, ""

    def select(self, node: Select, a: list[R], level: int) -> R:
        c, t, f = a
        if not t.pre and not f.pre:
            text = f"{_p(c, c.prec <= EQL)} ? {_p(t, t.prec < COND)} : {_p(f, f.prec < COND)}"
            return R(text, COND, list(c.pre), level, t.exact or f.exact)
        name = self.names.fresh("sel")
        lines = c.pre + [(0, f"{value_type(node.dtype)} {name};"), (0, f"if ({c.code}) {{")]
        lines += _indent(t.pre) + [(1, f"{name} = {t.code};"), (0, "} else {")]
        lines += _indent(f.pre) + [(1, f"{name} = {f.code};"), (0, "}")]
        return R(name, ATOM, lines, 0)

    def logical(self, node: PrimExpr, a: list[R], level: int) -> R:
        x, y = a
        sym, prec = ("&&", LAND) if isinstance(node, And) else ("||", LOR)
        if not y.pre:
            text = f"{_p(x, x.prec <= UNARY or x.op == sym)} {sym} {_p(y, y.prec <= UNARY)}"
            return R(text, prec, list(x.pre), level, True, sym)
        name = self.names.fresh("cond")
        test = name if sym == "&&" else f"!{name}"
        lines = x.pre + [(0, f"bool {name} = {x.code};"), (0, f"if ({test}) {{")]
        lines += _indent(y.pre) + [(1, f"{name} = {y.code};"), (0, "}")]
        return R(name, ATOM, lines, 0)

    def flat_index(self, buf: Buffer, nodes: tuple[PrimExpr, ...], rs: list[R]) -> str:
        """The row-major offset of ``buf[nodes]`` (int32 arithmetic when the buffer has a static size
        below 2**31 and every index is at most 32 bits wide, else int64)."""
        if not nodes:
            return "0"
        static = buf.static_shape
        size = 1
        for n in static or ():
            size *= n
        narrow = static is not None and size < 2**31 and all(
            bits(n.dtype) <= 32 and n.dtype != "uint32" for n in nodes)
        dt = "int32" if narrow else "int64"

        def typed(r: R, node: PrimExpr) -> R:
            if node.dtype == dt and r.exact:
                return r
            return R(f"({value_type(dt)}){_p(r, r.prec <= UNARY)}", UNARY)

        dims = buf.shape
        static_terms = static_index_terms(dims, nodes, rs, self.expr)
        if static_terms is not None:
            terms = []
            for node, r, s in static_terms[0]:
                r = typed(r, node)
                terms.append(_p(r, r.prec <= ADD) if s == 1 else f"{_p(r, r.prec <= MUL)} * {int_literal(s, dt)[0]}")
            const = static_terms[1]
            if not terms:
                return int_literal(const, dt)[0]
            text = " + ".join(terms)
            if const:
                text += f" {'+' if const > 0 else '-'} {int_literal(abs(const), dt)[0]}"
            return text
        acc = typed(rs[0], nodes[0])
        text = _p(acc, acc.prec <= MUL)
        for k in range(1, len(nodes)):
            dim = self.expr(dims[k])
            if dim.pre:
                raise self.fail(f"the shape of buffer '{buf.name}' needs statements to evaluate")
            dim = typed(dim, dims[k])
            r = typed(rs[k], nodes[k])
            text = f"{text if k == 1 and acc.prec <= MUL else '(' + text + ')'} * {_p(dim, dim.prec <= UNARY)}"
            text += f" + {_p(r, r.prec < ADD)}"
        return text

    # ---- statements -----------------------------------------------------------------------------
    def emit_lines(self, lines: Lines, ind: int) -> None:
        self.lines.extend("  " * (ind + d) + t for d, t in lines)

    def function(self) -> tuple[str, tuple[str, ...]]:
        """The C definition and the runtime signature (``"ptr"`` or a scalar dtype per param)."""
        params, sig, unused = [], [], []
        arenas = workspace_params(self.func)
        shared = set(arenas) if len(arenas) > 1 else set()  # one arena per dtype, all over the same bytes
        for p in self.func.params:
            if isinstance(p, Buffer):
                name = self.bind_buf(p)
                const = "" if p in self.written else "const "
                restrict = "" if p in shared else " restrict"
                params.append(f"{const}{storage_type(p.dtype)}*{restrict} {name}")
                sig.append("ptr")
                used = p in self.used_bufs
            else:
                self.check_scalar_param(p)
                name = self.bind_var(p)
                params.append(f"{value_type(p.dtype)} {name}")
                sig.append(p.dtype)
                used = p in self.used_vars
            if not used:
                unused.append(f"  (void){name};")
        # the attribute on a line of its own: the AOT executor reads each definition's head line as its prototype
        attr = [f"PLAIT_C_OPTIMIZE({', '.join(chr(34) + o + chr(34) for o in self.optimize)})"] if self.optimize else []
        head = f"int32_t {self.cname}({', '.join(params) or 'void'}) {{"
        self.lines = [f"/* PrimFunc \"{comment_text(self.func.name or '')}\" */", *attr, head, *unused]
        self.body(self.func.body)
        self.lines += ["  return 0;", "}"]
        return "\n".join(self.lines) + "\n", tuple(sig)

    def body(self, root: Any) -> None:
        work: Work = [(root, 1)]
        while work:
            s, ind = work.pop()
            if isinstance(s, str):
                self.lines.append("  " * ind + s)
            else:
                self.dispatch(s, ind, work)

    def stmt_seq(self, s: SeqStmt, ind: int, work: Work) -> None:
        work.extend((c, ind) for c in reversed(s.stmts))

    def stmt_buffer_store(self, s: BufferStore, ind: int, work: Work) -> None:
        rs = [self.expr(i) for i in s.indices]
        v = self.expr(s.value)
        for r in rs + [v]:
            self.emit_lines(r.pre, ind)
        value = self.use("plait_c_f2h") + f"({v.code})" if s.buffer.dtype == "float16" else v.code
        self.lines.append("  " * ind + f"{self.buf_names[s.buffer]}[{self.flat_index(s.buffer, s.indices, rs)}]"
                                       f" = {value};")

    def stmt_evaluate(self, s: Evaluate, ind: int, work: Work) -> None:
        if has_extern_call(s.value):
            r = self.expr(s.value)
            self.emit_lines(r.pre, ind)
            is_call = isinstance(s.value, Call) and s.value.kind != "intrin"
            self.lines.append("  " * ind + (f"{r.code};" if is_call else f"(void)({r.code});"))

    def stmt_assert(self, s: AssertStmt, ind: int, work: Work) -> None:
        """A failed run-time check: stop, return its status."""
        r = self.expr(s.cond)
        self.emit_lines(r.pre, ind)
        self.lines.append("  " * ind + f"if (!({r.code})) return {s.status};")

    def stmt_let_stmt(self, s: LetStmt, ind: int, work: Work) -> None:
        r = self.expr(s.value)
        self.emit_lines(r.pre, ind)
        name = self.bind_var(s.var)
        const = "" if s.var.dtype == "handle" else "const "
        self.lines.append("  " * ind + f"{const}{value_type(s.var.dtype)} {name} = {r.code};")
        if s.var not in self.used_vars:
            self.lines.append("  " * ind + f"(void){name};")
        work.append((s.body, ind))

    def stmt_allocate(self, s: Allocate, ind: int, work: Work) -> None:
        self.allocate(s.buffer, ind)
        work.append((s.body, ind))

    def stmt_for(self, s: For, ind: int, work: Work) -> None:
        work += [("}", ind), (s.body, ind + 1)]
        self.loop(s, ind)

    def stmt_if_then_else(self, s: IfThenElse, ind: int, work: Work) -> None:
        c = self.expr(s.cond)
        self.emit_lines(c.pre, ind)
        self.lines.append("  " * ind + f"if ({c.code}) {{")
        work.append(("}", ind))
        if s.else_case is not None:
            work += [(s.else_case, ind + 1), ("} else {", ind)]
        work.append((s.then_case, ind + 1))

    def allocate(self, b: Buffer, ind: int) -> None:
        name = self.bind_buf(b)
        pad = "  " * ind
        size = static_size(b)
        static = b.static_shape
        if size is not None:
            count = str(size)
        else:
            count = "1"
            for d in b.shape:
                r = self.expr(d)
                if r.pre:
                    raise self.fail(f"the shape of buffer '{b.name}' needs statements to evaluate")
                count = r.code if count == "1" else f"{count} * {_p(r, r.prec <= UNARY)}"
        t = storage_type(b.dtype)
        if b.scope == "global.workspace" and static is not None:
            # scratch memory not lifted by plait.memory.workspace.LiftWorkspaces (which plait.build runs,
            # making it a slice of the workspace arena parameter): a static array (not reentrant),
            # used through a restrict pointer (with the array itself gcc keeps loop accumulators in
            # memory: docs/schedules.md, section 4)
            self.uses_align = True
            storage = self.names.fresh(f"{name}_storage")
            self.lines.append(f"{pad}static {t} {storage}[{count}] PLAIT_C_ALIGN(64);")
            self.lines.append(f"{pad}{t}* restrict {name} = {storage};")
        else:
            # local (and dynamically sized workspace): a stack array
            self.lines.append(f"{pad}{t} {name}[{count}];")
        if b not in self.used_bufs:
            self.lines.append(f"{pad}(void){name};")

    def loop(self, s: For, ind: int) -> None:
        pad = "  " * ind
        lo, ext = self.expr(s.min), self.expr(s.extent)
        self.emit_lines(lo.pre + ext.pre, ind)
        var = self.bind_var(s.loop_var)
        t = value_type(s.loop_var.dtype)
        d = s.loop_var.dtype
        if isinstance(s.min, IntImm) and isinstance(s.extent, IntImm):
            end = int_literal(s.min.value + s.extent.value, d)[0]
        elif not (lo.pre or ext.pre) and _is_pure_simple(s.min) and _is_pure_simple(s.extent):
            is_zero = isinstance(s.min, IntImm) and s.min.value == 0
            end = ext.code if is_zero else f"{_p(lo, lo.prec <= ADD)} + {_p(ext, ext.prec < ADD)}"
        else:
            end = self.names.fresh(f"{var}_end")
            self.lines.append(f"{pad}const {t} {end} = {_p(lo, lo.prec <= ADD)} + {_p(ext, ext.prec < ADD)};")
        stage = s.annotations.get("stage")
        if stage is not None:
            self.lines.append(f"{pad}/* stage {comment_text(stage)} */")
        if s.kind == "vectorized":
            self.lines.append(f"{pad}#pragma omp simd")
        elif s.kind == "unrolled":
            n = s.extent.value if isinstance(s.extent, IntImm) else 4
            if n > 1:
                self.lines.append(f"{pad}#pragma GCC unroll {min(n, 65534)}")
        elif s.kind == "parallel":
            self.lines.append(f"{pad}/* parallel loop, run serially (single thread) */")
        self.lines.append(f"{pad}for ({t} {var} = {lo.code}; {var} < {end}; ++{var}) {{")
