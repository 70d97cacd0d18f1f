"""nn.shrink (ONNX Shrink), the operator added in one definition file (plait/op/unary.py): the
reference against ONNX Runtime, the ONNX import (one call, the interpreter and compiled C against
ONNX Runtime), the export round trip, the relation's error, fusion kind and cost. ``OP_CASES`` also
runs through the TE compute coverage test and the export round trip (tests/op/declared_cases.py)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from ort_util import assert_close, run_onnx_node, run_plait_op

from plait.errors import AttrError, TypeInferenceError
from plait.ir import Cost, OpPattern, TensorType
from plait.op import get_op
from plait.testing.ort_reference import reference_session

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 0.75, -2.5], np.float32)


def _data(shape, dtype="float32", seed=0):
    return np.random.default_rng(seed).uniform(-2.0, 2.0, shape).astype(dtype)


OP_CASES = {
    "nn.shrink": [
        ([_data((2, 3, 4))], {}),
        ([_data((3, 5), seed=1)], {"lambd": 1.0, "bias": 0.5}),
        ([SPECIAL], {"lambd": 0.5, "bias": 0.25}),
        ([_data((4, 4), "float16", seed=2)], {"lambd": 0.25, "bias": 1.0}),
        ([_data((7,), "float64", seed=3)], {"lambd": 0.3, "bias": -0.1}),
    ],
}

ATTR_CASES = [{}, {"lambd": 1.0, "bias": 0.5}, {"lambd": 0.25, "bias": 1.0}, {"lambd": 0.0, "bias": 0.0}]


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("attrs", ATTR_CASES)
def test_reference_matches_onnx_runtime(dtype, attrs):
    x = _data((3, 7), dtype)
    (want,) = run_onnx_node("Shrink", [x], attrs)
    # ONNX Runtime's float64 Shrink rounds its result through float32; plait stays in float64
    tol = 1e-6 if dtype == "float64" else None
    assert_close(run_plait_op("nn.shrink", [x], **attrs), want, rtol=tol, atol=tol)


def test_reference_special_values():
    got = run_plait_op("nn.shrink", [SPECIAL], lambd=0.5, bias=0.25)
    np.testing.assert_array_equal(got, np.array([0, np.inf, -np.inf, 0, 0, 0, 0, 0.5, -2.25], np.float32))
    (want,) = run_onnx_node("Shrink", [SPECIAL], {"lambd": 0.5, "bias": 0.25})
    np.testing.assert_array_equal(got, want)


def _model(attrs: dict, dtype: int = onnx.TensorProto.FLOAT, shape=(2, 5)) -> onnx.ModelProto:
    node = oh.make_node("Shrink", ["x"], ["y"], name="shrink", **attrs)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", dtype, shape)],
                          [oh.make_tensor_value_info("y", dtype, shape)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


@pytest.mark.parametrize("attrs", ATTR_CASES)
def test_import_is_one_call_run_by_the_interpreter_and_compiled_c(attrs):
    import plait
    from plait.executor import GraphModule
    from plait.frontend import from_onnx
    from plait.relay import Call, run

    model = _model(attrs)
    mod = from_onnx(model)
    body = mod.main.body
    assert isinstance(body, Call) and body.op is get_op("nn.shrink")
    assert body.attrs["lambd"] == attrs.get("lambd", 0.5) and body.attrs["bias"] == attrs.get("bias", 0.0)
    x = _data((2, 5), seed=4)
    (want,) = run_onnx_node("Shrink", [x], attrs)
    assert_close(run(mod, [x]), want)
    (got,) = GraphModule(plait.build(mod, target="c"))(x=x)
    assert_close(got, want)


def test_integer_shrink_imports_through_the_onnx_function_body():
    """nn.shrink takes floats; an integer Shrink falls back to ONNX's function body for Shrink."""
    from plait.frontend import from_onnx
    from plait.relay import run

    mod = from_onnx(_model({"lambd": 1.0, "bias": 1.0}, onnx.TensorProto.INT32, (5,)))
    x = np.array([-3, -1, 0, 1, 3], np.int32)
    (want,) = run_onnx_node("Shrink", [x], {"lambd": 1.0, "bias": 1.0})
    np.testing.assert_array_equal(run(mod, [x]), want)


def test_export_round_trip():
    from plait.frontend import from_onnx
    from plait.frontend.onnx_export import to_onnx
    from plait.relay import Call, Function, call, var

    p = var("x", (2, 5))
    model = to_onnx(Function((p,), call("nn.shrink", p, lambd=0.75, bias=0.125)))
    (node,) = model.graph.node
    assert node.op_type == "Shrink"
    assert {a.name: oh.get_attribute_value(a) for a in node.attribute} == {"lambd": 0.75, "bias": 0.125}
    x = _data((2, 5), seed=5)
    sess = reference_session(model)
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
    assert_close(got, run_plait_op("nn.shrink", [x], lambd=0.75, bias=0.125))
    back = from_onnx(model).main.body
    assert isinstance(back, Call) and back.op is get_op("nn.shrink") and back.attrs["lambd"] == 0.75


def test_relation_rejects_integers_and_the_schema_is_typed():
    with pytest.raises(TypeInferenceError, match=r"argument: expected a floating-point tensor, got "
                                                 r"Tensor\[\(2,\), int32\]$"):
        run_plait_op("nn.shrink", [np.array([1, 2], np.int32)])
    op = get_op("nn.shrink")
    assert op.make_attrs({}) == op.make_attrs({"lambd": 0.5, "bias": 0.0})
    with pytest.raises(AttrError, match=r"^operator 'nn.shrink': unknown attribute 'lambda' \(valid: lambd, bias\)$"):
        op.make_attrs({"lambda": 1.0})


def test_fusion_kind_and_cost():
    op = get_op("nn.shrink")
    assert op.pattern == OpPattern.ELEMWISE
    t = TensorType((2, 5), "float32")
    assert op.cost((t,), t, op.make_attrs({})) == Cost(flops=30.0, bytes_read=40.0, bytes_written=40.0)
