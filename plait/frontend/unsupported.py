"""What a converter raises when it cannot import an operator (every frontend's converters)."""

from __future__ import annotations


class Unsupported(Exception):
    """A converter cannot import this node or operator; ``reason`` is shown to the user. The importer
    collects them and reports them all at once (an :class:`~plait.errors.UnsupportedError`)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)
