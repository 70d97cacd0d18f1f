"""Helpers for tests: run with the target registries restored afterwards; make a kind in one line."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterator

from plait.target import plugins
from plait.target.backend import Backend, option
from plait.target.options import Option
from plait.target.kind import KINDS, TargetKind
from plait.target.plugins import register_backend
from plait.target.tag import TAGS


@contextlib.contextmanager
def isolated_registry() -> Iterator[None]:
    """Kinds, tags and plugin state registered inside the block are forgotten after it. Every
    in-tree kind is loaded first, so that it is part of the snapshot."""
    plugins.load_in_tree()
    kinds, tags, loader = KINDS.snapshot(), TAGS.snapshot(), plugins.snapshot()
    try:
        yield
    finally:
        KINDS.restore(kinds)
        TAGS.restore(tags)
        plugins.restore(loader)


def make_backend(name: str, options: tuple[Option, ...] = (), **members: Any) -> type[Backend]:
    """A Backend subclass called ``name``: class attributes (``can_host=False``), hook methods given as
    functions without ``self`` (``supports=lambda call, target: ...``) and ``options`` (an ``Options``
    dataclass made from them)."""
    body = {k: (staticmethod(v) if k in _METHODS and not isinstance(v, staticmethod) else v)
            for k, v in members.items()}
    if options:
        body["Options"] = dataclasses.make_dataclass(f"{name}_options", [
            (o.name.replace("-", "_"), o.type, option(o.default, o.doc, choices=o.choices, nullable=o.nullable,
                                                      minimum=o.minimum, name=o.name)) for o in options])
    return type(f"{name.title().replace('_', '')}Backend", (Backend,), {"name": name, **body})


def register_test_backend(name: str, **members: Any) -> TargetKind:
    """Register :func:`make_backend` ``(name, **members)`` (inside :func:`isolated_registry`)."""
    return register_backend(make_backend(name, **members))


_METHODS = ("supports", "cost", "patterns", "relay_to_tir", "tir_to_runtime", "relay_to_runtime", "device",
            "schedule_rules", "normalize", "validate")
