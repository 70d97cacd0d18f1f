"""Integer divisions by a constant that the loop ranges decide, rewritten before C emission.

Reshapes, broadcasts and transposes index their inputs with ``floordiv``/``floormod`` of a flat
position by a dimension: ``p[(i * 256 + j) % 256]`` with ``j`` in ``[0, 256)`` is ``p[j]``. gcc sees a
signed division (the helper's sign correction) and cannot prove that, so it gathers where a
contiguous load would do, or does not vectorize the loop at all. :func:`simplify_divisions` does
it from the interval analysis of :mod:`plait.tir.int_bounds`: the dividend ``x`` (int, divisor
``c > 0`` a literal) is split into a sum ``c * Q + R`` of constant multiples of sub-expressions
(atoms) and a constant, with ``Q`` the terms whose coefficient ``c`` divides. When the mathematical
sum provably fits the dtype, ``x`` equals it (wrapping ``+ - *`` agree with the integers modulo
``2**bits``, and the sum is in range), so ``floordiv(x, c) = Q + floordiv(R, c)`` and
``floormod(x, c) = floormod(R, c)``; when ``R``'s values all lie in one block ``[k c, (k + 1) c)``
those are ``Q + k`` and ``R - k c``. Truncating divisions take the same rules when ``x >= 0``.
Every rewrite is exact; the result is simplified (:func:`plait.tir.simplify`). A pair of adjacent
indices ``(x // n, x % n)`` over a dimension of size ``n`` (a fused loop) is left as it is: the
emitters read it as ``x`` times the inner stride (:func:`plait.tir.codegen.fused_pair`), which is
better than any split.
"""

from __future__ import annotations

from plait.tir.dtype import int_range, is_int
from plait.tir.codegen import fused_pair
from plait.tir.expr import Add, AddressOf, BufferLoad, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Sub, TruncDiv, TruncMod
from plait.tir.functor import StmtExprMutator, pre_order
from plait.tir.int_bounds import IntBounds
from plait.tir.simplify import simplify
from plait.tir.stmt import BufferStore, PrimFunc

Terms = list[tuple[PrimExpr, int]]  # (atom, coefficient)
_MAX_DEPTH = 32


def _linear(e: PrimExpr, depth: int = 0) -> tuple[Terms, int]:
    """``e`` as ``sum(coef * atom) + const`` over ``+``, ``-`` and products with a constant."""
    if isinstance(e, IntImm):
        return [], e.value
    if depth < _MAX_DEPTH and isinstance(e, (Add, Sub)) and e.a.dtype == e.b.dtype == e.dtype:
        ta, ca = _linear(e.a, depth + 1)
        tb, cb = _linear(e.b, depth + 1)
        if isinstance(e, Sub):
            tb, cb = [(x, -k) for x, k in tb], -cb
        return _merge(ta + tb), ca + cb
    if depth < _MAX_DEPTH and isinstance(e, Mul) and e.a.dtype == e.b.dtype == e.dtype:
        for x, k in ((e.a, e.b), (e.b, e.a)):
            if isinstance(k, IntImm):
                t, c = _linear(x, depth + 1)
                return [(a, m * k.value) for a, m in t if m * k.value], c * k.value
    return [(e, 1)], 0


def _merge(terms: Terms) -> Terms:
    out: list[list] = []
    for x, k in terms:
        for slot in out:
            if slot[0] is x:
                slot[1] += k
                break
        else:
            out.append([x, k])
    return [(x, k) for x, k in out if k]


class _Divisions(StmtExprMutator):
    def __init__(self, func: PrimFunc):
        super().__init__()
        self.bounds = IntBounds(func)
        self.keep: list[PrimExpr] = []  # IntBounds memoizes by id: keep every node it saw alive
        self.changed = False
        self.pairs: set[int] = set()  # ids of the divisions of fused index pairs (kept alive by func)
        for n in pre_order(func.body, unique=True):
            if isinstance(n, (BufferLoad, BufferStore, AddressOf)):
                idx, dims = n.indices, n.buffer.shape
                for k in range(len(idx) - 1):
                    if fused_pair(idx[k], idx[k + 1], dims[k + 1]) is not None:
                        self.pairs.update((id(idx[k]), id(idx[k + 1])))

    def interval(self, e: PrimExpr) -> tuple[int, int] | None:
        self.keep.append(e)
        r = self.bounds.bounds(e)
        return None if r is None or r == int_range(e.dtype) else r

    def build(self, terms: Terms, const: int, dtype: str) -> PrimExpr | None:
        """``sum(coef * atom) + const`` in ``dtype`` (None when a coefficient does not fit)."""
        lo, hi = int_range(dtype)
        out: PrimExpr | None = None
        for x, k in terms:
            if not lo <= k <= hi:
                return None
            t = x if k == 1 else Mul(x, IntImm(k, dtype))
            out = t if out is None else Add(out, t)
        if not lo <= const <= hi:
            return None
        if out is None:
            return IntImm(const, dtype)
        return Add(out, IntImm(const, dtype)) if const else out

    def divide(self, post: PrimExpr) -> PrimExpr:
        d = post.dtype
        if not (is_int(d) and isinstance(post.b, IntImm) and post.b.value > 0):
            return post
        c = post.b.value
        terms, const = _linear(post.a)
        spans = []
        for x, k in terms:
            r = self.interval(x)
            if r is None:
                return post
            spans.append((min(k * r[0], k * r[1]), max(k * r[0], k * r[1])))
        lo, hi = int_range(d)
        total = (sum(s[0] for s in spans) + const, sum(s[1] for s in spans) + const)
        if not (lo <= total[0] and total[1] <= hi):
            return post  # the sum may wrap: x is not the mathematical sum
        if isinstance(post, (TruncDiv, TruncMod)) and total[0] < 0:
            return post
        div = isinstance(post, (FloorDiv, TruncDiv))
        quot = [(x, k // c) for x, k in terms if k % c == 0]
        rest = [(t, s) for t, s in zip(terms, spans) if t[1] % c]
        r_lo = sum(s[0] for _, s in rest) + const
        r_hi = sum(s[1] for _, s in rest) + const
        rest_terms = [t for t, _ in rest]
        if r_lo // c == r_hi // c:  # R lies in one block: floordiv(R, c) = k
            k = r_lo // c
            new = self.build(quot, k, d) if div else self.build(rest_terms, const - k * c, d)
        elif quot:
            r = self.build(rest_terms, const, d)
            if r is None:
                return post
            if not div:
                new = FloorMod(r, post.b)
            else:
                q = self.build(quot, 0, d)
                new = None if q is None else Add(q, FloorDiv(r, post.b))
        else:
            return post
        if new is None:
            return post
        self.changed = True
        self.keep.append(new)
        return new

    def rewrite_floordiv(self, pre: PrimExpr, post: PrimExpr) -> PrimExpr:
        return post if id(pre) in self.pairs else self.divide(post)

    def rewrite_floormod(self, pre: PrimExpr, post: PrimExpr) -> PrimExpr:
        return post if id(pre) in self.pairs else self.divide(post)

    def rewrite_truncdiv(self, pre: PrimExpr, post: PrimExpr) -> PrimExpr:
        return post if id(pre) in self.pairs else self.divide(post)

    def rewrite_truncmod(self, pre: PrimExpr, post: PrimExpr) -> PrimExpr:
        return post if id(pre) in self.pairs else self.divide(post)


def simplify_divisions(func: PrimFunc) -> PrimFunc:
    """``func`` with its integer divisions by constants that loop ranges decide rewritten (module
    docstring); ``func`` itself when there is none."""
    m = _Divisions(func)
    out = m.visit(func)
    return simplify(out) if m.changed else func


__all__ = ["simplify_divisions"]
