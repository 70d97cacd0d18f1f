"""The on-disk compile cache: where compiled libraries live, and why a cached file can be trusted.

Layout of a cache directory (default ``$XDG_CACHE_HOME/plait/cc``, else ``~/.cache/plait/cc``):

    <key>.so / <key>.o            a compiled entry
    <key>.so.sha256               its content hash, ``<sha256 hex>  <key>.so`` (the ``sha256sum`` format),
                                  written after the compile succeeded, atomically
    locks/<xx>                    lock files (``flock``), one per first two hex digits of the key
    tmp.<pid>.<time>.<host>.*/    a compile in progress (removed when it ends; stale ones are cleaned)

Why: a cached library is handed to ``dlopen``, and a truncated or tampered one crashes the process
(bus error, illegal instruction) instead of raising. So an entry is returned only when its hash file
names it and its bytes hash to the recorded value; anything else (truncated, flipped bytes, empty, a
foreign file under the key's name, no hash file) is rebuilt and replaced, never loaded. Lookup, removal
and store of a key happen under its lock, so two processes building the same key both succeed and the
second reuses the first's result. A directory that cannot be used (read-only, not a directory, a
parent that is a file) is replaced by a private temporary directory for the rest of the process, with
one :class:`CompileCacheWarning` per directory.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import hmac
import os
import re
import shutil
import socket
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from plait.errors import PlaitError

#: A temporary build directory older than this is stale even if its process still seems to run.
STALE_SECONDS = 3600
_TMP = re.compile(r"tmp\.(?P<pid>\d+)\.(?P<time>\d+)\.(?P<host>[0-9a-f]{8})\.")
_LEGACY_TMP = re.compile(r"tmp[a-z0-9_]{8}")  # tempfile's default names (what older plait left behind)

_unusable: dict[Path, str] = {}  # cache dirs found unusable in this process -> why
_cleaned: set[Path] = set()  # cache dirs whose stale temporary directories this process removed
_fallback: list[Path] = []  # this process's private temporary cache (created on first need)
_state_lock = threading.Lock()  # builds may run in several threads


class CompileCacheWarning(UserWarning):
    """The compile cache directory cannot be used; compiled code goes to a private temporary directory."""


class CacheError(PlaitError):
    """No directory at all can hold compiled code (neither the cache nor a temporary directory)."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/plait/cc`` when that variable holds an absolute path (the XDG rule), else
    ``~/.cache/plait/cc``."""
    from plait.target.host import cache_home

    return cache_home() / "cc"


def requested_dir(cache_dir: str | os.PathLike | None) -> Path:
    """The absolute cache directory asked for (``~`` expanded; relative to the current directory):
    gcc runs in a temporary working directory, so a relative path must not reach it."""
    path = default_cache_dir() if cache_dir is None or str(cache_dir) == "" else Path(cache_dir)
    return Path(os.path.abspath(os.path.expanduser(path)))


def _why_unusable(path: Path) -> str | None:
    """Why ``path`` cannot hold the cache (created if missing), or None when it can."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return "it exists and is not a directory"
    except NotADirectoryError:
        return "a parent of it is not a directory"
    except OSError as exc:
        return exc.strerror or str(exc)
    if not path.is_dir():
        return "it is not a directory"
    if not os.access(path, os.W_OK | os.X_OK):
        return "it is not writable"
    return None


def fallback_dir() -> Path:
    """This process's private temporary cache (removed when the process exits)."""
    with _state_lock:
        return _make_fallback()


def _make_fallback() -> Path:
    if not _fallback:
        try:
            made = Path(tempfile.mkdtemp(prefix="plait-cc-"))
        except OSError as exc:
            raise CacheError(f"no directory can hold compiled code: the compile cache is unusable and a "
                             f"temporary directory cannot be created ({exc.strerror or exc})") from None
        atexit.register(shutil.rmtree, made, True)
        _fallback.append(made)
    return _fallback[0]


def is_fallback(path: Path) -> bool:
    """Whether ``path`` is this process's private temporary cache."""
    return path in _fallback


def mark_unusable(path: Path, reason: str) -> None:
    """Remember that ``path`` cannot be used in this process, and say so once."""
    with _state_lock:
        if path in _unusable:
            return
        _unusable[path] = reason
    warnings.warn(f"compile cache '{path}' is not usable ({reason}); compiling into the private temporary "
                  f"directory '{fallback_dir()}' for this process", CompileCacheWarning, stacklevel=2)


def cache_directory(cache_dir: str | os.PathLike | None) -> Path:
    """The directory to cache in: the requested one (absolute) if usable, else the fallback."""
    path = requested_dir(cache_dir)
    if path not in _unusable:
        reason = _why_unusable(path)
        if reason is None:
            clean_stale(path)
            return path
        mark_unusable(path, reason)
    return fallback_dir()


# ---- entries ------------------------------------------------------------------------------------


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _hash_file(entry: Path) -> Path:
    return entry.with_name(entry.name + ".sha256")


def verified(entry: Path) -> bool:
    """True when ``entry`` is a regular file whose hash file names it and records its bytes' hash."""
    if entry.is_symlink() or not entry.is_file():
        return False
    try:
        with open(_hash_file(entry), "rb") as f:
            fields = f.read(256).decode("ascii").split()
        if len(fields) != 2 or fields[1] != entry.name:
            return False
        return hmac.compare_digest(_digest(entry), fields[0])
    except (OSError, UnicodeDecodeError):
        return False


def lookup(entry: Path) -> Path | None:
    """``entry`` if it is verified, else None: the caller builds it again and :func:`store` replaces
    whatever is there in one rename (a directory in the way is removed first). A bad file is not
    deleted before: a process of an older plait may be about to load the path, and a complete file
    must stay there. Call under :func:`locked` for the entry's key."""
    if verified(entry):
        return entry
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    return None


def store(built: Path, entry: Path) -> Path:
    """Move the freshly compiled ``built`` (inside a build directory of the same cache) to ``entry``,
    its hash file first: a reader sees either no entry, or the entry with its hash."""
    hashed = built.with_name(built.name + ".sha256")
    hashed.write_text(f"{_digest(built)}  {entry.name}\n", encoding="ascii")
    os.replace(hashed, _hash_file(entry))
    os.replace(built, entry)
    return entry


@contextmanager
def locked(cache: Path, key: str) -> Iterator[None]:
    """Hold the lock of ``key`` (shared by the keys with the same first two hex digits)."""
    locks = cache / "locks"
    locks.mkdir(exist_ok=True)
    fd = os.open(locks / key[:2], os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


# ---- build directories ------------------------------------------------------------------------


def _host_tag() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


@contextmanager
def build_dir(cache: Path) -> Iterator[Path]:
    """A temporary directory inside ``cache`` named after this process and the time (so a later
    process can tell it is stale if this one is killed), removed when the block ends."""
    tmp = Path(tempfile.mkdtemp(dir=cache, prefix=f"tmp.{os.getpid()}.{int(time.time())}.{_host_tag()}."))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        return True
    return True


def is_stale(name: str, mtime: float, now: float) -> bool:
    """Whether a build directory called ``name`` is left over from a process that is gone (this host)
    or is older than :data:`STALE_SECONDS`."""
    m = _TMP.match(name)
    if m is not None:
        if now - int(m["time"]) > STALE_SECONDS:
            return True
        return m["host"] == _host_tag() and int(m["pid"]) != os.getpid() and not _alive(int(m["pid"]))
    return _LEGACY_TMP.fullmatch(name) is not None and now - mtime > STALE_SECONDS


def clean_stale(cache: Path) -> None:
    """Remove the build directories of killed compiles from ``cache`` (once per process)."""
    if cache in _cleaned:
        return
    _cleaned.add(cache)
    now = time.time()
    try:
        entries = list(os.scandir(cache))
    except OSError:
        return
    for e in entries:
        try:
            if e.is_dir(follow_symlinks=False) and is_stale(e.name, e.stat(follow_symlinks=False).st_mtime, now):
                shutil.rmtree(e.path, ignore_errors=True)
        except OSError:
            continue


__all__ = ["CacheError", "CompileCacheWarning", "STALE_SECONDS", "build_dir", "cache_directory", "clean_stale",
           "default_cache_dir", "fallback_dir", "is_fallback", "is_stale", "locked", "lookup", "mark_unusable",
           "requested_dir", "store", "verified"]
