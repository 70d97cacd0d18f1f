"""Hooks: the methods a :class:`plait.target.backend.Backend` subclass overrides, and running them.

| hook | signature | replaces |
|---|---|---|
| relay_to_tir | ``(mod, target) -> IRModule`` or ``(mod, target, ctx)`` | default lowering |
| tir_to_runtime | ``(mod, target) -> runtime module`` or ``(mod, target, ctx)`` | default code generation |
| relay_to_runtime | ``(func, target) -> runtime module`` | both (external codegen) |
| supports | ``(call, target) -> bool`` (or ``(bool, reason)``) | capability, for placement |
| cost | ``(call, target) -> float | None``: seconds, None = no estimate | cost model entry |
| patterns | ``(target) -> [(name, Pattern)]`` | region claims, for placement |

A kind with ``patterns`` also gets each PatternRegion it claims given to its ``cost`` hook (None: the sum
of its calls); see plait.placement.regions.

Signatures are checked when a kind is registered (by its parameters): the specs (:data:`HOOKS`) and
a backend's hooks (:func:`hooks_of_backend`) are in :mod:`plait.target.backend`, with the methods.
The ``run_*`` helpers call a hook for one piece, with the piece's target as an explicit argument, and
report any failure as a :class:`HookError` naming the hook, the kind and the piece.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plait.errors import PlaitError
from plait.ir.transform import Pass, PassContext
from plait.target.backend import HOOKS, Hook
from plait.target.composite import PIECE_ATTR, Piece
from plait.target.errors import HookError
from plait.target.plugins import get_kind
from plait.target.target import Target


def hooks_of(kind: str) -> dict[str, Hook]:
    """The hooks of ``kind`` (the methods its Backend overrides), in the order of :data:`HOOKS`."""
    k = get_kind(kind)
    return {name: k.hooks[name] for name in HOOKS if name in k.hooks}


def get_hook(kind: str, name: str) -> Hook | None:
    """Hook ``name`` of ``kind``, or None when its Backend does not override it."""
    HOOKS.get(name)
    return get_kind(kind).hooks.get(name)


# ---- running hooks for a piece ------------------------------------------------------------------


def _as_piece(p: Piece | Target) -> Piece:
    return p if isinstance(p, Piece) else Piece(p.kind_name, p)


def _where(h: Hook, piece: Piece) -> str:
    return f"hook '{h.name}' of target kind '{h.kind}' on piece '{piece.name}'"


def _require(piece: Piece, name: str) -> Hook:
    h = piece.target.kind.hooks.get(name)
    if h is None:
        raise HookError(f"target kind '{piece.target.kind_name}' (piece '{piece.name}') has no '{name}' hook")
    return h


def _call(h: Hook, piece: Piece, args: tuple) -> Any:
    try:
        return h.fn(*args[: h.nargs])
    except PlaitError:
        raise
    except Exception as exc:
        raise HookError(f"{_where(h, piece)} failed: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class _HookPass(Pass):
    """Runs a relay_to_tir hook as a pass named '<kind>.relay_to_tir' (for instruments)."""

    hook: Hook = None  # type: ignore[assignment]
    piece: Piece = None  # type: ignore[assignment]

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.hook.kind}.relay_to_tir"

    def run(self, mod: Any, ctx: PassContext) -> Any:
        return _call(self.hook, self.piece, (mod.with_attrs(**{PIECE_ATTR: self.piece.name}), self.piece.target, ctx))


def run_relay_to_tir(piece: Piece | Target, mod: Any, ctx: PassContext | None = None) -> Any:
    """Run the kind's relay_to_tir hook on ``mod`` for the piece (its name in ``mod.attrs["piece"]``,
    removed from the result)."""
    from plait.relay.module import IRModule

    piece = _as_piece(piece)
    h = _require(piece, "relay_to_tir")
    out = (ctx or PassContext()).run(_HookPass(h, piece), mod)
    if not isinstance(out, IRModule):
        raise HookError(f"{_where(h, piece)} returned {type(out).__name__}; expected an IRModule")
    if PIECE_ATTR in out.attrs and PIECE_ATTR not in mod.attrs:
        out = IRModule(dict(out.items()), {k: v for k, v in out.attrs.items() if k != PIECE_ATTR})
    return out


def run_tir_to_runtime(piece: Piece | Target, mod: Any, ctx: PassContext | None = None) -> Any:
    """Run the kind's tir_to_runtime hook on the piece's PrimFuncs (``ctx``: the build's PassContext); a
    kind without one uses the hook of its backend's ``default_codegen`` kind, with the piece's target."""
    piece = _as_piece(piece)
    kind = piece.target.kind
    fallback = kind.backend.default_codegen
    if "tir_to_runtime" not in kind.hooks and fallback and fallback != kind.name:
        h = get_kind(fallback).hooks.get("tir_to_runtime")
        if h is not None:
            return _call(h, piece, (mod, piece.target, ctx or PassContext()))
    return _call(_require(piece, "tir_to_runtime"), piece, (mod, piece.target, ctx or PassContext()))


def run_relay_to_runtime(piece: Piece | Target, func: Any) -> Any:
    piece = _as_piece(piece)
    return _call(_require(piece, "relay_to_runtime"), piece, (func, piece.target))


def supports_answer(piece: Piece | Target, call: Any) -> tuple[bool, str | None] | None:
    """The kind's capability answer for ``call`` and its reason (None when the hook gave none);
    None when the kind has no ``supports`` hook. A hook returns a bool or ``(bool, reason)``."""
    piece = _as_piece(piece)
    h = piece.target.kind.hooks.get("supports")
    if h is None:
        return None
    out = _call(h, piece, (call, piece.target))
    if isinstance(out, bool):
        return out, None
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], bool) and isinstance(out[1], str):
        return out
    raise HookError(f"{_where(h, piece)} returned {out!r} ({type(out).__name__}); expected a bool or "
                    "(bool, reason)")


def call_supports(piece: Piece | Target, call: Any) -> bool | None:
    """The kind's capability answer for ``call``; None when the kind has no ``supports`` hook."""
    got = supports_answer(piece, call)
    return None if got is None else got[0]


def call_cost(piece: Piece | Target, call: Any) -> float | None:
    """The kind's cost estimate (seconds) for ``call``; None when it has no ``cost`` hook or no estimate."""
    piece = _as_piece(piece)
    h = piece.target.kind.hooks.get("cost")
    if h is None:
        return None
    out = _call(h, piece, (call, piece.target))
    if out is not None and (isinstance(out, bool) or not isinstance(out, (int, float)) or out < 0):
        raise HookError(f"{_where(h, piece)} returned {out!r}; expected a number of seconds >= 0 or None")
    return None if out is None else float(out)

