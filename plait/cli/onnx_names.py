"""``plait ops NAME`` for an ONNX operator name: which plait operators it imports to.

Read from the converter table (:func:`plait.frontend.onnx_registry.load_converters`): a converter
built from an operator's declared ONNX mapping (``Op.onnx``) imports to that operator; a frontend
converter declares the operators it builds (the main one first; the others for some attributes,
types or shapes, e.g. ``squeeze`` for a 1-D Conv).
"""

from __future__ import annotations


def onnx_op_types() -> list[str]:
    """The ONNX operator names plait imports, sorted."""
    from plait.frontend.onnx_registry import load_converters

    return sorted(load_converters())


def imports_to(op_type: str) -> list[str]:
    """The plait operators ONNX ``op_type`` imports to; [] when it builds none of its own (Identity,
    Constant, Reshape of a constant shape...)."""
    from plait.frontend.onnx_registry import declared_ops

    return list(declared_ops(op_type))
