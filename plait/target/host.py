"""The facts of the machine plait runs on, measured when first asked for and cached for the process.

    measure("simd_bits")   # Fact(512, "bits", "/proc/cpuinfo flags: avx512f", origin="measured on this machine")

Host tags (``host-c``, ``host-llvm``, ...) take their clock, SIMD width, memory, CPU count and FPU from
here instead of numbers written down on some other machine. Each :class:`~plait.target.tag.Fact` says
where it came from: ``measured on this machine`` (with the file or call it was read from), or
``estimate`` when nothing could be read (then the note says why). The same machine gives the same
numbers, so placement stays deterministic for it; tests that check a placement or a cost pin these
facts through target options (``-clock-mhz=``, ``-simd-bits=``, ``-ram-kb=``).
"""

from __future__ import annotations

import os
import platform
import re
from functools import lru_cache
from pathlib import Path

from plait.target.tag import Fact

MEASURED = "measured on this machine"
ESTIMATE = "estimate"
#: power of one busy core of an x86-64 server: a 280 W, 64-core part's TDP / cores (AMD EPYC 7763)
WATTS_PER_CORE = 4.375
_CPUINFO = Path("/proc/cpuinfo")
_MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")


@lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """The first processor's entries of /proc/cpuinfo (empty where there is none)."""
    try:
        text = _CPUINFO.read_text()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out.setdefault(key.strip(), value.strip())
    return out


def _cores() -> Fact:
    try:
        n, how = len(os.sched_getaffinity(0)), "os.sched_getaffinity (CPUs this process may run on)"
    except (AttributeError, OSError):
        n, how = os.cpu_count() or 1, "os.cpu_count"
    return Fact(n, "", how, origin=MEASURED)


def _simd_bits() -> Fact:
    """The widest SIMD register: x86 flags avx512f/avx2/avx/sse2, Arm asimd (NEON); the base ISA else."""
    info = _cpuinfo()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    for flag, bits in (("avx512f", 512), ("avx2", 256), ("avx", 256), ("sse2", 128), ("asimd", 128),
                       ("neon", 128)):
        if flag in flags:
            return Fact(bits, "bits", f"/proc/cpuinfo flags: {flag}", origin=MEASURED)
    arch = platform.machine().lower()
    if arch in ("x86_64", "amd64"):
        return Fact(128, "bits", "x86-64 base ISA (SSE2)", "no CPU flags found in /proc/cpuinfo", origin=ESTIMATE)
    if arch in ("aarch64", "arm64"):
        return Fact(128, "bits", "AArch64 base ISA (NEON)", "no CPU flags found in /proc/cpuinfo", origin=ESTIMATE)
    return Fact(0, "bits", f"no SIMD assumed on '{arch}'", "no CPU flags found in /proc/cpuinfo", origin=ESTIMATE)


def _clock_mhz() -> Fact:
    """The maximum clock (cpufreq), else the model name's nominal clock, else 'cpu MHz' of CPU 0."""
    try:
        khz = int(_MAX_FREQ.read_text().strip())
        return Fact(round(khz / 1000), "MHz", f"{_MAX_FREQ} (maximum clock)", origin=MEASURED)
    except (OSError, ValueError):
        pass
    info = _cpuinfo()
    m = re.search(r"@\s*([0-9.]+)\s*GHz", info.get("model name", ""))
    if m:
        return Fact(round(float(m.group(1)) * 1000), "MHz", f"/proc/cpuinfo model name: {info['model name']}",
                    origin=MEASURED)
    try:
        mhz = float(info["cpu MHz"])
        return Fact(round(mhz), "MHz", f"/proc/cpuinfo 'cpu MHz' of CPU 0: {info['cpu MHz']}", origin=MEASURED)
    except (KeyError, ValueError):
        pass
    return Fact(2000, "MHz", "a typical x86-64 server core", "no clock found in /sys or /proc/cpuinfo",
                origin=ESTIMATE)


def _ram_kb() -> Fact:
    from plait.limits import usable_memory

    n = usable_memory()
    if n is None:
        return Fact(4 * 1024 * 1024, "KiB", "4 GiB", "sysconf gave no memory size", origin=ESTIMATE)
    return Fact(n // 1024, "KiB", "sysconf physical memory, or the cgroup limit when smaller "
                                  "(plait.limits.usable_memory)", origin=MEASURED)


def _fpu() -> Fact:
    arch = platform.machine().lower()
    if arch in ("x86_64", "amd64", "aarch64", "arm64"):
        return Fact("dp", "", f"{arch}: single and double precision in the base ISA", origin=MEASURED)
    return Fact("dp", "", f"assumed for '{arch}'", origin=ESTIMATE)


def _power_mw() -> Fact:
    cores = _cores().value
    return Fact(round(WATTS_PER_CORE * 1000 * cores), "mW",
                f"{WATTS_PER_CORE:g} W per core (280 W / 64 cores of an AMD EPYC 7763) x {cores} CPUs",
                "not measured: no power sensor is read", origin=ESTIMATE)


def _flash_kb() -> Fact:
    return Fact(None, "KiB", "not applicable on a host: programs and weights load from disk into RAM")


_MEASURES = {"clock_mhz": _clock_mhz, "fpu": _fpu, "simd_bits": _simd_bits, "ram_kb": _ram_kb,
             "flash_kb": _flash_kb, "power_mw": _power_mw, "cores": _cores}


@lru_cache(maxsize=None)
def measure(name: str) -> Fact:
    """The fact ``name`` of this machine (one of :data:`MEASURABLE`), measured once per process."""
    return _MEASURES[name]()


MEASURABLE = tuple(_MEASURES)

__all__ = ["ESTIMATE", "MEASURABLE", "MEASURED", "measure"]
