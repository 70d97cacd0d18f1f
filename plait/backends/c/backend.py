"""The C backend: TIR PrimFuncs -> portable C99 -> a shared library (host) or an object (Cortex-M).

    src = codegen_c(funcs, Target("c"))            # a CSourceModule (deterministic text)
    lib = build_c(funcs, Target("c"))              # a DSOModule: lib["matmul"](A, B, C)
    obj = build_c(funcs, Target("c -mcpu=cortex-m7f"))   # a CrossModule (object file, compile check)
    sim = build_c(funcs, Target("c -mcpu=cortex-m7f"), host_simulation=True)  # same C, run on the host

The generated file includes only <math.h>, <stdint.h>, <stdbool.h> and <stddef.h>. Each PrimFunc
becomes ``int32_t NAME(const float* restrict in, ..., float* restrict out, int64_t n)`` returning 0:
buffers are flat row-major arrays (``const`` when never written; ``restrict``: the caller must not
pass overlapping buffers), scalar params come by value. Loop kinds: ``vectorized`` ->
``#pragma omp simd`` (gcc rejects ``#pragma GCC ivdep`` and ``omp simd`` on the same loop; ``omp
simd`` asserts the same independence and asks for vectorization; builds pass ``-fopenmp-simd``, so
no OpenMP runtime is involved), ``unrolled`` -> ``#pragma GCC unroll N``, ``parallel`` -> a plain
loop (single thread for now). ``plait.build`` lifts ``global.workspace`` allocations into a
workspace-arena parameter the executor plans (:mod:`plait.memory.workspace`); ones still present (a
PrimFunc built directly) are static arrays aligned to 64 bytes (not reentrant), ``local`` ones stack
arrays. Every identifier is sanitized (:mod:`plait.runtime.c_lang`); model names appear only in
escaped comments. The same PrimFuncs give byte-identical source.

Flags (:func:`compiler_and_flags`, the one place they come from; :func:`host_flags` for this machine):
every build has ``-std=c99`` (no ``-fwrapv``: the generated C never overflows a signed type; TIR's
wrapping integers are computed in unsigned arithmetic), ``-fno-math-errno`` (sqrtf etc. inline to one
instruction), ``-fopenmp-simd``, and the contraction of :func:`contract_flag`: ``-ffp-contract=fast``
for host pieces (a*b+c may fuse into an FMA: faster on AVX2, results within 1e-4 of the interpreter;
-std=c99 alone would turn contraction off), ``-ffp-contract=off`` for a Cortex-M piece in every build
of its C (cross, host simulation, the AOT host runner, the firmware), so the host and the core round
every operation alike and give bit-identical float32 results (libm's transcendental functions aside:
docs/embedded.md); never ``-ffast-math`` (NaN, inf and signed zeros keep their meaning). A simulated
Cortex-M piece also leaves out libmvec (scalar libm, as on the device). Host builds add
``-march=native`` unless the target gives ``-mcpu``/``-march``, and use ``-O3``: the c kind's
``-opt-level`` default (2) is meant for embedded builds, so on the host the default means 3 (an explicit 0 or 1 is honoured; an explicit 2 cannot be told from the default).
Cortex-M targets are cross-compiled with ``arm-none-eabi-gcc`` and the target's ``compiler_flags``
(``-mcpu -mthumb -mfpu -mfloat-abi -O<n>``).
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass
from typing import Any, Sequence

from plait.backends.c.emit import CodegenError, CFunctionEmitter
from plait.backends.c.helpers import ALIGN_MACRO, OPTIMIZE_MACRO, helper_source
from plait.runtime.c_lang import value_type
from plait.backends.c.units import compile_units, split_units
from plait.runtime.c_lang import C_KEYWORDS, HEADER_NAMES, HELPER_PREFIX, NameTable, comment_text, is_identifier
from plait.target.backend import Backend, CToolchain, CUnit, option
from plait.target.boards import check_board
from plait.target.cpus import ARM_M_CPUS, X86_TUNE_CPUS, check_cpu, compiler_cpus
from plait.target.errors import TargetError
from plait.target.tags import C_TAGS
from plait.runtime.cc import CompileError, compile_source
from plait.runtime.module import CrossModule, CSourceModule, Module
from plait.backends.c.kernels import c_kernel
from plait.backends.c.libm import libm_source
from plait.backends.c.rounding import lacks_vrint, round_by_magic
from plait.tir.errors import KernelError
from plait.tir.expr import Call
from plait.tir.functor import extern_calls, func_name, pre_order
from plait.tir.narrow import narrow_indices
from plait.tir.partition import partition_loops
from plait.tir.stmt import PrimFunc
from plait.tir.verify import verify

BASE_FLAGS = ("-std=c99", "-fno-math-errno", "-fopenmp-simd")  # every build; contraction: contract_flag
CONTRACT_FAST, CONTRACT_OFF = "-ffp-contract=fast", "-ffp-contract=off"
CROSS_FLAGS = ("-ffunction-sections", "-fdata-sections")
# x86-64 host builds: no red zone. gcc 12 at -O3 with AVX-512 places a 16-byte-aligned local array (an
# accumulator row of a register tile) in the red zone of a leaf function whose frame it did not realign,
# then stores to it with vmovdqa: a segfault (seen on a grouped int8 convolution). Without a red zone gcc
# allocates the frame with sub rsp and aligns it; the cost is one instruction per call.
X86_HOST_FLAGS = ("-mno-red-zone",)
INCLUDES = ("math.h", "stdbool.h", "stddef.h", "stdint.h")


# float libm functions with SIMD versions in glibc's libmvec (x86-64, glibc >= 2.35): declared with
# gcc's simd attribute, vectorized loops call _ZGV<isa>N<lanes>v_<name> (within 4 ulp of the scalar
# function; special values handled). Host builds only: -DPLAIT_VECTOR_MATH -lmvec when libmvec exists.
VECTOR_MATH_1 = ("acosf", "acoshf", "asinf", "asinhf", "atanf", "atanhf", "cbrtf", "cosf", "coshf", "erff",
                 "erfcf", "exp2f", "expf", "expm1f", "log10f", "log1pf", "log2f", "logf", "sinf", "sinhf",
                 "tanf", "tanhf")
VECTOR_MATH_2 = ("atan2f", "powf")
_VECTOR_MATH_USE = re.compile(r"\b(" + "|".join(VECTOR_MATH_1 + VECTOR_MATH_2) + r")\(")
VECTOR_MATH_MACRO = "PLAIT_VECTOR_MATH"


def _vector_math_decls(bodies: Sequence[str]) -> str:
    """Declarations giving the libm functions the bodies call their SIMD versions (guarded)."""
    used = sorted({m for b in bodies for m in _VECTOR_MATH_USE.findall(b)})
    if not used:
        return ""
    lines = [f"#if defined({VECTOR_MATH_MACRO}) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) "
             "&& defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))",
             "/* glibc's libmvec has SIMD versions of these: vectorized loops call them */"]
    for m in used:
        params = "float, float" if m in VECTOR_MATH_2 else "float"
        lines.append(f'__attribute__((simd("notinbranch"))) float {m}({params});')
    lines.append("#endif\n")
    return "\n".join(lines)


def vector_math_available() -> bool:
    """Can host builds link glibc's libmvec (x86-64 Linux)?"""
    import ctypes.util
    import platform
    import sys

    global _VECTOR_MATH
    if _VECTOR_MATH is None:
        _VECTOR_MATH = (sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")
                        and ctypes.util.find_library("mvec") is not None)
    return _VECTOR_MATH


_VECTOR_MATH: bool | None = None


def _externs(funcs: Sequence[PrimFunc]) -> dict[str, tuple[str, tuple[str, ...], str]]:
    """Extern functions called: name -> (return dtype, argument dtypes, first caller)."""
    def usable(name: str) -> bool:
        return is_identifier(name) and name not in C_KEYWORDS and not name.startswith(HELPER_PREFIX) \
            and name != "plait_manifest"

    return extern_calls(funcs, "C", usable, CodegenError)


def _kernels(funcs: Sequence[PrimFunc]) -> dict[str, str]:
    """The C functions of the kernels ``funcs`` call (:mod:`plait.backends.c.kernels`) -> their sources;
    a kernel the C backend does not implement is a :class:`CodegenError`."""
    out: dict[str, str] = {}
    for k, f in enumerate(funcs):
        for n in pre_order(f.body, unique=True):
            if isinstance(n, Call) and n.kind == "kernel":
                try:
                    impl = c_kernel(n.name)
                except KernelError as exc:
                    raise CodegenError(f"C codegen of PrimFunc '{func_name(f, k)}': {exc}") from None
                out[impl.symbol] = impl.source
    return out


def _names(funcs: Sequence[PrimFunc], externs: Sequence[str]) -> tuple[NameTable, list[str]]:
    table = NameTable()
    for e in externs:
        table.reserve(e)
    return table, [table.fresh(func_name(f, k), "func") for k, f in enumerate(funcs)]


def c_function_names(funcs: Sequence[PrimFunc]) -> list[str]:
    """The C symbol of each PrimFunc (its global_symbol when that is already a safe, unique name)."""
    return _names(funcs, [*_externs(funcs), *_kernels(funcs)])[1]


def codegen_c(funcs: Sequence[PrimFunc], target: Any = None, name: str = "module") -> CSourceModule:
    """C99 source for ``funcs`` (one function each), as a :class:`CSourceModule` whose signatures
    are keyed by the C symbols (see :func:`c_function_names`)."""
    return _source_module(*_c_parts(funcs, target), target, name)


def _source_module(head: list[str], bodies: list[str], sigs: dict[str, Any], vm: bool, target: Any,
                   name: str) -> CSourceModule:
    return CSourceModule("\n".join([*head, *bodies]), sigs, name=NameTable().fresh(name, "module"),
                         compile_flags=host_flags(target), link_flags=("-lmvec",) if vm and vector_math_available() else ())


def _c_parts(funcs: Sequence[PrimFunc], target: Any) -> tuple[list[str], list[str], dict[str, Any], bool]:
    """(the file's head: includes, helpers, declarations; one text per function; signatures; whether
    the head declares vector math) of the C for ``funcs``."""
    funcs = list(funcs)
    for k, f in enumerate(funcs):
        if not isinstance(f, PrimFunc):
            raise CodegenError(f"codegen_c expects PrimFuncs, got {type(f).__name__} at position {k}")
        verify(f)
    funcs = target_prim_funcs(funcs, target)
    externs = _externs(funcs)
    kernels = _kernels(funcs)
    table, cnames = _names(funcs, [*externs, *kernels])
    libm = _libm_of(target)
    bodies, sigs, helpers, routines, align, optimize = [], {}, set(), set(), False, False
    for k, (f, cname) in enumerate(zip(funcs, cnames)):
        em = CFunctionEmitter(f, cname, table, f"PrimFunc '{func_name(f, k)}'", libm=libm)
        text, sig = em.function()
        bodies.append(text)
        sigs[cname] = sig
        helpers |= em.helpers
        routines |= em.routines
        align = align or em.uses_align
        optimize = optimize or bool(em.optimize)
    parts = [f"/* Generated by plait's C backend for target \"{comment_text(str(target) if target else 'c')}\". */\n"
             + "".join(f"#include <{h}>\n" for h in INCLUDES)]
    if align:
        parts.append(ALIGN_MACRO)
    if optimize:
        parts.append(OPTIMIZE_MACRO)
    if helpers:
        parts.append(helper_source(helpers))
    if routines:
        parts.append(libm_source(routines))
    parts += [kernels[s] for s in sorted(kernels)]  # (the kernels called: their sources)
    decls = []
    for e in sorted(externs):
        ret, args, _ = externs[e]
        if e not in HEADER_NAMES:
            params = ", ".join(value_type(d) for d in args) or "void"
            decls.append(f"extern {value_type(ret)} {e}({params});\n")
    if decls:
        parts.append("".join(decls))
    vm = _vector_math_decls(bodies)
    if vm:
        parts.append(vm)
    return parts, bodies, sigs, bool(vm)


def _libm_of(target: Any) -> str:
    """:func:`libm_mode` of ``target`` (``system`` without one, or for a kind without the option)."""
    if target is None:
        return "system"
    from plait.target import Target

    t = Target(target)
    return libm_mode(t) if "libm" in t.options else "system"


def target_prim_funcs(funcs: Sequence[PrimFunc], target: Any) -> list[PrimFunc]:
    """``funcs`` as the C for ``target`` is generated from them: on a core with 32-bit registers
    (``Machine.word_bits``) padded copies split into border and interior loops (:mod:`plait.tir.partition`:
    no bounds test per element) and index arithmetic in int32 where it fits (:mod:`plait.tir.narrow`), on an FPU
    without VRINT requantizations rounded by the magic number (:mod:`plait.backends.c.rounding`); the
    same objects for a host target (or none)."""
    funcs = list(funcs)
    if target is None:
        return funcs
    from plait.target import Target

    t = Target(target)
    if _word_bits(t) <= 32:
        funcs = [narrow_indices(partition_loops(f)) for f in funcs]
    if lacks_vrint(t):
        funcs = [round_by_magic(f) for f in funcs]
    return funcs


def _word_bits(target: Any) -> int:
    """The width of ``target``'s general registers (its machine's ``word_bits``)."""
    from plait.schedule.rules import machine_for

    return machine_for(target).word_bits


# ---- build ----------------------------------------------------------------------------------------


def is_cross(target: Any) -> bool:
    """Does ``target`` need a cross compiler (a Cortex-M core)?"""
    return "mcpu" in target.options and is_cortex_m(target)


def _target_flags(target: Any, host_simulation: bool) -> list[str]:
    flags = getattr(target.backend, "compiler_flags", None)  # kinds that build through here (blas) have none
    return [] if flags is None else list(flags(target, host_simulation=host_simulation))


def host_opt_level(target: Any) -> int:
    """-O level of a host build: the target's, except that the kind's default (2) means 3 here."""
    if "opt-level" not in target.options:
        return 3
    level = target.options["opt-level"]
    return 3 if level == target.kind.option("opt-level").default else level


def contract_flag(target: Any) -> str:
    """``-ffp-contract=off`` for a Cortex-M piece (every build of its C: cross, host simulation, AOT host
    runner, firmware), so the host and the core round every float operation alike; else ``=fast`` (FMA)."""
    return CONTRACT_OFF if is_cross(target) else CONTRACT_FAST


def host_is_x86_64() -> bool:
    """Whether this machine (where host builds run) is x86-64."""
    return platform.machine().lower() in ("x86_64", "amd64")


def compiler_and_flags(target: Any, host_simulation: bool = False) -> tuple[str, list[str], bool]:
    """(compiler, flags, cross) for building ``target``'s C. The one place a c piece's flags come from."""
    cross = is_cross(target) and not host_simulation
    compiler = getattr(target.backend, "compiler", None)
    cc = "gcc" if compiler is None else compiler(target, host_simulation=host_simulation)
    tflags = _target_flags(target, host_simulation)
    base = [*BASE_FLAGS, contract_flag(target)]
    if cross:
        return cc, [*base, *tflags, *CROSS_FLAGS], True
    tflags = [f for f in tflags if not f.startswith("-O")]
    if not any(f.startswith(("-march=", "-mcpu=")) for f in tflags):
        tflags.append("-march=native")
    if host_is_x86_64():
        tflags.extend(X86_HOST_FLAGS)
    if vector_math_available() and not is_cross(target):  # a simulated core calls scalar libm, as on the device
        tflags.append(f"-D{VECTOR_MATH_MACRO}")
    return cc, [*base, f"-O{host_opt_level(target)}", *tflags], False


def host_flags(target: Any = None) -> list[str]:
    """Flags that build ``target``'s C for this machine (host simulation for a Cortex-M target)."""
    from plait.target import Target

    t = Target(target if target is not None else "c")
    return compiler_and_flags(t, host_simulation=is_cross(t))[1]


_IN_FUNCTION = re.compile(r"In function [\u2018'`]([A-Za-z_][A-Za-z0-9_]*)[\u2019'`]")


def _name_functions(exc: CompileError, funcs: Sequence[PrimFunc], target: Any) -> CompileError:
    cnames = c_function_names(funcs)
    orig = {c: func_name(f, k) for k, (f, c) in enumerate(zip(funcs, cnames))}
    hit = [c for c in dict.fromkeys(_IN_FUNCTION.findall(str(exc))) if c in orig]
    which = hit or cnames
    names = ", ".join(f"'{orig[c]}'" + (f" (C function '{c}')" if c != orig[c] else "") for c in which)
    return CompileError(f"the C code of PrimFunc {names} does not compile for target '{target}': {exc}")


def build_c(funcs: Sequence[PrimFunc], target: Any = None, *, host_simulation: bool = False,
            cache_dir: Any = None, name: str = "module", link_flags: Sequence[str] = ()) -> Module:
    """Generate and compile C for ``funcs``: a :class:`DSOModule` for the host (or with
    ``host_simulation``), a :class:`CrossModule` (object file) for a Cortex-M target.
    ``link_flags`` (host builds) link libraries the PrimFuncs' extern calls need (``-L.. -l..``)."""
    from plait.target import Target

    target = Target(target if target is not None else "c")
    funcs = list(funcs)
    head, bodies, sigs, vm = _c_parts(funcs, target)
    src = _source_module(head, bodies, sigs, vm, target, name)
    src.link_flags = (*src.link_flags, *link_flags)
    cc, flags, cross = compiler_and_flags(target, host_simulation)
    try:
        if cross:
            obj = compile_source(src.full_source(), name=src.name, cc=cc, flags=flags, shared=False,
                                 cache_dir=cache_dir)
            cross_mod = CrossModule(src.source, src.signatures, src.name, obj, cc, flags, str(target),
                                    compile_flags=src.compile_flags)
            cross_mod.link_flags = src.link_flags  # for compile(): the same C built for the host
            return cross_mod
        units = split_units(head, bodies)
        if len(units) > 1:  # a big module: translation units compiled in parallel, then linked
            return compile_units(src, units, cc=cc, flags=flags, cache_dir=cache_dir)
        return src.compile(cc=cc, flags=flags, cache_dir=cache_dir)
    except CompileError as exc:
        raise _name_functions(exc, funcs, target) from None


def prim_funcs(mod: Any) -> list[PrimFunc]:
    """The PrimFuncs of a lowered IRModule in name order (each named by its global_symbol or key)."""
    return [f if f.name else f.with_attrs(global_symbol=key)
            for key, f in sorted(mod.items()) if isinstance(f, PrimFunc)]


# ---- the c kind -----------------------------------------------------------------------------------

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
    if opts.get("board"):
        if not cpu.startswith("cortex-m"):
            raise TargetError(f"-board={opts['board']} needs a Cortex-M -mcpu (got {'-mcpu=' + cpu if cpu else 'none'})")
        check_board(cpu, opts["board"], hard_float=opts.get("mfloat-abi") in ("hard", "softfp") and
                    opts.get("mfpu") not in ("", "none"))
    if not cpu:
        return
    arm = cpu.startswith("cortex-m")
    cc = opts["cc"] or ("arm-none-eabi-gcc" if arm else "gcc")
    own = ARM_M_CPUS if arm else (X86_TUNE_CPUS if _on_x86() else frozenset())
    check_cpu(cpu, own, [(cc, lambda: compiler_cpus(cc))], translated=FPU_SUFFIX,
              suggestions=ARM_M_CPUS | X86_TUNE_CPUS)


def is_cortex_m(target: Any) -> bool:
    return target.options["mcpu"].startswith("cortex-m")


def requantize_mode(target: Any) -> str:
    """The ``qnn.requantize`` arithmetic of a c piece: its ``-requantize``, else ``fixed`` on a
    Cortex-M core without a hardware FPU (``-mfpu`` empty or none, or ``-mfloat-abi=soft``: every
    float multiply would be a soft-float call), else ``float``."""
    o = target.options
    if o["requantize"]:
        return o["requantize"]
    soft = o["mfpu"] in ("", "none") or o["mfloat-abi"] == "soft"
    return "fixed" if is_cortex_m(target) and soft else "float"


def libm_mode(target: Any) -> str:
    """Whose float32 math routines a c piece's C calls: its ``-libm``, else ``plait`` on a Cortex-M core
    (:mod:`plait.backends.c.libm`: the host simulation and the core give the same bits), else ``system``
    (libm, and libmvec for vectorized loops on x86-64 hosts)."""
    mode = target.options["libm"]
    if mode:
        return mode
    return "plait" if is_cortex_m(target) else "system"


def _compiler(target: Any, host_simulation: bool = False) -> str:
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


def _compiler_flags(target: Any, host_simulation: bool = False) -> list[str]:
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


def _device(target: Any) -> str:
    """The device a c piece runs on: its Cortex-M core (``cortex-m7``), else ``host``. Pieces on the
    same device share memory (placement inserts no ``device_copy`` between them)."""
    return target.options["mcpu"] if is_cortex_m(target) else "host"


def _schedule_rules(target: Any) -> str:
    """The default-schedule rule set (:mod:`plait.schedule`): ``microcontroller`` for Cortex-M CPUs
    (scalar loops, small unrolls), ``cpu`` otherwise (SIMD register tiles; widths from the tag facts)."""
    return "microcontroller" if is_cortex_m(target) else "cpu"




@dataclass(frozen=True)
class COptions:
    """Options of the ``c`` kind."""

    mcpu: str = option("", "CPU passed as -mcpu (cortex-m0, cortex-m4f, cortex-m7f, cortex-m55, ...); "
                           "empty: the compiler's default")
    march: str = option("", "architecture passed as -march (e.g. armv7e-m); empty: implied by -mcpu")
    mfpu: str = option("", "FPU passed as -mfpu (e.g. fpv5-sp-d16); empty: implied by -mcpu")
    mfloat_abi: str = option("", "float ABI passed as -mfloat-abi; empty: the compiler's default",
                             choices=("", "soft", "softfp", "hard"))
    opt_level: int = option(2, "optimization level passed as -O<n>", choices=(0, 1, 2, 3))
    cc: str = option("", "C compiler command; empty: arm-none-eabi-gcc for Cortex-M CPUs, else gcc")
    board: str = option("", "QEMU board a Cortex-M piece runs on (microbit, mps2-an385, mps2-an386, mps2-an500, "
                            "mps3-an547; see docs/embedded.md); empty: the core's default board")
    requantize: str = option("", "arithmetic of int8 requantization (docs/quantization.md): float (ONNX Runtime's) "
                                 "or fixed (TensorFlow Lite's integer multiply and shift); empty: fixed on a "
                                 "Cortex-M core without an FPU, else float", choices=("", "float", "fixed"))
    libm: str = option("", "the float32 transcendental functions the C calls (exp, log, tanh, erf, pow, ...): plait "
                           "(plait's own routines, emitted into the file: the same bits on the host simulation and "
                           "every core, docs/embedded.md) or system (the C library's libm; libmvec on x86-64 "
                           "hosts); empty: plait on a Cortex-M core, else system", choices=("", "plait", "system"))
    int8_dot: str = option("", "int8 dot-product instructions the generated C may count on (the 'outer' forms of "
                               "int8 convolutions, docs/quantization.md): vnni (AVX512-VNNI) or none (with "
                               "256-bit vectors: the kernels' exact AVX2 bodies); empty: this machine's "
                               "(avx512_vnni in /proc/cpuinfo; the C is built with -march=native)",
                           choices=("", "vnni", "none"))


class CBackend(Backend):
    """C source compiled by a C compiler (gcc on the host, arm-none-eabi-gcc for Cortex-M).

    Default lowering; code generation here (:meth:`tir_to_runtime`). Build config it reads (the
    PassContext's): ``cc.cache_dir``; ``c.host_simulation`` (build a Cortex-M piece's C for this
    machine, to run it here) and ``c.cross_check`` (default true: with host simulation, also
    cross-compile it, a compile check returned as the module's ``cross_module``).
    """

    name = "c"
    Options = COptions
    device_type = "cpu"
    emits_c = True
    doc = "C source compiled by a C compiler (gcc on the host, arm-none-eabi-gcc for Cortex-M)"
    default_keys = ("cpu",)
    identity = ("mcpu", "march", "mfpu")
    tags = C_TAGS

    def normalize(self, options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        return _normalize_c(options)

    def validate(self, options: dict[str, Any]) -> None:
        _validate_c(options)

    def device(self, target: Any) -> str:
        return _device(target)

    def schedule_rules(self, target: Any) -> str:
        return _schedule_rules(target)

    def legalize(self, target: Any) -> list:
        """Fixed-point requantizations on a piece whose :func:`requantize_mode` is ``fixed`` (float ones,
        ONNX Runtime's, with ``-requantize=float`` given: a TFLite model's are fixed-point); int8
        convolutions channels-last (:class:`plait.relay.passes.ChannelsLast`) on a host piece whose C
        has a fast body of the kernel ``plait_q8_conv``: 512-bit vectors and AVX512-VNNI, or 256-bit
        vectors (AVX2; :func:`plait.op._qnn_nhwc.conv_kernel_body` of the compute facts: the forms of
        :mod:`plait.op._qnn_nhwc` that pay)."""
        from plait.lowering.lower import target_facts
        from plait.op._qnn_nhwc import conv_kernel_body
        from plait.relay.passes import ChannelsLast, FixedPointRequantize, FloatRequantize

        mode = requantize_mode(target)
        explicit_float = mode == "float" and target.options["requantize"] == "float"
        passes: list = [FixedPointRequantize()] if mode == "fixed" else [FloatRequantize()] if explicit_float else []
        facts = target_facts(target)
        if conv_kernel_body(facts) is not None:
            passes.append(ChannelsLast(tuple(sorted(facts.items())), forms=("outer", "depthwise", "packed")))
        return passes

    def compiler(self, target: Any, host_simulation: bool = False) -> str:
        return _compiler(target, host_simulation)

    def compiler_flags(self, target: Any, host_simulation: bool = False) -> list[str]:
        return _compiler_flags(target, host_simulation)

    def simulation_compiler(self, target: Any) -> tuple[str, str]:
        return simulation_compiler(target)

    def c_unit(self, funcs: Any, target: Any, name: str) -> CUnit:
        """The C of ``funcs`` for the AOT executor's sources (:func:`codegen_c`)."""
        src = codegen_c(funcs, target, name=name)
        return CUnit(src.source, tuple(c_function_names(funcs)), tuple(src.link_flags))

    def c_toolchain(self, target: Any) -> CToolchain:
        cc, flags, _ = compiler_and_flags(target)
        return CToolchain(cc, tuple(flags), tuple(host_flags(target)), BASE_FLAGS)

    def tir_to_runtime(self, mod: Any, target: Any, ctx: Any) -> Module:
        """Every PrimFunc of ``mod`` (name order) compiled; see the class docstring for the config."""
        config = ctx.config
        funcs = prim_funcs(mod)
        cache = config.get("cc.cache_dir")
        sim = bool(config.get("c.host_simulation", False))
        cross = None
        if sim and is_cross(target) and config.get("c.cross_check", True):
            cross = build_c(funcs, target, cache_dir=cache)
        lib = build_c(funcs, target, host_simulation=sim, cache_dir=cache)
        if cross is not None:
            lib.cross_module = cross
        return lib


__all__ = ["BASE_FLAGS", "CONTRACT_FAST", "CONTRACT_OFF", "CBackend", "CodegenError", "CompileError", "build_c",
           "c_function_names", "codegen_c", "compiler_and_flags", "contract_flag", "host_opt_level", "is_cross", "libm_mode", "prim_funcs", "simulation_compiler",
           "target_prim_funcs"]
