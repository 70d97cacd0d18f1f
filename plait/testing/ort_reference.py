"""ONNX Runtime as a reference for integer results: single-threaded CPU sessions whose u8 x s8 sums are exact
on every x86-64 machine.

ONNX Runtime's u8 x s8 matrix kernels on x86-64 without VNNI (AVX2, and AVX-512 without VNNI) add pairs of
products in 16 bits (``vpmaddubsw``), saturating where ``|x0*w0 + x1*w1| > 32767``: on such a machine its
int8 convolutions and matrix products can differ from the exact sums by many quantization steps (measured on
the quantized bench models under an emulated AMD EPYC Milan: up to 13 steps on all of mobilenet_v2's outputs
per channel). Its session option :data:`X64_PRECISION` selects exact kernels there (a no-op on machines with
VNNI and on ARM); :func:`reference_session` sets it. ONNX Runtime 1.32 refuses that option (``NOT_IMPLEMENTED``:
no kernel for int8 data with the uint8 weights it would make) where int8 activations reach its integer
operators as int8 -- a QOperator model of int8 activations, or int8 QDQ groups fused with
:data:`INT8_FUSION`: those run its S8 x S8 kernels, which widen to 16 bits first and are exact anyway, so
there the session is made without it. Either way the reference does not depend on the instruction set of the
machine the tests run on (docs/quantization.md).

``onnxruntime`` is imported when a function runs, never at import.
"""

from __future__ import annotations

from typing import Any, Callable

#: ONNX Runtime's session option for exact u8 x s8 sums on x86-64 without VNNI (module docstring).
X64_PRECISION = "session.x64quantprecision"

#: ONNX Runtime's session option that lets its optimizer fuse a ``DQ -> op -> Q`` group of int8 activations
#: into its integer operator (QLinearConv, QGemm, ...). Its ARM builds default to ``1``; its x86-64 build
#: to ``0`` (``QDQIsInt8Allowed()``): there such a group runs in float unless its QDQS8ToU8Transformer could
#: turn the int8 pair into uint8 (only when the Q has that one consumer) -- a float sum that can land on the
#: other side of a rounding tie than the exact integer one (docs/quantization.md).
INT8_FUSION = "session.qdqisint8allowed"


def session_options(optimized: bool = True, int8_fusion: bool | None = None) -> Any:
    """Single-threaded, sequential, quiet CPU session options (``optimized=False``: graph optimizations off;
    ``int8_fusion``: None leaves ONNX Runtime's default, True / False set :data:`INT8_FUSION`)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if int8_fusion is not None:
        so.add_session_config_entry(INT8_FUSION, "1" if int8_fusion else "0")
    return so


def reference_session(model: bytes, options: Callable[[], Any] = session_options) -> Any:
    """An ONNX Runtime CPU session of the serialized ``model`` with exact integer sums (module docstring):
    ``options()`` (fresh session options) plus :data:`X64_PRECISION`, or without it where ONNX Runtime
    refuses it."""
    import onnxruntime as ort
    from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

    so = options()
    so.add_session_config_entry(X64_PRECISION, "1")
    try:
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except OrtNotImplemented:
        return ort.InferenceSession(model, options(), providers=["CPUExecutionProvider"])


__all__ = ["INT8_FUSION", "X64_PRECISION", "reference_session", "session_options"]
