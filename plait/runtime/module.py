"""Runtime modules: what a build produces and what executors call into.

A :class:`Module` exposes named functions and may import other modules (the host module imports
each piece's module). Kinds here:

- :class:`CSourceModule`: C source plus the signature of each exported function; ``compile()``
  turns it into a :class:`DSOModule` with the host compiler.
- :class:`DSOModule`: a shared library loaded with ctypes. Functions take numpy arrays (buffers)
  and Python numbers (scalars) and return the C function's int32 status (non-zero raises).
- :class:`CrossModule`: a :class:`CSourceModule` cross-compiled to an object file (compile check).
- :class:`PyModule`: Python callables (used by hook-backed kinds such as an external runtime).

Signatures are tuples of argument kinds: ``"ptr"`` for a buffer, or a scalar dtype name.
A compiled library embeds its own manifest (``plait_manifest()``), so :func:`load_module` restores
the signatures from the file alone.
"""

from __future__ import annotations

import ctypes
import json
import re
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from plait.errors import PlaitError
from plait.ir.status import describe as describe_status
from plait.registry import Registry

_SCALAR_CTYPES = {
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float, "float64": ctypes.c_double, "bool": ctypes.c_bool,
}


class RuntimeError_(PlaitError):
    """A runtime function failed (non-zero status) or was called wrongly."""


class Module:
    """Base class: named functions plus imported modules."""

    kind = "base"

    def __init__(self) -> None:
        self.imported_modules: list[Module] = []

    def import_module(self, other: "Module") -> None:
        self.imported_modules.append(other)

    def function_names(self) -> list[str]:
        return []

    def _own_function(self, name: str) -> Callable | None:
        return None

    def get_function(self, name: str) -> Callable:
        """Look ``name`` up here, then in imported modules (depth first)."""
        stack: list[Module] = [self]
        while stack:
            m = stack.pop(0)
            f = m._own_function(name)
            if f is not None:
                return f
            stack.extend(m.imported_modules)
        reg: Registry[None] = Registry("runtime function")
        for m in self.walk():
            for n in m.function_names():
                if n not in reg:
                    reg.register(n, None)
        raise PlaitError(reg.unknown_message(name))

    def __getitem__(self, name: str) -> Callable:
        return self.get_function(name)

    def walk(self) -> list["Module"]:
        out, stack = [], [self]
        while stack:
            m = stack.pop(0)
            out.append(m)
            stack.extend(m.imported_modules)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(self.function_names()[:5])}{'...' if len(self.function_names()) > 5 else ''})"


class PyModule(Module):
    """Functions implemented in Python."""

    kind = "python"

    def __init__(self, functions: Mapping[str, Callable]):
        super().__init__()
        self.functions = dict(functions)

    def function_names(self) -> list[str]:
        return sorted(self.functions)

    def _own_function(self, name: str) -> Callable | None:
        return self.functions.get(name)


class CSourceModule(Module):
    """C source with known exported functions. ``compile()`` builds it for the host."""

    kind = "c"

    def __init__(self, source: str, signatures: Mapping[str, Sequence[str]], name: str = "module",
                 link_flags: Sequence[str] = (), include_dirs: Sequence[str] = (),
                 compile_flags: Sequence[str] = ("-O3",)):
        super().__init__()
        self.source = source
        self.signatures = {k: tuple(v) for k, v in signatures.items()}
        self.name = name
        self.link_flags = tuple(link_flags)
        self.include_dirs = tuple(include_dirs)
        self.compile_flags = tuple(compile_flags)  # what compile() uses unless given flags

    def function_names(self) -> list[str]:
        return sorted(self.signatures)

    def full_source(self) -> str:
        manifest = json.dumps({"name": self.name, "signatures": self.signatures}, sort_keys=True)
        # '?' too: "??/" would be a trigraph in ISO C modes (-std=c99)
        escaped = manifest.replace("\\", "\\\\").replace('"', '\\"').replace("?", "\\?")
        return (self.source.rstrip("\n") + _MANIFEST_HEAD + f'const char* plait_manifest(void) {{ return "{escaped}"; }}\n')

    @classmethod
    def from_full_source(cls, text: str, **kwargs: Any) -> "CSourceModule | None":
        """The module whose :meth:`full_source` is ``text`` (its name and signatures read back from the
        embedded manifest), or None when ``text`` has no embedded manifest."""
        at = text.rfind(_MANIFEST_HEAD)
        tail = text[at + len(_MANIFEST_HEAD):] if at >= 0 else ""
        prefix, suffix = 'const char* plait_manifest(void) { return "', '"; }\n'
        if not (tail.startswith(prefix) and tail.endswith(suffix)):
            return None
        body = tail[len(prefix):-len(suffix)]
        raw = re.sub(r"\\(.)", lambda m: m.group(1), body)  # undo the escapes of full_source
        name, sigs = _read_embedded_manifest(raw.encode(), "C source")
        return cls(text[:at] + "\n", sigs, name=name, **kwargs)

    def compile(self, cc: str = "gcc", flags: Sequence[str] | None = None, cache_dir: str | None = None) -> "DSOModule":
        from plait.runtime.cc import compile_source

        flags = self.compile_flags if flags is None else flags
        inc = [f"-I{d}" for d in self.include_dirs]
        path = compile_source(self.full_source(), name=self.name, cc=cc, flags=[*flags, *inc],
                              cache_dir=cache_dir, link_flags=self.link_flags)
        dso = DSOModule(path)
        for m in self.imported_modules:
            dso.import_module(m)
        return dso

    def _own_function(self, name: str) -> Callable | None:
        if name in self.signatures:
            raise PlaitError(f"function '{name}' is in a C source module that is not compiled yet: call compile()")
        return None

    def export_library(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_text(self.full_source(), encoding="utf-8")
        return p


_MANIFEST_HEAD = "\n\n/* plait manifest: function signatures for the loader */\n"


class CrossModule(CSourceModule):
    """C source compiled for another machine (e.g. a Cortex-M core): the object file is a compile
    check (and what a firmware build links); its functions cannot run in this process.
    ``compile()`` builds the same source for the host (host simulation)."""

    kind = "c-cross"

    def __init__(self, source: str, signatures: Mapping[str, Sequence[str]], name: str, object_path: str | Path,
                 compiler: str, flags: Sequence[str], target: str = "", compile_flags: Sequence[str] = ("-O3",)):
        super().__init__(source, signatures, name, compile_flags=compile_flags)
        self.object_path = Path(object_path)
        self.compiler = compiler
        self.flags = tuple(flags)
        self.target = target

    def _own_function(self, name: str) -> Callable | None:
        if name in self.signatures:
            raise PlaitError(f"function '{name}' was compiled by {self.compiler} for target '{self.target}' and "
                             "cannot run in this process; build with host_simulation=True to run it on the host")
        return None

    def export_object(self, path: str | Path) -> Path:
        p = Path(path)
        shutil.copyfile(self.object_path, p)
        return p


class NativeModule(Module):
    """A module whose functions are native symbols: a subclass gives ``signatures`` (name -> argument
    kinds), ``raw(name)`` (the ctypes function) and a ``_funcs`` dict; calls are wrapped once per name."""

    signatures: dict[str, Any]
    _funcs: dict[str, Callable]

    def raw(self, name: str) -> Any:
        raise NotImplementedError

    def _own_function(self, name: str) -> Callable | None:
        if name not in self.signatures:
            return None
        if name not in self._funcs:
            self._funcs[name] = _wrap(name, self.raw(name), self.signatures[name])
        return self._funcs[name]


class DSOModule(NativeModule):
    """A shared library loaded with ctypes; its manifest gives the function signatures.

    ``origin`` names the library in messages when ``path`` is a private copy (see :func:`load_library`).
    """

    kind = "dso"

    def __init__(self, path: str | Path, origin: str | Path | None = None):
        super().__init__()
        self.path = Path(path)
        shown = origin if origin is not None else self.path
        try:
            self.lib = ctypes.CDLL(str(self.path))
        except OSError as exc:
            raise PlaitError(f"cannot load library '{shown}': {exc}") from None
        try:
            getter = self.lib.plait_manifest
        except AttributeError:
            raise PlaitError(f"library '{shown}' was not built by plait (no plait_manifest)") from None
        getter.restype = ctypes.c_char_p
        self.name, self.signatures = _read_embedded_manifest(getter(), shown)
        self._funcs: dict[str, Callable] = {}

    def function_names(self) -> list[str]:
        return sorted(self.signatures)

    def raw(self, name: str) -> Any:
        """The ctypes function object (argtypes set), for executors that pre-bind arguments."""
        fn = getattr(self.lib, name)
        fn.restype = ctypes.c_int32
        fn.argtypes = [ctypes.c_void_p if k == "ptr" else _SCALAR_CTYPES[k] for k in self.signatures[name]]
        return fn

    def export_library(self, path: str | Path) -> Path:
        p = Path(path)
        shutil.copyfile(self.path, p)
        return p


def _read_embedded_manifest(raw: bytes | None, shown: Any) -> tuple[str, dict[str, tuple[str, ...]]]:
    """(name, signatures) from a library's ``plait_manifest()`` string."""
    try:
        manifest = json.loads((raw or b"").decode())
        name, sigs = manifest["name"], manifest["signatures"]
        ok = isinstance(name, str) and isinstance(sigs, dict) and all(
            isinstance(k, str) and isinstance(v, list) and all(a == "ptr" or a in _SCALAR_CTYPES for a in v)
            for k, v in sigs.items())
    except (ValueError, TypeError, KeyError):
        ok = False
    if not ok:
        raise PlaitError(f"library '{shown}' has a malformed plait_manifest")
    return name, {k: tuple(v) for k, v in sigs.items()}


def _wrap(name: str, fn: Any, sig: tuple[str, ...]) -> Callable:
    def call(*args: Any) -> int:
        if len(args) != len(sig):
            raise RuntimeError_(f"function '{name}' takes {len(sig)} arguments, got {len(args)}")
        c_args = []
        for i, (kind, a) in enumerate(zip(sig, args)):
            if kind == "ptr":
                if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
                    raise RuntimeError_(f"function '{name}': argument {i} must be a C-contiguous numpy array")
                c_args.append(a.ctypes.data)
            else:
                c_args.append(a)
        status = fn(*c_args)
        if status != 0:
            raise RuntimeError_(f"function '{name}' {describe_status(status)}")
        return status

    call.__name__ = name
    return call


_PRIVATE: list[Path] = []  # the process's directory of verified library copies (created on first use)


def _private_dir() -> Path:
    if not _PRIVATE:
        import atexit
        import tempfile

        d = Path(tempfile.mkdtemp(prefix="plait-libs-"))
        atexit.register(shutil.rmtree, d, True)
        _PRIVATE.append(d)
    return _PRIVATE[0]


def load_library(data: bytes, origin: str | Path) -> DSOModule:
    """Load a shared library from its bytes, which the caller has verified (e.g. against the
    sha256 of an artifact's manifest).

    The bytes are written to a private file named by their sha256 (in a directory of this process,
    removed at exit) and that file is loaded. So the code that runs is exactly the bytes that were
    checked (a later change to ``origin`` cannot reach it), and two different libraries exported to
    the same path are two libraries (``dlopen`` would hand out the first one again for the same
    path). If the private copy cannot be loaded (e.g. a temp dir mounted ``noexec``), ``origin``
    itself is loaded when its content is still the verified bytes.
    """
    import hashlib
    import os

    digest = hashlib.sha256(data).hexdigest()
    path = _private_dir() / f"{digest}.so"
    try:
        if not path.exists():
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        ctypes.CDLL(str(path))  # maps it (DSOModule gets the same handle)
    except OSError:
        try:
            same = Path(origin).read_bytes() == data
        except OSError:
            same = False
        if not same:
            raise PlaitError(f"cannot load library '{origin}': it cannot be copied to a private directory and "
                             "changed since it was checked") from None
        path = Path(origin)
    return DSOModule(path, origin)


def load_module(path: str | Path) -> Module:
    """Load a module exported with ``export_library`` (a shared library built by plait)."""
    p = Path(path)
    if not p.exists():
        raise PlaitError(f"cannot load module '{p}': no such file")
    return DSOModule(p)
