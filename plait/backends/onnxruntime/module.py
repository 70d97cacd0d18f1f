"""A runtime module that runs an ONNX model with ONNX Runtime (the ``onnxruntime`` target kind).

    m = OrtModule("ort_0", model_bytes, threads=1)
    m["ort_0"](x, w, out)          # inputs, then outputs (numpy arrays): runs the session, fills ``out``

The module exports one function, called destination-passing style like every function the graph
executor calls: ``f(*inputs, *outputs)`` with C-contiguous numpy arrays, in the order of the ONNX
graph's inputs and outputs. The arrays are bound to the session directly (ONNX Runtime reads the
inputs and writes the outputs in place; no copy), and the binding is reused while the same
buffers are passed again (one binding per set of buffers, so executors in several threads sharing
the module each keep theirs; ONNX Runtime runs a session from several threads). ``onnx_model``
keeps the serialized model (``save(path)`` writes it).
Integer sums are exact on every machine: the session asks for :data:`X64_PRECISION` (ONNX Runtime's u8 x s8
kernels on x86-64 without VNNI otherwise add pairs of products in 16 bits and saturate; see
:func:`exact_session`), so a region on this kind gives the same integers on an AVX2, an AVX-512 and an ARM host.
``onnxruntime`` is imported when a module is created, never by ``import plait``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from plait.errors import PlaitError
from plait.runtime.module import PyModule, RuntimeError_

MAX_BINDINGS = 8
"""Bindings kept per module (one per set of buffers, e.g. per executor copy)."""

# -opt-level of the kind -> onnxruntime.GraphOptimizationLevel member
OPT_LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")


def import_onnxruntime(who: str = "target kind 'onnxruntime'") -> Any:
    """The ``onnxruntime`` package, or a PlaitError telling how to install it."""
    try:
        import onnxruntime
    except ImportError:
        raise PlaitError(f"{who} needs onnxruntime: pip install onnxruntime") from None
    return onnxruntime


#: ONNX Runtime's session option for exact u8 x s8 sums on x86-64 without VNNI (AVX2, AVX-512 without VNNI), where
#: its default kernels add pairs of products in 16 bits (``vpmaddubsw``) and saturate where
#: ``|x0*w0 + x1*w1| > 32767``. A no-op on machines with VNNI and on ARM.
X64_PRECISION = "session.x64quantprecision"


def exact_session(ort: Any, model: bytes | str, make_options: Callable[[], Any]) -> Any:
    """A CPU session of ``model`` (serialized bytes or a path) with ``make_options()`` plus :data:`X64_PRECISION`:
    exact u8 x s8 sums on every x86-64 machine. ONNX Runtime 1.32 refuses that option (``NOT_IMPLEMENTED``: no
    kernel for int8 data with the uint8 weights it would make) where int8 activations reach its integer operators
    as int8; those run its S8 x S8 kernels, which widen to 16 bits first and are exact anyway, so there the
    session is made with ``make_options()`` alone. Other errors propagate (ONNX Runtime's own types)."""
    try:
        from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented
    except ImportError:  # a build without the pybind state module: nothing to tell apart
        OrtNotImplemented = ()  # type: ignore[assignment]
    so = make_options()
    so.add_session_config_entry(X64_PRECISION, "1")
    try:
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except OrtNotImplemented:  # type: ignore[misc]
        return ort.InferenceSession(model, make_options(), providers=["CPUExecutionProvider"])


def session_options(ort: Any, threads: int = 1, opt_level: int = 3, log_severity: int = 3) -> Any:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPT_LEVELS[opt_level])
    so.log_severity_level = log_severity  # 3: errors only, 4: fatal only
    return so


class OrtModule(PyModule):
    """One ONNX Runtime session (CPU execution provider) behind one exported function."""

    kind = "onnxruntime"

    def __init__(self, symbol: str, onnx_model: bytes, threads: int = 1, opt_level: int = 3, log_severity: int = 3):
        ort = import_onnxruntime()
        self.symbol = symbol
        self.onnx_model = bytes(onnx_model)
        self.threads, self.opt_level = threads, opt_level
        try:
            self.session = exact_session(ort, self.onnx_model,
                                         lambda: session_options(ort, threads, opt_level, log_severity))
        except Exception as exc:  # onnxruntime raises its own exception types
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PlaitError(f"onnxruntime cannot load the model of function '{symbol}': {msg}") from None
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self._bindings: dict[tuple[int, ...], tuple[tuple[np.ndarray, ...], Callable[[], Any]]] = {}
        self._lock = threading.Lock()
        super().__init__({symbol: self._run})

    def _run(self, *arrays: np.ndarray) -> int:
        key = tuple(id(a) for a in arrays)
        hit = self._bindings.get(key)
        if hit is not None and all(a is b for a, b in zip(arrays, hit[0])):
            self._run_binding(key, hit[1])  # the executor passes the same buffers every run: ~10 us of overhead
            return 0
        n_in, n_out = len(self.input_names), len(self.output_names)
        if len(arrays) != n_in + n_out:
            raise RuntimeError_(f"function '{self.symbol}' takes {n_in + n_out} arrays ({n_in} inputs, then {n_out} "
                                f"outputs), got {len(arrays)}")
        if all(isinstance(a, np.ndarray) and a.flags.c_contiguous for a in arrays):
            self._run_binding(key, self._bind(key, arrays))
        else:
            self._run_copy(arrays)
        return 0

    def _bind(self, key: tuple[int, ...], arrays: Sequence[np.ndarray]) -> Callable[[], Any]:
        """Bind the arrays' memory to the session's inputs and outputs. The binding is kept (with
        the arrays, so their memory stays valid) while the same array objects come back: one per set
        of buffers, so that several executors (one per thread, :meth:`GraphModule.copy`) sharing this
        module each keep theirs; the oldest of more than ``MAX_BINDINGS`` is dropped."""
        b = self.session.io_binding()
        n_in = len(self.input_names)
        for name, a in zip(self.input_names, arrays[:n_in]):
            b.bind_input(name, "cpu", 0, a.dtype, list(a.shape), a.ctypes.data)
        for name, a in zip(self.output_names, arrays[n_in:]):
            b.bind_output(name, "cpu", 0, a.dtype, list(a.shape), a.ctypes.data)
        # the C++ session and binding objects, when this onnxruntime exposes them: the Python
        # wrapper of run_with_iobinding adds ~7 us of checks per call (graph capture on WebGPU)
        raw_sess, raw_binding = getattr(self.session, "_sess", None), getattr(b, "_iobinding", None)
        if raw_sess is not None and raw_binding is not None and hasattr(raw_sess, "run_with_iobinding"):
            run: Callable[[], Any] = lambda: raw_sess.run_with_iobinding(raw_binding, None)  # noqa: E731
        else:
            run = lambda: self.session.run_with_iobinding(b)  # noqa: E731
        with self._lock:
            while len(self._bindings) >= MAX_BINDINGS:
                self._bindings.pop(next(iter(self._bindings)))
            self._bindings[key] = (tuple(arrays), run)
        return run

    def _run_binding(self, key: tuple[int, ...], run: Callable[[], Any]) -> None:
        try:
            run()
        except Exception as exc:
            with self._lock:
                self._bindings.pop(key, None)
            raise RuntimeError_(f"function '{self.symbol}': onnxruntime failed: {str(exc).strip()}") from None

    def _run_copy(self, arrays: Sequence[np.ndarray]) -> None:
        n_in = len(self.input_names)
        feeds = {name: np.ascontiguousarray(a) for name, a in zip(self.input_names, arrays[:n_in])}
        try:
            outs = self.session.run(self.output_names, feeds)
        except Exception as exc:
            raise RuntimeError_(f"function '{self.symbol}': onnxruntime failed: {str(exc).strip()}") from None
        for name, dst, src in zip(self.output_names, arrays[n_in:], outs):
            if dst.shape != src.shape or dst.dtype != src.dtype:
                raise RuntimeError_(f"function '{self.symbol}': output '{name}' is {src.dtype}{list(src.shape)}, "
                                    f"the buffer {dst.dtype}{list(dst.shape)}")
            np.copyto(dst, src)

    def save(self, path: str | Path) -> Path:
        """Write the ONNX model to ``path``."""
        p = Path(path)
        p.write_bytes(self.onnx_model)
        return p

    def __repr__(self) -> str:
        return (f"OrtModule({self.symbol!r}, {len(self.input_names)} inputs, {len(self.output_names)} outputs, "
                f"threads={self.threads})")
