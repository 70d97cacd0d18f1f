"""What -v adds to a build, and the build's progress stages: :func:`build_details`."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


@contextmanager
def build_details() -> Iterator[list[Any]]:
    """For the duration of a build: the pass instruments to give it (the progress display's), and with -v
    a line per compile-cache entry as it is hit or built, then (after a build that did not fail) a line
    per pass with its time, in the order the passes ended (a pass that runs others ends after them),
    and the build's total."""
    from plait.cli import progress
    from plait.cli.messages import VERBOSE, detail, verbosity
    from plait.ir.transform import Timing
    from plait.runtime import cc

    verbose = verbosity() >= VERBOSE
    timing = Timing()
    instruments: list[Any] = [progress.current(), *([timing] if verbose else [])]

    def tell(name: str, what: str, path: Path) -> None:
        detail(f"compile cache: {'hit' if what == 'hit' else 'built'} {name} ({path})")

    if verbose:
        cc.LISTENERS.append(tell)
    start = time.perf_counter()
    try:
        yield instruments
    finally:
        if verbose:
            cc.LISTENERS.remove(tell)
    if verbose:
        for name, seconds in timing.times:
            detail(f"stage {name}: {format_seconds(seconds)}")
        detail(f"build total: {format_seconds(time.perf_counter() - start)}")


def format_seconds(seconds: float) -> str:
    """``0.4 ms``, ``12.3 ms``, ``1.25 s``."""
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
