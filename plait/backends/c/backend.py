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
arrays. Every identifier is sanitized (:mod:`plait.backends.c.names`); model names appear only in
escaped comments. The same PrimFuncs give byte-identical source.

Flags (every build): ``-std=c99`` (no ``-fwrapv``: the generated C never overflows a signed type;
TIR's wrapping integers are computed in unsigned arithmetic), ``-fno-math-errno`` (sqrtf etc.
inline to one instruction), ``-ffp-contract=fast`` (a*b+c may fuse into an FMA: faster on AVX2 and
Cortex-M4F/M7F, and results stay within 1e-4 of the interpreter; -std=c99 alone would turn
contraction off), ``-fopenmp-simd``; never ``-ffast-math`` (NaN, inf and signed zeros keep their
meaning). Host builds add ``-march=native`` unless the target gives ``-mcpu``/``-march``, and use
``-O3``: the c kind's ``-opt-level`` default (2) is meant for embedded builds, so on the host the
default means 3 (an explicit 0 or 1 is honoured; an explicit 2 cannot be told from the default).
Cortex-M targets are cross-compiled with ``arm-none-eabi-gcc`` and the target's ``compiler_flags``
(``-mcpu -mthumb -mfpu -mfloat-abi -O<n>``).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from plait.backends.c.emit import CodegenError, CFunctionEmitter
from plait.backends.c.helpers import ALIGN_MACRO, helper_source, value_type
from plait.backends.c.units import compile_units, split_units
from plait.backends.c.names import C_KEYWORDS, HEADER_NAMES, HELPER_PREFIX, NameTable, comment_text, is_identifier
from plait.errors import PlaitError, RegistryError
from plait.runtime.cc import CompileError, compile_source
from plait.runtime.module import CrossModule, CSourceModule, Module
from plait.tir.functor import extern_calls, func_name
from plait.tir.stmt import PrimFunc
from plait.tir.verify import verify

BASE_FLAGS = ("-std=c99", "-fno-math-errno", "-ffp-contract=fast", "-fopenmp-simd")
CROSS_FLAGS = ("-ffunction-sections", "-fdata-sections")
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


def _names(funcs: Sequence[PrimFunc], externs: Mapping[str, Any]) -> tuple[NameTable, list[str]]:
    table = NameTable()
    for e in externs:
        table.reserve(e)
    return table, [table.fresh(func_name(f, k), "func") for k, f in enumerate(funcs)]


def c_function_names(funcs: Sequence[PrimFunc]) -> list[str]:
    """The C symbol of each PrimFunc (its global_symbol when that is already a safe, unique name)."""
    return _names(funcs, _externs(funcs))[1]


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
    externs = _externs(funcs)
    table, cnames = _names(funcs, externs)
    bodies, sigs, helpers, align = [], {}, set(), False
    for k, (f, cname) in enumerate(zip(funcs, cnames)):
        em = CFunctionEmitter(f, cname, table, f"PrimFunc '{func_name(f, k)}'")
        text, sig = em.function()
        bodies.append(text)
        sigs[cname] = sig
        helpers |= em.helpers
        align = align or em.uses_align
    parts = [f"/* Generated by plait's C backend for target \"{comment_text(str(target) if target else 'c')}\". */\n"
             + "".join(f"#include <{h}>\n" for h in INCLUDES)]
    if align:
        parts.append(ALIGN_MACRO)
    if helpers:
        parts.append(helper_source(helpers))
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


# ---- build ----------------------------------------------------------------------------------------


def is_cross(target: Any) -> bool:
    """Does ``target`` need a cross compiler (a Cortex-M core)?"""
    from plait.target.kinds import is_cortex_m

    return "mcpu" in target.options and is_cortex_m(target)


def _target_flags(target: Any, host_simulation: bool) -> list[str]:
    try:
        return list(target.attr("compiler_flags")(target, host_simulation=host_simulation))
    except PlaitError:
        return []


def host_opt_level(target: Any) -> int:
    """-O level of a host build: the target's, except that the kind's default (2) means 3 here."""
    if "opt-level" not in target.options:
        return 3
    level = target.options["opt-level"]
    return 3 if level == target.kind.option("opt-level").default else level


def compiler_and_flags(target: Any, host_simulation: bool = False) -> tuple[str, list[str], bool]:
    """(compiler, flags, cross) for building ``target``'s C."""
    cross = is_cross(target) and not host_simulation
    try:
        cc = target.attr("compiler")(target, host_simulation=host_simulation)
    except PlaitError:
        cc = "gcc"
    tflags = _target_flags(target, host_simulation)
    if cross:
        return cc, [*BASE_FLAGS, *tflags, *CROSS_FLAGS], True
    tflags = [f for f in tflags if not f.startswith("-O")]
    if not any(f.startswith(("-march=", "-mcpu=")) for f in tflags):
        tflags.append("-march=native")
    if vector_math_available():
        tflags.append(f"-D{VECTOR_MATH_MACRO}")
    return cc, [*BASE_FLAGS, f"-O{host_opt_level(target)}", *tflags], False


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


def build(mod: Any, target: Any, ctx: Any = None) -> Module:
    """The c kind's ``build`` attribute (what the driver calls): every PrimFunc of the lowered
    IRModule ``mod``, in name order. ``ctx.config``: ``cc.cache_dir``, ``c.host_simulation``."""
    config = getattr(ctx, "config", None) or {}
    funcs = []
    for key in sorted(mod):
        f = mod[key]
        if isinstance(f, PrimFunc):
            funcs.append(f if f.name else f.with_attrs(global_symbol=key))
    return build_c(funcs, target, host_simulation=bool(config.get("c.host_simulation", False)),
                   cache_dir=config.get("cc.cache_dir"))


def _register() -> None:
    from plait.target import get_kind

    kind = get_kind("c")
    for attr, fn in (("codegen", codegen_c), ("build", build)):
        have = kind.attrs.get(attr)
        if have is not None and getattr(have, "__module__", None) != __name__:
            raise RegistryError(f"target kind 'c' already has a '{attr}' attribute from {have.__module__}")
        kind.attrs[attr] = fn


_register()

__all__ = ["BASE_FLAGS", "CodegenError", "CompileError", "build", "build_c", "c_function_names", "codegen_c",
           "compiler_and_flags", "host_opt_level", "is_cross"]
