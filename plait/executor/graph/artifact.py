"""The graph artifact: a JSON graph, its params and the runtime module tree, with export and load.

    art = plait.build(mod, target="c")            # a GraphArtifact
    art.export("out/")   ->  out/graph.json, params.npz, lib.so [, lib_1.so, ...], manifest.json
    GraphArtifact.load("out/")                    # checks everything before any library is loaded

The files and their checks are :mod:`plait.executor.files`' (shared with the VM's artifact).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
import numpy as np
from plait.executor.errors import ExecutorError
from plait.executor.graph_check import _short, check_graph, check_params
from plait.executor.graph.module import GraphModule
from plait.executor.graph_codegen import dumps, graph_plan
from plait.executor.manifest import GRAPH_FILE, MANIFEST_FORMAT, MANIFEST_VERSION
from plait.memory.plan import memory_report
from plait.relay.module import IRModule
from plait.pipeline.stages import Built, Lowered, ProgramPlan
from plait.runtime.module import Module
from plait.executor.files import BuildRecord, export_files, load_files


@dataclass
class GraphArtifact(BuildRecord):
    """What ``plait.build(..., executor="graph")`` returns: the graph, its params and the library.

    ``manifest``: the signature of every function the graph calls (``{"functions": ...}``, made by
    codegen; a loaded artifact has the whole manifest read from ``manifest.json``). ``ir`` is the
    lowered module (not exported); ``target`` the canonical target string; the build's record
    (:class:`BuildRecord`: timings, placement, piece modules; set by the driver, not exported).
    """

    graph_json: str
    params: dict[str, np.ndarray]
    lib: Module
    target: str = ""
    ir: IRModule | None = field(default=None, repr=False)
    manifest: dict[str, Any] | None = field(default=None, repr=False)
    executor = "graph"

    @classmethod
    def from_module(cls, mod: IRModule, lib: Module, target: str = "") -> "GraphArtifact":
        """Graph codegen of a lowered ``mod`` whose PrimFuncs ``lib`` implements (its memory planned here)."""
        return cls.from_plan(graph_plan(mod), mod, lib, target)

    @classmethod
    def from_plan(cls, plan: ProgramPlan, mod: IRModule, lib: Module, target: str = "") -> "GraphArtifact":
        """The artifact of a planned graph (:meth:`Executor.plan <plait.executor.base.Executor.plan>`)."""
        graph = dict(plan.graph)
        graph["target"] = target
        manifest = {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, "functions": dict(plan.functions)}
        return cls(dumps(graph), dict(plan.params), lib, target, mod, manifest=manifest)

    @property
    def graph(self) -> dict[str, Any]:
        return json.loads(self.graph_json)

    @property
    def functions(self) -> dict[str, Any]:
        """The signature of every function the graph calls (role, dtype, shape, bytes per argument)."""
        if not self.manifest or not isinstance(self.manifest.get("functions"), dict):
            raise ExecutorError("the artifact has no manifest of its functions (make it with plait.build, "
                                "GraphArtifact.from_module or GraphArtifact.load)")
        return self.manifest["functions"]

    @property
    def memory(self) -> dict[str, int]:
        """Bytes by kind of buffer (see :mod:`plait.executor.graph_codegen`)."""
        return dict(self.graph["memory"])

    def check(self) -> dict[str, Any]:
        """Check the graph against itself and the function signatures, and the params against the
        graph (see :mod:`plait.executor.graph_check`); returns the parsed graph."""
        from plait.executor.graph_check import check_functions

        functions = check_functions(self.functions, "the artifact's manifest")
        try:
            graph = json.loads(self.graph_json)
        except (ValueError, TypeError, RecursionError) as exc:
            raise ExecutorError(f"graph: not JSON ({_short(str(exc), 120)})") from None
        check_graph(graph, "graph", functions)
        check_params(self.params, graph)
        return graph

    def module(self) -> Any:
        """A :class:`~plait.executor.graph.module.GraphModule` running this artifact."""
        return GraphModule(self)

    def __repr__(self) -> str:
        calls = sum(1 for n in self.graph["nodes"] if n["op"] in ("call", "copy"))
        return f"GraphArtifact(target={self.target!r}, {calls} calls, {len(self.params)} params, lib={self.lib!r})"

    def memory_report(self, top: int = 10) -> str:
        """The memory plan as text: bytes per storage kind, the peak, the biggest workspaces."""
        return memory_report(self.graph, top)

    def export(self, path: str | Path) -> Path:
        """Write ``graph.json``, ``params.npz``, the library and ``manifest.json`` into the directory ``path``.

        The library is ``lib.so`` (a compiled module), or ``lib.c`` for a C source module that was
        not compiled for the host (e.g. a Cortex-M build, with its object file ``lib.o``). Each module
        it imports (one per piece) is written too (``lib_1.so``, ``lib_2.c``, ``lib_3.onnx``, ``lib.ll``
        ...); a module without functions of its own (a container host module) has no file. Python
        modules (:class:`~plait.runtime.PyModule`) cannot be exported. ``manifest.json``
        (:mod:`plait.executor.manifest`) is written last: it lists every file with its size and sha256,
        the module tree and every function's arguments.
        """
        self.check()
        return export_files(Path(path), GRAPH_FILE, self.graph_json, self.params, self.lib, self.functions)

    @classmethod
    def load(cls, path: str | Path, *, memory_limit: int | str | None = None) -> "GraphArtifact":
        """Read an artifact written by :meth:`export`, checking everything before any library is loaded:
        the manifest, graph.json (against itself and the function signatures), params.npz (each array's
        header before its data; the byte total against ``memory_limit``, see :mod:`plait.limits`), and
        the size and sha256 of every file. Any failure is an :class:`ExecutorError` naming the file."""
        def graph_of(obj: Any, where: str, functions: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
            graph = check_graph(obj, where, functions)
            return graph, graph

        gdata, graph, params, lib, manifest = load_files(path, "graph", GRAPH_FILE, graph_of, memory_limit)
        return cls(gdata.decode("utf-8"), params, lib, graph.get("target", ""), manifest=manifest)


def graph_executor_codegen(lowered: Lowered, built: Built, composite: Any) -> GraphArtifact:
    """The ``graph`` executor's codegen (:class:`~plait.executor.graph.executor.GraphExecutor`): the
    build's plan (``lowered.plan``; planned here when there is none) with the host module ``built.lib``."""
    plan = lowered.plan if lowered.plan is not None else graph_plan(lowered.mod)
    return GraphArtifact.from_plan(plan, lowered.mod, built.lib, str(composite))


__all__ = ["GraphArtifact", "graph_executor_codegen"]
