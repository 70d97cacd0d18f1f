"""The AVX2 kernel of channels-last depthwise convolutions (x86-64 hosts without VNNI, e.g. AMD Zen
2/3: :func:`plait.op._qnn_nhwc.conv_kernel_body` ``"avx2"``), where gcc multiplies int16 by int16 as
``vpmullw`` + ``vpmulhw`` + two unpacks per 16 products.

``plait_dw16(x, w, sums, n, hp, wpc, c, oh, ow, kh, kw, sh, sw, dh, dw)``: the int32 sums ``[n, oh, ow,
c]`` of the ``"depthwise"`` form (:mod:`plait.op._qnn_nhwc`): ``x`` its int16 pack ``[n, hp, wpc]``
(``wpc``: the padded width times ``c``, the zero point subtracted), ``w`` its int16 weights ``[kh, kw *
c]``. With AVX2, exact: blocks of 16 channels, the window's taps in pairs, the two taps' 16 values
interleaved (``vpunpcklwd`` / ``vpunpckhwd``) and ``vpmaddwd`` by the pair's interleaved weights (made
once per block): one int32 sum of two taps per channel, no saturation (the values are within +-255);
an odd last tap is paired with zero weights. Channels past the last block of 16, and everything
without AVX2: the plain C body, the same sums."""

from __future__ import annotations

DW16 = r"""
#if defined(__AVX2__)
#include <immintrin.h>
#endif
static void plait_dw16(const void* xv, const void* wv, void* sv, int32_t n, int32_t hp, int32_t wpc, int32_t c,
                       int32_t oh, int32_t ow, int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t dh, int32_t dw) {
  const int16_t* x = (const int16_t*)xv;
  const int16_t* w = (const int16_t*)wv;
  int32_t* s = (int32_t*)sv;
  int32_t c0 = 0;
#if defined(__AVX2__)
  const int32_t taps = kh * kw;
  if (taps <= 64) {
    const int32_t pairs = (taps + 1) / 2;
    size_t off[64];
    for (int32_t t = 0; t < taps; ++t) off[t] = (size_t)(t / kw) * dh * wpc + (size_t)(t % kw) * dw * c;
    for (; c0 + 16 <= c; c0 += 16) {
      __m256i wl[32], wh[32];
      for (int32_t q = 0; q < pairs; ++q) {
        const int32_t ta = 2 * q, tb = 2 * q + 1;
        /* (w[ry][rx * c + ch]: tap t is row t / kw, column t % kw, so its 16 weights start at t * c + c0) */
        const __m256i wa = _mm256_loadu_si256((const __m256i*)(w + (size_t)ta * c + c0));
        const __m256i wb = tb < taps ? _mm256_loadu_si256((const __m256i*)(w + (size_t)tb * c + c0))
                                     : _mm256_setzero_si256();
        wl[q] = _mm256_unpacklo_epi16(wa, wb);
        wh[q] = _mm256_unpackhi_epi16(wa, wb);
      }
      for (int32_t b = 0; b < n; ++b)
        for (int32_t y = 0; y < oh; ++y)
          for (int32_t z = 0; z < ow; ++z) {
            const int16_t* xp = x + ((size_t)b * hp + (size_t)y * sh) * wpc + (size_t)z * sw * c + c0;
            __m256i al = _mm256_setzero_si256(), ah = al;
            for (int32_t q = 0; q < pairs; ++q) {
              const __m256i xa = _mm256_loadu_si256((const __m256i*)(xp + off[2 * q]));
              const __m256i xb = 2 * q + 1 < taps ? _mm256_loadu_si256((const __m256i*)(xp + off[2 * q + 1])) : xa;
              al = _mm256_add_epi32(al, _mm256_madd_epi16(_mm256_unpacklo_epi16(xa, xb), wl[q]));
              ah = _mm256_add_epi32(ah, _mm256_madd_epi16(_mm256_unpackhi_epi16(xa, xb), wh[q]));
            }
            int32_t* sp = s + (((size_t)b * oh + y) * ow + z) * c + c0;
            _mm256_storeu_si256((__m256i*)sp, _mm256_permute2x128_si256(al, ah, 0x20));
            _mm256_storeu_si256((__m256i*)(sp + 8), _mm256_permute2x128_si256(al, ah, 0x31));
          }
    }
  }
#endif
  for (int32_t b = 0; b < n; ++b)  /* (the channels past the blocks of 16; without AVX2 all: plain C) */
    for (int32_t y = 0; y < oh; ++y)
      for (int32_t z = 0; z < ow; ++z)
        for (int32_t ch = c0; ch < c; ++ch) {
          int32_t acc = 0;
          for (int32_t ry = 0; ry < kh; ++ry)
            for (int32_t rx = 0; rx < kw; ++rx)
              acc += (int32_t)x[((size_t)b * hp + (size_t)y * sh + (size_t)ry * dh) * wpc +
                                ((size_t)z * sw + (size_t)rx * dw) * c + ch] *
                     (int32_t)w[((size_t)ry * kw + rx) * c + ch];
          s[(((size_t)b * oh + y) * ow + z) * c + ch] = acc;
        }
}
"""

__all__ = ["DW16"]
