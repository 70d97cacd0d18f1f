"""Frontends: import models into a Relay IRModule.

- :func:`from_onnx` / :func:`load_onnx` (:mod:`plait.frontend.onnx`): ONNX models;
- :func:`from_tflite` / :func:`load_tflite` (:mod:`plait.frontend.tflite`): TFLite models;
- :class:`Builder` (:mod:`plait.frontend.builder`): write a model in Python.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "from_onnx": "plait.frontend.onnx",
    "load_onnx": "plait.frontend.onnx",
    "from_tflite": "plait.frontend.tflite",
    "load_tflite": "plait.frontend.tflite",
    "Builder": "plait.frontend.builder",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'plait.frontend' has no attribute '{name}'")


__all__ = ["Builder", "from_onnx", "from_tflite", "load_onnx", "load_tflite"]
