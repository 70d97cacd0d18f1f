"""The VM executor on run-time shapes: symbolic dims (size variables bound from the inputs when a call runs),
views over a symbolic batch, data-dependent outputs (NonZero), the errors, and export's refusal. The bench
models with a symbolic batch are in tests/backends/test_lower_symbolic.py."""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import onnxruntime as ort
import pytest
from onnx import TensorProto

import plait
from plait.errors import PlaitError
from plait.executor.vm import VirtualMachine
from plait.frontend.onnx import from_onnx


def _model(nodes, inputs, outputs, inits=()):
    g = oh.make_graph(nodes, "g", inputs, outputs, list(inits))
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


NONZERO = _model(
    [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("NonZero", ["r"], ["idx"]),
     oh.make_node("Transpose", ["idx"], ["y"], perm=[1, 0])],
    [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
    [oh.make_tensor_value_info("y", TensorProto.INT64, None)])


def test_nonzero_runs_compiled_and_its_length_is_known_when_it_runs():
    exe = plait.build(from_onnx(NONZERO), "c", executor="vm")
    assert "call %2 = fused_nonzero(%1)" in exe.text() and set(exe.shaped) == {"fused_nn_relu", "fused_nonzero",
                                                                                    "fused_transpose"}
    vm = VirtualMachine(exe)
    for n in (0, 1, 3, 8):
        x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
        (y,) = vm(x=x)
        (want,) = _ort(NONZERO, {"x": x})
        assert y.dtype == np.int64 and y.shape == want.shape
        np.testing.assert_array_equal(y, want)


def test_symbolic_dims_bind_per_run_through_views_and_broadcasts():
    m = _model(
        [oh.make_node("MatMul", ["x", "w"], ["h"]), oh.make_node("Add", ["h", "y"], ["s"]),
         oh.make_node("Flatten", ["s"], ["f"], axis=1), oh.make_node("Softmax", ["f"], ["o"], axis=1)],
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 2, 4]),
         oh.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 2, 5])],
        [oh.make_tensor_value_info("o", TensorProto.FLOAT, ["B", 10])],
        [oh.make_tensor("w", TensorProto.FLOAT, [4, 5], np.linspace(-1, 1, 20).tolist())])
    vm = VirtualMachine(plait.build(from_onnx(m), "c", executor="vm"))
    for b in (1, 4, 2):
        rng = np.random.default_rng(b)
        feeds = {"x": rng.standard_normal((b, 2, 4)).astype(np.float32),
                 "y": rng.standard_normal((b, 2, 5)).astype(np.float32)}
        (got,) = vm(**feeds)
        np.testing.assert_allclose(got, _ort(m, feeds)[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(PlaitError) as e:
        vm(x=np.zeros((2, 2, 4), np.float32), y=np.zeros((3, 2, 5), np.float32))
    assert str(e.value) == "input 'y': dimension 0 (B) is 3, but input 'x' has B = 2"


def test_export_of_run_time_shapes_is_refused_clearly(tmp_path):
    exe = plait.build(from_onnx(NONZERO), "c", executor="vm")
    with pytest.raises(PlaitError) as e:
        exe.export(tmp_path / "nz")
    assert str(e.value) == ("exporting a VM executable whose calls have run-time shapes (function 'fused_nn_relu': "
                            "symbolic dims or a data-dependent output) is not supported yet; run it in process "
                            "(plait run --executor vm)")


def test_the_graph_executor_refuses_symbolic_dims_and_names_the_vm():
    with pytest.raises(PlaitError, match=r"or build with executor='vm'"):
        plait.build(from_onnx(NONZERO), "c")


def test_a_window_whose_length_is_an_input_runs_for_any_length():
    """HannWindow's function body: a Range over a run-time size (a Loop) and scalar planned values passed to
    calls with run-time shapes."""
    m = _model([oh.make_node("HannWindow", ["n"], ["w"])], [oh.make_tensor_value_info("n", TensorProto.INT32, [])],
               [oh.make_tensor_value_info("w", TensorProto.FLOAT, ["?"])])
    vm = VirtualMachine(plait.build(from_onnx(m), "c", executor="vm"))
    for n in (1, 5, 10):
        feeds = {"n": np.array(n, np.int32)}
        (got,) = vm(**feeds)
        np.testing.assert_allclose(got, _ort(m, feeds)[0], rtol=1e-5, atol=1e-6)
