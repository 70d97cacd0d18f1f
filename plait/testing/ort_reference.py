"""ONNX Runtime as a reference: single-threaded CPU sessions whose u8 x s8 sums are exact on every x86-64 machine.

    sess = reference_session(model)                 # a ModelProto, serialized bytes or a path
    outs = reference_run(model, {"x": x})            # the same session, run once

Every test that compares with ONNX Runtime makes its session here (``tests/test_structure.py`` checks that no
test builds ``ort.InferenceSession`` itself), so no expected value depends on which kernels ONNX Runtime picked
for the CPU the tests run on.

ONNX Runtime's u8 x s8 matrix kernels on x86-64 without VNNI (AVX2, and AVX-512 without VNNI) add pairs of
products in 16 bits (``vpmaddubsw``), saturating where ``|x0*w0 + x1*w1| > 32767``: on such a machine its
int8 convolutions and matrix products can differ from the exact sums by many quantization steps (measured on
the quantized bench models under an emulated AMD EPYC Milan: up to 13 steps on all of mobilenet_v2's outputs
per channel; natively on an AVX2 EPYC: 18,997 in the int32 sums of a MatMulInteger). Its session option
:data:`X64_PRECISION` selects exact kernels there (a no-op on machines with VNNI and on ARM); every session made
here sets it, through the onnxruntime kind's :func:`~plait.backends.onnxruntime.module.exact_session` (which
also says where ONNX Runtime refuses it, and why the result is exact there anyway). That option reaches only a constant
int8 weight that its optimizer prepacks: a u8 x s8 ``MatMulInteger`` or ``QLinearMatMul`` whose int8 operand is a
graph input stays inexact there (18,062 apart in the int32 sums of a 3x64 @ 64x5 product on an AVX2 EPYC), so
tests that feed both operands keep the int8 one within [-64, 63] (:func:`exact_u8s8_operands`), where every pair
fits in 16 bits. (``ConvInteger`` is exact either way.) Float results still differ in the last bits between
CPUs (FMA, vector widths): compare them with a tolerance.

``onnxruntime`` is imported when a function runs, never at import.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Mapping

from plait.backends.onnxruntime.module import X64_PRECISION, exact_session

#: ONNX Runtime's session option that lets its optimizer fuse a ``DQ -> op -> Q`` group of int8 activations
#: into its integer operator (QLinearConv, QGemm, ...). Its ARM builds default to ``1``; its x86-64 build
#: to ``0`` (``QDQIsInt8Allowed()``): there such a group runs in float unless its QDQS8ToU8Transformer could
#: turn the int8 pair into uint8 (only when the Q has that one consumer) -- a float sum that can land on the
#: other side of a rounding tie than the exact integer one (docs/quantization.md).
INT8_FUSION = "session.qdqisint8allowed"


def session_options(optimized: bool = True, int8_fusion: bool | None = None, log_severity: int = 3) -> Any:
    """Single-threaded, sequential, quiet CPU session options (``optimized=False``: graph optimizations off;
    ``int8_fusion``: None leaves ONNX Runtime's default, True / False set :data:`INT8_FUSION`;
    ``log_severity``: ONNX Runtime's level, 3 errors only, 4 fatal only)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = log_severity
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if int8_fusion is not None:
        so.add_session_config_entry(INT8_FUSION, "1" if int8_fusion else "0")
    return so


def _model_bytes(model: Any) -> bytes | str:
    if isinstance(model, (bytes, str)):
        return model
    if hasattr(model, "SerializeToString"):
        return model.SerializeToString()
    return str(model)  # a path-like


def reference_session(model: Any, options: Callable[[], Any] | None = None, **kw: Any) -> Any:
    """An ONNX Runtime CPU session of ``model`` (a ModelProto, serialized bytes or a path) with exact integer
    sums (module docstring): ``options()`` (fresh session options; default :func:`session_options` called with
    the keywords ``kw``) plus :data:`X64_PRECISION`, or without it where ONNX Runtime refuses it."""
    import onnxruntime as ort

    make = options if options is not None else partial(session_options, **kw)
    return exact_session(ort, _model_bytes(model), make)


def exact_u8s8_operands(inputs: list[Any]) -> list[Any]:
    """``inputs`` with the int8 one of a leading uint8 x int8 pair of operands halved (``>> 1``: within [-64, 63]),
    the rest as they are: ONNX Runtime's u8 x s8 kernels then add every pair of products exactly in 16 bits on
    every machine (module docstring). Other dtype pairs are exact there as they are."""
    import numpy as np

    a, b = inputs[:2]
    if {a.dtype, b.dtype} == {np.dtype(np.uint8), np.dtype(np.int8)}:
        a, b = (a >> 1 if a.dtype == np.int8 else a), (b >> 1 if b.dtype == np.int8 else b)
    return [a, b, *inputs[2:]]


def reference_run(model: Any, feeds: Mapping[str, Any], outputs: list[str] | None = None, **kw: Any) -> list[Any]:
    """The outputs of :func:`reference_session` ``(model, **kw)`` run once on ``feeds``."""
    return reference_session(model, **kw).run(outputs, dict(feeds))


__all__ = ["INT8_FUSION", "X64_PRECISION", "exact_u8s8_operands", "reference_run", "reference_session", "session_options"]
