"""The VM executor on run-time shapes: symbolic dims (size variables bound from the inputs when a call runs),
views over a symbolic batch, data-dependent outputs (NonZero), the errors, and export's refusal. The bench
models with a symbolic batch are in tests/backends/test_lower_symbolic.py."""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from onnx import TensorProto

import plait
from plait.errors import PlaitError
from plait.executor.vm.machine import VirtualMachine
from plait.frontend.onnx import from_onnx
from plait.testing.ort_reference import reference_session


def _model(nodes, inputs, outputs, inits=()):
    g = oh.make_graph(nodes, "g", inputs, outputs, list(inits))
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


def _ort(model, feeds):
    return reference_session(model).run(None, feeds)


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


def test_export_and_load_in_a_fresh_process_with_run_time_shapes(tmp_path):
    import json
    import subprocess
    import sys

    from plait.testing.dynamic_models import DYNAMIC_MODELS

    dyn = DYNAMIC_MODELS["ds_cnn"]()
    for name, model in (("nz", NONZERO), ("ds", dyn)):
        plait.build(from_onnx(model), "c", executor="vm").export(tmp_path / name)
    shaped = json.loads((tmp_path / "nz" / "vm.json").read_text())["shaped"]
    assert sorted(shaped) == ["fused_nn_relu", "fused_nonzero", "fused_transpose"]
    assert "T_nonzero: Buffer((2, N * 3), int64)" in shaped["fused_nonzero"]  # the interface, no body
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    d = np.random.default_rng(1).standard_normal((3, 1, 49, 10)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "d.npy", d)
    code = (f"import numpy as np; from plait.executor import VirtualMachine; from plait.executor.vm.executable import "
            f"VMExecutable; p = {str(tmp_path)!r}\n"
            f"np.save(p + '/y.npy', VirtualMachine(VMExecutable.load(p + '/nz'))(x=np.load(p + '/x.npy'))[0])\n"
            f"np.save(p + '/z.npy', VirtualMachine(VMExecutable.load(p + '/ds'))(input=np.load(p + '/d.npy'))[0])\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), _ort(NONZERO, {"x": x})[0])
    np.testing.assert_allclose(np.load(tmp_path / "z.npy"), _ort(dyn, {"input": d})[0], rtol=1e-4, atol=1e-5)


def test_a_tampered_shaped_function_is_refused_on_load(tmp_path):
    from plait.executor.vm.artifact import check_vm

    path = tmp_path / "nz"
    plait.build(from_onnx(NONZERO), "c", executor="vm").export(path)
    import json

    vm = json.loads((path / "vm.json").read_text())
    vm["shaped"]["fused_nonzero"] = vm["shaped"]["fused_nonzero"].replace('global_symbol="fused_nonzero"',
                                                                          'global_symbol="other"')
    with pytest.raises(PlaitError) as e:
        check_vm(vm, "vm.json", {})
    assert str(e.value) == ("vm.json: shaped function 'fused_nonzero': not the interface of a function with run-time "
                            "shapes of that name")


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
