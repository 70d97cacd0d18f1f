"""Models with a symbolic batch dimension (run them with the VM executor: ``plait.build(..., executor="vm")``).

:func:`with_symbolic_batch` turns an ONNX model whose inputs have batch 1 (the bench models of
:mod:`plait.testing.onnx_models`) into one whose graph inputs and outputs have the symbolic batch
dimension ``"N"`` (dim 0); ``Reshape`` shape constants that hard-code the batch (a leading 1 where the
input's dim 0 is the batch) become 0 (copy the input's dim). ``DYNAMIC_MODELS`` maps the bench models'
names to their symbolic versions.
"""

from __future__ import annotations

from typing import Callable

import onnx

from plait.errors import PlaitError
from plait.testing.onnx_models import MODELS

BATCH = "N"


def _batch_reshapes(graph: onnx.GraphProto) -> None:
    """Reshape shape initializers starting with the batch (1) -> 0 (copy dim 0 of the data)."""
    inits = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2 or node.input[1] not in inits:
            continue
        t = inits[node.input[1]]
        shape = onnx.numpy_helper.to_array(t)
        if shape.ndim == 1 and shape.size > 1 and shape[0] == 1:
            fixed = shape.copy()
            fixed[0] = 0
            t.CopyFrom(onnx.numpy_helper.from_array(fixed, t.name))


def with_symbolic_batch(model: onnx.ModelProto, name: str = BATCH) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs and outputs have the symbolic dim ``name`` as dim 0 (each
    must have batch 1 there) and whose batch-1 Reshape constants copy the batch instead."""
    out = onnx.ModelProto.FromString(model.SerializeToString())
    inits = {t.name for t in out.graph.initializer}
    for v in [*(i for i in out.graph.input if i.name not in inits), *out.graph.output]:
        dims = v.type.tensor_type.shape.dim
        if not dims or (dims[0].HasField("dim_value") and dims[0].dim_value != 1):
            raise PlaitError(f"with_symbolic_batch: '{v.name}' has no batch dimension 1 to make symbolic")
        dims[0].ClearField("dim_value")
        dims[0].dim_param = name
    _batch_reshapes(out.graph)
    del out.graph.value_info[:]  # intermediate shapes with the old batch
    return out


DYNAMIC_MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    k: (lambda f=f: with_symbolic_batch(f())) for k, f in MODELS.items()}


__all__ = ["BATCH", "DYNAMIC_MODELS", "with_symbolic_batch"]
