"""The CPU names a kind's compiler accepts for ``-mcpu``, to reject a typo when a target is parsed.

    known = compiler_cpus("arm-none-eabi-gcc")   # frozenset of names, or None when it cannot be asked
    check_cpu("cortx-m0", "gcc", ...)            # TargetError with "did you mean 'cortex-m0'?"

A name in plait's own list (:data:`ARM_M_CPUS`, :data:`X86_TUNE_CPUS`, :data:`LLVM_X86_CPUS`: the
CPUs plait knows) is accepted without running anything. Any other name is looked up in the list the
compiler prints (``<cc> -mcpu=help``: gcc answers with its valid arguments; for LLVM, llvmlite's
target machine with ``cpu="help"``), asked once per process and cached. When the compiler is absent,
plait's own list is all there is.
"""

from __future__ import annotations

import difflib
import os
import shlex
import shutil
import subprocess
import sys
from functools import lru_cache
from typing import Callable, Iterable

from plait.target.errors import TargetError

#: Cortex-M cores arm-none-eabi-gcc 12 accepts for -mcpu (from its `-mcpu=help` list)
ARM_M_CPUS = frozenset({
    "cortex-m0", "cortex-m0plus", "cortex-m1", "cortex-m0.small-multiply", "cortex-m0plus.small-multiply",
    "cortex-m1.small-multiply", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m23", "cortex-m33", "cortex-m35p",
    "cortex-m55",
})
#: x86 CPUs gcc 12 accepts for -mcpu (an alias of -mtune on x86: its `-mtune=` list)
X86_TUNE_CPUS = frozenset({
    "generic", "native", "intel", "x86-64", "nocona", "core2", "nehalem", "corei7", "westmere", "sandybridge",
    "corei7-avx", "ivybridge", "core-avx-i", "haswell", "core-avx2", "broadwell", "skylake", "skylake-avx512",
    "cannonlake", "icelake-client", "rocketlake", "icelake-server", "cascadelake", "tigerlake", "cooperlake",
    "sapphirerapids", "alderlake", "bonnell", "atom", "silvermont", "slm", "goldmont", "goldmont-plus", "tremont",
    "knl", "knm", "k8", "k8-sse3", "opteron", "opteron-sse3", "athlon64", "athlon64-sse3", "athlon-fx", "amdfam10",
    "barcelona", "bdver1", "bdver2", "bdver3", "bdver4", "znver1", "znver2", "znver3", "btver1", "btver2",
})
#: x86-64 CPUs LLVM accepts for -mcpu (a subset of llvmlite's list)
LLVM_X86_CPUS = frozenset({
    "generic", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "haswell", "broadwell", "skylake",
    "skylake-avx512", "cascadelake", "cooperlake", "icelake-client", "icelake-server", "tigerlake",
    "sapphirerapids", "alderlake", "znver1", "znver2", "znver3", "znver4",
})
PROBE_TIMEOUT_S = 20


def _parse_gcc_list(text: str) -> frozenset[str] | None:
    """The names after gcc's "valid arguments ... are:" (up to a ';'), or None."""
    for line in text.splitlines():
        if "valid arguments" in line and "are:" in line:
            names = line.split("are:", 1)[1].split(";", 1)[0].split()
            return frozenset(names) or None
    return None


@lru_cache(maxsize=None)
def compiler_cpus(cc: str) -> frozenset[str] | None:
    """The ``-mcpu`` values C compiler ``cc`` accepts (gcc prints them when given an unknown one);
    None when ``cc`` is not installed or prints no list. Asked once per process."""
    try:
        command = shlex.split(cc)  # a command may carry a wrapper or flags: "ccache gcc"
    except ValueError:
        return None
    if not command or shutil.which(command[0]) is None:
        return None
    env = dict(os.environ, LC_ALL="C")  # ASCII quotes in gcc's messages
    try:
        r = subprocess.run([*command, "-mcpu=help", "-E", "-x", "c", os.devnull], capture_output=True, text=True,
                           timeout=PROBE_TIMEOUT_S, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return _parse_gcc_list(r.stderr)


@lru_cache(maxsize=None)
def compiler_machine(cc: str) -> str | None:
    """The machine C compiler ``cc`` makes code for (``<cc> -dumpmachine``: ``x86_64-linux-gnu``,
    ``arm-none-eabi``); None when ``cc`` is not installed or does not say. Asked once per process."""
    try:
        command = shlex.split(cc)
    except ValueError:
        return None
    if not command or shutil.which(command[0]) is None:
        return None
    try:
        r = subprocess.run([*command, "-dumpmachine"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    machine = r.stdout.strip()
    return machine if r.returncode == 0 and machine and "\n" not in machine else None


_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def makes_host_code(machine: str) -> bool:
    """Does a compiler whose ``-dumpmachine`` is ``machine`` make code for this machine (same architecture)?"""
    import platform

    def arch(name: str) -> str:
        return _ARCH_ALIASES.get(name.lower(), name.lower())

    return arch(machine.split("-")[0]) == arch(platform.machine())


_LLVM_PROBE = ("import llvmlite.binding as b\n"
               "b.initialize_native_target()\n"
               "b.Target.from_default_triple().create_target_machine(cpu='help')\n")


@lru_cache(maxsize=None)
def llvm_cpus() -> frozenset[str] | None:
    """The CPU names llvmlite's LLVM knows for this machine's triple (LLVM prints them for
    ``cpu="help"``; asked in a child process, once per process); None without llvmlite."""
    try:
        r = subprocess.run([sys.executable, "-c", _LLVM_PROBE], capture_output=True, text=True,
                           timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    names, listing = set(), False
    for line in (r.stderr + r.stdout).splitlines():
        if line.startswith("Available CPUs"):
            listing = True
        elif line.startswith("Available features"):
            break
        elif listing and " - " in line:
            names.add(line.split(" - ", 1)[0].strip())
    return frozenset(names) or None


def check_cpu(cpu: str, accepted: frozenset[str], compilers: Iterable[tuple[str, Callable[[], frozenset[str] | None]]],
              translated: Iterable[str] = (), suggestions: Iterable[str] = ()) -> None:
    """Raise :class:`TargetError` unless ``cpu`` is in ``accepted`` (plait's list, checked first: nothing
    runs) or in the list of one of ``compilers`` (``(name, function giving its list or None)``). The
    message offers the closest names among all of these and ``suggestions``, and names the CPUs plait
    translates itself (``translated``, e.g. ``cortex-m7f``)."""
    if cpu in accepted:
        return
    asked = [(name, get()) for name, get in compilers]
    if any(names is not None and cpu in names for _, names in asked):
        return
    translated = list(translated)
    pool = sorted(set(suggestions) | set(accepted) | set(translated)
                  | {n for _, names in asked if names is not None for n in names})
    close = difflib.get_close_matches(cpu, pool, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    told = [n for n, names in asked if names is not None]
    absent = [n for n, names in asked if names is None]
    if told:
        msg = f"-mcpu={cpu} is not a CPU that {' or '.join(told)} accepts{hint}"
    else:
        msg = f"-mcpu={cpu} is not a CPU plait knows{hint} ({' or '.join(absent) or 'no compiler'} could not be asked)"
    if translated:
        msg += f"; plait also translates {', '.join(translated)} (the core with its FPU)"
    raise TargetError(msg)


__all__ = ["ARM_M_CPUS", "LLVM_X86_CPUS", "X86_TUNE_CPUS", "check_cpu", "compiler_cpus", "llvm_cpus"]
