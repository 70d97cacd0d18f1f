"""TIR scalar dtypes: plait's tensor dtypes plus ``handle`` (an address) and ``void`` (extern calls).

Integer arithmetic wraps around in two's complement at the dtype's width (what the C code plait
generates does in practice); floats follow IEEE 754 at the dtype's precision.
"""

from __future__ import annotations

import numpy as np

from plait.ir.types import DTYPES, FLOAT_DTYPES, INT_DTYPES
from plait.tir.errors import TIRError

HANDLE = "handle"
VOID = "void"
SCALAR_DTYPES = frozenset(DTYPES)
ALL_DTYPES = SCALAR_DTYPES | {HANDLE, VOID}


def check_dtype(dtype: object, what: str = "dtype", allow_handle: bool = False, allow_void: bool = False) -> str:
    ok = dtype in SCALAR_DTYPES or (allow_handle and dtype == HANDLE) or (allow_void and dtype == VOID)
    if not isinstance(dtype, str) or not ok:
        allowed = sorted(SCALAR_DTYPES) + ([HANDLE] if allow_handle else []) + ([VOID] if allow_void else [])
        raise TIRError(f"{what}: unsupported dtype {dtype!r} (expected one of {', '.join(allowed)})")
    return dtype


def is_int(dtype: str) -> bool:
    return dtype in INT_DTYPES


def is_uint(dtype: str) -> bool:
    return dtype in INT_DTYPES and dtype.startswith("u")


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def is_numeric(dtype: str) -> bool:
    return dtype in INT_DTYPES or dtype in FLOAT_DTYPES


def bits(dtype: str) -> int:
    return 1 if dtype == "bool" else DTYPES[dtype].itemsize * 8


def int_range(dtype: str) -> tuple[int, int]:
    """Inclusive value range of an integer (or bool) dtype."""
    if dtype == "bool":
        return 0, 1
    info = np.iinfo(DTYPES[dtype])
    return int(info.min), int(info.max)


def wrap_int(value: int, dtype: str) -> int:
    """``value`` reduced modulo 2**bits into the range of ``dtype`` (two's complement)."""
    n = bits(dtype)
    value &= (1 << n) - 1
    if not is_uint(dtype) and value >= 1 << (n - 1):
        value -= 1 << n
    return value


def scalar_type(dtype: str) -> type:
    """The numpy scalar type of a dtype (``np.float32`` for ``"float32"``)."""
    return DTYPES[dtype].type
