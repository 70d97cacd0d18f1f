"""The files every exported artifact shares: the build record all artifacts carry, writing an artifact's
program, params and runtime modules with its manifest (:func:`export_files`), reading them back with
every check before any library is loaded (:func:`load_files`), and the runtime-module formats the
backends register (:mod:`plait.runtime.formats`).

**An artifact is code**: loading it runs its ``lib.so`` (``dlopen`` runs the library's constructors).
Load only artifacts you trust. The checks here (:mod:`plait.executor.manifest`,
:mod:`plait.executor.graph_check`, :mod:`plait.executor.params_file`) catch accidental corruption
and mismatched files, not an author who rewrites every file consistently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
import numpy as np
from plait.errors import PlaitError
from plait.executor.errors import ExecutorError
from plait.executor.graph_check import _short
from plait.executor.manifest import (
    MANIFEST_FILE, MANIFEST_FORMAT, MANIFEST_VERSION, PARAMS_FILE, check_file, check_manifest,
    file_record, function_modules, manifest_text,
)
from plait.executor.params_file import read_params
from plait.limits import check_bytes
from plait.runtime.formats import format_for, format_of, suffixes
from plait.runtime.module import Module, PyModule

OLD_MODULES_FILE = "modules.json"  # the module list of artifacts exported before manifest.json


@dataclass(kw_only=True)
class BuildRecord:
    """What ``plait.build`` records on every executor's artifact (not exported): ``timings`` (pass name,
    seconds), ``placement`` (the Assignment; None for one piece), ``piece_modules`` (piece name -> its
    runtime module) and ``cross_modules`` (compile checks of pieces on another device)."""

    timings: list[tuple[str, float]] = field(default_factory=list, repr=False)
    placement: Any = field(default=None, repr=False)
    piece_modules: dict[str, Any] = field(default_factory=dict, repr=False)
    cross_modules: dict[str, Any] = field(default_factory=dict, repr=False)


def export_files(out: Path, main_file: str, main_text: str, params: dict[str, np.ndarray], lib: Module,
                 functions: dict[str, Any]) -> Path:
    """Write an artifact into the directory ``out``: ``main_file`` (the executor's program: graph.json,
    vm.json), ``params.npz``, the library and its imported modules, then ``manifest.json``
    (:meth:`GraphArtifact.export` describes the files; the Graph and VM artifacts share it)."""
    entries = _module_entries(lib)
    where = function_modules(lib, [m for m, _ in entries], functions)
    out.mkdir(parents=True, exist_ok=True)
    for stale in (MANIFEST_FILE, OLD_MODULES_FILE):  # a half-written export is never loadable
        (out / stale).unlink(missing_ok=True)
    written = [main_file, PARAMS_FILE]
    (out / main_file).write_text(main_text, encoding="utf-8")
    with open(out / PARAMS_FILE, "wb") as f:
        np.savez(f, **params)
    for m, entry in entries:
        name = entry["file"]
        if name is None:
            continue
        fmt = format_of(m)
        assert fmt is not None  # _module_entries found it
        written += [name, *fmt.save(m, out / name)]
    manifest = {
        "format": MANIFEST_FORMAT, "version": MANIFEST_VERSION,
        "files": {name: file_record((out / name).read_bytes()) for name in written},
        "modules": [e for _, e in entries],
        "functions": {k: {"module": where[k], **sig} for k, sig in functions.items()},
    }
    (out / MANIFEST_FILE).write_text(manifest_text(manifest), encoding="utf-8")
    return out


def load_files(path: str | Path, what: str, main_file: str,
               check_main: Callable[[Any, str, dict[str, Any]], tuple[Any, dict[str, Any]]],
               memory_limit: int | str | None) -> tuple[bytes, Any, dict[str, np.ndarray], Module, dict[str, Any]]:
    """Read an artifact written by :func:`export_files`, checking everything before any library is loaded
    (see :meth:`GraphArtifact.load`). ``check_main(parsed main_file, where, functions)`` checks the
    executor's program and returns it with the graph-like dict its params are read against
    (:func:`plait.executor.params_file.read_params`). Returns (the bytes of ``main_file``, the checked
    program, the params, the library, the manifest)."""
    d = Path(path)
    where = f"cannot load {what} artifact '{d}'"
    if not d.is_dir():
        raise ExecutorError(f"{where}: no such directory")
    if not (d / MANIFEST_FILE).is_file():
        old = (d / main_file).exists()
        raise ExecutorError(f"{where}: no {MANIFEST_FILE}" + (" (it was exported by an older plait or the export "
                                                              "did not finish: export it again)" if old else ""))
    mwhere = f"{where}: {MANIFEST_FILE}"
    manifest = check_manifest(_parse_json(_read(d, MANIFEST_FILE, where, memory_limit), mwhere), mwhere, main_file)
    files = manifest["files"]
    mdata = _read(d, main_file, where, memory_limit)
    program, pgraph = check_main(_parse_json(mdata, f"{where}: {main_file}"), f"{where}: {main_file}",
                                 manifest["functions"])
    check_file(main_file, mdata, files, where)
    pdata = _read(d, PARAMS_FILE, where, memory_limit)
    params = read_params(pdata, pgraph, f"{where}: {PARAMS_FILE}", memory_limit, f"the params in '{d / PARAMS_FILE}'")
    check_file(PARAMS_FILE, pdata, files, where)
    blobs: dict[str, bytes] = {}
    for name in sorted(set(files) - {main_file, PARAMS_FILE}):  # every library is checked before any loads
        blobs[name] = _read(d, name, where, memory_limit)
        check_file(name, blobs[name], files, where)
    entries = manifest["modules"]
    modules = [Module() if e["file"] is None else _load_file(d, e, blobs[e["file"]], k, manifest, where)
               for k, e in enumerate(entries)]
    for m, e in zip(modules, entries):
        for i in e["imports"]:
            m.import_module(modules[i])
    check_library(modules[0], manifest["functions"], where, modules, entries)
    return mdata, program, params, modules[0], manifest


def _read(d: Path, name: str, where: str, memory_limit: int | str | None) -> bytes:
    """The bytes of ``d / name`` (its size checked against the memory limit first)."""
    p = d / name
    try:
        if not p.is_file():
            raise ExecutorError(f"{where}: {name} is missing")
        check_bytes(p.stat().st_size, f"'{p}'", memory_limit)
        return p.read_bytes()
    except OSError as exc:
        raise ExecutorError(f"{where}: cannot read {name}: {exc.strerror or exc}") from None


def _parse_json(data: bytes, where: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ExecutorError(f"{where}: not JSON ({_short(str(exc), 120)})") from None


def check_library(lib: Module, functions: dict[str, Any], where: str, modules: list[Module] | None = None,
                  entries: list[dict[str, Any]] | None = None) -> None:
    """Every function the manifest lists is found in the module tree (in the module the manifest names,
    when ``modules`` is given), and a compiled module declares it with one pointer per argument."""
    index = {id(m): k for k, m in enumerate(modules or [])}
    first: dict[str, Module] = {}
    for m in lib.walk():
        for name in m.function_names():
            first.setdefault(name, m)
    for name, sig in functions.items():
        m = first.get(name)
        if modules is not None and entries is not None:
            k = sig["module"]
            file = entries[k]["file"]
            if name not in modules[k].function_names():
                raise ExecutorError(f"{where}: function '{_short(name)}' is not in {file} (module {k})")
            if m is None:
                raise ExecutorError(f"{where}: function '{_short(name)}' is in {file} (module {k}), which the "
                                    "library does not import")
            if m is not modules[k]:
                other = entries[index[id(m)]]["file"]
                raise ExecutorError(f"{where}: function '{_short(name)}' is found in {other} before {file}, which "
                                    "the manifest names")
        if m is None:
            continue  # the executor reports an unknown function with its "did you mean"
        declared = getattr(m, "signatures", {}).get(name) if callable(getattr(m, "raw", None)) else None
        if declared is not None and tuple(declared) != ("ptr",) * len(sig["args"]):
            raise ExecutorError(f"{where}: function '{_short(name)}' takes ({', '.join(declared)}) in the library; "
                                f"the manifest passes {len(sig['args'])} buffers")


def _load_file(d: Path, e: dict[str, Any], data: bytes, k: int, manifest: dict[str, Any], where: str) -> Module:
    """One module from its verified bytes, by the format its file's suffix names
    (:mod:`plait.runtime.formats`; a backend's formats are registered when its kind loads)."""
    name = e["file"]
    fmt = _format_for(name)
    if fmt is None:
        raise ExecutorError(f"{where}: {name}: no module format reads '{Path(name).suffix}' files (known: "
                            f"{', '.join(suffixes())}; a plugin backend that wrote it may be missing)")
    sigs = {f: ("ptr",) * len(s["args"]) for f, s in manifest["functions"].items() if s["module"] == k}
    try:
        return fmt.load(data, d / name, e, sigs)
    except UnicodeDecodeError:
        raise ExecutorError(f"{where}: {name} is not UTF-8 text") from None
    except ExecutorError:
        raise
    except Exception as exc:  # a PlaitError of the loader, or what a foreign library raises
        if not isinstance(exc, PlaitError):
            raise
        raise ExecutorError(f"{where}: {name}: {exc}") from None


def _kind_formats(load_all: bool) -> None:
    """Register the module formats the loaded kinds declare (``Backend.module_formats``); with
    ``load_all``, every in-tree kind and plugin is loaded first."""
    from plait.runtime.formats import register_format
    from plait.target.kind import KINDS

    if load_all:
        from plait.target.plugins import load_plugins

        try:
            load_plugins()
        except PlaitError:  # a broken plugin says so when its kind is asked for; here only formats matter
            pass
    for name in KINDS:
        for fmt in KINDS.get(name).backend.module_formats:
            register_format(fmt)


def _format_for(name: str) -> Any:
    """The format reading the file ``name`` (by its suffix)."""
    for load_all in (False, True):
        _kind_formats(load_all)
        fmt = format_for(name)
        if fmt is not None:
            return fmt
    return None


def _module_format(m: Module) -> Any:
    """The format writing ``m`` (by its type)."""
    fmt = format_of(m)
    for load_all in (False, True):
        if fmt is not None:
            return fmt
        _kind_formats(load_all)
        fmt = format_of(m)
    return fmt


def _module_entries(lib: Module) -> list[tuple[Module, dict[str, Any]]]:
    """Every module of the tree once (breadth first from ``lib``), with its file name and imports."""
    order: list[Module] = []
    index: dict[int, int] = {}
    stack = [lib]
    while stack:
        m = stack.pop(0)
        if id(m) in index:
            continue
        index[id(m)] = len(order)
        order.append(m)
        stack.extend(m.imported_modules)
    out = []
    for k, m in enumerate(order):
        base = "lib" if k == 0 else f"lib_{k}"
        extra: dict[str, Any] = {}
        fmt = _module_format(m)
        if fmt is not None:  # a compiled library, C source, an ONNX model, LLVM IR, a plugin's own
            name: str | None = base + fmt.suffix
            extra = fmt.fields(m)
        elif not m.function_names() and type(m) in (Module, PyModule):
            name = None  # a container: only imports
        elif isinstance(m, PyModule):
            names = m.function_names()
            raise ExecutorError(f"cannot export {_which(k)}: it is a PyModule (functions {', '.join(names[:3])}"
                                f"{', ...' if len(names) > 3 else ''}) and Python functions cannot be written to a "
                                "file")
        else:
            raise ExecutorError(f"cannot export {_which(k)}: no module format writes a {type(m).__name__} (formats: "
                                f"{', '.join(suffixes())}; a backend registers its own with Backend.module_formats)")
        out.append((m, {"file": name, "imports": [index[id(x)] for x in m.imported_modules], **extra}))
    return out


def _which(k: int) -> str:
    return "the library" if k == 0 else f"module {k} imported by the library"


__all__ = ["BuildRecord", "check_library", "export_files", "load_files"]
