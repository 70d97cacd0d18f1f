"""Small cases declared by per-operator test modules.

An operator added with a test module of its own (``tests/op/test_<op>.py``) declares its small
cases there as ``OP_CASES = {"nn.shrink": [([input arrays], {attrs}), ...]}``; the TE compute
coverage test (tests/te, TIR interpreter and C) and the ONNX export round trip (tests/frontend) run
them together with the cases of their shared tables, so adding an operator touches its definition
file and its own test module only.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


def declared_cases() -> dict[str, list[tuple[list[np.ndarray], dict]]]:
    """operator name -> its ``(inputs, attrs)`` cases, from every ``tests/op/test_*.py`` declaring
    ``OP_CASES`` (in file order)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))  # the modules import their helpers (ort_util) by name
    out: dict[str, list[tuple[list[np.ndarray], dict]]] = {}
    for path in sorted(HERE.glob("test_*.py")):
        if "\nOP_CASES" not in path.read_text():
            continue
        spec = importlib.util.spec_from_file_location(f"_declared_cases_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for op, cases in module.OP_CASES.items():
            out.setdefault(op, []).extend(cases)
    return out
