"""The graph executor: a JSON graph of calls, its params and the runtime module tree.

``executor`` (:class:`GraphExecutor`, the registered class), ``artifact`` (:class:`GraphArtifact`:
codegen from the lowered module, export, load), ``module`` (:class:`GraphModule`, the runtime that
runs it in this process). The graph form itself (:mod:`plait.executor.graph_codegen`) and the exported
files (:mod:`plait.executor.files`) are shared with the other executors.
"""
