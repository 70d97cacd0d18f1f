"""The int8 convolution stages computed by kernels (:mod:`plait.tir.kernels`, called by their abstract
names; the C backend ships their implementations): :func:`outer_kernel` (a 1x1 convolution's NCHW
``"outer"`` form, kernel ``q8_outer``) and :func:`conv_kernel` (a channels-last convolution's ``"outer"``
form, ``q8_conv``), and :func:`dw_kernel` (a channels-last depthwise convolution's sums on AVX2 hosts,
``dw16``). Each
matches the stage's TE shape exactly and returns None otherwise (the usual rules then compute the same
sums, slower); :func:`plait.schedule.int_rules.int_stage` tries them first on ``*_outer`` and ``*_dwk``
stages."""

from __future__ import annotations

from plait.tir.expr import BufferLoad, IntImm, PrimExpr, Var
from plait.tir.functor import StmtExprMutator
from plait.tir.kernels import call_kernel
from plait.tir.op import address_of
from plait.tir.stmt import Allocate, Buffer, BufferStore, Evaluate, For, PrimFunc, seq
from plait.schedule.analysis import const_int, linear, replace
from plait.schedule.errors import ScheduleError
from plait.schedule.schedule import Schedule
from plait.schedule.stage import Stage

OUTER_KERNEL = "q8_outer"
"""The kernel of a 1x1 convolution's ``"outer"`` form (:data:`plait.op._qnn_forms.OUTER_LANES`)."""


def outer_kernel(func: PrimFunc, st: Stage, lanes: int) -> PrimFunc | None:
    """The ``"outer"`` stage of a 1x1 convolution (sums over the packed input ``[N, H, W, C]`` uint8
    and weights ``[O/16, C/4, 16, 4]`` int8) as one call of :data:`OUTER_KERNEL` into a workspace of
    sums, then its output loop nest (the fused epilogue, along whole planes) reading them; None when
    the stage is not that shape (left to the usual rules: the same sums, slower)."""
    if st.update is None or st.output is None or len(st.spatial) != 4 or len(st.reduce) != 1:
        return None
    loads = {ld.buffer.dtype: ld.buffer for ld in st.loads()}
    xb, wb = loads.get("uint8"), loads.get("int8")
    if xb is None or wb is None or len(loads) != 2 or len(xb.shape) != 4 or len(wb.shape) != 4:
        return None
    dims = [const_int(d) for d in (*xb.shape, *wb.shape, *(lp.extent for lp in st.spatial))]
    if any(d is None for d in dims):
        return None
    n, h, w, c, ob, c4, block, step, *out = dims
    if out != [n, ob * block, h, w] or c4 * step != c or (block, step) != (16, 4):
        return None
    sch = _sums_schedule(func, st, out, OUTER_KERNEL, (xb, wb), [n, h * w, c, ob * block])
    plane = sch.fuse(st.spatial[2].loop_var.name, st.spatial[3].loop_var.name)  # (the epilogue along planes)
    if h * w > lanes > 1 and h * w % lanes:  # whole vectors, the last one shifted back (no scalar tail)
        try:
            sch.vectorize(sch.split_overlapping(plane, lanes)[1])
        except ScheduleError:
            pass
    return sch.func


CONV_KERNEL = "q8_conv"
"""The kernel of a channels-last convolution's ``"outer"`` form (:mod:`plait.op._qnn_nhwc`)."""


def _window_step(index: PrimExpr, out: Var, taps: dict[Var, int]) -> tuple[int, int, int] | None:
    """(stride, dilation, taps) of an input index ``out * stride + tap * dilation`` (a unit tap loop
    may be gone: dilation 1, one tap)."""
    form = linear(index)
    if form is None or form[1] != 0 or out not in form[0] or len(form[0]) > 2:
        return None
    rest = [v for v in form[0] if v is not out]
    if not rest:
        return form[0][out], 1, 1
    if rest[0] not in taps:
        return None
    return form[0][out], form[0][rest[0]], taps[rest[0]]


def conv_kernel(func: PrimFunc, st: Stage) -> PrimFunc | None:
    """The ``"outer"`` stage of a channels-last convolution (sums over the padded input ``[N, HP, WP,
    CP]`` uint8 and weights ``[ceil(O/16), KH * KW * CP / 4, 16, 4]`` int8 into ``[N, OH, OW, O]``) as
    one call of :data:`CONV_KERNEL` into a workspace of sums, then its output loop nest (the fused
    epilogue, channels innermost) reading them; None when the stage is not that shape."""
    if st.update is None or st.output is None or len(st.spatial) != 4 or not st.reduce:
        return None
    loads = st.loads()
    xs = [ld for ld in loads if ld.buffer.dtype == "uint8"]
    ws = [ld for ld in loads if ld.buffer.dtype == "int8"]
    if len(xs) != 1 or len(ws) != 1 or len(loads) != 2 or len(xs[0].indices) != 4 or len(ws[0].buffer.shape) != 4:
        return None
    xb, wb = xs[0].buffer, ws[0].buffer
    dims = [const_int(d) for d in (*xb.shape, *wb.shape, *(lp.extent for lp in st.spatial))]
    if any(d is None for d in dims):
        return None
    n, hp, wp, cp, nb, t4, block, step, *out = dims
    taps = {lp.loop_var: const_int(lp.extent) or 0 for lp in st.reduce}
    i, y, z, _ = (lp.loop_var for lp in st.spatial)
    xi = xs[0].indices
    rows, cols = _window_step(xi[1], y, taps), _window_step(xi[2], z, taps)
    if rows is None or cols is None or linear(xi[0]) != ({i: 1}, 0) or out[0] != n or (block, step) != (16, 4) or \
            nb != -(-out[3] // 16) or t4 * step != rows[2] * cols[2] * cp or cp % 4:
        return None
    # (the epilogue along the channels; 8 of them stay scalar: gcc has no 8-byte int8 vector, and a fused
    # run of pixels x channels gathers the per-channel parameters: not vectorized either)
    return _sums_call(func, st, out, CONV_KERNEL, (xb, wb), [n, hp, wp, cp, out[1], out[2], out[3], rows[2], cols[2],
                                                             rows[0], cols[0], rows[1], cols[1]])


DW_KERNEL = "dw16"
"""The kernel of a channels-last depthwise convolution's sums on AVX2 hosts (stage ``*_dwk`` of
:mod:`plait.op._qnn_nhwc`)."""


def _sums_call(func: PrimFunc, st: Stage, out: list[int], kernel: str, operands: tuple, args: list[int]) -> PrimFunc:
    """Stage ``st`` as one call of ``kernel`` into a workspace of int32 sums ``out``, then its output loop
    nest (the fused epilogue, channels innermost: vectorized where it can be) reading them."""
    sch = _sums_schedule(func, st, out, kernel, operands, args)
    try:
        sch.vectorize(st.spatial[3].loop_var.name)
    except ScheduleError:
        pass
    return sch.func


def _sums_schedule(func: PrimFunc, st: Stage, out: list[int], kernel: str, operands: tuple,
                   args: list[int]) -> Schedule:
    """``func`` with stage ``st`` replaced by ``kernel(*operands, sums, *args)`` writing the int32 workspace
    ``sums`` of shape ``out``, then the stage's output loop nest reading the sums (a schedule of it)."""
    sums = Buffer(f"{st.name}_sums", tuple(IntImm(d) for d in out), "int32", "global.workspace")
    acc = st.update.buffer
    idx = tuple(lp.loop_var for lp in st.spatial)

    class _Sums(StmtExprMutator):
        def rewrite_buffer_load(self, pre: BufferLoad, post: PrimExpr) -> PrimExpr:
            return BufferLoad(sums, idx) if pre.buffer is acc else post

    store = st.output
    body: object = BufferStore(store.buffer, _Sums().visit(store.value), store.indices)
    for lp in reversed(st.spatial):
        body = For(lp.loop_var, lp.min, lp.extent, lp.kind, body, lp.annotations)
    call = Evaluate(call_kernel(kernel, *(address_of(b) for b in operands), address_of(sums),
                                *(IntImm(v, "int32") for v in args)))
    return Schedule(replace(func, {st.root: Allocate(sums, seq(call, body))}))


def dw_kernel(func: PrimFunc, st: Stage) -> PrimFunc | None:
    """The ``"dwk"`` stage of a channels-last depthwise convolution (sums over the int16 pack ``[N, HP,
    WP * C]`` and weights ``[KH, KW * C]`` into ``[N, OH, OW, C]``) as one call of :data:`DW_KERNEL`;
    None when the stage is not that shape (left to the usual rules: the same sums, slower)."""
    if st.update is None or st.output is None or len(st.spatial) != 4 or not st.reduce:
        return None
    loads = st.loads()
    if len(loads) != 2 or any(ld.buffer.dtype != "int16" for ld in loads):
        return None
    xl = next((ld for ld in loads if len(ld.buffer.shape) == 3), None)
    wl = next((ld for ld in loads if len(ld.buffer.shape) == 2), None)
    if xl is None or wl is None:
        return None
    dims = [const_int(d) for d in (*xl.buffer.shape, *wl.buffer.shape, *(lp.extent for lp in st.spatial))]
    if any(d is None for d in dims):
        return None
    n, hp, wpc, kh, kwc, *out = dims
    c = out[3]
    taps = {lp.loop_var: const_int(lp.extent) or 0 for lp in st.reduce}
    i, y, z, ch = (lp.loop_var for lp in st.spatial)
    rows, cols = _window_step(xl.indices[1], y, taps), linear(xl.indices[2])
    if rows is None or cols is None or linear(xl.indices[0]) != ({i: 1}, 0) or out[0] != n or cols[1] != 0:
        return None
    coef = cols[0]
    rest = [v for v in coef if v is not z and v is not ch]
    if coef.get(ch) != 1 or coef.get(z, 0) % c or len(rest) > 1 or \
            (rest and (rest[0] not in taps or coef[rest[0]] % c)):
        return None
    sw, (dw, kw) = coef[z] // c if z in coef else 1, ((coef[rest[0]] // c, taps[rest[0]]) if rest else (1, 1))
    if kh != rows[2] or kwc != kw * c or wpc % c:
        return None
    return _sums_call(func, st, out, DW_KERNEL, (xl.buffer, wl.buffer),
                      [n, hp, wpc, c, out[1], out[2], kh, kw, rows[0], sw, rows[1], dw])


__all__ = ["CONV_KERNEL", "DW_KERNEL", "OUTER_KERNEL", "conv_kernel", "dw_kernel", "outer_kernel"]
