"""Small models built and exported for the artifact tests (tamper cases, threads)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import plait
from plait.executor import GraphArtifact
from plait.executor.graph_codegen import dumps
from plait.frontend.onnx import from_onnx
from plait.relay import run
from plait.testing import onnx_models

SIZES = (8, 16, 16, 4)
"""mlp 8-16-16-4: x -> p0..p5; calls 3 (relu), 6 (relu_1), 9 (dense_add), 10 (softmax, with a workspace)."""


def mlp(sizes=SIZES):
    return from_onnx(onnx_models.mlp(sizes=sizes))


def build(cache: Path, sizes=SIZES, target: str = "c", **kwargs) -> GraphArtifact:
    return plait.build(mlp(sizes), target, config={"cc.cache_dir": str(cache)}, **kwargs)


def reference(x: np.ndarray, sizes=SIZES) -> np.ndarray:
    """The numpy reference interpreter's output for input ``x``."""
    return np.asarray(run(mlp(sizes), {"x": x}))


def inputs(n: int, sizes=SIZES, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, sizes[0])).astype(np.float32) for _ in range(n)]


def edit_graph(d: Path, change) -> None:
    """Apply ``change(graph_dict)`` to ``d/graph.json`` (written back the way export writes it)."""
    g = json.loads((d / "graph.json").read_text())
    change(g)
    (d / "graph.json").write_text(dumps(g))


def edit_manifest(d: Path, change) -> None:
    m = json.loads((d / "manifest.json").read_text())
    change(m)
    (d / "manifest.json").write_text(json.dumps(m))


def load_error(d: Path, **kwargs) -> str:
    """The message of the ExecutorError that loading the artifact directory ``d`` raises."""
    import pytest

    from plait.executor.errors import ExecutorError

    with pytest.raises(ExecutorError) as e:
        GraphArtifact.load(d, **kwargs)
    return str(e.value)
