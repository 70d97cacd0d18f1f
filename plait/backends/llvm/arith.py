"""LLVM IR of TIR's integer and conversion semantics (casts, float -> int, shifts, divisions): every
operation is defined for every input, as TIR defines it (docs/tir.md, "Numeric semantics"); and
:class:`Safety`: may evaluating an expression fault (then a lazy select branches)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from plait.backends.llvm.ir_text import VALUE_TYPES, float_literal, int_literal
from plait.tir.dtype import bits, is_float, is_uint
from plait.tir.expr import BufferLoad, Call, FloorDiv, FloorMod, IntImm, PrimExpr, ShiftLeft, TruncMod
from plait.tir.int_bounds import IntBounds


class Safety:
    """May evaluating an expression have an effect or fault? A load whose indices are provably in
    bounds (:class:`plait.tir.int_bounds.IntBounds`: interval arithmetic over loop ranges with
    constant bounds) cannot; a load that may be out of bounds (a padding guard's) or an extern call
    can. Integer division cannot: it is defined for every divisor (zero and -1 are selected apart)."""

    def __init__(self, int_bounds: IntBounds):
        self.int_bounds = int_bounds
        self.memo: dict[int, bool] = {}

    def unsafe(self, root: PrimExpr) -> bool:
        if id(root) in self.memo:
            return self.memo[id(root)]
        stack: list[tuple[PrimExpr, bool]] = [(root, False)]
        memo = self.memo
        while stack:
            n, done = stack.pop()
            if id(n) in memo:
                continue
            if not done:
                stack.append((n, True))
                stack.extend((c, False) for c in n._children() if id(c) not in memo)
                continue
            if isinstance(n, BufferLoad):
                bad = not self.in_bounds(n)
            elif isinstance(n, Call):
                bad = n.kind != "intrin"
            else:
                bad = False
            memo[id(n)] = bad or any(memo[id(c)] for c in n._children())
        return memo[id(root)]

    def in_bounds(self, load: BufferLoad) -> bool:
        shape = load.buffer.static_shape
        if shape is None:
            return False
        for i, d in zip(load.indices, shape):
            b = self.int_bounds.bounds(i)
            if b is None or b[0] < 0 or b[1] >= d:
                return False
        return True


class ArithEmitter:
    """Mixin of the LLVM function emitter (:class:`plait.backends.llvm.emit.LLVMFunctionEmitter`), which
    provides ``op(text, hint) -> register`` (emit one instruction, return its result)."""

    op: Callable[..., str]

    def cast(self, v: str, src: str, dst: str) -> str:
        if src == dst:
            return v
        st, dt = VALUE_TYPES[src], VALUE_TYPES[dst]
        if dst == "bool":
            if is_float(src):
                return self.op(f"fcmp une {st} {v}, 0.0", "c")
            return self.op(f"icmp ne {st} {v}, 0", "c")
        if src == "bool":
            return self.op(f"{'uitofp' if is_float(dst) else 'zext'} i1 {v} to {dt}")
        if is_float(src) and is_float(dst):
            return self.op(f"{'fpext' if bits(dst) > bits(src) else 'fptrunc'} {st} {v} to {dt}")
        if is_float(src):
            return self.float_to_int(v, src, dst)
        if is_float(dst):
            return self.op(f"{'uitofp' if is_uint(src) else 'sitofp'} {st} {v} to {dt}")
        if bits(dst) == bits(src):
            return v
        if bits(dst) < bits(src):
            return self.op(f"trunc {st} {v} to {dt}")
        return self.op(f"{'zext' if is_uint(src) else 'sext'} {st} {v} to {dt}")

    def float_to_int(self, v: str, src: str, dst: str) -> str:
        """TIR's float -> integer conversion (truncation, NaN -> 0, saturation: what
        ``llvm.fptosi.sat`` computes), as the C backend writes it: the value is clamped into the range
        first (exact float limits: the type's minimum, its maximum where the float type holds it, else
        the largest float below ``max + 1`` and a select for ``x >= max + 1``), so the plain conversion
        is never poison and vectorizes (x86 lowers the saturating intrinsic one element at a time)."""
        from plait.ir.numeric import float_to_int_limits

        if src == "float16":  # exact in float
            v, src = self.op(f"fpext half {v} to float"), "float32"
        st, dt = VALUE_TYPES[src], VALUE_TYPES[dst]
        lowest, top = float_to_int_limits(dst)
        int_max = int(top) - 1
        exact = int_max < 2 ** (53 if src == "float64" else 24)
        hi = float(int_max) if exact else float(np.nextafter(np.dtype(src).type(top), 0))
        lo_lit, hi_lit = float_literal(lowest, src), float_literal(hi, src)
        c = self.op(f"select i1 {self.op(f'fcmp ogt {st} {v}, {lo_lit}', 'c')}, {st} {v}, {st} {lo_lit}")
        c = self.op(f"select i1 {self.op(f'fcmp olt {st} {c}, {hi_lit}', 'c')}, {st} {c}, {st} {hi_lit}")
        r = self.op(f"{'fptoui' if is_uint(dst) else 'fptosi'} {st} {c} to {dt}")
        if not exact:
            big = self.op(f"fcmp oge {st} {v}, {float_literal(top, src)}", "c")
            r = self.op(f"select i1 {big}, {dt} {int_literal(int_max, dst)}, {dt} {r}")
        nan = self.op(f"fcmp uno {st} {v}, {v}", "c")
        return self.op(f"select i1 {nan}, {dt} 0, {dt} {r}")

    def shift(self, node: PrimExpr, x: str, y: str) -> str:
        """TIR's shifts: an amount outside ``[0, width)`` (poison in LLVM) gives 0, or -1 for ``>>`` of a
        negative value (the amount is selected to ``width - 1``: an arithmetic shift does that)."""
        d = node.dtype
        t, w = VALUE_TYPES[d], bits(d)
        inst = "shl" if isinstance(node, ShiftLeft) else ("lshr" if is_uint(d) else "ashr")
        if isinstance(node.b, IntImm) and 0 <= node.b.value < w:
            return self.op(f"{inst} {t} {x}, {y}")
        ok = self.op(f"icmp ult {t} {y}, {w}", "c")  # a negative amount is a large unsigned one
        if inst == "ashr":
            return self.op(f"ashr {t} {x}, {self.op(f'select i1 {ok}, {t} {y}, {t} {w - 1}')}")
        r = self.op(f"{inst} {t} {x}, {self.op(f'select i1 {ok}, {t} {y}, {t} 0')}")
        return self.op(f"select i1 {ok}, {t} {r}, {t} 0")

    def division(self, node: PrimExpr, x: str, y: str) -> str:
        d = node.dtype
        t = VALUE_TYPES[d]
        mod = isinstance(node, (FloorMod, TruncMod))
        const = node.b.value if isinstance(node.b, IntImm) else None
        if const == 0:
            return "0"  # TIR: x / 0 == x % 0 == 0
        zero = None
        if const is None:  # b == 0 gives 0 (division by zero is undefined behaviour in LLVM)
            zero = self.op(f"icmp eq {t} {y}, 0", "c")
        if is_uint(d):
            ysafe = y if zero is None else self.op(f"select i1 {zero}, {t} 1, {t} {y}")
            r = self.op(f"{'urem' if mod else 'udiv'} {t} {x}, {ysafe}")
            return r if zero is None else self.op(f"select i1 {zero}, {t} 0, {t} {r}")
        r = self.signed_division(node, x, y, const)
        return r if zero is None else self.op(f"select i1 {zero}, {t} 0, {t} {r}")

    def signed_division(self, node: PrimExpr, x: str, y: str, const: int | None) -> str:
        """floordiv/floormod/truncdiv/truncmod of a signed type for ``y != 0``: ``y == -1`` is selected
        apart (TIR wraps ``INT_MIN / -1``, which traps in hardware); a zero ``y`` may reach here
        (its result is replaced by the caller) and is divided as by 1."""
        d = node.dtype
        t = VALUE_TYPES[d]
        mod = isinstance(node, (FloorMod, TruncMod))
        floor = isinstance(node, (FloorDiv, FloorMod))
        if const == -1:
            return "0" if mod else self.op(f"sub {t} 0, {x}")
        if const is not None:  # a constant other than 0 and -1: sdiv/srem never overflow
            ysafe, minus1 = y, None
        else:
            minus1 = self.op(f"icmp eq {t} {y}, -1", "c")
            bad = self.op(f"icmp ult {t} {self.op(f'add {t} {y}, 1')}, 2", "c")  # y is -1 or 0
            ysafe = self.op(f"select i1 {bad}, {t} 1, {t} {y}")
        if not floor:
            r = self.op(f"{'srem' if mod else 'sdiv'} {t} {x}, {ysafe}")
            if minus1 is None:
                return r
            neg = "0" if mod else self.op(f"sub {t} 0, {x}")
            return self.op(f"select i1 {minus1}, {t} {neg}, {t} {r}")
        # floor: the truncated quotient/remainder, adjusted when the remainder's sign differs from b's
        q = self.op(f"sdiv {t} {x}, {ysafe}")
        r = self.op(f"srem {t} {x}, {ysafe}")
        if const is not None and const > 0:
            adj = self.op(f"icmp slt {t} {r}, 0", "c")
        else:
            nz = self.op(f"icmp ne {t} {r}, 0", "c")
            rneg = self.op(f"icmp slt {t} {r}, 0", "c")
            bneg = self.op(f"icmp slt {t} {ysafe}, 0", "c")
            diff = self.op(f"xor i1 {rneg}, {bneg}", "c")
            adj = self.op(f"and i1 {nz}, {diff}", "c")
        if mod:
            rb = self.op(f"add {t} {r}, {ysafe}")
            return self.op(f"select i1 {adj}, {t} {rb}, {t} {r}")
        q1 = self.op(f"sub {t} {q}, 1")
        r = self.op(f"select i1 {adj}, {t} {q1}, {t} {q}")
        if minus1 is None:
            return r
        return self.op(f"select i1 {minus1}, {t} {self.op(f'sub {t} 0, {x}')}, {t} {r}")
