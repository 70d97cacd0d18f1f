"""The facts of the machine plait runs on, measured when first asked for and cached for the process.

    measure("simd_bits")   # Fact(512, "bits", "/proc/cpuinfo flags: avx512f", origin="measured on this machine")

Host tags (``host-c``, ``host-llvm``, ...) take their clock, SIMD width, memory, CPU count and FPU from
here instead of numbers written down on some other machine. Each :class:`~plait.target.facts.Fact` says
where it came from: ``measured on this machine`` (with the file or call it was read from), or
``estimate`` when nothing could be read (then the note says why). The same machine gives the same
numbers, so placement stays deterministic for it; tests that check a placement or a cost pin these
facts through target options (``-clock-mhz=``, ``-simd-bits=``, ``-ram-kb=``).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from plait.target.facts import Fact

MEASURED = "measured on this machine"
ESTIMATE = "estimate"
#: power of one busy core of an x86-64 server: a 280 W, 64-core part's TDP / cores (AMD EPYC 7763)
WATTS_PER_CORE = 4.375
_CPUINFO = Path("/proc/cpuinfo")
_MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
#: the effective clock is rounded to this many MHz (the same machine gives the same number)
CLOCK_STEP_MHZ = 100
#: a chain of dependent integer adds, one cycle each on every x86-64 and AArch64 core: the fastest of
#: 15 timed runs of 16 x 400,000 adds (about 2 ms each) gives the clock the core really runs at, boost
#: included (a VM's /proc/cpuinfo gives the nominal clock and no cpufreq); then 10 independent chains
#: of multiply-adds on vectors of VEC_BYTES: how many such FMAs the core issues per cycle (AMD Zen 4
#: runs a 512-bit FMA as two 256-bit halves: 1 per cycle, 2 at 256 bits; Intel's AVX-512 cores with two
#: FMA units: 2)
_PROBE_C = r"""
#include <stdio.h>
#include <stdint.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
typedef float vec __attribute__((vector_size(VEC_BYTES)));
int main(int argc, char **argv) {
  uint64_t y = (uint64_t)argc, x = 0; const long n = 400000; double best = 1e9, bestf = 1e9;
  (void)argv;
  for (int r = 0; r < 15; r++) {
    double t0 = now();
    for (long i = 0; i < n; i++) {
#define ADD x += y; __asm__ volatile("" : "+r"(x));
      ADD ADD ADD ADD ADD ADD ADD ADD ADD ADD ADD ADD ADD ADD ADD ADD
    }
    double t = now() - t0;
    if (t < best) best = t;
  }
  vec m = {0}, c = {0};
  m += 0.5f; c += (float)argc;
  vec a0 = c, a1 = c + 1, a2 = c + 2, a3 = c + 3, a4 = c + 4, a5 = c + 5, a6 = c + 6, a7 = c + 7, a8 = c + 8, a9 = c + 9;
  for (int r = 0; r < 15; r++) {
    double t0 = now();
    for (long i = 0; i < n / 4; i++) {
#define F(a) a = a * m + c;
      F(a0) F(a1) F(a2) F(a3) F(a4) F(a5) F(a6) F(a7) F(a8) F(a9)
      F(a0) F(a1) F(a2) F(a3) F(a4) F(a5) F(a6) F(a7) F(a8) F(a9)
      __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7),
                       "+x"(a8), "+x"(a9));
    }
    double t = now() - t0;
    if (t < bestf) bestf = t;
  }
  vec s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9;
  printf("%.1f %.3f %d\n", 16.0 * n / best / 1e6, (20.0 * (n / 4) / bestf) / (16.0 * n / best),
         (int)(s[0] != s[0]) + (int)(x & 1));
  return 0;
}
"""
#: the compiler flags that give the probe's vectors of each width FMA instructions (x86-64)
_VECTOR_FLAGS = {512: ["-mavx512f", "-mfma"], 256: ["-mavx2", "-mfma"]}


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


def _cpu_flags(info: dict[str, str]) -> str:
    """The CPU flags of /proc/cpuinfo entries (x86 ``flags``, Arm ``Features``; empty where none)."""
    return info.get("flags") or info.get("Features") or ""


def cpu_has(flag: str) -> bool:
    """Whether this machine's CPU lists ``flag`` (``avx512_vnni``...) in /proc/cpuinfo (False where
    there is none)."""
    return flag in _cpu_flags(_cpuinfo()).split()


def _cores() -> Fact:
    try:
        n, how = len(os.sched_getaffinity(0)), "os.sched_getaffinity (CPUs this process may run on)"
    except (AttributeError, OSError):
        n, how = os.cpu_count() or 1, "os.cpu_count"
    return Fact(n, "", how, origin=MEASURED)


def _simd_bits() -> Fact:
    """The widest SIMD register: x86 flags avx512f/avx2/avx/sse2, Arm asimd (NEON); the base ISA else."""
    info = _cpuinfo()
    flags = set(_cpu_flags(info).split())
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


def cache_home() -> Path:
    """Where plait caches files: ``$XDG_CACHE_HOME/plait`` when that variable holds an absolute path (the
    XDG rule), else ``~/.cache/plait``."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path(os.path.expanduser("~")) / ".cache"
    return base / "plait"


def _machine_key() -> str:
    """This machine's processor, as the clock cache knows it: architecture, model name and flags."""
    info = _cpuinfo()
    text = "|".join((platform.machine(), info.get("model name", ""), _cpu_flags(info)))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_probe(simd_bits: int) -> tuple[float, float] | None:
    """(the clock in MHz at which a chain of dependent adds runs, vector FMAs of ``simd_bits`` issued per
    cycle) from the compiled :data:`_PROBE_C`; None when this is not an x86-64 machine with 256- or
    512-bit vectors or no C compiler (``$CC``, ``cc``, ``gcc``) builds and runs it."""
    cc = next((c for c in (os.environ.get("CC", ""), "cc", "gcc") if c and shutil.which(c)), None)
    if cc is None or platform.machine().lower() not in ("x86_64", "amd64") or simd_bits not in _VECTOR_FLAGS:
        return None
    try:
        with tempfile.TemporaryDirectory(prefix="plait-probe-") as d:
            src, exe = Path(d) / "probe.c", Path(d) / "probe"
            src.write_text(_PROBE_C)
            subprocess.run([cc, "-O2", "-ffp-contract=fast", f"-DVEC_BYTES={simd_bits // 8}", *_VECTOR_FLAGS[simd_bits],
                            str(src), "-o", str(exe)], check=True, capture_output=True, timeout=60)
            out = subprocess.run([str(exe)], check=True, capture_output=True, text=True, timeout=60).stdout
        mhz, fmas = (float(v) for v in out.split()[:2])
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return (mhz, fmas) if mhz > 0 and fmas > 0 else None


def _probe() -> tuple[dict[str, Any], Path] | None:
    """This machine's probed facts (:func:`run_probe`): ``clock_mhz`` rounded to
    :data:`CLOCK_STEP_MHZ`, ``fma_bits`` (the widest vector one FMA pipe takes in one pass: the SIMD
    width, halved while two pipes issue fewer than 1.5 FMAs of it per cycle), and the file they are cached
    in: probed once per machine (the first result written wins, so every later process, and every test
    worker, reads the same numbers)."""
    path = cache_home() / "host" / f"probe-{_machine_key()}.json"
    try:
        data = json.loads(path.read_text())
        return {"clock_mhz": int(data["clock_mhz"]), "fma_bits": int(data["fma_bits"])}, path
    except (OSError, ValueError, KeyError, TypeError):
        pass
    simd = int(_simd_bits().value or 0)
    got = run_probe(simd)
    if got is None:
        return None
    mhz, fmas = got
    bits = simd
    while fmas < 1.5 and bits > 128:
        bits, fmas = bits // 2, fmas * 2
    data = {"clock_mhz": max(CLOCK_STEP_MHZ, int(round(mhz / CLOCK_STEP_MHZ)) * CLOCK_STEP_MHZ), "fma_bits": bits,
            "measured_mhz": round(mhz, 1), "fma_per_cycle": round(got[1], 3), "simd_bits": simd}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data) + "\n")
        try:
            os.link(tmp, path)  # atomic; fails when another process cached its result first
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    return {"clock_mhz": int(data["clock_mhz"]), "fma_bits": int(data["fma_bits"])}, path


def _clock_mhz() -> Fact:
    """The effective clock (:func:`_probe`), else the maximum clock (cpufreq), else the model
    name's nominal clock, else 'cpu MHz' of CPU 0."""
    probed = _probe()
    if probed is not None:
        return Fact(probed[0]["clock_mhz"], "MHz", f"a timed chain of dependent adds (1 cycle each), fastest of 15 "
                    f"runs, rounded to {CLOCK_STEP_MHZ} MHz; cached in {probed[1]}", origin=MEASURED)
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


def _fma_bits() -> Fact:
    """The widest vector one FMA pipe executes in one pass (:func:`_probe`), else the SIMD width."""
    probed = _probe()
    if probed is not None:
        return Fact(probed[0]["fma_bits"], "bits", f"timed independent vector FMAs (two pipes: a width issued at "
                    f"fewer than 1.5 per cycle is split in halves); cached in {probed[1]}", origin=MEASURED)
    return Fact(_simd_bits().value, "bits", "the SIMD width", "not probed (no C compiler, or not an x86-64 "
                "machine with 256- or 512-bit vectors)", origin=ESTIMATE)


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


_MEASURES = {"clock_mhz": _clock_mhz, "fma_bits": _fma_bits, "fpu": _fpu, "simd_bits": _simd_bits, "ram_kb": _ram_kb,
             "flash_kb": _flash_kb, "power_mw": _power_mw, "cores": _cores}


@lru_cache(maxsize=None)
def measure(name: str) -> Fact:
    """The fact ``name`` of this machine (one of :data:`MEASURABLE`), measured once per process."""
    return _MEASURES[name]()


MEASURABLE = tuple(_MEASURES)

__all__ = ["CLOCK_STEP_MHZ", "ESTIMATE", "MEASURABLE", "MEASURED", "cache_home", "cpu_has", "measure", "run_probe"]
