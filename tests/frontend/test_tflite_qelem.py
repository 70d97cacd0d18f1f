"""Quantized TFLite activations (plait/frontend/tflite_ops_qelem.py) as single-operator models written
with plait's TFLiteWriter, every one of the 256 input values at once: int8 equal to TensorFlow Lite
Micro bit for bit (LiteRT's reference kernels where TensorFlow Lite Micro has no such kernel), uint8
within one step of LiteRT's; the compiled C and the numpy interpreter both."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.errors import FrontendError
from plait.frontend.tflite import from_tflite
from plait.frontend.tflite_write import TFLiteWriter
from plait.relay.interpreter import run as interpret

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
lit = pytest.importorskip("ai_edge_litert.interpreter")

LO = {"int8": -128, "uint8": 0}
NOT_IN_TFLM = ("RELU_N1_TO_1", "RELU_0_TO_1", "EXP", "NEG", "LOG", "GELU")  # TensorFlow Lite Micro has none

# (scale, zero point) of the input, then of the output (None: the output TFLite requires)
QUANTS = [((0.05, 3), (0.04, -20)), ((0.011, -100), (0.02, 7)), ((0.2, 60), (0.19, 60)), ((0.0031, 0), (0.003, -128))]
FIXED_OUT = {"LOGISTIC": {"int8": (1 / 256, -128), "uint8": (1 / 256, 0)},
             "TANH": {"int8": (1 / 128, 0), "uint8": (1 / 128, 128)},
             "LOG": {"int8": (0.05, 0)}}  # not TFLite's requirement: a range that holds the logs of every input
OPS = ["RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LEAKY_RELU", "LOGISTIC", "TANH", "HARD_SWISH", "ABS", "ELU", "EXP",
       "NEG", "LOG", "GELU"]


def model(op: str, dtype: str, qin: tuple, qout: tuple, **options) -> bytes:
    off = LO[dtype] + 128
    w = TFLiteWriter()
    x = w.tensor("x", (1, 4, 8, 8), dtype, quant=(qin[0], qin[1] + off))
    qo = FIXED_OUT.get(op, {}).get(dtype) or (qout[0], qout[1] + off)
    y = w.tensor("y", (1, 4, 8, 8), dtype, quant=qo)
    w.op(op, [x], [y], **options)
    return w.finish([x], [y])


def every_value(dtype: str) -> np.ndarray:
    return np.arange(LO[dtype], LO[dtype] + 256).reshape(1, 4, 8, 8).astype(dtype)


def tflm(buf: bytes, x: np.ndarray) -> np.ndarray:
    it = tflm_runtime.Interpreter.from_bytes(buf)
    it.set_input(x, 0)
    it.invoke()
    return it.get_output(0)


def litert(buf: bytes, x: np.ndarray) -> np.ndarray:
    li = lit.Interpreter(model_content=buf, experimental_op_resolver_type=lit.OpResolverType.BUILTIN_REF)
    li.allocate_tensors()
    li.set_tensor(li.get_input_details()[0]["index"], x)
    li.invoke()
    return li.get_tensor(li.get_output_details()[0]["index"])


def plaits(buf: bytes, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mod = from_tflite(buf)
    (got,) = plait.executor.GraphModule(plait.build(mod, "c"))(x)
    interp = interpret(mod, [x])
    return got, np.asarray(interp[0] if isinstance(interp, (list, tuple)) else interp)


@pytest.mark.parametrize("qin, qout", QUANTS, ids=[f"q{k}" for k in range(len(QUANTS))])
@pytest.mark.parametrize("op", OPS)
def test_int8_activations_equal_tflite_micro(op, qin, qout):
    options = {"Alpha": 0.13} if op == "LEAKY_RELU" else {}
    buf = model(op, "int8", qin, qout, **options)
    x = every_value("int8")
    want = litert(buf, x) if op in NOT_IN_TFLM else tflm(buf, x)
    got, interp = plaits(buf, x)
    assert got.dtype == np.int8 and len(np.unique(want)) > 5
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(interp, want)


@pytest.mark.parametrize("qin, qout", QUANTS, ids=[f"q{k}" for k in range(len(QUANTS))])
def test_int8_sqrt_and_approximate_gelu_equal_litert(qin, qout):
    """SQRT on the values at and above the zero point (LiteRT stops with an error below it), and GELU's
    tanh form, each equal to LiteRT (TensorFlow Lite Micro has neither)."""
    for op, options in (("SQRT", {}), ("GELU", {"Approximate": True})):
        buf = model(op, "int8", qin, qout, **options)
        x = every_value("int8")
        if op == "SQRT":
            x = np.maximum(x, np.int8(qin[1]))
        want = litert(buf, x)
        got, interp = plaits(buf, x)
        assert len(np.unique(want)) > 5
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(interp, want)


@pytest.mark.parametrize("alpha", [0.01, 0.5, 1.7, -0.3])
def test_int8_leaky_relu_alphas(alpha):
    buf = model("LEAKY_RELU", "int8", (0.03, -5), (0.05, 11), Alpha=alpha)
    x = every_value("int8")
    got, _ = plaits(buf, x)
    np.testing.assert_array_equal(got, tflm(buf, x))


@pytest.mark.parametrize("qin, qout", QUANTS[:3], ids=[f"q{k}" for k in range(3)])
@pytest.mark.parametrize("op", [op for op in OPS if op not in ("ABS", "ELU", "EXP", "NEG", "LOG", "GELU")])  # int8 only
def test_uint8_activations_within_a_step_of_litert(op, qin, qout):
    options = {"Alpha": 0.13} if op == "LEAKY_RELU" else {}
    buf = model(op, "uint8", qin, qout, **options)
    x = every_value("uint8")
    want = litert(buf, x).astype(int)
    got, interp = plaits(buf, x)
    assert got.dtype == np.uint8
    assert int(np.abs(got.astype(int) - want).max()) <= 1
    np.testing.assert_array_equal(interp, got)


def test_logistic_with_another_output_zero_point_is_refused():
    w = TFLiteWriter()
    x = w.tensor("x", (1, 4), "int8", quant=(0.1, 0))
    y = w.tensor("y", (1, 4), "int8", quant=(1 / 256, 0))
    w.op("LOGISTIC", [x], [y])
    with pytest.raises(FrontendError, match=r"operator 0 \(LOGISTIC\).*the output zero point 0 is not -128 "
                                            r"\(TFLite requires it\)"):
        from_tflite(w.finish([x], [y]))


def test_uint8_abs_is_refused_as_tflite_does():
    with pytest.raises(FrontendError, match=r"operator 0 \(ABS\): ABS of UINT8 to UINT8 is not supported \(int8 and "
                                            r"int16 to itself is\)"):
        from_tflite(model("ABS", "uint8", (0.05, 3), (0.04, -20)))


@pytest.mark.parametrize("op", [op for op in OPS if op != "LEAKY_RELU"])
def test_int8_activations_export_back_to_the_same_builtin(op):
    """Read, exported (qnn.lookup back to the builtin its table is), read again: the same operator, and the
    file runs in its reference with the original's bits."""
    from plait.frontend.tflite_export import export_tflite
    from plait.frontend.tflite_read import read_model

    buf = model(op, "int8", *QUANTS[0])
    out = export_tflite(from_tflite(buf))
    assert [o.opcode for o in read_model(out).subgraphs[0].ops] == [op]
    run = litert if op in NOT_IN_TFLM else tflm
    x = every_value("int8")
    np.testing.assert_array_equal(run(out, x), run(buf, x))


def test_leaky_relu_and_foreign_tables_are_not_exported():
    from plait.frontend.tflite_export import TFLiteExportError, export_tflite

    with pytest.raises(TFLiteExportError, match=r"operator qnn.lookup \(call 'y'\): a table lookup that is not one of "
                                                r"TFLite's quantized activations without options \(its op_type is "
                                                r"LEAKY_RELU\)"):
        export_tflite(from_tflite(model("LEAKY_RELU", "int8", *QUANTS[0], Alpha=0.1)))


@pytest.mark.parametrize("qin, qout", [((0.05, -128), (0.04, -20)), ((0.011, -100), (0.2, -128)), ((0.3, 0), (0.01, 5))])
def test_int8_rsqrt_equals_tflite_micro(qin, qout):
    """RSQRT is defined from the input's zero point up (TensorFlow Lite Micro fails below it)."""
    buf = model("RSQRT", "int8", qin, qout)
    x = np.clip(np.arange(256) - 128, qin[1], 127).reshape(1, 4, 8, 8).astype(np.int8)
    got, interp = plaits(buf, x)
    want = tflm(buf, x)
    assert len(np.unique(want)) > 5
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(interp, want)
