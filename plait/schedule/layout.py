"""Layout primitive: split_phases, the stride-``s`` deinterleave of an allocated buffer's last dimension.

A stride-2 convolution reads its (padded) input at columns ``2 * z + rx``: in the output column ``z``
the loads step by 2, so a vector of outputs needs a gather (two loads and a permute per vector).
:func:`split_phases` stores the buffer with its last dimension ``W`` split into ``s`` phases,
``X[..., c]`` at ``X_ph[..., c % s, c // s]`` (shape ``(..., s, ceil(W / s))``), and rewrites every
access: a column index ``s * q + r`` (``q`` the terms whose coefficients are multiples of ``s``)
becomes ``(r % s, q + r // s)``, so ``2 * z + rx`` becomes ``(rx % 2, z + rx // 2)``: contiguous in
``z``. A loop that writes a run of columns (the padded copy's fill and copy loops) becomes one
loop per phase, storing contiguously (``<loop>_p<phase>``); other writes scatter into the phases.
Results are bit-identical: only where the elements live changes.
"""

from __future__ import annotations

from plait.tir import simplify, substitute
from plait.tir.expr import BufferLoad, IntImm, PrimExpr, Var
from plait.tir.functor import StmtExprMutator, pre_order
from plait.tir.op import truncdiv, truncmod
from plait.tir.stmt import Allocate, Buffer, BufferStore, For, PrimFunc, Stmt, seq
from plait.schedule.analysis import bounds, const_int, linear, loop_range, replace, walk
from plait.schedule.errors import ScheduleError
from plait.schedule.loops import finish


def _term(coefs: dict[Var, int], const: int) -> PrimExpr:
    e: PrimExpr | None = None
    for v, c in coefs.items():
        t = v if c == 1 else v * c
        e = t if e is None else e + t
    if e is None:
        return IntImm(const, "int64")
    return e + const if const else e


def split_phases(func: PrimFunc, buffer: str, stride: int) -> PrimFunc:
    """``buffer`` (allocated in ``func``) stored as ``stride`` phases of its last dimension (see the
    module docstring); every index of the last dimension must be linear in the loop variables, with
    a non-negative remainder part."""
    where = f"split_phases('{buffer}', {stride})"
    if not isinstance(stride, int) or stride < 2:
        raise ScheduleError(f"{where}: expected a stride >= 2")
    allocs = [s for s, _ in walk(func.body) if isinstance(s, Allocate) and s.buffer.name == buffer]
    if len(allocs) != 1:
        raise ScheduleError(f"{where}: expected one allocated buffer called '{buffer}', found {len(allocs)}")
    alloc = allocs[0]
    b = alloc.buffer
    shape = b.static_shape
    if shape is None or not shape:
        raise ScheduleError(f"{where}: '{buffer}' needs a static shape")
    new = Buffer(f"{b.name}_ph", (*shape[:-1], stride, -(-shape[-1] // stride)), b.dtype, b.scope)
    ranges: dict[Var, tuple[int, int]] = {}
    for s, _ in walk(func.body):
        if isinstance(s, For):
            r = loop_range(s)
            if r is not None:
                ranges[s.loop_var] = r

    def index(indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        form = linear(indices[-1])
        if form is None:
            raise ScheduleError(f"{where}: index `{indices[-1]}` of '{buffer}' is not linear")
        coefs, const = form
        q = {v: c // stride for v, c in coefs.items() if c % stride == 0}
        r = {v: c for v, c in coefs.items() if c % stride}
        rest = _term(r, const % stride if not r else const)
        qconst = const // stride if not r else 0
        if not r:
            return (*indices[:-1], IntImm(const % stride, "int64"), simplify(_term(q, qconst)))
        bd = bounds(rest, ranges)
        if bd is None or bd[0] < 0:
            raise ScheduleError(f"{where}: cannot show that `{rest}` (index of '{buffer}') is non-negative")
        return (*indices[:-1], simplify(truncmod(rest, stride)),
                simplify(_term(q, 0) + truncdiv(rest, stride)) if q else simplify(truncdiv(rest, stride)))

    def phase_loops(loop: For) -> Stmt | None:
        """``for c in [0, E): b[..., c + k] = f(c)`` (the padded copy, the fill) as one loop per phase,
        ``for q: b_ph[..., p, q] = f(q * s + p - k)``: contiguous stores instead of a scatter."""
        st = loop.body
        if not isinstance(st, BufferStore) or st.buffer is not b or any(
                n is loop.loop_var for i in st.indices[:-1] for n in pre_order(i)):
            return None
        form = linear(st.indices[-1])
        lo, ext = const_int(loop.min), const_int(loop.extent)
        if form is None or form[0] != {loop.loop_var: 1} or lo is None or ext is None:
            return None
        first, last = lo + form[1], lo + ext - 1 + form[1]  # columns written
        parts = []
        for ph in range(stride):
            q0, q1 = -(-(first - ph) // stride), (last - ph) // stride
            if q1 < q0:
                continue
            qv = Var(f"{loop.loop_var.name}_p{ph}", loop.loop_var.dtype)
            col = qv * stride + (ph - form[1])
            store = BufferStore(new, substitute(st.value, {loop.loop_var: col}),
                                (*st.indices[:-1], IntImm(ph, "int64"), qv))
            parts.append(For(qv, q0, q1 - q0 + 1, loop.kind, store, loop.annotations))
        return seq(*parts)

    class _Rewrite(StmtExprMutator):
        memoize = False

        def enter_for(self, node: For) -> Stmt | None:
            return phase_loops(node)

        def rewrite_buffer_load(self, pre: BufferLoad, post: BufferLoad) -> PrimExpr:
            return BufferLoad(new, index(post.indices)) if post.buffer is b else post

        def rewrite_buffer_store(self, pre: BufferStore, post: BufferStore) -> Stmt:
            return BufferStore(new, post.value, index(post.indices)) if post.buffer is b else post

        def rewrite_allocate(self, pre: Allocate, post: Allocate) -> Stmt:
            return Allocate(new, post.body) if post.buffer is b else post

    body = _Rewrite().visit(alloc)
    return finish(replace(func, {alloc: body}), where)


__all__ = ["split_phases"]
