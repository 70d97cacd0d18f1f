"""``Machine``: the few numbers the default rules and the cost model need about a target.

Built by a rule set from the target's tag facts (``clock_mhz``, ``simd_bits``, ``fpu``) plus per-class
constants that the facts do not carry (issue width, load ports, memory bandwidth). The constants
are documented estimates (docs/schedules.md), not measurements of a particular chip, except where
noted there.
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
    intrinsic_ops: float = 20.0  # float operations of one exp/log/tanh/... call

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


def fact(target: object, name: str, default: object) -> object:
    facts = getattr(target, "facts", None)
    f = getattr(facts, name, None) if facts is not None else None
    value = getattr(f, "value", None)
    return default if value is None else value
