"""One PrimFunc -> one LLVM IR function (text), the body of :func:`plait.backends.llvm.backend.codegen_llvm`.

Mirrors the C backend (:mod:`plait.backends.c.emit`) and TIR's semantics (:mod:`plait.tir.expr`):

- values: ``bool`` is ``i1`` (``i8`` in memory, like numpy), signed and unsigned integers are
  ``iN`` (the TIR dtype says which instructions: ``sdiv``/``udiv``, ``ashr``/``lshr``,
  ``slt``/``ult``), ``float16`` is LLVM ``half`` (LLVM computes each operation in float and rounds
  once, as the C backend does; math intrinsics run in float32 and are rounded back);
- every operation is defined for every input, as TIR defines it (docs/tir.md, "Numeric
  semantics"); nothing is poison or undefined: integer ``+ - * <<`` wrap (no ``nsw``, except in
  buffer index arithmetic, where an overflow would be an out-of-bounds access anyway); a shift
  amount outside ``[0, width)`` is selected apart (0, or the sign fill for ``>>``); division by zero
  gives 0 and ``INT_MIN / -1`` wraps (the divisor is selected to 1 and the result replaced);
  float -> integer casts compute what ``llvm.fptosi.sat`` / ``llvm.fptoui.sat`` do (truncation,
  NaN -> 0, saturation) as the C backend does: clamp, convert, select (vectorizes);
  ``min``/``max`` are ``a < b ? a : b`` (``fcmp olt`` + ``select``); float ``+ - *`` carry the
  ``contract`` flag (FMA contraction, like ``-ffp-contract=fast``); no other fast-math flag;
- ``Select``, ``And``, ``Or`` are lazy: when the operand not always evaluated may load, divide or
  call an extern function, they become branches and a ``phi`` (a select may guard an
  out-of-bounds load); otherwise a ``select`` / ``and`` / ``or`` instruction;
- loops: a header with a ``phi``; min and extent are evaluated once at entry. ``vectorized``
  loops get ``llvm.loop.vectorize.enable`` and ``llvm.loop.parallel_accesses`` (every memory
  access inside is in the loop's access group: iterations are independent, as ``#pragma omp simd``
  asserts in C), shaped for LLVM's vectorizers by :mod:`plait.backends.llvm.vector`; ``unrolled``
  loops ``llvm.loop.unroll.full`` (constant extent) or ``unroll.count 4``; ``parallel`` loops run
  serially (single thread, as in C); the int8 kernels' ``dot_product`` loops are vector code of
  :mod:`plait.backends.llvm.dot` (``vpdpbusd`` where the CPU has it);
- ``global.workspace`` allocations of static size are internal globals aligned to 64 bytes (not
  reentrant, as in C); ``local`` ones ``alloca`` in the entry block; dynamic sizes ``alloca``
  between ``llvm.stacksave``/``stackrestore``.

Traversals are iterative (explicit work stacks), so 2,000-deep expressions and long statement
sequences compile.
"""

from __future__ import annotations

from typing import Any, Callable

from plait.backends.llvm.arith import ArithEmitter, Safety
from plait.backends.llvm.dot import DotEmitter, match_dots
from plait.backends.llvm.vector import VectorLoops
from plait.backends.llvm.ir_text import (
    _FSUFFIX, LLVM_INTRINSICS, STORAGE_TYPES, VALUE_TYPES, ModuleState, float_literal, global_name,
    int_literal, libm_name, local_name,
)
from plait.errors import PlaitError
from plait.tir.codegen import FunctionEmitterBase, has_extern_call, static_index_terms, static_size
from plait.tir.errors import KernelError
from plait.tir.kernels import implementation
from plait.tir.dtype import bits, is_float, is_uint
from plait.tir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, AddressOf, And, BitwiseAnd, BitwiseNot, BitwiseOr, BitwiseXor, BufferLoad, Call,
    Cast, Div, FloatImm, FloorDiv, FloorMod, IntImm, Let, Max, Min, Mul, Not, Or, PrimExpr, Select, ShiftLeft,
    ShiftRight, Sub, TruncDiv, TruncMod, Var,
)
from plait.tir.stmt import Allocate, AssertStmt, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt


class LLVMCodegenError(PlaitError):
    """TIR that the LLVM backend cannot express (the message names the PrimFunc)."""


Work = list[Any]  # statements to emit, and closures that end a block (a loop's latch, a branch's jump)


_ARITH = {Add: ("add", "fadd"), Sub: ("sub", "fsub"), Mul: ("mul", "fmul")}
_BITS = {BitwiseAnd: "and", BitwiseOr: "or", BitwiseXor: "xor"}
_ICMP = {EQ: ("eq", "eq"), NE: ("ne", "ne"), LT: ("slt", "ult"), LE: ("sle", "ule"), GT: ("sgt", "ugt"),
         GE: ("sge", "uge")}
_FCMP = {EQ: "oeq", NE: "une", LT: "olt", LE: "ole", GT: "ogt", GE: "oge"}
_DIVS = (FloorDiv, FloorMod, TruncDiv, TruncMod)


class LLVMFunctionEmitter(ArithEmitter, DotEmitter, VectorLoops, FunctionEmitterBase[str]):
    """One PrimFunc -> one LLVM function (:meth:`function`)."""

    language = "LLVM"
    error = LLVMCodegenError

    def __init__(self, func: PrimFunc, symbol: str, state: ModuleState, where: str, workspace_prefix: str,
                 simd_bits: int = 128):
        super().__init__(func, where)
        self.symbol, self.m = symbol, state
        self.simd_bits = simd_bits
        self.ws_prefix = workspace_prefix
        self.lines: list[str] = []
        self.entry: list[str] = []
        self.count = 0
        self.block = "entry"
        self.vals: dict[Var, str] = {}
        self.bufs: dict[Buffer, str] = {}
        self.groups: list[str] = []  # access groups of the enclosing vectorized loops
        self.safety = Safety(self.int_bounds)

    # ---- helpers ----------------------------------------------------------------------------------
    def tmp(self, hint: str = "t") -> str:
        self.count += 1
        return f"%{hint}.{self.count}"

    def label(self, hint: str) -> str:
        self.count += 1
        return f"{hint}.{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def op(self, text: str, hint: str = "t") -> str:
        r = self.tmp(hint)
        self.emit(f"{r} = {text}")
        return r

    def start(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.block = label

    def access_md(self) -> str:
        if not self.groups:
            return ""
        ref = self.groups[0] if len(self.groups) == 1 else self.m.md("!{" + ", ".join(self.groups) + "}")
        return f", !llvm.access.group {ref}"

    # ---- expressions ------------------------------------------------------------------------------
    def expr(self, root: PrimExpr, index: bool = False) -> str:
        """Emit ``root``; returns its LLVM value (a register or a constant)."""
        work: list[tuple[str, Any]] = [("e", root)]
        vals: list[str] = []
        while work:
            kind, x = work.pop()
            if kind == "e":
                node = x
                if isinstance(node, Var):
                    if node not in self.vals:
                        raise self.fail(f"variable '{node.name}' is not bound")  # pragma: no cover - verify
                    vals.append(self.vals[node])
                elif isinstance(node, IntImm):
                    vals.append(int_literal(node.value, node.dtype))
                elif isinstance(node, FloatImm):
                    vals.append(float_literal(node.value, node.dtype))
                elif isinstance(node, Let):
                    work += [("e", node.body), ("bind", node.var), ("e", node.value)]
                elif isinstance(node, Select) and (self.safety.unsafe(node.true_value)
                                                   or self.safety.unsafe(node.false_value)):
                    st: dict[str, Any] = {}
                    work += [("sel_end", (node, st)), ("e", node.false_value), ("sel_else", st),
                             ("e", node.true_value), ("sel_then", st), ("e", node.cond)]
                elif isinstance(node, (And, Or)) and self.safety.unsafe(node.b):
                    st = {}
                    work += [("lg_end", (node, st)), ("e", node.b), ("lg_mid", (node, st)), ("e", node.a)]
                else:
                    children = node._children()
                    work.append(("c", node))
                    work.extend(("e", c) for c in reversed(children))
            elif kind == "c":
                n = len(x._children())
                args = vals[len(vals) - n:] if n else []
                if n:
                    del vals[len(vals) - n:]
                vals.append(self.compose(x, args, index))
            elif kind == "bind":
                self.vals[x] = vals.pop()
            elif kind == "sel_then":
                c = vals.pop()
                x["then"], x["else"], x["end"] = self.label("sel.t"), self.label("sel.f"), self.label("sel.end")
                self.emit(f"br i1 {c}, label %{x['then']}, label %{x['else']}")
                self.start(x["then"])
            elif kind == "sel_else":
                x["tv"], x["tb"] = vals.pop(), self.block
                self.emit(f"br label %{x['end']}")
                self.start(x["else"])
            elif kind == "sel_end":
                node, st = x
                fv, fb = vals.pop(), self.block
                self.emit(f"br label %{st['end']}")
                self.start(st["end"])
                t = VALUE_TYPES[node.dtype]
                vals.append(self.op(f"phi {t} [ {st['tv']}, %{st['tb']} ], [ {fv}, %{fb} ]", "sel"))
            elif kind == "lg_mid":
                node, st = x
                a = vals.pop()
                st["a_block"], st["rhs"], st["end"] = self.block, self.label("lg.rhs"), self.label("lg.end")
                st["short"] = "true" if isinstance(node, Or) else "false"
                if isinstance(node, And):
                    self.emit(f"br i1 {a}, label %{st['rhs']}, label %{st['end']}")
                else:
                    self.emit(f"br i1 {a}, label %{st['end']}, label %{st['rhs']}")
                self.start(st["rhs"])
            elif kind == "lg_end":
                node, st = x
                b, bb = vals.pop(), self.block
                self.emit(f"br label %{st['end']}")
                self.start(st["end"])
                vals.append(self.op(f"phi i1 [ {st['short']}, %{st['a_block']} ], [ {b}, %{bb} ]", "lg"))
        return vals[0]

    def compose(self, node: PrimExpr, a: list[str], index: bool) -> str:
        d = node.dtype
        t = VALUE_TYPES[d]
        if type(node) in _ARITH:
            iop, fop = _ARITH[type(node)]
            if is_float(d):
                flags = " contract" if d != "float16" else ""
                return self.op(f"{fop}{flags} {t} {a[0]}, {a[1]}")
            nsw = " nsw" if index and d in ("int32", "int64") else ""
            return self.op(f"{iop}{nsw} {t} {a[0]}, {a[1]}")
        if isinstance(node, Div):
            return self.op(f"fdiv {t} {a[0]}, {a[1]}")
        if isinstance(node, _DIVS):
            return self.division(node, a[0], a[1])
        if isinstance(node, (Min, Max)):
            lt = isinstance(node, Min)
            if is_float(d):
                c = self.op(f"fcmp {'olt' if lt else 'ogt'} {t} {a[0]}, {a[1]}", "c")
            else:
                pred = ("slt" if lt else "sgt") if not (is_uint(d) or d == "bool") else ("ult" if lt else "ugt")
                c = self.op(f"icmp {pred} {t} {a[0]}, {a[1]}", "c")
            return self.op(f"select i1 {c}, {t} {a[0]}, {t} {a[1]}")
        if type(node) in _BITS:
            return self.op(f"{_BITS[type(node)]} {t} {a[0]}, {a[1]}")
        if isinstance(node, (ShiftLeft, ShiftRight)):
            return self.shift(node, a[0], a[1])
        if type(node) in _ICMP:
            od = node.a.dtype
            ot = VALUE_TYPES[od]
            if is_float(od):
                return self.op(f"fcmp {_FCMP[type(node)]} {ot} {a[0]}, {a[1]}", "c")
            s, u = _ICMP[type(node)]
            return self.op(f"icmp {u if (is_uint(od) or od == 'bool') else s} {ot} {a[0]}, {a[1]}", "c")
        if isinstance(node, And):
            return self.op(f"and i1 {a[0]}, {a[1]}")
        if isinstance(node, Or):
            return self.op(f"or i1 {a[0]}, {a[1]}")
        if isinstance(node, Not):
            return self.op(f"xor i1 {a[0]}, true")
        if isinstance(node, BitwiseNot):
            return self.op(f"xor {t} {a[0]}, -1")
        if isinstance(node, Select):
            return self.op(f"select i1 {a[0]}, {t} {a[1]}, {t} {a[2]}")
        if isinstance(node, Cast):
            return self.cast(a[0], node.value.dtype, d)
        if isinstance(node, BufferLoad):
            ptr = self.address(node.buffer, node.indices, a)
            st = STORAGE_TYPES[d]
            v = self.tmp("ld")
            self.emit(f"{v} = load {st}, ptr {ptr}{self.access_md()}")
            return self.op(f"trunc i8 {v} to i1") if d == "bool" else v
        if isinstance(node, AddressOf):
            return self.address(node.buffer, node.indices, a)
        if isinstance(node, Call):
            return self.call(node, a)
        raise self.fail(f"cannot emit {type(node).__name__}")  # pragma: no cover - verify rejects it first

    def call(self, node: Call, a: list[str]) -> str:
        d = node.dtype
        if node.kind == "extern":
            return self.extern_call(node, a)
        if node.kind == "kernel":  # (LLVM cannot call the C backend's kernels: it ships none of its own)
            try:
                implementation(node.name, "llvm")
            except KernelError as exc:
                raise self.fail(str(exc)) from None
            raise self.fail(f"kernel '{node.name}': calling a kernel is not supported")  # pragma: no cover
        name = node.name
        argd = node.args[0].dtype
        at = VALUE_TYPES[argd]
        if name == "isnan":
            return self.op(f"fcmp uno {at} {a[0]}, {a[0]}", "c")
        if name in ("isinf", "isfinite"):
            fabs = f"llvm.fabs.{_FSUFFIX[argd]}"
            self.m.declare(fabs, f"declare {at} @{fabs}({at})", external=False)
            m = self.op(f"call {at} @{fabs}({at} {a[0]})")
            inf = float_literal(float("inf"), argd)
            return self.op(f"fcmp {'oeq' if name == 'isinf' else 'olt'} {at} {m}, {inf}", "c")
        # float16: computed with the float32 function, rounded back (as in C)
        cd = "float32" if argd == "float16" else argd
        ct = VALUE_TYPES[cd]
        args = [self.cast(v, argd, cd) for v in a]
        if name == "rsqrt":
            fn = f"llvm.sqrt.{_FSUFFIX[cd]}"
            self.m.declare(fn, f"declare {ct} @{fn}({ct})", external=False)
            s = self.op(f"call {ct} @{fn}({ct} {args[0]})")
            r = self.op(f"fdiv {ct} {float_literal(1.0, cd)}, {s}")
        else:
            variants = self.m.vector_variants.get((name, cd))
            if name in LLVM_INTRINSICS and not variants:
                fn, ext = f"llvm.{name}.{_FSUFFIX[cd]}", False
            else:
                fn, ext = libm_name(name, cd), True
            params = ", ".join([ct] * len(args))
            attrs = " #1" if ext else ""
            libm = libm_name(name, cd)  # what LLVM lowers an llvm.* intrinsic to, too
            have = self.m.c_uses.setdefault(libm, ("intrin", f"{ct} @{libm}({params})"))
            if have[1] != f"{ct} @{libm}({params})":
                raise self.fail(f"the math intrinsic '{name}' needs the C function '{libm}' as {ct}({params}), "
                                f"but an extern call uses it as {have[1]}")
            self.m.declare(fn, f"declare {ct} @{fn}({params}){attrs}", external=ext)
            site = f" {self.m.variant_attrs(fn, ct, len(args), variants)}" if variants else ""
            r = self.op(f"call {ct} @{fn}({', '.join(f'{ct} {v}' for v in args)}){site}")
        return self.cast(r, cd, d) if d != cd else r

    def extern_call(self, node: Call, a: list[str]) -> str:
        def ctype(dt: str) -> str:  # C passes float16 values as float, bools as zero-extended i1
            return "float" if dt == "float16" else ("i1 zeroext" if dt == "bool" else VALUE_TYPES[dt])

        args = []
        for v, e in zip(a, node.args):
            if e.dtype == "float16":
                v = self.cast(v, "float16", "float32")
            args.append(f"{ctype(e.dtype)} {v}")
        ret = {"float16": "float", "bool": "zeroext i1"}.get(node.dtype, VALUE_TYPES[node.dtype])
        ret_t = ret.replace("zeroext ", "")
        params = ", ".join(ctype(e.dtype) for e in node.args)
        sym = global_name(node.name)
        sig = f"{ret_t} @{node.name}({params.replace('i1 zeroext', 'i1')})"
        have = self.m.c_uses.setdefault(node.name, ("extern", sig))
        if have[1] != sig:
            raise self.fail(f"extern function '{node.name}' is called as {node.dtype}("
                            f"{', '.join(e.dtype for e in node.args)}), which does not match its use as a "
                            f"math intrinsic ({have[1]})")
        self.m.declare(node.name, f"declare {ret} {sym}({params})")
        text = f"call {ret_t} {sym}({', '.join(args)})"
        if node.dtype == "void":
            self.emit(text)
            return "undef"
        r = self.op(text, "call")
        return self.cast(r, "float32", "float16") if node.dtype == "float16" else r

    # ---- addresses --------------------------------------------------------------------------------
    def address(self, buf: Buffer, nodes: tuple[PrimExpr, ...], evaluated: list[str]) -> str:
        """A pointer to ``buf[nodes]`` (``evaluated``: the indices' values, in order)."""
        base = self.bufs.get(buf)
        if base is None:
            raise self.fail(f"buffer '{buf.name}' is not a parameter or allocated here")  # pragma: no cover
        off = self.flat_index(buf, nodes, evaluated)
        if off == "0":
            return base
        return self.op(f"getelementptr inbounds {STORAGE_TYPES[buf.dtype]}, ptr {base}, i64 {off}", "p")

    def to_i64(self, v: str, dtype: str) -> str:
        if dtype in ("int64", "uint64"):
            return v
        if v.lstrip("-").isdigit():
            return str(int(v) & ((1 << bits(dtype)) - 1)) if is_uint(dtype) else v
        return self.op(f"{'zext' if is_uint(dtype) or dtype == 'bool' else 'sext'} {VALUE_TYPES[dtype]} {v} to i64")

    def flat_index(self, buf: Buffer, nodes: tuple[PrimExpr, ...], vals: list[str]) -> str:
        """The row-major element offset of ``buf[nodes]`` as an i64 value."""
        if not nodes:
            return "0"
        dims = buf.shape
        static_terms = static_index_terms(dims, nodes, vals, lambda x: self.expr(x, index=True))
        if static_terms is not None:
            terms = []
            for node, v, stride in static_terms[0]:
                v = self.to_i64(v, node.dtype)
                terms.append(v if stride == 1 else self.op(f"mul nsw i64 {v}, {stride}", "i"))
            const = static_terms[1]
            acc = None
            for term in terms:
                acc = term if acc is None else self.op(f"add nsw i64 {acc}, {term}", "i")
            if acc is None:
                return str(const)
            return self.op(f"add nsw i64 {acc}, {const}", "i") if const else acc
        acc = self.to_i64(vals[0], nodes[0].dtype)
        for k in range(1, len(nodes)):
            dim = self.to_i64(self.expr(dims[k], index=True), dims[k].dtype)
            acc = self.op(f"mul nsw i64 {acc}, {dim}", "i")
            acc = self.op(f"add nsw i64 {acc}, {self.to_i64(vals[k], nodes[k].dtype)}", "i")
        return acc

    # ---- statements -------------------------------------------------------------------------------
    def function(self) -> tuple[str, tuple[str, ...]]:
        """The LLVM definition and the runtime signature (``"ptr"`` or a scalar dtype per param)."""
        params, sig = [], []
        for k, p in enumerate(self.func.params):
            if isinstance(p, Buffer):
                name = f"%{local_name(p.name)}.a{k}"
                self.bufs[p] = name
                ro = "" if p in self.written else " readonly"
                params.append(f"ptr noalias{ro} {name}")
                sig.append("ptr")
            else:
                self.check_scalar_param(p)
                name = f"%{local_name(p.name)}.a{k}"
                self.vals[p] = name
                params.append(f"{'i1 zeroext' if p.dtype == 'bool' else VALUE_TYPES[p.dtype]} {name}")
                sig.append(p.dtype)
        self.statements(self.func.body)
        self.emit("ret i32 0")
        head = f"define i32 {global_name(self.symbol)}({', '.join(params)}) #0 {{"
        comment = "; PrimFunc " + (self.func.name or "").encode("unicode_escape").decode("ascii")
        text = "\n".join([comment, head, "entry:", *("  " + e for e in self.entry), *self.lines, "}"])
        return text + "\n", tuple(sig)

    def statements(self, root: Any) -> None:
        work: Work = [root]
        while work:
            s = work.pop()
            if isinstance(s, Stmt):
                self.dispatch(s, work)
            else:
                s()

    def stmt_seq(self, s: SeqStmt, work: Work) -> None:
        work.extend(reversed(s.stmts))

    def stmt_buffer_store(self, s: BufferStore, work: Work) -> None:
        vals = [self.expr(i, index=True) for i in s.indices]
        v = self.expr(s.value)
        ptr = self.address(s.buffer, s.indices, vals)
        if s.buffer.dtype == "bool":
            v = self.op(f"zext i1 {v} to i8")
        self.emit(f"store {STORAGE_TYPES[s.buffer.dtype]} {v}, ptr {ptr}{self.access_md()}")

    def stmt_evaluate(self, s: Evaluate, work: Work) -> None:
        if has_extern_call(s.value):
            self.expr(s.value)

    def stmt_assert(self, s: AssertStmt, work: Work) -> None:
        c = self.expr(s.cond)
        ok, failed = self.label("check.ok"), self.label("check.failed")
        unlikely = self.m.md('!{!"branch_weights", i32 1048575, i32 1}')
        self.emit(f"br i1 {c}, label %{ok}, label %{failed}, !prof {unlikely}")
        self.start(failed)
        self.emit(f"ret i32 {s.status}")
        self.start(ok)

    def stmt_let_stmt(self, s: LetStmt, work: Work) -> None:
        self.vals[s.var] = self.expr(s.value)
        work.append(s.body)

    def stmt_allocate(self, s: Allocate, work: Work) -> None:
        restore = self.allocate(s.buffer)
        if restore is not None:
            work.append(restore)
        work.append(s.body)

    def stmt_for(self, s: For, work: Work) -> None:
        dots = match_dots(s) if self.simd_bits >= 128 else None
        if dots is not None:
            self.dots(dots)  # (plait.backends.llvm.dot: the int8 kernels' dot products as vector code)
            return
        pieces = self.vector_pieces(s)
        if pieces is not None:
            work.append(SeqStmt(pieces))
            return
        work += self.loop(s)

    def stmt_if_then_else(self, s: IfThenElse, work: Work) -> None:
        c = self.expr(s.cond)
        then, merge = self.label("if.then"), self.label("if.end")
        other = self.label("if.else") if s.else_case is not None else merge
        self.emit(f"br i1 {c}, label %{then}, label %{other}")
        self.start(then)
        close = self._jump(merge)
        if s.else_case is None:
            work += [lambda merge=merge: self.start(merge), close, s.then_case]
        else:
            work += [lambda merge=merge: self.start(merge), close, s.else_case,
                     lambda other=other: self.start(other), close, s.then_case]

    def _jump(self, label: str) -> Callable[[], None]:
        return lambda: self.emit(f"br label %{label}")

    def allocate(self, b: Buffer) -> Callable[[], None] | None:
        st = STORAGE_TYPES[b.dtype]
        size = static_size(b)
        if size is not None:
            if b.scope == "global.workspace":
                name = f"@{self.ws_prefix}.{local_name(b.name)}.{len(self.m.globals)}"
                self.m.globals.append(f"{name} = internal global [{size} x {st}] zeroinitializer, align 64")
                self.bufs[b] = name
            else:
                name = f"%{local_name(b.name)}.{self.count + 1}"
                self.count += 1
                self.entry.append(f"{name} = alloca {st}, i64 {size}, align 32")
                self.bufs[b] = name
            return None
        count = "1"
        for d in b.shape:
            v = self.to_i64(self.expr(d, index=True), d.dtype)
            count = v if count == "1" else self.op(f"mul i64 {count}, {v}")
        self.m.declare("llvm.stacksave.p0", "declare ptr @llvm.stacksave.p0()", external=False)
        self.m.declare("llvm.stackrestore.p0", "declare void @llvm.stackrestore.p0(ptr)", external=False)
        sp = self.op("call ptr @llvm.stacksave.p0()", "sp")
        self.bufs[b] = self.op(f"alloca {st}, i64 {count}, align 32", local_name(b.name))
        return lambda: self.emit(f"call void @llvm.stackrestore.p0(ptr {sp})")

    def loop(self, s: For) -> list[Any]:
        d = s.loop_var.dtype
        t = VALUE_TYPES[d]
        lo = self.expr(s.min)
        ext = self.expr(s.extent)
        if isinstance(s.min, IntImm) and isinstance(s.extent, IntImm):
            end = int_literal(s.min.value + s.extent.value, d)
            if s.extent.value <= 0:
                return []  # never runs
        else:
            end = self.op(f"add {t} {lo}, {ext}", "end")
        var = self.tmp(local_name(s.loop_var.name))
        nxt = self.tmp(local_name(s.loop_var.name) + ".next")
        hdr, body, latch, done = (self.label(h) for h in ("for.hdr", "for.body", "for.latch", "for.end"))
        pre = self.block
        self.emit(f"br label %{hdr}")
        self.start(hdr)
        self.emit(f"{var} = phi {t} [ {lo}, %{pre} ], [ {nxt}, %{latch} ]")
        cmp = "ult" if is_uint(d) else "slt"
        c = self.op(f"icmp {cmp} {t} {var}, {end}", "c")
        self.emit(f"br i1 {c}, label %{body}, label %{done}")
        self.start(body)
        self.vals[s.loop_var] = var
        props = ['!{!"llvm.loop.mustprogress"}']
        group = None
        if s.kind == "vectorized":
            group = self.m.md("distinct !{}", cache=False)
            props.append('!{!"llvm.loop.parallel_accesses", ' + group + "}")
            props += self.vector_hints(s)
            self.groups.append(group)
        elif s.kind == "unrolled":
            if isinstance(s.extent, IntImm):
                props.append('!{!"llvm.loop.unroll.full"}')
            else:
                props.append('!{!"llvm.loop.unroll.count", i32 4}')
        refs = [self.m.md(p, cache="parallel_accesses" not in p) for p in props]
        loop_md = self.m.md("distinct !{{self}, " + ", ".join(refs) + "}", cache=False)
        nsw = "nuw" if is_uint(d) else "nsw"

        def close() -> None:
            if group is not None:
                self.groups.remove(group)
            self.emit(f"br label %{latch}")
            self.start(latch)
            self.emit(f"{nxt} = add {nsw} {t} {var}, 1")
            self.emit(f"br label %{hdr}, !llvm.loop {loop_md}")
            self.start(done)

        return [close, s.body]
