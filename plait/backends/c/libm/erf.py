"""erf and erfc.

``erf x = x + x P(x^2)`` for ``|x| < 1`` (degree 7, error 2^-30); ``erfc x = 1 - x - x P(x^2)`` for
``|x| < 1/2``. For ``|x|`` in [1/2, 10.1], ``erfc |x| = e^(-x^2) t G(t)`` with ``t = 1/|x|`` and ``G``
(``x e^(x^2) erfc x``, between 0.3 and 0.57) a polynomial in ``t - t_mid`` on three intervals
(``|x|`` in [1/2, 1), [1, 2), [2, 10.1]; degrees 9, 8, 9, errors below 2^-30) whose constant term is a
float-float; ``x^2`` is exact (a float-float) and so is the argument of the exponential core, ``t`` is
a float-float, and the product of the three is summed exactly before the one rounding (and the scaling:
subnormal results from 9.2 on). ``erf |x| = 1 - erfc |x|`` from 1 on, ``erfc x = 2 - erfc |x|`` for
``x <= -1/2``; ``erf`` is +-1 beyond 3.95, ``erfc`` 0 beyond 10.1 and 2 below -3.95.
"""

from __future__ import annotations

from plait.backends.c.libm.text import routine

ERFC_CORE = routine("plait_c_m_erfc_big", ("plait_c_m_expk",), r"""
static const float plait_c_m_erfcg[33] = {
  ${array:erfc.g0},
  ${array:erfc.g1}, 0.0f,
  ${array:erfc.g2}
};
static const float plait_c_m_erfcmid[3] = {${erfc.g0_mid}, ${erfc.g1_mid}, ${erfc.g2_mid}};
/* erfc(a) = 2^k (hi + lo) for a in [1/2, 10.1] */
PLAIT_C_MATH plait_c_m_ff plait_c_m_erfc_big(float a, int32_t *k) {
  plait_c_m_ff sq = plait_c_m_mul(a, a), e, p, b;
  int32_t row = a < 1.0f ? 0 : a < 2.0f ? 1 : 2, i;
  const float *g = plait_c_m_erfcg + 11 * row;
  float th = 1.0f / a, tl, s, v;
  e = plait_c_m_expk(-sq.hi, -sq.lo, k);
  p = plait_c_m_mul(th, a);
  tl = th * ((1.0f - p.hi) - p.lo);
  s = th - plait_c_m_erfcmid[row];
  v = g[10];
  for (i = 9; i >= 2; --i) v = g[i] + s * v;
  p = plait_c_m_mul(e.hi, th);  /* e^(-a^2) t */
  p = plait_c_m_fsum(p.hi, p.lo + (e.hi * tl + e.lo * th));
  b = plait_c_m_mul(p.hi, g[0]);  /* times G(t) */
  b.lo += p.hi * (g[1] + s * v) + p.lo * g[0];
  return b;
}
""")

ERF = routine("plait_c_erff", ("plait_c_m_erfc_big",), r"""
PLAIT_C_MATH float plait_c_erff(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu;
  plait_c_m_ff b, d;
  float sc, v;
  int32_t k;
  if (a > 0x7F800000u) return x + x;
  if (a < 0x3F800000u) return x + x * ${horner:erf.p:(x * x)};  /* |x| < 1 */
  if (a > 0x407CCCCDu) {  /* |x| > 3.95 */
    v = 1.0f;
  } else {
    b = plait_c_m_erfc_big(plait_c_m_f(a), &k);
    sc = plait_c_m_pow2(k);
    d = plait_c_m_fsum(1.0f, -(b.hi * sc));
    v = d.hi + (d.lo - b.lo * sc);
  }
  return (u >> 31) ? -v : v;
}
""")

ERFC = routine("plait_c_erfcf", ("plait_c_m_erfc_big",), r"""
PLAIT_C_MATH float plait_c_erfcf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu;
  plait_c_m_ff b, d;
  float sc;
  int32_t k;
  if (a > 0x7F800000u) return x + x;
  if (a < 0x3F000000u) {  /* |x| < 1/2: 1 - erf(x) */
    d = plait_c_m_fsum(1.0f, -x);
    return d.hi + (d.lo - x * ${horner:erf.p:(x * x)});
  }
  if (u >> 31) {
    if (a > 0x407CCCCDu) return 2.0f;  /* x < -3.95 */
    b = plait_c_m_erfc_big(plait_c_m_f(a), &k);
    sc = plait_c_m_pow2(k);
    d = plait_c_m_fsum(2.0f, -(b.hi * sc));
    return d.hi + (d.lo - b.lo * sc);
  }
  if (x > 10.1f) return 0.0f;
  b = plait_c_m_erfc_big(x, &k);
  return plait_c_m_ldexp(b.hi + b.lo, k);
}
""")

ROUTINES = [ERFC_CORE, ERF, ERFC]
