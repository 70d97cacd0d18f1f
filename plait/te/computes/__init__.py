"""TE computes of the standard operators, one module per operator family (see docs/lowering.md).

Importing this package registers a compute for every operator of :mod:`plait.op`; the coverage
test (tests/te/test_computes_coverage.py) checks that none is missing.
"""

from __future__ import annotations

from plait.te.computes import gather, image, nn, norm, reduce, tensor, transform  # noqa: F401

__all__: list[str] = []
