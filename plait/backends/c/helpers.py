"""C types, literals and the small static helpers generated files include when they need them.

float16 has no C99 type: buffers of float16 hold the IEEE binary16 bits (``uint16_t``) and a
float16 *value* is a C ``float`` that is always exactly representable in binary16: loads convert
with ``plait_c_h2f``, stores with ``plait_c_f2h``, and every float16 operation rounds its float
result with ``plait_c_rh`` (round to nearest even). Computing a binary16 ``+ - * /`` in float32 and
rounding once gives the correctly rounded binary16 result (24 >= 2 * 11 + 2), which is what the
TIR interpreter (numpy) computes too.
"""

from __future__ import annotations

import math

import numpy as np

from plait.runtime.c_lang import C_TYPES


def int_literal(value: int, dtype: str) -> tuple[str, bool]:
    """(C text, exact): ``exact`` is False when the literal's C type (int) is narrower than ``dtype``
    (int64 values that fit in 32 bits are printed without a suffix; the caller casts if needed)."""
    if dtype == "bool":
        return ("true" if value else "false"), True
    if dtype == "uint64":
        return f"{value}ULL", True
    if dtype == "uint32":
        return f"{value}U", True
    if dtype == "int64":
        if -2**31 < value < 2**31:
            return str(value), False
        if value == -2**63:
            return "(-9223372036854775807LL - 1)", True
        return f"{value}LL", True
    if value == -2**31:
        return "(-2147483647 - 1)", True
    return str(value), True  # int32 and the small types (promoted to int in C anyway)


def float_literal(value: float, dtype: str) -> str:
    """The exact C literal of a float value: shortest round-trip decimal, ``f`` suffix for float32
    (and float16, whose values are floats), INFINITY / NAN for the special values."""
    if math.isnan(value):
        return "NAN" if dtype != "float64" else "(double)NAN"
    if math.isinf(value):
        text = "INFINITY" if dtype != "float64" else "(double)INFINITY"
        return text if value > 0 else "-" + text
    if dtype == "float64":
        s = repr(float(value))
        suffix = ""
    else:
        s = str(np.float32(value))
        suffix = "f"
    if "." not in s and "e" not in s and "inf" not in s:
        s += ".0"
    return s + suffix


def int_class(dtype: str) -> str:
    """The helper family of an integer dtype: small types compute in int32 (C promotes them)."""
    return {"int64": "i64", "uint64": "u64", "uint32": "u32"}.get(dtype, "i32")


def _div_helpers(c: str, t: str, ut: str) -> dict[str, str]:
    """floordiv / floormod / truncdiv / truncmod for a signed type, defined for every pair: ``b == 0``
    gives 0 (numpy's result; C traps or is undefined) and ``b == -1`` is handled apart (``INT_MIN / -1``
    traps on x86; TIR wraps it to ``INT_MIN``, remainder 0)."""
    neg = f"({t})(({ut})0 - ({ut})a)"
    return {
        f"plait_c_floordiv_{c}": (
            f"static inline {t} plait_c_floordiv_{c}({t} a, {t} b) {{\n"
            "  if (b == 0) return 0;\n"
            f"  if (b == -1) return {neg};\n"
            f"  {t} q = a / b, r = a % b;\n"
            "  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;\n}\n"),
        f"plait_c_floormod_{c}": (
            f"static inline {t} plait_c_floormod_{c}({t} a, {t} b) {{\n"
            "  if (b == 0 || b == -1) return 0;\n"
            f"  {t} r = a % b;\n"
            "  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;\n}\n"),
        f"plait_c_truncdiv_{c}": (
            f"static inline {t} plait_c_truncdiv_{c}({t} a, {t} b) {{\n"
            f"  return b == 0 ? 0 : b == -1 ? {neg} : a / b;\n}}\n"),
        f"plait_c_truncmod_{c}": (
            f"static inline {t} plait_c_truncmod_{c}({t} a, {t} b) {{\n"
            "  return b == 0 || b == -1 ? 0 : a % b;\n}\n"),
    }


def _udiv_helpers(c: str, t: str) -> dict[str, str]:
    """The four divisions of an unsigned type (floor and trunc agree), 0 for a zero divisor."""
    out = {}
    for kind, sym in (("floordiv", "/"), ("truncdiv", "/"), ("floormod", "%"), ("truncmod", "%")):
        out[f"plait_c_{kind}_{c}"] = (f"static inline {t} plait_c_{kind}_{c}({t} a, {t} b) "
                                      f"{{ return b == 0 ? 0 : a {sym} b; }}\n")
    return out


def float_class(dtype: str) -> str:
    """The C value class of a float dtype: float16 values are C floats."""
    return "f64" if dtype == "float64" else "f32"


def _float_to_int_helper(fc: str, dst: str) -> str:
    """``plait_c_<fc>_to_<dst>``: a float converted to an integer type as TIR defines it (truncation,
    NaN -> 0, saturation at the type's limits; :mod:`plait.ir.numeric`), without undefined behaviour:
    the value is first clamped into the range, so the C conversion is always defined (and gcc still
    vectorizes it: comparisons and selects around one conversion instruction). The limits are exact
    floats: the type's minimum (0 or a power of two), its maximum where the float type holds it, else
    the largest float below ``max + 1`` plus a final select for ``x >= max + 1``."""
    from plait.ir.numeric import float_to_int_limits

    ft, suffix = ("double", "") if fc == "f64" else ("float", "f")
    ct = C_TYPES[dst]
    lowest, top = float_to_int_limits(dst)
    mant = 53 if fc == "f64" else 24
    hi_max = int_max = int(top) - 1
    exact = int_max < 2 ** mant
    if not exact:
        below = float(np.nextafter(np.float64(top) if fc == "f64" else np.float32(top), 0))
        hi_max = int(below)

    def lit(v: int) -> str:
        return f"{v}.0{suffix}"

    lines = [f"static inline {ct} plait_c_{fc}_to_{dst}({ft} x) {{",
             f"  {ft} c = x > {lit(int(lowest))} ? x : {lit(int(lowest))}; /* NaN too: replaced below */",
             f"  c = c < {lit(hi_max)} ? c : {lit(hi_max)};"]
    if exact:
        lines.append(f"  return x != x ? 0 : ({ct})c;")
    else:
        max_text = int_literal(int_max, dst)[0]
        lines += [f"  {ct} r = ({ct})c;", f"  r = x >= {lit(int(top))} ? {max_text} : r;",
                  "  return x != x ? 0 : r;"]
    return "\n".join(lines) + "\n}\n"


def _shift_helpers(dtype: str) -> dict[str, str]:
    """``plait_c_shl_<dtype>`` / ``plait_c_shr_<dtype>``: shifts defined for every amount as numpy
    defines them (a negative amount or one of at least the width gives 0, or -1 for a right shift of a
    negative value); a left shift is done in unsigned arithmetic (C leaves shifting a negative value,
    or overflowing, undefined)."""
    t = C_TYPES[dtype]
    width = np.dtype(dtype).itemsize * 8
    ut = "uint64_t" if width == 64 else "uint32_t"
    un = f"(uint{max(width, 8)}_t)n"
    signed = not dtype.startswith("u")
    shr = (f"return x >> ({un} < {width}u ? n : {width - 1});" if signed
           else f"return {un} < {width}u ? ({t})(x >> n) : 0;")
    return {
        f"plait_c_shl_{dtype}": (f"static inline {t} plait_c_shl_{dtype}({t} x, {t} n) {{\n"
                                 f"  return {un} < {width}u ? ({t})(({ut})x << n) : 0;\n}}\n"),
        f"plait_c_shr_{dtype}": (f"static inline {t} plait_c_shr_{dtype}({t} x, {t} n) {{\n"
                                 f"  {shr}\n}}\n"),
    }


def _minmax(c: str, t: str) -> dict[str, str]:
    return {
        f"plait_c_min_{c}": f"static inline {t} plait_c_min_{c}({t} a, {t} b) {{ return a < b ? a : b; }}\n",
        f"plait_c_max_{c}": f"static inline {t} plait_c_max_{c}({t} a, {t} b) {{ return a > b ? a : b; }}\n",
    }


INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
HELPERS: dict[str, str] = {}
HELPERS.update(_div_helpers("i32", "int32_t", "uint32_t"))
HELPERS.update(_div_helpers("i64", "int64_t", "uint64_t"))
HELPERS.update(_udiv_helpers("u32", "uint32_t"))
HELPERS.update(_udiv_helpers("u64", "uint64_t"))
for _d in INT_DTYPES:
    HELPERS.update(_shift_helpers(_d))
for _fc in ("f32", "f64"):
    for _d in INT_DTYPES:
        HELPERS[f"plait_c_{_fc}_to_{_d}"] = _float_to_int_helper(_fc, _d)
for _c, _t in (("i32", "int32_t"), ("i64", "int64_t"), ("u32", "uint32_t"), ("u64", "uint64_t"),
               ("f32", "float"), ("f64", "double")):
    HELPERS.update(_minmax(_c, _t))

HELPERS["plait_c_h2f"] = """\
static inline float plait_c_h2f(uint16_t h) {
  union { uint32_t u; float f; } v;
  uint32_t sign = ((uint32_t)h & 0x8000u) << 16, e = ((uint32_t)h >> 10) & 0x1Fu, m = (uint32_t)h & 0x3FFu;
  if (e == 0x1Fu) {
    v.u = sign | 0x7F800000u | (m << 13);
  } else if (e != 0) {
    v.u = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) {
    v.u = sign;
  } else {
    e = 113u;
    while (!(m & 0x400u)) { m <<= 1; e -= 1u; }
    v.u = sign | (e << 23) | ((m & 0x3FFu) << 13);
  }
  return v.f;
}
"""
HELPERS["plait_c_f2h"] = """\
static inline uint16_t plait_c_f2h(double x) {
  union { double d; uint64_t u; } v;
  uint64_t a, m, q, rem, half;
  uint16_t sign;
  int e, shift;
  v.d = x;
  sign = (uint16_t)((v.u >> 48) & 0x8000u);
  a = v.u & 0x7FFFFFFFFFFFFFFFULL;
  if (a >= 0x7FF0000000000000ULL) return (uint16_t)(sign | 0x7C00u | (a > 0x7FF0000000000000ULL ? 0x200u : 0u));
  e = (int)(a >> 52) - 1023;
  if (e >= 16) return (uint16_t)(sign | 0x7C00u);
  if (e < -25) return sign;
  m = (a & 0xFFFFFFFFFFFFFULL) | 0x10000000000000ULL;
  shift = e >= -14 ? 42 : 42 + (-14 - e);
  q = m >> shift;
  rem = m & ((1ULL << shift) - 1u);
  half = 1ULL << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) q += 1u;
  if (e >= -14) q += (uint64_t)(e + 14) << 10; /* the implicit bit of q adds the last exponent step */
  return (uint16_t)(sign | (uint16_t)q);
}
"""
HELPERS["plait_c_rh"] = """\
static inline float plait_c_rh(double x) { return plait_c_h2f(plait_c_f2h(x)); }
"""
HELPER_DEPS = {"plait_c_rh": ("plait_c_h2f", "plait_c_f2h")}

ALIGN_MACRO = """\
#if defined(__GNUC__)
#define PLAIT_C_ALIGN(n) __attribute__((aligned(n)))
#else
#define PLAIT_C_ALIGN(n)
#endif
"""

# Options some functions are compiled with (emit.FunctionEmitter.optimize):
# - no-thread-jumps: gcc threads a requantization's clamp compares (min(max(v, lo), hi)) into the next
#   clamp of a fused chain (requantize -> table -> qnn.add -> qnn.mul), and the duplicated paths are
#   control flow its vectorizer cannot if-convert (a global -fno-thread-jumps measured slower on float
#   convolutions).
# - no-tree-slp-vectorize: gcc 12's SLP vectorizer drops the rounding of (double)(float)d in a group of
#   two doubles (-O2 and -O3, any -march: ``out[i] = (double)(float)(a[i] * c[i])`` for i < 2 returns
#   the unrounded product), which a float32 computation written as float64 steps needs. The loop
#   vectorizer is unaffected and stays on.
OPTIMIZE_MACRO = """\
#if defined(__GNUC__) && !defined(__clang__)
#define PLAIT_C_OPTIMIZE(...) __attribute__((optimize(__VA_ARGS__)))
#else
#define PLAIT_C_OPTIMIZE(...)
#endif
"""


def helper_source(names: set[str]) -> str:
    """The definitions of the helpers ``names`` (and what they use), in a fixed order."""
    need = set(names)
    for n in list(need):
        need.update(HELPER_DEPS.get(n, ()))
    return "".join(HELPERS[n] for n in HELPERS if n in need)
