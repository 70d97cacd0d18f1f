"""log, log2, log10, log1p and the logarithm cores (asinh, acosh, atanh, pow).

Reduction: ``x = 2^e m`` with ``m`` in [0.75, 1.5) (subnormals scaled by 2^24 first), ``j`` the top 5
bits of the mantissa, ``ic_j`` a 12-bit approximation of ``1/c_j`` (``c_j`` the middle of ``j``'s
interval; ``ic = 1`` for the two intervals next to 1, so no cancellation near ``x = 1``). ``m`` is
split into 12 + 12 bits (a mask), so ``r = m ic_j - 1`` is exact as a float-float
(``|r| <= 1/32``). ``ln x = e ln2 + T_j + ln(1 + r)``, ``T_j = -ln(ic_j)`` a float-float table,
``ln2`` in 16 + 24 bits (``e ln2_hi`` exact). The light core (log, log2, log10, log1p, asinh, acosh,
atanh) sums ``T + r + r^2 Q(r)`` (``Q`` of degree 3, error 2^-33) with one fast two-sum; the full one
(pow) also keeps ``r^2 / 2`` exact and uses ``r^3 R(r)`` (degree 4, error 2^-40): a relative error
below 2^-36.
"""

from __future__ import annotations

from plait.backends.c.libm.text import routine

_BASE = ("plait_c_m_base",)

LOGR = routine("plait_c_m_logr", _BASE, r"""
static const float plait_c_m_logic[32] = {
  ${array:log.ic}
};
static const float plait_c_m_logtab[64] = {
  ${array:log.tab}
};
/* x > 0 finite = 2^e m, m in [0.75, 1.5); r = m ic_j - 1 exactly; *j the table index */
PLAIT_C_MATH plait_c_m_ff plait_c_m_logr(float x, int32_t *e, uint32_t *j) {
  uint32_t u = plait_c_m_u(x), mb;
  int32_t ex = -127;
  float m, mh, ic;
  if (u < 0x00800000u) {  /* subnormal */
    u = plait_c_m_u(x * 0x1p24f);
    ex -= 24;
  }
  ex += (int32_t)(u >> 23);
  *j = (u >> 18) & 31u;
  mb = u & 0x007FFFFFu;
  if (*j >= 16u) {  /* m in [0.75, 1) */
    mb |= 0x3F000000u;
    ex += 1;
  } else {
    mb |= 0x3F800000u;
  }
  *e = ex;
  m = plait_c_m_f(mb);
  mh = plait_c_m_f(mb & 0xFFFFF000u);
  ic = plait_c_m_logic[*j];
  return plait_c_m_sum(mh * ic - 1.0f, (m - mh) * ic);
}
/* ln(m) (light: relative error about 2^-30) as a float-float with |lo| <= ulp(hi); x = 2^e m */
PLAIT_C_MATH plait_c_m_ff plait_c_m_lnm(float x, int32_t *e) {
  uint32_t j;
  plait_c_m_ff r = plait_c_m_logr(x, e, &j), a;
  float q = r.hi * r.hi * ${horner:log.q:r.hi};
  a = plait_c_m_fsum(plait_c_m_logtab[2 * j], r.hi);
  return plait_c_m_fsum(a.hi, ((a.lo + plait_c_m_logtab[2 * j + 1]) + r.lo) + q);
}
/* ln(x) (light) as a float-float, x > 0 finite */
PLAIT_C_MATH plait_c_m_ff plait_c_m_ln(float x) {
  int32_t e;
  plait_c_m_ff l = plait_c_m_lnm(x, &e), a;
  float ef = (float)e;
  a = plait_c_m_fsum(ef * ${log.ln2[0]}, l.hi);
  a.lo = (a.lo + l.lo) + ef * ${log.ln2[1]};
  return a;
}
""")

LOGFF = routine("plait_c_m_logff", ("plait_c_m_logr",), r"""
/* ln(x) (full: relative error below 2^-36) as a normalized float-float, x > 0 finite */
PLAIT_C_MATH plait_c_m_ff plait_c_m_logff(float x) {
  int32_t e;
  uint32_t j;
  plait_c_m_ff r = plait_c_m_logr(x, &e, &j), h, s1, s2, s3;
  float ef = (float)e, q, lo;
  h = plait_c_m_mul(r.hi, r.hi);
  h.hi *= -0.5f;
  h.lo *= -0.5f;
  q = r.hi * r.hi * r.hi * ${horner:log.qff:r.hi};
  s1 = plait_c_m_fsum(ef * ${log.ln2[0]}, plait_c_m_logtab[2 * j]);
  s2 = plait_c_m_fsum(s1.hi, r.hi);
  s3 = plait_c_m_sum(s2.hi, h.hi);
  lo = ((s1.lo + s2.lo) + s3.lo) + ((ef * ${log.ln2[1]} + plait_c_m_logtab[2 * j + 1])
       + ((r.lo + h.lo) + (q - r.hi * r.lo)));
  return plait_c_m_fsum(s3.hi, lo);
}
""")

_SPECIAL = r"""
  uint32_t u = plait_c_m_u(x);
  if (u >= 0x7F800000u) {  /* NaN, +inf, x < 0 or -0 */
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return x + x;
    if (u == 0x7F800000u) return x;
    if (u != 0x80000000u) return plait_c_m_nan();
  }
  if ((u & 0x7FFFFFFFu) == 0u) return plait_c_m_f(0xFF800000u);  /* log(+-0) = -inf */
"""

LOG = routine("plait_c_logf", ("plait_c_m_logr",), r"""
PLAIT_C_MATH float plait_c_logf(float x) {
  plait_c_m_ff l;""" + _SPECIAL + r"""
  l = plait_c_m_ln(x);
  return l.hi + l.lo;
}
""")

LOG2 = routine("plait_c_log2f", ("plait_c_m_logr",), r"""
PLAIT_C_MATH float plait_c_log2f(float x) {
  int32_t e;
  plait_c_m_ff l, p, s;""" + _SPECIAL + r"""
  l = plait_c_m_lnm(x, &e);
  p = plait_c_m_mul(l.hi, ${log.inv_ln2[0]});
  p.lo += l.hi * ${log.inv_ln2[1]} + l.lo * ${log.inv_ln2[0]};
  s = plait_c_m_fsum((float)e, p.hi);
  return s.hi + (s.lo + p.lo);
}
""")

LOG10 = routine("plait_c_log10f", ("plait_c_m_logr",), r"""
PLAIT_C_MATH float plait_c_log10f(float x) {
  int32_t e;
  float ef;
  plait_c_m_ff l, p, s;""" + _SPECIAL + r"""
  l = plait_c_m_lnm(x, &e);
  ef = (float)e;
  p = plait_c_m_mul(l.hi, ${log.inv_ln10[0]});
  p.lo += l.hi * ${log.inv_ln10[1]} + l.lo * ${log.inv_ln10[0]};
  s = plait_c_m_fsum(ef * ${log.lg2[0]}, p.hi);
  return s.hi + ((s.lo + ef * ${log.lg2[1]}) + p.lo);
}
""")

LOG1P = routine("plait_c_log1pf", ("plait_c_m_logr",), r"""
PLAIT_C_MATH float plait_c_log1pf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu;
  plait_c_m_ff v, l;
  if (a > 0x7F800000u) return x + x;
  if (u == 0x7F800000u) return x;
  if (a < 0x33000000u) return x;  /* |x| < 2^-25 (and +-0) */
  if (x <= -1.0f) return x == -1.0f ? plait_c_m_f(0xFF800000u) : plait_c_m_nan();
  v = plait_c_m_sum(1.0f, x);
  l = plait_c_m_ln(v.hi);
  return l.hi + (l.lo + v.lo / v.hi);
}
""")

ROUTINES = [LOGR, LOGFF, LOG, LOG2, LOG10, LOG1P]
