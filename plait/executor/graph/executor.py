"""The ``graph`` executor: a JSON graph, its parameters and the runtime module; run by
:class:`~plait.executor.graph.module.GraphModule` in this process, exported as ``graph.json`` + ``params.npz`` +
the library (docs/executors.md). Light to import: the implementation loads when a method runs."""

from __future__ import annotations

from typing import Any

from plait.executor.base import Capabilities, Executor, RunOptions


class GraphExecutor(Executor):
    name = "graph"
    summary = "JSON graph + params + library, run in process (the default)"
    capabilities = Capabilities(runs_in_process=True, exports=True, profiles=True)
    marker = "graph.json"

    def codegen(self, lowered: Any, built: Any, composite: Any, ctx: Any) -> Any:
        from plait.executor.graph.artifact import graph_executor_codegen

        return graph_executor_codegen(lowered, built, composite)

    def load(self, path: str, memory_limit: int | None = None) -> Any:
        from plait.executor.graph.artifact import GraphArtifact

        return GraphArtifact.load(path, memory_limit=memory_limit)

    def runner(self, art: Any, options: RunOptions) -> Any:
        from plait.executor.graph.module import GraphModule

        options.progress("running")
        return GraphModule(art, memory_limit=options.memory_limit)

    def input_types(self, art: Any) -> dict[str, Any]:
        from plait.ir.types import TensorType

        nodes, entries = art.graph["nodes"], art.graph["entries"]
        out = {}
        for i in art.graph["inputs"]:
            e = entries[nodes[i]["outputs"][0]]
            out[nodes[i]["name"]] = TensorType(tuple(e["shape"]), e["dtype"])
        return out


__all__ = ["GraphExecutor"]
