"""Executors: what runs a lowered module, one subpackage each. ``graph/`` (JSON graph + params +
library), ``aot/`` (plain C with a fixed memory map; firmware, QEMU, instruction counts) and ``vm/``
(bytecode interpreted in Python; control flow, run-time allocation).

Shared by all: ``base`` (the :class:`Executor` interface), ``graph_codegen`` (lowered main -> the graph
form + function signatures, which every executor starts from), ``files`` (an exported artifact's files:
export, load), ``manifest`` / ``graph_check`` / ``params_file`` (the checks an artifact passes before
anything runs), ``inputs`` (binding and checking a run's inputs), ``errors``.

Each executor is one :class:`~plait.executor.base.Executor` subclass (``graph.executor``,
``aot.executor``, ``vm.executor``), registered in :data:`EXECUTORS` by name: its capabilities, its
command-line flags, ``plan(mod, composite, config) -> ProgramPlan`` (the build's one memory plan),
``codegen(lowered, built, composite, ctx) -> artifact`` (``lowered.mod`` the lowered IRModule whose
``main`` calls only PrimFuncs, ``lowered.plan`` the plan, ``built.lib`` the runtime module implementing
them, ``composite`` the CompositeTarget), ``load`` and ``runner``.
``plait.build(..., executor=NAME)`` and the CLI ask :func:`get_executor`; nothing outside this package
branches on an executor's name. In-tree executors come from :data:`MANIFEST` (loaded lazily, like the
backends' manifest); out-of-tree ones from entry points of the ``plait.executors`` group::

    [project.entry-points."plait.executors"]
    trace = "mypkg.trace:TracingExecutor"      # a plait.executor.Executor subclass

or :func:`register_executor` at run time.
"""

from __future__ import annotations

import importlib
import threading
from importlib import metadata
from typing import Any

from plait.errors import PlaitError
from plait.executor.base import Capabilities, Executor, Flag, RunOptions, check_executor
from plait.registry import Registry

EXECUTORS: Registry[Executor] = Registry("executor")
#: the in-tree executors, in the order the CLI lists them: name -> "module:Class"
MANIFEST: dict[str, str] = {
    "graph": "plait.executor.graph.executor:GraphExecutor",
    "aot": "plait.executor.aot.executor:AotExecutor",
    "vm": "plait.executor.vm.executor:VMExecutor",
}
GROUP = "plait.executors"
_failed: dict[str, PlaitError] = {}
_lock = threading.RLock()


def register_executor(executor: Any) -> Executor:
    """Register ``executor`` (an :class:`Executor` instance or subclass) under its name; returns it."""
    ex = check_executor(executor)
    with _lock:
        return EXECUTORS.register(ex.name, ex)


def _load(name: str, key: str, load: Any) -> None:
    """Load and register the executor of a manifest entry or entry point ``key`` unless ``name`` is
    registered; a failure is remembered and raised again, naming the entry."""
    with _lock:
        if name in EXECUTORS:
            return
        if key in _failed:
            raise _failed[key]
        try:
            ex = check_executor(load())
        except PlaitError as exc:
            _failed[key] = PlaitError(f"cannot load executor '{key}': {exc}")
            raise _failed[key] from None
        except Exception as exc:  # a broken plugin: say which one, never a bare traceback
            _failed[key] = PlaitError(f"cannot load executor '{key}' (entry point group '{GROUP}'): "
                                      f"{type(exc).__name__}: {exc}")
            raise _failed[key] from None
        if ex.name not in EXECUTORS:
            EXECUTORS.register(ex.name, ex)


def _resolve(value: str) -> Any:
    module, _, attr = value.partition(":")
    return getattr(importlib.import_module(module), attr)


def _entry_points() -> list[metadata.EntryPoint]:
    eps = [ep for ep in metadata.entry_points(group=GROUP)
           if (getattr(ep, "dist", None) is None or (ep.dist.metadata["Name"] or "").lower() != "plait")]
    return sorted({f"{ep.name} = {ep.value}": ep for ep in eps}.values(), key=lambda ep: ep.name)


def load_executors() -> None:
    """Load every in-tree executor and every ``plait.executors`` entry point."""
    for name, value in MANIFEST.items():
        _load(name, f"{name} = {value}", lambda value=value: _resolve(value))
    for ep in _entry_points():
        _load(ep.name, f"{ep.name} = {ep.value}", ep.load)


def get_executor(name: str) -> Executor:
    """The executor called ``name`` (loading only it when it is in-tree); a RegistryError listing close
    names otherwise."""
    if name not in EXECUTORS:
        if name in MANIFEST:
            _load(name, f"{name} = {MANIFEST[name]}", lambda: _resolve(MANIFEST[name]))
        else:
            load_executors()
    return EXECUTORS.get(name)


def executors() -> list[Executor]:
    """Every executor: the in-tree ones in :data:`MANIFEST` order, then the others by name."""
    load_executors()
    names = [n for n in MANIFEST if n in EXECUTORS] + [n for n in EXECUTORS if n not in MANIFEST]
    return [EXECUTORS.get(n) for n in names]


#: the public names loaded on first use: name -> the module defining it
_LAZY: dict[str, str] = {
    "GraphArtifact": "plait.executor.graph.artifact", "GraphModule": "plait.executor.graph.module",
    "ExecutorError": "plait.executor.errors", "GraphCodegenError": "plait.executor.errors",
    "AotArtifact": "plait.executor.aot.artifact", "AotError": "plait.executor.aot.artifact",
    "AotModule": "plait.executor.aot.module", "AotRunError": "plait.executor.aot.module",
    "VirtualMachine": "plait.executor.vm.machine", "VMExecutable": "plait.executor.vm.executable",
    "VMCodegenError": "plait.executor.errors", "check_graph": "plait.executor.graph_check",
    "check_params": "plait.executor.graph_check", "MemoryPlan": "plait.memory.plan",
    "plan_memory": "plait.memory.plan",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'plait.executor' has no attribute '{name}'")


__all__ = ["AotArtifact", "AotError", "AotModule", "AotRunError", "Capabilities", "EXECUTORS", "Executor",
           "ExecutorError", "Flag", "MANIFEST", "RunOptions", "executors", "get_executor", "load_executors",
           "register_executor", "GraphArtifact", "GraphCodegenError", "GraphModule", "MemoryPlan",
           "VMCodegenError", "VMExecutable", "VirtualMachine", "check_graph", "check_params", "plan_memory"]
