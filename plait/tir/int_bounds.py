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
Loops whose variables index the store one element per iteration (a one-dimensional index, linear in
them with mixed-radix coefficients) leave them out of ``N``: a block of 128 outputs, each summing 576
products, is 576 updates per element, not 128 * 576.
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
        inner = {n.loop_var if isinstance(n, For) else n.var for n in pre_order(alloc.body)
                 if isinstance(n, (For, LetStmt, Let))}  # variables that change while the buffer lives
        stack: list[tuple[Stmt, tuple[tuple[Var, int], ...]]] = [(alloc.body, ())]
        while stack:
            st, loops = stack.pop()
            if isinstance(st, For):
                if not isinstance(st.extent, IntImm):  # a symbolic trip count: no bound on the updates
                    if any(isinstance(x, BufferStore) and x.buffer is b for x in pre_order(st.body)):
                        return None
                    continue
                stack.append((st.body, loops + ((st.loop_var, max(st.extent.value, 0)),)))
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
                trips = _updates_per_element(_flat(st.indices, b), loops, inner)
                grow[0] += trips * min(r[0], 0)
                grow[1] += trips * max(r[1], 0)
                continue
            stack.extend((c, loops) for c in st._children() if isinstance(c, Stmt))  # seq, if, let, allocate
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


def _flat(indices: tuple, b: Buffer) -> dict[Var, int] | None:
    """The row-major flat index of ``b`` at ``indices`` as ``sum a_i * v_i + c`` (its coefficients;
    None when it is not linear or the shape is not static)."""
    shape = b.static_shape
    if shape is None or len(shape) != len(indices):
        return None
    out: dict[Var, int] = {}
    stride = 1
    for i, n in zip(reversed(indices), reversed(shape)):
        f = _linear(i)
        if f is None:
            return None
        for v, c in f.items():
            out[v] = out.get(v, 0) + c * stride
        stride *= n
    return {v: c for v, c in out.items() if c}


def _updates_per_element(form: dict[Var, int] | None, loops: tuple[tuple[Var, int], ...], inner: set) -> int:
    """How many times a store inside ``loops`` (loop variable, extent; every loop between the Allocate
    and the store) at flat index ``form`` (:func:`_flat`) may update one element: the product of the
    extents, without the loops that the index ``sum a_i * v_i + c`` tells apart (mixed radix: each
    ``|a_i|`` larger than the span of the smaller terms; no other variable that changes while the
    buffer lives, ``inner``)."""
    total = 1
    for _, n in loops:
        total *= n
    if not form:
        return total
    extent = dict(loops)
    if any(v not in extent and v in inner for v in form):
        return total
    span = 0
    for a, v in sorted(((abs(a), v) for v, a in form.items() if v in extent), key=lambda t: t[0]):
        if a <= span:
            return total
        span += a * (extent[v] - 1)
    trips = 1
    for v, n in loops:
        trips *= 1 if v in form else n
    return trips


def _linear(e: PrimExpr) -> dict[Var, int] | None:
    """The coefficients of ``e`` as ``sum a_i * v_i + c`` over variables (None when it is not one)."""
    if isinstance(e, IntImm):
        return {}
    if isinstance(e, Var):
        return {e: 1}
    if isinstance(e, (Add, Sub)):
        a, b = _linear(e.a), _linear(e.b)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, Add) else -1
        out = dict(a)
        for v, c in b.items():
            out[v] = out.get(v, 0) + sign * c
        return {v: c for v, c in out.items() if c}
    if isinstance(e, Mul):
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(y, IntImm):
                f = _linear(x)
                return None if f is None else {v: c * y.value for v, c in f.items() if c * y.value}
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
