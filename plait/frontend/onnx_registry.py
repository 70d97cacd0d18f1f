"""The converter table: ONNX ``op_type`` -> function building plait calls for one node.

A converter is registered with the attributes it understands; a node carrying any other
attribute is reported as unsupported without calling the converter. Converters dispatch on
``cx.version`` (the version of the ONNX operator schema in effect for the model's opset).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from plait.frontend.onnx_node import NodeContext

ConvertFn = Callable[[NodeContext], object]


@dataclass(frozen=True)
class Converter:
    op_type: str
    fn: ConvertFn
    attrs: frozenset[str]
    min_version: int = 1


CONVERTERS: dict[str, Converter] = {}


def converter(*op_types: str, attrs: Iterable[str] = (), min_version: int = 1) -> Callable[[ConvertFn], ConvertFn]:
    """Register ``fn`` for ``op_types``; ``attrs`` are the ONNX attributes it handles."""

    def deco(fn: ConvertFn) -> ConvertFn:
        for op_type in op_types:
            assert op_type not in CONVERTERS, op_type
            CONVERTERS[op_type] = Converter(op_type, fn, frozenset(attrs), min_version)
        return fn

    return deco


def load_converters() -> dict[str, Converter]:
    from plait.frontend import (  # noqa: F401  (register)
        onnx_ops, onnx_ops_image, onnx_ops_index, onnx_ops_loop, onnx_ops_misc, onnx_ops_nn, onnx_ops_rnn, onnx_ops_shape,
    )

    return CONVERTERS
