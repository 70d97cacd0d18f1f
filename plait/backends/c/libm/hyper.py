"""sinh, cosh, tanh (from the exponential core) and asinh, acosh, atanh (from the logarithm core).

``sinh x = x + x^3 S(x^2)`` below 1 (degree 4, error 2^-32), ``tanh x = x + x^3 T(x^2)`` below 0.55
(degree 5, error 2^-33); above, ``E = e^|x|`` (or ``e^(2|x|)``) is a float-float, ``1/E`` a
float-float from one correction of the rounded reciprocal, and ``(E -+ 1/E)/2``, ``1 - 2/(E + 1)``
are summed with exact two-sums (``cosh`` needs no polynomial: nothing cancels). The inverse functions
take the light logarithm of a float-float argument, ``ln(h + l) = ln h + l/h``: ``asinh x = ln(|x| +
sqrt(x^2 + 1))``, ``acosh x = ln(x + sqrt(x^2 - 1))`` (``x^2 -+ 1`` exact as float-floats, square roots as
float-floats), ``atanh x = ln((1 + x)/(1 - x)) / 2``; ``ln(2x) = ln x + ln 2`` for ``|x| > 2^12``.
"""

from __future__ import annotations

from plait.backends.c.libm.text import routine

_EXP = ("plait_c_m_expk",)
_LOG = ("plait_c_m_logr",)

HYP = routine("plait_c_m_recip", ("plait_c_m_base",), r"""
/* 1/(h + l) as a float-float (h + l normal, |l| <= |h| / 32) */
PLAIT_C_MATH plait_c_m_ff plait_c_m_recip(float h, float l) {
  plait_c_m_ff r, p;
  r.hi = 1.0f / (h + l);
  p = plait_c_m_mul(r.hi, h);
  r.lo = r.hi * (((1.0f - p.hi) - p.lo) - r.hi * l);
  return r;
}
""")

SINH = routine("plait_c_sinhf", ("plait_c_m_expk", "plait_c_m_recip"), r"""
PLAIT_C_MATH float plait_c_sinhf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu;
  float ax = plait_c_m_f(a), v, sc, eh, el;
  plait_c_m_ff e, i, d;
  int32_t k;
  if (a >= 0x7F800000u) return x + x;
  if (a < 0x39800000u) return x;  /* |x| < 2^-12 */
  if (a < 0x3F800000u) return x + x * (x * x) * ${horner:sinh.s:(x * x)};
  if (ax > 90.0f) {
    v = plait_c_m_f(0x7F800000u);
  } else {
    e = plait_c_m_expk(ax, 0.0f, &k);
    if (k > 12) {  /* e^-|x| below 2^-26 of e^|x| */
      v = plait_c_m_ldexp(e.hi + e.lo, k - 1);
    } else {
      sc = plait_c_m_pow2(k);
      eh = e.hi * sc;
      el = e.lo * sc;
      i = plait_c_m_recip(eh, el);
      d = plait_c_m_fsum(eh, -i.hi);
      v = 0.5f * (d.hi + ((d.lo + el) - i.lo));
    }
  }
  return (u >> 31) ? -v : v;
}
""")

COSH = routine("plait_c_coshf", ("plait_c_m_expk", "plait_c_m_recip"), r"""
PLAIT_C_MATH float plait_c_coshf(float x) {
  uint32_t a = plait_c_m_u(x) & 0x7FFFFFFFu;
  float ax = plait_c_m_f(a), sc, eh, el;
  plait_c_m_ff e, i, d;
  int32_t k;
  if (a > 0x7F800000u) return x + x;
  if (a < 0x39800000u) return 1.0f;  /* |x| < 2^-12 */
  if (ax > 90.0f) return plait_c_m_f(0x7F800000u);
  e = plait_c_m_expk(ax, 0.0f, &k);
  if (k > 12) return plait_c_m_ldexp(e.hi + e.lo, k - 1);
  sc = plait_c_m_pow2(k);
  eh = e.hi * sc;
  el = e.lo * sc;
  i = plait_c_m_recip(eh, el);
  d = plait_c_m_fsum(eh, i.hi);
  return 0.5f * (d.hi + ((d.lo + el) + i.lo));
}
""")

TANH = routine("plait_c_tanhf", ("plait_c_m_expk",), r"""
PLAIT_C_MATH float plait_c_tanhf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu;
  float ax = plait_c_m_f(a), v, sc, qh, ql;
  plait_c_m_ff e, d, p, s;
  int32_t k;
  if (a > 0x7F800000u) return x + x;
  if (a < 0x39800000u) return x;  /* |x| < 2^-12 */
  if (a < 0x3F0CCCCDu) return x + x * (x * x) * ${horner:tanh.t:(x * x)};  /* |x| < 0.55 */
  if (ax > 9.1f) {
    v = 1.0f;
  } else {  /* 1 - 2/(E + 1), E = e^(2|x|) */
    e = plait_c_m_expk(2.0f * ax, 0.0f, &k);
    sc = plait_c_m_pow2(k);
    d = plait_c_m_fsum(e.hi * sc, 1.0f);
    d.lo += e.lo * sc;
    qh = 2.0f / (d.hi + d.lo);
    p = plait_c_m_mul(qh, d.hi);
    ql = (((2.0f - p.hi) - p.lo) - qh * d.lo) * (0.5f * qh);
    s = plait_c_m_sum(1.0f, -qh);
    v = s.hi + (s.lo - ql);
  }
  return (u >> 31) ? -v : v;
}
""")

LNFF = routine("plait_c_m_ln_of", _LOG, r"""
/* ln(h + l) for h > 0 normal, |l| <= ulp(h), as a float */
PLAIT_C_MATH float plait_c_m_ln_of(float h, float l) {
  plait_c_m_ff v = plait_c_m_ln(h);
  return v.hi + (v.lo + l / h);
}
/* ln(2x) = ln(x) + ln 2 for x > 2^12 */
PLAIT_C_MATH float plait_c_m_ln_twice(float x) {
  plait_c_m_ff v = plait_c_m_ln(x), s = plait_c_m_fsum(v.hi, ${log.ln2[0]});
  return s.hi + ((s.lo + v.lo) + ${log.ln2[1]});
}
""")

ASINH = routine("plait_c_asinhf", ("plait_c_m_ln_of",), r"""
PLAIT_C_MATH float plait_c_asinhf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu;
  float ax = plait_c_m_f(a), v;
  plait_c_m_ff sq, b, s, w;
  if (a >= 0x7F800000u) return x + x;
  if (a < 0x39800000u) return x;  /* |x| < 2^-12 */
  if (a > 0x45800000u) {  /* |x| > 2^12 */
    v = plait_c_m_ln_twice(ax);
  } else {
    sq = plait_c_m_mul(ax, ax);
    b = plait_c_m_sum(1.0f, sq.hi);
    s = plait_c_m_sqrt(b.hi, b.lo + sq.lo);
    w = plait_c_m_fsum(s.hi, ax);
    v = plait_c_m_ln_of(w.hi, w.lo + s.lo);
  }
  return (u >> 31) ? -v : v;
}
""")

ACOSH = routine("plait_c_acoshf", ("plait_c_m_ln_of",), r"""
PLAIT_C_MATH float plait_c_acoshf(float x) {
  uint32_t u = plait_c_m_u(x);
  plait_c_m_ff sq, b, s, w;
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return x + x;
  if (u < 0x3F800000u || u > 0x7F800000u) return plait_c_m_nan();  /* x < 1 (-0 too) */
  if (u == 0x3F800000u) return 0.0f;
  if (u == 0x7F800000u) return x;
  if (u > 0x45800000u) return plait_c_m_ln_twice(x);
  sq = plait_c_m_mul(x, x);
  b = plait_c_m_sum(sq.hi, -1.0f);
  s = plait_c_m_sqrt(b.hi, b.lo + sq.lo);
  w = plait_c_m_fsum(x, s.hi);
  return plait_c_m_ln_of(w.hi, w.lo + s.lo);
}
""")

ATANH = routine("plait_c_atanhf", ("plait_c_m_ln_of",), r"""
PLAIT_C_MATH float plait_c_atanhf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu;
  float ax = plait_c_m_f(a), qh, ql, v;
  plait_c_m_ff n, d, p;
  if (a > 0x7F800000u) return x + x;
  if (a >= 0x3F800000u) return a == 0x3F800000u ? plait_c_m_f((u & 0x80000000u) | 0x7F800000u) : plait_c_m_nan();
  if (a < 0x39800000u) return x;  /* |x| < 2^-12 */
  n = plait_c_m_fsum(1.0f, ax);
  d = plait_c_m_fsum(1.0f, -ax);
  qh = n.hi / d.hi;
  p = plait_c_m_mul(qh, d.hi);
  ql = ((((n.hi - p.hi) - p.lo) + n.lo) - qh * d.lo) / d.hi;
  v = 0.5f * plait_c_m_ln_of(qh, ql);
  return (u >> 31) ? -v : v;
}
""")

ROUTINES = [HYP, SINH, COSH, TANH, LNFF, ASINH, ACOSH, ATANH]
