"""Integer dot products on Cortex-M cores with the DSP extension: two 16-bit MACs per instruction.

gcc turns the dot-product loops of the int8 convolutions and matrix products
(:func:`plait.schedule.int_rules.dot_loop`: an int32 sum of widened 8/16-bit loads, contiguous along
the innermost reduce loop) into one ``SMLABB`` per element on ARMv7E-M: it does not form ``SMLAD``
(two products of 16-bit halves per instruction) from C. On a ``microcontroller`` machine with packed
MACs (:attr:`Machine.narrow_macs` 2: Cortex-M4, M7, M55), :func:`dsp_dot` replaces such a loop by one
call of a ``plait_dot_*`` kernel (C with the ACLE intrinsics behind ``__ARM_FEATURE_DSP``, a plain C
body of the same integers otherwise: :mod:`plait.backends.c.dsp_kernels`) on the addresses of the
two runs, with the zero points subtracted in the loop passed along. The cost model prices the call as
the kernel's instructions (:func:`kernel_ops`).
"""

from __future__ import annotations

from typing import Any

from plait.tir.expr import Add, BufferLoad, Call, Cast, IntImm, Mul, PrimExpr, Sub
from plait.tir.functor import substitute
from plait.tir.op import address_of, call_extern
from plait.tir.stmt import BufferStore, For, PrimFunc
from plait.schedule.analysis import const_int, get_loop, replace
from plait.schedule.machine import Machine
from plait.schedule.stage import analyze, contiguous

PREFIX = "plait_dot_"
"""The names of the kernels (``plait_dot_<a>_<b>``; :func:`plait.backends.c.dsp_kernels.kernel_name`)."""

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
    return f"{PREFIX}{_SHORT[a]}{'z' if za else ''}_{_SHORT[b]}{'z' if zb else ''}"


def dsp_dot(func: PrimFunc, root: str) -> PrimFunc | None:
    """``func`` with the innermost reduce loop of stage ``root`` (``acc = acc + int32(A[..]) [- za]) *
    (int32(B[..]) [- zb])``, both loads contiguous along it) replaced by ``acc = acc + plait_dot_*(&A[..],
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
    r = loop.loop_var
    for ld in (la, lb):
        if not contiguous(ld.indices, r, 1, ld.buffer.static_shape):
            return None
    start = {r: loop.min}
    pa, pb = (address_of(BufferLoad(ld.buffer, tuple(substitute(i, start) for i in ld.indices))) for ld in (la, lb))
    args = [IntImm(x, "int32") for x in (n, za, zb)]
    dot = call_extern("int32", _kernel_name(ta, za, tb, zb), pa, pb, *args)
    new = BufferStore(acc, Add(acc_load, dot) if acc_load is v.a else Add(dot, acc_load), body.indices)
    return replace(func, {loop: new})


def kernel_ops(call: Call, m: Machine) -> tuple[float, float, float] | None:
    """(loads, integer instructions, multiply-accumulate cycles) of one call of a ``plait_dot_*`` kernel
    (its DSP body: per word of four 8-bit elements of both operands two loads, four extensions, a
    ``SSUB16`` per pair per operand with a zero point and two SMLADs; int16 pairs loaded as they are;
    three instructions of loop overhead per eight elements; the rest one element at a time); None for
    another call."""
    if call.kind != "extern" or not call.name.startswith(PREFIX) or len(call.args) != 5:
        return None
    n = const_int(call.args[2])
    if n is None:
        return None
    a, b = call.name[len(PREFIX):].split("_", 1)
    body, tail = n - n % 8, n % 8
    mac = m.int_mac_cycles
    if a == "s16":
        return body + 2 * tail, 3 * body / 8 + 3 * tail, mac * (body / m.narrow_macs + tail)
    zs = a.endswith("z") + b.endswith("z")
    words = body / 4
    loads = 2 * words + 2 * tail
    iops = words * (4 + 2 * zs) + 3 * body / 8 + 3 * tail
    return loads, iops, mac * (body / m.narrow_macs + tail)


__all__ = ["PREFIX", "dsp_dot", "kernel_ops", "uses_dsp_dot"]
