"""C kernels the schedule calls by name (``call_extern``) for work gcc does not vectorize well from
loops: the C backend prints a kernel's source in the file's head instead of an ``extern``
declaration. Each has a plain C body computing the same numbers as its ISA-specific one (integers:
bit-identical), chosen at compile time.

``plait_q8_outer(x, w, sums, n, p, c, o)``: the int32 sums of a 1x1 convolution's ``"outer"`` form
(:data:`plait.op.qnn_nn.OUTER_LANES`): ``x`` uint8 ``[n, p, c]`` (pixels channels-last), ``w`` int8
``[o/16, c/4, 16, 4]``, ``sums`` int32 ``[n, o, p]``. With AVX-512 VNNI, 16 output channels in the
lanes of one accumulator, ``vpdpbusd`` of 4 input bytes of a pixel broadcast by 64 weight bytes,
blocks of 4 pixels; no horizontal sums.
"""

from __future__ import annotations

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
        int32_t t[4][16];
        _mm512_storeu_si512((void*)t[0], a0); _mm512_storeu_si512((void*)t[1], a1);
        _mm512_storeu_si512((void*)t[2], a2); _mm512_storeu_si512((void*)t[3], a3);
        for (int32_t j = 0; j < 16; ++j)
          for (int32_t i = 0; i < 4; ++i) sb[(size_t)j * np + p + i] = t[i][j];
      }
#endif
      for (; p < np; ++p) {
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

KERNELS = {"plait_q8_outer": OUTER}
"""Kernel name -> its C source (needs <stdint.h>, <stddef.h>, <string.h>)."""

__all__ = ["KERNELS"]
