"""Backends: default lowering (:mod:`plait.backend.lower`) and one module per in-tree target kind
(``c.py``, ...). Importing this package imports the kind modules, which attach their hooks and build
functions to their kinds (the driver relies on it)."""

from __future__ import annotations

import importlib

_KIND_MODULES = ("plait.backend.c", "plait.backend.onnxruntime", "plait.backend.blas", "plait.backend.llvm")

for _name in _KIND_MODULES:
    try:
        importlib.import_module(_name)
    except ModuleNotFoundError as _exc:
        if _exc.name != _name:  # the module exists but one of its imports is missing: a real error
            raise
