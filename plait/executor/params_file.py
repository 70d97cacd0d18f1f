"""Reading ``params.npz`` safely: every array's header is checked against the graph before any data is read.

An ``.npz`` file is a zip archive of ``.npy`` files. :func:`read_params` opens the archive from
bytes already in memory, reads each member's ``.npy`` header (dtype, shape; no data), and refuses
a missing, extra, duplicated, pickled (object dtype) or mismatched array, and a byte total over the
memory limit, before it reads any array (``allow_pickle=False``).
"""

from __future__ import annotations

import io
import zipfile
from typing import Any

import numpy as np

from plait.executor.errors import ExecutorError
from plait.executor.graph_check import _short, nbytes, param_entries
from plait.ir.types import DTYPES
from plait.limits import check_bytes

_ERRORS = (ValueError, OSError, EOFError, zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError,
           RuntimeError, KeyError)


def _header(zf: zipfile.ZipFile, member: str) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) from the ``.npy`` header of ``member``."""
    fmt = np.lib.format
    with zf.open(member) as f:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = fmt.read_array_header_2_0(f)
        else:  # pragma: no cover - read_magic accepts only these
            raise ValueError(f"unsupported .npy version {version}")
    return shape, dtype


def read_params(data: bytes, graph: dict[str, Any], where: str, memory_limit: int | str | None = None,
                what: str = "the params") -> dict[str, np.ndarray]:
    """The params of a checked ``graph`` from the bytes of ``params.npz``. ``where`` names the file
    in messages, ``what`` the params in a memory-limit refusal."""
    expected = param_entries(graph)
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except _ERRORS as exc:
        raise ExecutorError(f"{where}: not a readable .npz archive ({exc})") from None
    members: dict[str, str] = {}
    for info in infos:
        name = info.filename
        key = name[:-4] if name.endswith(".npy") else name
        if key in members:
            raise ExecutorError(f"{where}: the array '{_short(key)}' is stored twice")
        if key not in expected:
            raise ExecutorError(f"{where}: unexpected array '{_short(key)}' (the graph has no parameter of that name)")
        members[key] = name
    for key in expected:
        if key not in members:
            raise ExecutorError(f"{where}: parameter '{_short(key)}' is missing")
    total = 0
    for key, name in members.items():
        ent = expected[key]
        try:
            shape, dtype = _header(zf, name)
        except _ERRORS as exc:
            raise ExecutorError(f"{where}: parameter '{_short(key)}': not a readable .npy array ({exc})") from None
        if dtype.hasobject:
            raise ExecutorError(f"{where}: parameter '{_short(key)}' holds Python objects (pickled data is never "
                                "loaded)")
        if dtype != DTYPES[ent["dtype"]] or list(shape) != ent["shape"]:
            raise ExecutorError(f"{where}: parameter '{_short(key)}' is {dtype}{list(shape)}; the graph expects "
                                f"{ent['dtype']}{ent['shape']}")
        total += nbytes(ent["dtype"], ent["shape"])
    check_bytes(total, what, memory_limit)
    out: dict[str, np.ndarray] = {}
    for key, name in members.items():
        try:
            with zf.open(name) as f:
                out[key] = np.lib.format.read_array(f, allow_pickle=False)
        except _ERRORS as exc:
            raise ExecutorError(f"{where}: parameter '{_short(key)}': not a readable .npy array ({exc})") from None
    return out


__all__ = ["read_params"]
