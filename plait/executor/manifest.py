"""The artifact manifest: what an exported graph artifact must contain, checked before anything runs.

``manifest.json`` (``"format": "plait.artifact"``, ``"version": 1``) is written by
:meth:`GraphArtifact.export <plait.executor.graph.artifact.GraphArtifact.export>`, last:

    files      {"graph.json": {"sha256": "...", "bytes": 1234}, "params.npz": {...}, "lib.so": {...}, ...}
    modules    [{"file": "lib.so" | null, "imports": [1], ...}, ...]   (the runtime module tree, breadth
               first; an ONNX Runtime region adds symbol/threads/opt_level, an LLVM module its
               signatures/symbols/cpu/features/opt_level)
    functions  {"fused_dense": {"module": 0, "args": [{"role": "input", "dtype": "float32",
               "shape": [1, 256], "bytes": 1024}, ...]}, ...}

``functions`` is made by graph codegen from the lowered PrimFuncs (:func:`function_signatures`),
so an in-memory artifact has it too (without ``module``); ``files`` and ``modules`` are added at
export. Loading reads every library file once, compares its size and sha256 with ``files`` and
only then loads it; ``graph.json`` and ``params.npz`` are checked for meaning first (precise
messages), then against their hashes (a consistent but changed file is still refused).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Mapping

from plait.executor.errors import ExecutorError, GraphCodegenError
from plait.executor.graph_check import ROLES, _short, check_functions, is_int, nbytes

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "plait.artifact"
MANIFEST_VERSION = 1
GRAPH_FILE, PARAMS_FILE = "graph.json", "params.npz"
VM_FILE = "vm.json"  # a VM artifact's bytecode, in place of graph.json
#: a module's file: lib[_k] and the suffix of its format (plait.runtime.formats: .so, .c, .onnx, .ll, a plugin's)
MODULE_FILE = re.compile(r"lib(_[1-9][0-9]*)?\.(?!o\Z)[a-z][a-z0-9_]{0,15}")
OBJECT_FILE = re.compile(r"lib(_[1-9][0-9]*)?\.o")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ARG_KINDS = ("ptr", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
              "float64")


# ---- made at codegen and export ------------------------------------------------------------------


def signature(fn: Any, symbol: str, node: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of the lowered function ``fn`` as the graph executor passes them: per buffer
    parameter its role, dtype, static shape and bytes. Roles come from the function's own
    ``num_inputs`` / ``workspace_param`` attrs (else from the first call, ``node``)."""
    from plait.tir.stmt import Buffer

    params = list(fn.params)
    attrs = fn.attrs
    n_in = attrs.get("num_inputs")
    if not (is_int(n_in) and 0 <= n_in <= len(params)):
        n_in = len(node.get("inputs", []))
    ws = attrs.get("workspace_param")
    if not (is_int(ws) and n_in <= ws <= len(params)):
        ws = len(params)
    args = []
    for k, p in enumerate(params):
        if not isinstance(p, Buffer):
            raise GraphCodegenError(f"graph executor: function '{symbol}' takes the scalar '{p.name}'; the graph "
                                    "executor passes buffers only")
        shape = p.static_shape
        if shape is None:
            raise GraphCodegenError(f"graph executor: argument '{p.name}' of function '{symbol}' has a symbolic "
                                    "shape; the graph executor needs static shapes")
        role = ROLES[0] if k < n_in else ROLES[1] if k < ws else ROLES[2]
        args.append({"role": role, "dtype": p.dtype, "shape": list(shape), "bytes": nbytes(p.dtype, list(shape))})
    return {"args": args}


def file_record(data: bytes) -> dict[str, Any]:
    """``{"sha256", "bytes"}`` of a file's content."""
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def function_modules(lib: Any, order: list[Any], functions: Mapping[str, Any]) -> dict[str, int]:
    """Function name -> the index (in ``order``, the exported module list) of the module the
    executor calls for it: the first module of ``lib.walk()`` that has it."""
    index = {id(m): k for k, m in enumerate(order)}
    out: dict[str, int] = {}
    for m in lib.walk():
        for name in m.function_names():
            if name in functions and name not in out:
                out[name] = index[id(m)]
    missing = sorted(set(functions) - set(out))
    if missing:
        raise ExecutorError(f"cannot export: no module of the library implements '{_short(missing[0])}', which the "
                            "graph calls")
    return out


def manifest_text(manifest: Mapping[str, Any]) -> str:
    """The manifest as JSON text: deterministic, one file / module / function argument per line."""
    def obj(x: Any) -> str:
        return json.dumps(x, sort_keys=True)

    parts = [f' "format": {obj(manifest["format"])}', f' "version": {obj(manifest["version"])}']
    files = manifest.get("files", {})
    parts.append(' "files": {' + ",".join(f"\n  {obj(k)}: {obj(files[k])}" for k in sorted(files)) + "\n }")
    parts.append(' "modules": [' + ",".join(f"\n  {obj(m)}" for m in manifest.get("modules", [])) + "\n ]")
    funcs = manifest.get("functions", {})
    rows = []
    for name in sorted(funcs):
        head = {k: v for k, v in funcs[name].items() if k != "args"}
        args = ",".join(f"\n    {obj(a)}" for a in funcs[name]["args"])
        rows.append(f"\n  {obj(name)}: {obj(head)[:-1]}{', ' if head else ''}\"args\": [{args}\n  ]}}")
    parts.append(' "functions": {' + ",".join(rows) + "\n }")
    return "{\n" + ",\n".join(parts) + "\n}\n"


# ---- checked at load --------------------------------------------------------------------------------


def check_manifest(obj: Any, where: str, main_file: str = GRAPH_FILE) -> dict[str, Any]:
    """Check the structure of a parsed ``manifest.json`` of an artifact whose program is ``main_file``
    (``graph.json``, ``vm.json``); returns it."""
    if not isinstance(obj, dict) or obj.get("format") != MANIFEST_FORMAT:
        raise ExecutorError(f"{where}: not a plait artifact manifest (expected \"format\": \"{MANIFEST_FORMAT}\")")
    if obj.get("version") != MANIFEST_VERSION:
        raise ExecutorError(f"{where}: manifest version {_short(obj.get('version'))} is not supported (this plait "
                            f"reads version {MANIFEST_VERSION})")
    files = obj.get("files")
    if not isinstance(files, dict):
        raise ExecutorError(f"{where}: missing or malformed 'files'")
    for name, rec in files.items():
        if name not in (main_file, PARAMS_FILE) and not MODULE_FILE.fullmatch(name) and \
                not OBJECT_FILE.fullmatch(name):
            raise ExecutorError(f"{where}: unexpected file name '{_short(name)}'")
        if not isinstance(rec, dict) or not isinstance(rec.get("sha256"), str) or \
                not _SHA256.fullmatch(rec["sha256"]) or not is_int(rec.get("bytes")) or rec["bytes"] < 0:
            raise ExecutorError(f"{where}: file '{name}': malformed record (expected sha256 and bytes)")
    for name in (main_file, PARAMS_FILE):
        if name not in files:
            raise ExecutorError(f"{where}: 'files' does not list {name}")
    modules = _check_modules(obj.get("modules"), files, where)
    for name in files:
        if OBJECT_FILE.fullmatch(name) and name[:-2] + ".c" not in {m["file"] for m in modules}:
            raise ExecutorError(f"{where}: file '{name}' is the object file of no C module")
        if MODULE_FILE.fullmatch(name) and name not in {m["file"] for m in modules}:
            raise ExecutorError(f"{where}: file '{name}' is no module's")
    check_functions(obj.get("functions"), where, len(modules))
    for name, sig in obj["functions"].items():
        if modules[sig["module"]]["file"] is None:
            raise ExecutorError(f"{where}: function '{_short(name)}': module {sig['module']} has no file")
    return obj


def _check_modules(modules: Any, files: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    if not isinstance(modules, list) or not modules:
        raise ExecutorError(f"{where}: missing or malformed 'modules'")
    n = len(modules)
    seen: set[str] = set()
    for k, e in enumerate(modules):
        ok = isinstance(e, dict) and "file" in e and (e["file"] is None or isinstance(e["file"], str)
                                                      and MODULE_FILE.fullmatch(e["file"]) is not None)
        ok = ok and isinstance(e.get("imports"), list) and all(
            is_int(i) and 0 < i < n and i != k for i in e["imports"])
        if not ok:
            raise ExecutorError(f"{where}: malformed module {k}")
        f = e["file"]
        if f is not None:
            if f in seen or f not in files:
                why = "listed twice" if f in seen else "not in files"
                raise ExecutorError(f"{where}: module {k}: file '{f}' is {why}")
            seen.add(f)
            problem = _kind_fields_problem(f, e)
            if problem:
                raise ExecutorError(f"{where}: module {k} ('{f}'): {problem}")
    _acyclic(modules, where)
    return modules


def _kind_fields_problem(file: str, e: Mapping[str, Any]) -> str | None:
    """What is wrong with the fields an ONNX or LLVM module's loader needs (None: nothing)."""
    def level_ok(x: Any) -> bool:
        return is_int(x) and 0 <= x <= 3

    if file.endswith(".onnx"):
        if not isinstance(e.get("symbol"), str):
            return "no function name ('symbol')"
        if not (is_int(e.get("threads")) and 1 <= e["threads"] <= 1024) or not level_ok(e.get("opt_level")):
            return "malformed 'threads' or 'opt_level'"
    if file.endswith(".ll"):
        sigs, symbols = e.get("signatures"), e.get("symbols", {})
        if not isinstance(sigs, dict) or not all(
                isinstance(k, str) and isinstance(v, list) and all(isinstance(a, str) and a in _ARG_KINDS for a in v)
                for k, v in sigs.items()):
            return "no or malformed 'signatures'"
        if not isinstance(symbols, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in symbols.items()):
            return "malformed 'symbols'"
        if not isinstance(e.get("cpu"), str) or not isinstance(e.get("features"), str) or \
                not level_ok(e.get("opt_level")):
            return "malformed 'cpu', 'features' or 'opt_level'"
    return None


def _acyclic(modules: list[dict[str, Any]], where: str) -> None:
    """The import graph must be acyclic (walking it must end)."""
    n = len(modules)
    state = [0] * n
    for root in range(n):
        stack = [(root, 0)]
        while stack:
            k, it = stack.pop()
            if it == 0:
                if state[k] == 1:
                    raise ExecutorError(f"{where}: module {k} imports itself (a cycle)")
                if state[k] == 2:
                    continue
                state[k] = 1
            imports = modules[k]["imports"]
            if it < len(imports):
                stack.append((k, it + 1))
                stack.append((imports[it], 0))
            else:
                state[k] = 2


def check_file(name: str, data: bytes, files: Mapping[str, Any], where: str) -> None:
    """``data`` (the content of ``name``) has the size and sha256 the manifest records."""
    rec = files[name]
    if len(data) != rec["bytes"]:
        raise ExecutorError(f"{where}: {name} is {len(data)} bytes, the manifest says {rec['bytes']} (the file was "
                            "changed or truncated after export)")
    if hashlib.sha256(data).hexdigest() != rec["sha256"]:
        raise ExecutorError(f"{where}: {name} does not match the sha256 in the manifest (the file was changed "
                            "after export)")


__all__ = ["GRAPH_FILE", "MANIFEST_FILE", "MANIFEST_FORMAT", "MANIFEST_VERSION", "MODULE_FILE", "OBJECT_FILE",
           "PARAMS_FILE", "VM_FILE", "check_file", "check_manifest", "file_record", "function_modules", "manifest_text",
           "signature"]
