"""Reduction primitives: decompose_reduction (loop distribution), rfactor, cache_write.

- :func:`decompose_reduction` distributes a loop over the init / update / epilogue statements of its
  body (the update is the statement that reads and writes one buffer), expanding the accumulators
  allocated in the body by the loop's extent. With it, the spatial loops of a register tile move
  below the reduction loops: ``for i: {acc = 0; for k: acc += ..; out = f(acc)}`` becomes
  ``for i_init: acc[i] = 0; for i: for k: acc[i] += ..; for i_epi: out = f(acc[i])``.
- :func:`rfactor` gives a reduction loop its own partial accumulators (``acc_rf[.., r]``), combined
  after the reduction: the loop can then be vectorized. It reassociates the reduction (float sums
  may differ in the last bits; max/min are exact).
- :func:`cache_write` makes the accesses of a buffer inside a loop's body go to a ``local`` buffer
  covering the region the body touches, written back once at the end of the body.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from plait.tir import evaluate_expr, simplify, structural_equal, substitute
from plait.tir.equal import structural_hash as tir_structural_hash
from plait.tir.op import cast
from plait.tir.dtype import is_float
from plait.tir.expr import BufferLoad, FloatImm, IntImm, PrimExpr, Var
from plait.tir.functor import StmtExprMutator, pre_order
from plait.tir.stmt import Allocate, AssertStmt, Buffer, BufferStore, For, IfThenElse, PrimFunc, SeqStmt, Stmt, seq
from plait.schedule.analysis import (
    accesses, check_new_names, const_extent, get_loop, linear, loop_range, loops_of, order_constraints,
    other_annotations, path_to, replace, same_indices, stage_annotations, walk,
)
from plait.schedule.errors import ScheduleError
from plait.schedule.loops import finish


class _Retarget(StmtExprMutator):
    """Accesses of ``old`` go to ``new`` at ``index_fn(indices)``; its Allocate is dropped or replaced."""

    def __init__(self, old: Buffer, new: Buffer | None, index_fn: Callable, drop_alloc: bool = True):
        super().__init__()
        self.old, self.new, self.index_fn, self.drop_alloc = old, new, index_fn, drop_alloc

    def rewrite_buffer_load(self, pre: BufferLoad, post: BufferLoad) -> PrimExpr:
        if post.buffer is self.old:
            return BufferLoad(self.new, self.index_fn(post.indices))
        return post

    def rewrite_buffer_store(self, pre: BufferStore, post: BufferStore) -> Stmt:
        if post.buffer is self.old:
            return BufferStore(self.new, post.value, self.index_fn(post.indices))
        return post

    def rewrite_allocate(self, pre: Allocate, post: Allocate) -> Stmt:
        if post.buffer is self.old and self.drop_alloc:
            return post.body
        return post


def retarget(node: Stmt, old: Buffer, new: Buffer, index_fn: Callable) -> Stmt:
    return _Retarget(old, new, index_fn).visit(node)


@dataclass
class BoxDim:
    extent: int
    local: PrimExpr  # the index into the local buffer (in the inner loop variables)
    to_global: Callable[[PrimExpr], PrimExpr]  # the original index for a local index


def box(indices: tuple[PrimExpr, ...], inner: dict[Var, tuple[int, int]], where: str) -> list[BoxDim]:
    """The dense box an index tuple sweeps when the ``inner`` variables run over their ranges: each
    component must be ``rest + v`` or ``rest - v`` for one inner variable ``v``, or not use them."""
    dims: list[BoxDim] = []
    seen: set[Var] = set()
    for comp in indices:
        used = [n for n in pre_order(comp) if isinstance(n, Var) and n in inner]
        if not used:
            dims.append(BoxDim(1, IntImm(0, comp.dtype), lambda t, c=comp: c))
            continue
        form = linear(comp)
        terms = [(v, c) for v, c in (form[0].items() if form else ()) if v in inner]
        if form is None or len(terms) != 1 or abs(terms[0][1]) != 1 or terms[0][0] in seen:
            raise ScheduleError(f"{where}: index `{comp}` does not sweep a dense box (expected one loop "
                                "variable with coefficient 1 per dimension)")
        v, c = terms[0]
        seen.add(v)
        lo, hi = inner[v]
        if c == 1:
            local = simplify(v - lo) if lo else v
            dims.append(BoxDim(hi - lo + 1, local, lambda t, c=comp, v=v, lo=lo: simplify(substitute(c, {v: t + lo}))))
        else:
            dims.append(BoxDim(hi - lo + 1, simplify(IntImm(hi, v.dtype) - v),
                               lambda t, c=comp, v=v, hi=hi: simplify(substitute(c, {v: IntImm(hi, v.dtype) - t}))))
    return dims


def box_nest(names: list[str], dims: list[BoxDim], make_body: Callable[[list[PrimExpr]], Stmt],
             dtype: str = "int64") -> Stmt:
    """Loops over the box (dimensions of extent 1 get no loop), around ``make_body(local indices)``."""
    vars_: list[PrimExpr] = []
    loops: list[tuple[Var, int]] = []
    for name, d in zip(names, dims):
        if d.extent == 1:
            vars_.append(IntImm(0, dtype))
        else:
            v = Var(name, dtype)
            vars_.append(v)
            loops.append((v, d.extent))
    body = make_body(vars_)
    for v, n in reversed(loops):
        body = For(v, 0, n, "serial", body)
    return body


def _rmw_buffers(s: Stmt) -> set[Buffer]:
    acc, private, _ = accesses(s)
    reads = {a.buffer for a in acc if not a.write}
    return {a.buffer for a in acc if a.write and a.buffer in reads and a.buffer not in private}


# ---- decompose_reduction ------------------------------------------------------------------------------


def decompose_reduction(func: PrimFunc, loop: str) -> PrimFunc:
    """Distribute ``loop`` over the init statements, the update (read-modify-write) statements and the
    epilogue of its body: up to three loops ``<loop>_init``, ``<loop>``, ``<loop>_epi``. Buffers
    allocated around the body's statements get a leading dimension of the loop's extent."""
    where = f"decompose_reduction('{loop}')"
    lp = get_loop(func, loop, where)
    n = const_extent(lp, where)
    body, allocs = lp.body, []
    while isinstance(body, Allocate):
        allocs.append(body.buffer)
        body = body.body
    stmts = list(body.stmts) if isinstance(body, SeqStmt) else [body]
    rmw = [k for k, s in enumerate(stmts) if _rmw_buffers(s)]
    if not rmw:
        raise ScheduleError(f"{where}: the body of loop '{loop}' has no reduction (no statement reads and "
                            "writes the same buffer)")
    groups = [("init", stmts[: rmw[0]]), ("main", stmts[rmw[0]: rmw[-1] + 1]), ("epi", stmts[rmw[-1] + 1:])]
    groups = [(tag, g) for tag, g in groups if g]
    if len(groups) < 2:
        raise ScheduleError(f"{where}: the body of loop '{loop}' is only a reduction; nothing to decompose")
    names = {"init": f"{loop}_init", "main": loop, "epi": f"{loop}_epi"}
    check_new_names(func, [names[t] for t, _ in groups if t != "main"], where)
    # a buffer shared by two groups (one writing) must be indexed injectively by the loop
    per_group = []
    for _, g in groups:
        acc, private, opaque = accesses(seq(*g))
        if opaque:
            raise ScheduleError(f"{where}: the body has an extern call or address_of; cannot distribute it")
        per_group.append((acc, private))
    for b, keep in order_constraints(body, [lp]):
        if b in allocs or lp.loop_var not in keep:
            continue
        users = [k for k, (acc, _) in enumerate(per_group) if any(a.buffer is b for a in acc)]
        if len(users) > 1:
            raise ScheduleError(f"{where}: buffer '{b.name}' is shared by the statements across iterations of "
                                f"loop '{loop}'; distributing the loop would change the results")
    # expand the accumulators by the loop's extent: acc[...] -> acc[loop - min, ...]
    offset = simplify(lp.loop_var - lp.min) if not (isinstance(lp.min, IntImm) and lp.min.value == 0) else lp.loop_var
    expanded: dict[Buffer, Buffer] = {}
    new_stmts = list(stmts)
    for b in allocs:
        used_in = [k for k, (acc, _) in enumerate(per_group) if any(a.buffer is b for a in acc)]
        if len(used_in) <= 1:
            continue
        nb = Buffer(b.name, (IntImm(n, "int64"),) + b.shape, b.dtype, b.scope)
        new_stmts = [retarget(s, b, nb, lambda idx: (_as64(offset),) + tuple(idx)) for s in new_stmts]
        expanded[b] = nb
    kept_allocs = [b for b in allocs if b not in expanded]
    loops_out: list[Stmt] = []
    start = 0
    for k, (tag, g) in enumerate(groups):
        part = new_stmts[start: start + len(g)]
        start += len(g)
        inner = seq(*part)
        for b in reversed(kept_allocs):  # buffers private to one group stay inside its loop
            if any(x.buffer is b for x in per_group[k][0]):
                inner = Allocate(b, inner)
        v = lp.loop_var if tag == "main" else Var(names[tag], lp.loop_var.dtype)
        if v is not lp.loop_var:
            inner = substitute(inner, {lp.loop_var: v})
        ann = other_annotations(lp)
        if k == 0:
            ann.update(stage_annotations(lp))
        loops_out.append(For(v, lp.min, lp.extent, lp.kind, inner, ann))
    out: Stmt = seq(*loops_out)
    for b in reversed(list(expanded.values())):
        out = Allocate(b, out)
    return finish(replace(func, {lp: out}), where)


def _as64(e: PrimExpr) -> PrimExpr:
    return cast("int64", e)


# ---- rfactor -------------------------------------------------------------------------------------------


@dataclass
class Combiner:
    """A reduction update ``acc = F(acc, term)``: ``expr`` is F over the variables ``a`` and ``b``."""

    a: Var
    b: Var
    expr: PrimExpr
    term: PrimExpr
    identity: PrimExpr

    def apply(self, x: PrimExpr, y: PrimExpr) -> PrimExpr:
        return substitute(self.expr, {self.a: x, self.b: y})


def _samples(dtype: str) -> list:
    if is_float(dtype):
        return [-2.5, -1.0, -0.0, 0.0, 0.5, 3.0, np.inf, -np.inf, np.nan]
    info = np.iinfo(np.dtype(dtype))
    return [v for v in (-7, -1, 0, 1, 5, 100, int(info.min), int(info.max)) if info.min <= v <= info.max]


def _same(x: object, y: object) -> bool:
    fx, fy = float(x), float(y)  # type: ignore[arg-type]
    return (np.isnan(fx) and np.isnan(fy)) or fx == fy


def find_combiner(st: BufferStore, init: PrimExpr | None = None) -> Combiner | None:
    """The combiner of the update ``st`` (``acc[i] = F(acc[i], term)``), checked on sample values to be
    commutative and associative with an identity (the init value if it is one, else 0, 1, -inf, inf,
    the dtype's extremes); None if it is not such an update."""
    acc, dtype = st.buffer, st.buffer.dtype

    def is_acc(n: PrimExpr) -> bool:
        return isinstance(n, BufferLoad) and n.buffer is acc and same_indices(n.indices, st.indices)

    has_acc: dict[PrimExpr, bool] = {}
    for n in _post(st.value):
        has_acc[n] = is_acc(n) or any(has_acc[c] for c in n._children())  # type: ignore[index]
    if not has_acc[st.value] or any(isinstance(n, BufferLoad) and n.buffer is acc and not is_acc(n)
                                    for n in pre_order(st.value)):
        return None
    terms: list[PrimExpr] = []
    stack = [st.value]
    while stack:
        n = stack.pop()
        if is_acc(n):
            continue
        if not has_acc[n]:
            if not isinstance(n, (IntImm, FloatImm)):
                terms.append(n)
            continue
        stack.extend(n._children())  # type: ignore[arg-type]
    if not terms or not all(t is terms[0] or structural_equal(t, terms[0]) for t in terms):
        return None
    a, b = Var("a", dtype), Var("b", dtype)
    term = terms[0]

    class Abstract(StmtExprMutator):
        memoize = False

        def enter_buffer_load(self, node: BufferLoad):
            return a if is_acc(node) else None

    expr = Abstract().visit(st.value)
    expr = _ReplaceTerm(term, b).visit(expr)
    if any(isinstance(n, (BufferLoad, Var)) and n is not a and n is not b for n in pre_order(expr)):
        return None

    init_value = init.value if isinstance(init, (IntImm, FloatImm)) else None
    key = (tir_structural_hash(expr), dtype, repr(init_value))
    for other, ident in _CHECKED.get(key, ()):
        if structural_equal(other, expr, map_free_vars=True):
            return None if ident is None else Combiner(a, b, expr, term, ident)
    ident = _identity(expr, a, b, dtype, init)
    _CHECKED.setdefault(key, []).append((expr, ident))
    if len(_CHECKED) > _CHECKED_MAX:
        _CHECKED.pop(next(iter(_CHECKED)))
    return None if ident is None else Combiner(a, b, expr, term, ident)


# combiner expressions already checked (a pure function of the expression, its dtype and the init value):
# the sampling check costs thousands of evaluations, and every reduction of a build has one of a few combiners.
# ``a`` and ``b`` are free variables compared up to renaming; a check is symmetric in them.
_CHECKED: dict[tuple[int, str, str], list[tuple[PrimExpr, PrimExpr | None]]] = {}
_CHECKED_MAX = 256


def _identity(expr: PrimExpr, a: Var, b: Var, dtype: str, init: PrimExpr | None) -> PrimExpr | None:
    """The identity of the combiner ``expr(a, b)``, checked on sample values to be commutative and
    associative; None if it is not such a combiner."""

    def f(x: object, y: object) -> object:
        try:
            return evaluate_expr(expr, {a: x, b: y})
        except Exception:  # noqa: BLE001 - any failure means "not a combiner we understand"
            return np.nan
    xs = _samples(dtype)
    for x in xs:
        for y in xs:
            if not _same(f(x, y), f(y, x)):
                return None
            for z in xs[:5]:
                if not _same(f(f(x, y), z), f(x, f(y, z))):
                    return None
    cands = [] if init is None or not isinstance(init, (IntImm, FloatImm)) else [init.value]
    cands += [0, 1] + ([-np.inf, np.inf] if is_float(dtype) else [])
    if not is_float(dtype):
        info = np.iinfo(np.dtype(dtype))
        cands += [int(info.min), int(info.max)]
    for e in cands:
        if all(_same(f(e, x), x) for x in xs):
            return FloatImm(float(e), dtype) if is_float(dtype) else IntImm(int(e), dtype)
    return None


def _post(e: PrimExpr) -> list[PrimExpr]:
    out: list[PrimExpr] = []
    stack: list[tuple[PrimExpr, bool]] = [(e, False)]
    while stack:
        n, done = stack.pop()
        if done:
            out.append(n)
        else:
            stack.append((n, True))
            stack.extend((c, False) for c in n._children())  # type: ignore[misc]
    return out


class _ReplaceTerm(StmtExprMutator):
    memoize = False

    def __init__(self, term: PrimExpr, by: PrimExpr):
        super().__init__()
        self.term, self.by = term, by

    def _hit(self, node: PrimExpr):
        if node is self.term or (type(node) is type(self.term) and structural_equal(node, self.term)):
            return self.by
        return None


for _k in ("add", "sub", "mul", "div", "min", "max", "select", "cast", "buffer_load", "call", "var", "let",
           "floordiv", "floormod", "truncdiv", "truncmod", "bitwise_and", "bitwise_or", "bitwise_xor",
           "shift_left", "shift_right", "not", "bitwise_not", "eq", "ne", "lt", "le", "gt", "ge", "and", "or"):
    setattr(_ReplaceTerm, "enter_" + _k, _ReplaceTerm._hit)


def _init_value(func: PrimFunc, top: Stmt, st: BufferStore) -> PrimExpr | None:
    """The value stored to the accumulator by the statement just before ``top`` in its sequence."""
    parents = path_to(func.body, top)
    if parents and isinstance(parents[-1], SeqStmt):
        sib = parents[-1].stmts
        k = sib.index(top)
        if k > 0 and isinstance(sib[k - 1], BufferStore) and sib[k - 1].buffer is st.buffer:
            return sib[k - 1].value
    return None


def rfactor(func: PrimFunc, loop: str) -> PrimFunc:
    """Give the reduction loop ``loop`` partial accumulators ``<acc>_rf`` (last dimension: the loop's
    iterations), initialized to the combiner's identity and combined into the accumulator after the
    outermost enclosing loop that touches the accumulator only through this update. The update must
    be ``acc[i] = F(acc[i], term)`` with F commutative and associative (see :func:`find_combiner`)."""
    where = f"rfactor('{loop}')"
    rl = get_loop(func, loop, where)
    ext = const_extent(rl, where)
    stores = [s for s, _ in walk(rl.body) if isinstance(s, BufferStore)]
    if len(stores) != 1:
        raise ScheduleError(f"{where}: loop '{loop}' must contain exactly one store (the reduction update), "
                            f"found {len(stores)}")
    st = stores[0]
    acc_buf = st.buffer
    if any(isinstance(n, Var) and n is rl.loop_var for i in st.indices for n in pre_order(i)):
        raise ScheduleError(f"{where}: loop '{loop}' indexes the accumulator '{acc_buf.name}': it is not a "
                            "reduction loop")
    # the outermost enclosing loop that touches the accumulator only through this update
    top: For = rl
    own = sum(a.buffer is acc_buf for a in accesses(st)[0])
    for p in reversed(path_to(func.body, rl)):
        if not isinstance(p, For) or sum(a.buffer is acc_buf for a in accesses(p)[0]) != own:
            break
        top = p
    comb = find_combiner(st, _init_value(func, top, st))
    if comb is None:
        raise ScheduleError(f"{where}: the store under loop '{loop}' is not a reduction update "
                            f"`{acc_buf.name}[...] = F({acc_buf.name}[...], x)` with F commutative and associative")
    inner = {lp.loop_var: loop_range(lp) for lp in loops_of(top) if lp is not rl}
    if any(r is None for r in inner.values()):
        raise ScheduleError(f"{where}: loops around the update need constant bounds")
    dims = box(st.indices, inner, where)  # type: ignore[arg-type]
    rf = Buffer(f"{acc_buf.name}_rf", tuple(d.extent for d in dims) + (ext,), acc_buf.dtype, "local")
    check_new_names(func, [f"{loop}_init", f"{loop}_final"] + [f"{loop}_init_{k}" for k in range(len(dims))]
                    + [f"{loop}_final_{k}" for k in range(len(dims))], where)
    r_local = simplify(rl.loop_var - rl.min) if not (isinstance(rl.min, IntImm) and rl.min.value == 0) else rl.loop_var
    upd_idx = tuple(d.local for d in dims) + (r_local,)
    new_update = BufferStore(rf, comb.apply(BufferLoad(rf, upd_idx), comb.term), upd_idx)
    new_top = replace(PrimFunc((), top), {st: new_update}).body
    dt = rl.loop_var.dtype
    r_init, r_fin = Var(f"{loop}_init", dt), Var(f"{loop}_final", dt)
    init = box_nest([f"{loop}_init_{k}" for k in range(len(dims))], dims,
                    lambda t: For(r_init, 0, ext, "serial", BufferStore(rf, comb.identity, (*t, r_init))))

    def combine(t: list[PrimExpr]) -> Stmt:
        g = tuple(d.to_global(x) for d, x in zip(dims, t))
        return For(r_fin, 0, ext, "serial",
                   BufferStore(acc_buf, comb.apply(BufferLoad(acc_buf, g), BufferLoad(rf, (*t, r_fin))), g))

    final = box_nest([f"{loop}_final_{k}" for k in range(len(dims))], dims, combine)
    return finish(replace(func, {top: Allocate(rf, seq(init, new_top, final))}), where)


# ---- cache_write -------------------------------------------------------------------------------------


def cache_write(func: PrimFunc, loop: str, buffer: str) -> PrimFunc:
    """Inside the body of ``loop``, read and write ``buffer`` through a ``local`` buffer ``<buffer>_local``
    covering the region the body touches; the region is copied in first unless the body writes each
    element before reading it, and written back once at the end of the body. Every access must use
    the same index tuple."""
    where = f"cache_write('{loop}', '{buffer}')"
    lp = get_loop(func, loop, where)
    acc, private, opaque = accesses(lp.body)
    mine = [a for a in acc if a.buffer.name == buffer]
    if not mine:
        raise ScheduleError(f"{where}: the body of loop '{loop}' does not access a buffer '{buffer}'")
    b = mine[0].buffer
    if any(a.buffer is not b for a in mine) or b in private:
        raise ScheduleError(f"{where}: buffer '{buffer}' is ambiguous or allocated inside loop '{loop}'")
    if not any(a.write for a in mine):
        raise ScheduleError(f"{where}: loop '{loop}' does not write buffer '{buffer}'")
    if opaque or not all(same_indices(mine[0].indices, a.indices) for a in mine):
        raise ScheduleError(f"{where}: every access to '{buffer}' in loop '{loop}' must use the same indices")
    inner = {l.loop_var: loop_range(l) for l in loops_of(lp.body)}
    if any(r is None for r in inner.values()):
        raise ScheduleError(f"{where}: the loops inside loop '{loop}' need constant bounds")
    dims = box(mine[0].indices, inner, where)  # type: ignore[arg-type]
    local = Buffer(f"{b.name}_local", tuple(d.extent for d in dims), b.dtype, "local")
    names_w = [f"{b.name}_wb{k}" for k in range(len(dims))]
    names_r = [f"{b.name}_ci{k}" for k in range(len(dims))]
    new_body = retarget(lp.body, b, local, lambda idx: tuple(d.local for d in dims))
    copy_in = None
    if not _written_first(lp.body, b):
        check_new_names(func, names_r, where)
        copy_in = box_nest(names_r, dims, lambda t: BufferStore(
            local, BufferLoad(b, tuple(d.to_global(x) for d, x in zip(dims, t))), tuple(t)))
    check_new_names(func, names_w, where)
    write_back = box_nest(names_w, dims, lambda t: BufferStore(
        b, BufferLoad(local, tuple(t)), tuple(d.to_global(x) for d, x in zip(dims, t))))
    new = For(lp.loop_var, lp.min, lp.extent, lp.kind, Allocate(local, seq(copy_in, new_body, write_back)),
              lp.annotations)
    return finish(replace(func, {lp: new}), where)


def _written_first(body: Stmt, b: Buffer) -> bool:
    """Whether the first access to ``b`` in ``body`` is an unconditional store (inside loops that run)."""
    for s, parents in walk(body):
        own = [*s.indices, s.value] if isinstance(s, BufferStore) else \
            [s.cond] if isinstance(s, (IfThenElse, AssertStmt)) else [s.min, s.extent] if isinstance(s, For) else \
            [s.value] if hasattr(s, "value") else []
        if any(isinstance(n, BufferLoad) and n.buffer is b for e in own for n in pre_order(e)):
            return False
        if isinstance(s, BufferStore) and s.buffer is b:
            return all(not isinstance(p, IfThenElse) and (not isinstance(p, For) or loop_range(p) is not None)
                       for p in parents)
    return False


__all__ = ["Combiner", "box", "cache_write", "decompose_reduction", "find_combiner", "retarget", "rfactor"]
