"""The regions patterns find (:mod:`plait.placement.pattern`): :class:`PatternRegion`, convexity,
:func:`find_regions` (non-overlapping, largest first) and :func:`claim_regions` (the regions the pieces'
``patterns`` hooks claim, for placement). See docs/placement.md, "Region patterns".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from plait.ir.op import Op
from plait.placement.pattern import Pattern, PatternError
from plait.relay.expr import Call, Constant, Expr, Function
from plait.relay.visitor import children, post_order


@dataclass(frozen=True, eq=False)
class PatternRegion:
    """Calls run together: ``calls`` in topological order (``output`` last); ``inputs``: the non-constant
    values entering it, in first-use order. ``name``: the pattern's name. In placement, ``claims`` lists
    ``(piece, pattern name)`` of every piece claiming it and ``piece`` is where it was placed."""

    name: str | None
    calls: tuple[Call, ...]
    inputs: tuple[Expr, ...]
    output: Call
    claims: tuple[tuple[str, str], ...] = ()
    piece: str | None = None

    def __contains__(self, call: object) -> bool:
        return any(c is call for c in self.calls)

    def __len__(self) -> int:
        return len(self.calls)

    def __iter__(self) -> Iterator[Call]:
        return iter(self.calls)

    def __repr__(self) -> str:
        names = ", ".join(str(c.meta.get("name") or c.op_name) for c in self.calls)
        return f"PatternRegion({self.name!r}: {names})"


class _Graph:
    """The dataflow graph of a function: topological order, users, operator calls."""

    def __init__(self, func: Function | Expr):
        body = func.body if isinstance(func, Function) else func
        self.body = body
        self.order = list(post_order(body))
        self.index = {id(n): k for k, n in enumerate(self.order)}
        self.users: dict[int, list[Expr]] = {}
        for n in self.order:
            for c in children(n):
                self.users.setdefault(id(c), []).append(n)
        self.calls = [n for n in self.order if isinstance(n, Call) and isinstance(n.op, Op)]

    def single_output(self, calls: Sequence[Call]) -> bool:
        """Every call but the last is used only by calls of the set (and is not the function's result)."""
        inside = {id(c) for c in calls}
        for c in calls[:-1]:
            if c is self.body or any(id(u) not in inside for u in self.users.get(id(c), ())):
                return False
        return True

    def convex(self, calls: Iterable[Expr]) -> bool:
        """No path leaves the set and re-enters it (searched forward from its outside users, pruned beyond
        the set's last node in topological order)."""
        inside = {id(c) for c in calls}
        if not inside:
            return True
        last = max(self.index[i] for i in inside)
        stack = [u for i in inside for u in self.users.get(i, ()) if id(u) not in inside]
        seen: set[int] = set()
        while stack:
            n = stack.pop()
            if id(n) in seen or self.index[id(n)] > last:
                continue
            seen.add(id(n))
            for u in self.users.get(id(n), ()):
                if id(u) in inside:
                    return False
                stack.append(u)
        return True

    def region(self, name: str | None, calls: tuple[Call, ...]) -> PatternRegion:
        inside = {id(c) for c in calls}
        inputs: list[Expr] = []
        seen: set[int] = set()
        for c in calls:
            for a in c.args:
                if id(a) not in inside and id(a) not in seen and not isinstance(a, Constant):
                    seen.add(id(a))
                    inputs.append(a)
        return PatternRegion(name, calls, tuple(inputs), calls[-1])


def is_convex(calls: Iterable[Expr], func: Function | Expr) -> bool:
    """True when no path of ``func``'s dataflow leaves the set of nodes ``calls`` and re-enters it."""
    return _Graph(func).convex(calls)


def _named(patterns: Any, where: str) -> list[tuple[str | None, Pattern]]:
    if isinstance(patterns, Pattern):
        out = [(None, patterns)]
    else:
        try:
            out = list(patterns)
        except TypeError:
            raise PatternError(f"{where}: expected a pattern or a list of (name, pattern) pairs, got {patterns!r}") \
                from None
        for k, item in enumerate(out, 1):
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and item[0]
                    and isinstance(item[1], Pattern)):
                raise PatternError(f"{where}: item {k} is {item!r}; expected a (name, pattern) pair")
    for name, p in out:
        if p._ops() is None:
            label = f"pattern '{name}' ({p!r})" if name else f"pattern {p!r}"
            raise PatternError(f"{where}: {label} is not rooted at an operator call (is_op(...))")
    return out


def _candidates(g: _Graph, named: Sequence[tuple[Any, str | None, Pattern]]) -> list[tuple[tuple, tuple, Any]]:
    """Every valid region: ``(sort key, calls, tag)``; sorted, best first."""
    out = []
    for ri, root in enumerate(g.calls):
        for pi, (tag, _name, p) in enumerate(named):
            if root.op.name not in (p._ops() or ()):
                continue  # cheap root test (the ops the globs matched when the pattern was built)
            seen: set[frozenset[int]] = set()
            for k, (_, found) in enumerate(p._m(root, ({}, ()))):
                key = frozenset(id(c) for c in found)
                if key in seen or not any(c is root for c in found):
                    continue
                seen.add(key)
                calls = tuple(sorted(found, key=lambda c: g.index[id(c)]))  # topological: root last
                if g.single_output(calls) and g.convex(calls):
                    out.append(((-len(calls), ri, pi, k), calls, tag))
    out.sort(key=lambda t: t[0])
    return out


def _select(cands: list[tuple[tuple, tuple[Call, ...], Any]]) -> list[tuple[tuple[Call, ...], list[Any]]]:
    """Greedy: keep a candidate when none of its calls is taken; tags of every candidate with the same calls."""
    taken: set[int] = set()
    kept: dict[frozenset[int], tuple[tuple[Call, ...], list[Any]]] = {}
    for _, calls, tag in cands:
        key = frozenset(id(c) for c in calls)
        if key in kept:
            kept[key][1].append(tag)
        elif not (key & taken):
            taken |= key
            kept[key] = (calls, [tag])
    return list(kept.values())


def find_regions(patterns: Pattern | Sequence[tuple[str, Pattern]], func: Function | Expr) -> list[PatternRegion]:
    """Non-overlapping regions of ``func`` matched by ``patterns`` (one pattern, or ``(name, pattern)`` pairs
    tried in order), kept greedily largest first; returned in topological order of their outputs."""
    named = _named(patterns, "find_regions")
    g = _Graph(func)
    cands = _candidates(g, [(name, name, p) for name, p in named])
    regions = [g.region(tags[0], calls) for calls, tags in _select(cands)]
    return sorted(regions, key=lambda r: g.index[id(r.output)])


# ---- patterns of target kinds (placement) -----------------------------------------------------------


def piece_patterns(piece: Any) -> list[tuple[str, Pattern]]:
    """The ``(name, pattern)`` pairs the piece's kind declares with its ``patterns`` hook (none without one)."""
    from plait.target.errors import HookError
    from plait.target.hooks import _as_piece, _call, _where

    piece = _as_piece(piece)
    h = piece.target.kind.hooks.get("patterns")
    if h is None:
        return []
    got = _call(h, piece, (piece.target,))
    where = _where(h, piece)
    if not isinstance(got, (list, tuple)):
        raise HookError(f"{where} returned {got!r} ({type(got).__name__}); expected a list of (name, Pattern) pairs")
    names: set[str] = set()
    for k, item in enumerate(got, 1):
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and item[0]
                and isinstance(item[1], Pattern)):
            raise HookError(f"{where} returned {item!r} as item {k}; expected a (name, Pattern) pair")
        if item[0] in names:
            raise HookError(f"{where} returned two patterns named '{item[0]}'")
        names.add(item[0])
        if item[1]._ops() is None:
            raise HookError(f"{where} returned pattern '{item[0]}' ({item[1]!r}), which is not rooted at an "
                            "operator call (is_op(...))")
    return list(got)


def claim_regions(func: Function, pieces: Sequence[Any]) -> list[PatternRegion]:
    """The regions the pieces' patterns claim in ``func``: all pieces' patterns compete (largest first, then
    the earlier output, the earlier piece, the earlier pattern); ``claims`` lists every piece whose patterns
    matched exactly that region."""
    named = []
    piece_names = []
    for pi, piece in enumerate(pieces):
        piece_names.append(piece.name)
        for name, p in piece_patterns(piece):
            named.append(((pi, name), name, p))
    if not named:
        return []
    g = _Graph(func)
    out = []
    for calls, tags in _select(_candidates(g, named)):
        claims: dict[int, str] = {}
        for pi, name in tags:
            claims.setdefault(pi, name)
        pairs = tuple((piece_names[pi], claims[pi]) for pi in sorted(claims))
        r = g.region(pairs[0][1], calls)
        out.append(PatternRegion(r.name, r.calls, r.inputs, r.output, pairs))
    return sorted(out, key=lambda r: g.index[id(r.output)])


__all__ = ["PatternRegion", "claim_regions", "find_regions", "is_convex", "piece_patterns"]
