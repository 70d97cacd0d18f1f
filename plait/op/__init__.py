"""The standard operator library and the operator registry.

Each definition file (one per operator family) defines its operators with a
:class:`plait.op._common.Family`: schema, type relation, numpy reference, cost, fusion kind, TE
compute and ONNX mapping (see docs/operators.md). :data:`FAMILIES` is the manifest of those files;
the registry loads them all on the first lookup (:func:`get_op`, :func:`list_ops`). Nothing
registers an operator at import time.
"""

from __future__ import annotations

import importlib

from plait.ir.op import Op
from plait.registry import Registry

# the manifest: every definition file, in registration order
FAMILIES: tuple[str, ...] = (
    "plait.op.tensor",
    "plait.op.unary",
    "plait.op.reduce",
    "plait.op.transform",
    "plait.op.join",
    "plait.op.slicing",
    "plait.op.gather",
    "plait.op.data_dependent",
    "plait.op.image",
    "plait.op.space",
    "plait.op.nn.conv",
    "plait.op.nn.pool",
    "plait.op.nn.norm",
    "plait.op.qnn",
    "plait.op.qnn_nn",
    "plait.op.qnn_elem",
    "plait.op.qnn_fixed",
    "plait.op.qnn_norm",
    "plait.op.qnn_log_softmax",
    "plait.op.qnn_softmax16",
)

OPS: Registry[Op] = Registry("operator")
_loaded = False


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in FAMILIES:
        for op in importlib.import_module(module).defop.ops:
            OPS.register(op.name, op)


def get_op(name: str) -> Op:
    """Look up an operator by name (raises :class:`plait.errors.RegistryError` naming close matches)."""
    _load()
    return OPS.get(name)


def list_ops() -> list[str]:
    """Every operator name, sorted."""
    _load()
    return list(OPS)


def all_ops() -> list[Op]:
    """Every operator, sorted by name."""
    _load()
    return [op for _, op in OPS.items()]


__all__ = ["FAMILIES", "OPS", "all_ops", "get_op", "list_ops"]
