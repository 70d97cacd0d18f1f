"""Typed errors. Every error plait raises on bad input is a :class:`PlaitError`.

Messages name what went wrong and where (the node, the pass or hook, the piece),
so that a user never has to read a traceback from deep inside the compiler.
"""

from __future__ import annotations


class PlaitError(Exception):
    """Base class of every error plait raises on bad input or bad use."""


class UsageError(PlaitError):
    """A command-line flag is misused or its value is wrong (``plait`` exits with 2, like argparse's own
    errors)."""


class RegistryError(PlaitError, KeyError):
    """Unknown or duplicate name in a registry."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class AttrError(PlaitError):
    """An operator attribute is missing, unknown or of the wrong type."""


class TypeInferenceError(PlaitError):
    """Type inference failed: a type mismatch or an ill-formed expression."""


class ParseError(PlaitError):
    """Relay text could not be parsed; carries the line and column."""

    def __init__(self, message: str, line: int, column: int, source_name: str = "<text>"):
        self.message = message
        self.line = line
        self.column = column
        self.source_name = source_name
        super().__init__(f"{source_name}:{line}:{column}: parse error: {message}")


class FrontendError(PlaitError):
    """A model file could not be imported (malformed, or uses unsupported features)."""


class UnsupportedError(FrontendError):
    """The model uses operators or attributes plait does not support.

    ``nodes`` lists every offending node as ``(node_name, op_type, opset, reason)``.
    """

    def __init__(self, message: str, nodes: list[tuple[str, str, int, str]] | None = None):
        self.nodes = list(nodes or [])
        super().__init__(message)


class InterpreterError(PlaitError):
    """The reference interpreter could not evaluate an expression."""
