"""Errors raised by the TIR layer. All are :class:`plait.errors.PlaitError` subclasses."""

from __future__ import annotations

from plait.errors import PlaitError


class TIRError(PlaitError):
    """A TIR node was built or used incorrectly (bad dtype, bad operand, wrong argument)."""


class TIRVerifyError(TIRError):
    """:func:`plait.tir.verify` found a problem; ``problems`` lists every problem found, in order."""

    def __init__(self, message: str, problems: list[str] | None = None):
        self.problems = list(problems or [message])
        super().__init__(message)


class TIREvalError(TIRError):
    """The TIR interpreter hit a run-time error (out-of-bounds access, division by zero, ...)."""


class TIRCheckError(TIREvalError):
    """A run-time check (``AssertStmt``) failed in the TIR interpreter; ``status`` is its code."""

    def __init__(self, message: str, status: int):
        self.status = status
        super().__init__(message)


class KernelError(TIRError):
    """A kernel (:mod:`plait.tir.kernels`) is unknown, called with arguments that do not fit its
    parameters, or has no implementation in the backend that generates the code calling it."""
