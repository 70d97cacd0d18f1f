"""Capability: can a piece run a call? Composable predicates and the piece's answer.

    from plait.placement.capability import op_is, dtype_in, decline_if_dtype, attr_eq
    conv_f32 = op_is("nn.conv2d") & dtype_in("float32") & ~attr_eq("groups", 1)
    conv_f32(call)  -> bool;  repr(conv_f32) -> "(op_is('nn.conv2d') & dtype_in('float32') & ~attr_eq('groups', 1))"

A piece answers with :func:`piece_supports`: its kind's ``supports`` hook when one is registered,
otherwise, for a kind that uses default lowering, "every operator with a TE compute"; a kind that
replaces code generation of Relay (``relay_to_runtime``) and has no ``supports`` hook claims nothing.
The answer comes from the kind's hooks, never from its name. While :func:`place` runs, a call claimed by
a piece's region pattern (:mod:`plait.placement.pattern`) is runnable on that piece too
(:func:`claimed`), even when the piece would not run it alone.
"""

from __future__ import annotations

import contextlib
import fnmatch
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from plait.ir.op import Op
from plait.ir.types import TensorType, TupleType
from plait.relay.expr import Call


class Predicate:
    """A test on a call; combine with ``&``, ``|`` and ``~``."""

    def __call__(self, call: Call) -> bool:
        raise NotImplementedError

    def __and__(self, other: "Predicate") -> "Predicate":
        return All((self, _pred(other)))

    def __or__(self, other: "Predicate") -> "Predicate":
        return Any_((self, _pred(other)))

    def __invert__(self) -> "Predicate":
        return NotPredicate(self)


def _pred(p: Any) -> Predicate:
    if isinstance(p, Predicate):
        return p
    if callable(p):
        return Where(p, getattr(p, "__name__", "predicate"))
    raise TypeError(f"expected a predicate, got {p!r}")


def _flat(parts: tuple, cls: type) -> tuple:
    out: list = []
    for p in parts:
        out.extend(p.parts if isinstance(p, cls) else (p,))
    return tuple(out)


@dataclass(frozen=True, repr=False)
class All(Predicate):
    parts: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", _flat(tuple(_pred(p) for p in self.parts), All))

    def __call__(self, call: Call) -> bool:
        return all(p(call) for p in self.parts)

    def __repr__(self) -> str:
        return "(" + " & ".join(map(repr, self.parts)) + ")"


@dataclass(frozen=True, repr=False)
class Any_(Predicate):
    parts: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", _flat(tuple(_pred(p) for p in self.parts), Any_))

    def __call__(self, call: Call) -> bool:
        return any(p(call) for p in self.parts)

    def __repr__(self) -> str:
        return "(" + " | ".join(map(repr, self.parts)) + ")"


@dataclass(frozen=True, repr=False)
class NotPredicate(Predicate):
    part: Predicate

    def __call__(self, call: Call) -> bool:
        return not self.part(call)

    def __repr__(self) -> str:
        return f"~{self.part!r}"


@dataclass(frozen=True, repr=False)
class Where(Predicate):
    """Any ``(call) -> bool`` function, shown by ``label``."""

    fn: Callable[[Call], bool]
    label: str

    def __call__(self, call: Call) -> bool:
        return bool(self.fn(call))

    def __repr__(self) -> str:
        return self.label


def _args(name: str, values: tuple) -> str:
    return f"{name}(" + ", ".join(map(repr, values)) + ")"


def _dtypes(call: Call) -> set[str]:
    """Dtypes of the call's arguments and result (those with a known type)."""
    out: set[str] = set()
    for e in (*call.args, call):
        if not e.has_type:
            continue
        t = e.checked_type
        for tt in (t.fields if isinstance(t, TupleType) else (t,)):
            if isinstance(tt, TensorType):
                out.add(tt.dtype)
    return out


def op_is(*patterns: str) -> Predicate:
    """The plait op name matches one of the globs (``"nn.conv*"``)."""
    return Where(lambda c: any(fnmatch.fnmatchcase(c.op_name, p) for p in patterns), _args("op_is", patterns))


def dtype_in(*dtypes: str) -> Predicate:
    """Every argument and result dtype is one of ``dtypes``."""
    allowed = frozenset(dtypes)
    return Where(lambda c: _dtypes(c) <= allowed, _args("dtype_in", dtypes))


def decline_if_dtype(*dtypes: str) -> Predicate:
    """False when any argument or result has one of ``dtypes``."""
    banned = frozenset(dtypes)
    return Where(lambda c: not (_dtypes(c) & banned), _args("decline_if_dtype", dtypes))


_MISSING = object()


def attr_eq(name: str, value: Any) -> Predicate:
    """The call has attribute ``name`` equal to ``value``."""
    return Where(lambda c: c.attrs.get(name, _MISSING) == value, _args("attr_eq", (name, value)))


def attr_in(name: str, values: Any) -> Predicate:
    vals = tuple(values)
    return Where(lambda c: c.attrs.get(name, _MISSING) in vals, _args("attr_in", (name, vals)))


def attr_where(name: str, test: Callable[[Any], bool], label: str | None = None) -> Predicate:
    """``test(value)`` of attribute ``name`` (False when the call has no such attribute)."""
    def fn(c: Call) -> bool:
        v = c.attrs.get(name, _MISSING)
        return v is not _MISSING and bool(test(v))
    return Where(fn, label or f"attr_where({name!r}, {getattr(test, '__name__', 'test')})")


def has_static_shape() -> Predicate:
    def fn(c: Call) -> bool:
        return all(isinstance(d, int) for t in _tensor_types(c) for d in t.shape)
    return Where(fn, "has_static_shape()")


def _tensor_types(c: Call) -> list[TensorType]:
    out = []
    for e in (*c.args, c):
        if e.has_type:
            t = e.checked_type
            out.extend(x for x in (t.fields if isinstance(t, TupleType) else (t,)) if isinstance(x, TensorType))
    return out


ANY = Where(lambda c: True, "ANY")
NOTHING = Where(lambda c: False, "NOTHING")


# ---- the piece's answer ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    ok: bool
    reason: str  # for the explain report


# call -> {piece name: why the piece runs it as part of a region}
_CLAIMS: ContextVar[Mapping[Call, Mapping[str, str]]] = ContextVar("plait_placement_claims", default={})


@contextlib.contextmanager
def claimed(claims: Mapping[Call, Mapping[str, str]]) -> Iterator[None]:
    """Inside the block, ``piece_supports(piece, call)`` is yes when ``claims[call]`` names the piece."""
    token = _CLAIMS.set(claims)
    try:
        yield
    finally:
        _CLAIMS.reset(token)


def piece_supports(piece: Any, call: Call) -> Answer:
    """Can ``piece`` (a Piece or a Target) run ``call``, and why."""
    from plait.target.hooks import _as_piece, supports_answer

    piece = _as_piece(piece)
    kind = piece.target.kind
    if not isinstance(call.op, Op):
        return Answer(False, f"'{call.op_name}' is not an operator call")
    why = _CLAIMS.get().get(call, {}).get(piece.name)
    if why is not None:
        return Answer(True, why)
    got = supports_answer(piece, call)
    if got is not None:
        ok, reason = got
        says = f"the 'supports' hook of target kind '{kind.name}' says {'yes' if ok else 'no'}"
        return Answer(ok, f"{says}: {reason}" if reason else says)
    if "relay_to_runtime" in kind.hooks:
        return Answer(False, f"target kind '{kind.name}' has its own code generation and no 'supports' hook")
    if isinstance(call.op, Op) and call.op.compute is not None:
        return Answer(True, f"default lowering: '{call.op_name}' has a TE compute")
    return Answer(False, f"default lowering: '{call.op_name}' has no TE compute")
