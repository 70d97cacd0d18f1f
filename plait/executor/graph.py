"""The graph executor: a JSON graph + params + a runtime module, run by a thin Python loop.

    art = plait.build(mod, target="c")            # a GraphArtifact
    gm = GraphModule(art)
    y, = gm(x=np.ones((1, 256), np.float32))      # or set_input / run / get_output
    print(art.memory_report())                    # the memory plan (plait.executor.memory_plan)
    art.export("out/")  ->  out/graph.json, out/params.npz, out/lib.so [, lib_1.so ..., modules.json]
    GraphArtifact.load("out/")

``GraphModule`` allocates every buffer once (the storage plan of the graph), copies the params in,
and pre-binds each call's arguments (inputs, outputs, workspaces): ``run()`` is a loop over
(function, arguments) pairs calling the raw functions of compiled modules (any module with a
``raw(name)`` method), with no allocation. Functions of a non-compiled module
(:class:`~plait.runtime.PyModule`, e.g. a hook's external runtime) are called with numpy views of
the same buffers; ``copy`` nodes (between pieces) are ``np.copyto``.
"""

from __future__ import annotations

import ctypes
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from plait.errors import PlaitError
from plait.executor.graph_codegen import GraphCodegenError, check_graph, dumps, entry_bytes, graph_codegen
from plait.executor.memory_plan import memory_report
from plait.ir.types import DTYPES
from plait.limits import check_bytes
from plait.relay.module import IRModule
from plait.runtime.module import CrossModule, CSourceModule, DSOModule, Module, PyModule, RuntimeError_, load_module

_ALIGN = 64
GRAPH_FILE, PARAMS_FILE = "graph.json", "params.npz"


class ExecutorError(PlaitError):
    """A graph cannot be run: bad inputs, a missing or mismatched runtime function, a failed call."""


# ---- artifact --------------------------------------------------------------------------------


@dataclass
class GraphArtifact:
    """What ``plait.build(..., executor="graph")`` returns: the graph, its params and the library.

    ``ir`` is the lowered module (not exported); ``target`` the canonical target string;
    ``timings`` (pass name, seconds) of the build; ``placement`` and ``piece_modules`` (set by the
    driver for a composite target; not exported).
    """

    graph_json: str
    params: dict[str, np.ndarray]
    lib: Module
    target: str = ""
    ir: IRModule | None = field(default=None, repr=False)
    timings: list[tuple[str, float]] = field(default_factory=list, repr=False)
    placement: Any = field(default=None, repr=False)  # a plait.placement.Assignment (None: one piece)
    piece_modules: dict[str, Module] = field(default_factory=dict, repr=False)  # piece name -> its module
    executor = "graph"

    @classmethod
    def from_module(cls, mod: IRModule, lib: Module, target: str = "") -> "GraphArtifact":
        """Graph codegen of a lowered ``mod`` whose PrimFuncs ``lib`` implements."""
        graph, params = graph_codegen(mod)
        graph["target"] = target
        return cls(dumps(graph), params, lib, target, mod)

    @property
    def graph(self) -> dict[str, Any]:
        return json.loads(self.graph_json)

    @property
    def memory(self) -> dict[str, int]:
        """Bytes by kind of buffer (see :mod:`plait.executor.graph_codegen`)."""
        return dict(self.graph["memory"])

    def module(self) -> "GraphModule":
        return GraphModule(self)

    def __repr__(self) -> str:
        calls = sum(1 for n in self.graph["nodes"] if n["op"] in ("call", "copy"))
        return f"GraphArtifact(target={self.target!r}, {calls} calls, {len(self.params)} params, lib={self.lib!r})"

    def memory_report(self, top: int = 10) -> str:
        """The memory plan as text: bytes per storage kind, the peak, the biggest workspaces."""
        return memory_report(self.graph, top)

    def export(self, path: str | Path) -> Path:
        """Write ``graph.json``, ``params.npz`` and the library into the directory ``path``.

        The library is ``lib.so`` (a compiled module), or ``lib.c`` for a C source module that was
        not compiled for the host (e.g. a Cortex-M build). When it imports other modules (one per
        piece), each is written too (``lib_1.so``, ``lib_2.c``, ...) with ``modules.json`` saying
        which file imports which; a module without functions of its own (a container host module)
        has no file. Python modules (:class:`~plait.runtime.PyModule`) cannot be exported.
        """
        out = Path(path)
        entries = _module_entries(self.lib)
        out.mkdir(parents=True, exist_ok=True)
        (out / GRAPH_FILE).write_text(self.graph_json, encoding="utf-8")
        with open(out / PARAMS_FILE, "wb") as f:
            np.savez(f, **self.params)
        for m, entry in entries:
            if entry["file"] is None:
                continue
            if entry["file"].endswith(".onnx"):
                m.save(out / entry["file"])
            elif entry["file"].endswith(".ll"):
                (out / entry["file"]).write_text(m.source, encoding="utf-8")
            else:
                m.export_library(out / entry["file"])
            if isinstance(m, CrossModule):  # the object file a firmware build links, next to its C
                m.export_object(out / (entry["file"][:-2] + ".o"))
        if len(entries) > 1 or entries[0][1]["file"] is None or entries[0][1]["file"].endswith(_SELF_DESCRIBED):
            manifest = {"format": "plait.modules", "version": 1, "modules": [e for _, e in entries]}
            (out / MODULES_FILE).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        else:
            (out / MODULES_FILE).unlink(missing_ok=True)
        return out

    @classmethod
    def load(cls, path: str | Path) -> "GraphArtifact":
        """Read an artifact written by :meth:`export` (with every imported module)."""
        d = Path(path)
        try:
            text = (d / GRAPH_FILE).read_text(encoding="utf-8")
            with np.load(d / PARAMS_FILE, allow_pickle=False) as data:
                params = {k: data[k] for k in data.files}
        except OSError as exc:
            raise ExecutorError(f"cannot load graph artifact '{d}': {exc.strerror or exc}") from None
        except ValueError as exc:
            raise ExecutorError(f"cannot load graph artifact '{d}': bad {PARAMS_FILE}: {exc}") from None
        try:
            graph = check_graph(json.loads(text), f"'{d / GRAPH_FILE}'")
        except json.JSONDecodeError as exc:
            raise ExecutorError(f"cannot load graph artifact '{d}': {GRAPH_FILE} is not JSON: {exc}") from None
        if (d / MODULES_FILE).exists():
            lib = _load_modules(d)
        elif (d / "lib.so").exists():
            lib = _load_file(d, "lib.so")
        elif (d / "lib.c").exists():
            lib = _load_file(d, "lib.c")
        else:
            raise ExecutorError(f"cannot load graph artifact '{d}': no lib.so or lib.c")
        return cls(text, params, lib, graph.get("target", ""))


MODULES_FILE = "modules.json"
_MODULE_FILE = re.compile(r"lib(_[1-9][0-9]*)?\.(so|c|onnx|ll)")
_SELF_DESCRIBED = (".onnx", ".ll")  # files whose loader needs their modules.json entry


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
    from plait.runtime.llvm_module import LLVMModule
    from plait.runtime.ort_module import OrtModule

    out = []
    for k, m in enumerate(order):
        base = "lib" if k == 0 else f"lib_{k}"
        extra: dict[str, Any] = {}
        if isinstance(m, OrtModule):  # an ONNX Runtime region: its ONNX model, a session again on load
            name = base + ".onnx"
            extra = {"symbol": m.symbol, "threads": m.threads, "opt_level": m.opt_level}
        elif isinstance(m, LLVMModule):  # its LLVM IR, JIT-compiled again on load
            name = base + ".ll"
            extra = {"signatures": {k: list(v) for k, v in m.signatures.items()}, "symbols": dict(m.symbols),
                     "cpu": m.cpu, "features": m.features, "opt_level": m.opt_level}
        elif isinstance(m, DSOModule):
            name: str | None = base + ".so"
        elif isinstance(m, CSourceModule):
            name = base + ".c"
        elif not m.function_names() and type(m) in (Module, PyModule):
            name = None  # a container: only imports
        elif isinstance(m, PyModule):
            names = m.function_names()
            raise ExecutorError(f"cannot export {_which(k)}: it is a PyModule (functions {', '.join(names[:3])}"
                                f"{', ...' if len(names) > 3 else ''}) and Python functions cannot be written to a file")
        elif callable(getattr(m, "export_library", None)):
            suffix = getattr(m, "export_suffix", ".so")
            if suffix not in (".so", ".c"):
                raise ExecutorError(f"cannot export {_which(k)}: a {type(m).__name__} exports "
                                    f"'{suffix}' files; the graph artifact holds .so and .c modules")
            name = base + suffix
        else:
            raise ExecutorError(f"cannot export {_which(k)}: a {type(m).__name__} has no export_library "
                                "(only compiled or C source modules can be exported)")
        out.append((m, {"file": name, "imports": [index[id(x)] for x in m.imported_modules], **extra}))
    return out


def _which(k: int) -> str:
    return "the library" if k == 0 else f"module {k} imported by the library"


def _load_file(d: Path, name: str, entry: dict[str, Any] | None = None) -> Module:
    if name.endswith(".onnx"):
        from plait.runtime.ort_module import OrtModule

        e = entry or {}
        if not isinstance(e.get("symbol"), str):
            raise ExecutorError(f"cannot load graph artifact '{d}': {MODULES_FILE}: '{name}' has no function name")
        return OrtModule(e["symbol"], (d / name).read_bytes(), threads=int(e.get("threads", 1)),
                         opt_level=int(e.get("opt_level", 3)))
    if name.endswith(".ll"):
        from plait.runtime.llvm_module import LLVMModule

        e = entry or {}
        if not isinstance(e.get("signatures"), dict):
            raise ExecutorError(f"cannot load graph artifact '{d}': {MODULES_FILE}: '{name}' has no signatures")
        return LLVMModule((d / name).read_text(encoding="utf-8"), e["signatures"], e.get("symbols"),
                          cpu=e.get("cpu"), features=e.get("features"), opt_level=int(e.get("opt_level", 3)),
                          name=name[:-3])
    if name.endswith(".so"):
        return load_module(d / name)
    return CSourceModule((d / name).read_text(encoding="utf-8"), {}, name=name[:-2])


def _load_modules(d: Path) -> Module:
    where = f"cannot load graph artifact '{d}': {MODULES_FILE}"
    try:
        manifest = json.loads((d / MODULES_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ExecutorError(f"{where}: {exc}") from None
    entries = manifest.get("modules") if isinstance(manifest, dict) else None
    if manifest.get("format") != "plait.modules" or not isinstance(entries, list) or not entries:
        raise ExecutorError(f"{where}: not a plait module manifest")
    n = len(entries)
    for k, e in enumerate(entries):
        ok = isinstance(e, dict) and (e.get("file") is None or isinstance(e["file"], str)
                                      and _MODULE_FILE.fullmatch(e["file"]) is not None)
        ok = ok and isinstance(e.get("imports"), list) and all(
            isinstance(i, int) and not isinstance(i, bool) and 0 < i < n and i != k for i in e["imports"])
        if not ok:
            raise ExecutorError(f"{where}: malformed module {k}")
    # the import graph must be acyclic (walking it must end)
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
            imports = entries[k]["imports"]
            if it < len(imports):
                stack.append((k, it + 1))
                stack.append((imports[it], 0))
            else:
                state[k] = 2
    try:
        modules = [Module() if e["file"] is None else _load_file(d, e["file"], e) for e in entries]
    except OSError as exc:
        raise ExecutorError(f"{where}: {exc.strerror or exc}") from None
    for m, e in zip(modules, entries):
        for i in e["imports"]:
            m.import_module(modules[i])
    return modules[0]


# ---- running -------------------------------------------------------------------------------


def _copy(dst: np.ndarray, src: np.ndarray) -> int:
    np.copyto(dst, src)
    return 0



def _aligned(nbytes: int) -> np.ndarray:
    raw = np.zeros(nbytes + _ALIGN, np.uint8)
    off = (-raw.ctypes.data) % _ALIGN
    return raw[off:off + nbytes]


def _find_function(lib: Module, name: str, nargs: int, where: str) -> tuple[Callable, bool]:
    """(function, takes_pointers): the raw function of a compiled module (any module with a
    ``raw(name)`` method: a DSO, an LLVM JIT module...), or a Python callable."""
    for m in lib.walk():
        if name not in m.function_names():
            continue
        if callable(getattr(m, "raw", None)):
            sig = getattr(m, "signatures", {}).get(name, ("ptr",) * nargs)
            if len(sig) != nargs or any(k != "ptr" for k in sig):
                raise ExecutorError(f"{where}: runtime function '{name}' has signature ({', '.join(sig)}); "
                                    f"the graph executor passes {nargs} buffers (inputs, then outputs)")
            return m.raw(name), True
        return m.get_function(name), False  # raises for an uncompiled C source module
    lib.get_function(name)  # raises "unknown runtime function ... did you mean"
    raise ExecutorError(f"{where}: no runtime function '{name}'")  # pragma: no cover


class GraphModule:
    """Runs a :class:`GraphArtifact`. Not thread-safe: one instance per thread."""

    def __init__(self, artifact: GraphArtifact, *, memory_limit: int | str | None = None):
        """``memory_limit``: the most bytes of buffers the graph may allocate (bytes or a size string,
        see :mod:`plait.limits`; None: the default limit)."""
        if isinstance(artifact, GraphModule):
            artifact = artifact.artifact
        if not isinstance(artifact, GraphArtifact):
            raise ExecutorError(f"GraphModule needs a GraphArtifact (from plait.build), got {type(artifact).__name__}")
        self.artifact = artifact
        graph = check_graph(json.loads(artifact.graph_json))
        self.graph = graph
        nodes, entries = graph["nodes"], graph["entries"]
        check_bytes(sum(int(s["bytes"]) for s in graph["storage"]), "the graph's buffers", memory_limit)
        self._storage = [_aligned(s["bytes"]) for s in graph["storage"]]
        self._views = []
        for e in entries:
            buf = self._storage[e["storage"]][:entry_bytes(e)]
            self._views.append(buf.view(DTYPES[e["dtype"]]).reshape(e["shape"]))
        self.input_names: list[str] = [nodes[i]["name"] for i in graph["inputs"]]
        self._inputs = {nodes[i]["name"]: self._views[nodes[i]["outputs"][0]] for i in graph["inputs"]}
        for i in graph["params"]:
            name, view = nodes[i]["name"], self._views[nodes[i]["outputs"][0]]
            if name not in artifact.params:
                raise ExecutorError(f"graph parameter '{name}' is missing from the params")
            value = np.asarray(artifact.params[name])
            if value.shape != view.shape or value.dtype != view.dtype:
                raise ExecutorError(f"graph parameter '{name}': expected {view.dtype}{list(view.shape)}, "
                                    f"got {value.dtype}{list(value.shape)}")
            np.copyto(view, value)
        self.output_names: list[str] = list(graph["output_names"])
        self._outputs = [self._views[e] for e in graph["outputs"]]
        self._calls: list[tuple[Callable, tuple]] = []
        self._call_nodes: list[dict[str, Any]] = []
        for nid, n in enumerate(nodes):
            if n["op"] == "copy":  # between pieces: a DMA on a device, a copy in host simulation
                self._calls.append((_copy, (self._views[n["outputs"][0]], self._views[n["inputs"][0]])))
                self._call_nodes.append(n)
                continue
            if n["op"] != "call":
                continue
            buffers = [self._views[e] for e in (*n["inputs"], *n["outputs"], *n.get("workspace", ()))]
            where = f"graph node {nid} ('{n['name']}')"
            fn, raw = _find_function(artifact.lib, n["func"], len(buffers), where)
            args = tuple(ctypes.c_void_p(b.ctypes.data) for b in buffers) if raw else tuple(buffers)
            self._calls.append((fn, args))
            self._call_nodes.append(n)

    # -- inputs and outputs ----------------------------------------------------------------------
    def get_num_inputs(self) -> int:
        return len(self.input_names)

    def get_num_outputs(self) -> int:
        return len(self._outputs)

    def _input_view(self, key: str | int) -> tuple[str, np.ndarray]:
        if isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(self.input_names):
                raise ExecutorError(f"input index {key} out of range (the graph has {len(self.input_names)} inputs)")
            key = self.input_names[key]
        if key not in self._inputs:
            raise ExecutorError(f"unknown input '{key}' (inputs are: {', '.join(self.input_names) or 'none'})")
        return key, self._inputs[key]

    def set_input(self, key: str | int, value: Any) -> None:
        """Copy ``value`` into input ``key`` (a name or an index); dtype and shape must match exactly."""
        name, view = self._input_view(key)
        a = np.asarray(value)
        if a.dtype != view.dtype:
            raise ExecutorError(f"input '{name}': expected dtype {view.dtype}, got {a.dtype}")
        if a.shape != view.shape:
            raise ExecutorError(f"input '{name}': expected shape {tuple(view.shape)}, got {a.shape}")
        np.copyto(view, a)

    def get_input(self, key: str | int) -> np.ndarray:
        return self._input_view(key)[1].copy()

    def get_output(self, index: int, copy: bool = True) -> np.ndarray:
        """Output ``index`` after :meth:`run`. With ``copy=False``, the executor's own buffer
        (overwritten by the next run)."""
        if not (isinstance(index, int) and 0 <= index < len(self._outputs)):
            raise ExecutorError(f"output index {index!r} out of range (the graph has {len(self._outputs)} outputs)")
        out = self._outputs[index]
        return out.copy() if copy else out

    # -- running ------------------------------------------------------------------------------------
    def run(self) -> None:
        for i, (fn, args) in enumerate(self._calls):
            status = fn(*args)
            if status:
                self._failed(i, status)

    def _failed(self, i: int, status: Any) -> None:
        n = self._call_nodes[i]
        raise RuntimeError_(f"graph node '{n['name']}': runtime function '{n.get('func', n['op'])}' returned "
                            f"error status {status}")

    def profile(self, repeat: int = 10) -> list[dict[str, Any]]:
        """Per call: ``{"name", "func", "ms"}`` (median over ``repeat`` runs of the current inputs),
        in execution order."""
        import time

        times: list[list[float]] = [[] for _ in self._calls]
        for _ in range(max(1, repeat)):
            for i, (fn, args) in enumerate(self._calls):
                t0 = time.perf_counter()
                status = fn(*args)
                times[i].append(time.perf_counter() - t0)
                if status:
                    self._failed(i, status)
        return [{"name": n["name"], "func": n.get("func", n["op"]), "ms": float(np.median(t)) * 1e3}
                for n, t in zip(self._call_nodes, times)]

    def __call__(self, *args: Any, **inputs: Any) -> list[np.ndarray]:
        """Set every input (by position or by name), run, return copies of all outputs."""
        if len(args) > len(self.input_names):
            raise ExecutorError(f"expected {len(self.input_names)} inputs, got {len(args)}")
        given: dict[str, Any] = dict(zip(self.input_names, args))
        for k, v in inputs.items():
            if k in given:
                raise ExecutorError(f"input '{k}' given twice")
            given[k] = v
        unknown = sorted(set(given) - set(self.input_names))
        if unknown:
            self._input_view(unknown[0])
        missing = [n for n in self.input_names if n not in given]
        if missing:
            raise ExecutorError(f"missing input '{missing[0]}' (inputs are: {', '.join(self.input_names)})")
        for k, v in given.items():
            self.set_input(k, v)
        self.run()
        return [self.get_output(i) for i in range(len(self._outputs))]

    def run_with(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Outputs by name for inputs by name."""
        return dict(zip(self.output_names, self(**inputs)))

    def __repr__(self) -> str:
        return (f"GraphModule({len(self._calls)} calls, inputs: {', '.join(self.input_names)}; "
                f"outputs: {', '.join(self.output_names)})")


def graph_executor_codegen(mod: IRModule, lib: Module, target: str = "") -> GraphArtifact:
    """The ``graph`` executor's codegen, as registered in :data:`plait.executor.EXECUTORS`."""
    return GraphArtifact.from_module(mod, lib, target)


__all__ = ["ExecutorError", "GraphArtifact", "GraphCodegenError", "GraphModule", "graph_executor_codegen"]
