"""The graph executor's error type (its own module so that the checkers and the runtime share it)."""

from __future__ import annotations

from plait.errors import PlaitError


class ExecutorError(PlaitError):
    """A graph cannot be run: a malformed or tampered artifact, bad inputs, a missing or mismatched
    runtime function, a failed call."""


__all__ = ["ExecutorError"]
