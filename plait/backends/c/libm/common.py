"""What every math routine uses: contraction off, bit casts, float-float arithmetic, scaling by 2^k.

``PLAIT_C_MATH`` opens every definition: ``static inline`` and, with gcc, ``optimize("fp-contract=off")``,
so that no ``a * b + c`` of a routine becomes a fused multiply-add even in a file built with
``-ffp-contract=fast`` (a host piece with ``-libm=plait``): gcc then also refuses to inline a routine
into a caller built with contraction (checked: the routines give the same bits at ``-O0`` and at
``-O3 -march=native -ffp-contract=fast``, tests/backends/test_c_libm.py). Other compilers rely on the
build's ``-ffp-contract=off``, which every Cortex-M build has.

Float-float values (``plait_c_m_ff``: ``hi + lo`` exactly, or to about 2^-48 relative) come from:
``plait_c_m_sum`` (Knuth's two-sum: ``hi + lo == a + b`` exactly), ``plait_c_m_fsum`` (the same when
``|a| >= |b|`` or ``a == 0``), ``plait_c_m_mul`` (Dekker's product with Veltkamp's split:
``hi + lo == a * b`` exactly unless it overflows or its parts underflow).
"""

from __future__ import annotations

from plait.backends.c.libm.text import routine

BASE = routine("plait_c_m_base", (), r"""
#if defined(__GNUC__) && !defined(__clang__)
#define PLAIT_C_MATH static inline __attribute__((optimize("fp-contract=off")))
#else
#define PLAIT_C_MATH static inline
#endif
typedef struct { float hi, lo; } plait_c_m_ff;
PLAIT_C_MATH uint32_t plait_c_m_u(float x) { union { float f; uint32_t u; } v; v.f = x; return v.u; }
PLAIT_C_MATH float plait_c_m_f(uint32_t u) { union { float f; uint32_t u; } v; v.u = u; return v.f; }
/* a quiet NaN for a domain error (the same bits on every core) */
PLAIT_C_MATH float plait_c_m_nan(void) { return plait_c_m_f(0x7FC00000u); }
/* 2^k for -126 <= k <= 127 */
PLAIT_C_MATH float plait_c_m_pow2(int32_t k) { return plait_c_m_f((uint32_t)(k + 127) << 23); }
/* v * 2^k rounded once (to a subnormal, 0 or inf where it must), for 2^-8 <= |v| < 4 */
PLAIT_C_MATH float plait_c_m_ldexp(float v, int32_t k) {
  if (k > 126) return v * plait_c_m_pow2(126) * plait_c_m_pow2(k > 253 ? 127 : k - 126);
  if (k < -125) return v * plait_c_m_pow2(k < -218 ? -118 : k + 100) * plait_c_m_pow2(-100);
  return v * plait_c_m_pow2(k);
}
PLAIT_C_MATH plait_c_m_ff plait_c_m_sum(float a, float b) {
  plait_c_m_ff r;
  float bb;
  r.hi = a + b;
  bb = r.hi - a;
  r.lo = (a - (r.hi - bb)) + (b - bb);
  return r;
}
PLAIT_C_MATH plait_c_m_ff plait_c_m_fsum(float a, float b) {
  plait_c_m_ff r;
  r.hi = a + b;
  r.lo = b - (r.hi - a);
  return r;
}
PLAIT_C_MATH float plait_c_m_split(float a) { float c = 4097.0f * a; return c - (c - a); }
PLAIT_C_MATH plait_c_m_ff plait_c_m_mul(float a, float b) {
  plait_c_m_ff r;
  float ah = plait_c_m_split(a), al = a - ah, bh = plait_c_m_split(b), bl = b - bh;
  r.hi = a * b;
  r.lo = (((ah * bh - r.hi) + ah * bl) + al * bh) + al * bl;
  return r;
}
/* sqrt(h + l) as a float-float, for h > 0 normal and |l| <= ulp(h) */
PLAIT_C_MATH plait_c_m_ff plait_c_m_sqrt(float h, float l) {
  plait_c_m_ff r, p;
  r.hi = sqrtf(h);
  p = plait_c_m_mul(r.hi, r.hi);
  r.lo = (((h - p.hi) - p.lo) + l) / (r.hi + r.hi);
  return r;
}
""")

ROUTINES = [BASE]
