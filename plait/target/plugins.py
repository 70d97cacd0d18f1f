"""Where kinds come from: a manifest of name -> ``"module:Class"`` (a Backend subclass), loaded lazily.

Two sources, read the same way:

- the in-tree manifest, the ``MANIFEST`` dict of the module named by :data:`IN_TREE` (plait's own
  kinds; pyproject.toml's ``[project.entry-points."plait.backends"]`` table equals it, and a test
  checks so). It is read from the code, so a checkout that is not pip-installed, or whose installed
  metadata is stale, still finds every in-tree kind;
- Python entry points in the ``plait.backends`` group, for out-of-tree packages::

      [project.entry-points."plait.backends"]
      myaccel = "myaccel_plait:MyAccel"    # a plait.target.Backend subclass

A kind asked for by name (a target string, :func:`plait.target.get_kind`) imports only its own module.
Listing kinds or tags, or a name that is not found, loads every in-tree kind, then every plugin. A
plugin that fails to load raises :class:`PluginError` naming the entry point, every time it is asked for.
Entry points of the ``plait`` distribution itself are skipped: the in-tree manifest is what counts.
This module reads strings only; it imports no backend package by name at import time.
"""

from __future__ import annotations

import importlib
import threading
from contextvars import ContextVar
from importlib import metadata
from typing import Any

from plait.target.errors import PluginError

GROUP = "plait.backends"
#: "module:attribute" of the in-tree manifest (name -> "module:Class")
IN_TREE = "plait.backends:MANIFEST"

_loaded: set[str] = set()  # "name = value" of every manifest entry or entry point already tried
_failed: dict[str, PluginError] = {}
_origin: ContextVar[str | None] = ContextVar("plait_target_plugin_origin", default=None)
_lock = threading.RLock()  # one loader at a time: a kind is imported and registered once


def loading_origin() -> str | None:
    """While a plugin loads: "entry point 'NAME' (VALUE)", recorded on the kind it registers."""
    return _origin.get()


def in_tree_manifest() -> dict[str, str]:
    """The in-tree manifest: kind name -> "module:Class"."""
    module, attr = IN_TREE.split(":")
    return dict(getattr(importlib.import_module(module), attr))


def entry_points() -> list[metadata.EntryPoint]:
    """The ``plait.backends`` entry points of installed distributions other than plait itself."""
    seen: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        if dist is not None and (dist.metadata["Name"] or "").lower() == "plait":
            continue
        seen.setdefault(f"{ep.name} = {ep.value}", ep)  # a distribution found twice on sys.path
    return [seen[k] for k in sorted(seen)]


def _resolve(value: str) -> Any:
    module, _, attr = value.partition(":")
    obj: Any = importlib.import_module(module.strip())
    for part in attr.strip().split(".") if attr.strip() else ():
        obj = getattr(obj, part)
    return obj


def _load(name: str, value: str, origin: str | None, load: Any = None) -> None:
    """Load one manifest entry or entry point (once); a failure is recorded and raised."""
    from plait.target.kind import register_backend

    key = f"{name} = {value}"
    with _lock:
        if key in _loaded:
            if key in _failed:
                raise _failed[key]
            return
        _loaded.add(key)
        token = _origin.set(origin)
        try:
            register_backend((load or (lambda: _resolve(value)))())
        except Exception as exc:  # a broken plugin: say which one, never a bare traceback
            _failed[key] = PluginError(
                f"cannot load target plugin '{key}' (entry point group '{GROUP}'): {type(exc).__name__}: {exc}")
            raise _failed[key] from None
        finally:
            _origin.reset(token)


def load_in_tree() -> None:
    """Load every in-tree kind (``plait targets`` lists them all)."""
    for name, value in in_tree_manifest().items():
        _load(name, value, None)


def load_kind(name: str) -> bool:
    """Load the kind ``name`` from the in-tree manifest or an entry point of that name (only it);
    then, if ``name`` is still neither a kind nor a tag, every in-tree kind. Is it known now?"""
    from plait.target.kind import KINDS
    from plait.target.tag import TAGS

    manifest = in_tree_manifest()
    if name in manifest:
        _load(name, manifest[name], None)
    else:
        for ep in entry_points():
            if ep.name == name:
                _load(ep.name, ep.value, f"entry point '{ep.name}' ({ep.value})", ep.load)
    if name not in KINDS and name not in TAGS:
        load_in_tree()
    return name in KINDS or name in TAGS


def load_plugins() -> None:
    """Load every in-tree kind, then every ``plait.backends`` entry point not loaded yet; raise if
    any failed to load."""
    load_in_tree()
    for ep in entry_points():
        try:
            _load(ep.name, ep.value, f"entry point '{ep.name}' ({ep.value})", ep.load)
        except PluginError:
            pass
    if _failed:
        raise _failed[sorted(_failed)[0]]


def snapshot() -> tuple[set[str], dict[str, PluginError]]:
    """The loader's state, for :func:`restore` (tests)."""
    return set(_loaded), dict(_failed)


def restore(state: tuple[set[str], dict[str, PluginError]]) -> None:
    _loaded.clear()
    _loaded.update(state[0])
    _failed.clear()
    _failed.update(state[1])
