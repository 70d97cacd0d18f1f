"""ONNX Loop import: unrolled when the trip count and conditions are known at import time, a Relay Loop
otherwise (run by the reference interpreter here against ONNX Runtime; tests/executor/test_vm_control.py
runs it compiled under the VM)."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from plait import relay
from plait.errors import UnsupportedError
from plait.frontend.onnx import from_onnx
from plait.relay.expr import Loop
from plait.testing.ort_reference import reference_session

from tests.executor.test_vm_control import onnx_loop_model


def _loops(mod):
    return [e for e in relay.post_order(mod.main.body) if isinstance(e, Loop)]


def test_a_run_time_trip_count_makes_a_relay_loop_that_matches_onnx_runtime():
    model = onnx_loop_model(with_cond=True)
    mod = from_onnx(model)
    (lp,) = _loops(mod)
    assert lp.num_scan == 1 and len(lp.init) == 1 and lp.trip_count is mod.main.params[0]
    assert str(lp.checked_type) == "(Tensor[(2, 3), float32], Tensor[(?, 2, 3), float32])"
    sess = reference_session(model)
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    for m, limit in ((0, 5.0), (3, 100.0), (10, 2.0)):
        feeds = {"M": np.array(m, np.int64), "x": x, "limit": np.array(limit, np.float32)}
        for g, w in zip(relay.flatten_value(relay.run(mod, feeds)), sess.run(None, feeds)):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_a_constant_trip_count_is_unrolled():
    model = onnx_loop_model()
    g = model.graph
    g.initializer.append(helper.make_tensor("M", TensorProto.INT64, [], [3]))
    del g.input[0]
    mod = from_onnx(model)
    assert not _loops(mod)
    assert str(mod.main.body.checked_type) == "(Tensor[(2, 3), float32], Tensor[(3, 2, 3), float32])"


def test_a_loop_carried_value_that_changes_type_is_refused():
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Concat", ["s", "s"], ["s_out"], axis=0)],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("s", f, None)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("s_out", f, None)])
    g = helper.make_graph([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="grow")], "g",
                          [helper.make_tensor_value_info("M", TensorProto.INT64, []),
                           helper.make_tensor_value_info("x", f, [2])],
                          [helper.make_tensor_value_info("y", f, None)])
    with pytest.raises(UnsupportedError) as e:
        from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert ("node 'grow' (Loop, opset 17): loop-carried value 0 ('s') changes type from Tensor[(2,), float32] to "
            "Tensor[(4,), float32]") in str(e.value)


def _scan8_model(reverse: int, lens=None):
    """Scan of opset 8: a running sum (state) and its square (scan output) over axis 1, per batch element."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Mul", ["s_out", "s_out"], ["y_t"])],
        "body", [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]),
                 helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [2])])
    inits = [] if lens is None else [helper.make_tensor("lens", TensorProto.INT64, [3], lens)]
    node = helper.make_node("Scan", ["lens" if lens is not None else "", "s0", "x"], ["s", "y"], body=body,
                            num_scan_inputs=1, directions=[reverse])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [3, 2]),
                                        helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 2])],
                          [helper.make_tensor_value_info("s", TensorProto.FLOAT, [3, 2]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 2])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 8)], ir_version=8)


@pytest.mark.parametrize("reverse", [0, 1])
def test_scan_of_opset_8_runs_each_batch_element_and_matches_onnx_runtime(reverse):
    model = _scan8_model(reverse, lens=[4, 4, 4])
    rng = np.random.default_rng(reverse)
    feeds = {"s0": rng.standard_normal((3, 2)).astype(np.float32), "x": rng.standard_normal((3, 4, 2)).astype(np.float32)}
    want = reference_session(model).run(None, feeds)
    got = relay.flatten_value(relay.run(from_onnx(model), feeds))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_scan_of_opset_8_with_short_sequences_is_refused():
    with pytest.raises(UnsupportedError, match=r"sequence_lens shorter than the sequence length 4 is not supported"):
        from_onnx(_scan8_model(0, lens=[4, 2, 4]))
