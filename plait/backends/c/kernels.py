"""C kernels the schedule calls by name (``call_extern``) for work gcc does not vectorize well from
loops: the C backend prints a kernel's source in the file's head instead of an ``extern``
declaration. Each has a plain C body computing the same numbers as its ISA-specific one (integers:
bit-identical), chosen at compile time.

``plait_q8_outer(x, w, sums, n, p, c, o)``: the int32 sums of a 1x1 convolution's ``"outer"`` form
(:data:`plait.op.qnn_nn.OUTER_LANES`): ``x`` uint8 ``[n, p, c]`` (pixels channels-last), ``w`` int8
``[o/16, c/4, 16, 4]``, ``sums`` int32 ``[n, o, p]``. With AVX-512 VNNI, 16 output channels in the
lanes of one accumulator, ``vpdpbusd`` of 4 input bytes of a pixel broadcast by 64 weight bytes,
blocks of 4 pixels; no horizontal sums.

``plait_dot_<a>_<b>(a, b, n, za, zb)``: an int8 / int16 dot product, SMLAD on Cortex-M cores with the
DSP extension (:mod:`plait.backends.c.dsp_kernels`).
"""

from __future__ import annotations

from plait.backends.c.dsp_kernels import dot_kernels

OUTER = r"""
#include <string.h>
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#include <immintrin.h>
#endif
static void plait_q8_outer(const void* xv, const void* wv, void* sv, int32_t n, int32_t np, int32_t c, int32_t o) {
  const uint8_t* x = (const uint8_t*)xv;
  const int8_t* w = (const int8_t*)wv;
  int32_t* s = (int32_t*)sv;
  for (int32_t b = 0; b < n; ++b, x += (size_t)np * c, s += (size_t)o * np) {
    for (int32_t ob = 0; ob < o / 16; ++ob) {
      const int8_t* wb = w + (size_t)ob * c * 16;
      int32_t* sb = s + (size_t)ob * 16 * np;
      int32_t p = 0;
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
      for (; p + 4 <= np; p += 4) {
        const uint8_t* xp = x + (size_t)p * c;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
        for (int32_t k = 0; k < c; k += 4) {
          __m512i wk = _mm512_loadu_si512((const void*)(wb + (size_t)k * 16));
          int32_t q0, q1, q2, q3;
          memcpy(&q0, xp + k, 4); memcpy(&q1, xp + c + k, 4);
          memcpy(&q2, xp + 2 * c + k, 4); memcpy(&q3, xp + 3 * c + k, 4);
          a0 = _mm512_dpbusd_epi32(a0, _mm512_set1_epi32(q0), wk);
          a1 = _mm512_dpbusd_epi32(a1, _mm512_set1_epi32(q1), wk);
          a2 = _mm512_dpbusd_epi32(a2, _mm512_set1_epi32(q2), wk);
          a3 = _mm512_dpbusd_epi32(a3, _mm512_set1_epi32(q3), wk);
        }
        /* 4 x 4 transposes in each 128-bit lane: r[k] lane l = channel 4l + k of the 4 pixels */
        __m512i t0 = _mm512_unpacklo_epi32(a0, a1), t1 = _mm512_unpackhi_epi32(a0, a1);
        __m512i t2 = _mm512_unpacklo_epi32(a2, a3), t3 = _mm512_unpackhi_epi32(a2, a3);
        __m512i r[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                        _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
        int32_t* sp = sb + p;
        for (int32_t k = 0; k < 4; ++k) {
          _mm_storeu_si128((__m128i*)(sp + (size_t)k * np), _mm512_castsi512_si128(r[k]));
          _mm_storeu_si128((__m128i*)(sp + (size_t)(4 + k) * np), _mm512_extracti32x4_epi32(r[k], 1));
          _mm_storeu_si128((__m128i*)(sp + (size_t)(8 + k) * np), _mm512_extracti32x4_epi32(r[k], 2));
          _mm_storeu_si128((__m128i*)(sp + (size_t)(12 + k) * np), _mm512_extracti32x4_epi32(r[k], 3));
        }
      }
      for (; p < np; ++p) {  /* the last pixels one at a time */
        const uint8_t* xp = x + (size_t)p * c;
        __m512i a0 = _mm512_setzero_si512();
        for (int32_t k = 0; k < c; k += 4) {
          int32_t q0;
          memcpy(&q0, xp + k, 4);
          a0 = _mm512_dpbusd_epi32(a0, _mm512_set1_epi32(q0), _mm512_loadu_si512((const void*)(wb + (size_t)k * 16)));
        }
        int32_t t[16];
        _mm512_storeu_si512((void*)t, a0);
        for (int32_t j = 0; j < 16; ++j) sb[(size_t)j * np + p] = t[j];
      }
#endif
      for (; p < np; ++p) {  /* (without VNNI: plain C) */
        const uint8_t* xp = x + (size_t)p * c;
        int32_t acc[16] = {0};
        for (int32_t k = 0; k < c; k += 4)
          for (int32_t j = 0; j < 16; ++j)
            for (int32_t q = 0; q < 4; ++q)
              acc[j] += (int32_t)xp[k + q] * (int32_t)wb[(size_t)k * 16 + j * 4 + q];
        for (int32_t j = 0; j < 16; ++j) sb[(size_t)j * np + p] = acc[j];
      }
    }
  }
}
"""

KERNELS = {"plait_q8_outer": OUTER, **dot_kernels()}
"""Kernel name -> its C source (needs <stdint.h>, <stddef.h>, <string.h>)."""

__all__ = ["KERNELS"]
