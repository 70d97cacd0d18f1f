"""The executors' error types (their own module so that the checkers, the code generators and the runtimes share
them without importing each other)."""

from __future__ import annotations

from plait.errors import PlaitError


class ExecutorError(PlaitError):
    """A graph cannot be run: a malformed or tampered artifact, bad inputs, a missing or mismatched
    runtime function, a failed call."""


class GraphCodegenError(PlaitError):
    """``main`` cannot be turned into a graph (not lowered, unsupported construct, symbolic shape)."""


class VMCodegenError(PlaitError):
    """The module cannot be compiled to VM bytecode (yet)."""


__all__ = ["ExecutorError", "GraphCodegenError", "VMCodegenError"]
