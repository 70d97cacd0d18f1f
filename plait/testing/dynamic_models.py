"""Models with symbolic dimensions (run them with the VM executor: ``plait.build(..., executor="vm")``).

:func:`with_symbolic_dims` turns an ONNX model with static graph inputs (the bench models of
:mod:`plait.testing.onnx_models`, their int8 versions from :mod:`plait.testing.quantized`) into one whose
graph inputs and outputs have symbolic dims at the given positions, as an exporter with dynamic axes writes
them: ``with_symbolic_dims(model, {0: "N"})`` makes the batch ``N``; ``{2: "H", 3: "W"}`` the spatial
dims of an NCHW model. Its intermediate shapes (``value_info``) are dropped. A symbolic batch also rewrites
the ``Reshape`` shape constants that hard-code it, as an exporter with a dynamic batch would have written
them: the batch leads every activation of the bench models, so it is folded into a target's leading dim,
which becomes ``-1`` (or ``0``, copying the batch, where the target already has a ``-1``).
:func:`with_static_dims` gives the symbolic dims values again (the same model at one shape, for the
Graph executor). ``DYNAMIC_MODELS`` maps the bench models' names to their symbolic-batch versions.
"""

from __future__ import annotations

from typing import Callable, Mapping

import onnx
from onnx import numpy_helper

from plait.errors import PlaitError
from plait.testing.onnx_models import MODELS

BATCH = "N"


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    return onnx.ModelProto.FromString(model.SerializeToString())


def _graph_values(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    inits = {t.name for t in graph.initializer}
    return [*(i for i in graph.input if i.name not in inits), *graph.output]


def _batch_reshapes(graph: onnx.GraphProto, batch: int) -> None:
    """Reshape shape constants (initializers or Constant nodes) with the static batch folded into their
    leading dim: that dim becomes -1, or 0 (copy the data's batch) where the target has a -1 already."""
    consts: dict[str, onnx.TensorProto] = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            consts[node.output[0]] = node.attribute[0].t
    for node in graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2 or node.input[1] not in consts:
            continue
        t = consts[node.input[1]]
        shape = numpy_helper.to_array(t)
        if shape.ndim != 1 or shape.size == 0 or shape[0] in (0, -1) or shape[0] % batch:
            continue
        fixed = shape.copy()
        if -1 in shape:
            if shape[0] != batch:
                raise PlaitError(f"with_symbolic_dims: Reshape '{node.name}' has the target {shape.tolist()}: its "
                                 f"leading dim is not the batch {batch} and another dim is -1")
            fixed[0] = 0
        else:
            fixed[0] = -1
        t.CopyFrom(numpy_helper.from_array(fixed, t.name))


def with_symbolic_dims(model: onnx.ModelProto, dims: Mapping[int, str]) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs and outputs have the symbolic dim ``dims[k]`` at position ``k``
    (each that has a dim there: a classifier's (1, 10) output keeps its classes when the spatial dims 2 and
    3 become symbolic); a symbolic dim 0 (the batch) also rewrites the Reshape constants that hard-code it.
    Every input must have a static dim at every position of ``dims``, all inputs the same."""
    out = _copy(model)
    seen: dict[int, int] = {}
    inputs = {i.name for i in out.graph.input}
    for v in _graph_values(out.graph):
        shape = v.type.tensor_type.shape.dim
        is_input = v.name in inputs
        for k, name in dims.items():
            if k >= len(shape):
                if is_input:
                    raise PlaitError(f"with_symbolic_dims: input '{v.name}' has rank {len(shape)}: no dim {k} to "
                                     f"make '{name}'")
                continue
            d = shape[k]
            if not d.HasField("dim_value"):
                raise PlaitError(f"with_symbolic_dims: '{v.name}' dim {k} is not static")
            if is_input and seen.setdefault(k, d.dim_value) != d.dim_value:
                raise PlaitError(f"with_symbolic_dims: input '{v.name}' has {d.dim_value} in dim {k}, another input "
                                 f"{seen[k]}")
            d.ClearField("dim_value")
            d.dim_param = name
    if 0 in dims and 0 in seen:
        _batch_reshapes(out.graph, seen[0])
    del out.graph.value_info[:]  # intermediate shapes with the old sizes
    return out


def with_static_dims(model: onnx.ModelProto, values: Mapping[str, int]) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs' and outputs' symbolic dims named in ``values`` have those
    values (the model of :func:`with_symbolic_dims` at one shape)."""
    out = _copy(model)
    for v in _graph_values(out.graph):
        for d in v.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in values:
                d.dim_value = int(values[d.dim_param])  # clears dim_param (a oneof)
    return out


def with_symbolic_batch(model: onnx.ModelProto, name: str = BATCH) -> onnx.ModelProto:
    """:func:`with_symbolic_dims` of the batch: dim 0 of every graph input and output is ``name``."""
    return with_symbolic_dims(model, {0: name})


DYNAMIC_MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    k: (lambda f=f: with_symbolic_batch(f())) for k, f in MODELS.items()}


__all__ = ["BATCH", "DYNAMIC_MODELS", "with_static_dims", "with_symbolic_batch", "with_symbolic_dims"]
