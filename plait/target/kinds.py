"""The in-tree target kinds: ``c`` (C source for a C compiler) and ``llvm`` (host code through LLVM).

Backends (``plait/backends/c/backend.py``, ...) attach hooks and code generation to these kinds through
:func:`plait.target.hooks.register_hook`; the kinds themselves only describe options and flags.

The ``c`` kind reads ``-mcpu=cortex-m4f`` / ``cortex-m7f`` / ``cortex-m33f`` as the core with its
single-precision FPU and the hard-float ABI (gcc has no such CPU names), and exposes two attributes
for the C backend: ``compiler(target) -> str``, ``compiler_flags(target, host_simulation=False)`` and
``simulation_compiler(target) -> (cc, why)`` (what builds the piece's C for this machine in host simulation),
and ``schedule_rules(target) -> str`` naming the default-schedule rule set of :mod:`plait.schedule`.
"""

from __future__ import annotations

import platform
from typing import Any

from plait.target.cpus import ARM_M_CPUS, LLVM_X86_CPUS, X86_TUNE_CPUS, check_cpu, compiler_cpus, llvm_cpus
from plait.target.errors import TargetError
from plait.target.kind import TargetKind, register_kind
from plait.target.options import Option

# "-mcpu=<core>f": the core plus its single-precision FPU (Arm TRMs; gcc's -mfpu names)
FPU_SUFFIX = {
    "cortex-m4f": ("cortex-m4", "fpv4-sp-d16"),
    "cortex-m7f": ("cortex-m7", "fpv5-sp-d16"),
    "cortex-m33f": ("cortex-m33", "fpv5-sp-d16"),
}


def _normalize_c(opts: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    cpu = opts["mcpu"]
    if cpu not in FPU_SUFFIX:
        return opts, []
    core, fpu = FPU_SUFFIX[cpu]
    for name, bad in (("mfpu", "none"), ("mfloat-abi", "soft")):
        if opts[name] == bad:
            raise TargetError(f"-mcpu={cpu} means {core} with its single-precision FPU (-mfpu={fpu}); "
                              f"it conflicts with -{name}={bad}")
    opts["mcpu"] = core
    opts["mfpu"] = opts["mfpu"] or fpu
    opts["mfloat-abi"] = opts["mfloat-abi"] or "hard"
    return opts, [f"-mcpu={cpu} read as -mcpu={core} -mfpu={opts['mfpu']} -mfloat-abi={opts['mfloat-abi']}"]


def _on_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def _validate_c(opts: dict[str, Any]) -> None:
    """``-mcpu`` must be a CPU the compiler that will build it accepts: arm-none-eabi-gcc for a
    Cortex-M name, else gcc (or ``-cc``). Checked against plait's list first, then the compiler's."""
    cpu = opts["mcpu"]
    if not cpu:
        return
    arm = cpu.startswith("cortex-m")
    cc = opts["cc"] or ("arm-none-eabi-gcc" if arm else "gcc")
    own = ARM_M_CPUS if arm else (X86_TUNE_CPUS if _on_x86() else frozenset())
    check_cpu(cpu, own, [(cc, lambda: compiler_cpus(cc))], translated=FPU_SUFFIX,
              suggestions=ARM_M_CPUS | X86_TUNE_CPUS)


def _validate_llvm(opts: dict[str, Any]) -> None:
    """``-mcpu`` must be a CPU LLVM (llvmlite) knows for this machine's triple."""
    cpu = opts["mcpu"]
    if cpu:
        check_cpu(cpu, LLVM_X86_CPUS if _on_x86() else frozenset(), [("LLVM", llvm_cpus)],
                  suggestions=LLVM_X86_CPUS)


def is_cortex_m(target: Any) -> bool:
    return target.options["mcpu"].startswith("cortex-m")


def c_compiler(target: Any, host_simulation: bool = False) -> str:
    """The C compiler command: ``-cc`` if given, else arm-none-eabi-gcc for Cortex-M, else gcc.
    ``host_simulation`` compiles the piece's C for this machine: see :func:`simulation_compiler`."""
    if host_simulation:
        return simulation_compiler(target)[0]
    return target.options["cc"] or ("arm-none-eabi-gcc" if is_cortex_m(target) else "gcc")


def simulation_compiler(target: Any) -> tuple[str, str]:
    """(compiler, why -cc is not it) for building a ``c`` piece's C for this machine (host simulation).
    A host piece's ``-cc`` is used as given. A Cortex-M piece's ``-cc`` is its cross compiler: used when it
    makes code for this machine too (its ``-dumpmachine`` names this architecture, e.g. ``-cc=clang``),
    else gcc builds the simulation and ``why`` says so (``-cc`` still builds the device code). A ``-cc``
    that cannot be asked (not installed) is used, and its build reports it."""
    from plait.target.cpus import compiler_machine, makes_host_code

    cc = target.options["cc"]
    if not cc:
        return "gcc", ""
    if not is_cortex_m(target):
        return cc, ""
    machine = compiler_machine(cc)
    if machine is None or makes_host_code(machine):
        return cc, ""
    return "gcc", f"its -cc '{cc}' makes code for {machine}, not this machine"


def c_compiler_flags(target: Any, host_simulation: bool = False) -> list[str]:
    """gcc flags for the target, e.g. ``-mcpu=cortex-m7 -mthumb -mfpu=fpv5-sp-d16 -mfloat-abi=hard -O2``.
    With ``host_simulation`` only the portable ones (the optimization level)."""
    o = target.options
    flags = []
    if not host_simulation:
        if o["mcpu"]:
            flags.append(f"-mcpu={o['mcpu']}")
        if is_cortex_m(target):
            flags.append("-mthumb")
        flags += [f"-{name}={o[name]}" for name in ("march", "mfpu", "mfloat-abi") if o[name]]
    flags.append(f"-O{o['opt-level']}")
    return flags


def c_device(target: Any) -> str:
    """The device a c piece runs on: its Cortex-M core (``cortex-m7``), else ``host``. Pieces on the
    same device share memory (placement inserts no ``device_copy`` between them)."""
    return target.options["mcpu"] if is_cortex_m(target) else "host"


def c_schedule_rules(target: Any) -> str:
    """The default-schedule rule set (:mod:`plait.schedule`): ``microcontroller`` for Cortex-M CPUs
    (scalar loops, small unrolls), ``cpu`` otherwise (SIMD register tiles; widths from the tag facts)."""
    return "microcontroller" if is_cortex_m(target) else "cpu"


C: TargetKind = register_kind(
    "c",
    device_type="cpu",
    doc="C source compiled by a C compiler (gcc on the host, arm-none-eabi-gcc for Cortex-M)",
    options=(
        Option("mcpu", str, "", "CPU passed as -mcpu (cortex-m0, cortex-m4f, cortex-m7f, cortex-m55, ...); "
                                "empty: the compiler's default"),
        Option("march", str, "", "architecture passed as -march (e.g. armv7e-m); empty: implied by -mcpu"),
        Option("mfpu", str, "", "FPU passed as -mfpu (e.g. fpv5-sp-d16); empty: implied by -mcpu"),
        Option("mfloat-abi", str, "", "float ABI passed as -mfloat-abi; empty: the compiler's default",
               choices=("", "soft", "softfp", "hard")),
        Option("opt-level", int, 2, "optimization level passed as -O<n>", choices=(0, 1, 2, 3)),
        Option("cc", str, "", "C compiler command; empty: arm-none-eabi-gcc for Cortex-M CPUs, else gcc"),
    ),
    default_keys=("cpu",),
    attrs={"compiler": c_compiler, "compiler_flags": c_compiler_flags, "simulation_compiler": simulation_compiler,
           "schedule_rules": c_schedule_rules, "device": c_device},
    normalize=_normalize_c,
    validate=_validate_c,
    identity=("mcpu", "march", "mfpu"),
)

LLVM: TargetKind = register_kind(
    "llvm",
    device_type="cpu",
    doc="host code generated and JIT-compiled through LLVM",
    options=(
        Option("mcpu", str, "", "CPU for LLVM code generation (e.g. x86-64-v3, znver3); empty: the host CPU"),
        Option("mattr", list, (), "LLVM target features, e.g. +avx2,+fma"),
    ),
    default_keys=("cpu",),
    validate=_validate_llvm,
    identity=("mcpu",),
)
