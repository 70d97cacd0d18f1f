"""A transient status line on stderr naming what a long command is doing (``plait run``: building:
lower, running...), drawn with rich.

Shown only when stderr is a terminal and the command is not quiet (-q), and only once the command has
run for ``delay`` seconds (about one): a quick command prints nothing. The line is transient: it is
erased when the command ends, and hidden whenever the command writes to stdout (it comes back at the
next stage), so results are never mixed with it. The build's passes report themselves through the pass
instrument mechanism (:class:`plait.ir.transform.PassContext`): :meth:`Progress.before`.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator

_active: "Progress | None" = None


class Progress:
    """The status of one command: ``stages`` records every stage named (shown or not)."""

    def __init__(self, label: str, console: Any = None, delay: float = 1.0, enabled: bool = True):
        self.label, self.delay, self.enabled = label, delay, enabled
        self.stages: list[str] = []
        self._console = console
        self._live: Any = None
        self._spinner: Any = None
        self._stdout: Any = None
        self._wrappers: list[_HideOnWrite] = []
        self._due = delay <= 0
        self._closed = False
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None

    # ---- what the command reports ----

    def stage(self, text: str) -> None:
        """The command is now doing ``text``."""
        with self._lock:
            self.stages.append(text)
            if self._spinner is not None:
                self._spinner.update(text=self._text())
            elif self._due:
                self._show()

    def before(self, p: Any, mod: Any) -> None:
        """Pass instrument: each pass of a build is a stage."""
        self.stage(f"building: {p.name}")

    def _text(self) -> str:
        return f"plait {self.label}: {self.stages[-1]}" if self.stages else f"plait {self.label}"

    # ---- the display ----

    def __enter__(self) -> "Progress":
        if self.enabled:
            if self._due:
                self._show()
            else:
                self._timer = threading.Timer(self.delay, self._on_time)
                self._timer.daemon = True
                self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            self.hide()

    def _on_time(self) -> None:
        with self._lock:
            self._due = True
            self._show()

    def _show(self) -> None:
        if self._closed or not self.enabled or self._live is not None:
            return
        from rich.console import Console
        from rich.live import Live
        from rich.spinner import Spinner

        if self._console is None:
            self._console = Console(stderr=True)
        self._spinner = Spinner("dots", text=self._text())
        self._live = Live(self._spinner, console=self._console, transient=True, refresh_per_second=10,
                          redirect_stdout=False, redirect_stderr=True)
        self._live.start()
        self._stdout = sys.stdout
        # kept until the end: print() holds only a borrowed reference to sys.stdout while it writes, and the
        # first write replaces sys.stdout (freeing the wrapper would crash the interpreter)
        self._wrappers.append(_HideOnWrite(self._stdout, self))
        sys.stdout = self._wrappers[-1]

    def hide(self) -> None:
        """Erase the line (it comes back at the next stage)."""
        with self._lock:
            if self._live is None:
                return
            if isinstance(sys.stdout, _HideOnWrite):
                sys.stdout = self._stdout
            live, self._live, self._spinner = self._live, None, None
            live.stop()


class _HideOnWrite:
    """sys.stdout while the line is shown: the first write erases the line first."""

    def __init__(self, real: Any, progress: Progress):
        self._real, self._progress = real, progress

    def write(self, text: str) -> int:
        self._progress.hide()
        return self._real.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def wanted() -> bool:
    """Whether a command shows progress: stderr is a terminal and the command is not quiet."""
    from plait.cli.messages import QUIET, verbosity

    try:
        return verbosity() > QUIET and sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def display(label: str, enabled: bool | None = None, **kwargs: Any) -> Iterator[Progress]:
    """The progress of the command ``label`` for the duration of the block (see the module docstring);
    :func:`current` returns it meanwhile."""
    global _active
    progress = Progress(label, enabled=wanted() if enabled is None else enabled, **kwargs)
    previous, _active = _active, progress
    try:
        with progress:
            yield progress
    finally:
        _active = previous


def current() -> Progress:
    """The progress of the running command (a disabled one outside :func:`display`)."""
    return _active if _active is not None else Progress("", enabled=False)


def stage(text: str) -> None:
    """The running command is now doing ``text``."""
    if _active is not None:
        _active.stage(text)
