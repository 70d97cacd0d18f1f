"""Invoking a C compiler: shared libraries for the host, objects for cross targets, with a cache.

The cache key is the source, the compiler, its version and the flags, so a change to any of them
recompiles. The cache directory comes from the caller (``PassContext.config["cc.cache_dir"]``
at the driver level); the default is ``~/.cache/plait/cc``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from plait.errors import PlaitError


class CompileError(PlaitError):
    """The C compiler failed; the message names the module and quotes the compiler's first errors."""


DEFAULT_CACHE = Path(os.path.expanduser("~")) / ".cache" / "plait" / "cc"


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

    Results are cached by content; a cached file is reused without running the compiler.
    """
    kind = "so" if shared else "o"
    cache = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE
    cache.mkdir(parents=True, exist_ok=True)
    key = _key(source, cc, [*flags, "|", *link_flags], kind)
    out = cache / f"{key}.{kind}"
    if out.exists():
        return out
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        src = Path(tmp) / f"{key}.c"
        src.write_text(source, encoding="utf-8")
        target = Path(tmp) / out.name
        extra = ["-shared", "-fPIC"] if shared else ["-c"]
        libs = [*link_flags, "-lm"] if shared else []
        _run([cc, *flags, *extra, "-o", str(target), str(src), *libs], name, tmp)
        os.replace(target, out)  # atomic: concurrent builds of the same key are fine
    return out
