"""Backends: default lowering (:mod:`plait.lowering.lower`) and one module per in-tree target kind
(``c.py``, ...). Importing this package imports the kind modules, which attach their hooks and build
functions to their kinds (the driver relies on it)."""

from __future__ import annotations

import importlib

_KIND_MODULES = ("plait.backends.c.backend", "plait.backends.onnxruntime.backend", "plait.backends.blas.backend", "plait.backends.llvm.backend")

for _name in _KIND_MODULES:
    try:
        importlib.import_module(_name)
    except ModuleNotFoundError as _exc:
        if _exc.name != _name:  # the module exists but one of its imports is missing: a real error
            raise
