"""Round half to even without ``nearbyintf`` on a core whose FPU has no VRINT (Cortex-M4F's FPv4-SP).

gcc calls libm's ``nearbyintf`` there (about 36 instructions per value: a quarter of the int8 ds_cnn's
Cortex-M4F count with float requantization). A requantization rounds a value it has just clamped
between two literals, ``(int)nearbyint(min(max(v, lo), hi))``: with both literals within ``2**22`` in
magnitude the float32 "magic number" rounding ``(x + 1.5 * 2**23) - 1.5 * 2**23`` gives the same
integer. The sum lies in ``[2**23, 2**24]``, where float32 values are the integers, so the addition
rounds ``x`` to an integer in the default rounding mode (to nearest, ties to even: ``1.5 * 2**23`` is
even, so a tie goes to the even ``x``), and the subtraction is exact. Only the sign of a zero can
differ (``-0.4`` gives ``+0.0``), and the cast to an integer that consumes it makes both 0. The C
keeps the two operations apart: plait never passes ``-ffast-math`` (no reassociation) and a Cortex-M
piece compiles with ``-ffp-contract=off``; float32 arithmetic is float32 on ARM and x86-64 (the host
simulation), so the host and the core compute the same bits.

:func:`round_by_magic` rewrites a PrimFunc so; the c kind applies it where :func:`lacks_vrint`, and
the C emitter treats ``(x + MAGIC) - MAGIC`` of a clamp like the rounded clamp it replaced
(:func:`magic_operand`: C's conversion needs no saturation).
"""

from __future__ import annotations

from typing import Any

from plait.tir.dtype import is_float, is_int
from plait.tir.expr import Add, Call, Cast, FloatImm, Max, Min, PrimExpr, Sub
from plait.tir.functor import StmtExprMutator
from plait.tir.stmt import PrimFunc

MAGIC = 12582912.0  # 1.5 * 2**23
LIMIT = 2.0**22


def lacks_vrint(target: Any) -> bool:
    """Does ``target`` (a c piece) have a hardware FPU without VRINT: FPv4 (Cortex-M4F)? FPv5 (M7F,
    M33, M55) has VRINTR, which gcc emits for ``nearbyintf``; without an FPU the requantization is
    fixed-point by default."""
    o = getattr(target, "options", {})
    return str(o.get("mfpu", "")).startswith("fpv4") and o.get("mfloat-abi") != "soft"


def _bounded_clamp(e: PrimExpr) -> bool:
    """``min(max(v, lo), hi)`` or ``max(min(v, hi), lo)`` in float32 with literals ``|lo|, |hi| < 2**22``
    (a NaN ``v`` gives the inner literal: the C min/max return their second operand)."""
    if e.dtype != "float32" or not isinstance(e, (Min, Max)) or not isinstance(e.a, (Min, Max)):
        return False
    if type(e.a) is type(e) or not isinstance(e.b, FloatImm) or not isinstance(e.a.b, FloatImm):
        return False
    return abs(e.b.value) < LIMIT and abs(e.a.b.value) < LIMIT


def magic_operand(e: PrimExpr) -> PrimExpr | None:
    """``x`` when ``e`` is ``(x + MAGIC) - MAGIC`` (what :func:`round_by_magic` writes), else None."""
    if isinstance(e, Sub) and isinstance(e.b, FloatImm) and e.b.value == MAGIC and isinstance(e.a, Add) \
            and isinstance(e.a.b, FloatImm) and e.a.b.value == MAGIC:
        return e.a.a
    return None


class _Magic(StmtExprMutator):
    def rewrite_cast(self, pre: Cast, post: Cast) -> PrimExpr:
        v = post.value
        if is_int(post.dtype) and isinstance(v, Call) and v.kind == "intrin" and v.name == "nearbyint" \
                and is_float(v.dtype) and len(v.args) == 1 and _bounded_clamp(v.args[0]):
            m = FloatImm(MAGIC, "float32")
            return Cast(post.dtype, Sub(Add(v.args[0], m), m))
        return post


def round_by_magic(func: PrimFunc) -> PrimFunc:
    """``func`` with every ``(int)nearbyint(clamp)`` of a float32 clamp within ``2**22`` rounded by the
    magic number (module docstring)."""
    body = _Magic().visit(func.body)
    return func if body is func.body else func.with_body(body)


__all__ = ["LIMIT", "MAGIC", "lacks_vrint", "magic_operand", "round_by_magic"]
