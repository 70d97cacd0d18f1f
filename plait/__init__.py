"""plait: a deep-learning compiler whose extension point is the target.

``import plait`` is light: submodules load on first use (``plait.relay``, ``plait.frontend``...).
"""

from __future__ import annotations

import importlib
from typing import Any

from plait.errors import PlaitError
from plait.version import __version__

_LAZY = {
    "relay": "plait.relay",
    "op": "plait.op",
    "ir": "plait.ir",
    "frontend": "plait.frontend",
    "target": "plait.target",
    "executor": "plait.executor",
    "runtime": "plait.runtime",
    "tir": "plait.tir",
    "te": "plait.te",
    "schedule": "plait.schedule",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return importlib.import_module(_LAZY[name])
    if name in ("build", "build_onnx"):
        return getattr(importlib.import_module("plait.driver"), name)
    if name in ("from_onnx", "load_onnx"):
        return getattr(importlib.import_module("plait.frontend.onnx"), name)
    if name in ("from_tflite", "load_tflite"):
        return getattr(importlib.import_module("plait.frontend.tflite"), name)
    raise AttributeError(f"module 'plait' has no attribute '{name}'")


__all__ = ["PlaitError", "__version__"]
