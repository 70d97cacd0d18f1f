"""asin, acos, atan, atan2.

``asin x = x + x^3 A(x^2)`` on [0, 1/2] (degree 5, error 2^-31); above, ``asin x = pi/2 - 2 asin(s)``,
``s = sqrt((1 - x)/2)`` as a float-float (``1 - x`` and the halving exact). ``acos`` from the same
pieces (``pi/2 - asin x``, ``2 asin s``, ``pi - 2 asin s``) with pi/2 and pi as float-floats.
``atan`` of a float-float ``q`` in [0, 1]: ``q + q^3 B(q^2)`` below 7/16 (degree 5, error 2^-33),
``atan(1/2) + atan((q - 1/2)/(1 + q/2))`` below 11/16, ``pi/4 + atan((q - 1)/(1 + q))`` above;
``atan x`` for ``|x| > 1`` is ``pi/2 - atan(1/x)`` (``1/x`` as a float-float), ``atan2`` divides the
smaller of ``|y|``, ``|x|`` by the larger as a float-float (both scaled by one power of two first, so
the product in the correction is exact) and adds pi/2 or pi as C99 F.9.1.4 says, special cases too.
"""

from __future__ import annotations

from plait.backends.c.libm.text import routine

_BASE = ("plait_c_m_base",)

ASIN_CORE = routine("plait_c_m_asin_core", _BASE, r"""
/* asin(x) - x for |x| <= 1/2 */
PLAIT_C_MATH float plait_c_m_asin_tail(float x) {
  float z = x * x;
  return x * z * ${horner:asin.a:z};
}
/* asin(sqrt(z)) for z in [0, 1/4] as s.hi + lo (s = sqrt(z) as a float-float) */
PLAIT_C_MATH plait_c_m_ff plait_c_m_asin_sqrt(float z) {
  plait_c_m_ff s;
  if (z == 0.0f) {
    s.hi = 0.0f;
    s.lo = 0.0f;
    return s;
  }
  s = plait_c_m_sqrt(z, 0.0f);
  s.lo += s.hi * z * ${horner:asin.a:z};
  return s;
}
""")

ASIN = routine("plait_c_asinf", ("plait_c_m_asin_core",), r"""
PLAIT_C_MATH float plait_c_asinf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu;
  plait_c_m_ff s, d;
  float ax = plait_c_m_f(a), v;
  if (a > 0x3F800000u) return a > 0x7F800000u ? x + x : plait_c_m_nan();
  if (a < 0x39800000u) return x;  /* |x| < 2^-12 */
  if (a <= 0x3F000000u) return x + plait_c_m_asin_tail(x);
  s = plait_c_m_asin_sqrt((1.0f - ax) * 0.5f);
  d = plait_c_m_fsum(${pio2[0]}, -2.0f * s.hi);
  v = d.hi + ((d.lo + ${pio2[1]}) - 2.0f * s.lo);
  return (u >> 31) ? -v : v;
}
""")

ACOS = routine("plait_c_acosf", ("plait_c_m_asin_core",), r"""
PLAIT_C_MATH float plait_c_acosf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu;
  plait_c_m_ff s, d;
  if (a > 0x3F800000u) return a > 0x7F800000u ? x + x : plait_c_m_nan();
  if (a <= 0x3F000000u) {  /* pi/2 - asin(x) */
    d = plait_c_m_fsum(${pio2[0]}, -x);
    return d.hi + ((d.lo + ${pio2[1]}) - plait_c_m_asin_tail(x));
  }
  if (!(u >> 31)) {  /* 2 asin(sqrt((1 - x)/2)) */
    s = plait_c_m_asin_sqrt((1.0f - x) * 0.5f);
    return 2.0f * s.hi + 2.0f * s.lo;
  }
  s = plait_c_m_asin_sqrt((1.0f + x) * 0.5f);  /* pi - 2 asin(sqrt((1 + x)/2)) */
  d = plait_c_m_fsum(${pi[0]}, -2.0f * s.hi);
  return d.hi + ((d.lo + ${pi[1]}) - 2.0f * s.lo);
}
""")

ATAN_CORE = routine("plait_c_m_atan01", _BASE, r"""
/* atan(qh + ql) for 0 <= qh <= 1 (|ql| <= ulp(qh)) as hi + lo, not normalized */
PLAIT_C_MATH plait_c_m_ff plait_c_m_atan01(float qh, float ql) {
  plait_c_m_ff o;
  float t, z;
  if (qh < 0.4375f) {
    z = qh * qh;
    o.hi = qh;
    o.lo = ql * (1.0f - z) + qh * z * ${horner:atan.a:z};
    return o;
  }
  if (qh < 0.6875f) {
    t = ((qh - 0.5f) + ql) / (1.0f + 0.5f * qh);
    o.hi = ${atan.half[0]};
    o.lo = ${atan.half[1]};
  } else {
    t = ((qh - 1.0f) + ql) / (1.0f + qh);
    o.hi = ${atan.one[0]};
    o.lo = ${atan.one[1]};
  }
  z = t * t;
  o.lo += t + t * z * ${horner:atan.a:z};
  return o;
}
""")

ATAN = routine("plait_c_atanf", ("plait_c_m_atan01",), r"""
PLAIT_C_MATH float plait_c_atanf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu;
  plait_c_m_ff o, p, d;
  float ax = plait_c_m_f(a), v, qh;
  if (a > 0x7F800000u) return x + x;
  if (a < 0x39800000u) return x;  /* |x| < 2^-12 */
  if (a <= 0x3F800000u) {
    o = plait_c_m_atan01(ax, 0.0f);
    v = o.hi + o.lo;
  } else if (a >= 0x4C800000u) {  /* |x| >= 2^26: pi/2 - 1/|x| */
    v = ${pio2[0]} + (${pio2[1]} - 1.0f / ax);
  } else {  /* pi/2 - atan(1/|x|) */
    qh = 1.0f / ax;
    p = plait_c_m_mul(qh, ax);
    o = plait_c_m_atan01(qh, qh * ((1.0f - p.hi) - p.lo));
    d = plait_c_m_fsum(${pio2[0]}, -o.hi);
    v = d.hi + ((d.lo + ${pio2[1]}) - o.lo);
  }
  return (u >> 31) ? -v : v;
}
""")

ATAN2 = routine("plait_c_atan2f", ("plait_c_m_atan01",), r"""
PLAIT_C_MATH float plait_c_atan2f(float y, float x) {
  uint32_t uy = plait_c_m_u(y), ux = plait_c_m_u(x), ay = uy & 0x7FFFFFFFu, ax = ux & 0x7FFFFFFFu, ea;
  int32_t swap, k;
  float num, den, qh, ql, v, sc;
  plait_c_m_ff o, d, p;
  if (ax > 0x7F800000u) return x + x;
  if (ay > 0x7F800000u) return y + y;
  if (ay == 0u) {  /* atan2(+-0, x) = +-0 for x = +0 or x > 0, +-pi for x = -0 or x < 0 */
    if (!(ux >> 31)) return y;
    v = ${pi[0]};
  } else if (ax == 0u) {
    v = ${pio2[0]};
  } else if (ay == 0x7F800000u) {
    v = ax == 0x7F800000u ? ((ux >> 31) ? ${atan.3pio4} : ${atan.pio4}) : ${pio2[0]};
  } else if (ax == 0x7F800000u) {
    v = (ux >> 31) ? ${pi[0]} : 0.0f;
  } else {
    swap = ay > ax;
    num = plait_c_m_f(swap ? ax : ay);
    den = plait_c_m_f(swap ? ay : ax);
    qh = num / den;
    ql = 0.0f;
    if (qh >= 0x1p-26f) {  /* scale den into [1, 2) (exact: num/den >= 2^-26) and correct the quotient */
      if (den < 0x1p-100f) {
        num *= 0x1p64f;
        den *= 0x1p64f;
      }
      ea = plait_c_m_u(den) >> 23;
      k = 127 - (int32_t)ea;
      sc = plait_c_m_pow2(k / 2);
      num = num * sc * plait_c_m_pow2(k - k / 2);
      den = den * sc * plait_c_m_pow2(k - k / 2);
      p = plait_c_m_mul(qh, den);
      ql = ((num - p.hi) - p.lo) / den;
    }
    o = plait_c_m_atan01(qh, ql);
    if (!swap && !(ux >> 31)) {
      v = o.hi + o.lo;
    } else if (!swap) {  /* pi - atan(q) */
      d = plait_c_m_fsum(${pi[0]}, -o.hi);
      v = d.hi + ((d.lo + ${pi[1]}) - o.lo);
    } else if (!(ux >> 31)) {  /* pi/2 - atan(q) */
      d = plait_c_m_fsum(${pio2[0]}, -o.hi);
      v = d.hi + ((d.lo + ${pio2[1]}) - o.lo);
    } else {  /* pi/2 + atan(q) */
      d = plait_c_m_fsum(${pio2[0]}, o.hi);
      v = d.hi + ((d.lo + ${pio2[1]}) + o.lo);
    }
  }
  return (uy >> 31) ? -v : v;
}
""")

ROUTINES = [ASIN_CORE, ASIN, ACOS, ATAN_CORE, ATAN, ATAN2]
