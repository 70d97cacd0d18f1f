"""The status codes a compiled function returns, and what each means.

Every function plait generates returns an ``int32``: 0 when it ran to the end, otherwise the code of
the run-time check that failed (a TIR ``AssertStmt``: the function stops at the first failed check;
what it had written to its outputs by then is unspecified). The codes are the same in every backend
and every executor, and on a microcontroller (where there is no Python to print the message, the
code is all the caller gets), so they are fixed here, once. A function built by a target's own
code generator may return other non-zero codes: executors report those as "returned error status N".
"""

from __future__ import annotations

INDEX_OUT_OF_RANGE = 1
SHAPE_MISMATCH = 2

MESSAGES: dict[int, str] = {
    INDEX_OUT_OF_RANGE: "an index is out of range (Gather, GatherElements and GatherND indices must be in "
                        "[-n, n - 1] for an axis of size n)",
    SHAPE_MISMATCH: "the inputs' run-time shapes do not fit the operator (dims that must be equal differ, a "
                    "symbolic dim is not broadcast, an axis is too small for its window or padding, or a reshape "
                    "changes the element count)",
}


def describe(status: int) -> str:
    """What a function that returned ``status`` did, to follow "function 'f'" in an error message:
    "stopped: <the check's message> (status N)", or "returned error status N" for a code not here."""
    msg = MESSAGES.get(int(status))
    return f"returned error status {int(status)}" if msg is None else f"stopped: {msg} (status {int(status)})"


__all__ = ["INDEX_OUT_OF_RANGE", "MESSAGES", "SHAPE_MISMATCH", "describe"]
