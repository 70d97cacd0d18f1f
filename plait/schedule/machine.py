"""``Machine``: the few numbers the default rules and the cost model need about a target.

Built by a rule set from the target's tag facts (``clock_mhz``, ``simd_bits``, ``fpu``) plus per-class
constants that the facts do not carry (issue width, load ports, memory bandwidth). The constants
are documented estimates (docs/schedules.md), not measurements of a particular chip, except where
noted there.

Integer arithmetic (int8 models: docs/quantization.md) has its own numbers: the defaults are a
64-bit host's; :func:`mcu_integer` gives a Cortex-M core's from its architecture (ARMv6-M has no
multiply-accumulate, no long multiply and no DSP; ARMv7E-M and ARMv8.1-M have SMLAD).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Machine:
    rules: str  # name of the rule set that made it
    clock_mhz: float
    simd_bits: int  # float SIMD register width; 0 = no float SIMD
    fpu: str  # "none" (soft float), "sp" (single precision), "dp" (single and double)
    vector_registers: int  # architectural SIMD registers (0 without float SIMD)
    ops_per_cycle: float  # sustained scalar instructions per cycle (integer/address/loop work)
    fma_per_cycle: float  # float multiply-adds (vector or scalar) issued per cycle
    loads_per_cycle: float  # loads (vector or scalar) per cycle from the first-level memory
    bytes_per_cycle: float  # sustained bandwidth from main memory (RAM / DRAM), bytes per cycle
    cache_bytes: int  # data that stays close (L2 on a host, the whole SRAM on a microcontroller)
    soft_float_cycles: float  # cycles of one float operation in software (fpu "none")
    l1_bytes: int = 0  # the first-level data cache (0: none: every access at loads_per_cycle)
    l2_bytes_per_cycle: float = 0.0  # sustained bandwidth from the next level, for data that overflows l1_bytes
    auto_unroll: int = 0  # the compiler unrolls constant loops of at most this many iterations (per vector)
    fma_bits: int = 0  # the widest vector an FMA pipe takes in one pass (0: simd_bits); wider ones issue in parts
    intrinsic_ops: float = 20.0  # float operations of one exp/log/tanh/... call
    # integer arithmetic of the data (not of addresses), per instruction or per vector of them:
    int_mac_cycles: float = 1.0  # one 32-bit multiply-accumulate (MLA; MULS + ADDS on ARMv6-M)
    narrow_macs: int = 2  # MACs one instruction does on <=16-bit operands (SMLAD, x86 PMADDWD: 2)
    word_bits: int = 64  # the general registers' width
    wide_op_cycles: float = 1.0  # an add/shift/min/... on values wider than a word (two words, a carry)
    wide_mul_cycles: float = 1.0  # a product of values wider than a word (SMULL on ARMv7-M; libgcc on ARMv6-M)

    def lanes(self, dtype: str) -> int:
        """SIMD lanes for ``dtype`` (1 when the machine has no SIMD for it)."""
        bits = np.dtype(dtype).itemsize * 8 if dtype != "bool" else 8
        if self.simd_bits <= 0 or bits <= 0:
            return 1
        return max(1, self.simd_bits // bits)

    def has_fpu(self, dtype: str) -> bool:
        if not dtype.startswith("float"):
            return True
        if self.fpu == "none":
            return False
        return self.fpu == "dp" or dtype != "float64"


#: ARMv6-M (Cortex-M0/M0+/M1): MULS (one cycle on most parts) then ADDS, no MLA/SMULL/SMLAD/IT: a 64-bit
#: product is libgcc's ``__aeabi_lmul`` (about 40 instructions with its call), a variable 64-bit shift
#: ``__aeabi_llsl``/``llsr``, a 64-bit min/max a compare of both words and branches (estimates: 4).
ARMV6M_INTEGER = {"int_mac_cycles": 2.0, "narrow_macs": 1, "word_bits": 32, "wide_op_cycles": 4.0,
                  "wide_mul_cycles": 40.0}


def mcu_integer(target: object) -> dict[str, float | int]:
    """The integer fields of :class:`Machine` for a Cortex-M core (its ``-mcpu``): ARMv6-M as
    :data:`ARMV6M_INTEGER`; ARMv7-M (M3) MLA in one cycle, 64-bit operations in two instructions
    (ADDS/ADC, IT blocks), SMULL (~3 cycles with the 64-bit add), no packed MACs; ARMv7E-M and
    ARMv8.1-M (M4, M7, M55) also SMLAD: two 16-bit MACs per instruction. An unknown core counts as
    ARMv7-M."""
    from plait.target.boards import CORE_ARCH

    cpu = str(getattr(target, "options", {}).get("mcpu", "")).split(".", 1)[0]
    arch = CORE_ARCH.get(cpu, "armv7-m")
    if arch == "armv6-m":
        return dict(ARMV6M_INTEGER)
    return {"int_mac_cycles": 1.0, "narrow_macs": 1 if arch == "armv7-m" else 2, "word_bits": 32,
            "wide_op_cycles": 2.0, "wide_mul_cycles": 3.0}


def fma_bits(target: object, simd_bits: int) -> int:
    """The widest vector one FMA pipe of ``target`` takes in one pass (at most ``simd_bits``): its
    ``fma_bits`` fact when a target option gives it, or when it is measured on this machine together
    with the SIMD width (AMD Zen 4 splits a 512-bit FMA in two 256-bit halves); else ``simd_bits``
    (a SIMD width that a tag or an option states describes full-width FMA pipes)."""
    facts = getattr(target, "facts", None)
    f, simd = (getattr(facts, n, None) for n in ("fma_bits", "simd_bits")) if facts is not None else (None, None)
    value = getattr(f, "value", None)
    if value is None or simd_bits <= 0:
        return simd_bits
    from plait.target.host import MEASURED

    if f.origin == MEASURED and getattr(simd, "origin", "") != MEASURED:  # type: ignore[union-attr]
        return simd_bits
    return min(simd_bits, int(value))


def fact(target: object, name: str, default: object) -> object:
    facts = getattr(target, "facts", None)
    f = getattr(facts, name, None) if facts is not None else None
    value = getattr(f, "value", None)
    return default if value is None else value
