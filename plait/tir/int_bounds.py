"""Value ranges of a PrimFunc's integer expressions (interval arithmetic), shared by the C and LLVM
emitters: where an integer ``+ - *`` provably stays in its dtype's range, the C backend writes plain
signed arithmetic (no wrap-around can happen, and the compiler may assume none) and otherwise
wraps it in unsigned arithmetic; the LLVM backend asks whether a lazy operand may load out of
bounds.

Every variable of a PrimFunc is bound once (a loop variable, a let), so its range is a fact of the
function: a loop variable with constant min and extent lies in ``[min, min + extent - 1]``, a let
variable in the range of its value, a scalar parameter or a loaded value anywhere in its dtype.

One kind of buffer is known better: an *accumulator*, an allocated integer ``local`` buffer whose
every store is a constant (its initialisation) or ``acc[i] = acc[i] + e`` (``e`` not reading it),
each update inside loops of constant extents below the Allocate. A value of it is an initial
constant plus at most ``N`` updates of that store (``N`` the product of those loops' extents: the
buffer lives only inside the Allocate), so it lies in ``hull(inits) + sum N * hull(bounds(e), 0)``.
That is what lets the C emitter write an int8 convolution's ``acc += x * w`` as plain signed
arithmetic (which gcc turns into dot-product instructions) instead of wrapping unsigned arithmetic.
"""

from __future__ import annotations

from plait.tir.dtype import int_range, is_int
from plait.tir.expr import (
    Add, BitwiseAnd, BufferLoad, Cast, FloorDiv, FloorMod, IntImm, Let, Max, Min, Mul, PrimExpr, Select, Sub, TruncDiv,
    TruncMod, Var,
)
from plait.tir.functor import pre_order
from plait.tir.stmt import Allocate, Buffer, BufferStore, For, LetStmt, PrimFunc, Stmt

Interval = tuple[int, int]
_DIVS = (FloorDiv, FloorMod, TruncDiv, TruncMod)


def fits(r: Interval, dtype: str) -> bool:
    """Does every value of ``r`` lie in the range of ``dtype``?"""
    lo, hi = int_range(dtype)
    return lo <= r[0] and r[1] <= hi


class IntBounds:
    """``bounds(e)``: an interval holding every value of the integer expression ``e`` (the dtype's whole
    range when nothing better is known); ``exact(e)``: the interval of ``e``'s mathematical result
    (before any wrap-around) of ``+ - *``, so ``fits(exact(e), e.dtype)`` says it never wraps."""

    def __init__(self, func: PrimFunc):
        self.ranges: dict[Var, Interval] = {}
        self.values: dict[Var, PrimExpr] = {}
        for n in pre_order(func.body, unique=True):
            if isinstance(n, For):
                if isinstance(n.min, IntImm) and isinstance(n.extent, IntImm) and n.extent.value > 0:
                    self.ranges[n.loop_var] = (n.min.value, n.min.value + n.extent.value - 1)
            elif isinstance(n, (LetStmt, Let)):
                self.values[n.var] = n.value
        self.memo: dict[int, Interval | None] = {}
        self.accumulators: dict[Buffer, Interval] = {}
        for n in pre_order(func.body, unique=True):
            if isinstance(n, Allocate) and n.buffer.scope == "local" and is_int(n.buffer.dtype):
                r = self._accumulator(n)
                if r is not None and fits(r, n.buffer.dtype):
                    self.accumulators[n.buffer] = r

    def bounds(self, root: PrimExpr) -> Interval | None:
        """Every value of ``root`` (None for a non-integer expression)."""
        if not (is_int(root.dtype) or root.dtype == "bool"):
            return None
        stack: list[tuple[PrimExpr, bool]] = [(root, False)]
        memo = self.memo
        while stack:
            n, done = stack.pop()
            if id(n) in memo:
                continue
            kids = self._kids(n)
            if not done:
                stack.append((n, True))
                stack.extend((c, False) for c in kids if id(c) not in memo)
                continue
            full = int_range(n.dtype) if is_int(n.dtype) or n.dtype == "bool" else None
            got = self._bound(n, [memo[id(c)] for c in kids]) if full is not None else None
            memo[id(n)] = got if got is not None and fits(got, n.dtype) else full
        return memo[id(root)]

    def _accumulator(self, alloc: Allocate) -> Interval | None:
        """The values of ``alloc``'s buffer when it is an accumulator (module docstring), else None."""
        b = alloc.buffer
        lo = hi = None
        grow = [0, 0]
        stack: list[tuple[Stmt, int]] = [(alloc.body, 1)]
        while stack:
            st, trips = stack.pop()
            if isinstance(st, For):
                if not isinstance(st.extent, IntImm):  # a symbolic trip count: no bound on the updates
                    if any(isinstance(x, BufferStore) and x.buffer is b for x in pre_order(st.body)):
                        return None
                    continue
                stack.append((st.body, trips * max(st.extent.value, 0)))
                continue
            if isinstance(st, BufferStore):
                if st.buffer is not b:
                    continue
                v = st.value
                if isinstance(v, IntImm):
                    lo, hi = (v.value, v.value) if lo is None else (min(lo, v.value), max(hi, v.value))
                    continue
                if not isinstance(v, Add):
                    return None
                e = v.b if _reads_at(v.a, b, st.indices) else v.a if _reads_at(v.b, b, st.indices) else None
                if e is None or any(isinstance(x, BufferLoad) and x.buffer is b for x in pre_order(e)):
                    return None
                r = self.bounds(e)
                if r is None or r == int_range(e.dtype):
                    return None
                grow[0] += trips * min(r[0], 0)
                grow[1] += trips * max(r[1], 0)
                continue
            stack.extend((c, trips) for c in st._children() if isinstance(c, Stmt))  # seq, if, let, allocate
        if lo is None:
            return None
        return (lo + grow[0], hi + grow[1])

    def exact(self, node: PrimExpr) -> Interval | None:
        """The interval of the mathematical result of ``node`` (an integer ``+ - *``) from its operands'
        bounds: the result may wrap exactly when it does not fit the dtype."""
        a, b = self.bounds(node.a), self.bounds(node.b)
        return None if a is None or b is None else _arith(node, a, b)

    def _kids(self, n: PrimExpr) -> tuple:
        if isinstance(n, Var):
            return (self.values[n],) if n in self.values else ()
        if isinstance(n, Let):
            return (n.body,)
        return tuple(n._children())

    def _bound(self, n: PrimExpr, k: list) -> Interval | None:
        if isinstance(n, IntImm):
            return (n.value, n.value)
        if isinstance(n, Var):
            return k[0] if k else self.ranges.get(n)
        if isinstance(n, Let):
            return k[0]
        if isinstance(n, BufferLoad):
            return self.accumulators.get(n.buffer)
        if any(b is None for b in k):
            return None
        if isinstance(n, Cast):
            return k[0]  # from an integer: its values (when they fit); from a float: None, the whole range
        if isinstance(n, (Add, Sub, Mul, Min, Max)):
            return _arith(n, k[0], k[1])
        if isinstance(n, Select):
            return (min(k[1][0], k[2][0]), max(k[1][1], k[2][1]))
        if isinstance(n, BitwiseAnd) and (k[0][0] >= 0 or k[1][0] >= 0):
            return (0, min(h for (lo, h) in k if lo >= 0))
        if isinstance(n, _DIVS) and isinstance(n.b, IntImm) and n.b.value > 0:
            (a0, a1), c = k[0], n.b.value
            if isinstance(n, (FloorDiv, TruncDiv)):
                if isinstance(n, TruncDiv) and a0 < 0:
                    return (-((-a0) // c), a1 // c if a1 >= 0 else -((-a1) // c))
                return (a0 // c, a1 // c)
            if a0 >= 0:
                return (a0, a1) if a1 < c else (0, c - 1)
            return (0, c - 1) if isinstance(n, FloorMod) else (-(c - 1), c - 1)
        return None


def _reads_at(e: PrimExpr, b: Buffer, indices: tuple) -> bool:
    """Is ``e`` a load of ``b`` at exactly ``indices`` (the same expression objects or equal ones)?"""
    from plait.tir.equal import structural_equal

    return isinstance(e, BufferLoad) and e.buffer is b and len(e.indices) == len(indices) and all(
        x is y or structural_equal(x, y) for x, y in zip(e.indices, indices))


def _arith(n: PrimExpr, a: Interval, b: Interval) -> Interval:
    (a0, a1), (b0, b1) = a, b
    if isinstance(n, Add):
        return (a0 + b0, a1 + b1)
    if isinstance(n, Sub):
        return (a0 - b1, a1 - b0)
    if isinstance(n, Mul):
        c = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
        return (min(c), max(c))
    f = min if isinstance(n, Min) else max
    return (f(a0, b0), f(a1, b1))
