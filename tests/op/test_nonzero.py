"""nonzero (ONNX NonZero), the operator whose output shape depends on its input's values: the reference
against ONNX Runtime, its type, the import (folded for a constant, the operator otherwise), and its TIR
(Op.prim_func, no TE compute) lowered and compiled for static and symbolic input shapes. ``OP_CASES``
also runs through the export round trip (tests/op/declared_cases.py); the VM executor's runs of it are
in tests/executor/test_vm_dynamic.py."""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from onnx import TensorProto
from ort_util import assert_close, run_onnx_node, run_plait_op

import plait
from plait.errors import TypeInferenceError
from plait.frontend.onnx import from_onnx
from plait.ir import OpPattern, TensorType
from plait.lowering.lower import lower_function, single_call_function
from plait.lowering.shape_func import prepare_call, trim_outputs
from plait.op import get_op
from plait.relay import Call, call, infer_type, post_order, var
from plait.relay.module import IRModule
from plait.backends.c.backend import build_c, c_function_names


def _mixed(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, shape).astype(dtype)
    return x


OP_CASES = {
    "nonzero": [
        ([_mixed((3, 4), "float32")], {}),
        ([_mixed((2, 3, 2), "int32", seed=1)], {}),
        ([np.array([True, False, True, True])], {}),
        ([np.zeros((2, 2), np.float32)], {}),
    ],
}


@pytest.mark.parametrize("inputs,attrs", OP_CASES["nonzero"])
def test_reference_matches_onnx_runtime(inputs, attrs):
    (want,) = run_onnx_node("NonZero", inputs, output_dtypes=[np.int64])
    assert_close(run_plait_op("nonzero", inputs), want)


def test_type_fusion_kind_and_scalar_error():
    op = get_op("nonzero")
    assert op.pattern == OpPattern.OPAQUE and op.compute is None and op.prim_func is not None
    x = var("x", ("N", 3), "float32")
    fn = infer_type(IRModule.from_expr(call("nonzero", x)))["main"]
    assert fn.body.checked_type == TensorType((2, "?"), "int64")
    with pytest.raises(TypeInferenceError, match=r"nonzero: NonZero of a scalar \(rank 0\) is not supported"):
        infer_type(IRModule.from_expr(call("nonzero", var("s", (), "float32"))))


def _model(shape, elem=TensorProto.FLOAT):
    g = oh.make_graph([oh.make_node("NonZero", ["x"], ["y"])], "g", [oh.make_tensor_value_info("x", elem, shape)],
                      [oh.make_tensor_value_info("y", TensorProto.INT64, None)])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


def test_import_is_the_operator_for_a_run_time_input_and_folds_a_constant():
    mod = from_onnx(_model(["N", 3]))
    (c,) = [n for n in post_order(mod["main"].body) if isinstance(n, Call)]
    assert c.op_name == "nonzero"
    g = oh.make_graph([oh.make_node("Constant", [], ["c"], value=oh.make_tensor("v", TensorProto.FLOAT, [3], [0, 2, 3])),
                       oh.make_node("NonZero", ["c"], ["y"])], "g", [],
                      [oh.make_tensor_value_info("y", TensorProto.INT64, None)])
    folded = from_onnx(oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)]))
    np.testing.assert_array_equal(folded["main"].body.data, [[1, 2]])


def test_the_graph_executor_refuses_it_and_names_the_vm():
    with pytest.raises(plait.PlaitError, match=r"executor='vm'"):
        plait.build(from_onnx(_model([2, 3])), "c")


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("shape,dtype", [((3, 4), "float32"), (("N", 5), "int32"), (("?", 2, 2), "bool")])
def test_its_tir_compiles_and_matches_the_reference(target, shape, dtype, tmp_path):
    if target == "llvm":
        pytest.importorskip("llvmlite")
    main = infer_type(IRModule.from_expr(call("nonzero", var("x", shape, dtype))))["main"]
    func = lower_function(single_call_function(main.body), "nz", target)
    assert func.attrs["data_dependent"] == (0, 1, len(shape)) and func.attrs["piece"] == target
    if target == "c":
        fn = build_c([func], cache_dir=str(tmp_path))[c_function_names([func])[0]]
    else:
        from plait.backends.llvm.backend import build_llvm_funcs

        fn = build_llvm_funcs([func])["nz"]
    for n in (0, 1, 3, 8):
        concrete = tuple(n if isinstance(d, str) else d for d in shape)
        for seed in range(2):
            data = _mixed(concrete, "int32", seed).astype(dtype)
            args, outs = prepare_call(func, [data])
            assert fn(*args) == 0
            (got,) = trim_outputs(func, outs)
            np.testing.assert_array_equal(got, np.array(np.nonzero(data), np.int64).reshape(len(shape), -1))
