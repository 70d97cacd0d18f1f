"""What one ONNX import may spend, so that a hostile model cannot exhaust memory or time.

- **Folded constants**: import-time folding (a node whose inputs are all constants, a
  ``ConstantOfShape``, a mask a converter builds) materializes arrays; together they may take at
  most the memory limit (:mod:`plait.limits`; ``from_onnx(..., memory_limit=...)``). A result that
  does not fit is not folded: it stays a Relay call, computed at run time (where the executor's own
  limit applies). Arrays a converter cannot do without (an index table) are checked with
  :func:`plait.limits.check_bytes` and refused with a :class:`~plait.limits.MemoryLimitError`.
- **Work**: loops, recurrences and function bodies are unrolled at import; every node converted
  and every call built counts, and an import stops at :data:`MAX_WORK` with a
  :class:`~plait.errors.FrontendError` instead of running for hours.
"""

from __future__ import annotations

import math
from typing import Any

from plait.errors import FrontendError
from plait.ir.types import DTYPES, TensorType, TupleType
from plait.limits import check_bytes, resolve

#: Nodes converted plus calls built in one import (about a minute of import time).
MAX_WORK = 1_000_000


def type_bytes(t: Any) -> int | None:
    """Bytes a value of type ``t`` holds (tuples summed); None when a dim is symbolic."""
    if isinstance(t, TupleType):
        parts = [type_bytes(f) for f in t.fields]
        return None if any(p is None for p in parts) else sum(parts)  # type: ignore[misc]
    if isinstance(t, TensorType):
        if not all(isinstance(d, int) for d in t.shape):
            return None
        return math.prod(t.shape) * DTYPES[t.dtype].itemsize  # type: ignore[arg-type]
    return None


class ImportBudget:
    """The memory limit, the bytes left for folded constants, and the work done so far."""

    def __init__(self, memory_limit: int | str | None = None, max_work: int | None = None):
        self.memory_limit = memory_limit
        self.fold_left = resolve(memory_limit)
        self.max_work = MAX_WORK if max_work is None else max_work
        self.work = 0

    def fold(self, nbytes: int | None) -> bool:
        """May a constant of ``nbytes`` be materialized? (If so, it is counted.)"""
        if nbytes is None or nbytes > self.fold_left:
            return False
        self.fold_left -= nbytes
        return True

    def check(self, nbytes: int, what: str) -> None:
        """Refuse (MemoryLimitError) an allocation a converter cannot do without."""
        check_bytes(nbytes, what, self.memory_limit)

    def tick(self, n: int = 1) -> None:
        self.work += n
        if self.work > self.max_work:
            raise FrontendError(f"the model expands into more than {self.max_work} nodes and calls (loops, "
                                "recurrences and function bodies are unrolled at import)")
