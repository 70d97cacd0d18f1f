"""How much memory plait may allocate on behalf of a model or an input file.

Before allocating anything whose size comes from a model or a file (random inputs, executor buffers,
arrays read from ``.npy``/``.npz`` files), plait checks the byte count against a limit and refuses
with a :class:`MemoryLimitError` naming what needed how much, instead of dying in the allocator:

    from plait.limits import check_bytes
    check_bytes(n, "input 'x' (float32[1048576, 1048576])", limit)   # limit None: the default

The default limit is half of the memory this process can use (the machine's physical memory, or a
cgroup's limit when smaller). Callers take a limit as an explicit argument (the CLI's
``--max-memory``, the PassContext config key ``memory.limit``); nothing here reads the environment.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from plait.errors import PlaitError

#: The PassContext config key of the limit (bytes, or a size string such as "8GiB").
CONFIG_KEY = "memory.limit"
#: The share of usable memory the default limit allows.
DEFAULT_FRACTION = 0.5

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
          "t": 1000**4, "tb": 1000**4, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zA-Z]*)\s*")


class MemoryLimitError(PlaitError):
    """An allocation sized by a model or an input file is larger than the memory limit."""


def _cgroup_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


@lru_cache(maxsize=None)
def usable_memory() -> int | None:
    """Bytes of memory this process can use: physical memory, or a smaller cgroup limit (None: unknown)."""
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        phys = None
    group = _cgroup_limit()
    known = [v for v in (phys, group) if v is not None and v > 0]
    return min(known) if known else None


def default_limit() -> int:
    """Half of :func:`usable_memory` (4 GiB when it is unknown)."""
    mem = usable_memory()
    return int(mem * DEFAULT_FRACTION) if mem else 4 * 1024**3


def parse_size(text: str | int) -> int:
    """``"8GiB"``, ``"500MB"``, ``"1.5G"``, a plain byte count (``"1048576"``) or an int -> bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise PlaitError(f"a memory limit must be positive, got {text}")
        return text
    m = _SIZE.fullmatch(str(text))
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise PlaitError(f"bad memory size '{text}': expected a number with an optional unit "
                         "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. 8GiB")
    n = int(float(m.group(1)) * _UNITS[unit])
    if n <= 0:
        raise PlaitError(f"a memory limit must be positive, got '{text}'")
    return n


def format_bytes(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"``; exact below 1 KiB."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        n /= 1024
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def resolve(limit: int | str | None) -> int:
    """A limit given by a caller (bytes, a size string, or None for :func:`default_limit`)."""
    return default_limit() if limit is None else parse_size(limit)


def check_bytes(nbytes: int, what: str, limit: int | str | None = None) -> None:
    """Raise :class:`MemoryLimitError` when allocating ``nbytes`` for ``what`` would exceed ``limit``."""
    cap = resolve(limit)
    if nbytes > cap:
        raise MemoryLimitError(f"{what} needs {format_bytes(nbytes)} ({nbytes} bytes), more than the memory "
                               f"limit of {format_bytes(cap)}; raise it with --max-memory or the config key "
                               f"'{CONFIG_KEY}'")


__all__ = ["CONFIG_KEY", "MemoryLimitError", "check_bytes", "default_limit", "format_bytes", "parse_size",
           "resolve", "usable_memory"]
