"""Writing .npz files member by member (any key, any member bytes), for inputs and params cases.

``np.savez`` takes keys as keyword arguments (an input named ``file`` collides with its parameter)
and writes only well-formed members; the hostile cases need both arbitrary keys and broken members.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Mapping

import numpy as np


def npy_bytes(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    """The .npy encoding of ``array`` (an object array needs ``allow_pickle``)."""
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asanyarray(array), allow_pickle=allow_pickle)
    return buf.getvalue()


def write_npz(path: Path, members: Mapping[str, bytes | np.ndarray] | list[tuple[str, bytes | np.ndarray]],
              compress: bool = False, raw_names: bool = False) -> None:
    """An .npz whose member ``key.npy`` (``key`` itself with ``raw_names``) holds the given bytes, or the
    .npy of the given array (pickled for an object array). A list of pairs may repeat a key."""
    mode = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    items = list(members.items()) if isinstance(members, Mapping) else list(members)
    with zipfile.ZipFile(path, "w", mode) as z:
        for key, value in items:
            data = value if isinstance(value, bytes) else npy_bytes(value, allow_pickle=value.dtype == object)
            z.writestr(key if raw_names else f"{key}.npy", data)


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz (no pickles), in file order."""
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}
