"""Model inputs read from ``.npz`` / ``.npy`` files that are not trusted.

``np.load`` on a hostile file crashes or hangs in ways a user should never see: an empty file is an
``EOFError``, a truncated zip a ``BadZipFile``, a header claiming 2^40 elements a 4 TiB allocation,
object arrays run pickle. :func:`load_inputs` reads every array's header first (``numpy.lib.format``),
checks its dtype (numbers and bools only, never objects), its byte count against the memory limit
(:func:`plait.limits.check_bytes`) and that the file holds that many bytes, and only then reads the
data. Every failure is an :class:`InputFileError` naming the file and the array.

A ``.npz`` holds the inputs keyed by the model's input names. A plain ``.npy`` holds one array: it is
accepted for a model with exactly one input.
"""

from __future__ import annotations

import os
import tokenize
import zipfile
import zlib
from typing import IO, Sequence

import numpy as np
from numpy.lib import format as npformat

from plait.errors import PlaitError
from plait.limits import check_bytes

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")  # a local file header; the end record of an empty zip
# what numpy raises on a malformed header or data (a header is a Python literal: tokenized, then evaluated)
_BAD = (ValueError, TypeError, SyntaxError, RecursionError, EOFError, KeyError, IndexError, OverflowError,
        tokenize.TokenError)


class InputFileError(PlaitError):
    """An input file cannot be read: missing, malformed, truncated, too large, or of the wrong kind."""


def _header(fp: IO[bytes], where: str) -> tuple[np.dtype, tuple[int, ...], bool]:
    """The dtype, shape and Fortran order an ``.npy`` stream's header declares (the stream is left at
    the start of the data)."""
    try:
        version = npformat.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, fortran, dtype = npformat.read_array_header_2_0(fp)
        else:
            raise InputFileError(f"{where}: unsupported .npy format version {version[0]}.{version[1]}")
    except _BAD as exc:
        raise InputFileError(f"{where}: not a valid .npy array ({_reason(exc)})") from None
    if dtype.hasobject:
        raise InputFileError(f"{where}: holds Python objects (dtype {dtype}); plait reads only arrays of numbers "
                             "or bools (object arrays would be unpickled, which can run code)")
    if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None:
        raise InputFileError(f"{where}: has dtype {dtype}; model inputs are arrays of numbers or bools")
    if any(d < 0 for d in shape):
        raise InputFileError(f"{where}: has a negative dimension in its shape {list(shape)}")
    return dtype, tuple(int(d) for d in shape), fortran


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


def _nbytes(dtype: np.dtype, shape: tuple[int, ...]) -> int:
    n = dtype.itemsize
    for d in shape:
        n *= d
    return n


def _read(fp: IO[bytes], where: str, available: int, limit: int | str | None) -> np.ndarray:
    """One array from an ``.npy`` stream of ``available`` bytes: header, checks, then the data."""
    start = fp.tell()
    dtype, shape, _ = _header(fp, where)
    nbytes = _nbytes(dtype, shape)
    check_bytes(nbytes, f"{where} ({dtype.name}{list(shape)})", limit)
    have = available - (fp.tell() - start)
    if have < nbytes:
        raise InputFileError(f"{where}: truncated: its header declares {nbytes} bytes of data "
                             f"({dtype.name}{list(shape)}), the file holds {max(have, 0)}")
    fp.seek(start)
    try:
        arr = npformat.read_array(fp, allow_pickle=False)
    except _BAD as exc:
        raise InputFileError(f"{where}: cannot read the data ({_reason(exc)})") from None
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return np.ascontiguousarray(arr).reshape(arr.shape)  # ascontiguousarray makes a 0-d array 1-d


def _read_npz(path: str, limit: int | str | None) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as z:
            members = z.infolist()
            total = 0
            for info in members:
                where = f"array '{info.filename}' in '{path}'"
                if not info.filename.endswith(".npy") or info.is_dir():
                    raise InputFileError(f"{where}: not a .npy member; a .npz holds one NAME.npy per input")
                key = info.filename[: -len(".npy")]
                if key in out:
                    raise InputFileError(f"'{path}' holds the array '{key}' twice")
                where = f"array '{key}' in '{path}'"
                try:
                    with z.open(info) as f:
                        out[key] = _read(f, where, info.file_size, limit)
                except (zipfile.BadZipFile, zlib.error) as exc:  # a bad CRC, bad compressed data
                    raise InputFileError(f"{where}: damaged in the zip file ({_reason(exc)})") from None
                total += out[key].nbytes
                check_bytes(total, f"the arrays in '{path}'", limit)
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
        # RuntimeError: an encrypted member; NotImplementedError: an unknown compression method
        raise InputFileError(f"cannot read inputs '{path}': not a valid .npz file ({_reason(exc)})") from None
    return out


def load_inputs(path: str | os.PathLike, input_names: Sequence[str], limit: int | str | None = None
                ) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` (by name) or ``.npy`` (the one input of ``input_names``) at ``path``,
    each checked against the memory ``limit`` (None: the default) before it is read."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            magic = f.read(len(_NPY_MAGIC))
            size = os.fstat(f.fileno()).st_size
            if magic == _NPY_MAGIC:
                if len(input_names) != 1:
                    raise InputFileError(f"cannot use inputs '{path}': a .npy file holds one array, but the model "
                                         f"has {len(input_names)} inputs ({', '.join(input_names)}); give a .npz "
                                         "keyed by input name")
                f.seek(0)
                return {input_names[0]: _read(f, f"input file '{path}'", size, limit)}
    except IsADirectoryError:
        raise InputFileError(f"cannot read inputs '{path}': it is a directory") from None
    except OSError as exc:
        raise InputFileError(f"cannot read inputs '{path}': {exc.strerror or exc}") from None
    if not magic:
        raise InputFileError(f"cannot read inputs '{path}': the file is empty (expected a .npz or .npy file)")
    if not any(magic.startswith(m) for m in _ZIP_MAGICS):
        raise InputFileError(f"cannot read inputs '{path}': not a .npz or .npy file")
    try:
        return _read_npz(path, limit)
    except OSError as exc:
        raise InputFileError(f"cannot read inputs '{path}': {exc.strerror or exc}") from None


__all__ = ["InputFileError", "load_inputs"]
