"""Out-of-tree target kinds: Python entry points in the ``plait.backends`` group.

A package adds a kind without touching plait by declaring, in its ``pyproject.toml``::

    [project.entry-points."plait.backends"]
    myaccel = "myaccel_plait"              # a module: importing it registers kinds, tags, hooks
    # or: myaccel = "myaccel_plait:register"   (a function, called with no arguments)

Plugins load lazily: the first time the kinds or tags are listed, or a name is not found. A plugin
that fails to load raises :class:`PluginError` naming the entry point, every time it is asked for.
Before them, the in-tree backends (``plait.backends``: the ``blas`` and ``onnxruntime`` kinds, the hooks
of ``c`` and ``llvm``) are imported the same way, so their names parse without importing them first.
"""

from __future__ import annotations

from contextvars import ContextVar
from importlib import metadata
from types import ModuleType

from plait.target.errors import PluginError

GROUP = "plait.backends"

_loaded: set[str] = set()  # "name = value" of every entry point already tried
_failed: dict[str, PluginError] = {}
_origin: ContextVar[str | None] = ContextVar("plait_target_plugin_origin", default=None)


def loading_origin() -> str | None:
    """While a plugin loads: "entry point 'NAME' (VALUE)", recorded on the kinds it registers."""
    return _origin.get()


def entry_points() -> list[metadata.EntryPoint]:
    seen: dict[str, metadata.EntryPoint] = {}
    for ep in metadata.entry_points(group=GROUP):
        seen.setdefault(f"{ep.name} = {ep.value}", ep)  # a distribution found twice on sys.path
    return [seen[k] for k in sorted(seen)]


IN_TREE = "plait.backends"


def load_in_tree() -> None:
    """Import the in-tree backends (once per process; they register kinds and hooks on import)."""
    import importlib
    import sys

    if IN_TREE not in sys.modules:
        importlib.import_module(IN_TREE)


def load_plugins() -> None:
    """Load the in-tree backends, then every ``plait.backends`` entry point not loaded yet; raise if
    any failed to load."""
    load_in_tree()
    for ep in entry_points():
        key = f"{ep.name} = {ep.value}"
        if key in _loaded:
            continue
        _loaded.add(key)
        token = _origin.set(f"entry point '{ep.name}' ({ep.value})")
        try:
            obj = ep.load()
            if callable(obj) and not isinstance(obj, ModuleType):
                obj()
        except Exception as exc:  # a broken plugin: say which one, never a bare traceback
            _failed[key] = PluginError(
                f"cannot load target plugin '{key}' (entry point group '{GROUP}'): {type(exc).__name__}: {exc}")
        finally:
            _origin.reset(token)
    if _failed:
        raise _failed[sorted(_failed)[0]]


def _state() -> tuple[set[str], dict[str, PluginError]]:
    return _loaded, _failed
