"""FoldConstant: constant subexpressions become constants; results unchanged; limits respected."""

from __future__ import annotations

import numpy as np
import pytest

from plait import relay
from plait.errors import InterpreterError
from plait.op import get_op
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


def test_a_constant_index_out_of_range_fails_at_compile_time():
    # the interpreter would fail on every input: FoldConstant says so, naming the call
    idx = const(np.array([5], dtype="int64"))
    for data in (const(np.arange(3, dtype="float32")), var("d", (3,))):
        body = call("add", call("take", data, idx, axis=0), var("x", (1,)))
        with pytest.raises(InterpreterError) as e:
            FoldConstant()(_mod(body))
        assert str(e.value) == ("call (operator 'take'): take: index 5 is out of range for axis 0 of size 3 "
                                "(a constant index: this call fails on every input)")
    # an index known only at run time is left to run time
    body = call("take", var("d", (3,)), var("i", (1,), "int64"), axis=0)
    assert calls(FoldConstant()(_mod(body))) == ["take"]


def test_huge_results_are_not_evaluated(monkeypatch):
    # 2**40 elements: judged from the type, the reference is never called
    op = get_op("broadcast_to")
    evaluated = []
    monkeypatch.setattr(op, "ref", lambda args, attrs: evaluated.append(attrs) or np.zeros(0, np.float32))
    body = call("broadcast_to", const(np.float32(1.0)), shape=(1 << 20, 1 << 20))
    assert calls(FoldConstant()(_mod(body))) == ["broadcast_to"]
    assert evaluated == []
