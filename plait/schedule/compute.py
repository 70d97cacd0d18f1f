"""Stage primitives: compute_inline, reverse_compute_inline, pad_input.

- :func:`compute_inline` removes a producer stage ``T[i, j] = e(i, j)`` (a perfect nest over the whole
  of an allocated buffer ``T``) and replaces every load ``T[a, b]`` by ``e(a, b)``;
- :func:`reverse_compute_inline` removes an elementwise consumer stage ``O[f(i)] = g(T[i], ...)`` and
  applies ``g`` where the producer stores ``T`` (e.g. a bias + relu epilogue moved into the store of a
  reduction stage);
- :func:`pad_input` replaces guarded loads ``select(<index in bounds>, X[idx], c)`` (zero padding) of a
  stage by plain loads of a padded copy of ``X`` filled before the stage, so the inner loops of a
  convolution have no conditions and vectorize.
"""

from __future__ import annotations

from plait.tir import copy_with_fresh_vars, free_vars, simplify, structural_equal, substitute
from plait.tir.expr import GE, GT, LE, LT, And, BufferLoad, FloatImm, IntImm, Let, PrimExpr, Select, Var
from plait.tir.functor import StmtExprMutator, pre_order
from plait.tir.stmt import Allocate, Buffer, BufferStore, For, PrimFunc, SeqStmt, Stmt, is_no_op, no_op, seq
from plait.schedule.analysis import (
    accesses, bounds, check_new_names, const_int, determined_vars, loop_range, replace, walk,
)
from plait.schedule.errors import ScheduleError
from plait.schedule.loops import finish


def _find_buffer(func: PrimFunc, name: str, where: str) -> tuple[Buffer, Allocate | None]:
    params = [p for p in func.params if isinstance(p, Buffer) and p.name == name]
    allocs = [s for s, _ in walk(func.body) if isinstance(s, Allocate) and s.buffer.name == name]
    if len(params) + len(allocs) != 1:
        what = "no" if not params and not allocs else "several"
        known = sorted({p.name for p in func.params if isinstance(p, Buffer)} |
                       {s.buffer.name for s, _ in walk(func.body) if isinstance(s, Allocate)})
        raise ScheduleError(f"{where}: {what} buffer called '{name}' in PrimFunc '{func.name}' "
                            f"(buffers: {', '.join(repr(k) for k in known)})")
    return (params[0], None) if params else (allocs[0].buffer, allocs[0])


def _stores(root: Stmt, b: Buffer) -> list[tuple[BufferStore, tuple[Stmt, ...]]]:
    return [(s, p) for s, p in walk(root) if isinstance(s, BufferStore) and s.buffer is b]


def _nest_of(store: Stmt, parents: tuple[Stmt, ...]) -> list[For]:
    """The loops around ``store`` that form a perfect nest ending in it, outermost first."""
    loops: list[For] = []
    node = store
    for p in reversed(parents):
        if isinstance(p, For) and p.body is node:
            loops.insert(0, p)
            node = p
        else:
            break
    return loops


def _written_from(func: PrimFunc, start: Stmt) -> set[Buffer]:
    """Buffers stored by ``start`` or by any statement after it in program order."""
    out: set[Buffer] = set()
    seen = False
    for s, _ in walk(func.body):
        seen = seen or s is start
        if seen and isinstance(s, BufferStore):
            out.add(s.buffer)
    return out


def _written(func: PrimFunc) -> set[Buffer]:
    return {s.buffer for s, _ in walk(func.body) if isinstance(s, BufferStore)}


class _Rewrite(StmtExprMutator):
    memoize = False

    def __init__(self, drop: Stmt, unalloc: Buffer, load_fn=None, store_map=None):
        super().__init__()
        self.drop, self.unalloc, self.load_fn, self.store_map = drop, unalloc, load_fn, store_map or {}

    def enter_for(self, node: For):
        return no_op() if node is self.drop else None

    def enter_buffer_store(self, node: BufferStore):
        if node is self.drop:
            return no_op()
        return self.store_map.get(node)

    def rewrite_buffer_load(self, pre: BufferLoad, post: BufferLoad) -> PrimExpr:
        if self.load_fn is not None and post.buffer is self.unalloc:
            return self.load_fn(post)
        return post

    def rewrite_allocate(self, pre: Allocate, post: Allocate) -> Stmt:
        return post.body if post.buffer is self.unalloc else post

    def rewrite_seq(self, pre: Stmt, post: Stmt) -> Stmt:
        if isinstance(post, SeqStmt):
            return seq(*(s for s in post.stmts if not is_no_op(s)))
        return post


def _full_nest(loops: list[For], indices: tuple[PrimExpr, ...], b: Buffer, where: str, what: str) -> list[Var]:
    """The loop variables in index order, checking that the nest sweeps the whole of ``b`` once."""
    vs = list(indices)
    if not all(isinstance(v, Var) for v in vs) or len({id(v) for v in vs}) != len(vs) or \
            {id(v) for v in vs} != {id(lp.loop_var) for lp in loops}:
        raise ScheduleError(f"{where}: the {what} of '{b.name}' must be indexed by its loop variables, one per "
                            "dimension, in a perfect loop nest")
    shape = b.static_shape
    by_var = {id(lp.loop_var): lp for lp in loops}
    for k, v in enumerate(vs):
        lp = by_var[id(v)]
        if shape is None or loop_range(lp) != (0, shape[k] - 1):
            raise ScheduleError(f"{where}: the loops of the {what} of '{b.name}' must cover its shape "
                                f"{shape}, loop '{lp.loop_var.name}' does not")
    return vs  # type: ignore[return-value]


def compute_inline(func: PrimFunc, buffer: str) -> PrimFunc:
    """Inline the stage that produces the allocated buffer ``buffer`` into its consumers."""
    where = f"compute_inline('{buffer}')"
    b, alloc = _find_buffer(func, buffer, where)
    if alloc is None:
        raise ScheduleError(f"{where}: '{buffer}' is a parameter of the function; only allocated buffers "
                            "can be inlined")
    stores = _stores(func.body, b)
    if len(stores) != 1:
        raise ScheduleError(f"{where}: '{buffer}' must be stored exactly once (in one statement), found "
                            f"{len(stores)} stores")
    st, parents = stores[0]
    if any(isinstance(n, BufferLoad) and n.buffer is b for n in pre_order(st.value)):
        raise ScheduleError(f"{where}: the producer of '{buffer}' reads it (a reduction cannot be inlined)")
    loops = _nest_of(st, parents)
    vs = _full_nest(loops, st.indices, b, where, "producer")
    outside = [v for v in free_vars(st.value) if all(v is not x for x in vs) and v not in func.params]
    if outside:
        raise ScheduleError(f"{where}: the value of '{buffer}' uses variable '{outside[0].name}' bound outside "
                            "its loop nest")
    later = _written_from(func, loops[0])
    for n in pre_order(st.value):
        if isinstance(n, BufferLoad) and n.buffer in later:
            raise ScheduleError(f"{where}: the value of '{buffer}' reads '{n.buffer.name}', which the function "
                                "writes after computing it; inlining could read another value")

    def load_fn(load: BufferLoad) -> PrimExpr:
        return copy_with_fresh_vars(substitute(st.value, dict(zip(vs, load.indices))))

    body = _Rewrite(loops[0], b, load_fn).visit(func.body)
    return finish(func.with_body(body), where)


def reverse_compute_inline(func: PrimFunc, buffer: str) -> PrimFunc:
    """Inline the elementwise stage that consumes the allocated buffer ``buffer`` into the statement
    that produces it (the consumer's loops must sweep the buffer's shape, reading it at their indices)."""
    where = f"reverse_compute_inline('{buffer}')"
    b, alloc = _find_buffer(func, buffer, where)
    if alloc is None:
        raise ScheduleError(f"{where}: '{buffer}' is a parameter of the function")
    loads = [(s, p) for s, p in walk(func.body) if isinstance(s, BufferStore)
             and any(isinstance(n, BufferLoad) and n.buffer is b for e in (*s.indices, s.value) for n in pre_order(e))]
    other_reads = [s for s, _ in walk(func.body) if not isinstance(s, BufferStore) and any(
        isinstance(n, BufferLoad) and n.buffer is b for n in _own_exprs(s))]
    if len(loads) != 1 or other_reads:
        raise ScheduleError(f"{where}: '{buffer}' must be read by exactly one statement, found "
                            f"{len(loads) + len(other_reads)}")
    cs, cparents = loads[0]
    if cs.buffer is b:
        raise ScheduleError(f"{where}: the consumer of '{buffer}' writes it back")
    b_loads = [n for n in pre_order(cs.value) if isinstance(n, BufferLoad) and n.buffer is b]
    if any(isinstance(n, BufferLoad) and n.buffer is b for i in cs.indices for n in pre_order(i)):
        raise ScheduleError(f"{where}: the consumer indexes its output with '{buffer}'")
    loops = _nest_of(cs, cparents)
    vs = _full_nest(loops, b_loads[0].indices, b, where, "consumer")
    if not all(tuple(x.indices) == tuple(vs) for x in b_loads):
        raise ScheduleError(f"{where}: the consumer reads '{buffer}' at different indices")
    stores = _stores(func.body, b)
    if len(stores) != 1:
        raise ScheduleError(f"{where}: '{buffer}' must be stored by exactly one statement, found {len(stores)}")
    ps, _ = stores[0]
    out = cs.buffer
    extents = {lp.loop_var: const_int(lp.extent) for lp in loops}
    if set(determined_vars(cs.indices, set(extents), extents)) != set(extents):  # type: ignore[arg-type]
        raise ScheduleError(f"{where}: the consumer writes some element of '{out.name}' more than once")
    written = _written(func)
    for n in pre_order(cs.value):
        if isinstance(n, BufferLoad) and n.buffer is not b and n.buffer in written:
            raise ScheduleError(f"{where}: the consumer reads '{n.buffer.name}', which the function writes; "
                                "moving it could read it at another time")
    order = [s for s, _ in walk(func.body)]
    before = order[: order.index(cs)]
    for s in before:
        if s is not cs and any(a.buffer is out for a in accesses(s)[0]) and isinstance(s, BufferStore):
            raise ScheduleError(f"{where}: '{out.name}' is also accessed before the consumer")
    outside = [v for v in free_vars(cs) if all(v is not x for x in vs) and v not in func.params]
    if outside:
        raise ScheduleError(f"{where}: the consumer uses variable '{outside[0].name}' bound outside its loop nest")
    vmap = dict(zip(vs, ps.indices))
    value = ps.value
    if len(b_loads) > 1:
        t = Var(f"{buffer}_v", b.dtype)
        body_val = _replace_loads(cs.value, b, t)
        new_value: PrimExpr = Let(t, value, substitute(body_val, vmap))
    else:
        new_value = substitute(_replace_loads(cs.value, b, value), vmap)
    new_store = BufferStore(out, new_value, tuple(simplify(substitute(i, vmap)) for i in cs.indices))
    body = _Rewrite(loops[0], b, None, {ps: new_store}).visit(func.body)
    return finish(func.with_body(body), where)


def _own_exprs(s: Stmt) -> list[PrimExpr]:
    if isinstance(s, For):
        return [s.min, s.extent]
    for attr in ("cond", "value"):
        if hasattr(s, attr):
            return [n for n in pre_order(getattr(s, attr))]
    return []


def _replace_loads(e: PrimExpr, b: Buffer, value: PrimExpr) -> PrimExpr:
    class R(StmtExprMutator):
        def rewrite_buffer_load(self, pre: BufferLoad, post: BufferLoad) -> PrimExpr:
            return value if post.buffer is b else post

    return R().visit(e)


# ---- pad_input ---------------------------------------------------------------------------------------


def _conjuncts(c: PrimExpr) -> list[PrimExpr]:
    out, stack = [], [c]
    while stack:
        x = stack.pop()
        if isinstance(x, And):
            stack += [x.b, x.a]
        else:
            out.append(x)
    return out


def _guard(cond: PrimExpr, load: BufferLoad) -> dict[int, list[str]] | None:
    """Which bounds of which index components ``cond`` checks (it must check exactly in-bounds), or None.
    A symbolic dimension (a batch) cannot be checked against a constant: it is never a guarded one."""
    shape = [const_int(d) for d in load.buffer.shape]
    found: dict[int, list[str]] = {}
    for c in _conjuncts(cond):
        if not isinstance(c, (LT, LE, GT, GE)):
            return None
        for e, k, flip in ((c.a, c.b, False), (c.b, c.a, True)):
            kv = const_int(k)
            dims = [d for d, i in enumerate(load.indices) if i is e or structural_equal(i, e)]
            if kv is None or not dims:
                continue
            op = type(c)
            if flip:
                op = {LT: GT, LE: GE, GT: LT, GE: LE}[op]
            d = dims[0]
            lower = (op is GE and kv == 0) or (op is GT and kv == -1)
            upper = shape[d] is not None and ((op is LT and kv == shape[d]) or (op is LE and kv == shape[d] - 1))
            if not (lower or upper):
                return None
            found.setdefault(d, []).append("lo" if lower else "hi")
            break
        else:
            return None
    return found


def pad_input(func: PrimFunc, buffer: str) -> PrimFunc:
    """Replace the guarded loads ``select(<in bounds>, buffer[idx], c)`` of the first stage that has any
    by loads of ``<buffer>_pad``, a ``global.workspace`` copy of ``buffer`` padded with ``c`` on each
    side by as much as the indices reach out of bounds, filled (loops ``<buffer>_pad_<k>`` then
    ``<buffer>_copy_<k>``) just before the stage."""
    where = f"pad_input('{buffer}')"
    b, _ = _find_buffer(func, buffer, where)
    hits: list[tuple[Select, BufferLoad, dict, Stmt, tuple]] = []
    for s, parents in walk(func.body):
        if not isinstance(s, BufferStore):
            continue
        for n in pre_order(s.value):
            if isinstance(n, Select) and isinstance(n.true_value, BufferLoad) and n.true_value.buffer is b:
                g = _guard(n.cond, n.true_value)
                if g is not None and isinstance(n.false_value, (IntImm, FloatImm)):
                    hits.append((n, n.true_value, g, s, parents))
    if not hits:
        raise ScheduleError(f"{where}: no guarded load `select(<index in bounds>, {buffer}[...], c)` of "
                            f"'{buffer}' found")
    roots = [next((p for p in parents if isinstance(p, For)), st) for _, _, _, st, parents in hits]
    root = roots[0]
    hits = [h for h, r in zip(hits, roots) if r is root]
    pad_value = hits[0][0].false_value
    if not all(structural_equal(h[0].false_value, pad_value) for h in hits):
        raise ScheduleError(f"{where}: the guarded loads pad with different values")
    if any(isinstance(st, BufferStore) and st.buffer is b for st, _ in walk(root)):
        raise ScheduleError(f"{where}: the stage writes '{buffer}'")
    shape = [const_int(d) for d in b.shape]  # None: a symbolic dim (never guarded, so never padded)
    lo_pad, hi_pad = [0] * b.ndim, [0] * b.ndim
    for sel, load, guard, st, parents in hits:
        ranges = {}
        for p in parents:
            if isinstance(p, For):
                r = loop_range(p)
                if r is not None:
                    ranges[p.loop_var] = r
        for d in guard:
            bd = bounds(load.indices[d], ranges)
            if bd is None:
                raise ScheduleError(f"{where}: cannot bound index `{load.indices[d]}` of '{buffer}'")
            lo_pad[d] = max(lo_pad[d], -bd[0])
            hi_pad[d] = max(hi_pad[d], bd[1] - (shape[d] - 1))
    padded = Buffer(f"{b.name}_pad", tuple(d if n is None else n + lo + hi
                                           for d, n, lo, hi in zip(b.shape, shape, lo_pad, hi_pad)), b.dtype,
                    "global.workspace")
    fill_vars = [Var(f"{b.name}_pad_{k}") for k in range(b.ndim)]
    copy_vars = [Var(f"{b.name}_copy_{k}") for k in range(b.ndim)]
    check_new_names(func, [v.name for v in fill_vars + copy_vars], where)
    fill: Stmt = BufferStore(padded, pad_value, tuple(fill_vars))
    for v, n in reversed(list(zip(fill_vars, padded.shape))):
        fill = For(v, 0, n, "serial", fill)
    copy: Stmt = BufferStore(padded, BufferLoad(b, tuple(copy_vars)),
                             tuple(simplify(v + lo) if lo else v for v, lo in zip(copy_vars, lo_pad)))
    for v, n in reversed(list(zip(copy_vars, b.shape))):
        copy = For(v, 0, n, "serial", copy)
    sel_map = {id(h[0]): h for h in hits}

    class R(StmtExprMutator):
        memoize = False

        def enter_select(self, node: Select):
            h = sel_map.get(id(node))
            if h is None:
                return None
            idx = tuple(simplify(i + lo) if lo else i for i, lo in zip(h[1].indices, lo_pad))
            return BufferLoad(padded, idx)

    new_root = R().visit(root)
    return finish(replace(func, {root: Allocate(padded, seq(fill, copy, new_root))}), where)


__all__ = ["compute_inline", "pad_input", "reverse_compute_inline"]
