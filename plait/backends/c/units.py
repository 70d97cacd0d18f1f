"""A big C module compiled as several translation units in parallel, linked into one library.

gcc at -O3 spends about 20 ms of CPU per small kernel, so a model with thousands of different
kernels spends most of a cold build in one gcc process on one core. :func:`split_units` cuts the
functions of a module into consecutive groups of at most :data:`UNIT_CHARS` characters of C, each
a complete file (the module's head: includes, helpers, declarations, then its functions);
:func:`compile_units` compiles them to objects on every core and links them (with the module's
manifest, in the first unit) into one shared library.

The compile cache stays keyed by content: each object by its unit's text and flags, the library by
the objects' paths (which are their content keys) and the link flags. A module of one unit is not
split (``build_c`` compiles it as before). The generated C (``CSourceModule.source``, what export
writes) is the same text either way; only how gcc is run differs.
"""

from __future__ import annotations

import copy
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

from plait.runtime.cc import LINK_SOURCE, compile_source
from plait.runtime.module import CSourceModule, DSOModule

UNIT_CHARS = 100_000
"""The most characters of function text in one translation unit (one function may exceed it): about
100 small kernels, 1-3 s of gcc each, so that the units of a big module keep every core busy while
the per-unit cost (parsing the head) stays a few percent."""



def split_units(head: Sequence[str], bodies: Sequence[str], unit_chars: int | None = None) -> list[str]:
    """The C text of each translation unit: ``head`` then consecutive ``bodies`` of at most
    ``unit_chars`` (default :data:`UNIT_CHARS`) characters in all, at least one each. One unit is
    the module's whole source."""
    unit_chars = UNIT_CHARS if unit_chars is None else unit_chars
    groups: list[list[str]] = []
    size = 0
    for b in bodies:
        if not groups or (size + len(b) > unit_chars and groups[-1]):
            groups.append([])
            size = 0
        groups[-1].append(b)
        size += len(b)
    return ["\n".join([*head, *g]) for g in groups]


def _jobs(n: int) -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(n, cores))


def compile_units(src: CSourceModule, units: Sequence[str], *, cc: str, flags: Sequence[str],
                  cache_dir: Any = None) -> DSOModule:
    """``src`` built for the host from its translation units ``units`` (see :func:`split_units`):
    objects compiled in parallel, then linked with ``src``'s link flags into one library whose
    manifest is ``src``'s."""
    first = copy.copy(src)
    first.source = units[0]  # full_source() appends the manifest of every function of the module
    texts = [first.full_source(), *units[1:]]
    inc = [f"-I{d}" for d in src.include_dirs]
    obj_flags = [*flags, *inc, "-fPIC"]

    def compile_unit(k: int) -> str:
        path = compile_source(texts[k], name=f"{src.name} (unit {k + 1} of {len(texts)})", cc=cc,
                              flags=obj_flags, shared=False, cache_dir=cache_dir)
        return str(Path(path).resolve())

    with ThreadPoolExecutor(_jobs(len(texts))) as pool:
        objects = list(pool.map(compile_unit, range(len(texts))))
    path = compile_source(LINK_SOURCE, name=src.name, cc=cc, flags=[*flags, *inc], cache_dir=cache_dir,
                          link_flags=[*objects, *src.link_flags])
    dso = DSOModule(path)
    for m in src.imported_modules:
        dso.import_module(m)
    return dso


__all__ = ["UNIT_CHARS", "compile_units", "split_units"]
