"""The graph executor's runtime: :class:`GraphModule` runs a :class:`GraphArtifact` with a thin Python loop.

    art = plait.build(mod, target="c")            # a GraphArtifact (plait.executor.graph.artifact)
    gm = GraphModule(art)
    y, = gm(x=np.ones((1, 256), np.float32))      # or set_input / run / get_output
    worker = gm.copy()                            # for another thread: shares the library and params
    print(art.memory_report())                    # the memory plan (plait.memory.plan)
    art.export("out/"); GraphArtifact.load("out/")

``GraphModule`` checks the artifact (:mod:`plait.executor.graph_check`: ids, shapes, storage,
aliasing, execution order, every call against its function's signature), checks the byte total
against the memory limit, then allocates every input and param buffer and every pool once (each
pool at a 64-byte aligned base; every activation and workspace is a view at its planned offset in
its pool, a ``view`` node's output a view of its input's bytes), copies the params in, and
pre-binds each call's arguments (inputs, outputs, workspaces): ``run()`` is a loop over
(function, arguments) pairs calling the raw functions of compiled modules (any module with a
``raw(name)`` method), with no allocation. Functions of a non-compiled module
(:class:`~plait.runtime.PyModule`, e.g. a hook's external runtime) are called with numpy views of
the same buffers; ``copy`` nodes (between pieces) are ``np.copyto``.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from plait.executor.errors import ExecutorError, GraphCodegenError  # noqa: F401 - GraphCodegenError re-exported
from plait.executor.graph_check import node_label
from plait.memory.plan import entry_bytes
from plait.ir.status import describe as describe_status
from plait.ir.types import DTYPES
from plait.limits import check_bytes
from plait.runtime.module import Module, RuntimeError_

BUFFER_ALIGN = 64


# ---- inputs and outputs, as ONNX Runtime describes them -------------------------------------

#: numpy dtype name -> ONNX Runtime's type string (``NodeArg.type``) for every dtype plait has.
ORT_TYPES: dict[str, str] = {
    "bool": "tensor(bool)", "int8": "tensor(int8)", "int16": "tensor(int16)", "int32": "tensor(int32)",
    "int64": "tensor(int64)", "uint8": "tensor(uint8)", "uint16": "tensor(uint16)", "uint32": "tensor(uint32)",
    "uint64": "tensor(uint64)", "float16": "tensor(float16)", "float32": "tensor(float)",
    "float64": "tensor(double)",
}


@dataclass
class TensorInfo:
    """One input or output of a graph, like ONNX Runtime's ``NodeArg``.

    ``name``: the model's name for it; ``shape``: a list of ints (static); ``type``: ONNX Runtime's
    string, e.g. ``"tensor(float)"``; ``dtype``: the numpy dtype name, e.g. ``"float32"``.
    """

    name: str
    shape: list[int]
    type: str
    dtype: str

    @classmethod
    def of(cls, name: str, array: np.ndarray) -> "TensorInfo":
        """The info of ``array`` (an executor buffer) named ``name``."""
        dtype = array.dtype.name
        return cls(name, [int(d) for d in array.shape], ORT_TYPES.get(dtype, f"tensor({dtype})"), dtype)

    def __repr__(self) -> str:
        return f"TensorInfo(name={self.name!r}, shape={self.shape}, type={self.type!r}, dtype={self.dtype!r})"


# ---- running -------------------------------------------------------------------------------


def _copy(dst: np.ndarray, src: np.ndarray) -> int:
    np.copyto(dst, src)
    return 0


def aligned_buffer(nbytes: int, align: int = BUFFER_ALIGN) -> np.ndarray:
    """A zeroed byte buffer of ``nbytes`` whose address is a multiple of ``align`` (the executors' buffers)."""
    raw = np.zeros(nbytes + align, np.uint8)
    off = (-raw.ctypes.data) % align
    return raw[off:off + nbytes]


def _find_function(lib: Module, name: str, nargs: int, where: str, scalars: int = 0) -> tuple[Callable, bool]:
    """(function, takes_pointers): the raw function of a compiled module (any module with a
    ``raw(name)`` method: a DSO, an LLVM JIT module...), or a Python callable. It takes ``nargs``
    buffers, then ``scalars`` int64 values (the size variables of a function with symbolic extents)."""
    for m in lib.walk():
        if name not in m.function_names():
            continue
        if callable(getattr(m, "raw", None)):
            sig = getattr(m, "signatures", {}).get(name, ("ptr",) * nargs + ("int64",) * scalars)
            if len(sig) != nargs + scalars or any(k != "ptr" for k in sig[:nargs]) or \
                    any(k != "int64" for k in sig[nargs:]):
                raise ExecutorError(f"{where}: runtime function '{name}' has signature ({', '.join(sig)}); "
                                    f"the graph executor passes {nargs} buffers (inputs, then outputs)")
            return m.raw(name), True
        return m.get_function(name), False  # raises for an uncompiled C source module
    lib.get_function(name)  # raises "unknown runtime function ... did you mean"
    raise ExecutorError(f"{where}: no runtime function '{name}'")  # pragma: no cover


@dataclass(frozen=True)
class _Program:
    """What every copy of a :class:`GraphModule` shares: the checked graph, the resolved functions and
    the params' buffers (read-only; no call writes a param, the checks make sure of it)."""

    artifact: Any
    graph: dict[str, Any]
    storage_bytes: tuple[int, ...]
    pool_bytes: tuple[tuple[int, int], ...]  # (bytes, alignment) per pool
    param_storage: dict[int, np.ndarray]
    calls: tuple[tuple[Callable, bool, tuple[int, ...], dict[str, Any]], ...]  # (fn, raw, entry ids, node)
    memory_limit: int | str | None


def _prepare(artifact: Any, memory_limit: int | str | None) -> _Program:
    """Check the artifact, check the byte total against the memory limit, find every function, and
    only then allocate and fill the params' buffers."""
    graph = artifact.check()
    nodes, entries = graph["nodes"], graph["entries"]
    sizes = tuple(int(s["bytes"]) for s in graph["storage"])
    pools = tuple((int(p["bytes"]), max(BUFFER_ALIGN, int(p["align"]))) for p in graph["pools"])
    params_bytes = sum(int(s["bytes"]) for s in graph["storage"] if s["kind"] == "param")
    check_bytes(_own_bytes(graph) + params_bytes, "the graph's buffers", memory_limit)
    calls: list[tuple[Callable, bool, tuple[int, ...], dict[str, Any]]] = []
    for nid, n in enumerate(nodes):
        if n["op"] == "copy":  # between pieces: a DMA on a device, a copy in host simulation
            calls.append((_copy, False, (n["outputs"][0], n["inputs"][0]), n))
        elif n["op"] == "call":
            ids = (*n.get("inputs", ()), *n["outputs"], *n.get("workspace", ()))
            fn, raw = _find_function(artifact.lib, n["func"], len(ids), node_label(nid, n))
            calls.append((fn, raw, ids, n))
    params: dict[int, np.ndarray] = {}
    for i in graph["params"]:
        e = entries[nodes[i]["outputs"][0]]
        buf = aligned_buffer(sizes[e["storage"]])
        np.copyto(_view(buf, e), artifact.params[nodes[i]["name"]])
        buf.setflags(write=False)
        params[e["storage"]] = buf
    return _Program(artifact, graph, sizes, pools, params, tuple(calls), memory_limit)


def _own_bytes(graph: dict[str, Any]) -> int:
    """The bytes each instance allocates: its inputs and pools (the params are shared)."""
    return sum(int(s["bytes"]) for s in graph["storage"] if s["kind"] == "input") + \
        sum(int(p["bytes"]) for p in graph["pools"])


def _piece(n: dict[str, Any]) -> str:
    """Where a call or copy node runs: its piece, or ``SRC->DST`` for a copy between pieces."""
    if n["op"] == "copy":
        return f"{n.get('src', '')}->{n.get('dst', '')}"
    return str(n.get("piece", ""))


def _view(buf: np.ndarray, e: dict[str, Any]) -> np.ndarray:
    return buf[:entry_bytes(e)].view(DTYPES[e["dtype"]]).reshape(e["shape"])


class GraphModule:
    """Runs a :class:`GraphArtifact`.

    Threads: a call ``gm(...)`` (or ``run_with``) sets the inputs, runs and copies the outputs while
    holding ``gm.lock``, so one instance may be shared between threads (their runs take turns). For a
    sequence of ``set_input`` / ``run`` / ``get_output`` from several threads, hold ``gm.lock`` around
    it, or give each thread its own :meth:`copy` (copies run at the same time).
    """

    def __init__(self, artifact: Any, *, memory_limit: int | str | None = None):
        """Checks the artifact (:meth:`GraphArtifact.check`) and allocates its buffers.
        ``memory_limit``: the most bytes of buffers the graph may allocate (bytes or a size string,
        see :mod:`plait.limits`; None: the default limit), checked before anything is allocated."""
        if isinstance(artifact, GraphModule):
            artifact = artifact.artifact
        # a GraphArtifact (plait.executor.graph.artifact, which imports this module for GraphArtifact.module)
        if not (isinstance(getattr(artifact, "graph_json", None), str) and hasattr(artifact, "check")):
            raise ExecutorError(f"GraphModule needs a GraphArtifact (from plait.build), got {type(artifact).__name__}")
        self._setup(_prepare(artifact, memory_limit))

    def copy(self) -> "GraphModule":
        """A new instance for another thread: it shares the loaded library, the checked graph and the
        params' buffers (nothing is loaded or checked again) and has its own inputs, activations and
        workspaces (checked against the memory limit first)."""
        prog = self._prog
        check_bytes(_own_bytes(prog.graph), "the graph's buffers (a copy)", prog.memory_limit)
        new = object.__new__(GraphModule)
        new._setup(prog)
        return new

    def _setup(self, prog: _Program) -> None:
        self._prog = prog
        self.artifact = prog.artifact
        self.graph = prog.graph
        self._lock = threading.RLock()
        nodes, entries = prog.graph["nodes"], prog.graph["entries"]
        pools = [aligned_buffer(b, a) for b, a in prog.pool_bytes]
        storage = [prog.param_storage[sid] if sid in prog.param_storage else
                   pools[st["pool"]][st["offset"]:st["offset"] + st["bytes"]] if "pool" in st else aligned_buffer(st["bytes"])
                   for sid, st in enumerate(prog.graph["storage"])]
        self._views = [_view(storage[e["storage"]], e) for e in entries]
        self.input_names: list[str] = [nodes[i]["name"] for i in prog.graph["inputs"]]
        self._inputs = {nodes[i]["name"]: self._views[nodes[i]["outputs"][0]] for i in prog.graph["inputs"]}
        self.output_names: list[str] = list(prog.graph["output_names"])
        self._outputs = [self._views[e] for e in prog.graph["outputs"]]
        self._calls: list[tuple[Callable, tuple]] = []
        self._call_nodes: list[dict[str, Any]] = []
        for fn, raw, ids, n in prog.calls:
            bufs = [self._views[e] for e in ids]
            self._calls.append((fn, tuple(ctypes.c_void_p(b.ctypes.data) for b in bufs) if raw else tuple(bufs)))
            self._call_nodes.append(n)

    @property
    def lock(self) -> threading.RLock:
        """Held by every method while it touches the buffers; hold it around a sequence of calls."""
        return self._lock

    # -- inputs and outputs ----------------------------------------------------------------------
    def get_inputs(self) -> list[TensorInfo]:
        """The inputs like ONNX Runtime's ``InferenceSession.get_inputs()``: name, shape, type, dtype."""
        return [TensorInfo.of(name, view) for name, view in self._inputs.items()]

    def get_outputs(self) -> list[TensorInfo]:
        """The outputs like ONNX Runtime's ``InferenceSession.get_outputs()``: name, shape, type, dtype."""
        return [TensorInfo.of(name, view) for name, view in zip(self.output_names, self._outputs)]

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
        """Copy ``value`` into input ``key`` (a name or an index); dtype and shape must match exactly
        (either byte order: a big-endian ``>f4`` array is a float32 input)."""
        name, view = self._input_view(key)
        a = np.asarray(value)
        if a.dtype.newbyteorder("=") != view.dtype:
            raise ExecutorError(f"input '{name}': expected dtype {view.dtype}, got {a.dtype}")
        if a.shape != view.shape:
            raise ExecutorError(f"input '{name}': expected shape {tuple(view.shape)}, got {a.shape}")
        with self._lock:
            np.copyto(view, a)

    def get_input(self, key: str | int) -> np.ndarray:
        view = self._input_view(key)[1]
        with self._lock:
            return view.copy()

    def get_output(self, index: int, copy: bool = True) -> np.ndarray:
        """Output ``index`` after :meth:`run`. With ``copy=False``, the executor's own buffer
        (overwritten by the next run)."""
        if not (isinstance(index, int) and 0 <= index < len(self._outputs)):
            raise ExecutorError(f"output index {index!r} out of range (the graph has {len(self._outputs)} outputs)")
        out = self._outputs[index]
        if not copy:
            return out
        with self._lock:
            return out.copy()

    # -- running ------------------------------------------------------------------------------------
    def run(self) -> None:
        with self._lock:
            for i, (fn, args) in enumerate(self._calls):
                status = fn(*args)
                if status:
                    self._failed(i, status)

    def _failed(self, i: int, status: Any) -> None:
        n = self._call_nodes[i]
        raise RuntimeError_(f"graph node '{n['name']}': runtime function '{n.get('func', n['op'])}' "
                            f"{describe_status(status)}")

    def profile(self, repeat: int = 10) -> list[dict[str, Any]]:
        """Per call (and copy between pieces): ``{"name", "func", "piece", "ms"}``, in execution order.
        ``ms`` is the median over ``repeat`` runs of the current inputs; ``func`` is the runtime function
        (``"copy"`` for a copy); ``piece`` the piece the call runs on (``"SRC->DST"`` for a copy, ``""``
        when the graph does not say)."""
        import time

        times: list[list[float]] = [[] for _ in self._calls]
        with self._lock:
            for _ in range(max(1, repeat)):
                for i, (fn, args) in enumerate(self._calls):
                    t0 = time.perf_counter()
                    status = fn(*args)
                    times[i].append(time.perf_counter() - t0)
                    if status:
                        self._failed(i, status)
        return [{"name": n["name"], "func": n.get("func", n["op"]), "piece": _piece(n), "ms": float(np.median(t)) * 1e3}
                for n, t in zip(self._call_nodes, times)]

    def __call__(self, *args: Any, **inputs: Any) -> list[np.ndarray]:
        """Set every input (by position or by name), run, return copies of all outputs; atomic with
        respect to other threads using this instance."""
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
        with self._lock:  # one unit: another thread's run cannot come between
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


__all__ = ["ExecutorError", "GraphCodegenError", "GraphModule", "TensorInfo"]
