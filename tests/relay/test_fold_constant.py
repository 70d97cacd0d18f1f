"""FoldConstant: constant subexpressions become constants; results unchanged; limits respected."""

from __future__ import annotations

import numpy as np

from plait import relay
from plait.relay import Call, Constant, Function, IRModule, Tuple, TupleGetItem, call, const, var
from plait.relay.passes import FoldConstant, FuseOps


def _mod(body) -> IRModule:
    return relay.infer_type(IRModule.from_expr(body))


def calls(mod: IRModule) -> list[str]:
    return [n.op_name for n in relay.post_order(mod.main.body) if isinstance(n, Call)]


def test_folds_constant_chains_and_keeps_the_rest():
    x = var("x", (2, 3))
    w = const(np.arange(6, dtype="float32").reshape(3, 2))
    wt = call("transpose", call("multiply", w, const(np.float32(2.0))), axes=(1, 0))
    body = call("add", call("nn.relu", x), call("reshape", wt, newshape=(2, 3)))
    mod = _mod(body)
    folded = FoldConstant()(mod)
    assert calls(folded) == ["nn.relu", "add"]
    c = folded.main.body.args[1]
    assert isinstance(c, Constant)
    np.testing.assert_array_equal(c.data, (np.arange(6, dtype="float32").reshape(3, 2) * 2).T.reshape(2, 3))
    v = {"x": np.random.default_rng(0).standard_normal((2, 3)).astype("float32")}
    np.testing.assert_array_equal(relay.run(folded, v), relay.run(mod, v))


def test_tuples_device_copy_size_limit_and_primitive_functions():
    c = const(np.arange(6, dtype="float32"))
    parts = call("split", c, sections=(2, 4))
    x = var("x", (4,))
    body = Tuple((call("add", TupleGetItem(parts, 1), x), call("device_copy", c, src="a", dst="b"),
                  call("broadcast_to", const(np.float32(1.0)), shape=(100, 100))))
    folded = FoldConstant()(_mod(body))
    assert calls(folded) == ["add", "device_copy"]
    np.testing.assert_array_equal(folded.main.body.fields[0].args[0].data, [2, 3, 4, 5])
    small = FoldConstant(max_elements=1000)(_mod(body))
    assert calls(small) == ["add", "device_copy", "broadcast_to"]
    # calls inside Primitive functions are left alone
    fused = FuseOps()(_mod(call("exp", call("negative", x))))
    assert FoldConstant()(fused).main.body.op is fused.main.body.op


def test_a_failing_reference_is_left_for_run_time():
    idx = const(np.array([5], dtype="int64"))
    body = call("add", call("take", const(np.arange(3, dtype="float32")), idx), var("x", (1,)))
    folded = FoldConstant()(_mod(body))
    assert calls(folded) == ["take", "add"]
