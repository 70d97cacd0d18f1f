"""Loop-nest analysis shared by the schedule primitives, the default rules and the cost model.

- finding loops by name (:func:`get_loop`), paths from the function body to a statement, replacing
  statements (:func:`replace`);
- integer expressions: :func:`linear` (affine form over variables), :func:`bounds` (interval
  arithmetic over loop ranges);
- memory accesses of a statement (:func:`accesses`) and the dependence test the primitives use
  (:func:`order_constraints`): for every buffer written in a loop body, the loops whose relative
  order must be kept. A loop whose variable is in no such set carries no dependence: its iterations
  may run in any order (parallel, vectorized), and loops can be permuted freely around it.

The dependence test is conservative and exact about float rounding: a permutation it accepts runs
every read-modify-write of every element in the same order as before (bit-identical results).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

from plait.tir import structural_equal, structural_hash
from plait.tir.expr import (
    AddressOf, Add, BufferLoad, Call, Cast, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Sub, TruncDiv,
    TruncMod, Var,
)
from plait.tir.functor import StmtExprMutator, pre_order
from plait.tir.stmt import (
    Allocate, AssertStmt, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt,
)
from plait.schedule.errors import ScheduleError

STAGE_KEYS = ("stage", "op", "pattern")
"""Annotations of a stage's outermost loop (set by ``te.create_prim_func``); they stay on the
outermost loop of the stage whatever the schedule does."""

_EXPR_KINDS = (
    "var", "int_imm", "float_imm", "add", "sub", "mul", "div", "floordiv", "floormod", "truncdiv", "truncmod",
    "min", "max", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right", "eq", "ne", "lt",
    "le", "gt", "ge", "and", "or", "not", "bitwise_not", "select", "cast", "buffer_load", "address_of", "call",
    "let",
)


# ---- statements -------------------------------------------------------------------------------------


def children(s: Stmt) -> tuple[Stmt, ...]:
    """The statements directly inside ``s``."""
    if isinstance(s, SeqStmt):
        return s.stmts
    if isinstance(s, (For, LetStmt, Allocate)):
        return (s.body,)
    if isinstance(s, IfThenElse):
        return (s.then_case,) if s.else_case is None else (s.then_case, s.else_case)
    return ()


def walk(root: Stmt) -> Iterator[tuple[Stmt, tuple[Stmt, ...]]]:
    """Every statement under ``root`` (included) with its ancestors (outermost first), pre-order."""
    stack: list[tuple[Stmt, tuple[Stmt, ...]]] = [(root, ())]
    while stack:
        s, parents = stack.pop()
        yield s, parents
        inner = parents + (s,)
        stack.extend((c, inner) for c in reversed(children(s)))


def loops_of(root: Stmt) -> list[For]:
    return [s for s, _ in walk(root) if isinstance(s, For)]


def loop_names(func: PrimFunc) -> list[str]:
    return [lp.loop_var.name for lp in loops_of(func.body)]


def get_loop(func: PrimFunc, name: str, where: str) -> For:
    """The loop whose variable is called ``name``; raise listing the loops if there is none or several."""
    if isinstance(name, For):
        return name
    found = [lp for lp in loops_of(func.body) if lp.loop_var.name == name]
    if len(found) == 1:
        return found[0]
    names = loop_names(func)
    if not found:
        listed = ", ".join(f"'{n}'" for n in names) or "none"
        raise ScheduleError(f"{where}: no loop '{name}' in PrimFunc '{func.name}' (loops: {listed})")
    raise ScheduleError(f"{where}: {len(found)} loops are called '{name}' in PrimFunc '{func.name}'; "
                        "loop names must be unique to address loops")


def path_to(root: Stmt, target: Stmt) -> tuple[Stmt, ...]:
    """The ancestors of ``target`` under ``root`` (outermost first)."""
    for s, parents in walk(root):
        if s is target:
            return parents
    raise ScheduleError(f"statement not found: {type(target).__name__}")


def check_new_names(func: PrimFunc, names: list[str], where: str) -> None:
    taken = set(loop_names(func))
    for n in names:
        if not isinstance(n, str) or not n:
            raise ScheduleError(f"{where}: loop names must be non-empty strings, got {n!r}")
        if n in taken:
            raise ScheduleError(f"{where}: a loop called '{n}' already exists in PrimFunc '{func.name}'")
        taken.add(n)


class _Replace(StmtExprMutator):
    def __init__(self, mapping: Mapping[Stmt, Stmt]):
        super().__init__()
        self.mapping = mapping


def _enter_stmt(self: _Replace, node: Stmt) -> Stmt | None:
    return self.mapping.get(node)


def _enter_expr(self: _Replace, node: PrimExpr) -> PrimExpr:
    return node  # statements only: expressions are left as they are


for _k in ("buffer_store", "for", "if_then_else", "seq", "evaluate", "let_stmt", "allocate"):
    setattr(_Replace, "enter_" + _k, _enter_stmt)
for _k in _EXPR_KINDS:
    setattr(_Replace, "enter_" + _k, _enter_expr)


def replace(func: PrimFunc, mapping: Mapping[Stmt, Stmt]) -> PrimFunc:
    """``func`` with the statements of ``mapping`` (by identity) replaced."""
    body = _Replace(mapping).visit(func.body)
    return func.with_body(body)


def chain(top: For) -> list[For]:
    """``top`` and the loops nested in it as sole bodies (a perfect nest), outermost first."""
    out = [top]
    while isinstance(out[-1].body, For):
        out.append(out[-1].body)
    return out


def const_int(e: PrimExpr) -> int | None:
    return e.value if isinstance(e, IntImm) else None


def const_extent(loop: For, where: str) -> int:
    n = const_int(loop.extent)
    if n is None:
        raise ScheduleError(f"{where}: loop '{loop.loop_var.name}' needs a constant extent, "
                            f"got a symbolic one")
    return n


def stage_annotations(loop: For) -> dict:
    return {k: v for k, v in loop.annotations.items() if k in STAGE_KEYS}


def other_annotations(loop: For) -> dict:
    return {k: v for k, v in loop.annotations.items() if k not in STAGE_KEYS}


# ---- integer expressions ----------------------------------------------------------------------------


def linear(e: PrimExpr) -> tuple[dict[Var, int], int] | None:
    """``e`` as ``sum(coef * var) + const`` (casts between integers are looked through), or None."""
    return _linear(e, None)  # type: ignore[return-value]


_DIVMOD = {FloorDiv: "div", TruncDiv: "div", FloorMod: "mod", TruncMod: "mod"}


def _linear(e: PrimExpr, atoms: dict | None) -> tuple[dict, int] | None:
    """Like :func:`linear`; with ``atoms`` (a dict to fill), ``x // c`` and ``x % c`` (``c > 0``) are
    atoms keyed ``("div" | "mod", structural hash of x, c)`` instead of making the form None."""
    forms: dict[PrimExpr, tuple[dict, int] | None] = {}
    for n in _post_order_expr(e):
        if n in forms:
            continue
        if isinstance(n, IntImm):
            forms[n] = ({}, n.value)
        elif isinstance(n, Var):
            forms[n] = ({n: 1}, 0)
        elif isinstance(n, Cast) and n.dtype.startswith(("int", "uint")) and n.value.dtype.startswith(("int", "uint")):
            forms[n] = forms[n.value]
        elif isinstance(n, (Add, Sub)):
            a, b = forms[n.a], forms[n.b]
            if a is None or b is None:
                forms[n] = None
                continue
            sign = 1 if isinstance(n, Add) else -1
            coefs = dict(a[0])
            for v, c in b[0].items():
                coefs[v] = coefs.get(v, 0) + sign * c
            forms[n] = ({v: c for v, c in coefs.items() if c}, a[1] + sign * b[1])
        elif isinstance(n, Mul):
            a, b = forms[n.a], forms[n.b]
            if a is None or b is None or (a[0] and b[0]):
                forms[n] = None
                continue
            (va, ca), k = (a, b[1]) if not b[0] else (b, a[1])
            forms[n] = ({v: c * k for v, c in va.items() if c * k}, ca * k)
        elif atoms is not None and type(n) in _DIVMOD and isinstance(n.b, IntImm) and n.b.value > 0:
            key = (_DIVMOD[type(n)], structural_hash(n.a), n.b.value)
            atoms[key] = n.a
            forms[n] = ({key: 1}, 0)
        else:
            forms[n] = None
    return forms[e]


def flat_linear(indices: tuple[PrimExpr, ...], shape: tuple[int, ...]) -> tuple[dict[Var, int], int] | None:
    """The row-major offset ``sum(index[d] * stride[d])`` of an access as a linear form, using
    ``(x // c) * c + x % c == x`` (what a fused loop's indices give), or None if not linear."""
    if len(indices) != len(shape):
        return None
    atoms: dict = {}
    total: dict = {}
    const = 0
    stride = 1
    for comp, n in reversed(list(zip(indices, shape))):
        f = _linear(comp, atoms)
        if f is None:
            return None
        for k, c in f[0].items():
            total[k] = total.get(k, 0) + c * stride
        const += f[1] * stride
        stride *= n
    changed = True
    while changed:
        changed = False
        for key in [k for k in total if isinstance(k, tuple) and k[0] == "div"]:
            mod = ("mod", key[1], key[2])
            a, b = total.get(key, 0), total.get(mod, 0)
            if b and a == key[2] * b:
                del total[key], total[mod]
                f = _linear(atoms[key], atoms)
                if f is None:
                    return None
                for k, c in f[0].items():
                    total[k] = total.get(k, 0) + c * b
                const += f[1] * b
                changed = True
                break
    if any(not isinstance(k, Var) for k, c in total.items() if c):
        return None
    return {k: c for k, c in total.items() if c}, const


def _post_order_expr(e: PrimExpr) -> list[PrimExpr]:
    out: list[PrimExpr] = []
    stack: list[tuple[PrimExpr, bool]] = [(e, False)]
    while stack:
        n, done = stack.pop()
        if done:
            out.append(n)
            continue
        stack.append((n, True))
        if isinstance(n, (Add, Sub, Mul, Cast, FloorDiv, FloorMod, TruncDiv, TruncMod)):
            stack.extend((c, False) for c in reversed(n._children()))  # type: ignore[misc]
    return out


def bounds(e: PrimExpr, ranges: Mapping[Var, tuple[int, int]]) -> tuple[int, int] | None:
    """Inclusive integer bounds of ``e`` when each variable of ``ranges`` is in its range; None if unknown."""
    out: dict[PrimExpr, tuple[int, int] | None] = {}
    stack: list[tuple[PrimExpr, bool]] = [(e, False)]
    while stack:
        n, done = stack.pop()
        if not done:
            if n not in out:
                stack.append((n, True))
                if isinstance(n, (Add, Sub, Mul, Min, Max, FloorDiv, FloorMod, Cast)):
                    stack.extend((c, False) for c in n._children())  # type: ignore[misc]
            continue
        if isinstance(n, IntImm):
            out[n] = (n.value, n.value)
        elif isinstance(n, Var):
            out[n] = ranges.get(n)
        elif isinstance(n, Cast):
            out[n] = out[n.value] if n.dtype.startswith(("int", "uint")) else None
        elif isinstance(n, (Add, Sub, Mul, Min, Max, FloorDiv, FloorMod)):
            out[n] = _interval(n, out[n.a], out[n.b])
        else:
            out[n] = None
    return out[e]


def _interval(n: PrimExpr, a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    if a is None or b is None:
        return None
    if isinstance(n, Add):
        return a[0] + b[0], a[1] + b[1]
    if isinstance(n, Sub):
        return a[0] - b[1], a[1] - b[0]
    if isinstance(n, Mul):
        p = [x * y for x in a for y in b]
        return min(p), max(p)
    if isinstance(n, Min):
        return min(a[0], b[0]), min(a[1], b[1])
    if isinstance(n, Max):
        return max(a[0], b[0]), max(a[1], b[1])
    if b[0] != b[1] or b[0] <= 0:
        return None
    d = b[0]
    if isinstance(n, FloorDiv):
        return a[0] // d, a[1] // d
    if a[0] // d == a[1] // d:  # FloorMod within one period
        return a[0] % d, a[1] % d
    return 0, d - 1


def loop_range(loop: For) -> tuple[int, int] | None:
    lo, n = const_int(loop.min), const_int(loop.extent)
    return None if lo is None or n is None or n <= 0 else (lo, lo + n - 1)


def ranges_of(loops: list[For]) -> dict[Var, tuple[int, int]]:
    out = {}
    for lp in loops:
        r = loop_range(lp)
        if r is not None:
            out[lp.loop_var] = r
    return out


# ---- accesses and dependences -----------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    write: bool
    loops: tuple[For, ...]  # the loops around the access, inside the analysed statement


def accesses(root: Stmt) -> tuple[list[Access], set[Buffer], bool]:
    """Accesses under ``root`` in program order (a store's loads come before the store), the buffers
    allocated under ``root``, and whether there is an opaque access (extern call, address_of)."""
    out: list[Access] = []
    private: set[Buffer] = set()
    opaque = False
    for s, parents in walk(root):
        loops = tuple(p for p in parents if isinstance(p, For)) + ((s,) if isinstance(s, For) else ())
        exprs: list[PrimExpr] = []
        if isinstance(s, Allocate):
            private.add(s.buffer)
        elif isinstance(s, BufferStore):
            exprs = [*s.indices, s.value]
        elif isinstance(s, Evaluate):
            exprs = [s.value]
        elif isinstance(s, (LetStmt,)):
            exprs = [s.value]
        elif isinstance(s, (IfThenElse, AssertStmt)):
            exprs = [s.cond]
        elif isinstance(s, For):
            exprs = [s.min, s.extent]
        for e in exprs:
            for n in pre_order(e):
                if isinstance(n, BufferLoad):
                    out.append(Access(n.buffer, n.indices, False, loops))
                elif isinstance(n, AddressOf) or (isinstance(n, Call) and n.kind != "intrin"):
                    opaque = True
        if isinstance(s, BufferStore):
            out.append(Access(s.buffer, s.indices, True, loops))
    return out, private, opaque


def same_indices(a: tuple[PrimExpr, ...], b: tuple[PrimExpr, ...]) -> bool:
    return len(a) == len(b) and all(x is y or structural_equal(x, y) for x, y in zip(a, b))


def _determined_by(coefs: Mapping[Var, int], varying: set[Var], extents: Mapping[Var, int]) -> set[Var]:
    """The varying variables of one affine form ``sum(c * v)`` it determines (mixed radix test)."""
    terms = sorted(((abs(c), v) for v, c in coefs.items() if v in varying and extents.get(v) != 1),
                   key=lambda t: t[0])
    if any(v not in extents for _, v in terms):
        return set()
    reach = 0
    for c, v in terms:
        if c <= reach:
            return set()
        reach += c * (extents[v] - 1)
    return {v for _, v in terms}


def determined_vars(indices: tuple[PrimExpr, ...], varying: set[Var], extents: Mapping[Var, int]) -> set[Var]:
    """Variables of ``varying`` whose values the index tuple determines while the other variables are
    fixed: those of an affine component ``sum(c * v) + rest`` whose coefficients form a mixed radix
    over the variables' (known) extents. A variable of extent 1 is always determined."""
    out = {v for v in varying if extents.get(v) == 1}
    for comp in indices:
        form = linear(comp)
        if form is not None:
            out |= _determined_by(form[0], varying, extents)
    return out


_PLAIN = (Var, IntImm, Add, Sub, Mul, Min, Max, Cast, FloorDiv, FloorMod, TruncDiv, TruncMod)


class _Freeze(StmtExprMutator):
    """Each ``min``/``max`` of an index that uses none of the ``varying`` loop variables (an overlapping
    split's ``min(o * 16, 109)``, inside the loops of ``o``) as a variable of its own: a constant of the
    nest being analysed, so that the index stays linear in the varying ones. Equal expressions get the
    same variable."""

    def __init__(self, varying: set[Var]):
        super().__init__()
        self.varying = varying
        self.seen: list[tuple[PrimExpr, Var]] = []

    def _freeze(self, pre: PrimExpr, post: PrimExpr) -> PrimExpr:
        if any(isinstance(n, Var) and n in self.varying or not isinstance(n, _PLAIN) for n in pre_order(post)):
            return post  # varies in the nest, or reads a buffer
        for e, v in self.seen:
            if structural_equal(e, post):
                return v
        v = Var(f"_invariant{len(self.seen)}", post.dtype)
        self.seen.append((post, v))
        return v

    rewrite_min = rewrite_max = _freeze


def order_constraints(body: Stmt, loops: list[For]) -> list[tuple[Buffer | None, set[Var]]]:
    """For each buffer written in ``body`` (run once per iteration of the nest ``loops``), the loop
    variables of ``loops`` whose relative order must be kept (None for an opaque access).

    Two iterations can touch the same element of a buffer only if they agree on the variables
    *determined* by some index component that is the same expression in every access of the buffer
    (:func:`determined_vars`); the other variables must keep their order. Buffers allocated in
    ``body`` are private to an iteration. An opaque access (extern call, address_of) constrains every loop.
    """
    acc, private, opaque = accesses(body)
    every = {lp.loop_var for lp in loops}
    if opaque:
        return [(None, set(every))]
    inner = loops_of(body)
    varying = every | {lp.loop_var for lp in inner}
    extents: dict[Var, int] = {}
    for lp in list(loops) + inner:
        n = const_int(lp.extent)
        if n is not None:
            extents[lp.loop_var] = n
    bound_inside = {s.var for s, _ in walk(body) if isinstance(s, LetStmt)}
    frozen = _Freeze(varying | bound_inside)
    acc = [Access(a.buffer, tuple(frozen.visit(i) for i in a.indices), a.write, a.loops) for a in acc]
    out: list[tuple[Buffer | None, set[Var]]] = []
    written: list[Buffer] = []
    for a in acc:
        if a.write and a.buffer not in private and a.buffer not in written:
            written.append(a.buffer)
    for b in written:
        mine = [a for a in acc if a.buffer is b]
        det: set[Var] = set()
        shape = b.static_shape
        if shape is not None and all(same_indices(mine[0].indices, a.indices) for a in mine[1:]) and \
                not any(n in bound_inside for i in mine[0].indices for n in pre_order(i) if isinstance(n, Var)):
            flat = flat_linear(mine[0].indices, shape)
            if flat is not None:
                det |= _determined_by(flat[0], varying, extents)
        for d, comp in enumerate(mine[0].indices):
            if not all(same_indices((comp,), (a.indices[d],)) for a in mine[1:]):
                continue
            if any(n in bound_inside for n in pre_order(comp) if isinstance(n, Var)):
                continue
            det |= determined_vars((comp,), varying, extents)
        out.append((b, every - det))
    return out
