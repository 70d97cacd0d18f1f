"""Region patterns: a small dataflow pattern language over typed Relay, and the regions it finds.

    from plait.placement.pattern import is_op, wildcard, is_constant
    from plait.placement.regions import find_regions
    conv = is_op("nn.conv2d")(wildcard(), is_constant()).has_attr(groups=1).has_dtype("float32")
    p = conv.optional(lambda x: is_op("add")(x, is_constant())).optional(lambda x: is_op("nn.relu")(x))
    match(p, expr)            -> Match (the largest) or None
    find_regions(p, func)     -> [PatternRegion(calls, inputs, output)], non-overlapping, largest first

Patterns:

- ``is_op("nn.conv2d", "nn.dense*")``: an operator call whose op name matches one of the globs;
  ``is_op(...)(p1, p2)`` also requires exactly these arguments, each matching its pattern (without
  argument patterns, any arguments: they are the region's inputs);
- ``wildcard()``: any expression (an input of the region); ``is_constant()``: a constant;
- ``p | q``: p, else q (both are tried; the larger match wins, then the left one);
- ``optional(p, step)`` / ``p.optional(step)``: ``step(p)`` (p followed by the consumer step, e.g.
  ``lambda x: is_op("nn.relu")(x)``) or p alone; chain them for several optional steps;
- ``p.has_attr(groups=1)``: the matched call has these attribute values (``is_op`` patterns only);
- ``p.has_dtype("float32", ...)``: the matched expression is a tensor of one of these dtypes.

One pattern object used twice in a pattern must match the same expression both times.

A **region** is the set of calls matched by the ``is_op`` parts of a match: its inputs are the
non-constant values entering it, its output the matched root call. A match is a region only when
every call but the output is used inside the region alone (a fused kernel hands out one value) and the
region is convex (no path leaves it and re-enters: outlining it never creates a cycle).
:func:`find_regions` takes every valid match of every pattern, then keeps them greedily: largest first,
then the earlier output (topological order), then the earlier pattern, skipping those overlapping a
region already kept. Same input, same regions.

Target kinds declare patterns with the ``patterns`` hook (``() -> [(name, Pattern)]`` or
``(target) -> ...``): a region matched by a piece's pattern is *claimed* by that piece, which then runs
its calls together (placement: :func:`plait.placement.regions.claim_regions`). Finding regions lives in
:mod:`plait.placement.regions`. See docs/placement.md.
"""

from __future__ import annotations

import difflib
import fnmatch
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

from plait.errors import PlaitError
from plait.ir.attrs import normalize_value
from plait.ir.op import Op
from plait.ir.types import DTYPES, TensorType
from plait.relay.expr import Call, Constant, Expr
from plait.relay.visitor import post_order


class PatternError(PlaitError):
    """A malformed pattern, or a pattern used where it cannot apply."""


# ---- patterns ---------------------------------------------------------------------------------------

_State = tuple  # (bindings: dict[int, Expr], calls: tuple[Call, ...])


class Pattern:
    """A dataflow pattern. Build with :func:`is_op`, :func:`wildcard`, :func:`is_constant`; combine with
    ``|``, :meth:`optional`, :meth:`has_attr`, :meth:`has_dtype`. Patterns are immutable."""

    def __call__(self, *args: Any) -> "Pattern":
        raise PatternError(f"{self!r} takes no argument patterns: only is_op(...) is applied to arguments")

    def __or__(self, other: Any) -> "Pattern":
        if not isinstance(other, Pattern):
            raise PatternError(f"cannot combine {self!r} with {other!r} ({type(other).__name__}): not a pattern")
        return Alt((self, other))

    def __ror__(self, other: Any) -> "Pattern":
        raise PatternError(f"cannot combine {other!r} ({type(other).__name__}) with {self!r}: not a pattern")

    def optional(self, step: Callable[["Pattern"], "Pattern"]) -> "Pattern":
        """``step(self) | self``: the step (a consumer of ``self``) when it matches, else ``self`` alone."""
        return optional(self, step)

    def has_attr(self, attrs: dict | None = None, **kw: Any) -> "Pattern":
        """The matched call has these attribute values: ``.has_attr(groups=1)`` or ``.has_attr({"groups": 1})``."""
        given = dict(attrs or {}, **kw)
        where = f"{self!r}.has_attr"
        if not given:
            raise PatternError(f"{where}: no attribute given")
        ops = self._ops()
        if ops is None:
            raise PatternError(f"{where}: {self!r} can match any expression; attributes are checked on "
                               "is_op(...) patterns")
        from plait.op import get_op

        known: dict[str, list[str]] = {}
        for name in sorted(ops):
            for a in get_op(name).attr_names:
                known.setdefault(a, []).append(name)
        items = []
        for k, v in given.items():
            if k not in known:
                what = f"operator '{next(iter(ops))}' has no" if len(ops) == 1 else \
                    f"no operator matched by {self!r} has an"
                msg = f"{where}: {what} attribute '{k}'"
                close = difflib.get_close_matches(k, sorted(known), n=1, cutoff=0.6)
                raise PatternError(msg + (f"; did you mean '{close[0]}'?" if close else ""))
            try:
                items.append((k, normalize_value(v, f"{where}: attribute '{k}'")))
            except PlaitError as exc:
                raise PatternError(str(exc)) from None
        return AttrIs(self, tuple(items))

    def has_dtype(self, *dtypes: str) -> "Pattern":
        """The matched expression is a tensor whose dtype is one of ``dtypes``."""
        where = f"{self!r}.has_dtype"
        if not dtypes:
            raise PatternError(f"{where}: no dtype given")
        for d in dtypes:
            if not isinstance(d, str) or d not in DTYPES:
                close = difflib.get_close_matches(str(d), list(DTYPES), n=1, cutoff=0.6)
                raise PatternError(f"{where}: unknown dtype {d!r}" + (f"; did you mean '{close[0]}'?" if close else ""))
        return DtypeIs(self, tuple(dtypes))

    def match(self, expr: Expr) -> "Match | None":
        return match(self, expr)

    # -- internals --
    def __repr__(self) -> str:
        return self._repr({})

    def _repr(self, names: dict[int, str]) -> str:
        raise NotImplementedError

    def _show(self, names: dict[int, str]) -> str:
        return names.get(id(self)) or self._repr(names)

    def _children(self) -> tuple["Pattern", ...]:
        return ()

    def _ops(self) -> frozenset[str] | None:
        """The operator names a match of this pattern can be rooted at; None when it may match a non-call."""
        return None

    def _match(self, e: Expr, st: _State) -> Iterator[_State]:
        raise NotImplementedError

    def _m(self, e: Expr, st: _State) -> Iterator[_State]:
        bound = st[0].get(id(self))
        if bound is not None:  # the same pattern object again: the same expression
            if bound is e:
                yield st
            return
        for b, calls in self._match(e, st):
            b = dict(b)
            b[id(self)] = e
            yield b, calls


@dataclass(frozen=True, eq=False, repr=False)
class Wildcard(Pattern):
    def _repr(self, names: dict[int, str]) -> str:
        return "wildcard()"

    def _match(self, e: Expr, st: _State) -> Iterator[_State]:
        yield st


@dataclass(frozen=True, eq=False, repr=False)
class IsConstant(Pattern):
    def _repr(self, names: dict[int, str]) -> str:
        return "is_constant()"

    def _match(self, e: Expr, st: _State) -> Iterator[_State]:
        if isinstance(e, Constant):
            yield st


@dataclass(frozen=True, eq=False, repr=False)
class IsOp(Pattern):
    globs: tuple[str, ...]
    names: frozenset[str]  # the registered operators the globs matched when the pattern was built
    args: tuple[Pattern, ...] | None = None

    def __call__(self, *args: Any) -> Pattern:
        if self.args is not None:
            raise PatternError(f"{self!r} already has argument patterns")
        for k, a in enumerate(args, 1):
            if not isinstance(a, Pattern):
                raise PatternError(f"{self!r}: argument {k} is {a!r} ({type(a).__name__}), not a pattern")
        from plait.op import get_op

        n = len(args)
        wants = {name: get_op(name).check_arity(n) for name in sorted(self.names)}
        if all(w is not None for w in wants.values()):
            s = "s" if n != 1 else ""
            if len(wants) == 1:
                name, w = next(iter(wants.items()))
                raise PatternError(f"{self!r} applied to {n} argument{s}: operator '{name}' takes {w}")
            raise PatternError(f"{self!r} applied to {n} argument{s}: no operator it matches takes {n}")
        return IsOp(self.globs, self.names, tuple(args))

    def _repr(self, names: dict[int, str]) -> str:
        head = "is_op(" + ", ".join(map(repr, self.globs)) + ")"
        if self.args is None:
            return head
        return head + "(" + ", ".join(a._show(names) for a in self.args) + ")"

    def _children(self) -> tuple[Pattern, ...]:
        return self.args or ()

    def _ops(self) -> frozenset[str]:
        return self.names

    def _match(self, e: Expr, st: _State) -> Iterator[_State]:
        if not (isinstance(e, Call) and isinstance(e.op, Op)
                and any(fnmatch.fnmatchcase(e.op.name, g) for g in self.globs)):
            return
        if self.args is not None and len(self.args) != len(e.args):
            return
        b, calls = st
        st = (b, calls if any(c is e for c in calls) else calls + (e,))
        if self.args is None:
            yield st
            return
        yield from _match_seq(self.args, e.args, st)


def _match_seq(pats: Sequence[Pattern], exprs: Sequence[Expr], st: _State) -> Iterator[_State]:
    if not pats:
        yield st
        return
    for st2 in pats[0]._m(exprs[0], st):
        yield from _match_seq(pats[1:], exprs[1:], st2)


def _flat_alt(parts: Iterable[Pattern]) -> tuple[Pattern, ...]:
    out: list[Pattern] = []
    for p in parts:
        out.extend(p.parts if isinstance(p, Alt) else (p,))
    return tuple(out)


@dataclass(frozen=True, eq=False, repr=False)
class Alt(Pattern):
    parts: tuple[Pattern, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", _flat_alt(self.parts))

    def _repr(self, names: dict[int, str]) -> str:
        return "(" + " | ".join(p._show(names) for p in self.parts) + ")"

    def _children(self) -> tuple[Pattern, ...]:
        return self.parts

    def _ops(self) -> frozenset[str] | None:
        ops = [p._ops() for p in self.parts]
        return None if any(o is None for o in ops) else frozenset().union(*ops)

    def _match(self, e: Expr, st: _State) -> Iterator[_State]:
        for p in self.parts:
            yield from p._m(e, st)


@dataclass(frozen=True, eq=False, repr=False)
class Optional(Pattern):
    base: Pattern
    stepped: Pattern  # step(base)

    def _repr(self, names: dict[int, str]) -> str:
        inner = dict(names)
        inner[id(self.base)] = "x"
        return f"{self.base._show(names)}.optional(lambda x: {self.stepped._show(inner)})"

    def _children(self) -> tuple[Pattern, ...]:
        return (self.stepped, self.base)

    def _ops(self) -> frozenset[str] | None:
        a, b = self.stepped._ops(), self.base._ops()
        return None if a is None or b is None else a | b

    def _match(self, e: Expr, st: _State) -> Iterator[_State]:
        yield from self.stepped._m(e, st)
        yield from self.base._m(e, st)


@dataclass(frozen=True, eq=False, repr=False)
class AttrIs(Pattern):
    base: Pattern
    attrs: tuple[tuple[str, Any], ...]

    def _repr(self, names: dict[int, str]) -> str:
        return f"{self.base._show(names)}.has_attr(" + ", ".join(f"{k}={v!r}" for k, v in self.attrs) + ")"

    def _children(self) -> tuple[Pattern, ...]:
        return (self.base,)

    def _ops(self) -> frozenset[str] | None:
        return self.base._ops()

    def _match(self, e: Expr, st: _State) -> Iterator[_State]:
        if not isinstance(e, Call):
            return
        missing = object()
        if all(e.attrs.get(k, missing) == v for k, v in self.attrs):
            yield from self.base._m(e, st)


@dataclass(frozen=True, eq=False, repr=False)
class DtypeIs(Pattern):
    base: Pattern
    dtypes: tuple[str, ...]

    def _repr(self, names: dict[int, str]) -> str:
        return f"{self.base._show(names)}.has_dtype(" + ", ".join(map(repr, self.dtypes)) + ")"

    def _children(self) -> tuple[Pattern, ...]:
        return (self.base,)

    def _ops(self) -> frozenset[str] | None:
        return self.base._ops()

    def _match(self, e: Expr, st: _State) -> Iterator[_State]:
        if not e.has_type:
            raise PatternError(f"{self!r}: the expression {e!r} has no type; run plait.relay.infer_type first")
        t = e.checked_type
        if isinstance(t, TensorType) and t.dtype in self.dtypes:
            yield from self.base._m(e, st)


# ---- constructors -----------------------------------------------------------------------------------


def wildcard() -> Pattern:
    """Any expression: an input of the region."""
    return Wildcard()


def is_constant() -> Pattern:
    """A constant tensor (constants stay inside the region's function)."""
    return IsConstant()


def is_op(*globs: str) -> IsOp:
    """A call of an operator whose name matches one of ``globs`` (``fnmatch``, case-sensitive)."""
    from plait.op import OPS, list_ops

    if not globs:
        raise PatternError("is_op: expected at least one operator name or glob")
    known = list_ops()
    names: set[str] = set()
    for g in globs:
        if not isinstance(g, str):
            raise PatternError(f"is_op: expected operator names or globs (str), got {g!r} ({type(g).__name__})")
        if not g:
            raise PatternError("is_op: empty operator name")
        if any(ch in g for ch in "*?["):
            hit = [n for n in known if fnmatch.fnmatchcase(n, g)]
            if not hit:
                raise PatternError(f"is_op: the glob '{g}' matches no operator")
            names.update(hit)
        elif g in OPS:
            names.add(g)
        else:
            raise PatternError(f"is_op: {OPS.unknown_message(g)}")
    return IsOp(tuple(globs), frozenset(names))


def _contains(p: Pattern, part: Pattern) -> bool:
    stack, seen = [p], set()
    while stack:
        q = stack.pop()
        if q is part:
            return True
        if id(q) not in seen:
            seen.add(id(q))
            stack.extend(q._children())
    return False


def optional(base: Pattern, step: Callable[[Pattern], Pattern]) -> Pattern:
    """``step(base)`` when it matches, else ``base`` alone: ``optional(conv, lambda x: is_op("nn.relu")(x))``."""
    if not isinstance(base, Pattern):
        raise PatternError(f"optional: expected a pattern, got {base!r} ({type(base).__name__})")
    where = f"{base!r}.optional"
    if not callable(step) or isinstance(step, Pattern):
        raise PatternError(f"{where}: expected a function of one pattern (lambda x: is_op(...)(x)), got {step!r}")
    stepped = step(base)
    if not isinstance(stepped, Pattern):
        raise PatternError(f"{where}: the step returned {stepped!r} ({type(stepped).__name__}), not a pattern")
    if stepped is base:
        raise PatternError(f"{where}: the step returned its argument unchanged")
    if not _contains(stepped, base):
        raise PatternError(f"{where}: the step's pattern {stepped!r} does not use its argument")
    return Optional(base, stepped)


# ---- matching ---------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Match:
    """A match of ``pattern`` at ``root``: the calls its ``is_op`` parts matched (root last)."""

    pattern: Pattern
    root: Expr
    calls: tuple[Call, ...]
    _bindings: dict = field(repr=False)

    def __getitem__(self, p: Pattern) -> Expr:
        """The expression a part of the pattern matched."""
        e = self._bindings.get(id(p))
        if e is None:
            raise PatternError(f"{p!r} is not part of this match of {self.pattern!r}")
        return e


def _order_calls(calls: tuple[Call, ...], root: Expr) -> tuple[Call, ...]:
    inside = {id(c) for c in calls}
    return tuple(n for n in post_order(root, enter=lambda n: id(n) in inside) if id(n) in inside)


def _matches(p: Pattern, e: Expr) -> Iterator[Match]:
    for b, calls in p._m(e, ({}, ())):
        yield Match(p, e, _order_calls(calls, e), b)


def match(pattern: Pattern, expr: Expr) -> Match | None:
    """The largest match of ``pattern`` rooted at ``expr`` (most calls; the first found on ties), or None."""
    if not isinstance(pattern, Pattern):
        raise PatternError(f"match: expected a pattern, got {pattern!r} ({type(pattern).__name__})")
    if not isinstance(expr, Expr):
        raise PatternError(f"match: expected a Relay expression, got {expr!r} ({type(expr).__name__})")
    best = None
    for m in _matches(pattern, expr):
        if best is None or len(m.calls) > len(best.calls):
            best = m
    return best
