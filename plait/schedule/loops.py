"""Loop primitives: split, fuse, reorder, and the loop kinds (vectorize, parallel, unroll).

Each is a pure function ``PrimFunc -> PrimFunc``; loops are addressed by the name of their loop
variable (names must be unique in the function). Results are verified; a transformation that would
change what the function computes raises :class:`ScheduleError` (see
:func:`plait.schedule.analysis.order_constraints` for the dependence test).

Stage annotations (``stage``, ``op``, ``pattern``) stay on the outermost loop of a nest: a split
gives them to the outer loop, a reorder leaves them at the outermost position.
"""

from __future__ import annotations

import math
from typing import Sequence

from plait.tir import free_vars, simplify, substitute, verify
from plait.tir.errors import TIRVerifyError
from plait.tir.expr import IntImm, Min, PrimExpr, Var
from plait.tir.op import lt, truncdiv, truncmod
from plait.tir.stmt import For, IfThenElse, PrimFunc, Stmt
from plait.schedule.analysis import (
    accesses, chain, check_new_names, const_extent, get_loop, order_constraints, other_annotations, path_to,
    replace, stage_annotations,
)
from plait.schedule.errors import ScheduleError


def finish(func: PrimFunc, where: str) -> PrimFunc:
    """Verify a primitive's result (a failure here is a bug in the primitive or an illegal loop kind)."""
    try:
        verify(func)
    except TIRVerifyError as exc:
        raise ScheduleError(f"{where}: the result does not verify: {exc}") from None
    return func


def _plus(base: PrimExpr, e: PrimExpr) -> PrimExpr:
    return e if isinstance(base, IntImm) and base.value == 0 else simplify(base + e)


def _guard(body: Stmt, cond: PrimExpr, split_vars: set[Var]) -> Stmt:
    """``if cond: body``, the condition moved inside the perfect nest at the top of ``body`` (its loops
    do not depend on the split variables), so the nest stays perfect for later reorders."""
    nest = chain(body) if isinstance(body, For) else []
    while nest and (set(free_vars(nest[-1].min)) | set(free_vars(nest[-1].extent))) & split_vars:
        nest.pop()
    if not nest:
        return IfThenElse(cond, body)
    inner = nest[-1]
    new: Stmt = For(inner.loop_var, inner.min, inner.extent, inner.kind, IfThenElse(cond, inner.body),
                    inner.annotations)
    for lp in reversed(nest[:-1]):
        new = For(lp.loop_var, lp.min, lp.extent, lp.kind, new, lp.annotations)
    return new


def split(func: PrimFunc, loop: str, factors: Sequence[int | None], names: Sequence[str] | None = None) -> PrimFunc:
    """Split ``loop`` into nested loops of the given extents, outermost first; one factor may be None
    (inferred). Loops are named ``<loop>_0``, ``<loop>_1``, ... unless ``names`` are given. When the
    factors do not divide the extent, the body runs under a guard ``if index < extent``."""
    where = f"split('{loop}')"
    lp = get_loop(func, loop, where)
    n = const_extent(lp, where)
    factors = list(factors)
    if len(factors) < 2:
        raise ScheduleError(f"{where}: give at least two factors, got {factors}")
    if sum(f is None for f in factors) > 1:
        raise ScheduleError(f"{where}: at most one factor may be None, got {factors}")
    for f in factors:
        if f is not None and (not isinstance(f, int) or isinstance(f, bool) or f < 1):
            raise ScheduleError(f"{where}: factors must be positive ints or None, got {factors}")
    known = math.prod(f for f in factors if f is not None)
    factors = [f if f is not None else max(1, -(-n // known)) for f in factors]
    total = math.prod(factors)
    if total < n:
        raise ScheduleError(f"{where}: factors {factors} cover {total} iterations, fewer than the "
                            f"extent {n} of loop '{loop}'")
    names = list(names) if names is not None else [f"{loop}_{k}" for k in range(len(factors))]
    if len(names) != len(factors):
        raise ScheduleError(f"{where}: {len(factors)} factors but {len(names)} names")
    check_new_names(func, [x for x in names if x != loop], where)
    new_vars = [Var(x, lp.loop_var.dtype) for x in names]
    idx: PrimExpr = new_vars[0]
    for v, f in zip(new_vars[1:], factors[1:]):
        idx = idx * f + v
    idx = _plus(lp.min, idx)
    body: Stmt = substitute(lp.body, {lp.loop_var: idx})  # type: ignore[assignment]
    if total != n:
        body = _guard(body, lt(idx, _plus(lp.min, IntImm(n, lp.loop_var.dtype))), set(new_vars))
    kinds = ["serial"] * len(factors)
    if lp.kind == "parallel":
        kinds[0] = "parallel"
    elif lp.kind == "vectorized":
        kinds[-1] = "vectorized"
    elif lp.kind == "unrolled":
        kinds = ["unrolled"] * len(factors)
    for k in reversed(range(len(factors))):
        ann = dict(lp.annotations) if k == 0 else {}
        body = For(new_vars[k], 0, factors[k], kinds[k], body, ann)
    return finish(replace(func, {lp: body}), where)


def split_overlapping(func: PrimFunc, loop: str, factor: int, names: Sequence[str] | None = None) -> PrimFunc:
    """Split ``loop`` (extent ``n``, not a multiple of ``factor``) into ``ceil(n / factor)`` blocks of
    ``factor`` iterations with no guard: the last block starts at ``n - factor`` and repeats a few
    iterations of the one before (index ``min(o * factor, n - factor) + i``). A register tile over a
    row of 125 outputs runs 8 whole 16-wide vectors instead of tiles of 25 (16 + 9 lanes: DS-CNN's
    pointwise convolutions 12.7 -> 9.4 us). Legal only when running an iteration again changes
    nothing: every buffer the body writes is allocated inside it (a register tile's accumulators) or
    never read in it (the output), and nothing is opaque (extern calls)."""
    where = f"split_overlapping('{loop}', {factor})"
    lp = get_loop(func, loop, where)
    n = const_extent(lp, where)
    if not isinstance(factor, int) or isinstance(factor, bool) or not 1 < factor < n or n % factor == 0:
        raise ScheduleError(f"{where}: expected a factor between 2 and the extent {n} that does not divide it")
    if lp.kind == "parallel":
        raise ScheduleError(f"{where}: loop '{loop}' is parallel (two threads would write the same elements)")
    acc, private, opaque = accesses(lp.body)
    read = {a.buffer for a in acc if not a.write}
    again = sorted({a.buffer.name for a in acc if a.write and a.buffer not in private and a.buffer in read})
    if opaque or again:
        why = "an extern call or address_of" if opaque else f"buffer '{again[0]}' is read and written"
        raise ScheduleError(f"{where}: iterations of loop '{loop}' may not run twice: {why} in its body")
    names = list(names) if names is not None else [f"{loop}_0", f"{loop}_1"]
    if len(names) != 2:
        raise ScheduleError(f"{where}: expected 2 names, got {names}")
    check_new_names(func, [x for x in names if x != loop], where)
    vo, vi = (Var(x, lp.loop_var.dtype) for x in names)
    start = Min(vo * factor, IntImm(n - factor, vo.dtype))
    body: Stmt = substitute(lp.body, {lp.loop_var: _plus(lp.min, start + vi)})  # type: ignore[assignment]
    inner = For(vi, 0, factor, "vectorized" if lp.kind == "vectorized" else "serial", body)
    new = For(vo, 0, -(-n // factor), "serial", inner, dict(lp.annotations))
    return finish(replace(func, {lp: new}), where)


def fuse(func: PrimFunc, outer: str, inner: str, name: str | None = None) -> PrimFunc:
    """Fuse ``inner`` (the whole body of ``outer``) into ``outer``: one loop ``<outer>_<inner>_fused``
    over both, with ``outer = v / extent(inner)`` and ``inner = v % extent(inner)`` (``v >= 0``)."""
    where = f"fuse('{outer}', '{inner}')"
    lo, li = get_loop(func, outer, where), get_loop(func, inner, where)
    if lo.body is not li:
        raise ScheduleError(f"{where}: loop '{inner}' must be the whole body of loop '{outer}'")
    ni = const_extent(li, where)
    no = const_extent(lo, where)
    name = name or f"{outer}_{inner}_fused"
    check_new_names(func, [name], where)
    v = Var(name, lo.loop_var.dtype)
    if li.loop_var.dtype != v.dtype:
        raise ScheduleError(f"{where}: the loop variables have different dtypes "
                            f"({lo.loop_var.dtype} and {li.loop_var.dtype})")
    # v >= 0: truncating division is floor division here, and C compilers simplify
    # (v / n) * n + v % n back to v when the indices are flattened
    o_idx = _plus(lo.min, truncdiv(v, IntImm(ni, v.dtype)) if ni != 1 else v)
    i_idx = _plus(li.min, truncmod(v, IntImm(ni, v.dtype)) if ni != 1 else IntImm(0, v.dtype))
    body = substitute(li.body, {lo.loop_var: o_idx, li.loop_var: i_idx})
    kind = lo.kind if lo.kind == li.kind else "serial"
    ann = {**other_annotations(li), **lo.annotations}
    return finish(replace(func, {lo: For(v, 0, no * ni, kind, body, ann)}), where)


def reorder(func: PrimFunc, *loops: str) -> PrimFunc:
    """Permute loops of one perfect nest: the listed loops take the listed order, at the positions
    they occupied; loops of the nest that are not listed stay where they are. Raises if the nest is
    not perfect between the listed loops or if the permutation could change the results."""
    where = "reorder(" + ", ".join(f"'{x}'" for x in loops) + ")"
    found = [get_loop(func, x, where) for x in loops]
    if len({id(x) for x in found}) != len(found):
        raise ScheduleError(f"{where}: a loop is listed twice")
    if len(found) < 2:
        return func
    depth = {id(lp): len(path_to(func.body, lp)) for lp in found}
    top = min(found, key=lambda lp: depth[id(lp)])
    nest = chain(top)
    pos = {id(lp): k for k, lp in enumerate(nest)}
    missing = [lp.loop_var.name for lp in found if id(lp) not in pos]
    if missing:
        what = f"loop {missing[0]!r} is" if len(missing) == 1 else f"loops {', '.join(map(repr, missing))} are"
        raise ScheduleError(f"{where}: {what} not in the perfect nest under loop '{top.loop_var.name}' "
                            f"({' > '.join(lp.loop_var.name for lp in nest)})")
    deepest = max(pos[id(lp)] for lp in found)
    seg = nest[: deepest + 1]
    seg_vars = {lp.loop_var for lp in seg}
    for lp in seg:
        used = set(free_vars(lp.min)) | set(free_vars(lp.extent))
        if used & seg_vars:
            raise ScheduleError(f"{where}: the bounds of loop '{lp.loop_var.name}' depend on another loop of the nest")
    slots = sorted(pos[id(lp)] for lp in found)
    new = list(seg)
    for slot, lp in zip(slots, found):
        new[slot] = lp
    old_order = [lp.loop_var for lp in seg]
    new_order = [lp.loop_var for lp in new]
    for buf, keep in order_constraints(seg[-1].body, seg):
        a = [v.name for v in old_order if v in keep]
        b = [v.name for v in new_order if v in keep]
        if a != b:
            raise ScheduleError(f"{where}: iterations of loops {', '.join(repr(x) for x in a)} depend on each other "
                                f"through {_what(buf)}; their order must stay {' > '.join(a)}")
    body = seg[-1].body
    for k in reversed(range(len(new))):
        lp = new[k]
        ann = other_annotations(lp)
        if k == 0:
            ann.update(stage_annotations(seg[0]))
        body = For(lp.loop_var, lp.min, lp.extent, lp.kind, body, ann)
    return finish(replace(func, {seg[0]: body}), where)


def remove_unit_loop(func: PrimFunc, loop: str) -> PrimFunc:
    """Remove a loop of extent 1: its body runs once with the loop variable replaced by the loop's min
    (a 1x1 kernel's reduce loops; their variables no longer clutter the indices)."""
    where = f"remove_unit_loop('{loop}')"
    lp = get_loop(func, loop, where)
    if const_extent(lp, where) != 1:
        raise ScheduleError(f"{where}: loop '{loop}' has extent {lp.extent.value}, not 1")  # type: ignore[attr-defined]
    if stage_annotations(lp):
        raise ScheduleError(f"{where}: loop '{loop}' carries the stage annotations")
    return finish(replace(func, {lp: simplify(substitute(lp.body, {lp.loop_var: lp.min}))}), where)


def _what(buf: object) -> str:
    return "an extern call or address_of" if buf is None else f"buffer '{buf.name}'"  # type: ignore[attr-defined]


def _set_kind(func: PrimFunc, loop: str, kind: str, where: str, check: bool) -> PrimFunc:
    lp = get_loop(func, loop, where)
    if check:
        for buf, keep in order_constraints(lp.body, [lp]):
            if lp.loop_var in keep:
                raise ScheduleError(f"{where}: iterations of loop '{loop}' depend on each other through {_what(buf)}")
    new = For(lp.loop_var, lp.min, lp.extent, kind, lp.body, lp.annotations)
    return finish(replace(func, {lp: new}), where)


def vectorize(func: PrimFunc, loop: str) -> PrimFunc:
    """Mark ``loop`` vectorized (its iterations may run in SIMD lanes); they must be independent."""
    return _set_kind(func, loop, "vectorized", f"vectorize('{loop}')", True)


def parallel(func: PrimFunc, loop: str) -> PrimFunc:
    """Mark ``loop`` parallel (its iterations may run on different threads); they must be independent."""
    return _set_kind(func, loop, "parallel", f"parallel('{loop}')", True)


def unroll(func: PrimFunc, loop: str) -> PrimFunc:
    """Mark ``loop`` unrolled (always legal: the iterations keep their order)."""
    return _set_kind(func, loop, "unrolled", f"unroll('{loop}')", False)


def serial(func: PrimFunc, loop: str) -> PrimFunc:
    """Mark ``loop`` serial again."""
    return _set_kind(func, loop, "serial", f"serial('{loop}')", False)


def annotate(func: PrimFunc, loop: str, key: str, value: object) -> PrimFunc:
    """Add the annotation ``key=value`` to ``loop`` (a hint for codegen or later passes)."""
    where = f"annotate('{loop}')"
    lp = get_loop(func, loop, where)
    new = For(lp.loop_var, lp.min, lp.extent, lp.kind, lp.body, {**lp.annotations, key: value})
    return finish(replace(func, {lp: new}), where)


__all__ = ["annotate", "finish", "fuse", "parallel", "remove_unit_loop", "reorder", "serial", "split",
           "split_overlapping", "unroll", "vectorize"]
