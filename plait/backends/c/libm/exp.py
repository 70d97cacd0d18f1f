"""exp, exp2, expm1 and the exponential core the others use (sinh, cosh, tanh, erfc, pow).

Reduction: ``z = n ln2/32 + r`` with ``n`` the integer nearest ``z * 32/ln2`` (the magic-number
rounding: no float-to-int conversion, which is a library call on the M0), ``ln2/32`` in three parts
(11 + 11 + 24 bits: ``n * c0`` and ``n * c1`` are exact for ``|n| < 2^13``), ``|r| <= ln2/64`` as a
float-float. Then ``e^z = 2^(n >> 5) * T[n & 31] * (1 + p)``, ``T[j] = 2^(j/32)`` as a float-float
table and ``p = r + r^2 Q(r)`` (``Q`` of degree 2, error 2^-42): the result is ``2^k (hi + lo)``,
``hi + lo`` in [0.98, 2.04] with a relative error below 2^-30, rounded once by the caller.
"""

from __future__ import annotations

from plait.backends.c.libm.text import routine

_BASE = ("plait_c_m_base",)

EXPK = routine("plait_c_m_expk", _BASE, r"""
static const float plait_c_m_exptab[64] = {
  ${array:exp.tab}
};
/* 2^(n/32) (1 + r + r^2 Q(r)) as 2^k (hi + lo), r = rh + rl (|rh| <= ln2/64, |rl| <= ulp(rh)) */
PLAIT_C_MATH plait_c_m_ff plait_c_m_exp_tail(int32_t n, plait_c_m_ff r, int32_t *k) {
  plait_c_m_ff o;
  int32_t j = n & 31;
  float p = r.hi + (r.hi * r.hi * ${horner:exp.q:r.hi} + r.lo);
  *k = (n - j) / 32;
  o.hi = plait_c_m_exptab[2 * j];
  o.lo = o.hi * p + plait_c_m_exptab[2 * j + 1];
  return o;
}
/* e^(zh + zl) as 2^k (hi + lo), for |zh| <= 105 and |zl| <= 2^-12 |zh| (a float-float argument) */
PLAIT_C_MATH plait_c_m_ff plait_c_m_expk(float zh, float zl, int32_t *k) {
  const float magic = 0x1.8p23f;
  float t = zh * ${exp.inv_c} + magic;
  float nf = t - magic;
  int32_t n = (int32_t)(plait_c_m_u(t) - 0x4B400000u);
  plait_c_m_ff s = plait_c_m_sum(zh - nf * ${exp.c[0]}, -(nf * ${exp.c[1]}));
  return plait_c_m_exp_tail(n, plait_c_m_fsum(s.hi, (s.lo - nf * ${exp.c[2]}) + zl), k);
}
""")

EXP = routine("plait_c_expf", ("plait_c_m_expk",), r"""
PLAIT_C_MATH float plait_c_expf(float x) {
  plait_c_m_ff e;
  int32_t k;
  if ((plait_c_m_u(x) & 0x7FFFFFFFu) > 0x7F800000u) return x + x;
  if (x > 89.0f) return plait_c_m_f(0x7F800000u);
  if (x < -104.0f) return 0.0f;
  e = plait_c_m_expk(x, 0.0f, &k);
  return plait_c_m_ldexp(e.hi + e.lo, k);
}
""")

EXP2 = routine("plait_c_exp2f", ("plait_c_m_expk",), r"""
PLAIT_C_MATH float plait_c_exp2f(float x) {
  const float magic = 0x1.8p23f;
  plait_c_m_ff r, e;
  float t, rr;
  int32_t k;
  if ((plait_c_m_u(x) & 0x7FFFFFFFu) > 0x7F800000u) return x + x;
  if (x >= 128.0f) return plait_c_m_f(0x7F800000u);
  if (x < -151.0f) return 0.0f;
  t = x * 32.0f + magic;
  rr = x - (t - magic) * 0.03125f;  /* exact: |rr| <= 1/64 */
  r = plait_c_m_mul(rr, ${ln2[0]});
  r.lo += rr * ${ln2[1]};
  e = plait_c_m_exp_tail((int32_t)(plait_c_m_u(t) - 0x4B400000u), plait_c_m_fsum(r.hi, r.lo), &k);
  return plait_c_m_ldexp(e.hi + e.lo, k);
}
""")

EXPM1 = routine("plait_c_expm1f", ("plait_c_m_expk",), r"""
PLAIT_C_MATH float plait_c_expm1f(float x) {
  plait_c_m_ff e, s;
  uint32_t a = plait_c_m_u(x) & 0x7FFFFFFFu;
  int32_t k;
  float sc;
  if (a > 0x7F800000u) return x + x;
  if (x > 89.0f) return plait_c_m_f(0x7F800000u);
  if (x < -17.5f) return -1.0f;
  if (a < 0x33000000u) return x;  /* |x| < 2^-25 */
  if (a < 0x3EB33333u) return x + x * x * ${horner:expm1.p:x};  /* |x| < 0.35 */
  e = plait_c_m_expk(x, 0.0f, &k);
  if (k > 100) return plait_c_m_ldexp(e.hi + e.lo, k);
  sc = plait_c_m_pow2(k);
  s = plait_c_m_sum(e.hi * sc, -1.0f);
  return s.hi + (s.lo + e.lo * sc);
}
""")

ROUTINES = [EXPK, EXP, EXP2, EXPM1]
