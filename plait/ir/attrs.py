"""Immutable, hashable attribute maps (operator attributes, call metadata, function attributes).

Values are ``None``, ``bool``, ``int``, ``float``, ``str`` or (nested) tuples of those; lists and
numpy scalars given by callers are normalized on the way in, so two equal maps compare equal.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

import numpy as np

from plait.errors import AttrError

AttrValue = Any  # None | bool | int | float | str | tuple[AttrValue, ...]


def normalize_value(value: Any, where: str = "attribute") -> AttrValue:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, np.ndarray):
        return normalize_value(value.tolist(), where)
    if isinstance(value, (list, tuple)):
        return tuple(normalize_value(v, where) for v in value)
    raise AttrError(f"{where}: unsupported attribute value {value!r} of type {type(value).__name__}")


class Attrs(Mapping[str, AttrValue]):
    """A frozen mapping with deterministic (sorted) iteration order."""

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Mapping[str, Any] | None = None, **kwargs: Any):
        merged = dict(items or {})
        merged.update(kwargs)
        self._items = tuple(sorted((str(k), normalize_value(v, f"attribute '{k}'")) for k, v in merged.items()))
        self._hash: int | None = None

    def __getitem__(self, key: str) -> AttrValue:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attrs):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self == Attrs(other)
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._items)
        return self._hash

    def __repr__(self) -> str:
        return "Attrs(" + ", ".join(f"{k}={v!r}" for k, v in self._items) + ")"

    def with_(self, **changes: Any) -> "Attrs":
        d = dict(self._items)
        d.update(changes)
        return Attrs(d)

    def without(self, *keys: str) -> "Attrs":
        return Attrs({k: v for k, v in self._items if k not in keys})


EMPTY = Attrs()
