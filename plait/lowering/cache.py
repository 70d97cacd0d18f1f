"""The lowering cache: one scheduled PrimFunc per (Primitive function, target) in a build.

    cache = LoweringCache()
    with cache.active():                 # plait.build does this around the whole pipeline
        f = lower_cached(fn, "name", target)   # lowers fn (TE compute, default schedule, simplify, verify)
        g = lower_cached(fn2, "other", target) # fn2 structurally equal to fn: the same TIR, renamed

The key is the function's structure without call-site ``meta`` and without function attributes
(:func:`lowering_key`), hashed with :func:`plait.relay.analysis.structural_hash` and compared with
``structural_equal`` on a hash collision, and the target string: so the functions the cost model
lowers to price calls (:mod:`plait.placement.cost`: a fusion group's function, or a call's single-call
function), default lowering of a group (:mod:`plait.lowering.lower`) and the calls a ``relay_to_tir``
hook leaves to default lowering (:mod:`plait.lowering.hook_lowering`) share one lowering of the same
thing; placement prices exactly the groups lowering will make, so a build lowers each call once.

Scope: per build. ``plait.build`` (and ``plait explain``) activate a fresh cache for their duration;
outside an active cache :func:`lower_cached` lowers every time. A cache lives no longer than its
build, so an operator's compute or a schedule rule changed between builds (tests do) is never
served stale, and its size is bounded by the build's distinct functions. ``stats`` counts lowerings
and hits (tests assert that nothing is lowered twice).
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Any, Iterator

from plait.ir.attrs import EMPTY
from plait.lowering.function import lower_function, piece_name_for
from plait.lowering.tuning import fingerprint
from plait.relay.analysis import structural_equal, structural_hash
from plait.relay.expr import Call, Expr, Function
from plait.relay.visitor import ExprMutator
from plait.target.composite import PIECE_ATTR, piece_of
from plait.tir.stmt import PrimFunc


@dataclass
class CacheStats:
    """``lowered``: functions lowered (cache misses); ``hits``: lowerings saved."""

    lowered: int = 0
    hits: int = 0


_CURRENT: contextvars.ContextVar["LoweringCache | None"] = contextvars.ContextVar("plait_lowering_cache", default=None)


def strip_meta(fn: Function) -> Function:
    """``fn`` without the call-site ``meta`` of its calls (the key under which lowering deduplicates)."""

    class _Strip(ExprMutator):
        def rewrite_call(self, pre: Call, post: Expr) -> Expr:
            assert isinstance(post, Call)
            return Call(post.op, post.args, post.attrs, EMPTY) if post.meta else post

    out = _Strip().visit(fn)
    assert isinstance(out, Function)
    return out


def lowering_key(fn: Function) -> Function:
    """``fn`` without its attributes and its calls' ``meta``: what its lowering depends on."""
    stripped = strip_meta(fn)
    return Function(stripped.params, stripped.body, None, EMPTY)


class LoweringCache:
    """Scheduled PrimFuncs by (:func:`lowering_key`, target string, schedule?, the active tuning configs'
    :func:`~plait.lowering.tuning.fingerprint`: a function lowered under one tuning config is never served
    under another)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, str, bool, str], list[tuple[Function, PrimFunc]]] = {}
        self.stats = CacheStats()

    def __len__(self) -> int:
        return sum(len(v) for v in self._entries.values())

    @staticmethod
    def current() -> "LoweringCache | None":
        """The cache of the running build, if any."""
        return _CURRENT.get()

    @contextlib.contextmanager
    def active(self) -> Iterator["LoweringCache"]:
        """Make this the cache :func:`lower_cached` uses (nested builds get their own)."""
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)

    def lower(self, fn: Function, name: str, target: Any, piece: Any = None, schedule: bool = True) -> PrimFunc:
        """The PrimFunc of ``fn`` for ``target`` named ``name``: lowered on the first request, the
        cached one renamed after that."""
        key_fn = lowering_key(fn)
        key = (structural_hash(key_fn), str(target), schedule, fingerprint())
        bucket = self._entries.setdefault(key, [])
        for other, func in bucket:
            if structural_equal(other, key_fn):
                self.stats.hits += 1
                return _renamed(func, name, piece_name_for(target, piece))
        func = lower_function(fn, name, target, piece, schedule)
        self.stats.lowered += 1
        bucket.append((key_fn, func))
        return func


def _renamed(func: PrimFunc, name: str, piece: str) -> PrimFunc:
    """A cached PrimFunc served as ``name`` on piece ``piece`` (two pieces may have one target)."""
    if func.name == name and piece_of(func) == piece:
        return func
    return func.with_attrs(global_symbol=name, **{PIECE_ATTR: piece})


def lower_cached(fn: Function, name: str, target: Any, piece: Any = None, schedule: bool = True) -> PrimFunc:
    """:func:`plait.lowering.function.lower_function` through the active :class:`LoweringCache` (if any)."""
    cache = _CURRENT.get()
    if cache is None:
        return lower_function(fn, name, target, piece, schedule)
    return cache.lower(fn, name, target, piece, schedule)


__all__ = ["CacheStats", "LoweringCache", "lower_cached", "lowering_key", "strip_meta"]
