"""One generic registry type: duplicate names raise, unknown names raise with "did you mean"."""

from __future__ import annotations

import difflib
from typing import Generic, Iterator, TypeVar

from plait.errors import RegistryError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> item table. ``what`` names the kind of item in error messages ("operator")."""

    def __init__(self, what: str):
        self.what = what
        self._items: dict[str, T] = {}

    def register(self, name: str, item: T) -> T:
        if name in self._items:
            raise RegistryError(f"{self.what} '{name}' is already registered")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise RegistryError(self.unknown_message(name)) from None

    def unknown_message(self, name: str) -> str:
        msg = f"unknown {self.what} '{name}'"
        close = difflib.get_close_matches(name, list(self._items), n=3, cutoff=0.6)
        if close:
            msg += "; did you mean " + " or ".join(f"'{c}'" for c in close) + "?"
        return msg

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._items.items())

    def snapshot(self) -> dict[str, T]:
        """A copy of the table, for :meth:`restore` (tests that register temporary items)."""
        return dict(self._items)

    def restore(self, snapshot: dict[str, T]) -> None:
        """Make the table what :meth:`snapshot` saw: items registered since are forgotten."""
        self._items.clear()
        self._items.update(snapshot)
