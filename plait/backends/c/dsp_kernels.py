"""The C implementations of the int8 dot-product kernels (:mod:`plait.tir.kernels`: ``dot_*``, ``dot2_*``,
``dw2_s16``, put in by :mod:`plait.schedule.dsp_dot`) for Cortex-M cores with the DSP extension:
``int32_t plait_dot_<a>_<b>(a, b, n, za, zb)`` is the sum over
``i < n`` of ``(a[i] - za) * (b[i] - zb)``, ``a`` and ``b`` contiguous runs of ``u8`` / ``s8``
(``uint8_t`` / ``int8_t``) or both ``s16`` (``int16_t``); a ``z`` after an operand's type means it has
a zero point (else ``za`` / ``zb`` are 0 and unused by the DSP body).

With ``__ARM_FEATURE_DSP`` (ARMv7E-M, ARMv8-M Mainline with DSP, ARMv8.1-M: gcc's ``-mcpu=cortex-m4``,
``cortex-m7``, ``cortex-m55``) two multiply-accumulates per instruction, as CMSIS-NN does: four bytes
of each operand are loaded as one word and widened to two pairs of 16-bit halves, bytes 0 and 2 by
``SXTB16`` / ``UXTB16`` and bytes 1 and 3 by the same with the word rotated by 8 (one instruction:
``sxtb16 r, r, ror #8``, written as inline assembly: the ACLE intrinsic takes no rotation and gcc 12
does not fold a rotate into it); a zero point is subtracted from both halves at once (``SSUB16``:
every value minus its zero point lies in [-255, 255], exact in 16 bits); ``SMLAD`` adds both
products of a pair of halves to the int32 sum (``__smlad``, ``<arm_acle.h>``). ``s16`` operands are
loaded as pairs directly. Eight elements per iteration (four per ``SMLAD`` pair of words), then the
rest one at a time. Without the DSP extension (and in the host simulation of such a core) the plain C
loop of the same sum: the integers are the same on both paths (the products are exact and each SMLAD
adds them to the same int32 sum, modulo 2**32 as C's does).
"""

from __future__ import annotations

from plait.tir.kernels import DOT_KINDS, dot_kernel_name

_TYPES = {"u8": ("uint8_t", "__uxtb16", "uxtb16"), "s8": ("int8_t", "__sxtb16", "sxtb16"),
          "s16": ("int16_t", "", "")}

_PRELUDE = r"""
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32) && !defined(PLAIT_DSP_DOT)
#define PLAIT_DSP_DOT 1
#include <arm_acle.h>
static inline uint32_t plait_sxtb16_ror8(uint32_t x) { uint32_t r; __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x)); return r; }
static inline uint32_t plait_uxtb16_ror8(uint32_t x) { uint32_t r; __asm__("uxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x)); return r; }
#endif
"""


def kernel_name(a: str, za: bool, b: str, zb: bool) -> str:
    """The C function of the kernel of operands of types ``a``, ``b`` (``u8``, ``s8``, ``s16``), with zero
    points or not."""
    return "plait_" + dot_kernel_name(a, za, b, zb)


def _pairs(v: str, t: str, z: str | None) -> tuple[str, str, list[str]]:
    """(even, odd) pair expressions of the word ``v`` of 8-bit type ``t``, and their statements."""
    _, intrin, insn = _TYPES[t]
    lines = [f"uint32_t {v}e = {intrin}({v}), {v}o = plait_{insn}_ror8({v});"]
    if z is not None:
        lines.append(f"{v}e = __ssub16({v}e, {z}); {v}o = __ssub16({v}o, {z});")
    return f"{v}e", f"{v}o", lines


def _source(a: str, za: bool, b: str, zb: bool) -> str:
    name = kernel_name(a, za, b, zb)
    ta, tb = _TYPES[a][0], _TYPES[b][0]
    xa = "((int32_t)a[i] - za)" if za else "(int32_t)a[i]"
    xb = "((int32_t)b[i] - zb)" if zb else "(int32_t)b[i]"
    if a == "s16":
        dsp = ["  for (; n >= 8; n -= 8, a += 8, b += 8) {",
               "    uint32_t w[8];",
               "    memcpy(w, a, 16); memcpy(w + 4, b, 16);",
               "    acc = __smlad(w[0], w[4], acc); acc = __smlad(w[1], w[5], acc);",
               "    acc = __smlad(w[2], w[6], acc); acc = __smlad(w[3], w[7], acc);",
               "  }"]
    else:
        zs = []
        if za:
            zs.append("  const uint32_t zpa = (uint32_t)(uint16_t)za * 0x10001u;")
        if zb:
            zs.append("  const uint32_t zpb = (uint32_t)(uint16_t)zb * 0x10001u;")
        body = []
        for k in ("0", "1"):
            ae, ao, la = _pairs("x" + k, a, "zpa" if za else None)
            be, bo, lb = _pairs("y" + k, b, "zpb" if zb else None)
            body += la + lb + [f"acc = __smlad({ae}, {be}, acc); acc = __smlad({ao}, {bo}, acc);"]
        dsp = zs + ["  for (; n >= 8; n -= 8, a += 8, b += 8) {",
                    "    uint32_t x0, x1, y0, y1;",
                    "    memcpy(&x0, a, 4); memcpy(&x1, a + 4, 4); memcpy(&y0, b, 4); memcpy(&y1, b + 4, 4);"]
        dsp += ["    " + s for s in body] + ["  }"]
    return "\n".join([
        f"static inline int32_t {name}(const void* av, const void* bv, int32_t n, int32_t za, int32_t zb) {{",
        f"  const {ta}* a = (const {ta}*)av;",
        f"  const {tb}* b = (const {tb}*)bv;",
        "  int32_t acc = 0;",
        "  (void)za; (void)zb;",
        "#if defined(PLAIT_DSP_DOT)",
        *dsp,
        "#endif",
        f"  for (int32_t i = 0; i < n; ++i) acc += {xa} * {xb};  /* (the last n % 8 with DSP) */",
        "  return acc;",
        "}",
        ""])


def pair_kernel_name(a: str, za: bool, b: str, zb: bool) -> str:
    """The C function of the paired kernel: one run of type ``a`` against two runs of type ``b``."""
    return "plait_" + dot_kernel_name(a, za, b, zb, pair=True)


def _pair_source(a: str, za: bool, b: str, zb: bool) -> str:
    """``plait_dot2_<a>_<b>(a, b0, b1, n, za, zb, out)``: ``out[k] +=`` the dot product of ``a`` and ``bk``
    (two outputs sharing one operand, e.g. two output channels of one pixel: its words loaded and
    widened once for both)."""
    name = pair_kernel_name(a, za, b, zb)
    ta, tb = _TYPES[a][0], _TYPES[b][0]
    xa = "((int32_t)a[i] - za)" if za else "(int32_t)a[i]"

    def xb(k: str) -> str:
        return f"((int32_t)b{k}[i] - zb)" if zb else f"(int32_t)b{k}[i]"

    if a == "s16":
        dsp = ["  for (; n >= 8; n -= 8, a += 8, b0 += 8, b1 += 8) {",
               "    uint32_t x[4], y[4], w[4];",
               "    memcpy(x, a, 16); memcpy(y, b0, 16); memcpy(w, b1, 16);",
               "    for (int k = 0; k < 4; ++k) { s0 = __smlad(x[k], y[k], s0); s1 = __smlad(x[k], w[k], s1); }",
               "  }"]
    else:
        dsp = []
        if za:
            dsp.append("  const uint32_t zpa = (uint32_t)(uint16_t)za * 0x10001u;")
        if zb:
            dsp.append("  const uint32_t zpb = (uint32_t)(uint16_t)zb * 0x10001u;")
        dsp += ["  for (; n >= 8; n -= 8, a += 8, b0 += 8, b1 += 8) {",
                "    uint32_t x0, x1, y0, y1, w0, w1;",
                "    memcpy(&x0, a, 4); memcpy(&x1, a + 4, 4); memcpy(&y0, b0, 4); memcpy(&y1, b0 + 4, 4);",
                "    memcpy(&w0, b1, 4); memcpy(&w1, b1 + 4, 4);"]
        for k in ("0", "1"):
            xe, xo, lx = _pairs("x" + k, a, "zpa" if za else None)
            ye, yo, ly = _pairs("y" + k, b, "zpb" if zb else None)
            we, wo, lw = _pairs("w" + k, b, "zpb" if zb else None)
            dsp += ["    " + t for t in lx + ly + [f"s0 = __smlad({xe}, {ye}, s0); s0 = __smlad({xo}, {yo}, s0);"] +
                    lw + [f"s1 = __smlad({xe}, {we}, s1); s1 = __smlad({xo}, {wo}, s1);"]]
        dsp.append("  }")
    return "\n".join([
        f"static inline void {name}(const void* av, const void* b0v, const void* b1v, int32_t n, int32_t za, "
        "int32_t zb, int32_t* out) {",
        f"  const {ta}* a = (const {ta}*)av;",
        f"  const {tb}* b0 = (const {tb}*)b0v;",
        f"  const {tb}* b1 = (const {tb}*)b1v;",
        "  int32_t s0 = 0, s1 = 0;",
        "  (void)za; (void)zb;",
        "#if defined(PLAIT_DSP_DOT)",
        *dsp,
        "#endif",
        "  for (int32_t i = 0; i < n; ++i) {",
        f"    s0 += {xa} * {xb('0')};",
        f"    s1 += {xa} * {xb('1')};",
        "  }",
        "  out[0] += s0;",
        "  out[1] += s1;",
        "}",
        ""])


DW2 = r"""
static inline void plait_dw2_s16(const void* xv, const void* wv, int32_t* out, int32_t kh, int32_t kw, int32_t xr,
                                 int32_t xc, int32_t wr, int32_t wc) {
  const int16_t* x = (const int16_t*)xv;
  const int16_t* w = (const int16_t*)wv;
  int32_t s0 = 0, s1 = 0;
  for (int32_t ry = 0; ry < kh; ++ry, x += xr, w += wr) {
    #pragma GCC unroll 8
    for (int32_t rx = 0; rx < kw; ++rx) {
#if defined(PLAIT_DSP_DOT)
      uint32_t a, b;
      memcpy(&a, x + rx * xc, 4); memcpy(&b, w + rx * wc, 4);
      s0 = __smlabb(a, b, s0); s1 = __smlatt(a, b, s1);
#else
      s0 += (int32_t)x[rx * xc] * (int32_t)w[rx * wc];
      s1 += (int32_t)x[rx * xc + 1] * (int32_t)w[rx * wc + 1];
#endif
    }
  }
  out[0] = s0;
  out[1] = s1;
}
"""
"""``plait_dw2_s16(x, w, out, kh, kw, xr, xc, wr, wc)``: a depthwise convolution's two adjacent channels
(channels-last int16, :func:`plait.schedule.dsp_dot.channel_pairs`): ``out[k] = sum over ry < kh, rx < kw``
of ``x[ry * xr + rx * xc + k] * w[ry * wr + rx * wc + k]``; with DSP one word of each per tap holds both
channels, ``SMLABB`` and ``SMLATT`` multiply their low and high halves (half the loads of two
channels' halfword loops)."""


def dot_kernels() -> dict[str, str]:
    """C function name -> its C source (needs <stdint.h>, <string.h>), for every pair of operand types."""
    head = "#include <string.h>\n" + _PRELUDE
    out = {"plait_dw2_s16": head + DW2}
    for k in DOT_KINDS:
        out[kernel_name(*k)] = head + _source(*k)
        out[pair_kernel_name(*k)] = head + _pair_source(*k)
    return out


__all__ = ["dot_kernels", "kernel_name", "pair_kernel_name"]
