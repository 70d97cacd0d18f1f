"""Inputs, references and a host build of plait's float32 math routines (plait/backends/c/libm/).

    lib = host_library(("exp", "pow"), flags=("-O2",))   # the routines + array loops, through ctypes
    x = inputs("exp", 10**6)                               # random bits, dense ranges, special values
    y = lib.run("exp", x)                                  # plait_c_expf over the array
    assert max_ulp(y, reference("exp", x)) <= BOUND["exp"]

The reference is numpy's float64 function rounded to float32 (``math.erf``/``math.erfc`` for erf and
erfc, which numpy lacks; for fma the C library's fmaf, ``lib.run("plait_r_fma", a, b, c)``). :func:`ulp_distance` counts
float32 steps between two arrays (NaN equal to NaN only, -0 and +0 one step apart). The C loops
(``plait_t_<name>``) are generated here; tests/embedded/test_libm_qemu.py runs the same loops on the
emulated cores.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from plait.backends.c.libm import ROUTINE_OF, libm_source

UNARY = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "cbrt", "sin", "cos", "tan", "asin", "acos",
         "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc")
BINARY = ("pow", "atan2")
TERNARY = ("fma",)
NAMES = UNARY + BINARY + TERNARY
BOUND = {n: 4 if n == "pow" else 0 if n == "fma" else 2 for n in NAMES}  # ulp

_NP: dict[str, Callable] = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10,
    "log1p": np.log1p, "cbrt": np.cbrt, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": np.vectorize(math.erf, otypes=[np.float64]), "erfc": np.vectorize(math.erfc, otypes=[np.float64]),
    "pow": np.power, "atan2": np.arctan2,
}

# dense ranges where each function does something interesting: (low, high) uniform
_RANGES: dict[str, list[tuple[float, float]]] = {
    "exp": [(-104.5, 89.0), (-1.0, 1.0), (-0.02, 0.02), (-104.0, -87.0), (88.0, 89.0)],
    "exp2": [(-151.0, 129.0), (-1.0, 1.0), (-150.0, -125.0)],
    "expm1": [(-18.0, 89.0), (-0.4, 0.4), (-1e-3, 1e-3), (-2.0, 2.0)],
    "log": [(0.0, 4.0), (0.9, 1.1), (0.999, 1.001), (0.0, 1e-37)],
    "log2": [(0.0, 4.0), (0.9, 1.1), (0.999, 1.001)],
    "log10": [(0.0, 4.0), (0.9, 1.1), (0.999, 1.001)],
    "log1p": [(-1.0, 4.0), (-0.01, 0.01), (-1e-6, 1e-6), (-1.0, -0.9)],
    "cbrt": [(-10.0, 10.0), (0.0, 1e-38)],
    "sin": [(-10.0, 10.0), (-1e4, 1e4), (-1e9, 1e9), (-1.0, 1.0)],
    "cos": [(-10.0, 10.0), (-1e4, 1e4), (-1e9, 1e9), (-1.0, 1.0)],
    "tan": [(-10.0, 10.0), (-1e4, 1e4), (-1.6, 1.6), (1.5, 1.65)],
    "asin": [(-1.0, 1.0), (0.45, 0.55), (0.99, 1.0)],
    "acos": [(-1.0, 1.0), (0.45, 0.55), (-1.0, -0.99), (0.99, 1.0)],
    "atan": [(-10.0, 10.0), (-1.2, 1.2), (0.4, 0.7)],
    "sinh": [(-90.0, 90.0), (-2.0, 2.0), (0.9, 1.1)],
    "cosh": [(-90.0, 90.0), (-2.0, 2.0), (-0.01, 0.01)],
    "tanh": [(-10.0, 10.0), (-1.0, 1.0), (0.5, 0.6)],
    "asinh": [(-10.0, 10.0), (-1.0, 1.0), (4000.0, 5000.0)],
    "acosh": [(1.0, 10.0), (1.0, 1.001), (4000.0, 5000.0)],
    "atanh": [(-1.0, 1.0), (0.99, 1.0), (-0.01, 0.01)],
    "erf": [(-5.0, 5.0), (0.9, 1.1), (-0.1, 0.1), (3.8, 4.0)],
    "erfc": [(-5.0, 11.0), (0.4, 0.6), (1.9, 2.1), (9.0, 10.2), (-4.0, -3.8)],
}

_SPECIAL_BITS = (0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x80800000,
                 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FA00000,
                 0x3F800000, 0xBF800000, 0x3F7FFFFF, 0x3F800001, 0xBF7FFFFF, 0xBF800001, 0x33800000, 0x33000000,
                 0x39800000, 0x397FFFFF, 0x3F490FDB, 0x3F490FDA, 0x3FC90FDB, 0x40490FDB, 0x42B17217, 0x42B17218,
                 0xC2CFF1B4, 0xC2CFF1B5, 0xC2CE8ED0, 0x3EB33333, 0x3F000000, 0x3F0CCCCD, 0x407CCCCD, 0x4121999A,
                 0x45800000, 0x45800001, 0x4C800000, 0x4B800000, 0x4B7FFFFF, 0x5A9C47F6, 0x7E6A8C3A)
_SPECIAL_VALUES = (2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 0.1, 10.0, 100.0, 1e10, 1e-10, 88.72, 89.0, -103.97, -104.0,
                   -87.33, 128.0, -126.0, -149.0, -150.0, -151.0, 9.01, 9.1, 3.95, 10.05, 10.1, -17.5, 0.35, -0.35,
                   0.4375, 0.6875, 7.0, 8.0, 27.0, 1e30, -1e30, 4096.0, 1.5, 0.75)


def special_values() -> np.ndarray:
    """Zeros, subnormal and normal extremes, infinities, NaNs and the thresholds the routines test."""
    s = np.array(_SPECIAL_BITS, np.uint32).view(np.float32)
    v = np.array(_SPECIAL_VALUES, np.float32)
    base = np.concatenate([s, v, -v])
    near = [base.view(np.uint32) + np.uint32(1), base.view(np.uint32) - np.uint32(1)]
    out = np.concatenate([base, *(n.view(np.float32) for n in near)])
    return out


def inputs(name: str, n: int, seed: int = 0) -> np.ndarray:
    """About ``n`` float32 arguments for a unary ``name``: a third random bit patterns (the whole
    range: NaNs, infinities, subnormals), the rest uniform over its dense ranges, and the special values."""
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, 2**32, n // 3, dtype=np.uint64).astype(np.uint32).view(np.float32)]
    ranges = _RANGES[name]
    for lo, hi in ranges:
        parts.append(rng.uniform(lo, hi, (n - n // 3) // len(ranges)).astype(np.float32))
    parts.append(special_values())
    return np.concatenate(parts)


def pair_inputs(name: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """About ``n`` argument pairs of a binary ``name`` (pow: x, y; atan2: y, x): random bit patterns,
    dense ranges (for pow: exponents spanning the whole result range, subnormal results and overflow
    included; negative x with integer y) and every pair of special values."""
    rng = np.random.default_rng(seed)
    k = n // 5

    def bits() -> np.ndarray:
        return rng.integers(0, 2**32, k, dtype=np.uint64).astype(np.uint32).view(np.float32)

    def f32(v: np.ndarray) -> np.ndarray:
        return np.asarray(v, np.float64).astype(np.float32)

    if name == "pow":
        x3 = rng.uniform(1e-3, 1e3, k)
        xs = [bits(), f32(rng.uniform(0, 4, k)), f32(rng.uniform(0.9, 1.1, k)), f32(x3),
              f32(-rng.integers(1, 20, k))]
        ys = [bits(), f32(rng.uniform(-60, 60, k)), f32(rng.uniform(-2000, 2000, k)),
              f32(rng.uniform(-106, 90, k) / np.log(f32(x3).astype(np.float64))), f32(rng.integers(-30, 30, k))]
    else:
        xs = [bits(), f32(rng.uniform(-10, 10, k)), f32(rng.uniform(-1e-3, 1e-3, k)), f32(rng.uniform(-1, 1, k)),
              f32(rng.uniform(-1e30, 1e30, k))]
        ys = [bits(), f32(rng.uniform(-10, 10, k)), f32(rng.uniform(-1e3, 1e3, k)), f32(rng.uniform(-1e-30, 1e-30, k)),
              f32(rng.uniform(-1, 1, k))]
    s = special_values()
    sa, sb = (a.ravel() for a in np.meshgrid(s, s))
    return np.concatenate([*xs, sa]), np.concatenate([*ys, sb])


def reference(name: str, *args: np.ndarray) -> np.ndarray:
    """numpy's float64 ``name`` of the float32 arguments, rounded to float32."""
    with np.errstate(all="ignore"):
        return _NP[name](*(a.astype(np.float64) for a in args)).astype(np.float32)


def _ordered(a: np.ndarray) -> np.ndarray:
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF) - 1, i)


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """float32 steps between ``got`` and ``want`` (int64): 0 where both are NaN, a huge number where
    only one is; +0 and -0 are one step apart."""
    d = np.abs(_ordered(got.astype(np.float32)) - _ordered(want.astype(np.float32)))
    gn, wn = np.isnan(got), np.isnan(want)
    return np.where(gn & wn, 0, np.where(gn | wn, 2**40, d))


def max_ulp(got: np.ndarray, want: np.ndarray) -> int:
    return int(np.max(ulp_distance(got, want))) if got.size else 0


def loops_source(names: Sequence[str]) -> str:
    """C loops calling each routine over arrays: ``void plait_t_<name>(const float*, [const float*, ...]
    float*, int32_t n)`` (after :func:`libm_source` of the same names)."""
    out = []
    for n in names:
        k = 3 if n in TERNARY else 2 if n in BINARY else 1
        params = ", ".join(f"const float *a{i}" for i in range(k))
        args = ", ".join(f"a{i}[i]" for i in range(k))
        out.append(f"void plait_t_{n}({params}, float *y, int32_t n) {{\n"
                   f"  int32_t i;\n  for (i = 0; i < n; ++i) y[i] = {ROUTINE_OF[n]}({args});\n}}\n")
    return "".join(out)


def sweep_source(names: Sequence[str]) -> str:
    """C functions ``int64_t plait_s_<name>(uint32_t lo, uint32_t hi, uint32_t *worst)`` for unary
    ``names``: the largest ulp distance of the routine from the C library's double function rounded to
    float32 over the bit patterns [lo, hi] (NaN equal to NaN only; :func:`ulp_distance`), and where."""
    out = ["static int64_t plait_s_ord(float f) {\n  union { float f; int32_t i; } v;\n  v.f = f;\n"
           "  return v.i < 0 ? -(int64_t)(v.i & 0x7FFFFFFF) - 1 : (int64_t)v.i;\n}\n"]
    for n in names:
        out.append(f"int64_t plait_s_{n}(uint32_t lo, uint32_t hi, uint32_t *worst) {{\n"
                   "  int64_t best = -1, d;\n  uint32_t u = lo;\n  union { uint32_t u; float f; } v;\n"
                   "  for (;;) {\n    float got, want;\n    v.u = u;\n"
                   f"    got = {ROUTINE_OF[n]}(v.f);\n    want = (float){n}((double)v.f);\n"
                   "    if (got != got || want != want) d = (got != got && want != want) ? 0 : ((int64_t)1 << 40);\n"
                   "    else { d = plait_s_ord(got) - plait_s_ord(want); if (d < 0) d = -d; }\n"
                   "    if (d > best) { best = d; *worst = u; }\n    if (u == hi) break;\n    ++u;\n  }\n"
                   "  return best;\n}\n")
    return "".join(out)


FMA_REFERENCE = ("void plait_r_fma(const float *a, const float *b, const float *c, float *y, int32_t n) {\n"
                 "  int32_t i;\n  for (i = 0; i < n; ++i) y[i] = fmaf(a[i], b[i], c[i]);\n}\n")


def routines_source(names: Sequence[str]) -> str:
    """A C file with the routines of ``names``, their loops, the sweeps of the unary ones and (with
    fma) ``plait_r_fma``, the C library's fmaf over arrays (exact: one rounding; the reference)."""
    return ("#include <math.h>\n#include <stdint.h>\n#include <stdbool.h>\n#include <stddef.h>\n"
            + libm_source(set(names)) + "\n" + loops_source(names)
            + sweep_source([n for n in names if n in UNARY]) + (FMA_REFERENCE if "fma" in names else ""))


@dataclass
class HostLibrary:
    """The routines and their loops built for this machine (:func:`host_library`)."""

    lib: ctypes.CDLL

    def run(self, name: str, *args: np.ndarray) -> np.ndarray:
        arrays = [np.ascontiguousarray(a, np.float32) for a in args]
        y = np.empty_like(arrays[0])
        f = getattr(self.lib, name if name.startswith("plait_r_") else f"plait_t_{name}")
        ptrs = [a.ctypes.data_as(ctypes.c_void_p) for a in arrays]
        f(*ptrs, y.ctypes.data_as(ctypes.c_void_p), ctypes.c_int32(y.size))
        return y

    def sweep(self, name: str, lo: int = 0, hi: int = 2**32 - 1) -> tuple[int, float]:
        """(max ulp distance from the C library's double function, an input where it is reached) over
        the float32 bit patterns [lo, hi] (all 2^32 by default: minutes per function)."""
        f = getattr(self.lib, f"plait_s_{name}")
        f.restype = ctypes.c_int64
        worst = ctypes.c_uint32(0)
        d = f(ctypes.c_uint32(lo), ctypes.c_uint32(hi), ctypes.byref(worst))
        return int(d), float(np.array([worst.value], np.uint32).view(np.float32)[0])


def host_library(names: Sequence[str] = NAMES, flags: Sequence[str] = ("-O2", "-ffp-contract=off"),
                 cache_dir: str | None = None) -> HostLibrary:
    """:func:`routines_source` compiled with gcc and ``flags`` (plus -std=c99 -fno-math-errno -fPIC)."""
    from plait.runtime.cc import compile_source

    path = compile_source(routines_source(names), name="plait_libm", cc="gcc",
                          flags=["-std=c99", "-fno-math-errno", *flags], cache_dir=cache_dir, link_flags=("-lm",))
    return HostLibrary(ctypes.CDLL(str(path)))


