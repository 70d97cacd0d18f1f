"""The LLVM backend: TIR PrimFuncs -> LLVM IR text -> machine code JIT-compiled in this process.

    text = codegen_llvm(funcs, Target("llvm"))         # LLVM IR (deterministic text)
    lib = build_llvm_funcs(funcs, Target("llvm"))       # an LLVMModule: lib["matmul"](A, B, C)
    art = plait.build(mod, "llvm")                     # the llvm kind's tir_to_runtime hook

No external compiler: llvmlite (``pip install 'plait[llvm]'``) parses the IR, optimizes it with
LLVM's O3 pipeline (new pass manager; loop and SLP vectorizers) for the host CPU (``-mcpu`` /
``-mattr`` override it) and MCJIT-compiles it. The llvm kind uses the same default lowering and
the same ``cpu`` schedule rules as a host ``c`` target. Each PrimFunc becomes
``i32 @name(ptr noalias %buf, ..., i64 %scalar)`` returning 0 (see :mod:`plait.backends.llvm.emit`
for the semantics). Functions called by name (libm for the intrinsics LLVM has no instruction
for, extern calls, libgcc's float16 conversions) are looked up in the process before compiling:
a missing one is a :class:`LLVMCodegenError` naming the PrimFunc.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from plait.backends.llvm.dot import vnni_bits
from plait.backends.llvm.emit import LLVMCodegenError, LLVMFunctionEmitter
from plait.backends.llvm.ir_text import HALF_SYMBOLS, RUNTIME_SYMBOLS, ModuleState
from plait.backends.llvm.module import LLVMModule
from plait.errors import PlaitError
from plait.runtime.formats import ModuleFormat
from plait.target.backend import Backend, option
from plait.target.cpus import LLVM_X86_CPUS, check_cpu, llvm_cpus
from plait.target.tags import LLVM_TAGS
from plait.tir.functor import extern_calls, func_name
from plait.tir.stmt import PrimFunc
from plait.tir.verify import verify

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _externs(funcs: Sequence[PrimFunc]) -> dict[str, tuple[str, tuple[str, ...], str]]:
    """Extern functions called: name -> (return dtype, argument dtypes, first caller)."""
    return extern_calls(funcs, "LLVM", lambda name: bool(_IDENT.fullmatch(name)) and not name.startswith("llvm."),
                        LLVMCodegenError)


def _symbols(funcs: Sequence[PrimFunc]) -> tuple[list[str], list[str]]:
    """(exported names, LLVM symbols): a PrimFunc's global_symbol is its exported name; its LLVM
    symbol is ``plait.<name>``, which no C function can be called (LLVM lowers its math intrinsics
    to libm calls, so a PrimFunc named ``expf`` must not be the symbol ``expf``)."""
    names, seen = [], set()
    for k, f in enumerate(funcs):
        name = func_name(f, k)
        if name in seen:
            raise LLVMCodegenError(f"LLVM codegen: two PrimFuncs have the global_symbol '{name}'")
        seen.add(name)
        names.append(name)
    return names, [f"plait.{n}" for n in names]


class LLVMSource:
    """Generated LLVM IR: ``text``, ``signatures`` (exported name -> argument kinds), ``symbols``
    (exported name -> LLVM symbol), ``externals`` (C symbols called by name, name -> caller)."""

    def __init__(self, text: str, signatures: dict, symbols: dict, externals: dict, lines: list):
        self.text, self.signatures, self.symbols, self.externals = text, signatures, symbols, externals
        self._lines = lines  # (first line, last line, where) of each function
        self.half_users: list[str] = []  # the PrimFuncs computing with float16

    def where(self, line: int) -> str:
        for first, last, where in self._lines:
            if first <= line <= last:
                return where
        return ""

    def __str__(self) -> str:
        return self.text


# libm functions with x86-64 vector versions in glibc's libmvec (2.35+), by TIR intrinsic name
LIBMVEC_FUNCTIONS = ("acos", "acosh", "asin", "asinh", "atan", "atanh", "atan2", "cbrt", "cos", "cosh", "erf", "erfc",
                     "exp", "exp2", "expm1", "log", "log10", "log1p", "log2", "pow", "sin", "sinh", "tan", "tanh")
_AVX2_CPUS = ("x86-64-v3", "x86-64-v4", "haswell", "broadwell", "skylake", "skylake-avx512", "cascadelake",
              "cooperlake", "cannonlake", "icelake-client", "icelake-server", "tigerlake", "rocketlake", "alderlake",
              "raptorlake", "meteorlake", "sapphirerapids", "emeraldrapids", "graniterapids", "znver1", "znver2",
              "znver3", "znver4", "znver5")
_AVX512_CPUS = ("x86-64-v4", "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
                "icelake-server", "tigerlake", "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids",
                "znver4", "znver5")


def vector_math(target: Any) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """(intrinsic, dtype) -> [(lanes, libmvec function)] usable for ``target`` in this process:
    x86-64 vector ABI versions ``b`` (SSE, 128 bits), ``d`` (AVX2, 256) and ``e`` (AVX-512, 512)
    when the target CPU has them and glibc's libmvec defines them. Empty elsewhere."""
    import platform

    from plait.backends.llvm.module import load_libmvec, symbol_address

    if platform.machine() not in ("x86_64", "AMD64") or not load_libmvec():
        return {}
    cpu, features = cpu_and_features(target)
    feats = set(features.split(","))
    isas = [("b", 128)]
    if "+avx2" in feats or cpu in _AVX2_CPUS:
        isas.append(("d", 256))
    if "+avx512f" in feats or cpu in _AVX512_CPUS:
        isas.append(("e", 512))
    out: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for name in LIBMVEC_FUNCTIONS:
        arity = 2 if name in ("pow", "atan2") else 1
        for dtype, scalar, bits in (("float32", name + "f", 32), ("float64", name, 64)):
            found = []
            for isa, width in isas:
                lanes = width // bits
                vname = f"_ZGV{isa}N{lanes}{'v' * arity}_{scalar}"
                if symbol_address(vname):
                    found.append((lanes, vname))
            if found:
                out[(name, dtype)] = found
    return out


vector_math_enabled = True  # glibc's libmvec for vectorized loops calling exp, erf, ... (x86-64 Linux)


def generate(funcs: Sequence[PrimFunc], target: Any = None, name: str = "module") -> LLVMSource:
    """LLVM IR for ``funcs`` (verified first), with what building it needs to know."""
    funcs = list(funcs)
    for k, f in enumerate(funcs):
        if not isinstance(f, PrimFunc):
            raise LLVMCodegenError(f"codegen_llvm expects PrimFuncs, got {type(f).__name__} at position {k}")
        verify(f)
    _externs(funcs)  # checks the extern names and signatures
    state = ModuleState(vector_variants=vector_math(target) if vector_math_enabled else {},
                        vnni_bits=vnni_bits(*cpu_and_features(target)))
    simd_bits = _simd_bits(target)
    bodies, sigs, half_users = [], {}, []
    where_of: dict[str, str] = {}
    names, symbols = _symbols(funcs)
    for k, (f, export, sym) in enumerate(zip(funcs, names, symbols)):
        where = f"PrimFunc '{export}'"
        em = LLVMFunctionEmitter(f, sym, state, where, f"plait.ws{k}", simd_bits)
        text, sig = em.function()
        bodies.append((text, where))
        if " half" in text:
            half_users.append(where)
        sigs[export] = sig
        for d in state.externals:
            where_of.setdefault(d, where)
    target_text = str(target) if target is not None else "llvm"
    head = [f"; Generated by plait's LLVM backend for target \"{target_text.encode('unicode_escape').decode()}\""
            f" (module {name})", ""]
    head += state.globals + ([""] if state.globals else [])
    head += [state.decls[k] for k in sorted(state.decls)] + [""]
    lines, out, line = [], list(head), len(head) + 1
    for text, where in bodies:
        n = text.count("\n")
        lines.append((line, line + n - 1, where))
        out.append(text)
        line += n + 1
    if state.used:
        out.append(f"@llvm.compiler.used = appending global [{len(state.used)} x ptr] "
                   f"[{', '.join('ptr @' + u for u in state.used)}], section \"llvm.metadata\"")
    out.append('attributes #0 = { nounwind "frame-pointer"="none" }')
    out.append("attributes #1 = { nounwind willreturn memory(none) }")
    out += state.attr_groups
    out += [f"!{k} = {m}" for k, m in enumerate(state.metadata)]
    src = LLVMSource("\n".join(out) + "\n", sigs, dict(zip(names, symbols)),
                     {e: where_of.get(e, "") for e in sorted(state.externals)}, lines)
    src.half_users = half_users
    return src


def _simd_bits(target: Any) -> int:
    """The SIMD width the vectorized loops are shaped for: the target's ``simd_bits`` fact (the
    host's for a target without -mcpu), 128 when unknown."""
    from plait.schedule.machine import fact
    from plait.target import Target

    try:
        t = Target(target if target is not None else "llvm")
    except PlaitError:
        return 128
    return int(fact(t, "simd_bits", 128))  # type: ignore[arg-type]


def codegen_llvm(funcs: Sequence[PrimFunc], target: Any = None, name: str = "module") -> str:
    """LLVM IR text for ``funcs`` (one function each, named by their global_symbol)."""
    return generate(funcs, target, name).text


def cpu_and_features(target: Any) -> tuple[str, str]:
    """(LLVM CPU name, feature string): ``-mcpu`` / ``-mattr``, else the host's."""
    from plait.backends.llvm.module import host_cpu

    from plait.target import Target

    target = Target(target if target is not None else "llvm")
    cpu = target.options.get("mcpu", "")
    attrs = target.options.get("mattr", ())
    hcpu, hfeat = host_cpu()
    features = ",".join(attrs) if attrs else ("" if cpu else hfeat)
    return cpu or hcpu, features


def build_llvm_funcs(funcs: Sequence[PrimFunc], target: Any = None, name: str = "module") -> Any:
    """Generate LLVM IR for ``funcs`` and JIT-compile it: an :class:`LLVMModule`."""
    from plait.backends.llvm.module import LLVMError, LLVMModule, llvm_binding, resolve_symbols
    from plait.target import Target

    target = Target(target if target is not None else "llvm")
    llvm_binding()  # fails first, clearly, without llvmlite
    src = generate(funcs, target, name)
    missing = resolve_symbols([*src.externals, *RUNTIME_SYMBOLS])
    for m in missing:
        if m in src.externals:
            raise LLVMCodegenError(
                f"LLVM codegen of {src.externals[m]}: function '{m}' is not found in this process (load "
                "the library that defines it first, e.g. with ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))")
        if m in HALF_SYMBOLS and src.half_users:
            raise LLVMCodegenError(
                f"LLVM codegen of {src.half_users[0]}: float16 conversions need '{m}' (libgcc_s from GCC 12 "
                "or later), which is not found in this process")
    cpu, features = cpu_and_features(target)
    try:
        lib = LLVMModule(src.text, src.signatures, src.symbols, cpu=cpu, features=features, name=name,
                         describe_line=src.where)
    except LLVMError as exc:
        raise LLVMCodegenError(str(exc)) from None
    lacking = missing_host_features(cpu, features)
    if lacking:
        lib.not_runnable = (f"module '{name}' was compiled for cpu '{cpu}' (target '{target}'), which needs "
                            f"{', '.join(lacking)}; this machine does not have {'it' if len(lacking) == 1 else 'them'}"
                            " (build for 'llvm' to use the host CPU)")
    return lib


# what an -mcpu level needs (x86-64 psABI levels; the named CPUs of the AVX2 / AVX-512 lists)
_LEVEL_FEATURES = {"x86-64-v2": ("sse4.2", "popcnt"), "x86-64-v3": ("avx2", "fma", "bmi2"),
                   "x86-64-v4": ("avx512f", "avx512bw", "avx512vl")}


def missing_host_features(cpu: str, features: str) -> list[str]:
    """The CPU features code for ``cpu`` + ``features`` needs that this machine lacks (known CPU
    levels, ``+feature`` options and the VNNI of the int8 dot products only: running such code would
    stop the process on an illegal instruction)."""
    from plait.backends.llvm.module import llvm_binding

    host = llvm_binding().get_host_cpu_features()
    need = list(_LEVEL_FEATURES.get(cpu, ()))
    if cpu in _AVX512_CPUS:
        need.append("avx512f")
    elif cpu in _AVX2_CPUS:
        need.append("avx2")
    need += [f[1:] for f in features.split(",") if f.startswith("+")]
    vnni = vnni_bits(cpu, features)  # the int8 dot products' vpdpbusd (plait.backends.llvm.dot)
    if vnni:
        wide = vnni == 512 or cpu in _AVX512_CPUS or "+avx512f" in features.split(",")
        need.append("avx512vnni" if wide else "avxvnni")
    return [f for f in dict.fromkeys(need) if not host.get(f, False)]


def build_llvm(mod: Any, target: Any) -> Any:
    """The llvm kind's ``tir_to_runtime`` hook: every PrimFunc of ``mod`` (in name order; external
    declarations, attrs ``external=1``, skipped) JIT-compiled into one :class:`LLVMModule`."""
    funcs = []
    for key in sorted(mod):
        f = mod[key]
        if isinstance(f, PrimFunc) and not f.attrs.get("external"):
            funcs.append(f if f.name else f.with_attrs(global_symbol=key))
    return build_llvm_funcs(funcs, target)


def _validate_llvm(opts: dict[str, Any]) -> None:
    """``-mcpu`` must be a CPU LLVM (llvmlite) knows for this machine's triple."""
    cpu = opts["mcpu"]
    if cpu:
        check_cpu(cpu, LLVM_X86_CPUS if _on_x86() else frozenset(), [("LLVM", llvm_cpus)],
                  suggestions=LLVM_X86_CPUS)


def _on_x86() -> bool:
    import platform

    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def _save_ir(m: LLVMModule, path: Any) -> list[str]:
    m.export_library(path)  # the LLVM IR text, as generated
    return []


def _load_ir(data: bytes, path: Any, entry: Any, sigs: Any) -> LLVMModule:
    """An LLVM module JIT-compiled again; its functions refuse to run when it was compiled for CPU
    features this machine lacks (they would stop the process on an illegal instruction)."""
    lib = LLVMModule(data.decode("utf-8"), entry["signatures"], entry.get("symbols"), cpu=entry["cpu"],
                     features=entry["features"], opt_level=entry["opt_level"], name=path.stem)
    lacking = missing_host_features(entry["cpu"], entry["features"])
    if lacking:
        lib.not_runnable = (f"{path.name} was compiled for cpu '{entry['cpu']}' with features this machine "
                            f"lacks ({', '.join(lacking)})")
    return lib


#: an LLVMModule in an artifact: its LLVM IR (``lib_<k>.ll``), JIT-compiled again on load
LLVM_IR_FORMAT = ModuleFormat(".ll", LLVMModule, save=_save_ir, load=_load_ir, fields=lambda m: {
    "signatures": {k: list(v) for k, v in m.signatures.items()}, "symbols": dict(m.symbols), "cpu": m.cpu,
    "features": m.features, "opt_level": m.opt_level})


@dataclass(frozen=True)
class LLVMOptions:
    """Options of the ``llvm`` kind."""

    mcpu: str = option("", "CPU for LLVM code generation (e.g. x86-64-v3, znver3); empty: the host CPU")
    mattr: tuple[str, ...] = option((), "LLVM target features, e.g. +avx2,+fma")


class LLVMBackend(Backend):
    """Host code generated and JIT-compiled through LLVM: default lowering, :func:`build_llvm` code generation."""

    name = "llvm"
    Options = LLVMOptions
    device_type = "cpu"
    doc = "host code generated and JIT-compiled through LLVM"
    default_keys = ("cpu",)
    identity = ("mcpu",)
    tags = LLVM_TAGS
    module_formats = (LLVM_IR_FORMAT,)

    def validate(self, options: dict[str, Any]) -> None:
        _validate_llvm(options)

    def legalize(self, target: Any) -> list:
        """int8 convolutions channels-last (:class:`plait.relay.passes.ChannelsLast`: the packed dot
        products and the depthwise sums without their transposing copies) on a host with vectors of
        at least 256 bits (compute fact ``simd_bits``), in a function whose convolutions all have such
        a form (ds_cnn: 86 -> 79 us; mobilenet_v2, whose 3-channel stem and 1x1 convolutions over 8-24
        channels have none, stays NCHW: converting the others alone made it 6% slower)."""
        from plait.lowering.lower import target_facts
        from plait.relay.passes import ChannelsLast

        facts = target_facts(target)
        if facts.get("simd_bits", 0) < 256:
            return []
        return [ChannelsLast(tuple(sorted(facts.items())), forms=("packed", "depthwise"), every_conv=True)]

    def tir_to_runtime(self, mod: Any, target: Any) -> Any:
        return build_llvm(mod, target)


__all__ = ["LLVMBackend", "LLVMCodegenError", "build_llvm", "build_llvm_funcs", "codegen_llvm", "cpu_and_features",
           "generate"]
