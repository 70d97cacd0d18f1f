"""Where kinds and tags come from: a Backend subclass registered as a kind with its tags
(:func:`register_backend`), a manifest of name -> ``"module:Class"`` loaded lazily, and the kinds and
tags by name (:func:`get_kind`, :func:`list_kinds`, :func:`get_tag`, :func:`list_tags`,
:func:`register_tag`), which load what they need. The kind and tag types and their registries
(``KINDS``, ``TAGS``) are in :mod:`plait.target.kind` and :mod:`plait.target.tag`.

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
from typing import Any, Mapping

from plait.errors import RegistryError
from plait.target.backend import Backend, options_of
from plait.target.errors import PluginError, TargetError
from plait.target.facts import Fact, Facts
from plait.target.kind import KINDS, TargetKind
from plait.target.tag import TAGS, Tag, add_tag

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


# ---- kinds and tags: registered, and found by name ----------------------------------------------


def register_backend(cls: Any) -> TargetKind:
    """Register a :class:`plait.target.backend.Backend` subclass as a kind, with its tags.
    Duplicates (a kind, or a tag of the same name) raise; hook signatures are checked."""
    if not (isinstance(cls, type) and issubclass(cls, Backend)) or cls is Backend:
        raise TargetError(f"register_backend: expected a subclass of plait.target.Backend, got {cls!r}")
    name = cls.name
    if not isinstance(name, str) or not name:
        raise TargetError(f"backend class {cls.__name__} has no 'name'")
    backend = cls()
    kind = TargetKind(name, device_type=cls.device_type,
                      options=options_of(cls.Options) if cls.Options is not None else (),
                      default_keys=cls.default_keys, can_host=cls.can_host, doc=cls.summary(),
                      identity=cls.identity, backend=backend)
    kind.hooks  # checks the hook methods' signatures before anything is registered
    if kind.name in TAGS:
        raise RegistryError(f"target kind '{kind.name}' clashes with the target tag of the same name")
    origin = loading_origin()
    if origin is not None:
        kind.origin = origin
    KINDS.register(kind.name, kind)
    for tag in cls.tags:
        register_tag(tag.name, kind.name, tag.options, tag.facts, tag.doc, tag.match)
    return kind


def get_kind(name: str) -> TargetKind:
    """The kind called ``name``, loaded from the backend manifest when first asked for (only it);
    an unknown name loads every ``plait.backends`` plugin, then raises."""
    if name not in KINDS and not load_kind(name):
        load_plugins()
    return KINDS.get(name)


def list_kinds() -> list[TargetKind]:
    """Every registered kind (plugins included), sorted by name."""
    load_plugins()
    return [k for _, k in KINDS.items()]


def register_tag(name: str, kind: str, options: Mapping[str, Any], facts: Facts | Mapping[str, Fact],
                 doc: str = "", match: tuple[str, ...] | None = None) -> Tag:
    """Register a tag of the kind called ``kind`` (loaded when first asked for). ``match`` (the options
    identifying it, for targets written out in full) defaults to the kind's ``identity`` options, or, for
    a kind without them, to the options that differ from the kind's defaults (``keys`` and the fact
    options aside): :func:`plait.target.tag.add_tag`."""
    if name in KINDS:
        raise RegistryError(f"target tag '{name}' clashes with the target kind of the same name")
    return add_tag(name, get_kind(kind), options, facts, doc, match)


def get_tag(name: str) -> Tag:
    if name not in TAGS:
        load_plugins()
    return TAGS.get(name)


def list_tags() -> list[Tag]:
    load_plugins()
    return [t for _, t in TAGS.items()]
