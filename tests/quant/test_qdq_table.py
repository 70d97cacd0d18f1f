"""Chains of float elementwise operators between a per-tensor DequantizeLinear and a QuantizeLinear
(ONNX Runtime runs them in float32: a GELU's Div -> Erf, a Tanh, an Exp) become one ``qnn.lookup``
table computed at compile time (QDQToInteger's ``_table``), so the int8 result is a function of the
int8 input alone, with no libm call at run time (libmvec's erff differs between its AVX2 and AVX-512
versions): every input value is checked against ONNX Runtime. On a vector host the lookup gathers
from the table widened to 32 bits (gcc has no vector byte gather)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto, numpy_helper

import plait
from plait.backends.c.backend import codegen_c
from plait.executor import GraphModule
from plait.frontend import from_onnx
from plait.ir.transform import PassContext
from plait.lowering.lower import lower_function
from plait.pipeline import import_stage
from plait.ir.attrs import Attrs
from plait.relay import Call, Function, IRModule, call, const, var
from plait.relay.infer import infer_type
from plait.relay.visitor import post_order
from plait.target import Target
from plait.testing.quantized import ort_session


def _t(name, v, dtype):
    return numpy_helper.from_array(np.array(v, dtype), name)


def chain_model(s1=0.0159132, z1=-1, s2=0.0075099636, z2=-1, u8=False, extra_use=False) -> onnx.ModelProto:
    """x [256] -> DQ -> Div(sqrt 2) -> Erf -> Q -> y, and x -> DQ -> Tanh -> Mul(3) -> Sub(1) -> Q -> z
    (``u8``: uint8 data and results; ``extra_use``: the Erf is an output too, so it stays float)."""
    dt, npdt = (TensorProto.UINT8, np.uint8) if u8 else (TensorProto.INT8, np.int8)
    inits = [_t("s1", s1, np.float32), _t("z1", z1 + (128 if u8 else 0), npdt), _t("s2", s2, np.float32),
             _t("z2", z2 + (128 if u8 else 0), npdt), _t("c", 1.4142135, np.float32), _t("three", 3.0, np.float32),
             _t("one", 1.0, np.float32), _t("s3", 0.025, np.float32), _t("z3", 3 + (128 if u8 else 0), npdt)]
    nodes = [oh.make_node("DequantizeLinear", ["x", "s1", "z1"], ["d"]), oh.make_node("Div", ["d", "c"], ["v"]),
             oh.make_node("Erf", ["v"], ["e"]), oh.make_node("QuantizeLinear", ["e", "s2", "z2"], ["y"]),
             oh.make_node("Tanh", ["d"], ["t"]), oh.make_node("Mul", ["three", "t"], ["m"]),
             oh.make_node("Sub", ["m", "one"], ["u"]), oh.make_node("QuantizeLinear", ["u", "s3", "z3"], ["z"])]
    outs = [oh.make_tensor_value_info("y", dt, [256]), oh.make_tensor_value_info("z", dt, [256])]
    if extra_use:
        outs.append(oh.make_tensor_value_info("e", TensorProto.FLOAT, [256]))
    g = oh.make_graph(nodes, "chain", [oh.make_tensor_value_info("x", dt, [256])], outs, inits)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


def _ops(model):
    mod = import_stage(from_onnx(model), PassContext()).mod
    return [n.op.name for n in post_order(mod["main"]) if isinstance(n, Call)]


@pytest.mark.parametrize("u8", [False, True])
@pytest.mark.parametrize("params", [(0.0159132, -1, 0.0075099636, -1), (0.031, 7, 0.0042, -9), (0.0047, -20, 0.013, 5)])
def test_float_chains_become_tables_equal_to_onnx_runtime_on_every_input(params, u8):
    model = chain_model(*params, u8=u8)
    ops = _ops(model)
    assert ops.count("qnn.lookup") == 2 and not {"erf", "tanh", "divide", "multiply", "subtract"} & set(ops), ops
    x = (np.arange(256) - (0 if u8 else 128)).astype(np.uint8 if u8 else np.int8)
    want = ort_session(model).run(None, {"x": x})
    got = GraphModule(plait.build(from_onnx(model), target="c"))(x=x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_a_chain_with_another_use_keeps_its_float_operators():
    ops = _ops(chain_model(extra_use=True))
    assert "erf" in ops and ops.count("qnn.lookup") == 1  # the Tanh chain still is a table


@pytest.mark.parametrize("simd,wide", [(512, True), (256, True), (128, False)])
def test_the_lookup_gathers_32_bit_entries_on_a_vector_host(simd, wide):
    target = Target(f"c -simd-bits={simd} -clock-mhz=2445")
    tab = const(np.arange(-128, 128).astype(np.int8)[::-1].copy())
    x, t = var("x", (64,), "int8"), var("t", (256,), "int8")
    fn = Function((x, t), call("qnn.lookup", x, t), None, Attrs({"Primitive": 1, "name": "look"}))
    src = codegen_c([lower_function(infer_type(IRModule.from_expr(fn))["main"], "look", target)], target).source
    assert ("T_qnn_lookup_wide" in src) == wide, src
    x = np.arange(-128, 128, 4).astype(np.int8)
    (out,) = GraphModule(plait.build(IRModule.from_expr(call("qnn.lookup", var("x", (64,), "int8"), tab)),
                                     target=str(target)))(x=x)
    np.testing.assert_array_equal(out, (-1 - x.astype(np.int64)).astype(np.int8))


def test_a_chain_of_requantizations_is_compiled_without_jump_threading():
    # two clamped float -> int8 conversions in one function: gcc's jump threading would make the
    # second clamp's paths control flow its vectorizer cannot if-convert (helpers.OPTIMIZE_MACRO)
    acc = var("acc", (64,), "int32")
    one = call("qnn.requantize", acc, const(np.array(0.02, np.float32)), zero_point=3)
    two = call("qnn.requantize", call("cast", one, dtype="int32"), const(np.array(0.7, np.float32)), zero_point=-5)
    target = Target("c -simd-bits=512 -clock-mhz=2445")
    for body, chain in ((one, False), (two, True)):
        fn = Function((acc,), body, None, Attrs({"Primitive": 1, "name": "rq"}))
        src = codegen_c([lower_function(infer_type(IRModule.from_expr(fn))["main"], "rq", target)], target).source
        assert ('PLAIT_C_OPTIMIZE("no-thread-jumps")\nint32_t rq(' in src) == chain, src
        assert ("#define PLAIT_C_OPTIMIZE(...) __attribute__((optimize(__VA_ARGS__)))" in src) == chain
    x = np.arange(-3200, 3200, 100).astype(np.int32)
    (out,) = GraphModule(plait.build(IRModule.from_expr(two), target=str(target)))(acc=x)
    q1 = np.clip(np.rint(x.astype(np.float32) * np.float32(0.02)) + 3, -128, 127)
    want = np.clip(np.rint(q1.astype(np.float32) * np.float32(0.7)) - 5, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(out, want)
