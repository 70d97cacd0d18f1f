"""The TIR verifier: well-formedness and types of PrimFuncs. Run it after every TIR pass and hook.

``verify(func_or_module)`` raises :class:`TIRVerifyError` naming the function and the first
problem (``problems`` lists all of them, in program order). It checks scoping (undefined
variables, buffers used outside their allocation or never declared, a variable bound twice),
buffer accesses (number and dtype of indices, stored dtypes), operand dtypes of every operator,
conditions, loop bounds, intrinsics, kernel calls (their declared parameters), storage scopes, loop-kind
nesting and function attributes.
Linear in the size of the function, iterative (no recursion per node).

Verification is memoized, because passes verify every PrimFunc they make and schedule primitives
verify after each step: a PrimFunc that verified is not checked again, and an expression node that
passed its checks keeps the set of variables and buffers it uses (attribute ``_verified_uses``), so
re-verifying a function that shares most of its expressions with a verified one (every schedule
primitive's result) checks only the new nodes and the scoping of each expression. Both are facts
about immutable nodes; nodes under a ``Let`` are not memoized (a let variable may be bound once per
function, which depends on the function).
"""

from __future__ import annotations

from typing import Any

from plait.errors import RegistryError
from plait.tir.dtype import VOID, is_bool, is_float, is_int, is_numeric
from plait.tir.errors import KernelError, TIRVerifyError
from plait.tir.expr import (
    BITWISE_OPS, EQ, NE, AddressOf, BinaryOp, BitwiseNot, BufferLoad, Call, Cast, Div,
    FloorDiv, FloorMod, Let, LOGICAL_OPS, Not, PrimExpr, Select, TruncDiv, TruncMod, Var,
)
from plait.tir.functor import pre_order
from plait.tir.intrin import INTRINSICS
from plait.tir.kernels import get_kernel
from plait.tir.printer import TIRPrinter, print_node
from plait.tir.stmt import (
    SCOPES, Allocate, AssertStmt, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt,
)

_INT_ONLY = (FloorDiv, FloorMod, TruncDiv, TruncMod) + BITWISE_OPS


def _snip(node: Any) -> str:
    if isinstance(node, str):
        return node
    text = TIRPrinter().expr(node) if isinstance(node, PrimExpr) else print_node(node).split("\n")[0]
    return "`" + (text if len(text) <= 60 else text[:57] + "...") + "`"


def _needs(node: BinaryOp) -> tuple[Any, str]:
    if isinstance(node, Div):
        return is_float, "float"
    if isinstance(node, _INT_ONLY):
        return is_int, "integer"
    if isinstance(node, LOGICAL_OPS):
        return is_bool, "bool"
    if isinstance(node, (EQ, NE)):
        return (lambda d: is_numeric(d) or is_bool(d)), "numeric or bool"
    return is_numeric, "numeric"


class _Verifier:
    def __init__(self, func: PrimFunc, name: str):
        self.func, self.name = func, name
        self.problems: list[str] = []
        self.vars: dict[Var, int] = {}  # in scope -> nesting count
        self.bufs: set[Buffer] = set()
        self.ever_bound: set[Var] = set()
        self.ever_allocated: set[Buffer] = set()
        self.allocated_anywhere = _allocations(func.body)
        self.free: dict[PrimExpr, frozenset] = {}  # expr -> (free vars | used buffers)
        self.clean: set[PrimExpr] = set()  # checked without a problem, no Let below: memoizable
        self.loops: list[For] = []

    def problem(self, text: str) -> None:
        self.problems.append(text)

    # -- scoping -------------------------------------------------------------------------------------
    def bind_var(self, v: Var, what: str = "variable") -> None:
        if v in self.ever_bound:
            self.problem(f"{what} '{v.name}' is bound more than once")
        self.ever_bound.add(v)
        self.vars[v] = self.vars.get(v, 0) + 1

    def unbind_var(self, v: Var) -> None:
        self.vars[v] -= 1
        if not self.vars[v]:
            del self.vars[v]

    def use_buffer(self, b: Buffer, where: Any) -> None:
        if b in self.bufs:
            return
        if b in self.allocated_anywhere:
            self.problem(f"buffer '{b.name}' is used outside its allocation in {_snip(where)}")
        else:
            self.problem(f"buffer '{b.name}' is neither a parameter nor allocated in {_snip(where)}")

    # -- the function ----------------------------------------------------------------------------------
    def run(self) -> list[str]:
        f = self.func
        for key in ("global_symbol", "piece"):
            if key in f.attrs and not isinstance(f.attrs[key], str):
                self.problem(f"attribute '{key}' must be a str, got {f.attrs[key]!r}")
        n = f.attrs.get("num_inputs")
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= len(f.params)):
            self.problem(f"attribute 'num_inputs' must be an int in [0, {len(f.params)}], got {n!r}")
        seen: set[Any] = set()
        for k, p in enumerate(f.params):
            if p in seen:
                self.problem(f"parameter {k} ('{p.name}') appears more than once")
            seen.add(p)
            if isinstance(p, Var):
                self.bind_var(p, "parameter")
            else:
                self.bufs.add(p)
                if p.scope != "global":
                    self.problem(f"parameter buffer '{p.name}' must have scope 'global', got '{p.scope}'")
                if p in self.allocated_anywhere:
                    self.problem(f"buffer '{p.name}' is a parameter and is also allocated")
        for p in f.params:
            if isinstance(p, Buffer):
                self.shape(p, f"parameter buffer '{p.name}'")
        self.stmts(f.body)
        return self.problems

    def shape(self, b: Buffer, what: str) -> None:
        for d in b.shape:
            self.expr(d, f"the shape of {what}")
            if not is_int(d.dtype):
                self.problem(f"the shape of {what} must be integers, got {d.dtype} in {_snip(d)}")

    def stmts(self, root: Stmt) -> None:
        work: list[tuple[str, Any]] = [("stmt", root)]
        while work:
            op, s = work.pop()
            if op == "unbind_var":
                self.unbind_var(s)
            elif op == "unbind_buf":
                self.bufs.discard(s)
            elif op == "leave_loop":
                self.loops.pop()
            else:
                self.stmt(s, work)

    def stmt(self, s: Stmt, work: list) -> None:  # noqa: C901 - one case per statement kind
        if isinstance(s, SeqStmt):
            work.extend(("stmt", c) for c in reversed(s.stmts))
        elif isinstance(s, BufferStore):
            self.use_buffer(s.buffer, s)
            for i in s.indices:
                self.expr(i, s)
            self.indices(s.buffer, s.indices, s)
            self.expr(s.value, s)
            if s.value.dtype != s.buffer.dtype:
                self.problem(f"store of a {s.value.dtype} value to buffer '{s.buffer.name}' ({s.buffer.dtype}) "
                             f"in {_snip(s)}")
        elif isinstance(s, Evaluate):
            self.expr(s.value, s, allow_void=True)
        elif isinstance(s, AssertStmt):
            self.expr(s.cond, s)
            if not is_bool(s.cond.dtype):
                self.problem(f"assert condition must be bool, got {s.cond.dtype} in {_snip(s)}")
            inside = next((lp for lp in self.loops if lp.kind in ("vectorized", "parallel")), None)
            if inside is not None:
                self.problem(f"assert inside {inside.kind} loop '{inside.loop_var.name}' (a check may stop the "
                             "function, which a vectorized or parallel loop cannot)")
        elif isinstance(s, For):
            v = s.loop_var
            self.expr(s.min, s)
            self.expr(s.extent, s)
            if not is_int(v.dtype):
                self.problem(f"loop variable '{v.name}' must be an integer, got {v.dtype}")
            elif s.min.dtype != v.dtype or s.extent.dtype != v.dtype:
                self.problem(f"loop '{v.name}': min and extent must be {v.dtype} like the loop variable, "
                             f"got {s.min.dtype} and {s.extent.dtype}")
            if s.kind == "parallel":
                outer = next((lp for lp in self.loops if lp.kind == "vectorized"), None)
                if outer is not None:
                    self.problem(f"parallel loop '{v.name}' is inside vectorized loop '{outer.loop_var.name}'")
            self.bind_var(v, "loop variable")
            self.loops.append(s)
            work += [("leave_loop", s), ("unbind_var", v), ("stmt", s.body)]
        elif isinstance(s, IfThenElse):
            self.expr(s.cond, s)
            if not is_bool(s.cond.dtype):
                self.problem(f"if condition must be bool, got {s.cond.dtype} in {_snip(s)}")
            if s.else_case is not None:
                work.append(("stmt", s.else_case))
            work.append(("stmt", s.then_case))
        elif isinstance(s, LetStmt):
            self.expr(s.value, s)
            if s.value.dtype != s.var.dtype:
                self.problem(f"let variable '{s.var.name}' is {s.var.dtype} but its value is {s.value.dtype}")
            self.bind_var(s.var, "let variable")
            work += [("unbind_var", s.var), ("stmt", s.body)]
        elif isinstance(s, Allocate):
            b = s.buffer
            if b.scope not in SCOPES:
                self.problem(f"buffer '{b.name}' has unknown scope '{b.scope}' (expected {', '.join(SCOPES)})")
            self.shape(b, f"allocated buffer '{b.name}'")
            if b in self.ever_allocated:
                self.problem(f"buffer '{b.name}' is allocated more than once")
            self.ever_allocated.add(b)
            self.bufs.add(b)
            work += [("unbind_buf", b), ("stmt", s.body)]

    def indices(self, b: Buffer, indices: tuple[PrimExpr, ...], where: Any) -> None:
        if len(indices) != b.ndim:
            self.problem(f"buffer '{b.name}' has {b.ndim} dimension(s) but is indexed with {len(indices)} "
                         f"in {_snip(where)}")
        for k, i in enumerate(indices):
            if not is_int(i.dtype):
                self.problem(f"index {k} of buffer '{b.name}' must be an integer, got {i.dtype} in {_snip(where)}")

    # -- expressions -----------------------------------------------------------------------------------
    def expr(self, root: PrimExpr, where: Any, allow_void: bool = False) -> None:
        """Check one expression tree used by statement ``where`` in the current scope."""
        if root.dtype == VOID and not allow_void:
            self.problem(f"void call '{getattr(root, 'name', '?')}' used as a value in {_snip(where)}")
        self.walk(root)
        missing = [x for x in self.free[root] if not (x in self.vars if isinstance(x, Var) else x in self.bufs)]
        if missing:
            for n in pre_order(root, unique=True):  # report in first-use order
                x = n.buffer if isinstance(n, (BufferLoad, AddressOf)) else n
                if x in missing:
                    missing.remove(x)
                    if isinstance(x, Var):
                        self.problem(f"undefined variable '{x.name}' in {_snip(where)}")
                    else:
                        self.use_buffer(x, where)

    def walk(self, root: PrimExpr) -> None:
        """Check every node of ``root`` not checked yet (in this function or, memoized, before) and
        record what each uses in ``self.free``."""
        free, clean = self.free, self.clean
        stack: list[tuple[PrimExpr, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in free:
                continue
            if not expanded:
                known = node.__dict__.get(_USES)
                if known is not None:
                    free[node] = known
                    clean.add(node)
                    continue
                stack.append((node, True))
                stack.extend((c, False) for c in reversed(node._children()))  # type: ignore[misc]
                continue
            before = len(self.problems)
            self.local(node)
            kids = node._children()
            uses = _uses(node, [free[c] for c in kids])  # type: ignore[index]
            free[node] = uses
            if len(self.problems) == before and not isinstance(node, Let) and all(c in clean for c in kids):
                clean.add(node)
                object.__setattr__(node, _USES, uses)

    def local(self, e: PrimExpr) -> None:  # noqa: C901 - one case per expression kind
        for c in e._children():
            if c.dtype == VOID:  # type: ignore[attr-defined]
                self.problem(f"void call '{getattr(c, 'name', '?')}' used as a value in {_snip(e)}")
                return
        if isinstance(e, BinaryOp):
            ok, needs = _needs(e)
            if e.a.dtype != e.b.dtype:
                self.problem(f"operands of '{e.symbol}' have different dtypes {e.a.dtype} and {e.b.dtype} "
                             f"in {_snip(e)}")
            elif not ok(e.a.dtype):
                self.problem(f"'{e.symbol}' needs {needs} operands, got {e.a.dtype} in {_snip(e)}")
        elif isinstance(e, Not) and not is_bool(e.a.dtype):
            self.problem(f"'not' needs a bool operand, got {e.a.dtype} in {_snip(e)}")
        elif isinstance(e, BitwiseNot) and not is_int(e.a.dtype):
            self.problem(f"'~' needs an integer operand, got {e.a.dtype} in {_snip(e)}")
        elif isinstance(e, Select):
            if not is_bool(e.cond.dtype):
                self.problem(f"select condition must be bool, got {e.cond.dtype} in {_snip(e)}")
            if e.true_value.dtype != e.false_value.dtype:
                self.problem(f"select branches have different dtypes {e.true_value.dtype} and "
                             f"{e.false_value.dtype} in {_snip(e)}")
        elif isinstance(e, Cast):
            if not (is_numeric(e.value.dtype) or is_bool(e.value.dtype)):
                self.problem(f"cannot cast a {e.value.dtype} value in {_snip(e)}")
        elif isinstance(e, (BufferLoad, AddressOf)):
            self.indices(e.buffer, e.indices, e)
        elif isinstance(e, Call) and e.kind == "intrin":
            self.intrinsic(e)
        elif isinstance(e, Call) and e.kind == "kernel":
            try:
                get_kernel(e.name).check(e.args, e.dtype)
            except KernelError as exc:
                self.problem(f"{exc} in {_snip(e)}")
        elif isinstance(e, Let):
            if e.value.dtype != e.var.dtype:
                self.problem(f"let variable '{e.var.name}' is {e.var.dtype} but its value is {e.value.dtype}")
            if e.var in self.ever_bound:
                self.problem(f"let variable '{e.var.name}' is bound more than once")
            self.ever_bound.add(e.var)

    def intrinsic(self, e: Call) -> None:
        try:
            intr = INTRINSICS.get(e.name)
        except RegistryError as exc:
            self.problem(f"{exc} in {_snip(e)}")
            return
        if len(e.args) != intr.arity:
            self.problem(f"intrinsic '{e.name}' takes {intr.arity} argument(s), got {len(e.args)} in {_snip(e)}")
            return
        dtypes = sorted({a.dtype for a in e.args})
        if len(dtypes) != 1 or not is_float(dtypes[0]):
            self.problem(f"intrinsic '{e.name}' needs float arguments of one dtype, got {', '.join(dtypes)} "
                         f"in {_snip(e)}")
        elif e.dtype != intr.result_dtype(dtypes[0]):
            self.problem(f"intrinsic '{e.name}' returns {intr.result_dtype(dtypes[0])}, not {e.dtype} in {_snip(e)}")


def _allocations(body: Stmt) -> set[Buffer]:
    """The buffers allocated anywhere in ``body`` (statements only: expressions hold no Allocate)."""
    out: set[Buffer] = set()
    stack = [body]
    while stack:
        s = stack.pop()
        if isinstance(s, Allocate):
            out.add(s.buffer)
            stack.append(s.body)
        elif isinstance(s, SeqStmt):
            stack.extend(s.stmts)
        elif isinstance(s, (For, LetStmt)):
            stack.append(s.body)
        elif isinstance(s, IfThenElse):
            stack.append(s.then_case)
            if s.else_case is not None:
                stack.append(s.else_case)
    return out


def _uses(node: PrimExpr, kids: list[frozenset]) -> frozenset:
    """The variables and buffers ``node`` uses, from its children's (shared when nothing is added)."""
    if isinstance(node, Let):
        return kids[0] | (kids[1] - {node.var})
    own: Any = node if isinstance(node, Var) else node.buffer if isinstance(node, (BufferLoad, AddressOf)) else None
    if own is None:
        if not kids:
            return _NOTHING
        if len(kids) == 1:
            return kids[0]
    out = set().union(*kids) if kids else set()
    if own is not None:
        out.add(own)
    return frozenset(out)


_NOTHING: frozenset = frozenset()
_USES = "_verified_uses"  # memo on expression nodes (see the module docstring)
_VERIFIED = "_verified"  # memo on PrimFuncs that verified


def verify(obj: Any, name: str | None = None) -> None:
    """Check a PrimFunc, or every PrimFunc of an IRModule; raise TIRVerifyError on any problem."""
    if isinstance(obj, PrimFunc):
        funcs = [(name or obj.name or "<anonymous>", obj)]
    elif hasattr(obj, "items"):
        funcs = [(k, f) for k, f in obj.items() if isinstance(f, PrimFunc)]
    else:
        raise TIRVerifyError(f"verify: expected a PrimFunc or an IRModule, got {type(obj).__name__}")
    problems = []
    for fname, f in funcs:
        if f.__dict__.get(_VERIFIED):
            continue
        found = _Verifier(f, fname).run()
        if not found:
            object.__setattr__(f, _VERIFIED, True)
        problems += [f"PrimFunc '{fname}': {p}" for p in found]
    if problems:
        more = f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})" if len(problems) > 1 else ""
        raise TIRVerifyError(problems[0] + more, problems)
