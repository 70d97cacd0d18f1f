"""Integer kernels: the steps of the default rules for int8 convolutions and products.

The integer convolutions with one group are computed as dot products over packed, contiguous
rows (:mod:`plait.op.qnn_nn`): a reduction whose innermost reduce loop reads 8/16-bit integers
contiguously in every load, widened to int32, multiplied and summed. gcc vectorizes exactly that
loop with its dot-product pattern (``vpdpbusd`` / ``pmaddubsw`` for u8 x s8, ``vpdpwssd`` /
``pmaddwd`` for s16 x s16; on Cortex-M cores with the DSP extension only SMLABB, so there the loop
becomes a call of an SMLAD kernel, :mod:`plait.schedule.dsp_dot`) as long as the loop is left alone: the float rules' register tiles and ``rfactor`` turn it into elementwise widening
multiplies, 5-20x slower. So :func:`int_stage` claims such a stage and keeps its loop nest (the
reduce loops innermost, the accumulator a scalar), and the packing stages get their last loop
split by the channel count so that their index arithmetic is a plain (channel, column) pair
instead of a division per element. A shorter integer reduction whose output pixels run
contiguously (a 1x1 convolution over a few channels, a depthwise one over padded planes) is
computed one output channel x a block of pixels, the reduction outside the vectorized pixel loop
(:func:`_pixel_rows`). An epilogue that reads int32 sums across their layout (channels-last
depthwise sums requantized into NCHW) is vectorized along the loop its loads run in
(:func:`_read_order`).

``rules.py`` calls :func:`int_stage` first for every stage of the ``cpu`` and ``microcontroller``
rules; it returns None for a stage that is not one of these (the usual rules then apply).
"""

from __future__ import annotations

from plait.tir.expr import BufferLoad, Cast, FloorDiv, FloorMod, IntImm, PrimExpr, Select, Var
from plait.tir.functor import StmtExprMutator, pre_order
from plait.tir.stmt import For, PrimFunc
from plait.schedule import knobs
from plait.schedule.analysis import const_int, get_loop, linear, replace
from plait.schedule.dsp_dot import channel_pairs, dsp_dot, pair_outputs, uses_dsp_dot
from plait.schedule.loops import finish
from plait.schedule.errors import ScheduleError
from plait.schedule.machine import Machine
from plait.schedule.schedule import Schedule
from plait.schedule.stage import Stage, analyze, contiguous, uses
from plait.schedule.int_kernels import conv_kernel, dw_kernel, outer_kernel

NARROW = ("int8", "uint8", "int16")
"""The element types whose widening dot products gcc vectorizes."""

MIN_DOT = 32
"""A reduction is left to gcc's dot-product pattern when its innermost reduce loop has at least
this many iterations (shorter ones are not worth a horizontal sum per output)."""


def dot_loop(st: Stage) -> bool:
    """Is ``st`` an integer dot-product reduction: an int32 sum whose innermost reduce loop (of at
    least :data:`MIN_DOT` iterations) reads only 8/16-bit integer buffers, contiguously, each
    widened by a cast?"""
    if st.update is None or not st.reduce or st.update.buffer.dtype != "int32":
        return False
    r = st.reduce[-1]
    n = const_int(r.extent)
    if n is None or n < MIN_DOT:
        return False
    loads = st.loads()
    used = [ld for ld in loads if uses(ld.indices, r.loop_var)]
    if not used or any(ld.buffer.dtype not in NARROW for ld in loads):
        return False
    if not all(contiguous(ld.indices, r.loop_var, 1, ld.buffer.static_shape) for ld in used):
        return False
    widened = {id(c.value) for c in pre_order(st.update.value) if isinstance(c, Cast) and c.dtype == "int32"}
    return all(id(ld) in widened for ld in loads)


EPILOGUE_BLOCK = 64
"""At most this many outputs per block of a dot-product stage: their sums are computed one after
the other (each a dot product), then their epilogue (bias, requantization) runs as one vector loop.
The default block is the largest divisor of the innermost output loop up to this, a whole row of
a 56 x 56 image: a block shorter than gcc's vector (14 or 8 outputs with 16 int32 lanes) leaves
the epilogue scalar, and resnet_block's 3x3 convolutions took 1.7x the time with blocks of 14."""


ROW_BLOCK = 128
"""...but output rows shorter than :data:`EPILOGUE_BLOCK` (ds_cnn's 25 x 5 planes) are fused into
one run and blocked by up to this many outputs: one vector loop for the whole plane's epilogue
instead of one per row of 5 (its pointwise convolutions 1.25x faster)."""


DOT_UNROLL = 8
"""The sums of a block of outputs (fused rows, or a pixel's output channels channels-last) are
unrolled by the largest divisor of the block up to this, when each is at most :data:`DOT_UNROLL_MAX`
long (longer ones, e.g. 144 channels, get slower). gcc: ds_cnn's stem and pointwise layers ~10%
faster (NCHW rows); the llvm backend computes such an unrolled block's sums together
(plait/backends/llvm/dot.py; its stem was 4x slower than gcc's before; channels-last ds_cnn's
pointwise layers 11.7 -> 10.8 us, its stem 13.4 -> 10.6, transformer_encoder's products by 32 rows
63 -> 55 us in all; gcc's channels-last stem 11.6 -> 12.3). Knob ``dot_unroll``; the host cost
estimate of these blocks is MAC-bound only unrolled."""

DOT_UNROLL_MAX = 64


def _block_outputs(func: PrimFunc, st: Stage, root: str, host: bool = True) -> PrimFunc:
    """(SIMD machines only.) Split the innermost spatial loop into blocks (knob
    ``<root>.epilogue_block``; rows shorter than a block fused first, :data:`ROW_BLOCK`) and
    distribute the block loop over the accumulator's initialisation, the sums and the epilogue, so
    that the epilogue is vectorized; the sums keep their innermost reduce loop (short ones unrolled,
    :data:`DOT_UNROLL`: on a microcontroller with vectors, Cortex-M55, only those of fused rows)."""
    if st.output is None or st.output is st.update or not st.spatial:
        return func
    sch = Schedule(func)
    fused_rows = False
    if len(st.spatial) >= 2 and const_int(st.spatial[-1].extent) in range(2, EPILOGUE_BLOCK) and \
            not isinstance(st.output.value, BufferLoad):  # (an epilogue that is only a store gains nothing)
        fused = _fused_rows(func, st, root)  # rows shorter than a block: blocks across the rows
        if fused is not None:
            (sch, st), fused_rows = fused, True
    v = st.spatial[-1]
    n = const_int(v.extent)
    if n is None or n < 2:
        return func
    choices = sorted({d for d in range(1, min(n, ROW_BLOCK) + 1) if n % d == 0})
    default = max(d for d in choices if d <= (ROW_BLOCK if fused_rows else EPILOGUE_BLOCK))
    b = knobs.choose(f"{root}.epilogue_block", choices, default)
    if b < 2:
        return func
    try:
        inner = sch.split(v.loop_var.name, [None, b])[1] if b < n else v.loop_var.name
        sch.decompose_reduction(inner)
    except ScheduleError:
        return func
    for loop in (f"{inner}_init", f"{inner}_epi"):
        if loop in sch.loops():
            try:
                sch.vectorize(loop)
            except ScheduleError:
                pass
    if (fused_rows or host) and (const_int(st.reduce[-1].extent) or DOT_UNROLL_MAX + 1) <= DOT_UNROLL_MAX:
        # unrolled: independent short sums in flight (their horizontal adds overlap)
        unrolls = [d for d in range(1, min(b - 1, DOT_UNROLL) + 1) if b % d == 0]
        u = knobs.choose(f"{root}.dot_unroll", unrolls, unrolls[-1])
        if u > 1:
            try:
                sch.unroll(sch.split(inner, [None, u])[1])
            except ScheduleError:
                pass
    return sch.func


def _fused_rows(func: PrimFunc, st: Stage, root: str) -> tuple[Schedule, Stage] | None:
    """The stage with its two innermost output loops fused, if the output runs contiguously along
    the fused loop (a convolution's whole output plane)."""
    sch = Schedule(func)
    try:
        for lp in st.reduce:  # (a unit loop in an index would keep the fused loop's division)
            if const_int(lp.extent) == 1:
                sch.remove_unit_loop(lp.loop_var.name)
        sch.fuse(st.spatial[-2].loop_var.name, st.spatial[-1].loop_var.name)
        fst = analyze(sch.func, get_loop(sch.func, root, f"stage '{root}'"))
    except ScheduleError:
        return None
    out = fst.output
    if out is None or not contiguous(out.indices, fst.spatial[-1].loop_var, 1, out.buffer.static_shape):
        return None
    return sch, fst


def _split_pack(func: PrimFunc, st: Stage) -> PrimFunc | None:
    """A packing stage ``for f: P[.., f] = X[.., f % C, .., f // C ..]``: split ``f`` by ``C``."""
    if len(st.stores) != 1 or not st.spatial:
        return None
    inner = st.spatial[-1]
    v, n = inner.loop_var, const_int(inner.extent)
    divisors = {node.b.value for node in pre_order(st.stores[0].value)
                if isinstance(node, (FloorDiv, FloorMod)) and isinstance(node.b, IntImm) and node.a is v}
    if len(divisors) != 1 or n is None:
        return None
    c = divisors.pop()
    if c < 2 or n % c or n == c:
        return None
    sch = Schedule(func)
    try:
        outer_name, inner_name = sch.split(inner.loop_var.name, [None, c])
    except ScheduleError:
        return None
    root = get_loop(sch.func, st.root.loop_var.name, "pack stage")
    outer, inner_v = get_loop(sch.func, outer_name, "").loop_var, get_loop(sch.func, inner_name, "").loop_var
    new = _DivMod(outer, inner_v, c).visit(root)
    return finish(replace(sch.func, {root: new}), f"pack stage '{st.name}'")


class _DivMod(StmtExprMutator):
    """``(o * c + i) // c`` -> ``o`` and ``(o * c + i) % c`` -> ``i`` (``i`` in ``[0, c)``: the split)."""

    def __init__(self, outer: Var, inner: Var, c: int):
        super().__init__()
        self.outer, self.inner, self.c = outer, inner, c

    def _split_form(self, post: PrimExpr) -> bool:
        b = post.b  # type: ignore[attr-defined]
        return isinstance(b, IntImm) and b.value == self.c and \
            linear(post.a) == ({self.outer: self.c, self.inner: 1}, 0)  # type: ignore[attr-defined]

    def rewrite_floordiv(self, pre: FloorDiv, post: PrimExpr) -> PrimExpr:
        return self.outer if isinstance(post, FloorDiv) and self._split_form(post) else post

    def rewrite_floormod(self, pre: FloorMod, post: PrimExpr) -> PrimExpr:
        return self.inner if isinstance(post, FloorMod) and self._split_form(post) else post


def _load_order(func: PrimFunc, st: Stage) -> PrimFunc | None:
    """A split packing stage storing uint8 (a convolution's input packed channels-last for u8 x s8 dot
    products) whose load is not contiguous along its innermost (channel) loop: the outer loop along
    which it is (the columns) is moved innermost, so that the stage reads rows and writes with the
    channel stride, instead of gathering one byte per channel plane (knob ``<root>.load_order``).
    unet's 32-channel 66 x 66 pack: 289 -> 39 us; its 64-channel 34 x 34 one: 51 -> 21 us. None when
    the stage is not one (depthwise int16 packs keep their order)."""
    if len(st.stores) != 1 or st.stores[0].buffer.dtype != "uint8" or len(st.spatial) < 2:
        return None
    loads = st.loads()
    v = st.spatial[-1].loop_var
    if len(loads) != 1 or contiguous(loads[0].indices, v, 1, loads[0].buffer.static_shape) is not False:
        return None
    for lp in reversed(st.spatial[:-1]):
        if contiguous(loads[0].indices, lp.loop_var, 1, loads[0].buffer.static_shape):
            sch = Schedule(func)
            try:
                names = [x.loop_var.name for x in st.spatial]
                sch.reorder(*[x for x in names if x != lp.loop_var.name], lp.loop_var.name)
            except ScheduleError:
                return None
            return sch.func
    return None


def _vector_copy(func: PrimFunc, root: str) -> PrimFunc | None:
    """A split uint8 packing stage whose innermost loop runs contiguously in its store and its load (a
    stacked convolution's copy of runs of ``C`` channels, qnn_nn): that loop vectorized (the two
    buffers share one workspace, so gcc copied byte by byte: unet's 16-channel stack 39 -> 12 us)."""
    st = analyze(func, get_loop(func, root, f"stage '{root}'"))
    if len(st.stores) != 1 or st.stores[0].buffer.dtype != "uint8" or not st.spatial or len(st.loads()) != 1:
        return None
    v, (store, load) = st.spatial[-1].loop_var, (st.stores[0], st.loads()[0])
    if not (contiguous(store.indices, v, 1, store.buffer.static_shape) and
            contiguous(load.indices, v, 1, load.buffer.static_shape)):
        return None
    sch = Schedule(func)
    try:
        sch.vectorize(v.name)
    except ScheduleError:
        return None
    return sch.func


DOT = "dot_product"
"""The annotation of a dot-product stage's innermost reduce loop: the C compiler vectorizes it (its
dot-product pattern), so the cost model prices it as a vector loop although its kind is serial."""


def _mark_dot(func: PrimFunc, root: str) -> PrimFunc:
    st = analyze(func, get_loop(func, root, f"stage '{root}'"))
    if not st.reduce:
        return func
    sch = Schedule(func)
    sch.annotate(st.reduce[-1].loop_var.name, DOT, 1)
    return sch.func


PIXEL_BLOCK = 256
"""At most this many output pixels per block of the pixel-row form (:func:`_pixel_rows`)."""


def _pixel_run(func: PrimFunc, st: Stage, root: str, lanes: int, fuse: bool) -> tuple[Schedule, Stage] | None:
    """The stage with its unit reduce loops removed (and its two innermost output loops fused when
    ``fuse``), if its innermost output loop then runs contiguously in the output and in every load
    that uses it, at least two vectors long."""
    sch = Schedule(func)
    try:
        for lp in st.reduce:
            if const_int(lp.extent) == 1:
                sch.remove_unit_loop(lp.loop_var.name)
        if fuse:
            sch.fuse(st.spatial[-2].loop_var.name, st.spatial[-1].loop_var.name)
        st = analyze(sch.func, get_loop(sch.func, root, f"stage '{root}'"))
    except ScheduleError:
        return None
    f, n = st.spatial[-1], const_int(st.spatial[-1].extent)
    if n is None or n < 2 * lanes or not st.reduce or st.output is None or st.update is None:
        return None
    accesses = [st.output] + [ld for ld in st.loads() if uses(ld.indices, f.loop_var)]
    if not all(contiguous(a.indices, f.loop_var, 1, a.buffer.static_shape) for a in accesses) or \
            contiguous(st.update.indices, f.loop_var, 1, st.update.buffer.static_shape) is False:
        return None
    return sch, st


def _pixel_rows(func: PrimFunc, st: Stage, root: str, lanes: int) -> PrimFunc | None:
    """(SIMD machines.) A short integer reduction over 8/16-bit loads whose two innermost output
    loops fuse into one run contiguous in the output and in every load that uses it (a 1x1
    convolution over a few channels, too short for dot products), or whose innermost output loop
    alone is one (a depthwise convolution over padded planes): one output channel x a block of up
    to :data:`PIXEL_BLOCK` pixels (a divisor of their count of at least two vectors; knob
    ``<root>.pixel_block``), the reduction outside the pixel loop, which is vectorized (init, sums,
    epilogue). gcc keeps such a block's sums in registers; the float rules' tile of 8 channels x
    16 pixels goes through memory (2-3x slower)."""
    if st.update is None or st.update.buffer.dtype != "int32" or len(st.spatial) < 3 or st.output is None:
        return None
    loads = st.loads()
    if not loads or any(ld.buffer.dtype not in NARROW for ld in loads):
        return None
    widened = {id(c.value) for c in pre_order(st.update.value) if isinstance(c, Cast) and c.dtype == "int32"}
    if not all(id(ld) in widened for ld in loads):
        return None
    found = _pixel_run(func, st, root, lanes, True) or _pixel_run(func, st, root, lanes, False)
    if found is None:
        return None
    sch, st = found
    assert st.update is not None
    run = st.spatial[-1].loop_var.name
    n = const_int(st.spatial[-1].extent)
    assert n is not None
    choices = [d for d in range(2 * lanes, min(n, PIXEL_BLOCK) + 1) if n % d == 0]
    if not choices:  # (split leaves no tail)
        return None
    b = knobs.choose(f"{root}.pixel_block", choices, choices[-1])
    try:
        inner = sch.split(run, [None, b])[1] if b < n else run
        if st.update.buffer.scope != "local":
            sch.cache_write(inner, st.update.buffer.name)
        sch.decompose_reduction(inner)
        sch.reorder(*[lp.loop_var.name for lp in st.reduce], inner)
        for loop in (inner, f"{inner}_init", f"{inner}_epi"):
            if loop in sch.loops():
                sch.vectorize(loop)
    except ScheduleError:
        return None
    return sch.func


def _read_order(func: PrimFunc, st: Stage, lanes: int) -> PrimFunc | None:
    """(SIMD machines.) An elementwise stage storing 8/16-bit integers that reads int32 sums across
    their layout (the requantization of a channels-last depthwise convolution's sums into NCHW):
    the outer loop along which every load that uses it is contiguous, of at least one vector, is
    moved innermost and vectorized (the stores scattered instead of the loads gathered, the
    arithmetic in vectors). None when the stage is not one."""
    if st.is_reduction or len(st.stores) != 1 or st.stores[0].buffer.dtype not in NARROW or len(st.spatial) < 2:
        return None
    v = st.spatial[-1].loop_var
    loads = st.loads()
    if not any(ld.buffer.dtype == "int32" and contiguous(ld.indices, v, 1, ld.buffer.static_shape) is False
               for ld in loads):
        return None
    for lp in reversed(st.spatial[:-1]):
        n, u = const_int(lp.extent), lp.loop_var
        used = [ld for ld in loads if uses(ld.indices, u)]
        if n is None or n < lanes or not any(ld.buffer.dtype == "int32" for ld in used) or \
                not all(contiguous(ld.indices, u, 1, ld.buffer.static_shape) for ld in used):
            continue
        sch = Schedule(func)
        try:
            names = [x.loop_var.name for x in st.spatial]
            sch.reorder(*[x for x in names if x != u.name], u.name)
            sch.vectorize(u.name)
        except ScheduleError:
            return None
        return sch.func
    return None


TRANSPOSE_TILE = (8, 4)
"""A transposing pack is copied in tiles of at most this many elements (and at least 4) along the
axis its loads run on and the axis its stores run on (8 x 4: as fast as 8 x 8 in a C harness,
half the unrolled statements for gcc to compile)."""


def _tile_transpose(func: PrimFunc, st: Stage, root: str, any_outer: bool = True) -> PrimFunc | None:
    """A pack stage that transposes (NCHW int8 -> channels-last: stored contiguously along its
    innermost loop, its loads strided there but contiguous along an outer loop: the one just outside
    it, or the channels of an NHWC -> NCHW transpose, moved there) with no
    bounds check (a 1x1 convolution's; with them the unrolled tile branches, 2x slower): both
    loops split by a divisor of their extent up to :data:`TRANSPOSE_TILE` (knob
    ``<root>.transpose_tile``: False leaves the stage alone), the two tile loops innermost and unrolled,
    so that gcc transposes each tile in registers (a 96 x 576 pack 3x faster than element by
    element, every load a gather). None when the stage is not one."""
    if st.is_reduction or len(st.stores) != 1 or len(st.spatial) < 2 or \
            any(isinstance(x, Select) for x in pre_order(st.stores[0].value)):  # (bounds checks: branches)
        return None
    inner = st.spatial[-1]

    def along(lp: For) -> bool:  # (the loads that use the loop run contiguously along it)
        return all(contiguous(ld.indices, lp.loop_var, 1, ld.buffer.static_shape)
                   for ld in st.loads() if uses(ld.indices, lp.loop_var))

    outer: For | None = st.spatial[-2] if along(st.spatial[-2]) else None
    if outer is None and any_outer:  # (NHWC -> NCHW: the channels, moved just outside; SIMD machines)
        outer = next((lp for lp in reversed(st.spatial[:-2]) if along(lp) and
                      any(uses(ld.indices, lp.loop_var) for ld in st.loads())), None)
    if outer is None:
        return None
    ni, no = const_int(inner.extent), const_int(outer.extent)
    store = st.stores[0]
    loads = [ld for ld in st.loads() if uses(ld.indices, inner.loop_var)]
    if ni is None or no is None or not loads or \
            not contiguous(store.indices, inner.loop_var, 1, store.buffer.static_shape) or \
            any(contiguous(ld.indices, inner.loop_var, 1, ld.buffer.static_shape) for ld in loads):
        return None
    bo = max(d for d in range(1, min(no, TRANSPOSE_TILE[0]) + 1) if no % d == 0)
    bi = max(d for d in range(1, min(ni, TRANSPOSE_TILE[1]) + 1) if ni % d == 0)
    if not knobs.choose(f"{root}.transpose_tile", (False, True), True) or bi < 4 or bo < 4:
        return None
    sch = Schedule(func)
    try:
        o_out, o_in = sch.split(outer.loop_var.name, [None, bo]) if bo < no else (None, outer.loop_var.name)
        i_out, i_in = sch.split(inner.loop_var.name, [None, bi]) if bi < ni else (None, inner.loop_var.name)
        rest = [lp.loop_var.name for lp in st.spatial[:-1] if lp is not outer]
        names = rest + [x for x in (o_out, i_out) if x] + [o_in, i_in]
        sch.reorder(*names)
        sch.unroll(o_in)
        sch.unroll(i_in)
    except ScheduleError:
        return None
    return sch.func


def _fused_sum(func: PrimFunc, st: Stage, root: str) -> PrimFunc | None:
    """An int32 sum over several reduce loops whose loads run contiguously along them together
    (ds_cnn's average pool of a requantized 25 x 5 plane): the reduce loops fused into one run, the
    sum in a local scalar, so that gcc vectorizes the whole run as one reduction (its inner 5 alone:
    1.7x slower). None when the stage is not one."""
    if st.update is None or st.update.buffer.dtype != "int32" or len(st.reduce) < 2 or not st.spatial:
        return None
    sch = Schedule(func)
    try:
        names = [lp.loop_var.name for lp in st.reduce]
        fused = names[0]
        for nxt in names[1:]:
            fused = sch.fuse(fused, nxt)
        fst = analyze(sch.func, get_loop(sch.func, root, f"stage '{root}'"))
        r = fst.reduce[-1]
        used = [ld for ld in fst.loads() if uses(ld.indices, r.loop_var)]
        if len(fst.reduce) != 1 or not used or \
                not all(contiguous(ld.indices, r.loop_var, 1, ld.buffer.static_shape) for ld in used):
            return None
        if fst.update is not None and fst.update.buffer.scope != "local":
            sch.cache_write(fst.spatial[-1].loop_var.name, fst.update.buffer.name)
    except ScheduleError:
        return None
    return sch.func


ROW_VECTOR = 16
"""gcc 12 vectorizes an elementwise loop storing int8 (a requantization) 16 outputs per step on x86
(AVX2, AVX-512) and leaves the rest of a row scalar (rows of 24: 8 scalar outputs, the clamps
mispredicted branches; a plane of 24 x 24 rows 2.5x slower than one run of 576)."""


def _whole_planes(func: PrimFunc, st: Stage, root: str, lanes: int) -> PrimFunc | None:
    """(SIMD machines.) An elementwise stage storing 8/16-bit integers (a requantization) whose
    output rows are not a multiple of :data:`ROW_VECTOR` (mobilenet's rows of 24):
    its two innermost loops fused when every access runs contiguously along the fused loop (one
    vector loop per plane, no scalar tail per row), vectorized. None when the stage is not one."""
    if st.is_reduction or len(st.stores) != 1 or st.stores[0].buffer.dtype not in NARROW or len(st.spatial) < 2:
        return None
    n = const_int(st.spatial[-1].extent)
    if n is None or n % ROW_VECTOR == 0:
        return None
    sch = Schedule(func)
    try:
        fused = sch.fuse(st.spatial[-2].loop_var.name, st.spatial[-1].loop_var.name)
        fst = analyze(sch.func, get_loop(sch.func, root, f"stage '{root}'"))
        f = fst.spatial[-1].loop_var
        accesses = fst.stores + [ld for ld in fst.loads() if uses(ld.indices, f)]
        if not all(contiguous(a.indices, f, 1, a.buffer.static_shape) for a in accesses):
            return None
        sch.vectorize(fused)
    except ScheduleError:
        return None
    return sch.func


MAX_TAPS = 49
"""The most window taps :func:`_channel_taps` unrolls (7 x 7)."""


def _channel_taps(func: PrimFunc, st: Stage, lanes: int) -> PrimFunc | None:
    """(SIMD machines.) A channels-last depthwise convolution's sums (``_qnn_nhwc``, stage ``*_dwc``)
    over a multiple of two vectors of channels (whole vectors of int16 loads): each output pixel's
    channels one vector loop with the window's taps unrolled inside it, the sum in a local scalar (a
    register per lane; with the taps outside the channel loop, pixel rows, gcc kept the accumulator
    row in memory). gcc, 3 x 3 windows: 64 channels over 25 x 5 6.0 -> 4.6 us, 96 over 24 x 24 38.5
    -> 29.7, 32 over 12 x 12 3.4 -> 2.8; 16, 48 and 144 channels were slower so (25 -> 32, 4.8 -> 5.1,
    16 -> 22 us): they keep pixel rows. None when the stage is not one."""
    if st.update is None or len(st.spatial) != 4 or not st.reduce or st.output is None or \
            (const_int(st.spatial[-1].extent) or 1) % (2 * lanes):
        return None
    taps = 1
    for lp in st.reduce:
        taps *= const_int(lp.extent) or MAX_TAPS + 1
    if taps > MAX_TAPS:
        return None
    sch = Schedule(func)
    try:
        if st.update.buffer.scope != "local":
            sch.cache_write(st.spatial[-1].loop_var.name, st.update.buffer.name)
        for lp in st.reduce:
            sch.unroll(lp.loop_var.name)
        sch.vectorize(st.spatial[-1].loop_var.name)
    except ScheduleError:
        return None
    return sch.func


def int_stage(func: PrimFunc, root: str, m: Machine) -> PrimFunc | None:
    """``func`` with stage ``root`` scheduled as an integer kernel, or None when it is not one
    (knob ``<root>.dot``: False leaves the stage to the usual rules)."""
    st = analyze(func, get_loop(func, root, f"stage '{root}'"))
    if st.name.endswith("_outer") and (done := outer_kernel(func, st, m.lanes("int32")) or
                                       conv_kernel(func, st)) is not None:
        return done
    if st.name.endswith("_dwk") and (done := dw_kernel(func, st)) is not None:
        return done
    if st.name.endswith("_dwc") and m.lanes("int32") > 1 and \
            (done := _channel_taps(func, st, m.lanes("int32"))) is not None:
        return done
    if st.is_reduction:
        if uses_dsp_dot(m) and not dot_loop(st) and knobs.choose(f"{root}.channel_pairs", (True, False), True) and \
                (done := channel_pairs(func, root)) is not None:  # (depthwise, channels-last: SMLABB/SMLATT)
            return done
        if not dot_loop(st):
            lanes = m.lanes("int32")
            return (_pixel_rows(func, st, root, lanes) or _fused_sum(func, st, root)) if lanes > 1 else None
        if not knobs.choose(f"{root}.dot", (True, False), True):
            return None
        if st.update is not None and st.update.buffer.scope != "local":  # sum in a local scalar, store once
            sch = Schedule(func)
            try:
                sch.cache_write(st.spatial[-1].loop_var.name, st.update.buffer.name)
                func, st = sch.func, analyze(sch.func, get_loop(sch.func, root, f"stage '{root}'"))
            except ScheduleError:
                pass
        if uses_dsp_dot(m) and (done := dsp_dot(func, root)) is not None:  # SMLAD kernels (Cortex-M DSP)
            return (pair_outputs(done, root) or done) if knobs.choose(f"{root}.dot_pairs", (True, False), True) else done
        func = _block_outputs(func, st, root, m.rules != "microcontroller") if m.lanes("int32") > 1 else func
        return _mark_dot(func, root)
    if any(ld.buffer.dtype in ("int8", "uint8") for ld in st.loads()) and \
            any(s.buffer.dtype in NARROW for s in st.stores):
        done = None
        while (split := _split_pack(func, st)) is not None:  # again on the new innermost loop
            done = func = split
            st = analyze(func, get_loop(func, root, f"stage '{root}'"))
        tiled = _tile_transpose(func, st, root, m.lanes("int32") > 1)  # an unpadded transposing pack (1x1 convolutions)
        if tiled is not None:
            return tiled
        if done is not None and knobs.choose(f"{root}.load_order", (True, False), True):
            done = _load_order(done, st) or _vector_copy(done, root) or done
        return done
    lanes = m.lanes("int32")
    return (_read_order(func, st, lanes) or _whole_planes(func, st, root, lanes)) if lanes > 1 else None


__all__ = ["DOT", "MIN_DOT", "NARROW", "dot_loop", "int_stage"]
