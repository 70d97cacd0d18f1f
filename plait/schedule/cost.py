"""``estimate_cost(func, target) -> ScheduleCost``: an analytic estimate of a scheduled PrimFunc on a target.

The model (its constants and the checks behind them are in docs/schedules.md):

- a statement runs ``prod(extents of its loops)`` times (a symbolic extent counts as
  :data:`SYMBOLIC_EXTENT`); both branches of an ``if`` are counted (an upper bound);
- float work: ``a * b + c`` is one fused multiply-add instruction when the machine has an FPU for the
  dtype; a math intrinsic (exp, log, tanh...) is ``machine.intrinsic_ops`` operations, a cheap one
  (fabs, floor, isnan...) one instruction and no flop; library calls are never vectorized; selects and comparisons are instructions but not flops. Instructions
  issue at ``fma_per_cycle``; without an FPU each operation costs ``soft_float_cycles``;
- memory instructions: a load or store of a ``local`` buffer is free (registers). Any other load
  executes once per iteration of the loops its indices use; a loop it does not use costs nothing
  when the loop is inside all the loops it uses (the compiler hoists it) or when the compiler
  unrolls that loop completely (its value stays in a register across the copies): constant loops of
  at most ``machine.auto_unroll`` iterations (per vector), and ``unrolled`` loops. Loads and stores
  issue at ``loads_per_cycle``;
- a vectorized loop runs its body once per vector: ``extent // lanes`` full vectors, then the rest as
  compilers vectorize a remainder, in vectors of half, a quarter... the width down to 128 bits, and
  what is left one element at a time (:func:`vector_ops`: 25 floats in 512-bit vectors are 16 + 8 + 1,
  three instructions, not 25 / 16); a float instruction on a vector wider than ``machine.fma_bits``
  issues in parts (:func:`vector_passes`: AMD Zen 4 runs a 512-bit FMA as two 256-bit halves);
- loop overhead: ``3 / ops_per_cycle`` cycles per iteration of a loop the compiler keeps (not
  unrolled, more than one iteration), per vector in a vectorized loop;
- integer work on data (the operations of a statement's value, not of its indices or of loads'
  indices; a subexpression used twice counts once, as the compiler's CSE does): a multiply-accumulate
  ``acc + a * b`` costs ``machine.int_mac_cycles``, divided by ``machine.narrow_macs`` when both
  factors fit 16 bits (int8/int16 values widened, minus a zero point: SMLAD, PMADDWD); any other
  operation (add, min/max, shift, bitwise, a constant division) one instruction at
  ``ops_per_cycle``; on values wider than the core's word (``machine.word_bits``: int64 on a 32-bit
  core, the fixed-point requantization) ``machine.wide_op_cycles``, a product ``wide_mul_cycles``.
  Integer <-> float casts are float instructions (libgcc calls without an FPU), integer widening and
  narrowing are free; a call of an SMLAD dot-product kernel (Cortex-M with DSP,
  :mod:`plait.schedule.dsp_dot`) costs the loads, integer instructions and MACs of its body
  (:func:`plait.schedule.dsp_dot.kernel_ops`);
- superscalar machines (``ops_per_cycle > 1``) overlap float work, memory instructions and integer
  work (max); single-issue ones add them;
- memory: ``bytes`` counts each non-``local`` buffer read once and each written once (compulsory
  traffic); when those buffers do not fit ``machine.cache_bytes``, ``bytes / bytes_per_cycle``
  bounds the time from below, and when they do not fit the first-level cache
  (``machine.l1_bytes``, 0: none), ``bytes / l2_bytes_per_cycle``: ``cycles = max(compute, memory) + a
  call overhead``.

It ranks schedules and targets; it does not predict a machine to better than a small factor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from plait.tir.dtype import is_float
from plait.tir.expr import (
    CMP_OPS, Add, And, BinaryOp, BufferLoad, Call, Cast, Div, IntImm, Max, Min, Mul, Not, Or, PrimExpr, Select, Sub,
    UnaryOp, Var,
)
from plait.tir.functor import pre_order
from plait.tir.stmt import Allocate, AssertStmt, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt
from plait.schedule.dsp_dot import kernel_ops
from plait.schedule.machine import Machine

SYMBOLIC_EXTENT = 16
CALL_OVERHEAD_CYCLES = 20.0
CHEAP_INTRINSICS = frozenset({"fabs", "floor", "ceil", "trunc", "round", "nearbyint", "copysign", "fma", "isnan",
                              "isinf", "isfinite"})
_ARITH = (Add, Sub, Mul, Div, Min, Max)


@dataclass(frozen=True)
class ScheduleCost:
    """An estimate for one call: ``cycles`` on the target, ``bytes`` moved to and from memory, ``flops``
    (float operations; a multiply-add counts 2). ``compute_cycles`` and ``memory_cycles`` are the two
    bounds ``cycles`` is the maximum of (plus a call overhead)."""

    cycles: float
    bytes: int
    flops: int
    compute_cycles: float
    memory_cycles: float
    clock_mhz: float

    @property
    def seconds(self) -> float:
        return self.cycles / (self.clock_mhz * 1e6)

    @property
    def microseconds(self) -> float:
        return self.seconds * 1e6

    def __str__(self) -> str:
        return (f"{self.cycles:.4g} cycles ({self.microseconds:.4g} us at {self.clock_mhz:g} MHz), "
                f"{self.flops} flops, {self.bytes} bytes")


@dataclass
class _Ops:
    fops: float = 0.0  # float instructions (an FMA is one)
    flops: float = 0.0
    soft: float = 0.0  # float operations in software (no FPU)
    calls: float = 0.0  # float operations of math-library calls (never vectorized: no vector libm)
    ints: float = 0.0  # comparisons and logic (conditions)
    iops: float = 0.0  # integer instructions on data (not addresses)
    icycles: float = 0.0  # cycles of integer multiplies and multiply-accumulates on data
    kloads: float = 0.0  # loads inside plait's kernel calls (dot products: dsp_dot.kernel_ops)


def _expr_ops(e: PrimExpr, m: Machine, ops: _Ops, loads: list[BufferLoad]) -> None:
    fused: set[int] = set()
    for n in pre_order(e):
        if isinstance(n, BufferLoad):
            loads.append(n)
        elif isinstance(n, Call) and (k := kernel_ops(n, m)) is not None:  # an SMLAD dot-product kernel
            ops.kloads, ops.iops, ops.icycles = ops.kloads + k[0], ops.iops + k[1], ops.icycles + k[2]
        elif isinstance(n, Call) and n.kind == "intrin":
            dt = n.args[0].dtype if n.args else "float32"
            if n.name in CHEAP_INTRINSICS:
                _float(ops, m, dt, 1.0, 0.0)
            else:
                ops.flops += m.intrinsic_ops
                ops.calls += m.intrinsic_ops
        elif isinstance(n, (BinaryOp, UnaryOp, Select)):
            operand = n.true_value.dtype if isinstance(n, Select) else n.a.dtype
            if not is_float(operand):
                if isinstance(n, (And, Or, Not, Select) + CMP_OPS):
                    ops.ints += 1
                continue
            if id(n) in fused:
                ops.flops += 1
                continue
            if isinstance(n, (Add, Sub)) and m.has_fpu(operand):
                mul = next((c for c in (n.a, n.b) if isinstance(c, Mul)), None)
                if mul is not None:
                    fused.add(id(mul))
            _float(ops, m, operand, 1.0, 1.0 if isinstance(n, _ARITH) else 0.0)


def _bits(dtype: str) -> int:
    return 8 if dtype == "bool" else np.dtype(dtype).itemsize * 8


def _value_bits(e: PrimExpr) -> int:
    """An upper bound of the bits ``e``'s values need: a widened narrow load stays narrow, and so does
    a narrow value plus or minus a constant (a zero point)."""
    if isinstance(e, Cast) and not is_float(e.value.dtype):
        return min(_bits(e.dtype), _value_bits(e.value))
    if isinstance(e, IntImm):
        return int(e.value).bit_length() + 1
    if isinstance(e, Select):
        return max(_value_bits(e.true_value), _value_bits(e.false_value))
    if isinstance(e, (Add, Sub)) and (isinstance(e.a, IntImm) or isinstance(e.b, IntImm)):
        return min(_bits(e.dtype), max(_value_bits(e.a), _value_bits(e.b)) + 1)
    return _bits(e.dtype)


def _int_ops(value: PrimExpr, m: Machine, ops: _Ops) -> None:
    """The integer arithmetic of a statement's ``value`` on data: everything but the indices of its loads
    and the conditions of its selects (which :func:`_expr_ops` counts as logic); each node object once."""
    seen: set[int] = set()
    fused: set[int] = set()
    stack = [value]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, BufferLoad):
            continue
        if isinstance(n, Select):
            stack.extend((n.true_value, n.false_value))
            continue
        stack.extend(n._children())
        if isinstance(n, Cast):
            if is_float(n.dtype) != is_float(n.value.dtype):
                _float(ops, m, n.dtype if is_float(n.dtype) else n.value.dtype, 1.0, 0.0)
            elif not is_float(n.dtype) and _bits(n.dtype) > m.word_bits >= _bits(n.value.dtype):
                ops.iops += 1  # sign extension to a wide value (the high word)
            continue
        if not isinstance(n, (BinaryOp, UnaryOp)) or is_float(n.dtype) or isinstance(n, CMP_OPS + (And, Or, Not)):
            continue
        if id(n) in fused:
            continue
        wide = _bits(n.dtype) > m.word_bits
        if isinstance(n, Mul):
            ops.icycles += m.wide_mul_cycles if wide else m.int_mac_cycles
            continue
        mul = next((c for c in (n.a, n.b) if isinstance(c, Mul)), None) if isinstance(n, Add) else None
        if mul is not None and not wide and id(mul) not in seen:
            fused.add(id(mul))
            narrow = _value_bits(mul.a) <= 16 and _value_bits(mul.b) <= 16
            ops.icycles += m.int_mac_cycles / (m.narrow_macs if narrow else 1)
            continue
        if wide:
            ops.icycles += m.wide_op_cycles
        else:
            ops.iops += 1


def _float(ops: _Ops, m: Machine, dtype: str, instrs: float, flops: float) -> None:
    ops.flops += flops
    if m.has_fpu(dtype):
        ops.fops += instrs
    else:
        ops.soft += max(flops, instrs)


def vector_ops(extent: int, lanes: int, min_lanes: int) -> int:
    """Vector (or scalar) operations a loop of ``extent`` elements vectorized ``lanes`` wide runs: full
    vectors, then the remainder in vectors of ``lanes // 2``, ``lanes // 4``... down to ``min_lanes`` (a
    128-bit register), then one element at a time (the epilogues GCC and LLVM make)."""
    if lanes <= 1:
        return extent
    n, rest, width = extent // lanes, extent % lanes, lanes // 2
    while rest and width >= max(min_lanes, 2):
        n, rest, width = n + rest // width, rest % width, width // 2
    return n + rest


def _vectorized(loop: For) -> bool:
    """Whether the compiler runs ``loop`` in vectors: a vectorized loop, or a dot-product loop
    (:mod:`plait.schedule.int_rules`: serial in the TIR, the C compiler's dot-product pattern)."""
    return loop.kind == "vectorized" or bool(loop.annotations.get("dot_product"))


def vector_passes(extent: int, lanes: int, min_lanes: int, pass_lanes: int) -> int:
    """Passes through an FMA pipe that takes ``pass_lanes`` elements at once for the vectors of
    :func:`vector_ops` (a vector wider than the pipe issues in parts: AMD Zen 4's 512-bit FMA is two)."""
    if lanes <= 1 or pass_lanes >= lanes:
        return vector_ops(extent, lanes, min_lanes)
    n, rest, width = (extent // lanes) * -(-lanes // pass_lanes), extent % lanes, lanes // 2
    while rest and width >= max(min_lanes, 2):
        n, rest, width = n + (rest // width) * -(-width // pass_lanes), rest % width, width // 2
    return n + rest


def _iterations(m: Machine, loop: For, dtype: str, passes: bool = False) -> int:
    """Times the body of ``loop`` runs: per vector (and remainder element) when it is vectorized; with
    ``passes``, its vector FMAs' passes through a pipe of ``m.fma_bits``."""
    if not _vectorized(loop):
        return _extent(loop)
    bits = 8 if dtype == "bool" else np.dtype(dtype).itemsize * 8
    lanes, min_lanes = m.lanes(dtype), min(m.simd_bits, 128) // bits
    if passes and 0 < m.fma_bits < m.simd_bits:
        return vector_passes(_extent(loop), lanes, min_lanes, max(1, m.fma_bits // bits))
    return vector_ops(_extent(loop), lanes, min_lanes)


def _extent(loop: For) -> int:
    n = getattr(loop.extent, "value", None)
    return SYMBOLIC_EXTENT if n is None else max(0, n)


class _Walker:
    def __init__(self, m: Machine):
        self.m = m
        self.compute = 0.0
        self.flops = 0.0

    def vf(self, loop: For, dtype: str) -> int:
        return max(1, min(self.m.lanes(dtype), _extent(loop))) if _vectorized(loop) else 1

    def kept(self, loop: For, dtype: str) -> bool:
        """Whether the compiler keeps ``loop`` as a loop (does not unroll it completely)."""
        if loop.kind == "unrolled":
            return False
        n = getattr(loop.extent, "value", None)
        if n is not None and n <= 1:
            return False  # one iteration (a 1x1 kernel's window loops): no loop in the code
        return n is None or n // self.vf(loop, dtype) > self.m.auto_unroll

    def count(self, loops: tuple[For, ...], dtype: str, used: set[Var] | None = None, passes: bool = False) -> float:
        """Executions of a statement (``used`` None) or of a load using the variables ``used``; with
        ``passes``, of a statement's float instructions through the FMA pipes (:func:`vector_passes`)."""
        c = 1.0
        last_used = -1
        if used is not None:
            for k, lp in enumerate(loops):
                if lp.loop_var in used:
                    last_used = k
        for k, lp in enumerate(loops):
            n = _iterations(self.m, lp, dtype, passes)
            if used is None or lp.loop_var in used or (k < last_used and self.kept(lp, dtype)):
                c *= n
        return c

    def statement(self, exprs: list[PrimExpr], loops: tuple[For, ...], dtype: str, store: Buffer | None) -> None:
        m = self.m
        ops, loads = _Ops(), []
        for e in exprs:
            _expr_ops(e, m, ops, loads)
        if store is not None:
            _int_ops(exprs[-1], m, ops)
        n = self.count(loops, dtype)
        mem = sum(self.count(loops, dtype, {v for i in ld.indices for v in pre_order(i) if isinstance(v, Var)})
                  for ld in loads if ld.buffer.scope != "local")
        if store is not None and store.scope != "local":
            mem += n
        mem += n * ops.kloads
        scalar_n = float(np.prod([_extent(lp) for lp in loops]))
        nf = self.count(loops, dtype, passes=True) if ops.fops and 0 < m.fma_bits < m.simd_bits else n
        fp = nf * (ops.fops / m.fma_per_cycle if m.fma_per_cycle > 0 else 0.0) + n * ops.soft * m.soft_float_cycles
        if ops.calls:
            fpu = m.has_fpu(dtype if dtype.startswith("float") else "float32")
            fp += scalar_n * ops.calls * (1.0 / max(m.fma_per_cycle, 1.0) if fpu else m.soft_float_cycles)
        parts = (fp, mem / m.loads_per_cycle, n * (ops.ints + ops.iops) / m.ops_per_cycle + n * ops.icycles)
        self.compute += max(parts) if m.ops_per_cycle > 1 else sum(parts)
        self.flops += scalar_n * ops.flops

    def walk(self, body: Stmt) -> None:
        work: list[tuple[Stmt, tuple[For, ...]]] = [(body, ())]
        while work:
            s, loops = work.pop()
            if isinstance(s, SeqStmt):
                work.extend((c, loops) for c in s.stmts)
            elif isinstance(s, For):
                dt = _store_dtype(s)
                if self.kept(s, dt):
                    self.compute += self.count(loops + (s,), dt) * 3.0 / self.m.ops_per_cycle
                work.append((s.body, loops + (s,)))
            elif isinstance(s, AssertStmt):
                self.statement([s.cond], loops, "int64", None)
            elif isinstance(s, IfThenElse):
                self.statement([s.cond], loops, "int64", None)
                work.append((s.then_case, loops))
                if s.else_case is not None:
                    work.append((s.else_case, loops))
            elif isinstance(s, LetStmt):
                self.statement([s.value], loops, s.var.dtype, None)
                work.append((s.body, loops))
            elif isinstance(s, Allocate):
                work.append((s.body, loops))
            elif isinstance(s, BufferStore):
                self.statement([*s.indices, s.value], loops, s.buffer.dtype, s.buffer)
            elif isinstance(s, Evaluate):
                self.statement([s.value], loops, "float32", None)


def _store_dtype(loop: For) -> str:
    for n in pre_order(loop.body):
        if isinstance(n, BufferStore):
            return n.buffer.dtype
    return "float32"


def _buffer_bytes(b: Buffer) -> int:
    shape = b.static_shape
    if shape is None:
        return 0
    return int(np.prod(shape, dtype=np.int64)) * (np.dtype(b.dtype).itemsize if b.dtype != "bool" else 1)


def _traffic(func: PrimFunc) -> tuple[int, int]:
    """(bytes read + bytes written, bytes of the buffers touched) over non-local buffers."""
    reads: dict[Buffer, None] = {}
    writes: dict[Buffer, None] = {}
    for n in pre_order(func.body):
        if isinstance(n, BufferLoad) and n.buffer.scope != "local":
            reads.setdefault(n.buffer, None)
        elif isinstance(n, BufferStore) and n.buffer.scope != "local":
            writes.setdefault(n.buffer, None)
    total = footprint = 0
    for b in set(reads) | set(writes):
        size = _buffer_bytes(b)
        footprint += size
        total += size * ((b in reads) + (b in writes))
    return total, footprint


def estimate_cost(func: PrimFunc, target: Any = None, machine: Machine | None = None) -> ScheduleCost:
    """The :class:`ScheduleCost` of one call of ``func`` on ``target`` (a Target, a target string or a Piece),
    or on an explicit ``machine`` (then ``target`` may be None)."""
    if machine is None:
        from plait.schedule.rules import machine_for
        from plait.target import TargetError

        if target is None:
            raise TargetError("estimate_cost: no target given (pass a Target, a target string or a Piece, "
                              "or a machine)")
        machine = machine_for(target)
    w = _Walker(machine)
    w.walk(func.body)
    nbytes, footprint = _traffic(func)
    memory = nbytes / machine.bytes_per_cycle if footprint > machine.cache_bytes else 0.0
    if footprint > machine.l1_bytes > 0:  # streamed from the next cache level (a matrix-vector product's matrix)
        memory = max(memory, nbytes / machine.l2_bytes_per_cycle)
    cycles = max(w.compute, memory) + CALL_OVERHEAD_CYCLES
    return ScheduleCost(cycles, nbytes, int(round(w.flops)), w.compute, memory, machine.clock_mhz)


__all__ = ["CALL_OVERHEAD_CYCLES", "CHEAP_INTRINSICS", "ScheduleCost", "SYMBOLIC_EXTENT", "estimate_cost", "vector_ops",
           "vector_passes"]
