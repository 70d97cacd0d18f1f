"""The C backend's kernels: its implementations of the kernels of :mod:`plait.tir.kernels` (work gcc
does not vectorize well from loops), registered when this module is imported (:func:`c_kernel`; the
C function of kernel ``<name>`` is ``plait_<name>``). A schedule calls a kernel by its abstract name
(``call_kernel``); the C backend prints the source of each kernel a file calls in its head and calls
its C function. Each has a plain C body computing the same numbers as its ISA-specific ones
(integers: bit-identical), chosen at compile time (:attr:`KernelImpl.features` names the ISAs).

``plait_q8_outer(x, w, sums, n, p, c, o)``: the int32 sums of a 1x1 convolution's ``"outer"`` form
(:data:`plait.op._qnn_forms.OUTER_LANES`): ``x`` uint8 ``[n, p, c]`` (pixels channels-last), ``w`` int8
``[o/16, c/4, 16, 4]``, ``sums`` int32 ``[n, o, p]``. With AVX-512 VNNI, 16 output channels in the
lanes of one accumulator, ``vpdpbusd`` of 4 input bytes of a pixel broadcast by 64 weight bytes,
blocks of 4 pixels; no horizontal sums.

``plait_dot_<a>_<b>(a, b, n, za, zb)``: an int8 / int16 dot product, SMLAD on Cortex-M cores with the
DSP extension (:mod:`plait.backends.c.dsp_kernels`).

``plait_q8_conv(x, w, sums, n, hp, wp, cp, oh, ow, o, kh, kw, sh, sw, dh, dw)``: the int32 sums of a
channels-last convolution's ``"outer"`` form (:mod:`plait.op._qnn_nhwc`): ``x`` uint8 ``[n, hp, wp,
cp]`` (padded, ``cp % 4 == 0``), ``w`` int8 ``[ceil(o/16), kh * kw * cp / 4, 16, 4]``, ``sums``
int32 ``[n, oh, ow, o]``; strides ``sh, sw``, dilations ``dh, dw``. With AVX-512 VNNI, blocks of 8
output pixels (of the flattened ``oh * ow``) x 16 output channels in 8 accumulators, the window's
taps an outer loop, each pixel's 16 sums one (masked past ``o``) store.
"""

from __future__ import annotations

from plait.backends.c.avx2_kernels import DW16
from plait.backends.c.dsp_kernels import dot_kernels
from plait.tir.kernels import KernelImpl, implement, implementation

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

CONV = r"""
#include <string.h>
#if (defined(__AVX512VNNI__) && defined(__AVX512F__)) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if !(defined(__AVX512VNNI__) && defined(__AVX512F__)) && defined(__AVX2__)
/* 16 int32 sums from 4 accumulators of pair sums (a[i]: output channels 4i..4i+3, two partial sums
   each) stored at s; only the first `rem` (1..16) of them */
static inline void plait_q8_store16(int32_t* s, int32_t rem, __m256i a0, __m256i a1, __m256i a2, __m256i a3) {
  const __m256i lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(a0, a1), 0xD8);
  const __m256i hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(a2, a3), 0xD8);
  if (rem >= 16) {
    _mm256_storeu_si256((__m256i*)s, lo);
    _mm256_storeu_si256((__m256i*)(s + 8), hi);
  } else {
    const __m256i r = _mm256_set1_epi32(rem);
    _mm256_maskstore_epi32(s, _mm256_cmpgt_epi32(r, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), lo);
    _mm256_maskstore_epi32(s + 8, _mm256_cmpgt_epi32(r, _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15)), hi);
  }
}
/* the 4 bytes at p widened to int16 and repeated over 16 lanes */
static inline __m256i plait_q8_x4(const uint8_t* p) {  /* (vbroadcastss: one load, any alignment) */
  return _mm256_cvtepu8_epi16(_mm_castps_si128(_mm_broadcast_ss((const float*)(const void*)p)));
}
#define PLAIT_Q8_MAC(a, x, w) a = _mm256_add_epi32(a, _mm256_madd_epi16(x, w))
#endif
static void plait_q8_conv(const void* xv, const void* wv, void* sv, int32_t n, int32_t hp, int32_t wp, int32_t cp,
                          int32_t oh, int32_t ow, int32_t o, int32_t kh, int32_t kw, int32_t sh, int32_t sw,
                          int32_t dh, int32_t dw) {
  const uint8_t* x = (const uint8_t*)xv;
  const int8_t* w = (const int8_t*)wv;
  int32_t* s = (int32_t*)sv;
  const int32_t np = oh * ow, nb = (o + 15) / 16;
  const size_t kq = (size_t)kh * kw * cp * 16;  /* the weight bytes of one block of 16 output channels */
  for (int32_t b = 0; b < n; ++b, x += (size_t)hp * wp * cp, s += (size_t)np * o) {
    int32_t p = 0;
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
    for (; p + 8 <= np; p += 8) {
      const uint8_t* xp[8];
      for (int32_t j = 0; j < 8; ++j)
        xp[j] = x + ((size_t)((p + j) / ow) * sh * wp + (size_t)((p + j) % ow) * sw) * cp;
      for (int32_t ob = 0; ob < nb; ++ob) {
        const int8_t* wb = w + (size_t)ob * kq;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        for (int32_t ry = 0; ry < kh; ++ry)
          for (int32_t rx = 0; rx < kw; ++rx) {
            const size_t off = ((size_t)ry * dh * wp + (size_t)rx * dw) * cp;
            const int8_t* wt = wb + (size_t)(ry * kw + rx) * cp * 16;
            for (int32_t k = 0; k < cp; k += 4) {
              __m512i wk = _mm512_loadu_si512((const void*)(wt + (size_t)k * 16));
              int32_t q[8];
              for (int32_t j = 0; j < 8; ++j) memcpy(&q[j], xp[j] + off + k, 4);
              a0 = _mm512_dpbusd_epi32(a0, _mm512_set1_epi32(q[0]), wk);
              a1 = _mm512_dpbusd_epi32(a1, _mm512_set1_epi32(q[1]), wk);
              a2 = _mm512_dpbusd_epi32(a2, _mm512_set1_epi32(q[2]), wk);
              a3 = _mm512_dpbusd_epi32(a3, _mm512_set1_epi32(q[3]), wk);
              a4 = _mm512_dpbusd_epi32(a4, _mm512_set1_epi32(q[4]), wk);
              a5 = _mm512_dpbusd_epi32(a5, _mm512_set1_epi32(q[5]), wk);
              a6 = _mm512_dpbusd_epi32(a6, _mm512_set1_epi32(q[6]), wk);
              a7 = _mm512_dpbusd_epi32(a7, _mm512_set1_epi32(q[7]), wk);
            }
          }
        const __mmask16 m = (ob + 1) * 16 <= o ? (__mmask16)0xFFFF : (__mmask16)((1u << (o % 16)) - 1u);
        int32_t* sp = s + (size_t)p * o + (size_t)ob * 16;
        _mm512_mask_storeu_epi32(sp, m, a0); _mm512_mask_storeu_epi32(sp + o, m, a1);
        _mm512_mask_storeu_epi32(sp + 2 * (size_t)o, m, a2); _mm512_mask_storeu_epi32(sp + 3 * (size_t)o, m, a3);
        _mm512_mask_storeu_epi32(sp + 4 * (size_t)o, m, a4); _mm512_mask_storeu_epi32(sp + 5 * (size_t)o, m, a5);
        _mm512_mask_storeu_epi32(sp + 6 * (size_t)o, m, a6); _mm512_mask_storeu_epi32(sp + 7 * (size_t)o, m, a7);
      }
    }
    for (; p < np; ++p) {  /* the last pixels one at a time */
      const uint8_t* xp = x + ((size_t)(p / ow) * sh * wp + (size_t)(p % ow) * sw) * cp;
      for (int32_t ob = 0; ob < nb; ++ob) {
        const int8_t* wb = w + (size_t)ob * kq;
        __m512i a0 = _mm512_setzero_si512();
        for (int32_t ry = 0; ry < kh; ++ry)
          for (int32_t rx = 0; rx < kw; ++rx) {
            const uint8_t* xr = xp + ((size_t)ry * dh * wp + (size_t)rx * dw) * cp;
            const int8_t* wt = wb + (size_t)(ry * kw + rx) * cp * 16;
            for (int32_t k = 0; k < cp; k += 4) {
              int32_t q0;
              memcpy(&q0, xr + k, 4);
              a0 = _mm512_dpbusd_epi32(a0, _mm512_set1_epi32(q0), _mm512_loadu_si512((const void*)(wt + (size_t)k * 16)));
            }
          }
        const __mmask16 m = (ob + 1) * 16 <= o ? (__mmask16)0xFFFF : (__mmask16)((1u << (o % 16)) - 1u);
        _mm512_mask_storeu_epi32(s + (size_t)p * o + (size_t)ob * 16, m, a0);
      }
    }
#elif defined(__AVX2__)
    /* exact: uint8 and int8 widened to int16, vpmaddwd sums pairs of channels into int32 (no
       saturation); blocks of 2 output pixels x 16 output channels in 8 accumulators, each of 4
       output channels x 2 partial sums; the pairs summed once per block (plait_q8_store16) */
    for (; p + 2 <= np; p += 2) {
      const uint8_t* x0 = x + ((size_t)(p / ow) * sh * wp + (size_t)(p % ow) * sw) * cp;
      const uint8_t* x1 = x + ((size_t)((p + 1) / ow) * sh * wp + (size_t)((p + 1) % ow) * sw) * cp;
      for (int32_t ob = 0; ob < nb; ++ob) {
        const int8_t* wb = w + (size_t)ob * kq;
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (int32_t ry = 0; ry < kh; ++ry)
          for (int32_t rx = 0; rx < kw; ++rx) {
            const size_t off = ((size_t)ry * dh * wp + (size_t)rx * dw) * cp;
            const __m128i* wk = (const __m128i*)(wb + (size_t)(ry * kw + rx) * cp * 16);
            const uint8_t *xa = x0 + off, *xe = xa + cp;
            for (const uint8_t* xc = x1 + off; xa < xe; xa += 4, xc += 4, wk += 4) {
              const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(wk));
              const __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(wk + 1));
              const __m256i w2 = _mm256_cvtepi8_epi16(_mm_loadu_si128(wk + 2));
              const __m256i w3 = _mm256_cvtepi8_epi16(_mm_loadu_si128(wk + 3));
              const __m256i u = plait_q8_x4(xa), v = plait_q8_x4(xc);
              PLAIT_Q8_MAC(a0, u, w0); PLAIT_Q8_MAC(a1, u, w1); PLAIT_Q8_MAC(a2, u, w2); PLAIT_Q8_MAC(a3, u, w3);
              PLAIT_Q8_MAC(b0, v, w0); PLAIT_Q8_MAC(b1, v, w1); PLAIT_Q8_MAC(b2, v, w2); PLAIT_Q8_MAC(b3, v, w3);
            }
          }
        int32_t* sp = s + (size_t)p * o + (size_t)ob * 16;
        plait_q8_store16(sp, o - ob * 16, a0, a1, a2, a3);
        plait_q8_store16(sp + o, o - ob * 16, b0, b1, b2, b3);
      }
    }
    for (; p < np; ++p) {  /* the last pixel */
      const uint8_t* xp = x + ((size_t)(p / ow) * sh * wp + (size_t)(p % ow) * sw) * cp;
      for (int32_t ob = 0; ob < nb; ++ob) {
        const int8_t* wb = w + (size_t)ob * kq;
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (int32_t ry = 0; ry < kh; ++ry)
          for (int32_t rx = 0; rx < kw; ++rx) {
            const uint8_t* xr = xp + ((size_t)ry * dh * wp + (size_t)rx * dw) * cp;
            const int8_t* wt = wb + (size_t)(ry * kw + rx) * cp * 16;
            for (int32_t k = 0; k < cp; k += 4) {
              const __m128i* wk = (const __m128i*)(wt + (size_t)k * 16);
              const __m256i u = plait_q8_x4(xr + k);
              PLAIT_Q8_MAC(a0, u, _mm256_cvtepi8_epi16(_mm_loadu_si128(wk)));
              PLAIT_Q8_MAC(a1, u, _mm256_cvtepi8_epi16(_mm_loadu_si128(wk + 1)));
              PLAIT_Q8_MAC(a2, u, _mm256_cvtepi8_epi16(_mm_loadu_si128(wk + 2)));
              PLAIT_Q8_MAC(a3, u, _mm256_cvtepi8_epi16(_mm_loadu_si128(wk + 3)));
            }
          }
        plait_q8_store16(s + (size_t)p * o + (size_t)ob * 16, o - ob * 16, a0, a1, a2, a3);
      }
    }
#endif
    for (; p < np; ++p) {  /* (without VNNI or AVX2: plain C) */
      const uint8_t* xp = x + ((size_t)(p / ow) * sh * wp + (size_t)(p % ow) * sw) * cp;
      for (int32_t ob = 0; ob < nb; ++ob) {
        const int8_t* wb = w + (size_t)ob * kq;
        int32_t acc[16] = {0};
        for (int32_t ry = 0; ry < kh; ++ry)
          for (int32_t rx = 0; rx < kw; ++rx) {
            const uint8_t* xr = xp + ((size_t)ry * dh * wp + (size_t)rx * dw) * cp;
            const int8_t* wt = wb + (size_t)(ry * kw + rx) * cp * 16;
            for (int32_t k = 0; k < cp; k += 4)
              for (int32_t j = 0; j < 16; ++j)
                for (int32_t q = 0; q < 4; ++q)
                  acc[j] += (int32_t)xr[k + q] * (int32_t)wt[(size_t)k * 16 + j * 4 + q];
          }
        for (int32_t j = 0; j < 16 && ob * 16 + j < o; ++j) s[(size_t)p * o + (size_t)ob * 16 + j] = acc[j];
      }
    }
  }
}
"""

KERNELS = {"plait_q8_outer": OUTER, "plait_q8_conv": CONV, "plait_dw16": DW16, **dot_kernels()}
"""C function name -> its C source (needs <stdint.h>, <stddef.h>, <string.h>)."""

PREFIX = "plait_"
"""The C function of kernel ``<name>`` is ``plait_<name>``."""

FEATURES = {"q8_outer": ("avx512vnni",), "q8_conv": ("avx512vnni", "avx2"), "dw16": ("avx2",)}
"""Kernel -> the ISA bodies of its source (the dot products and ``dw2_s16``: ``dsp``, Arm's DSP extension)."""

for _symbol, _source in KERNELS.items():
    _kernel = _symbol[len(PREFIX):]
    implement(KernelImpl(_kernel, "c", _symbol, _source, FEATURES.get(_kernel, ("dsp",))))


def c_kernel(name: str) -> KernelImpl:
    """The C backend's implementation of kernel ``name`` (a ``KernelError`` when it has none)."""
    return implementation(name, "c")


__all__ = ["FEATURES", "KERNELS", "PREFIX", "c_kernel"]
