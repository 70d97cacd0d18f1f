"""The TFLite importer: what the module looks like, the CLI, and refusals with exact messages."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.cli import main
from plait.errors import FrontendError, UnsupportedError
from plait.frontend.tflite import from_tflite, load_tflite
from plait.frontend.tflite_write import TFLiteWriter
from plait.testing import tflite_models as tm

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")


def relu_add(signature: str | None = "serving_default") -> bytes:
    """y = relu(a) + b, float32[2, 3]."""
    w = TFLiteWriter()
    a, b = w.tensor("a", (2, 3)), w.tensor("b", (2, 3))
    r, y = w.tensor("r", (2, 3)), w.tensor("y", (2, 3))
    w.op("RELU", [a], [r])
    w.op("ADD", [r, b], [y], FusedActivationFunction=0)
    return w.finish([a, b], [y], signature=signature)


def test_inputs_outputs_and_meta():
    mod = from_tflite(relu_add())
    main_fn = mod["main"]
    assert [p.name_hint for p in main_fn.params] == ["a", "b"]
    assert mod.attrs["input_names"] == ("a", "b") and mod.attrs["output_names"] == ("y",)
    body = main_fn.body
    assert body.op.name == "add" and dict(body.meta) == {"name": "y", "op_type": "ADD"}
    a = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    b = np.ones((2, 3), np.float32)
    (got,) = plait.executor.GraphModule(plait.build(mod, "c"))(a, b)
    np.testing.assert_array_equal(got, np.maximum(a, 0) + b)


def test_without_a_signature_subgraph_0_and_tensor_names():
    mod = from_tflite(relu_add(signature=None))
    assert mod.attrs["input_names"] == ("a", "b") and mod.attrs["output_names"] == ("y",)


def test_an_unknown_signature_is_refused_naming_the_ones_there():
    with pytest.raises(FrontendError) as exc:
        from_tflite(relu_add(), signature="train")
    assert str(exc.value) == "the model has no signature 'train' (its signatures: 'serving_default')"


def test_unsupported_operators_are_reported_together_with_index_and_name():
    w = TFLiteWriter()
    x, y, z, u = (w.tensor(n, (4,)) for n in "xyzu")
    w.op("COS", [x], [y])
    w.op("CUSTOM", [y], [z], custom="MyOp")  # reads the unsupported one's output: not reported again
    w.op("CUSTOM", [x], [u], custom="Other")
    with pytest.raises(UnsupportedError) as exc:
        from_tflite(w.finish([x], [z, u]))
    assert str(exc.value) == ("model uses 2 unsupported operator(s):\n"
                              "  operator 0 (COS): builtin operator COS is not supported\n"
                              "  operator 2 (CUSTOM 'Other'): custom operator 'Other' is not supported")


def test_operators_out_of_order_and_tensors_written_twice():
    w = TFLiteWriter()
    x, y, z = w.tensor("x", (4,)), w.tensor("y", (4,)), w.tensor("z", (4,))
    w.op("RELU", [y], [z])
    w.op("RELU", [x], [y])
    with pytest.raises(UnsupportedError) as exc:
        from_tflite(w.finish([x], [z]))
    assert "operator 0 (RELU): reads tensor 1 'y', which no earlier operator writes and which is not an input " \
           "(operators must be in execution order)" in str(exc.value)
    w = TFLiteWriter()
    x, y = w.tensor("x", (4,)), w.tensor("y", (4,))
    w.op("RELU", [x], [y])
    w.op("RELU6", [x], [y])
    with pytest.raises(FrontendError) as exc:
        from_tflite(w.finish([x], [y]))
    assert str(exc.value) == "operator 1 (RELU6): writes tensor 1 'y', which operator 0 already wrote"


def test_a_declared_output_type_that_does_not_match_is_refused():
    w = TFLiteWriter()
    x, y = w.tensor("x", (4,)), w.tensor("y", (5,))
    w.op("RELU", [x], [y])
    with pytest.raises(UnsupportedError) as exc:
        from_tflite(w.finish([x], [y]))
    assert "operator 0 (RELU): computes float32[4] for output tensor 1 'y', which the file declares float32[5]" \
        in str(exc.value)


@pytest.mark.parametrize("dtype, zp", [("int8", 128), ("int8", 2**59 + 39), ("uint8", -1), ("int16", 40000)])
def test_a_zero_point_outside_its_dtype_is_refused(dtype, zp):
    """A damaged file's zero point (the fuzzer's bit flips made one 2**59 + 39) is refused by name."""
    w = TFLiteWriter()
    x = w.tensor("input", (4,), dtype, quant=(0.1, zp))
    y = w.tensor("y", (4,), dtype, quant=(0.1, 0))
    w.op("MUL", [x, x], [y])
    with pytest.raises(UnsupportedError) as exc:
        from_tflite(w.finish([x], [y]))
    assert str(exc.value) == ("model uses 1 unsupported operator(s):\n  operator 0 (MUL): input 0 (tensor 0 'input') "
                              f"has zero point {zp}, outside {dtype.upper()}")


def test_not_a_tflite_file(tmp_path):
    p = tmp_path / "x.tflite"
    p.write_bytes(b"\x00" * 64)
    with pytest.raises(FrontendError) as exc:
        load_tflite(p)
    assert str(exc.value) == (f"cannot load TFLite model '{p}': not a TFLite model: the file identifier "
                              "(bytes 4-8) is not 'TFL3'")


def test_cli_runs_a_tflite_file_recognized_by_content(tmp_path, capsys):
    buf = tm.autoencoder(quant=True)
    p = tmp_path / "model.bin"  # not the usual name: recognized by its content
    p.write_bytes(buf)
    x = np.random.default_rng(0).integers(-128, 128, (1, 640)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "y.npz"
    assert main(["run", str(p), "--target", "c", "--inputs", str(tmp_path / "x.npy"), "--output", str(out)]) == 0
    it = tflm_runtime.Interpreter.from_bytes(buf)
    it.set_input(x, 0)
    it.invoke()
    got = np.load(out)
    np.testing.assert_array_equal(got[list(got.keys())[0]], it.get_output(0))


def test_cli_signature_and_input_shapes_flags(tmp_path, capsys):
    p = tmp_path / "m.tflite"
    p.write_bytes(relu_add())
    assert main(["run", str(p), "--target", "c", "--signature", "nope"]) == 1
    assert capsys.readouterr().err.strip().endswith(
        "the model has no signature 'nope' (its signatures: 'serving_default')")
    assert main(["run", str(p), "--target", "c", "--input-shapes", "a:2,3"]) == 2
    assert f"--input-shapes: not supported for a TFLite model ('{p}')" in capsys.readouterr().err


def test_cli_ops_lists_tflite_builtins(capsys):
    assert main(["ops", "--tflite"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "SOFTMAX", "QUANTIZE"} <= set(names)
    assert names == sorted(names)
    assert main(["ops", "CONV_2D"]) == 0
    assert capsys.readouterr().out.startswith("TFLite CONV_2D: ")


def test_requantize_float_is_onnx_runtimes_arithmetic_on_a_tflite_model():
    """-requantize=float: the float32 scale each multiplier and shift stand for, rounded half to even (a step
    off TensorFlow Lite Micro here and there); the default is TFLite's fixed point, bit for bit."""
    buf = tm.autoencoder(quant=True)
    mod = from_tflite(buf)
    x = np.random.default_rng(0).integers(-128, 128, (1, 640)).astype(np.int8)
    it = tflm_runtime.Interpreter.from_bytes(buf)
    it.set_input(x, 0)
    it.invoke()
    want = it.get_output(0).astype(np.int64)
    (fixed,) = plait.executor.GraphModule(plait.build(mod, "c"))(x)
    np.testing.assert_array_equal(fixed, want)
    art = plait.build(mod, "c -requantize=float")
    (flt,) = plait.executor.GraphModule(art)(x)
    diff = np.abs(flt.astype(np.int64) - want)
    assert diff.max() == 1 and 0 < np.count_nonzero(diff) < diff.size // 4
