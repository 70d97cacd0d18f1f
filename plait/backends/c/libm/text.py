"""C text of the math routines: their constants filled into templates, and the routine type.

Templates are C with ``${...}`` holes (C never writes ``${``), filled from :data:`CONSTANTS`:

- ``${name}``, ``${name[i]}``: one float32 constant as an exact C literal (``0x1.62e4p-1f``),
- ``${array:name}``: all of them, comma-separated (a ``static const`` table's initializer),
- ``${horner:name:v}``: the polynomial with those coefficients in ``v``, lowest power first, in
  Horner's form: ``(c0 + v * (c1 + v * c2))``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from plait.backends.c.libm.constants import CONSTANTS

_HOLE = re.compile(r"\$\{([^}]*)\}")


def _literal(name: str, value: str) -> str:
    return value + "u" if name == "trig.bits" else value + "f"


def _values(name: str) -> list[str]:
    return [_literal(name, v) for v in CONSTANTS[name]]


def _fill_one(hole: str) -> str:
    parts = hole.split(":")
    if parts[0] == "array":
        vals = _values(parts[1])
        return ",\n  ".join(", ".join(vals[k:k + 4]) for k in range(0, len(vals), 4))
    if parts[0] == "horner":
        vals, v = _values(parts[1]), parts[2]
        text = vals[-1]
        for c in reversed(vals[:-1]):
            text = f"({c} + {v} * {text})"
        return text
    m = re.fullmatch(r"([a-z0-9_.]+)(?:\[(\d+)\])?", hole)
    if m is None:
        raise ValueError(f"bad template hole ${{{hole}}}")
    return _values(m.group(1))[int(m.group(2) or 0)]


def fill(template: str) -> str:
    """``template`` with every ``${...}`` hole replaced (see the module docstring)."""
    return _HOLE.sub(lambda m: _fill_one(m.group(1)), template)


@dataclass(frozen=True)
class Routine:
    """One C definition of the math routines: its name, the definitions it uses, its text (filled)."""

    name: str
    deps: tuple[str, ...]
    text: str


def routine(name: str, deps: tuple[str, ...], template: str) -> Routine:
    return Routine(name, deps, fill(template))
