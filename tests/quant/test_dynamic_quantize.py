"""DynamicQuantizeLinear onto qnn arithmetic: the range, scale and zero point computed as ONNX
Runtime computes them (``GetQuantizationParameter``: the range widened to hold 0, scale 1 for an
all-zero input, the zero point rounded half to even), then ``qnn.quantize``; all three outputs equal
ONNX Runtime's, compiled to C, on inputs of every sign and an all-zero one."""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from onnx import TensorProto

import plait
from plait.errors import FrontendError
from plait.executor import GraphModule
from plait.frontend import from_onnx
from plait.relay import Call
from plait.relay.visitor import post_order
from plait.testing.ort_reference import reference_session


def _model(elem=TensorProto.FLOAT):
    node = oh.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    outs = [oh.make_tensor_value_info(o, t, None) for o, t in (("y", TensorProto.UINT8), ("s", elem), ("z", TensorProto.UINT8))]
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", elem, [3, 50])], outs)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


def test_dynamic_quantize_linear_is_onnx_runtimes():
    m = _model()
    sess = reference_session(m)
    mod = from_onnx(m)
    ops = {n.op.name for n in post_order(mod["main"]) if isinstance(n, Call)}
    assert "qnn.quantize" in ops and "qnn.dequantize" not in ops
    art = GraphModule(plait.build(mod, "c"))
    r = np.random.default_rng(0)
    for k in range(12):
        x = (r.standard_normal((3, 50)) * r.uniform(0.01, 10) + r.uniform(-3, 3)).astype(np.float32)
        x = {0: np.zeros_like(x), 1: np.abs(x), 2: -np.abs(x)}.get(k, x)
        for got, want in zip(art(x=x), sess.run(None, {"x": x})):
            np.testing.assert_array_equal(np.asarray(got), want)


def test_dynamic_quantize_linear_of_double_is_refused():
    with pytest.raises(FrontendError, match=r"node 'DynamicQuantizeLinear_0' \(DynamicQuantizeLinear, opset 17\): "
                       r"input 0 \('x'\) is float64, DynamicQuantizeLinear-11 takes float32"):
        from_onnx(_model(TensorProto.DOUBLE))
