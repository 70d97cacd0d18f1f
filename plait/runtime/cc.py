"""Invoking a C compiler: shared libraries for the host, objects for cross targets, with a cache.

The cache key is the source, the compiler, its version and the flags, so a change to any of them
recompiles. The cache directory comes from the caller (``PassContext.config["cc.cache_dir"]``
at the driver level, ``--cache-dir`` on the command line); the default is
``$XDG_CACHE_HOME/plait/cc``, else ``~/.cache/plait/cc``. How entries are verified, and what
happens when the directory cannot be used, is in :mod:`plait.runtime.cc_cache`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

from plait.errors import PlaitError
from plait.runtime import cc_cache

#: the source compiled to link the objects of one module's translation units into one library
LINK_SOURCE = "/* plait: the translation units of one module, linked into one library */\n"


class CompileError(PlaitError):
    """The C compiler failed; the message names the module and quotes the compiler's first errors."""


@lru_cache(maxsize=None)
def compiler_version(cc: str) -> str:
    exe = shutil.which(cc)
    if exe is None:
        raise CompileError(f"C compiler '{cc}' not found on PATH")
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompileError(f"cannot run C compiler '{cc}': {exc}") from None
    return out.stdout.splitlines()[0] if out.stdout else exe


@lru_cache(maxsize=None)
def native_flags(cc: str) -> str:
    """What ``-march=native`` means on this machine (cc1's expanded options), so that a cache shared
    between machines never hands out a library built for another CPU."""
    try:
        out = subprocess.run([cc, "-march=native", "-E", "-v", "-"], input="", capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return next((ln for ln in out.stderr.splitlines() if "cc1" in ln), out.stderr)


def _key(source: str, cc: str, flags: Sequence[str], kind: str) -> str:
    h = hashlib.sha256()
    native = native_flags(cc) if any("native" in f for f in flags) else ""
    for part in (kind, cc, compiler_version(cc), native, "\0".join(flags), source):
        h.update(part.encode())
        h.update(b"\0\1")
    return h.hexdigest()[:32]


def _run(cmd: list[str], name: str, cwd: str) -> None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompileError(f"compiling '{name}' failed: {exc}") from None
    if r.returncode != 0:
        errors = [ln for ln in r.stderr.splitlines() if "error" in ln or "In function" in ln] \
            or r.stderr.splitlines()
        excerpt = "\n".join(errors[:10])
        raise CompileError(f"compiling '{name}' with {cmd[0]} failed:\n{excerpt}")


def compile_source(source: str, *, name: str = "module", cc: str = "gcc", flags: Sequence[str] = (),
                   shared: bool = True, cache_dir: str | os.PathLike | None = None,
                   link_flags: Sequence[str] = ()) -> Path:
    """Compile C ``source``; returns the path of a shared library (``shared``) or an object file.

    Results are cached by content; a cached file whose content hash checks out is reused without
    running the compiler, any other file under its name is replaced by a fresh build. When the cache
    directory cannot be used, the build goes to a private temporary directory (one warning).
    """
    kind = "so" if shared else "o"
    key = _key(source, cc, [*flags, "|", *link_flags], kind)
    cache = cc_cache.cache_directory(cache_dir)
    while True:
        try:
            return _cached(source, key, kind, name, cc, flags, link_flags, cache)
        except _CacheIOError as exc:
            if cc_cache.is_fallback(cache):
                raise cc_cache.CacheError(f"cannot write compiled code to '{cache}': {exc.reason}") from None
            cc_cache.mark_unusable(cache, exc.reason)
            cache = cc_cache.fallback_dir()


#: Called as ``listener(name, "hit" | "built", path)`` for each compiled entry (``plait -v`` lists them).
LISTENERS: list[Callable[[str, str, Path], None]] = []


def _tell(name: str, what: str, path: Path) -> Path:
    for listener in list(LISTENERS):
        listener(name, what, path)
    return path


class _CacheIOError(Exception):
    """An operation on the cache directory itself failed (not the compiler)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _cached(source: str, key: str, kind: str, name: str, cc: str, flags: Sequence[str],
            link_flags: Sequence[str], cache: Path) -> Path:
    """The verified entry of ``key`` in ``cache``, compiled first when missing or bad."""
    entry = cache / f"{key}.{kind}"
    try:
        with cc_cache.locked(cache, key):
            if cc_cache.lookup(entry) is not None:
                return _tell(name, "hit", entry)
            with cc_cache.build_dir(cache) as tmp:
                src = tmp / f"{key}.c"
                src.write_text(source, encoding="utf-8")
                target = tmp / entry.name
                extra = ["-shared", "-fPIC"] if kind == "so" else ["-c"]
                libs = [*link_flags, "-lm"] if kind == "so" else []
                # names relative to the build directory (gcc's cwd): the output does not depend on it
                exe = os.path.abspath(cc) if os.sep in cc and os.path.isfile(cc) else cc  # relative: from here
                _run([exe, *flags, *extra, "-o", target.name, src.name, *libs], name, str(tmp))
                return _tell(name, "built", cc_cache.store(target, entry))
    except OSError as exc:
        raise _CacheIOError(exc.strerror or str(exc)) from None
