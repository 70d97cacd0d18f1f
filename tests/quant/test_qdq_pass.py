"""QDQToInteger on hand-built Relay: what it rewrites into integer operators (with the activation
as a clamp and the bias as an int32 add), what it leaves alone, and that the rewritten module gives
the float one's values to within one quantization step (the float one computes the convolution in
float). FixedPointRequantize turns float requantizations into TFLite's fixed-point form."""

from __future__ import annotations

import numpy as np
import pytest

from plait.ir.transform import PassContext
from plait.relay import Call, IRModule, call, const, run, var
from plait.relay.infer import infer_type
from plait.relay.passes import FixedPointRequantize, QDQToInteger
from plait.relay.visitor import post_order

F32 = np.float32
R = np.random.default_rng(0)
W = R.integers(-127, 128, (6, 4, 3, 3)).astype(np.int8)
WS = R.uniform(0.002, 0.01, 6).astype(F32)
B = R.integers(-500, 500, 6).astype(np.int32)
XS, YS = F32(0.05), F32(0.08)


def dq(x, s, z, axis=1):
    return call("qnn.dequantize", x, const(np.asarray(s, F32)), const(np.asarray(z)), axis=axis)


def q(x, s, z):
    return call("qnn.quantize", x, const(np.asarray(s, F32)), const(np.asarray(z)))


def conv_chain(act=None, bias=True, x_scale=XS):
    x = var("x", (1, 4, 5, 5), "uint8")
    y = call("nn.conv2d", dq(x, x_scale, np.uint8(128)), dq(const(W), WS, np.zeros(6, np.int8), axis=0),
             padding=(1, 1, 1, 1))
    if bias:
        y = call("add", y, call("reshape", dq(const(B), XS * WS, np.zeros(6, np.int32), axis=0), newshape=(-1, 1, 1)))
    if act == "relu":
        y = call("nn.relu", y)
    elif act == "clip":
        y = call("clip", y, a_min=-0.4, a_max=0.6)
    return IRModule.from_expr(q(y, YS, np.uint8(100)))


def ops(mod):
    return [n.op.name for n in post_order(mod["main"]) if isinstance(n, Call)]


def rewrite(mod, mode="float"):
    return PassContext().run(QDQToInteger(mode=mode), infer_type(mod))


def _x():
    return np.random.default_rng(1).integers(0, 256, (1, 4, 5, 5)).astype(np.uint8)


@pytest.mark.parametrize("act,clamp", [(None, (None, None)), ("relu", (100, None)), ("clip", (95, 108))])
def test_conv_bias_activation_becomes_integer(act, clamp):
    mod = conv_chain(act)
    new = rewrite(mod)
    assert sorted(set(ops(new))) == ["add", "qnn.conv2d", "qnn.requantize"]
    (rq,) = [n for n in post_order(new["main"]) if isinstance(n, Call) and n.op.name == "qnn.requantize"]
    assert (rq.attrs["clamp_min"], rq.attrs["clamp_max"]) == clamp and rq.attrs["zero_point"] == 100
    np.testing.assert_array_equal(rq.args[1].data, (XS * WS) / YS)  # float32, QLinearConv's order
    got, want = run(new, [_x()]).astype(int), run(mod, [_x()]).astype(int)
    assert np.abs(got - want).max() <= 1 and (got != want).mean() < 0.05


def test_a_run_time_scale_or_a_shared_value_stays_float():
    x = var("x", (1, 4, 5, 5), "uint8")
    s = var("s", (), "float32")
    y = call("nn.conv2d", call("qnn.dequantize", x, s, const(np.uint8(128))), dq(const(W), WS, np.zeros(6, np.int8), 0))
    assert "nn.conv2d" in ops(rewrite(IRModule.from_expr(q(y, YS, np.uint8(100)))))
    y = call("nn.conv2d", dq(x, XS, np.uint8(128)), dq(const(W), WS, np.zeros(6, np.int8), 0))
    shared = call("add", q(y, YS, np.uint8(100)), q(y, YS, np.uint8(100)))  # y has two uses
    assert ops(rewrite(IRModule.from_expr(shared))).count("nn.conv2d") == 1


def test_moves_and_max_pooling_of_equal_parameters_stay_integer():
    x = var("x", (1, 4, 6, 6), "int8")
    pooled = q(call("nn.max_pool2d", dq(x, XS, np.int8(3)), pool_size=(2, 2), strides=(2, 2)), XS, np.int8(3))
    mod = IRModule.from_expr(q(call("reshape", dq(pooled, XS, np.int8(3)), newshape=(1, -1)), XS, np.int8(3)))
    new = rewrite(mod)
    assert ops(new) == ["nn.max_pool2d", "reshape"]
    xv = np.random.default_rng(2).integers(-128, 128, (1, 4, 6, 6)).astype(np.int8)
    np.testing.assert_array_equal(run(new, [xv]), run(mod, [xv]))
    other = IRModule.from_expr(q(call("reshape", dq(x, XS, np.int8(3)), newshape=(1, -1)), F32(0.1), np.int8(3)))
    assert "qnn.dequantize" in ops(rewrite(other))  # another scale: a real requantization, kept


def test_fixed_mode_and_fixed_point_requantize_agree():
    mod = conv_chain("relu")
    fixed = rewrite(mod, "fixed")
    later = PassContext().run(FixedPointRequantize(), rewrite(mod))
    for m in (fixed, later):
        (rq,) = [n for n in post_order(m["main"]) if isinstance(n, Call) and n.op.name == "qnn.requantize"]
        assert rq.attrs["mode"] == "fixed" and len(rq.args) == 3
    np.testing.assert_array_equal(run(fixed, [_x()]), run(later, [_x()]))
