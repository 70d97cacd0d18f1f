"""The global flags: --version, -v/--verbose, -q/--quiet (before the command or after it)."""

from __future__ import annotations

import argparse


def version_line() -> str:
    """What ``plait --version`` prints: ``plait X.Y.Z``, the version of the code that runs
    (``plait.version.__version__``, kept equal to pyproject.toml's by a test)."""
    from plait.version import __version__

    return f"plait {__version__}"


def add_global_flags(p: argparse.ArgumentParser, top: bool) -> None:
    """-v and -q on the main parser (``top``) and on each command's; a command's parser leaves them
    unset when not given (argparse.SUPPRESS) so that ``plait -v run ...`` keeps the main parser's."""
    default = {} if top else {"default": argparse.SUPPRESS}
    p.add_argument("-v", "--verbose", action="store_true", help="say more: each build stage's time, each "
                   "compile-cache entry hit or built (lines 'plait: ...' on stderr)", **default)
    p.add_argument("-q", "--quiet", action="store_true", help="say less: no notes, warnings, placement summary "
                   "or 'wrote ...' lines, no progress; results and errors only", **default)


def verbosity_of(args: argparse.Namespace) -> int:
    """The verbosity level of -v/-q; both given is a UsageError."""
    from plait.cli.common import UsageError
    from plait.cli.messages import NORMAL, QUIET, VERBOSE

    if args.verbose and args.quiet:
        raise UsageError("-v/--verbose and -q/--quiet cannot be used together")
    return VERBOSE if args.verbose else QUIET if args.quiet else NORMAL
