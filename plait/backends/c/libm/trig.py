"""sin, cos, tan: reduction by the bits of 2/pi in integer arithmetic, polynomials on [-pi/4, pi/4].

Reduction (every ``|x| >= pi/4``, no separate medium range): ``|x| = m 2^E`` (``m`` the 24-bit
integer mantissa); the 96 bits of 2/pi from bit ``E - 1`` on times ``m`` (three 32 x 32 -> 64-bit
products) give ``|x| 2/pi`` modulo 4: the quadrant (2 bits) and 64 bits of fraction, truncated below
2^-70. The fraction, rounded to ``[-1/2, 1/2)``, is normalized, its top 48 bits made a float-float and
multiplied by pi/2 (a float-float): ``r`` with a relative error below 2^-44 for every float (the
closest a float comes to a multiple of pi/2 leaves 33 bits of fraction; tests/backends/test_c_libm.py
checks the bound). ``sin r = r + r^3 S(r^2)`` (degree 3, error 2^-32), ``cos r = 1 - r^2/2 +
r^4 C(r^2)`` (degree 3, error 2^-37; ``r^2/2`` exact), both as float-floats; ``tan`` is their
quotient with one correction step (``-cos/sin`` in odd quadrants).
"""

from __future__ import annotations

from plait.backends.c.libm.text import routine

_BASE = ("plait_c_m_base",)

REDUCE = routine("plait_c_m_rem_pio2", _BASE, r"""
static const uint32_t plait_c_m_two_over_pi[8] = {
  ${array:trig.bits}
};
/* |x| (bits a, pi/4 <= |x| < inf) = (4i + q) pi/2 + r: returns q, r in [-pi/4, pi/4] as a float-float */
PLAIT_C_MATH uint32_t plait_c_m_rem_pio2(uint32_t a, plait_c_m_ff *r) {
  const uint32_t *b = plait_c_m_two_over_pi;
  uint32_t m = (a & 0x007FFFFFu) | 0x00800000u, p = (a >> 23) - 120u;  /* bit E - 1 of 2/pi, E = exponent - 150 */
  uint32_t w = p >> 5, s = p & 31u, w0, w1, w2, q;
  uint64_t p0, p1, p2, lo, hi, f;
  int32_t lz = 0, neg = 0;
  float fh, fl, sc;
  plait_c_m_ff t;
  if (s == 0u) {
    w0 = b[w]; w1 = b[w + 1]; w2 = b[w + 2];
  } else {
    w0 = (b[w] << s) | (b[w + 1] >> (32u - s));
    w1 = (b[w + 1] << s) | (b[w + 2] >> (32u - s));
    w2 = (b[w + 2] << s) | (b[w + 3] >> (32u - s));
  }
  p0 = (uint64_t)m * w0;
  p1 = (uint64_t)m * w1;
  p2 = (uint64_t)m * w2;
  lo = p2 + (p1 << 32);
  hi = p0 + (p1 >> 32) + (lo < p2 ? 1u : 0u);
  q = (uint32_t)(hi >> 30) & 3u;
  f = (hi << 34) | (lo >> 30);
  if (f >> 63) {  /* fraction >= 1/2: the next quadrant, r < 0 */
    f = (uint64_t)0 - f;
    q = (q + 1u) & 3u;
    neg = 1;
  }
  if (!(f >> 32)) { f <<= 32; lz += 32; }
  if (!(f >> 48)) { f <<= 16; lz += 16; }
  if (!(f >> 56)) { f <<= 8; lz += 8; }
  if (!(f >> 60)) { f <<= 4; lz += 4; }
  if (!(f >> 62)) { f <<= 2; lz += 2; }
  if (!(f >> 63)) { f <<= 1; lz += 1; }
  sc = plait_c_m_pow2(-lz);
  fh = (float)(uint32_t)(f >> 40) * 0x1p-24f * sc;
  fl = (float)(uint32_t)((f >> 16) & 0xFFFFFFu) * 0x1p-48f * sc;
  t = plait_c_m_mul(fh, ${trig.pio2[0]});
  t.lo += fh * ${trig.pio2[1]} + fl * ${trig.pio2[0]};
  *r = plait_c_m_fsum(t.hi, t.lo);
  if (neg) {
    r->hi = -r->hi;
    r->lo = -r->lo;
  }
  return q;
}
/* sin(r), cos(r) for |r| <= pi/4 as float-floats */
PLAIT_C_MATH plait_c_m_ff plait_c_m_sin_ff(plait_c_m_ff r) {
  plait_c_m_ff o;
  float z = r.hi * r.hi;
  o.hi = r.hi;
  o.lo = r.hi * z * ${horner:sin.s:z} + r.lo * (1.0f - 0.5f * z);
  return o;
}
PLAIT_C_MATH plait_c_m_ff plait_c_m_cos_ff(plait_c_m_ff r) {
  plait_c_m_ff h = plait_c_m_mul(r.hi, r.hi), o;
  float z = h.hi;
  o = plait_c_m_fsum(1.0f, -0.5f * h.hi);
  o.lo = ((o.lo - 0.5f * h.lo) + z * z * ${horner:cos.c:z}) - r.hi * r.lo;
  return o;
}
/* the reduced argument of |x| (bits a, finite, >= 2^-12) and its quadrant */
PLAIT_C_MATH uint32_t plait_c_m_reduce(uint32_t a, plait_c_m_ff *r) {
  if (a < 0x3F490FDBu) {  /* |x| < pi/4 */
    r->hi = plait_c_m_f(a);
    r->lo = 0.0f;
    return 0u;
  }
  return plait_c_m_rem_pio2(a, r);
}
""")

SIN = routine("plait_c_sinf", ("plait_c_m_rem_pio2",), r"""
PLAIT_C_MATH float plait_c_sinf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu, q;
  plait_c_m_ff r, v;
  float y;
  if (a >= 0x7F800000u) return a == 0x7F800000u ? plait_c_m_nan() : x + x;
  if (a < 0x39800000u) return x;  /* |x| < 2^-12 */
  q = plait_c_m_reduce(a, &r);
  v = (q & 1u) ? plait_c_m_cos_ff(r) : plait_c_m_sin_ff(r);
  y = v.hi + v.lo;
  return ((q >> 1) ^ (u >> 31)) ? -y : y;
}
""")

COS = routine("plait_c_cosf", ("plait_c_m_rem_pio2",), r"""
PLAIT_C_MATH float plait_c_cosf(float x) {
  uint32_t a = plait_c_m_u(x) & 0x7FFFFFFFu, q;
  plait_c_m_ff r, v;
  float y;
  if (a >= 0x7F800000u) return a == 0x7F800000u ? plait_c_m_nan() : x + x;
  if (a < 0x39800000u) return 1.0f;
  q = plait_c_m_reduce(a, &r);
  v = (q & 1u) ? plait_c_m_sin_ff(r) : plait_c_m_cos_ff(r);
  y = v.hi + v.lo;
  return ((q + 1u) & 2u) ? -y : y;
}
""")

TAN = routine("plait_c_tanf", ("plait_c_m_rem_pio2",), r"""
PLAIT_C_MATH float plait_c_tanf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu, q;
  plait_c_m_ff r, n, d, p;
  float t, y;
  if (a >= 0x7F800000u) return a == 0x7F800000u ? plait_c_m_nan() : x + x;
  if (a < 0x39800000u) return x;
  q = plait_c_m_reduce(a, &r);
  n = plait_c_m_sin_ff(r);
  d = plait_c_m_cos_ff(r);
  n = plait_c_m_fsum(n.hi, n.lo);
  d = plait_c_m_fsum(d.hi, d.lo);
  if (q & 1u) {  /* -cos/sin */
    plait_c_m_ff s = n;
    n = d;
    d.hi = -s.hi;
    d.lo = -s.lo;
  }
  t = n.hi / d.hi;
  p = plait_c_m_mul(t, d.hi);
  y = t + ((((n.hi - p.hi) - p.lo) + n.lo) - t * d.lo) / d.hi;
  return (u >> 31) ? -y : y;
}
""")

ROUTINES = [REDUCE, SIN, COS, TAN]
