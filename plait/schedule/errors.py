"""Errors of the schedule layer."""

from __future__ import annotations

from plait.tir.errors import TIRError


class ScheduleError(TIRError):
    """A schedule primitive cannot be applied: unknown loop, wrong loop structure, or the transformation
    would change what the function computes. The message names the primitive and the loop or buffer."""
