"""How the LLVM emitter shapes ``vectorized`` loops for LLVM's vectorizers: the metadata of a loop
(:meth:`VectorLoops.vector_hints`) and the split of a short loop of awkward length into whole
vectors and a tail (:meth:`VectorLoops.vector_pieces`). A mixin of
:class:`plait.backends.llvm.emit.LLVMFunctionEmitter` (``simd_bits``, ``m``: the module state)."""

from __future__ import annotations

from typing import Any

from plait.backends.llvm.ir_text import VECTOR_INTRINSICS
from plait.tir.dtype import bits, is_float
from plait.tir.expr import BufferLoad, Call, Div, IntImm, Mul, Var
from plait.tir.functor import pre_order, substitute
from plait.tir.stmt import BufferStore, For, Stmt
from plait.schedule.stage import coefficient


PIECES_MAX = 1024
"""Vectorized loops up to this long are split by :meth:`VectorLoops.vector_pieces`."""


class VectorLoops:
    """Loop shapes and metadata for ``vectorized`` loops."""

    simd_bits: int
    m: Any

    def vector_pieces(self, s: For) -> list[Stmt] | None:
        """A vectorized loop of a register tile (it reads or writes a ``local`` buffer) of constant
        extent up to 64 that is not a multiple of the SIMD width (a fused 25x5 row: 25 lanes with 16)
        as consecutive loops of whole vectors of halving widths and a scalar tail (16 + 8 + 1), each of
        which the loop vectorizer turns into straight-line vector code: the accumulators stay in
        registers. Fully unrolled instead, the SLP vectorizer vectorized ds_cnn's pointwise tile (8
        channels x 25) along the channels, 17x slower than gcc's code; one predicated loop of 8-wide
        vectors was 1.8x. Other loops (padded copies) stay fully unrolled: split, LLVM took 3x longer
        to compile ResNet-8. None when the loop is emitted as it is (see :meth:`vector_hints`)."""
        if s.kind != "vectorized" or not isinstance(s.extent, IntImm) or self.simd_bits < 64:
            return None
        n = s.extent.value
        width = max(1, self.simd_bits // _store_bits(s.body))
        while width > n:
            width //= 2
        if width < 2 or n % width == 0 or n > PIECES_MAX or not self.vectorizable_calls(s.body):
            return None
        if not any(isinstance(b, (BufferStore, BufferLoad)) and b.buffer.scope == "local" or
                   isinstance(b, (Div, Mul)) and is_float(b.dtype)
                   for b in pre_order(s.body, unique=True)):
            return None  # not a register tile: a padded copy (split, LLVM took 3x longer on ResNet-8)
        pieces: list[Stmt] = []
        start = 0
        while start < n:
            k = (n - start) // width * width if width >= 2 else n - start
            if k:
                v = Var(f"{s.loop_var.name}_v{len(pieces)}", s.loop_var.dtype)
                kind = "vectorized" if width >= 2 else "serial"
                pieces.append(For(v, s.min + start if start else s.min, k, kind,
                                  substitute(s.body, {s.loop_var: v}), s.annotations))
                start += k
            width //= 2
        return pieces

    def vectorizable_calls(self, body: Any) -> bool:
        """Only calls LLVM can vectorize: sqrt, fabs, floor... and libm functions with libmvec versions?"""
        for n in pre_order(body, unique=True):
            if isinstance(n, Call) and not (n.kind == "intrin" and (n.name in VECTOR_INTRINSICS or (
                    n.name, "float32" if n.args[0].dtype == "float16" else n.args[0].dtype) in self.m.vector_variants)):
                return False
        return True

    def vector_hints(self, s: For) -> list[str]:
        """Loop metadata for a vectorized loop. With a constant extent: SIMD-register wide and
        interleaved so that one vector iteration covers the whole loop (the loop disappears and its
        accumulators can live in registers across an enclosing reduction loop); an extent up to 64
        that is not a multiple of the width is fully unrolled instead (the SLP vectorizer takes it). The
        loop is never unrolled before the vectorizer runs: a short vectorized loop unrolled early is
        vectorized along the wrong (enclosing) loop."""
        vec = '!{!"llvm.loop.vectorize.enable", i1 true}'
        if not self.vectorizable_calls(s.body):  # LLVM would warn that it could not do what was asked
            return ['!{!"llvm.loop.unroll.full"}'] if isinstance(s.extent, IntImm) and s.extent.value <= 16 else []
        no_unroll = '!{!"llvm.loop.unroll.disable"}'
        if not isinstance(s.extent, IntImm) or self.simd_bits < 64:
            return [vec, no_unroll]
        n = s.extent.value
        width = max(1, self.simd_bits // _store_bits(s.body))
        while width > n:
            width //= 2
        if width >= 2 and n % width == 0 and n // width <= 16:
            # a strided load (resnet8's 1x1 convolution of stride 2) is an interleaved group with a gap
            # at its end, which needs a scalar last step, impossible when one vector step covers the
            # loop: LLVM gave up ("loop not vectorized"; 2.5x slower than gcc) unless it masks it
            masked = ['!{!"llvm.loop.vectorize.predicate.enable", i1 true}'] if _strided_load(s) else []
            return [vec, no_unroll, f'!{{!"llvm.loop.vectorize.width", i32 {width}}}',
                    f'!{{!"llvm.loop.interleave.count", i32 {n // width}}}', *masked]
        if n <= 64:  # measured: better than a vector loop with a remainder (ds_cnn's 25-wide rows)
            return ['!{!"llvm.loop.unroll.full"}']
        return [vec, no_unroll, f'!{{!"llvm.loop.vectorize.width", i32 {max(width, 2)}}}']


def _strided_load(s: For) -> bool:
    """Does the body of ``s`` load with a constant stride of 2..8 elements along its variable?"""
    for ld in pre_order(s.body, unique=True):
        shape = ld.buffer.static_shape if isinstance(ld, BufferLoad) else None
        if shape is None or len(shape) != len(ld.indices):
            continue
        total, stride = 0, 1
        for index, n in zip(reversed(ld.indices), reversed(shape)):
            c = coefficient(index, s.loop_var)
            if c is None:
                total = None
                break
            total, stride = total + c * stride, stride * n
        if total is not None and 2 <= total <= 8:
            return True
    return False


def _store_bits(body: Any) -> int:
    """The widest element (bits) stored in ``body`` (32 when it stores nothing)."""
    widths = [bits(n.buffer.dtype) for n in pre_order(body, unique=True) if isinstance(n, BufferStore)]
    return max(8, max(widths, default=32))
