"""Quantized models for tests and benchmarks, made by ONNX Runtime's own quantizer.

:func:`quantize` runs ``onnxruntime.quantization.quantize_static`` on a float model with
calibration data from a fixed seed (nothing downloaded), in the QDQ or the QOperator form, per
tensor or per channel. :func:`quantized_model` does it for a bench model of
:data:`plait.testing.onnx_models.MODELS`. :func:`output_scales` and :func:`int8_steps` measure a
difference in quantization steps of each output (the int8 domain the acceptance speaks of).

``onnxruntime`` is imported when a function runs, never at import.
"""

from __future__ import annotations

import logging
import tempfile
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import onnx
from onnx import numpy_helper

from plait.errors import PlaitError
from plait.testing.ort_reference import INT8_FUSION  # noqa: F401 (re-exported: the option ort_session sets)

FORMATS = ("qdq", "qoperator")
DTYPES = ("int8", "uint8")

_NP = {1: np.float32, 10: np.float16, 11: np.float64, 6: np.int32, 7: np.int64}


def _static_shape(vi: onnx.ValueInfoProto) -> tuple[int, ...]:
    dims = vi.type.tensor_type.shape.dim
    if any(not d.HasField("dim_value") for d in dims):
        raise PlaitError(f"quantize: input '{vi.name}' has a symbolic shape; calibration needs static shapes")
    return tuple(d.dim_value for d in dims)


def calibration_feeds(model: onnx.ModelProto, n: int = 16, seed: int = 1) -> list[dict[str, np.ndarray]]:
    """``n`` feeds of standard-normal values for every graph input that is not an initializer."""
    r = np.random.default_rng(seed)
    inits = {i.name for i in model.graph.initializer}
    inputs = [vi for vi in model.graph.input if vi.name not in inits]
    feeds = []
    for _ in range(n):
        feed = {}
        for vi in inputs:
            dtype = _NP.get(vi.type.tensor_type.elem_type)
            if dtype is None or not np.issubdtype(dtype, np.floating):
                raise PlaitError(f"quantize: input '{vi.name}' is not a float tensor")
            feed[vi.name] = r.standard_normal(_static_shape(vi)).astype(dtype)
        feeds.append(feed)
    return feeds


def quantize(model: onnx.ModelProto, fmt: str = "qdq", per_channel: bool = True, activation: str = "int8",
             weight: str = "int8", n: int = 16, seed: int = 1, preprocess: bool = True) -> onnx.ModelProto:
    """``model`` quantized by ``quantize_static`` (MinMax calibration on :func:`calibration_feeds`).

    With ``preprocess`` (the default, what ONNX Runtime asks its users to do) the model first goes
    through ``quant_pre_process``: shapes inferred and BatchNormalization folded into convolutions."""
    from onnxruntime import quantization as q
    from onnxruntime.quantization.shape_inference import quant_pre_process

    if fmt not in FORMATS:
        raise PlaitError(f"quantize: format '{fmt}' is not one of {', '.join(FORMATS)}")
    for what, dt in (("activation", activation), ("weight", weight)):
        if dt not in DTYPES:
            raise PlaitError(f"quantize: {what} type '{dt}' is not one of {', '.join(DTYPES)}")
    qtype = {"int8": q.QuantType.QInt8, "uint8": q.QuantType.QUInt8}

    class _Reader(q.CalibrationDataReader):
        def __init__(self) -> None:
            self.data = iter(calibration_feeds(model, n, seed))

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.data, None)

    with tempfile.TemporaryDirectory() as tmp, _quiet():
        src, dst = Path(tmp) / "float.onnx", Path(tmp) / "quantized.onnx"
        onnx.save(model, src)
        if preprocess:
            quant_pre_process(str(src), str(src), skip_symbolic_shape=True)
        q.quantize_static(str(src), str(dst), _Reader(),
                          quant_format=q.QuantFormat.QDQ if fmt == "qdq" else q.QuantFormat.QOperator,
                          per_channel=per_channel, activation_type=qtype[activation], weight_type=qtype[weight])
        return onnx.load(dst)


@contextmanager
def _quiet() -> Iterator[None]:
    """The quantizer's advice goes to the root logger as warnings: silenced while it runs."""
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


@lru_cache(maxsize=None)
def _bench(name: str, fmt: str, per_channel: bool, activation: str) -> bytes:
    from plait.testing.onnx_models import MODELS

    if name not in MODELS:
        raise PlaitError(f"quantize: unknown bench model '{name}' (models: {', '.join(MODELS)})")
    return quantize(MODELS[name](), fmt, per_channel, activation).SerializeToString()


def quantized_model(name: str, fmt: str = "qdq", per_channel: bool = True, activation: str = "int8") -> onnx.ModelProto:
    """The bench model ``name`` quantized (cached per process; a fresh copy each call)."""
    m = onnx.ModelProto()
    m.ParseFromString(_bench(name, fmt, per_channel, activation))
    return m


def output_scales(model: onnx.ModelProto) -> dict[str, float]:
    """The scale of the ``DequantizeLinear`` that makes each graph output (outputs made otherwise,
    e.g. a float Softmax after the last dequantize, are absent)."""
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in model.graph.node
              if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"}
    made = {n.output[0]: n for n in model.graph.node if n.op_type == "DequantizeLinear"}
    out = {}
    for o in model.graph.output:
        n = made.get(o.name)
        if n is None:
            continue
        s = init.get(n.input[1], consts.get(n.input[1]))
        if s is not None and np.size(s) == 1:
            out[o.name] = float(np.asarray(s).reshape(()))
    return out


def int8_steps(got: np.ndarray, want: np.ndarray, scale: float) -> np.ndarray:
    """How many quantization steps of ``scale`` each element of ``got`` is from ``want``."""
    return np.rint(np.abs(got.astype(np.float64) - want.astype(np.float64)) / scale)


def ort_session(model: onnx.ModelProto, optimized: bool = True, int8_fusion: bool | None = None) -> Any:
    """A single-threaded ONNX Runtime CPU session of ``model`` with exact integer sums on every machine
    (:func:`plait.testing.ort_reference.reference_session`). ``optimized=False``: graph optimizations off,
    i.e. ORT runs the QDQ nodes as written; ``int8_fusion``: None leaves ONNX Runtime's default for this
    machine's build, True / False set :data:`INT8_FUSION` (True: int8 QDQ groups become integer operators
    as on ARM, whatever the machine)."""
    from functools import partial

    from plait.testing.ort_reference import reference_session, session_options

    return reference_session(model.SerializeToString(), partial(session_options, optimized, int8_fusion))
