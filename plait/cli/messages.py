"""How the command prints errors and warnings: one line each, shortened, control characters escaped."""

from __future__ import annotations

import os
import sys

#: Messages longer than this (about a screen) are shortened in the middle.
MAX_MESSAGE = 2000


def shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` with control characters escaped (a model's names could hold terminal escapes) and, when
    longer than ``limit``, its middle replaced by a note of how much was left out: the start (two
    thirds) and the end are kept, and the result is ``limit`` characters long, the note included."""
    text = "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in text)
    if len(text) <= limit:
        return text
    keep = limit
    for _ in range(3):  # the note's length depends on the count it gives, which depends on what is kept
        keep = max(limit - len(f" ...[{len(text) - keep} characters left out]... "), 2)
    start = keep * 2 // 3
    return f"{text[:start]} ...[{len(text) - keep} characters left out]... {text[len(text) - (keep - start):]}"


def one_line(message: str) -> str:
    """A message of several lines (a list of unsupported nodes, a compiler's first errors) as one line:
    a line ending with ':' is followed by a space, other lines by '; '."""
    lines = [ln.strip() for ln in message.split("\n") if ln.strip()]
    out = lines[0] if lines else ""
    for ln in lines[1:]:
        out += (" " if out.endswith(":") else "; ") + ln
    return out


def error(message: str) -> None:
    try:
        print(f"plait: error: {shorten(one_line(message), MAX_MESSAGE - len('plait: error: '))}", file=sys.stderr)
    except OSError:  # stderr is gone too: nothing left to tell
        pass


# ---- verbosity ------------------------------------------------------------------------------------
#: QUIET (-q): no notes, warnings or informational lines, only results and errors; NORMAL; VERBOSE (-v):
#: details too (stage timings, compile-cache hits). Set by ``main`` from the global flags.
QUIET, NORMAL, VERBOSE = -1, 0, 1
_level = NORMAL


def set_verbosity(level: int) -> None:
    """Set the verbosity for the rest of the command (``main`` does it from -q/-v)."""
    global _level
    _level = max(QUIET, min(VERBOSE, level))


def verbosity() -> int:
    """The current verbosity: QUIET, NORMAL or VERBOSE."""
    return _level


def _say(prefix: str, message: str) -> None:
    try:
        print(f"{prefix}{shorten(one_line(message), MAX_MESSAGE - len(prefix))}", file=sys.stderr)
    except OSError:
        pass


def note(message: str) -> None:
    """Say what the command did on the user's behalf (random inputs, a simulated piece): one line
    ``plait: note: ...`` on stderr, unless quiet (-q)."""
    if _level > QUIET:
        _say("plait: note: ", message)


def info(message: str) -> None:
    """An informational line that is not the command's result (e.g. a placement summary): one line
    ``plait: ...`` on stderr, unless quiet (-q)."""
    if _level > QUIET:
        _say("plait: ", message)


def say(text: str, file=None) -> None:
    """A line on stdout (or ``file``) that confirms rather than answers (``wrote ...``, a memory summary):
    printed unless quiet (-q)."""
    if _level > QUIET:
        print(text, file=file)


def detail(message: str) -> None:
    """A detail only wanted with -v (a stage's time, a compile-cache hit): one line ``plait: ...`` on
    stderr."""
    if _level >= VERBOSE:
        _say("plait: ", message)


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (e.g. an unusable compile cache) as one line on stderr, not Python's two; none when
    quiet (-q)."""
    if _level <= QUIET:
        return
    try:
        print(f"plait: warning: {shorten(one_line(str(message)), MAX_MESSAGE - len('plait: warning: '))}",
              file=sys.stderr)
    except OSError:
        pass


def os_message(exc: OSError) -> str:
    what = exc.strerror or str(exc)
    return f"{what}: '{exc.filename}'" if exc.filename is not None else what


def silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so that the interpreter's final flush does not
    fail again (what the Python docs recommend for SIGPIPE)."""
    if sys.stdout is not sys.__stdout__ or sys.stdout is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
