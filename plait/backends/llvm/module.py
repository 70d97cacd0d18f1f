"""LLVMModule: LLVM IR compiled in this process by llvmlite's MCJIT (the ``llvm`` target kind).

    lib = LLVMModule(ir_text, {"matmul": ("ptr", "ptr", "ptr")})
    lib["matmul"](a, b, c)            # numpy arrays / Python numbers, like a DSOModule
    lib.raw("matmul")                 # the ctypes function (argtypes set), for executors

The IR is parsed, verified, optimized with LLVM's new pass manager (the ``default<O3>`` pipeline
of the target machine: loop and SLP vectorization, unrolling) and JIT-compiled for the host CPU
(or the ``cpu``/``features`` given). Functions called by name (libm, libc, extern calls) must be
in the process: :func:`resolve_symbols` looks them up and hands their addresses to LLVM before
compiling, so that a missing one is a clear error instead of a call through a null pointer.
llvmlite is imported here only, when a module is built.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from plait.errors import PlaitError
from plait.runtime.module import _SCALAR_CTYPES, NativeModule

LLVMLITE_MISSING = "target kind 'llvm' needs llvmlite: pip install 'plait[llvm]'"


class LLVMError(PlaitError):
    """LLVM IR that does not parse, verify or compile, or a symbol the JIT cannot resolve."""


def llvm_binding() -> Any:
    """``llvmlite.binding`` with the native target initialized; a PlaitError without llvmlite."""
    try:
        import llvmlite.binding as llvm
    except ImportError:
        raise LLVMError(LLVMLITE_MISSING) from None
    if not getattr(llvm, "_plait_ready", False):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm._plait_ready = True
    return llvm


_LIBS: list[Any] = []


def _libraries() -> list[Any]:
    """ctypes handles searched for symbols: the process, libm, libgcc_s (float16 conversions)."""
    if not _LIBS:
        _LIBS.append(ctypes.CDLL(None))
        for name in ("m", "gcc_s"):
            path = ctypes.util.find_library(name)
            for p in ([path] if path else []) + [f"lib{name}.so.1", f"lib{name}.so.6"]:
                try:
                    _LIBS.append(ctypes.CDLL(p))
                    break
                except OSError:
                    continue
    return _LIBS


_LIBMVEC: list[Any] = []


def load_libmvec() -> bool:
    """Load glibc's vector math library (``libmvec.so.1``) into the process, once; False without it."""
    if not _LIBMVEC:
        path = ctypes.util.find_library("mvec") or "libmvec.so.1"
        try:
            _LIBMVEC.append(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
            _libraries().append(_LIBMVEC[0])
        except OSError:
            _LIBMVEC.append(None)
    return _LIBMVEC[0] is not None


def symbol_address(name: str) -> int | None:
    """The address of the C symbol ``name`` in this process (or libm / libgcc_s), else None."""
    for lib in _libraries():
        try:
            return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        except AttributeError:
            continue
    return None


def resolve_symbols(names: Iterable[str], required: Mapping[str, str] | None = None) -> list[str]:
    """Give LLVM the address of each symbol in ``names`` that it cannot find itself; returns the
    names found nowhere (those in ``required`` are errors for the caller; the others are optional)."""
    llvm = llvm_binding()
    missing = []
    for n in names:
        if n.startswith("_ZGV"):  # a libmvec vector function
            load_libmvec()
        if llvm.address_of_symbol(n):
            continue
        addr = symbol_address(n)
        if addr:
            llvm.add_symbol(n, addr)
        else:
            missing.append(n)
    return missing


def host_cpu() -> tuple[str, str]:
    """(CPU name, feature string) of this machine, as LLVM sees them."""
    llvm = llvm_binding()
    return llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()


def create_target_machine(cpu: str, features: str, opt_level: int = 3) -> Any:
    """An LLVM TargetMachine for this process's triple. An unknown CPU or feature name is an
    LLVMError (LLVM itself only warns, then aborts the process when it generates code)."""
    llvm = llvm_binding()
    with _Diagnostics(keep=("is not a recognized",)) as diag:
        try:
            target = llvm.Target.from_default_triple()
            tm = target.create_target_machine(cpu=cpu, features=features, opt=opt_level, jit=True)
        except RuntimeError as exc:
            raise LLVMError(f"LLVM cannot generate code for cpu '{cpu}' with features '{features}': {exc}") from None
    if diag.remarks:
        what = "; ".join(dict.fromkeys(r.strip() for r in diag.remarks))
        raise LLVMError(f"LLVM cannot generate code for cpu '{cpu}' with features '{features}': {what} "
                        "(-mcpu takes an LLVM CPU name such as x86-64, x86-64-v3, znver3; -mattr features "
                        "such as +avx2,+fma)")
    return tm


class LLVMModule(NativeModule):
    """Functions JIT-compiled from LLVM IR text (MCJIT). ``signatures``: exported name -> argument
    kinds (``"ptr"`` or a scalar dtype), as for a DSOModule; ``symbols``: exported name -> LLVM
    symbol (default: the same). Every function returns an int32 status (0 = success)."""

    kind = "llvm"

    def __init__(self, ir: str, signatures: Mapping[str, Sequence[str]], symbols: Mapping[str, str] | None = None,
                 cpu: str | None = None, features: str | None = None, opt_level: int = 3, name: str = "module",
                 describe_line: Callable[[int], str] | None = None):
        super().__init__()
        llvm = llvm_binding()
        self.name = name
        self.source = ir
        self.signatures: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in signatures.items()}
        self.symbols = {k: (symbols or {}).get(k, k) for k in self.signatures}
        hcpu, hfeat = host_cpu()
        self.cpu = cpu or hcpu
        self.features = features if features is not None else (hfeat if not cpu else "")
        self.opt_level = opt_level
        self.remarks: list[str] = []  # LLVM's "loop not vectorized" remarks, kept off stderr
        self.not_runnable = ""  # why the code cannot run on this machine (compiled for another CPU)
        self.target_machine = create_target_machine(self.cpu, self.features, opt_level)
        try:
            mod = llvm.parse_assembly(ir)
            mod.verify()
        except RuntimeError as exc:
            raise LLVMError(_located(str(exc), describe_line)) from None
        mod.triple = self.target_machine.triple
        mod.data_layout = str(self.target_machine.target_data)
        if opt_level > 0:
            pto = llvm.create_pipeline_tuning_options(speed_level=min(opt_level, 3))
            pto.loop_vectorization = True
            pto.slp_vectorization = True
            pto.loop_unrolling = True
            pb = llvm.create_pass_builder(self.target_machine, pto)
            with _Diagnostics() as diag:
                pb.getModulePassManager().run(mod, pb)
            self.remarks = diag.remarks
        self.llvm_module = mod
        # every function called by name must resolve: MCJIT would call a null pointer otherwise
        called = [f.name for f in mod.functions if f.is_declaration and not f.name.startswith("llvm.")]
        missing = resolve_symbols(called)
        if missing:
            raise LLVMError(f"LLVM module '{name}' calls {', '.join(repr(m) for m in missing)}, not found in "
                            "this process (load the library that defines it first)")
        self.engine = llvm.create_mcjit_compiler(mod, self.target_machine)
        self.engine.finalize_object()
        self._funcs: dict[str, Callable] = {}
        self._raw: dict[str, Any] = {}
        for k in self.signatures:
            if not self.engine.get_function_address(self.symbols[k]):
                raise LLVMError(f"LLVM module '{name}': function '{k}' was not compiled")

    def function_names(self) -> list[str]:
        return sorted(self.signatures)

    def optimized_ir(self) -> str:
        """The LLVM IR after optimization."""
        return str(self.llvm_module)

    def assembly(self) -> str:
        """The machine code as assembly text."""
        return self.target_machine.emit_assembly(self.llvm_module)

    def raw(self, name: str) -> Any:
        """The ctypes function object (restype int32, argtypes set), for executors that pre-bind
        arguments. It keeps this module (and so the compiled code) alive."""
        if name not in self._raw:
            if name not in self.signatures:
                raise PlaitError(f"LLVM module '{self.name}' has no function '{name}'")
            if self.not_runnable:
                raise LLVMError(f"function '{name}' cannot run here: {self.not_runnable}")
            argtypes = [ctypes.c_void_p if k == "ptr" else _SCALAR_CTYPES[k] for k in self.signatures[name]]
            proto = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)
            fn = proto(self.engine.get_function_address(self.symbols[name]))
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int32
            fn._plait_module = self  # type: ignore[attr-defined]
            self._raw[name] = fn
        return self._raw[name]

    def export_library(self, path: str | Path) -> Path:
        """Write the module: an object file for ``.o`` paths, assembly for ``.s``, else the LLVM IR
        text (before optimization, as generated)."""
        p = Path(path)
        if p.suffix == ".o":
            p.write_bytes(self.target_machine.emit_object(self.llvm_module))
        elif p.suffix == ".s":
            p.write_text(self.assembly(), encoding="utf-8")
        else:
            p.write_text(self.source, encoding="utf-8")
        return p


_FD2_LOCK = threading.RLock()


class _Diagnostics:
    """Captures what LLVM prints on file descriptor 2: the lines containing one of ``keep`` (by
    default its remarks and warnings about loops marked ``vectorized`` that it could not vectorize:
    a vectorized loop is a hint, the scalar loop is correct) go to ``remarks``; anything else is
    printed as usual."""

    def __init__(self, keep: tuple[str, ...] = ("loop not vectorized",
                                                "unable to perform the requested transformation")):
        self.keep = keep

    def __enter__(self) -> "_Diagnostics":
        import os
        import sys
        import tempfile

        _FD2_LOCK.acquire()  # one redirection at a time (builds in several threads)
        self.remarks: list[str] = []
        try:
            sys.stderr.flush()
            self._file = tempfile.TemporaryFile()
            self._saved = os.dup(2)
            os.dup2(self._file.fileno(), 2)
        except (OSError, ValueError):  # no usable fd 2 (embedded interpreters): print as LLVM does
            self._saved = None
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._restore()
        finally:
            _FD2_LOCK.release()

    def _restore(self) -> None:
        import os
        import sys

        if self._saved is None:
            return
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        text = self._file.read().decode("utf-8", "replace")
        self._file.close()
        other = []
        for line in text.splitlines():
            if any(k in line for k in self.keep):
                self.remarks.append(line)
            else:
                other.append(line)
        if other:
            print("\n".join(other), file=sys.stderr)


def _located(msg: str, describe_line: Callable[[int], str] | None) -> str:
    """An LLVM parse/verify message, with the PrimFunc that a ``<string>:LINE:COL`` refers to."""
    import re

    m = re.search(r"<string>:(\d+):", msg)
    where = describe_line(int(m.group(1))) if (m and describe_line) else ""
    text = " ".join(msg.split())
    return f"LLVM rejected the IR{' of ' + where if where else ''}: {text}"


__all__ = ["LLVMError", "LLVMLITE_MISSING", "LLVMModule", "host_cpu", "llvm_binding", "resolve_symbols",
           "symbol_address"]
