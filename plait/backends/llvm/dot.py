"""Integer dot products in LLVM IR: the ``dot_product`` loops of the int8 kernels
(:mod:`plait.schedule.int_rules`) as explicit vector code.

Such a loop is ``acc[i] = acc[i] + int32(a[.., k]) * int32(b[.., k])`` over contiguous 8/16-bit rows.
gcc turns it into ``vpdpbusd``; LLVM 22's loop vectorizer does not (it widens u8 x s8 to 16 bits and
uses ``vpdpwssd``, half the work per instruction, and vectorized resnet_block's 3x3 convolutions
across the wrong loop: 3 ms each against gcc's 1.3). So the emitter writes the vector loop itself
(:meth:`DotEmitter.dots`): chunks of one vector of bytes (64 with 512-bit registers), the tail padded
with zeros into one more chunk (a masked load with AVX-512, else pieces of 32, 16, ... 1 elements:
nothing outside the row is read), the products summed into a vector of int32 lanes, one horizontal
sum at the end added to ``acc[i]`` (the dot products of an ``unrolled`` loop, int_rules'
``dot_unroll``, summed together: halving shuffles instead of one reduction each):

- u8 x s8 (the packed rows of every 8-bit convolution and product) on a CPU with AVX512-VNNI or
  AVX-VNNI: ``llvm.x86.avx512.vpdpbusd.512`` / ``.256`` (:func:`vnni_bits` asks LLVM itself, by
  compiling a probe, whether the target CPU and features have it: a wrong guess would stop the
  process in LLVM's instruction selection);
- otherwise: ``llvm.vector.partial.reduce.add`` of the widened products (any target: LLVM picks
  ``pmaddwd`` / ``vpdpwssd`` on x86, ``sdot`` / ``udot`` on AArch64...).

Integer sums wrap, so any order gives the same int32 as the scalar loop: every path is exact.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from plait.backends.llvm.ir_text import VALUE_TYPES
from plait.schedule.analysis import same_indices
from plait.schedule.stage import coefficient
from plait.tir.dtype import bits
from plait.tir.expr import Add, BufferLoad, Cast, IntImm, Mul, PrimExpr
from plait.tir.functor import pre_order, substitute
from plait.tir.stmt import BufferStore, For

DOT = "dot_product"  # the loop annotation of plait.schedule.int_rules
WIDE = ("int8", "uint8", "int16")
STRAIGHT = 16
"""Rows of at most this many chunks are straight-line code (two accumulators from 4 chunks on);
longer ones a loop of one chunk per iteration."""
NARROW = 8
"""Dot products summed together are first folded to this many lanes (256-bit shuffles are cheaper
than 512-bit ones on Zen 4; measured: 4 and 8 alike, 16 and one reduction each ~4% slower)."""


@dataclass(frozen=True)
class Dot:
    """A matched dot-product loop: ``store`` (``acc[i] = acc[i] + a * b``), the operand loads."""

    loop: For
    store: BufferStore
    a: BufferLoad
    b: BufferLoad


def _operand(e: PrimExpr) -> BufferLoad | None:
    if isinstance(e, Cast) and e.dtype == "int32" and isinstance(e.value, BufferLoad) and \
            e.value.dtype in WIDE:
        return e.value
    return None


def _unit_stride(ld: BufferLoad, loop: For) -> bool:
    """Does the row-major offset of ``ld`` move by exactly one element per step of the loop? (Each
    index affine in the loop variable; ``x // c`` of other variables, a fused loop's, are constants.)"""
    shape = ld.buffer.static_shape
    if shape is None or len(shape) != len(ld.indices):
        return False
    total, stride = 0, 1
    for index, n in zip(reversed(ld.indices), reversed(shape)):
        c = coefficient(index, loop.loop_var)
        if c is None:
            return False
        total += c * stride
        stride *= n
    return total == 1


def match_dot(s: For) -> Dot | None:
    """The dot product ``s`` computes, or None when it is not one of constant length."""
    if not s.annotations.get(DOT) or s.kind != "serial" or not isinstance(s.extent, IntImm) or s.extent.value < 16:
        return None
    st = s.body
    if not isinstance(st, BufferStore) or st.buffer.dtype != "int32" or not isinstance(st.value, Add):
        return None
    if any(n is s.loop_var for i in st.indices for n in pre_order(i)):
        return None
    for acc, prod in ((st.value.a, st.value.b), (st.value.b, st.value.a)):
        if isinstance(acc, BufferLoad) and acc.buffer is st.buffer and same_indices(acc.indices, st.indices) and \
                isinstance(prod, Mul):
            a, b = _operand(prod.a), _operand(prod.b)
            if a is None or b is None or not (_unit_stride(a, s) and _unit_stride(b, s)):
                return None
            if a.dtype == "int8" and b.dtype == "uint8":
                a, b = b, a  # the unsigned operand first (vpdpbusd's order)
            return Dot(s, st, a, b)
    return None


def match_dots(s: For) -> list[Dot] | None:
    """The dot products of ``s``: one dot-product loop, or an ``unrolled`` loop (of 2..16 steps:
    int_rules' ``dot_unroll``) whose body is one, copied for each step; None otherwise."""
    if s.kind == "unrolled" and isinstance(s.extent, IntImm) and 2 <= s.extent.value <= 16 and \
            isinstance(s.body, For):
        found = [match_dot(substitute(s.body, {s.loop_var: s.min + j})) for j in range(s.extent.value)]
        return found if all(d is not None for d in found) else None  # type: ignore[return-value]
    d = match_dot(s)
    return [d] if d is not None else None


@functools.lru_cache(maxsize=None)
def vnni_bits(cpu: str, features: str) -> int:
    """512 or 256 when LLVM generates ``vpdpbusd`` on zmm / ymm registers for ``cpu`` + ``features``
    (AVX512-VNNI, AVX-VNNI), else 0. LLVM answers: a u8 x s8 reduction compiled for the target is
    looked at (no table of CPU names to keep up to date; -mattr=-avx512vnni is honoured)."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return 0
    from plait.backends.llvm.module import LLVMError, create_target_machine, llvm_binding

    probe = ("define i32 @probe(<64 x i8> %a, <64 x i8> %b) {\n"
             "  %x = zext <64 x i8> %a to <64 x i32>\n  %y = sext <64 x i8> %b to <64 x i32>\n"
             "  %m = mul <64 x i32> %x, %y\n"
             "  %s = call i32 @llvm.vector.reduce.add.v64i32(<64 x i32> %m)\n  ret i32 %s\n}\n"
             "declare i32 @llvm.vector.reduce.add.v64i32(<64 x i32>)\n")
    try:
        tm = create_target_machine(cpu, features)
        asm = tm.emit_assembly(llvm_binding().parse_assembly(probe))
    except (LLVMError, RuntimeError):
        return 0
    lines = [ln for ln in asm.splitlines() if "vpdpbusd" in ln]
    if not lines:
        return 0
    return 512 if any("%zmm" in ln for ln in lines) else 256


def _pieces(n: int) -> list[tuple[int, int]]:
    """(offset, length) of the powers of two summing to ``n``, longest first (each offset a
    multiple of its length, as ``llvm.vector.insert`` needs)."""
    out, off = [], 0
    for b in range(n.bit_length() - 1, -1, -1):
        if n >> b & 1:
            out.append((off, 1 << b))
            off += 1 << b
    return out


class DotEmitter:
    """The mixin of :class:`plait.backends.llvm.emit.LLVMFunctionEmitter` that emits a :class:`Dot`."""

    def dots(self, found: list[Dot]) -> None:
        """Emit the dot products ``found`` (one loop, or the copies of an unrolled loop's body): each
        summed into a vector of int32 lanes, their horizontal sums at once (:meth:`_sum_lanes`),
        each added to its accumulator, in order."""
        accs = [self._dot_vector(d) for d in found]
        lanes = accs[0][1]
        if len(found) == 1 or len(found) > lanes:
            red = f"llvm.vector.reduce.add.v{lanes}i32"
            self.m.declare(red, f"declare i32 @{red}(<{lanes} x i32>)", external=False)
            sums = [self.op(f"call i32 @{red}(<{lanes} x i32> {v})", "dot") for v, _ in accs]
        else:
            vec, width = self._sum_lanes([v for v, _ in accs], lanes)
            sums = [self.op(f"extractelement <{width} x i32> {vec}, i64 {j}", "dot") for j in range(len(found))]
        for d, sum_ in zip(found, sums):
            st = d.store
            vals = [self.expr(i, index=True) for i in st.indices]
            ptr = self.address(st.buffer, st.indices, vals)
            old = self.op(f"load i32, ptr {ptr}{self.access_md()}", "ld")
            self.emit(f"store i32 {self.op(f'add i32 {old}, {sum_}')}, ptr {ptr}{self.access_md()}")

    def _dot_vector(self, d: Dot) -> tuple[str, int]:
        """The products of ``d`` summed into a vector: (its LLVM value, its lanes)."""
        s, n = d.loop, d.loop.extent.value  # type: ignore[attr-defined]
        k0 = {s.loop_var: s.min}
        ptrs = []
        for ld in (d.a, d.b):
            idx = tuple(substitute(i, k0) for i in ld.indices)
            ptrs.append(self.address(ld.buffer, idx, [self.expr(i, index=True) for i in idx]))
        vnni = self.m.vnni_bits if (d.a.dtype, d.b.dtype) == ("uint8", "int8") else 0
        lanes = vnni // 32 if vnni else max(4, self.simd_bits // 32)
        per = lanes * (2 if "int16" in (d.a.dtype, d.b.dtype) else 4)  # elements per chunk
        acc_t = f"<{lanes} x i32>"
        chunk = self._dot_chunk_fn(d, vnni, lanes, per)
        full, tail = divmod(n, per)
        if full > STRAIGHT:
            accs = [self._dot_loop(ptrs, (d.a.dtype, d.b.dtype), full, per, chunk, acc_t)]
        else:
            accs = ["zeroinitializer"] * (2 if full >= 4 else 1)
            for c in range(full):
                vals = [self._dot_load(p, c * per, per, ld.dtype) for p, ld in zip(ptrs, (d.a, d.b))]
                accs[c % len(accs)] = chunk(accs[c % len(accs)], vals)
        if tail:
            vals = [self._dot_padded(p, full * per, tail, per, ld.dtype) for p, ld in zip(ptrs, (d.a, d.b))]
            accs[-1] = chunk(accs[-1], vals)
        total = accs[0]
        for other in accs[1:]:
            total = self.op(f"add {acc_t} {total}, {other}")
        return total, lanes

    def _sum_lanes(self, vecs: list[str], lanes: int) -> tuple[str, int]:
        """The horizontal sums of ``vecs`` (at most ``lanes`` vectors of ``lanes`` int32) as one vector
        (and its width, a power of two at least ``len(vecs)``): lane ``j`` is the sum of ``vecs[j]``.
        Each vector is first folded (its upper half added to its lower half) down to :data:`NARROW`
        lanes (or the number of sums), then pairs of vectors are halved and added until one holds
        every sum: two shuffles and an add per pair, instead of a whole horizontal reduction each."""
        n = 1 << (len(vecs) - 1).bit_length()
        width = lanes
        while width > max(n, NARROW):
            vecs = [self._halve(v, width, 1, None) for v in vecs]
            width //= 2
        vecs = vecs + ["zeroinitializer"] * (n - len(vecs))
        h = width  # each vector: width // h groups (one per sum) of h partial sums
        while len(vecs) > 1:
            vecs = [self._halve(a, width, width // h, b) for a, b in zip(vecs[::2], vecs[1::2])]
            h //= 2
        v = vecs[0]
        while width > n:  # each sum still in h lanes: fold them
            v = self._halve(v, width, width // h, None)
            width, h = width // 2, h // 2
        return v, width

    def _halve(self, a: str, width: int, groups: int, b: str | None) -> str:
        """``a`` (and ``b``): vectors of ``width`` lanes in ``groups`` groups; each group's lower half
        plus its upper half, ``a``'s groups then ``b``'s (a vector of ``width`` lanes; of ``width // 2``
        without ``b``)."""
        h = width // groups // 2
        lo = [x * 2 * h + i for x in range(groups) for i in range(h)]
        if b is not None:
            lo = lo + [width + j for j in lo]
        hi = [j + h for j in lo]
        t, out = f"<{width} x i32>", f"<{len(lo)} x i32>"
        other = b if b is not None else "poison"
        x = self.op(f"shufflevector {t} {a}, {t} {other}, {out} <{', '.join(f'i32 {j}' for j in lo)}>")
        y = self.op(f"shufflevector {t} {a}, {t} {other}, {out} <{', '.join(f'i32 {j}' for j in hi)}>")
        return self.op(f"add {out} {x}, {y}")

    def _dot_chunk_fn(self, d: Dot, vnni: int, lanes: int, per: int):  # type: ignore[no-untyped-def]
        """acc, [a, b] (vectors of ``per`` elements) -> the new accumulator (its LLVM value)."""
        acc_t = f"<{lanes} x i32>"
        if vnni:
            fn = f"llvm.x86.avx512.vpdpbusd.{vnni}"
            vt = f"<{per} x i8>"
            self.m.declare(fn, f"declare {acc_t} @{fn}({acc_t}, {vt}, {vt})", external=False)
            return lambda acc, v: self.op(f"call {acc_t} @{fn}({acc_t} {acc}, {vt} {v[0]}, {vt} {v[1]})", "acc")
        fn = f"llvm.vector.partial.reduce.add.v{lanes}i32.v{per}i32"
        wide = f"<{per} x i32>"
        self.m.declare(fn, f"declare {acc_t} @{fn}({acc_t}, {wide})", external=False)

        def chunk(acc: str, v: list[str]) -> str:
            ext = []
            for val, ld in zip(v, (d.a, d.b)):
                how = "zext" if ld.dtype == "uint8" else "sext"
                ext.append(self.op(f"{how} <{per} x {VALUE_TYPES[ld.dtype]}> {val} to {wide}"))
            prod = self.op(f"mul {wide} {ext[0]}, {ext[1]}")
            return self.op(f"call {acc_t} @{fn}({acc_t} {acc}, {wide} {prod})", "acc")
        return chunk

    def _dot_load(self, base: str, offset: int | str, count: int, dtype: str) -> str:
        t = VALUE_TYPES[dtype]
        p = base if offset == 0 else self.op(f"getelementptr inbounds {t}, ptr {base}, i64 {offset}", "p")
        return self.op(f"load <{count} x {t}>, ptr {p}, align 1{self.access_md()}", "ld")

    def _dot_padded(self, base: str, offset: int, count: int, per: int, dtype: str) -> str:
        """``count`` elements from ``base + offset`` in a vector of ``per``, zeros after them: one
        masked load with AVX-512 (which loads bytes under a mask, the rest not touched), else loads
        of whole pieces (32, 16, ... 1 elements) inserted into a zero vector."""
        t = VALUE_TYPES[dtype]
        vt = f"<{per} x {t}>"
        if self.simd_bits >= 512 and per * bits(dtype) == 512:
            p = self.op(f"getelementptr inbounds {t}, ptr {base}, i64 {offset}", "p") if offset else base
            fn = f"llvm.masked.load.v{per}{t}.p0"
            self.m.declare(fn, f"declare {vt} @{fn}(ptr, i32, <{per} x i1>, {vt})", external=False)
            mask = "<" + ", ".join(f"i1 {'true' if j < count else 'false'}" for j in range(per)) + ">"
            return self.op(f"call {vt} @{fn}(ptr {p}, i32 1, <{per} x i1> {mask}, {vt} zeroinitializer)"
                           f"{self.access_md()}", "ld")
        vec = "zeroinitializer"
        for off, m in _pieces(count):
            part = self._dot_load(base, offset + off, m, dtype)
            fn = f"llvm.vector.insert.v{per}{t}.v{m}{t}"
            self.m.declare(fn, f"declare <{per} x {t}> @{fn}(<{per} x {t}>, <{m} x {t}>, i64)", external=False)
            vec = self.op(f"call <{per} x {t}> @{fn}(<{per} x {t}> {vec}, <{m} x {t}> {part}, i64 {off})")
        return vec

    def _dot_loop(self, ptrs: list[str], dtypes: tuple[str, str], full: int, per: int, chunk,  # type: ignore[no-untyped-def]
                  acc_t: str) -> str:
        """The ``full`` whole chunks as a loop (one per iteration); returns the accumulator."""
        hdr, body, done = self.label("dot.hdr"), self.label("dot.body"), self.label("dot.end")
        pre = self.block
        c, nxt, acc = self.tmp("dc"), self.tmp("dc.next"), self.tmp("dacc")
        self.emit(f"br label %{hdr}")
        self.start(hdr)
        self.emit(f"{c} = phi i64 [ 0, %{pre} ], [ {nxt}, %{body} ]")
        phi = len(self.lines)
        self.emit("")  # the accumulator's phi, once its next value is named
        more = self.op(f"icmp slt i64 {c}, {full}", "c")
        self.emit(f"br i1 {more}, label %{body}, label %{done}")
        self.start(body)
        off = self.op(f"mul nsw i64 {c}, {per}", "i")
        new = chunk(acc, [self._dot_load(p, off, per, dt) for p, dt in zip(ptrs, dtypes)])
        self.lines[phi] = f"  {acc} = phi {acc_t} [ zeroinitializer, %{pre} ], [ {new}, %{body} ]"
        self.emit(f"{nxt} = add nsw i64 {c}, 1")
        self.emit(f"br label %{hdr}")
        self.start(done)
        return acc
