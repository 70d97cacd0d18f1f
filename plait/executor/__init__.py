"""Executors: what runs a lowered module. ``graph`` (JSON graph + params + library), ``aot`` (plain C
with a fixed memory map: ``aot``, ``aot_c``, ``aot_run``) and ``vm`` (bytecode interpreted in Python:
``vm_exec``, ``vm_codegen``, ``vm_shapes``, ``vm``; control flow, run-time allocation).

Modules: ``graph_codegen`` (lowered main -> graph + function signatures),
``artifact`` (GraphArtifact: export, load), ``manifest`` / ``graph_check`` / ``params_file`` (the
checks an artifact passes before anything runs), ``graph`` (GraphModule, the runtime).

Each executor registers its codegen in :data:`EXECUTORS`: ``codegen(mod, lib, target, config) -> artifact``,
where ``mod`` is the lowered IRModule (``main`` calls only PrimFuncs) and ``lib`` the runtime module
implementing them, ``config`` the build's PassContext config. ``plait.build(..., executor=NAME)`` looks
the name up here.
"""

from __future__ import annotations

from typing import Any, Callable

from plait.registry import Registry

EXECUTORS: Registry[Callable[..., Any]] = Registry("executor")


def _graph(mod: Any, lib: Any, target: str = "", config: Any = None) -> Any:
    from plait.executor.graph import graph_executor_codegen

    return graph_executor_codegen(mod, lib, target)


def _aot(mod: Any, lib: Any, target: str = "", config: Any = None) -> Any:
    from plait.executor.aot import aot_executor_codegen

    return aot_executor_codegen(mod, lib, target or "c", config)


def _vm(mod: Any, lib: Any, target: str = "", config: Any = None) -> Any:
    from plait.executor.vm_codegen import vm_codegen

    return vm_codegen(mod, lib, target)


EXECUTORS.register("graph", _graph)
EXECUTORS.register("aot", _aot)
EXECUTORS.register("vm", _vm)

SYMBOLIC_SHAPE_EXECUTORS = frozenset({"vm"})
"""Executors that take a module with symbolic input dims (lowered with symbolic extents: the shapes of a
call are known at run time, plait.lowering.shape_func); the others need static shapes."""


def __getattr__(name: str) -> Any:
    if name in ("GraphArtifact", "GraphModule", "ExecutorError", "GraphCodegenError"):
        from plait.executor import graph

        return getattr(graph, name)
    if name in ("AotArtifact", "AotError"):
        from plait.executor import aot

        return getattr(aot, name)
    if name in ("AotModule", "AotRunError"):
        from plait.executor import aot_run

        return getattr(aot_run, name)
    if name == "VirtualMachine":
        from plait.executor import vm

        return vm.VirtualMachine
    if name in ("VMExecutable", "VMCodegenError"):
        from plait.executor import vm_exec

        return getattr(vm_exec, name)
    if name in ("check_graph", "check_params"):
        from plait.executor import graph_check

        return getattr(graph_check, name)
    if name in ("MemoryPlan", "plan_memory"):
        from plait.memory import plan

        return getattr(plan, name)
    raise AttributeError(f"module 'plait.executor' has no attribute '{name}'")


__all__ = ["AotArtifact", "AotError", "AotModule", "AotRunError", "EXECUTORS", "SYMBOLIC_SHAPE_EXECUTORS", "ExecutorError", "GraphArtifact", "GraphCodegenError", "GraphModule", "MemoryPlan",
           "VMCodegenError", "VMExecutable", "VirtualMachine", "check_graph", "check_params", "plan_memory"]
