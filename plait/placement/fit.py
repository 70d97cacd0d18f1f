"""Does a model fit each piece's memory? One message for every "does not fit" in plait.

Where things live (from the piece's facts, :attr:`plait.target.Target.facts`):

- **weights** (the model's constants) in **flash** when the piece has flash (``flash_kb`` not None,
  e.g. a microcontroller), else in **RAM** (a host: ``flash_kb`` does not apply);
- **activations and workspaces** (the pool of the piece's memory in the static memory plan,
  :mod:`plait.memory.plan`) in **RAM**.

Placement keeps each piece's weights within :func:`piece_memory` ``.weights_bytes`` (the solver);
after lowering and memory planning, :func:`check_fit` checks every piece's share of the plan against
its RAM. A piece whose facts say nothing about a memory (no tag, no ``-ram-kb=``) is not checked for
it. A failure is a :class:`FitError` worded by :func:`fit_message`, e.g.

    piece 'inference_cpu' (c -mcpu=cortex-m7f): the weights need 1,597,480 bytes of flash, more than its
    1,048,576 bytes
    piece 'inference_cpu' (c -mcpu=cortex-m7f): the activations and workspaces in pool
    'workspace_inference_cpu' need 2,408,448 bytes of RAM, more than its 327,680 bytes
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from plait.placement.rules import PlacementError

FLASH, RAM = "flash", "RAM"


class FitError(PlacementError):
    """A model's weights or activations do not fit the memory of a piece."""


def piece_label(piece: Any) -> str:
    """``piece 'name' (target as written)``: how fit messages name a piece."""
    written = getattr(piece, "written", None)
    text = written if isinstance(written, str) else str(piece.target)
    return f"piece '{piece.name}' ({text})"


def fit_message(piece: Any, what: str, memory: str, need: int, have: int) -> str:
    """The one wording of "does not fit": ``piece 'p' (target): <what> need N bytes of <memory>, more
    than its M bytes``. ``what`` is plural ("the weights", "the activations", "the weights of the 2
    calls pinned to it"); ``memory`` is ``flash`` or ``RAM``."""
    return f"{piece_label(piece)}: {what} need {need:,} bytes of {memory}, more than its {have:,} bytes"


def fit_error(piece: Any, what: str, memory: str, need: int, have: int) -> FitError:
    return FitError(fit_message(piece, what, memory, need, have))


@dataclass(frozen=True)
class PieceMemory:
    """A piece's memories in bytes (None: unknown, not checked): where its weights go and how much
    fits there, and its RAM (for activations, and for weights too when ``weights_in`` is RAM)."""

    weights_in: str  # FLASH or RAM
    weights_bytes: int | None
    ram_bytes: int | None
    weights_source: str = ""  # where the weights' capacity comes from (a Fact's ``where``)
    ram_source: str = ""


def _kib(fact: Any) -> int | None:
    value = getattr(fact, "value", None)
    return None if value is None else int(value) * 1024


def piece_memory(target: Any) -> PieceMemory:
    """Where ``target``'s weights live and how much of each memory it has (from its facts)."""
    from plait.target.facts import UNKNOWN

    facts = getattr(target, "facts", None)
    if facts is None:
        return PieceMemory(FLASH, None, None)
    ram, flash = facts.ram_kb, facts.flash_kb
    if flash.value is not None:
        return PieceMemory(FLASH, _kib(flash), _kib(ram), flash.where, ram.where)
    if flash.origin == UNKNOWN:  # not stated: the weights are somewhere we know nothing about
        return PieceMemory(FLASH, None, _kib(ram), flash.where, ram.where)
    return PieceMemory(RAM, _kib(ram), _kib(ram), ram.where, ram.where)


def check_fit(composite: Any, usage: Mapping[str, Mapping[str, Any]]) -> None:
    """Check each piece's share of a memory plan (``usage``: piece name -> ``pool`` (its name),
    ``activation`` (the pool's bytes: activations and workspaces) and ``param`` bytes, see
    :func:`plait.memory.plan.piece_bytes`) against its memories: the pool against RAM, the weights
    against flash (or RAM too, on a piece without flash). Raises :class:`FitError` naming every
    piece that does not fit, with its pool."""
    problems = []
    for piece in composite.pieces:
        use = usage.get(piece.name)
        if use is None:
            continue
        mem = piece_memory(piece.target)
        pooled = int(use.get("activation", 0))
        pool = f"the activations and workspaces in pool '{use['pool']}'" if use.get("pool") else \
            "the activations and workspaces"
        weights = int(use.get("param", 0))
        if mem.weights_in == FLASH:
            if mem.weights_bytes is not None and weights > mem.weights_bytes:
                problems.append(fit_message(piece, "the weights", FLASH, weights, mem.weights_bytes))
            if mem.ram_bytes is not None and pooled > mem.ram_bytes:
                problems.append(fit_message(piece, pool, RAM, pooled, mem.ram_bytes))
        elif mem.ram_bytes is not None and weights + pooled > mem.ram_bytes:
            problems.append(fit_message(piece, f"the weights plus {pool}", RAM, weights + pooled, mem.ram_bytes))
    if problems:
        raise FitError("; ".join(problems))


def facts_table(composite: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """Each piece's facts as plain data (for reports): piece -> fact -> ``{value, unit, where, note}``;
    a piece without facts maps to ``{}``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for piece in composite.pieces:
        facts = piece.target.facts
        out[piece.name] = {} if facts is None else {
            n: {"value": f.value, "unit": f.unit, "where": f.where, "note": f.note} for n, f in facts.items()}
    return out


def facts_lines(table: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """The text of :func:`facts_table`: a block per piece, one line per fact (value, where it came from)."""
    lines = ["facts of the pieces (what the cost model and the memory checks use, and where each comes from):"]
    for piece, facts in table.items():
        if not facts:
            lines.append(f"  {piece}: none (no tag matches its options; nothing is checked)")
            continue
        lines.append(f"  {piece}:")
        for name, f in facts.items():
            value = "n/a" if f["value"] is None else f"{f['value']}{' ' + f['unit'] if f['unit'] else ''}"
            note = f"  ({f['note']})" if f.get("note") else ""
            lines.append(f"    {name:10s} {value:12s} {f['where']}{note}")
    return lines


def memory_line(memory: Mapping[str, Mapping[str, Any]]) -> str:
    """``p 90,416 of 1,048,576 bytes of flash (9%); ...``: the weights placed on each piece against where
    they live (``memory``: piece -> ``{used, capacity, memory}``)."""
    parts = []
    for p, m in memory.items():
        cap, where = m["capacity"], m.get("memory", RAM)
        if cap is None:
            parts.append(f"{p} {m['used']:,} bytes ({where} not stated: not checked)")
        else:
            share = f" ({100 * m['used'] / cap:.0f}%)" if cap else ""
            parts.append(f"{p} {m['used']:,} of {cap:,} bytes of {where}{share}")
    return "; ".join(parts)


__all__ = ["FLASH", "FitError", "PieceMemory", "RAM", "check_fit", "facts_lines", "facts_table", "fit_error",
           "fit_message", "memory_line", "piece_label", "piece_memory"]
