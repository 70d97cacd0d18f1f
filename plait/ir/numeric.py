"""plait's defined dtype conversions, on numpy arrays: the one place the operator references (and the
TIR interpreter's scalar semantics, :mod:`plait.tir.scalar`) take them from.

numpy's own ``astype`` from a float to an integer type is a C conversion: for NaN, infinities and
values outside the integer type's range C leaves the result undefined, and numpy's result depends on
the CPU it runs on (a negative float32 converted to uint32 gives 4294967295 with AVX-512 and
4294967294 without). plait defines every conversion instead, as Rust's ``as``, WebAssembly's
``trunc_sat`` and LLVM's ``llvm.fptosi.sat`` / ``llvm.fptoui.sat`` do, and every backend generates
code that computes exactly this (docs/tir.md, "Numeric semantics"):

- float -> integer: truncation toward zero; NaN -> 0; values beyond the type's range (infinities
  too) saturate to its minimum or maximum;
- anything -> bool: ``x != 0`` (NaN -> true);
- integer -> integer: modulo 2**bits (two's complement);
- integer -> float, float -> float: rounded to nearest (ties to even) once; too large -> +-inf.

Only the first needs code here: numpy already computes the others this way on every machine.
"""

from __future__ import annotations

import numpy as np

from plait.ir.types import DTYPES

__all__ = ["cast_array", "float_to_int_limits"]


def float_to_int_limits(dtype: str) -> tuple[float, float]:
    """(lowest, top) of an integer dtype as exact floats: ``lowest`` is its minimum (0 or -2**(bits-1)),
    ``top = max + 1`` its first value above the range (a power of two, exact in every float type,
    where ``max`` itself may not be: 2**31 - 1 has no float32)."""
    dt = DTYPES[dtype]
    bits = dt.itemsize * 8
    if dt.kind == "u":
        return 0.0, 2.0 ** bits
    return -(2.0 ** (bits - 1)), 2.0 ** (bits - 1)


def _float_to_int(x: np.ndarray, dtype: str) -> np.ndarray:
    dt = DTYPES[dtype]
    lowest, top = float_to_int_limits(dtype)
    xd = x.astype(np.float64)  # exact for float16/32/64
    with np.errstate(invalid="ignore"):
        inside = np.clip(np.where(np.isnan(xd), 0.0, xd), lowest, np.nextafter(top, 0.0))
        out = inside.astype(dt)  # every value is in range: a defined conversion (truncation)
        return np.where(xd >= top, dt.type(np.iinfo(dt).max), out)


def cast_array(x: object, dtype: str) -> np.ndarray:
    """``x`` (an array or a scalar) converted to ``dtype`` with plait's defined semantics (module
    docstring): the same result on every machine, and the result of compiled code."""
    a = np.asarray(x)
    if a.dtype.kind == "f" and DTYPES[dtype].kind in "iu":
        return _float_to_int(a, dtype)
    with np.errstate(all="ignore"):
        return a.astype(DTYPES[dtype])
