"""Helpers for tests: run with the target registries restored afterwards."""

from __future__ import annotations

import contextlib
from typing import Iterator

from plait.target import plugins
from plait.target.kind import KINDS
from plait.target.tag import TAGS


@contextlib.contextmanager
def isolated_registry() -> Iterator[None]:
    """Kinds, tags, hooks and plugin state registered inside the block are forgotten after it.
    The in-tree backends are imported first, so that what they register is part of the snapshot."""
    plugins.load_in_tree()
    kinds, tags = dict(KINDS._items), dict(TAGS._items)
    hooks = {name: dict(k.hooks) for name, k in kinds.items()}
    loaded, failed = plugins._state()
    saved_loaded, saved_failed = set(loaded), dict(failed)
    try:
        yield
    finally:
        KINDS._items.clear()
        KINDS._items.update(kinds)
        TAGS._items.clear()
        TAGS._items.update(tags)
        for name, k in kinds.items():
            k.hooks.clear()
            k.hooks.update(hooks[name])
        loaded.clear()
        loaded.update(saved_loaded)
        failed.clear()
        failed.update(saved_failed)
