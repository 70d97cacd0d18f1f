"""Base classes shared by the IRs: every function kind an IRModule may hold derives from BaseFunc."""

from __future__ import annotations


class BaseFunc:
    """A function that can live in an IRModule: a Relay ``Function`` or a TIR ``PrimFunc``."""
