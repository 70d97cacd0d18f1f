"""pow, cbrt and an exact fmaf.

``pow(x, y) = e^(y ln|x|)``: ``ln|x|`` from the full logarithm core (a float-float, relative error below
2^-36), ``y ln|x|`` a float-float (Dekker's product), then the exponential core of a float-float
argument and one rounding (and scaling: overflow, subnormals, underflow). The special cases are C99's
(F.9.4.4): ``pow(x, +-0) = 1`` and ``pow(1, y) = 1`` even for NaN, zeros and infinities by the parity of
an integer ``y``, ``pow(-1, +-inf) = 1``, a negative ``x`` with a non-integer ``y`` is NaN.

``cbrt``: ``x = 2^(3q + i) m``, ``y`` a cubic fit of ``cbrt m`` (error 2^-13) times ``2^(i/3)``, one
Newton step, then one correction with the residual ``2^i m - y^3`` computed exactly (float-floats).

``fmaf`` (TIR's ``fma``, emitted by the int8 ``qnn.add``): the hardware instruction where the compiler
says it has one (``__FP_FAST_FMAF``: FPv4/FPv5 and the M55, x86 with FMA), else exact in integer
arithmetic (the 48-bit product and the addend aligned in 64 bits with a sticky bit, rounded once to
nearest even): newlib's ``fmaf`` rounds twice (through double), so it is not used on the M0.
"""

from __future__ import annotations

from plait.backends.c.libm.text import routine

POW = routine("plait_c_powf", ("plait_c_m_logff", "plait_c_m_expk"), r"""
PLAIT_C_MATH float plait_c_powf(float x, float y) {
  uint32_t ux = plait_c_m_u(x), uy = plait_c_m_u(y), ax = ux & 0x7FFFFFFFu, ay = uy & 0x7FFFFFFFu;
  int32_t ey = (int32_t)(ay >> 23) - 127, yint, neg, k;
  plait_c_m_ff l, z, e;
  float v;
  if (ay == 0u || ux == 0x3F800000u) return 1.0f;
  if (ax > 0x7F800000u) return x + x;
  if (ay > 0x7F800000u) return y + y;
  /* y: 0 not an integer, 1 an odd integer, 2 an even integer */
  if (ey < 0) yint = 0;
  else if (ey >= 24) yint = 2;
  else if (ay & (0x007FFFFFu >> ey)) yint = 0;
  else yint = ((ay >> (23 - ey)) & 1u) ? 1 : 2;
  if (ay == 0x7F800000u) {  /* y = +-inf */
    if (ax == 0x3F800000u) return 1.0f;
    return ((ax < 0x3F800000u) == !(uy >> 31)) ? 0.0f : plait_c_m_f(0x7F800000u);
  }
  neg = (ux >> 31) && yint == 1;
  if (ax == 0u || ax == 0x7F800000u) {  /* x = +-0, +-inf */
    v = ((ax == 0u) == ((uy >> 31) != 0u)) ? plait_c_m_f(0x7F800000u) : 0.0f;
    return neg ? -v : v;
  }
  if ((ux >> 31) && yint == 0) return plait_c_m_nan();
  if (ax == 0x3F800000u) return neg ? -1.0f : 1.0f;  /* x = -1 */
  l = plait_c_m_logff(plait_c_m_f(ax));
  v = y * l.hi;
  if (v > 90.0f) {
    v = plait_c_m_f(0x7F800000u);
  } else if (v < -105.0f) {
    v = 0.0f;
  } else {
    z = plait_c_m_mul(y, l.hi);
    e = plait_c_m_expk(z.hi, z.lo + y * l.lo, &k);
    v = plait_c_m_ldexp(e.hi + e.lo, k);
  }
  return neg ? -v : v;
}
""")

CBRT = routine("plait_c_cbrtf", ("plait_c_m_base",), r"""
static const float plait_c_m_cbrtr[3] = {${array:cbrt.r}};
PLAIT_C_MATH float plait_c_cbrtf(float x) {
  uint32_t u = plait_c_m_u(x), a = u & 0x7FFFFFFFu;
  int32_t e = -127, q, i;
  float m, am, y, v;
  plait_c_m_ff s, c;
  if (a == 0u || a >= 0x7F800000u) return x + x;  /* +-0, +-inf, NaN */
  if (a < 0x00800000u) {  /* subnormal */
    a = plait_c_m_u(plait_c_m_f(a) * 0x1p24f);
    e -= 24;
  }
  e += (int32_t)(a >> 23);
  q = (e + 153) / 3 - 51;  /* floor(e / 3) */
  i = e - 3 * q;
  m = plait_c_m_f((a & 0x007FFFFFu) | 0x3F800000u);
  am = m * (float)(1 << i);  /* exact: in [1, 8) */
  y = ${horner:cbrt.p:m} * plait_c_m_cbrtr[i];
  y = y - (y - am / (y * y)) * (1.0f / 3.0f);
  s = plait_c_m_mul(y, y);
  c = plait_c_m_mul(y, s.hi);
  c.lo += y * s.lo;
  y = y + ((am - c.hi) - c.lo) / (3.0f * s.hi);
  v = y * plait_c_m_pow2(q);
  return (u >> 31) ? -v : v;
}
""")

FMA = routine("plait_c_fmaf", ("plait_c_m_base",), r"""
#if !defined(__FP_FAST_FMAF)
/* a * b + c rounded once, a, b finite and nonzero, c finite */
PLAIT_C_MATH float plait_c_m_fma_exact(float a, float b, float c) {
  uint32_t ua = plait_c_m_u(a), ub = plait_c_m_u(b), uc = plait_c_m_u(c), sx, sy, s, mant;
  int32_t ea = (int32_t)((ua >> 23) & 0xFFu), eb = (int32_t)((ub >> 23) & 0xFFu), ec = (int32_t)((uc >> 23) & 0xFFu);
  int32_t ex, ey, e, n, lsb, shift;
  uint64_t ma = ua & 0x007FFFFFu, mb = ub & 0x007FFFFFu, mc = uc & 0x007FFFFFu, X, Y, Z, rem, half;
  if (ea) ma |= 0x00800000u; else ea = 1;
  if (eb) mb |= 0x00800000u; else eb = 1;
  if (ec) mc |= 0x00800000u; else ec = 1;
  /* value = X 2^ex + -Y 2^ey, both below 2^61 */
  X = (ma * mb) << 13;
  ex = ea + eb - 300 - 13;
  Y = mc << 37;
  ey = ec - 150 - 37;
  sx = (ua ^ ub) >> 31;
  sy = uc >> 31;
  if (Y == 0u) ey = ex;
  if (ex >= ey) {
    shift = ex - ey;
    Y = shift > 62 ? (Y != 0u) : (Y >> shift) | ((Y & ((((uint64_t)1) << shift) - 1u)) != 0u);
    e = ex;
  } else {
    shift = ey - ex;
    X = shift > 62 ? (X != 0u) : (X >> shift) | ((X & ((((uint64_t)1) << shift) - 1u)) != 0u);
    e = ey;
  }
  if (sx == sy) {
    Z = X + Y;
    s = sx;
  } else if (X >= Y) {
    Z = X - Y;
    s = sx;
  } else {
    Z = Y - X;
    s = sy;
  }
  if (Z == 0u) return 0.0f;  /* exact cancellation: +0 */
  for (n = 63; !((Z >> n) & 1u); --n) {
  }
  lsb = n + e - 23;  /* weight of the last kept bit: 24 bits, or 2^-149 for a subnormal */
  if (lsb < -149) lsb = -149;
  shift = lsb - e;
  if (shift <= 0) {
    mant = (uint32_t)(Z << -shift);
  } else if (shift > 63) {
    mant = 0u;
  } else {
    rem = Z & ((((uint64_t)1) << shift) - 1u);
    half = ((uint64_t)1) << (shift - 1);
    mant = (uint32_t)(Z >> shift);
    if (rem > half || (rem == half && (mant & 1u))) mant += 1u;
  }
  if (mant >> 24) {  /* rounded up to 2^24 */
    mant >>= 1;
    lsb += 1;
  }
  if (mant >= 0x00800000u) {
    if (lsb + 23 + 127 >= 255) return plait_c_m_f((s << 31) | 0x7F800000u);
    mant = ((uint32_t)(lsb + 23 + 127) << 23) | (mant & 0x007FFFFFu);
  }
  return plait_c_m_f((s << 31) | mant);
}
#endif
PLAIT_C_MATH float plait_c_fmaf(float a, float b, float c) {
#if defined(__FP_FAST_FMAF)
  return fmaf(a, b, c);
#else
  uint32_t aa = plait_c_m_u(a) & 0x7FFFFFFFu, ab = plait_c_m_u(b) & 0x7FFFFFFFu, ac = plait_c_m_u(c) & 0x7FFFFFFFu;
  if (aa > 0x7F800000u) return a + a;  /* the first NaN */
  if (ab > 0x7F800000u) return b + b;
  if (ac > 0x7F800000u) return c + c;
  if (aa == 0x7F800000u || ab == 0x7F800000u || aa == 0u || ab == 0u) return a * b + c;  /* a * b exact */
  if (ac == 0x7F800000u) return c;
  return plait_c_m_fma_exact(a, b, c);
#endif
}
""")

ROUTINES = [POW, CBRT, FMA]
