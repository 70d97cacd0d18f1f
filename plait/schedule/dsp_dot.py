"""Integer dot products on Cortex-M cores with the DSP extension: two 16-bit MACs per instruction.

gcc turns the dot-product loops of the int8 convolutions and matrix products
(:func:`plait.schedule.int_rules.dot_loop`: an int32 sum of widened 8/16-bit loads, contiguous along
the innermost reduce loop) into one ``SMLABB`` per element on ARMv7E-M: it does not form ``SMLAD``
(two products of 16-bit halves per instruction) from C. On a ``microcontroller`` machine with packed
MACs (:attr:`Machine.narrow_macs` 2: Cortex-M4, M7, M55), :func:`dsp_dot` replaces such a loop by one
call of a ``dot_*`` kernel (:mod:`plait.tir.kernels`; the C backend's implementation uses the ACLE
intrinsics behind ``__ARM_FEATURE_DSP``, a plain C body of the same integers otherwise) on the addresses of the
two runs, with the zero points subtracted in the loop passed along. The cost model prices the call as
the kernel's instructions (:func:`kernel_ops`).
"""

from __future__ import annotations

from plait.tir.dtype import int_range
from plait.tir.expr import AddressOf, Add, BufferLoad, Call, Cast, IntImm, Mul, PrimExpr, Sub, Var
from plait.tir.functor import StmtExprMutator, substitute
from plait.tir.kernels import call_kernel, dot_kernel_name
from plait.tir.op import address_of
from plait.tir.stmt import Allocate, Buffer, BufferStore, Evaluate, For, PrimFunc, SeqStmt, Stmt, seq
from plait.schedule.analysis import chain, check_new_names, const_int, flat_linear, get_loop, replace
from plait.schedule.errors import ScheduleError
from plait.schedule.loops import finish
from plait.schedule.machine import Machine
from plait.schedule.stage import analyze, contiguous, uses

PREFIX = "dot_"
"""The names of the kernels (``dot_<a>_<b>``: :func:`plait.tir.kernels.dot_kernel_name`)."""

_SHORT = {"uint8": "u8", "int8": "s8", "int16": "s16"}


def uses_dsp_dot(m: Machine) -> bool:
    """Does the machine get the kernels: a Cortex-M core (``microcontroller`` rules, whose code is C)
    with paired 16-bit multiply-accumulates."""
    return m.rules == "microcontroller" and m.narrow_macs >= 2


def _factor(e: PrimExpr) -> tuple[BufferLoad, int] | None:
    """(the load, its zero point) of ``int32(load)`` or ``int32(load) - zp``."""
    zp = 0
    if isinstance(e, Sub) and isinstance(e.b, IntImm):
        e, zp = e.a, int(e.b.value)
    elif isinstance(e, Add) and isinstance(e.b, IntImm):
        e, zp = e.a, -int(e.b.value)
    if isinstance(e, Cast) and e.dtype == "int32" and isinstance(e.value, BufferLoad) and \
            e.value.buffer.dtype in _SHORT:
        return e.value, zp
    return None


def _kernel_name(a: str, za: int, b: str, zb: int) -> str:
    return dot_kernel_name(_SHORT[a], bool(za), _SHORT[b], bool(zb))


def dsp_dot(func: PrimFunc, root: str) -> PrimFunc | None:
    """``func`` with the innermost reduce loop of stage ``root`` (``acc = acc + int32(A[..]) [- za]) *
    (int32(B[..]) [- zb])``, both loads contiguous along it) replaced by ``acc = acc + dot_*(&A[..],
    &B[..], n, za, zb)``; None when the loop is not of that form (8-bit operands of either sign, or
    both int16 without zero points)."""
    st = analyze(func, get_loop(func, root, f"stage '{root}'"))
    if not st.reduce or st.update is None:
        return None
    loop = st.reduce[-1]
    body, n = loop.body, const_int(loop.extent)
    if not isinstance(body, BufferStore) or n is None or n < 1 or const_int(loop.min) is None:
        return None
    v = body.value
    acc = body.buffer
    if not isinstance(v, Add):
        return None
    acc_load, mul = (v.a, v.b) if isinstance(v.a, BufferLoad) else (v.b, v.a)
    if not isinstance(acc_load, BufferLoad) or acc_load.buffer is not acc or not isinstance(mul, Mul) or \
            body.value.dtype != "int32":
        return None
    fa, fb = _factor(mul.a), _factor(mul.b)
    if fa is None or fb is None:
        return None
    (la, za), (lb, zb) = fa, fb
    ta, tb = la.buffer.dtype, lb.buffer.dtype
    if ("int16" in (ta, tb)) and (ta != tb or za or zb):
        return None
    if not all(int_range(t)[0] <= z <= int_range(t)[1] for t, z in ((ta, za), (tb, zb))):
        return None  # (a value minus a zero point of its type lies in [-255, 255]: SSUB16 is exact)
    r = loop.loop_var
    for ld in (la, lb):
        if not contiguous(ld.indices, r, 1, ld.buffer.static_shape):
            return None
    start = {r: loop.min}
    pa, pb = (address_of(BufferLoad(ld.buffer, tuple(substitute(i, start) for i in ld.indices))) for ld in (la, lb))
    args = [IntImm(x, "int32") for x in (n, za, zb)]
    dot = call_kernel(_kernel_name(ta, za, tb, zb), pa, pb, *args)
    new = BufferStore(acc, Add(acc_load, dot) if acc_load is v.a else Add(dot, acc_load), body.indices)
    return replace(func, {loop: new})


PAIR_PREFIX = "dot2_"
"""The paired kernels (``dot2_<a>_<b>(a, b0, b1, n, za, zb, out)``: ``out[k] += a . bk``)."""


class _Acc(StmtExprMutator):
    """Loads of the one-element accumulator ``acc`` -> ``acc2[k]``."""

    def __init__(self, acc: Buffer, acc2: Buffer, k: PrimExpr):
        super().__init__()
        self.acc, self.acc2, self.k = acc, acc2, k

    def rewrite_buffer_load(self, pre: BufferLoad, post: PrimExpr) -> PrimExpr:
        return BufferLoad(self.acc2, (self.k,)) if pre.buffer is self.acc else post


def pair_outputs(func: PrimFunc, root: str) -> PrimFunc | None:
    """Stage ``root`` after :func:`dsp_dot` (``acc = 0; for ...: acc += dot_*(&A[..], &B[..]); out
    = f(acc)`` inside its spatial loops) with two outputs per kernel call: the first spatial loop of even
    extent that exactly one operand's address depends on (a convolution's output channels: the weight
    rows; the pixels share the input row) split by two, one ``dot2_*`` call summing both into a
    two-element accumulator (the shared operand loaded and widened once for both), then the
    epilogue once per output. None when the stage is not of that form."""
    st = analyze(func, get_loop(func, root, f"stage '{root}'"))
    alloc = st.spatial[-1].body if st.spatial else None
    if not isinstance(alloc, Allocate) or alloc.buffer.scope != "local" or \
            any(const_int(d) != 1 for d in alloc.buffer.shape) or not isinstance(alloc.body, SeqStmt):
        return None
    acc, stmts = alloc.buffer, alloc.body.stmts
    if len(stmts) < 3 or not isinstance(stmts[0], BufferStore) or stmts[0].buffer is not acc:
        return None
    init, red, rest = stmts[0], stmts[1], stmts[2:]
    loops = chain(red) if isinstance(red, For) else []  # (no loop left: one reduce loop, now the call)
    leaf = loops[-1].body if loops else red
    dot = leaf.value.b if isinstance(leaf, BufferStore) and isinstance(leaf.value, Add) else None
    if not isinstance(dot, Call) or dot.kind != "kernel" or not dot.name.startswith(PREFIX) or leaf.buffer is not acc:
        return None
    ptrs = dot.args[:2]
    if not all(isinstance(p, AddressOf) for p in ptrs):
        return None
    pick = None
    for lp in st.spatial:
        n = const_int(lp.extent)
        deps = [uses(p.indices, lp.loop_var) for p in ptrs]  # type: ignore[union-attr]
        if n is not None and n >= 2 and n % 2 == 0 and const_int(lp.min) == 0 and sum(deps) == 1:
            pick = (lp, deps.index(True))
            break
    if pick is None:
        return None
    lp, paired = pick
    v = lp.loop_var
    try:
        check_new_names(func, [v.name + "_o", v.name + "_i"], f"pair_outputs '{root}'")
    except ScheduleError:
        return None
    vo, vi = Var(v.name + "_o", v.dtype), Var(v.name + "_i", v.dtype)

    def at(k: PrimExpr) -> dict[Var, PrimExpr]:
        return {v: Add(Mul(vo, IntImm(2, v.dtype)), k)}

    acc2 = Buffer(acc.name, (IntImm(2),), acc.dtype, acc.scope)
    shared, zs, zp = ptrs[1 - paired], dot.args[4 - paired], dot.args[3 + paired]
    a, b = dot.name[len(PREFIX):].split("_")
    names = (a, b) if paired == 1 else (b, a)
    two = [substitute(ptrs[paired], at(IntImm(k, v.dtype))) for k in (0, 1)]
    call = call_kernel(f"{PAIR_PREFIX}{names[0]}_{names[1]}", shared, *two, dot.args[2], zs, zp,
                       address_of(acc2, IntImm(0)))
    body: Stmt = Evaluate(call)
    for r in reversed(loops):
        body = For(r.loop_var, r.min, r.extent, r.kind, body, r.annotations)
    inits = [BufferStore(acc2, substitute(init.value, at(IntImm(k, v.dtype))), (IntImm(k),)) for k in (0, 1)]
    epi = For(vi, IntImm(0, v.dtype), IntImm(2, v.dtype), "unrolled",
              _Acc(acc, acc2, vi).visit(substitute(seq(*rest), at(vi))))
    nest: Stmt = Allocate(acc2, seq(*inits, body, epi))
    for s_ in reversed(st.spatial):
        if s_ is lp:
            nest = For(vo, s_.min, IntImm(const_int(s_.extent) // 2, v.dtype), s_.kind, nest, s_.annotations)
        else:
            nest = For(s_.loop_var, s_.min, s_.extent, s_.kind, nest, s_.annotations)
    try:
        return finish(replace(func, {st.root: nest}), f"pair_outputs '{root}'")
    except ScheduleError:
        return None


DW2 = "dw2_s16"
"""The depthwise kernel of :func:`channel_pairs` (two adjacent channels-last int16 channels per call)."""


def channel_pairs(func: PrimFunc, root: str) -> PrimFunc | None:
    """A depthwise convolution's channels-last stage (``S[.., ch] = 0; for ry, rx: S[.., ch] +=
    int32(X[..]) * int32(W[..])``, int16 ``X`` and ``W``, the innermost spatial loop ``ch`` of even
    extent contiguous in ``X``, ``W`` and ``S``, the reduce loops not in ``S``) as one call of
    :data:`DW2` per pair of channels (``ch`` halved): the taps' strides passed as arguments. None when
    the stage is not one."""
    st = analyze(func, get_loop(func, root, f"stage '{root}'"))
    upd = st.update
    if upd is None or not st.spatial or not 1 <= len(st.reduce) <= 2 or upd.buffer.dtype != "int32":
        return None
    ch = st.spatial[-1]
    n = const_int(ch.extent)
    body = ch.body
    if n is None or n < 2 or n % 2 or const_int(ch.min) != 0 or not isinstance(body, SeqStmt) or \
            len(body.stmts) != 2 or body.stmts[1] is not st.reduce[0]:
        return None
    init = body.stmts[0]
    if not isinstance(init, BufferStore) or init.buffer is not upd.buffer or const_int(init.value) != 0:
        return None
    if any(const_int(r.min) != 0 or const_int(r.extent) is None for r in st.reduce) or st.reduce[-1].body is not upd:
        return None
    v = upd.value
    mul = v.b if isinstance(v, Add) and isinstance(v.a, BufferLoad) and v.a.buffer is upd.buffer else None
    if not isinstance(mul, Mul):
        return None
    loads = []
    for f in (mul.a, mul.b):
        if not (isinstance(f, Cast) and f.dtype == "int32" and isinstance(f.value, BufferLoad) and
                f.value.buffer.dtype == "int16"):
            return None
        loads.append(f.value)
    flats = [flat_linear(a.indices, a.buffer.static_shape) for a in (*loads, upd)]
    if any(fl is None for fl in flats):
        return None
    (fx, _), (fw, _), (fo, _) = flats  # type: ignore[misc]
    c, reds = ch.loop_var, [r.loop_var for r in st.reduce]
    if not fx.get(c) == fw.get(c) == fo.get(c) == 1 or any(fo.get(r, 0) for r in reds):
        return None
    co = Var(c.name + "_o", c.dtype)
    try:
        check_new_names(func, [co.name], f"channel_pairs '{root}'")
    except ScheduleError:
        return None
    start: dict[Var, PrimExpr] = {c: Mul(co, IntImm(2, c.dtype))}
    start.update({r: IntImm(0, r.dtype) for r in reds})
    ptrs = [address_of(BufferLoad(a.buffer, tuple(substitute(i, start) for i in a.indices))) for a in (*loads, upd)]
    taps = [(1, 0, 0)] * (2 - len(reds)) + [(const_int(r.extent), fx.get(r.loop_var, 0), fw.get(r.loop_var, 0))
                                             for r in st.reduce]
    (kh, xr, wr), (kw, xc, wc) = taps
    args = [IntImm(int(a), "int32") for a in (kh, kw, xr, xc, wr, wc)]
    nest: Stmt = For(co, IntImm(0, c.dtype), IntImm(n // 2, c.dtype), ch.kind,
                     Evaluate(call_kernel(DW2, *ptrs, *args)), ch.annotations)
    for s_ in reversed(st.spatial[:-1]):
        nest = For(s_.loop_var, s_.min, s_.extent, s_.kind, nest, s_.annotations)
    try:
        return finish(replace(func, {st.root: nest}), f"channel_pairs '{root}'")
    except ScheduleError:
        return None


def kernel_ops(call: Call, m: Machine) -> tuple[float, float, float] | None:
    """(loads, integer instructions, multiply-accumulate cycles) of one call of a ``dot_*`` kernel
    (its DSP body: per word of four 8-bit elements of both operands two loads, four extensions, a
    ``SSUB16`` per pair per operand with a zero point and two SMLADs; int16 pairs loaded as they are;
    three instructions of loop overhead per eight elements; the rest one element at a time); None for
    another call."""
    if call.kind == "kernel" and call.name == DW2 and len(call.args) == 9:
        kh, kw = (const_int(a) for a in call.args[3:5])
        if kh is None or kw is None:
            return None  # (per tap: a word of each operand, SMLABB and SMLATT; the row loop; two stores)
        return 2 * kh * kw + 2, 3 * kh + 2, 2 * kh * kw * m.int_mac_cycles
    pair = call.name.startswith(PAIR_PREFIX)
    if call.kind != "kernel" or not (pair or call.name.startswith(PREFIX)) or len(call.args) != (7 if pair else 5):
        return None
    n = const_int(call.args[3 if pair else 2])
    if n is None:
        return None
    a, b = call.name[len(PAIR_PREFIX if pair else PREFIX):].split("_", 1)
    body, tail = n - n % 8, n % 8
    mac = m.int_mac_cycles
    if pair:  # (three runs: the shared one loaded and widened once; out[0], out[1] added to at the end)
        macs = mac * (2 * body / m.narrow_macs + 2 * tail)
        if a == "s16":
            return 1.5 * body + 3 * tail + 2, 5 * body / 8 + 3 * tail + 2, macs
        words = body / 4
        zs = 2 * a.endswith("z") + 4 * b.endswith("z")
        return 3 * words + 3 * tail + 2, words * (12 + zs) / 2 + 5 * body / 8 + 3 * tail + 2, macs
    if a == "s16":
        return body + 2 * tail, 3 * body / 8 + 3 * tail, mac * (body / m.narrow_macs + tail)
    zs = a.endswith("z") + b.endswith("z")
    words = body / 4
    loads = 2 * words + 2 * tail
    iops = words * (4 + 2 * zs) + 3 * body / 8 + 3 * tail
    return loads, iops, mac * (body / m.narrow_macs + tail)


__all__ = ["DW2", "PAIR_PREFIX", "PREFIX", "channel_pairs", "dsp_dot", "kernel_ops", "pair_outputs", "uses_dsp_dot"]
