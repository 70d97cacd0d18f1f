"""The integer elementwise operators (plait/op/qnn_elem.py) against ONNX Runtime's com.microsoft
kernels, exactly: ``qnn.lookup`` with tables built by ``lookup_table`` (QLinearSigmoid,
QLinearLeakyRelu, every one of the 256 input values) and ``qnn.softmax`` (QLinearSoftmax), both
the numpy references and the compiled C. ``OP_CASES`` also runs through the TE compute coverage
test and the ONNX export round trip (tests/op/declared_cases.py)."""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import onnxruntime as ort
import pytest
from onnx import TensorProto
from ort_util import run_plait_op

from plait.errors import TypeInferenceError
from plait.op import get_op
from plait.op.qnn_elem import (
    add_attrs, leaky_relu32, lookup_table, mlas_logistic, mul_attrs, softmax_multiplier, softmax_table,
)
from plait.testing.ort_reference import reference_session

F32 = np.float32
TP = {"int8": TensorProto.INT8, "uint8": TensorProto.UINT8}


def _q(shape, dtype, seed=0, lo=None):
    a, b = (-128, 128) if dtype == "int8" else (0, 256)
    return np.random.default_rng(seed).integers(a if lo is None else lo, b, shape).astype(dtype)


SIG = lookup_table(mlas_logistic, "int8", 0.05, 3, 1 / 256, -128, "int8")
LEAKY = lookup_table(leaky_relu32(0.1), "uint8", 0.02, 120, 0.015, 100, "uint8")

OP_CASES = {
    "qnn.lookup": [
        ([_q((2, 3, 5), "int8"), SIG], {}),
        ([_q((7,), "uint8", 1), LEAKY], {}),
    ],
    "qnn.softmax": [
        ([_q((3, 10), "uint8", 2), softmax_table(0.13, 10)], {"axis": -1, "multiplier": 256.0}),
        ([_q((2, 5, 3), "int8", 3), softmax_table(0.05, 5)], {"axis": 1, "multiplier": 255.0, "zero_point": -128}),
    ],
    "qnn.add": [
        ([_q((2, 3, 4), "int8", 4), _q((2, 3, 4), "int8", 5)], add_attrs(0.031, 3, 0.017, -7, 0.041, 5)),
        ([_q((1,), "uint8", 6), _q((3, 5), "uint8", 7)], add_attrs(0.12, 100, 0.05, 12, 0.1, 90)),
        ([_q((3, 5), "uint8", 8), _q((), "uint8", 9)], add_attrs(0.12, 100, 0.05, 12, 0.1, 90)),
    ],
    "qnn.mul": [
        ([_q((2, 3, 4), "int8", 4), _q((2, 3, 4), "int8", 5)], mul_attrs(0.031, 3, 0.017, -7, 0.041, 5)),
        ([_q((3, 5), "uint8", 8), _q((1, 1), "uint8", 9)], mul_attrs(0.12, 100, 0.05, 12, 0.1, 90)),
    ],
}


def _ms_session(op: str, dtype: str, shape: list, params: tuple, **attrs) -> ort.InferenceSession:
    """A one-node model of the com.microsoft operator ``op`` with constant scales and zero points."""
    xs, xz, ys, yz = params
    inits = [oh.make_tensor("xs", TensorProto.FLOAT, [], [xs]), oh.make_tensor("xz", TP[dtype], [], [xz]),
             oh.make_tensor("ys", TensorProto.FLOAT, [], [ys]), oh.make_tensor("yz", TP[dtype], [], [yz])]
    node = oh.make_node(op, ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft", **attrs)
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", TP[dtype], shape)],
                      [oh.make_tensor_value_info("y", TP[dtype], shape)], inits)
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("com.microsoft", 1)])
    return reference_session(m)


TABLE_CASES = [("int8", (0.05, 3, 1 / 256, -128)), ("int8", (0.13, -5, 0.004, 7)), ("uint8", (0.0123, 0, 0.002, 10)),
               ("uint8", (0.21, 131, 1 / 255, 0))]


@pytest.mark.parametrize("dtype,params", TABLE_CASES)
@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
def test_lookup_tables_are_onnx_runtimes(op, dtype, params):
    """Every input value: the table is what ONNX Runtime computes, and the C gather returns it."""
    attrs = {"alpha": 0.1} if op == "QLinearLeakyRelu" else {}
    fn = leaky_relu32(0.1) if attrs else mlas_logistic
    lo = -128 if dtype == "int8" else 0
    x = np.arange(lo, lo + 256).astype(dtype)
    (want,) = _ms_session(op, dtype, [256], params, **attrs).run(None, {"x": x})
    table = lookup_table(fn, dtype, params[0], params[1], params[2], params[3], dtype)
    np.testing.assert_array_equal(table, want)
    np.testing.assert_array_equal(run_plait_op("qnn.lookup", [x[::-1].copy(), table]), want[::-1])


@pytest.mark.parametrize("dtype,zp,y_scale", [("uint8", 0, 1 / 256), ("int8", -128, 1 / 256), ("uint8", 3, 1 / 255)])
@pytest.mark.parametrize("d,x_scale", [(10, 0.13), (16, 0.05), (33, 0.011)])
def test_softmax_is_onnx_runtimes(dtype, zp, y_scale, d, x_scale):
    """QLinearSoftmax exactly, rows of random values and rows crowded near the top (ties at 1.0)."""
    x = _q((64, d), dtype, seed=d)
    x[:8] = _q((8, d), dtype, seed=d + 1, lo=100 if dtype == "int8" else 230)
    sess = _ms_session("QLinearSoftmax", dtype, [64, d], (x_scale, 0, y_scale, zp), axis=-1, opset=13)
    (want,) = sess.run(None, {"x": x})
    args = [x, softmax_table(x_scale, d)]
    attrs = {"axis": -1, "multiplier": softmax_multiplier(y_scale), "zero_point": zp}
    op = get_op("qnn.softmax")
    np.testing.assert_array_equal(op.ref(args, op.make_attrs(attrs)), want)
    np.testing.assert_array_equal(run_plait_op("qnn.softmax", args, **attrs), want)


def test_softmax_along_an_inner_axis_is_onnx_runtimes():
    x = _q((2, 7, 4), "int8", seed=9)
    sess = _ms_session("QLinearSoftmax", "int8", [2, 7, 4], (0.08, 0, 1 / 256, -128), axis=1, opset=13)
    (want,) = sess.run(None, {"x": x})
    got = run_plait_op("qnn.softmax", [x, softmax_table(0.08, 7)], axis=1, multiplier=256.0, zero_point=-128)
    np.testing.assert_array_equal(got, want)


def _binary_session(op: str, dtype: str, shapes: tuple, params: tuple) -> ort.InferenceSession:
    sa, za, sb, zb, sc, zc = params
    names = ["sa", "za", "sb", "zb", "sc", "zc"]
    inits = [oh.make_tensor(n, TensorProto.FLOAT if n[0] == "s" else TP[dtype], [], [v]) for n, v in zip(names, params)]
    node = oh.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["c"], domain="com.microsoft")
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("a", TP[dtype], shapes[0]),
                                    oh.make_tensor_value_info("b", TP[dtype], shapes[1])],
                      [oh.make_tensor_value_info("c", TP[dtype], None)], inits)
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("com.microsoft", 1)])
    return reference_session(m)


BINARY_PARAMS = [("int8", (0.031, 3, 0.017, -7, 0.041, 5)), ("uint8", (0.1234, 100, 0.0567, 12, 0.0999, 90)),
                 ("int8", (0.5, -100, 0.003, 20, 0.02, -3))]


@pytest.mark.parametrize("dtype,params", BINARY_PARAMS)
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_add_and_mul_are_onnx_runtimes_on_every_pair(op, dtype, params):
    """All 65536 pairs of values, and a one-element operand on either side."""
    lo = -128 if dtype == "int8" else 0
    a = np.repeat(np.arange(lo, lo + 256), 256).astype(dtype)
    b = np.tile(np.arange(lo, lo + 256), 256).astype(dtype)
    name, attrs = ("qnn.add", add_attrs(*params)) if op == "QLinearAdd" else ("qnn.mul", mul_attrs(*params))
    cases = [(a, b), (a[:1].copy(), b[:300].copy()), (a[:300].copy(), b[7:8].copy())]
    for x, y in cases:
        (want,) = _binary_session(op, dtype, (list(x.shape), list(y.shape)), params).run(None, {"a": x, "b": y})
        got = run_plait_op(name, [x, y], **attrs)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert int((got != want).sum()) == 0, (x.shape, y.shape)
        fn = get_op(name)
        np.testing.assert_array_equal(fn.ref([x, y], fn.make_attrs(attrs)), want)


@pytest.mark.parametrize("op,inputs,attrs,message", [
    ("qnn.add", [np.zeros((2, 3), np.int8), np.zeros((3, 2), np.int8)], {},
     "add: expected equal shapes or a one-element operand, got Tensor[(2, 3), int8] and Tensor[(3, 2), int8]"),
    ("qnn.mul", [np.zeros(3, np.int8), np.zeros(3, np.uint8)], {},
     "mul: b: expected int8 (a's dtype), got Tensor[(3,), uint8]"),
    ("qnn.mul", [np.zeros(3, np.uint8), np.zeros(3, np.uint8)], {"zero_point": 300},
     "mul: zero_point: expected a value in [0, 255] (uint8), got 300"),
    ("qnn.lookup", [np.zeros(3, F32), SIG], {}, "lookup: input: expected int8 or uint8, got Tensor[(3,), float32]"),
    ("qnn.lookup", [np.zeros(3, np.int8), SIG[:10]], {},
     "lookup: table: expected a [256] int8 or uint8 table, got Tensor[(10,), int8]"),
    ("qnn.softmax", [np.zeros((2, 3), np.uint8), softmax_table(0.1, 3)], {"zero_point": -1},
     "softmax: zero_point: expected a value in [0, 255] (uint8), got -1"),
    ("qnn.softmax", [np.zeros((2, 3), np.int8), SIG], {},
     "softmax: table: expected a [256] float32 table, got Tensor[(256,), int8]"),
])
def test_bad_arguments_are_refused_with_the_reason(op, inputs, attrs, message):
    with pytest.raises(TypeInferenceError, match=message.replace("[", r"\[").replace("(", r"\(")
                       .replace(")", r"\)").replace("]", r"\]")):
        run_plait_op(op, inputs, **attrs)


# ---- qnn.add's two forms: fused multiply-adds (fmaf) and the double form ----------------------------

FMA_HOST, NO_FMA_HOST = "c -simd-bits=512 -clock-mhz=2445", "c -simd-bits=128 -clock-mhz=2445"


def _add_c(target: str, shapes: tuple, dtype: str, attrs: dict) -> tuple[str, object]:
    """The C of one ``qnn.add`` call lowered for ``target``, and the call's built module."""
    import plait
    from plait.backends.c.backend import codegen_c
    from plait.executor import GraphModule
    from plait.lowering.lower import lower_function
    from plait.relay import IRModule, call, infer_type, var

    mod = infer_type(IRModule.from_expr(call("qnn.add", var("a", shapes[0], dtype), var("b", shapes[1], dtype),
                                             **attrs)))
    src = codegen_c([lower_function(mod["main"], "qadd", target)], target).source
    return src, GraphModule(plait.build(mod, target=target))


@pytest.mark.parametrize("dtype,params", BINARY_PARAMS)
def test_add_fused_and_double_forms_give_onnx_runtimes_numbers(dtype, params):
    """A target with FMA gets ``fmaf`` (float32 vectors), one without it the double form; every pair
    of values (and a one-element operand on either side) gives ONNX Runtime's result in both."""
    from plait.op.qnn_elem import add_needs_fma

    attrs = add_attrs(*params)
    assert not add_needs_fma(attrs, dtype) and not add_needs_fma(attrs, dtype, "a") and not add_needs_fma(attrs, dtype, "b")
    lo = -128 if dtype == "int8" else 0
    a = np.repeat(np.arange(lo, lo + 256), 256).astype(dtype)
    b = np.tile(np.arange(lo, lo + 256), 256).astype(dtype)
    for x, y in [(a, b), (a[:1].copy(), b[:256].copy()), (a[:256].copy(), b[7:8].copy())]:
        (want,) = _binary_session("QLinearAdd", dtype, (list(x.shape), list(y.shape)), params).run(None, {"a": x, "b": y})
        for target, fused in ((FMA_HOST, True), (NO_FMA_HOST, False)):
            src, gm = _add_c(target, (x.shape, y.shape), dtype, attrs)
            assert ("fmaf(" in src) is fused, target
            assert x.size != y.size or ("(double)" in src) is not fused, target  # float32 only (elementwise)
            np.testing.assert_array_equal(gm(a=x, b=y)[0], want)


def test_add_takes_fused_multiply_adds_where_the_double_form_differs():
    """Constants whose double form rounds twice on some pairs: the C fuses on every target (a libm
    ``fmaf`` where the machine has no FMA), so both targets give the reference's numbers, which
    are the single roundings."""
    from plait.op.qnn_elem import _add_values, add_needs_fma

    # 3 * a_multiplier = 2.5 + 2**-23, the float32 midpoint between 2.5 and 2.5 + 2**-22: a tiny
    # positive b * b_multiplier + offset makes it round up (to 3); rounded to double first, it is
    # lost and the tie goes to even (2.5, to 2)
    attrs = {"a_multiplier": 6990507 * 2.0 ** -23, "b_multiplier": 2.0 ** -60, "offset": 2.0 ** -62}
    assert add_needs_fma(attrs, "int8")
    a = np.repeat(np.arange(-128, 128), 256).astype(np.int8)
    b = np.tile(np.arange(-128, 128), 256).astype(np.int8)
    fused, double = (_add_values(a, b, attrs, "", f) for f in (True, False))
    assert (fused != double).sum() > 0
    fn = get_op("qnn.add")
    want = fn.ref([a, b], fn.make_attrs(attrs))
    for target in (FMA_HOST, NO_FMA_HOST):
        src, gm = _add_c(target, (a.shape, b.shape), "int8", attrs)
        assert "fmaf(" in src, target
        np.testing.assert_array_equal(gm(a=a, b=b)[0], want)


@pytest.mark.parametrize("target,fma", [(FMA_HOST, True), ("c -simd-bits=256", True), (NO_FMA_HOST, False),
                                        ("c -mcpu=cortex-m4f", True), ("c -mcpu=cortex-m7f", True),
                                        ("c -mcpu=cortex-m0", False), ("c -mcpu=cortex-m3", False)])
def test_the_fma_fact_follows_the_target(target, fma):
    """Lowering tells the computes whether the target fuses float32 multiply-adds: FPv4-SP and later
    Cortex-M FPUs, hosts with 256-bit vectors or wider; not soft-float cores or SSE2-level hosts."""
    from plait.lowering.function import _facts
    from plait.target import Target

    assert _facts(Target(target))["fma"] is fma
