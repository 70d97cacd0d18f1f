"""Single-operator TFLite models written with plait's TFLiteWriter: the float32 elementwise operators, the
reductions and normalizations (MEAN, SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD, LOG_SOFTMAX,
L2_NORMALIZATION) and the matrix operators (BATCH_MATMUL, TRANSPOSE_CONV), PRELU and GELU. Float32 within
1e-5 * max|ref| + 1e-6 of LiteRT's reference kernels; the quantized forms plait reads (REDUCE_MAX/MIN,
MEAN, SUM, BATCH_MATMUL, PRELU, TRANSPOSE_CONV, MAXIMUM/MINIMUM) equal to TensorFlow Lite Micro; the
compiled C and the numpy interpreter both; what plait does not read is refused naming the operator."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.errors import FrontendError
from plait.frontend.tflite import from_tflite
from plait.frontend.tflite_write import TFLiteWriter
from plait.relay.interpreter import run as interpret

tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
lit = pytest.importorskip("ai_edge_litert.interpreter")

F32 = "float32"


def litert(buf: bytes, xs: list[np.ndarray]) -> np.ndarray:
    """LiteRT's reference kernels (its default ones for an operator they lack, ELU)."""
    try:
        li = lit.Interpreter(model_content=buf, experimental_op_resolver_type=lit.OpResolverType.BUILTIN_REF)
    except ValueError:
        li = lit.Interpreter(model_content=buf)
    li.allocate_tensors()
    for d, x in zip(li.get_input_details(), xs):
        li.set_tensor(d["index"], x)
    li.invoke()
    return li.get_tensor(li.get_output_details()[0]["index"])


def tflm(buf: bytes, xs: list[np.ndarray]) -> np.ndarray:
    it = tflm_runtime.Interpreter.from_bytes(buf)
    for k, x in enumerate(xs):
        it.set_input(x, k)
    it.invoke()
    return it.get_output(0)


def check(buf: bytes, xs: list[np.ndarray], exact: bool = False) -> None:
    want = tflm(buf, xs) if exact else litert(buf, xs)
    mod = from_tflite(buf)
    (got,) = plait.executor.GraphModule(plait.build(mod, "c"))(*xs)
    interp = interpret(mod, list(xs))
    interp = np.asarray(interp[0] if isinstance(interp, (list, tuple)) else interp)
    assert got.dtype == want.dtype and got.shape == want.shape
    if exact:
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(interp, want)
    else:
        tol = 1e-5 * float(np.abs(want).max()) + 1e-6
        assert float(np.abs(got - want).max()) <= tol
        assert float(np.abs(interp - want).max()) <= tol


def one_op(op: str, shapes: list[tuple], out_shape: tuple, consts: list[np.ndarray] = (), dtype: str = F32,
           quant=None, **options) -> bytes:
    w = TFLiteWriter()
    ins = [w.tensor(f"x{k}", s, dtype, quant=quant) for k, s in enumerate(shapes)]
    cs = [w.const(f"c{k}", c) for k, c in enumerate(consts)]
    y = w.tensor("y", out_shape, dtype, quant=quant)
    w.op(op, [*ins, *cs], [y], **options)
    return w.finish(ins, [y])


rng = np.random.default_rng(0)


def r(*shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


REDUCE_CASES = [  # (shape, axes, keep_dims)
    ((2, 5, 6, 3), [1, 2], True), ((2, 5, 6, 3), [1, 2], False), ((4, 7), [-1], False),
    ((3, 4, 5), [0, 2, -1], True), ((2, 3, 4), [], False),
]


def reduced(shape: tuple, axes: list[int], keep: bool) -> tuple:
    ax = {a % len(shape) for a in axes}
    return tuple((1 if k in ax else d) for k, d in enumerate(shape) if keep or k not in ax)


@pytest.mark.parametrize("shape, axes, keep", REDUCE_CASES)
@pytest.mark.parametrize("op", ["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PROD"])
def test_float_reductions(op, shape, axes, keep):
    buf = one_op(op, [shape], reduced(shape, axes, keep), [np.array(axes, np.int32)], KeepDims=keep)
    x = r(*shape) if op != "REDUCE_PROD" else np.exp(r(*shape) * 0.2).astype(np.float32)
    check(buf, [x])


@pytest.mark.parametrize("dtype", ["int8"])
@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
def test_quantized_max_min_equal_tflite_micro(op, dtype):
    shape, axes = (1, 5, 6, 4), [1, 2]
    buf = one_op(op, [shape], reduced(shape, axes, True), [np.array(axes, np.int32)], dtype=dtype,
                 quant=(0.05, -3), KeepDims=True)
    check(buf, [rng.integers(-128, 128, shape).astype(np.int8)], exact=True)


QMEAN_QUANTS = [((0.05, -3), (0.04, 5)), ((0.02, 10), (0.02, 10)), ((0.1, 0), (0.03, -100)), ((0.004, -128), (0.5, 0))]


@pytest.mark.parametrize("qin, qout", QMEAN_QUANTS, ids=[f"q{k}" for k in range(len(QMEAN_QUANTS))])
@pytest.mark.parametrize("shape, axes, keep", REDUCE_CASES[:4] + [((1, 3, 3, 4), [1, 2], True)])
@pytest.mark.parametrize("op", ["MEAN", "SUM"])
def test_int8_mean_and_sum_equal_tflite_micro(op, shape, axes, keep, qin, qout):
    w = TFLiteWriter()
    x = w.tensor("x", shape, "int8", quant=qin)
    c = w.const("axes", np.array(axes, np.int32))
    y = w.tensor("y", reduced(shape, axes, keep), "int8", quant=qout)
    w.op(op, [x, c], [y], KeepDims=keep)
    check(w.finish([x], [y]), [rng.integers(-128, 128, shape).astype(np.int8)], exact=True)


def test_int16_mean_equals_tflite_micro():
    shape, axes = (1, 6, 5, 3), [1, 2]
    w = TFLiteWriter()
    x = w.tensor("x", shape, "int16", quant=(0.001, 0))
    c = w.const("axes", np.array(axes, np.int32))
    y = w.tensor("y", (1, 1, 1, 3), "int16", quant=(0.0007, 0))
    w.op("MEAN", [x, c], [y], KeepDims=True)
    check(w.finish([x], [y]), [rng.integers(-32768, 32768, shape).astype(np.int16)], exact=True)


@pytest.mark.parametrize("qin, qout", [((0.05, 128), (0.04, 120)), ((0.1, 10), (0.02, 200)), ((0.3, 77), (0.1, 130))])
@pytest.mark.parametrize("shape, axes, keep", [((1, 5, 6, 3), [1, 2], True), ((2, 7, 4), [-1], False),
                                               ((3, 9), [0, 1], True)])
@pytest.mark.parametrize("op", ["MEAN", "SUM"])
def test_uint8_mean_and_sum_equal_litert(op, shape, axes, keep, qin, qout):
    """uint8 (TensorFlow Lite Micro has no uint8 MEAN): LiteRT's reference kernels bit for bit, its
    default ones within one step."""
    w = TFLiteWriter()
    x = w.tensor("x", shape, "uint8", quant=qin)
    c = w.const("axes", np.array(axes, np.int32))
    y = w.tensor("y", reduced(shape, axes, keep), "uint8", quant=qout)
    w.op(op, [x, c], [y], KeepDims=keep)
    buf = w.finish([x], [y])
    mod = from_tflite(buf)
    graph = plait.executor.GraphModule(plait.build(mod, "c"))
    for seed in range(4):
        v = np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)
        (got,) = graph(v)
        np.testing.assert_array_equal(got, litert(buf, [v]))
        np.testing.assert_array_equal(np.asarray(interpret(mod, [v])), got)
        li = lit.Interpreter(model_content=buf)
        li.allocate_tensors()
        li.set_tensor(li.get_input_details()[0]["index"], v)
        li.invoke()
        default = li.get_tensor(li.get_output_details()[0]["index"])
        assert int(np.abs(got.astype(int) - default.astype(int)).max()) <= 1


def test_int8_reduce_prod_is_refused_naming_the_operator():
    buf = one_op("REDUCE_PROD", [(1, 4, 4, 2)], (1, 1, 1, 2), [np.array([1, 2], np.int32)], dtype="int8",
                 quant=(0.05, 3), KeepDims=True)
    with pytest.raises(FrontendError, match=r"operator 0 \(REDUCE_PROD\): REDUCE_PROD of INT8 is not supported yet"):
        from_tflite(buf)


@pytest.mark.parametrize("shape", [(3, 10), (2, 4, 5, 7)])
@pytest.mark.parametrize("op", ["LOG_SOFTMAX", "L2_NORMALIZATION"])
def test_float_normalizations(op, shape):
    x = r(*shape) * 3
    if op == "L2_NORMALIZATION":
        x[0] = 0.0  # a row of zeros: divided by the epsilon
    check(one_op(op, [shape], shape), [x])


@pytest.mark.parametrize("shape, qin", [((2, 5, 16), (0.05, 3)), ((1, 64), (0.1, -128)), ((3, 1), (0.02, 0)),
                                        ((4, 300), (0.5, 10)), ((2, 3, 4, 8), (0.01, -5))])
def test_int8_l2_normalization_equals_tflite_micro(shape, qin):
    """Rows of random values, rows at the zero point (a sum of 0), rows one step from it (sums of 0..n:
    the small-value case and the smallest normalized ones) and rows at the extremes (the largest sums)."""
    w = TFLiteWriter()
    x = w.tensor("x", shape, "int8", quant=qin)
    y = w.tensor("y", shape, "int8", quant=(1 / 128, 0))
    w.op("L2_NORMALIZATION", [x], [y])
    buf = w.finish([x], [y])
    z = qin[1]
    g = np.random.default_rng(sum(shape))
    xs = [g.integers(-128, 128, shape), np.full(shape, z), z + g.integers(0, 2, shape),
          np.where(g.integers(0, 2, shape) == 1, 127, -128)]
    for v in xs:
        check(buf, [np.clip(v, -128, 127).astype(np.int8)], exact=True)


@pytest.mark.parametrize("shape, qin", [((2, 5, 16), (0.05, 3)), ((1, 64), (0.1, -128)), ((3, 1), (0.02, 0)),
                                        ((4, 256), (0.004, 10)), ((2, 3, 4, 8), (1.7, -5)), ((5, 30), (9.0, 0)),
                                        ((3, 200), (0.3, 127)), ((6, 12), (0.0005, -7))])
def test_int8_log_softmax_equals_tflite_micro(shape, qin):
    """Rows of random values, equal rows (the log of the row length), rows of every difference 0..255, rows
    of extremes (a maximum 255 above the rest, beyond diff_min for the large scales) and rows whose
    values crowd near the maximum."""
    w = TFLiteWriter()
    x = w.tensor("x", shape, "int8", quant=qin)
    y = w.tensor("y", shape, "int8", quant=(16 / 256, 127))
    w.op("LOG_SOFTMAX", [x], [y])
    buf = w.finish([x], [y])
    g = np.random.default_rng(sum(shape))
    n = shape[-1]
    ramp, peak = np.arange(n) % 256 - 128, np.where(np.arange(n) == n // 2, 127, -128)
    xs = [g.integers(-128, 128, shape), np.full(shape, qin[1]), np.broadcast_to(ramp, shape),
          np.where(g.integers(0, 2, shape) == 1, 127, -128), np.broadcast_to(peak, shape), 127 - g.integers(0, 20, shape)]
    for v in xs:
        check(buf, [np.clip(v, -128, 127).astype(np.int8)], exact=True)


@pytest.mark.parametrize("quant", [(0.1, 127), (16 / 256, 0)])
def test_int8_log_softmax_needs_tflites_output_quantization(quant):
    w = TFLiteWriter()
    x = w.tensor("x", (2, 4), "int8", quant=(0.1, 0))
    y = w.tensor("y", (2, 4), "int8", quant=quant)
    w.op("LOG_SOFTMAX", [x], [y])
    with pytest.raises(FrontendError, match=rf"operator 0 \(LOG_SOFTMAX\): an int8 LOG_SOFTMAX writes steps of "
                                            rf"16/256 with zero point 127; the output has scale {quant[0]:g} and "
                                            rf"zero point {quant[1]}"):
        from_tflite(w.finish([x], [y]))


def test_int8_l2_normalization_needs_tflites_output_quantization():
    buf = one_op("L2_NORMALIZATION", [(2, 4)], (2, 4), dtype="int8", quant=(0.1, 0))
    with pytest.raises(FrontendError, match=r"operator 0 \(L2_NORMALIZATION\): an int8 L2_NORMALIZATION writes "
                                            r"steps of 1/128 with zero point 0; the output has scale 0.1 and zero "
                                            r"point 0"):
        from_tflite(buf)


@pytest.mark.parametrize("a, b, adj_x, adj_y", [
    ((3, 4), (4, 5), False, False), ((2, 3, 4), (2, 4, 6), False, False), ((2, 1, 3, 4), (5, 6, 4), False, True),
    ((2, 4, 3), (2, 4, 5), True, False), ((1, 2, 5, 4), (2, 3, 5), True, True),
])
def test_float_batch_matmul(a, b, adj_x, adj_y):
    ea = a[:-2] + ((a[-1], a[-2]) if adj_x else a[-2:])
    eb = b[:-2] + ((b[-1], b[-2]) if adj_y else b[-2:])
    out = np.matmul(np.zeros(ea, np.float32), np.zeros(eb, np.float32)).shape
    buf = one_op("BATCH_MATMUL", [a, b], out, AdjX=adj_x, AdjY=adj_y)
    check(buf, [r(*a), r(*b)])


TCONV_CASES = [  # (input, weights [O, KH, KW, I], output shape, padding, stride)
    ((1, 4, 5, 3), (6, 3, 3, 3), (1, 8, 10, 6), 0, 2), ((1, 4, 5, 3), (6, 3, 3, 3), (1, 9, 11, 6), 1, 2),
    ((2, 3, 3, 2), (4, 2, 2, 2), (2, 3, 3, 4), 0, 1), ((1, 5, 4, 2), (3, 4, 3, 2), (1, 15, 12, 3), 0, 3),
    ((1, 3, 3, 1), (2, 3, 3, 1), (1, 7, 7, 2), 1, 2),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("x, wshape, out, padding, stride", TCONV_CASES)
def test_float_transpose_conv(x, wshape, out, padding, stride, bias):
    w = TFLiteWriter()
    shape = w.const("shape", np.array(out, np.int32))
    k = w.const("k", r(*wshape))
    xi = w.tensor("x", x, F32)
    ins = [shape, k, xi] + ([w.const("b", r(wshape[0]))] if bias else [])
    y = w.tensor("y", out, F32)
    w.op("TRANSPOSE_CONV", ins, [y], Padding=padding, StrideW=stride, StrideH=stride)
    check(w.finish([xi], [y]), [r(*x)])


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("x, wshape, out, padding, stride", TCONV_CASES)
def test_int8_transpose_conv_equals_tflite_micro(x, wshape, out, padding, stride, per_channel):
    o = wshape[0]
    w = TFLiteWriter()
    shape = w.const("shape", np.array(out, np.int32))
    scales = rng.uniform(0.002, 0.02, o if per_channel else 1)
    k = w.const("k", rng.integers(-127, 128, wshape).astype(np.int8),
                quant=(scales, np.zeros(scales.size, np.int64), 0))
    xi = w.tensor("x", x, "int8", quant=(0.05, -7))
    b = w.const("b", rng.integers(-3000, 3000, o).astype(np.int32),
                quant=((0.05 * scales * np.ones(o)).astype(np.float32), np.zeros(o, np.int64), 0))
    y = w.tensor("y", out, "int8", quant=(0.07, 4))
    w.op("TRANSPOSE_CONV", [shape, k, xi, b], [y], Padding=padding, StrideW=stride, StrideH=stride)
    check(w.finish([xi], [y]), [rng.integers(-128, 128, x).astype(np.int8)], exact=True)


@pytest.mark.parametrize("alpha_shape", [(3,), (1, 1, 3), (5, 6, 3), ()])
def test_float_prelu(alpha_shape):
    shape = (2, 5, 6, 3)
    w = TFLiteWriter()
    x = w.tensor("x", shape, F32)
    a = w.const("alpha", r(*alpha_shape) * 0.3 if alpha_shape else np.array(0.2, np.float32))
    y = w.tensor("y", shape, F32)
    w.op("PRELU", [x, a], [y])
    check(w.finish([x], [y]), [r(*shape)])


@pytest.mark.parametrize("alpha_shape", [(3,), (1, 1, 3), ()])
@pytest.mark.parametrize("qa", [(0.01, 0), (0.004, -20)])
def test_int8_prelu_equals_tflite_micro(alpha_shape, qa):
    shape = (2, 5, 6, 3)
    w = TFLiteWriter()
    x = w.tensor("x", shape, "int8", quant=(0.05, -3))
    av = rng.integers(-128, 128, alpha_shape).astype(np.int8) if alpha_shape else np.array(40, np.int8)
    a = w.const("alpha", av, quant=qa)
    y = w.tensor("y", shape, "int8", quant=(0.04, 10))
    w.op("PRELU", [x, a], [y])
    check(w.finish([x], [y]), [rng.integers(-128, 128, shape).astype(np.int8)], exact=True)


@pytest.mark.parametrize("approximate", [False, True])
def test_float_gelu(approximate):
    check(one_op("GELU", [(3, 17)], (3, 17), Approximate=approximate), [r(3, 17) * 3])


@pytest.mark.parametrize("a, b, adj_x, adj_y", [((3, 4), (4, 5), False, False), ((2, 3, 8), (2, 5, 8), False, True),
                                                ((2, 1, 4, 3), (3, 4, 6), True, False)])
def test_int8_batch_matmul_equals_tflite_micro(a, b, adj_x, adj_y):
    ea = a[:-2] + ((a[-1], a[-2]) if adj_x else a[-2:])
    eb = b[:-2] + ((b[-1], b[-2]) if adj_y else b[-2:])
    out = np.matmul(np.zeros(ea), np.zeros(eb)).shape
    w = TFLiteWriter()
    x = w.tensor("x", a, "int8", quant=(0.05, -3))
    z = w.tensor("z", b, "int8", quant=(0.02, 0))
    y = w.tensor("y", out, "int8", quant=(0.3, 9))
    w.op("BATCH_MATMUL", [x, z], [y], AdjX=adj_x, AdjY=adj_y)
    xs = [rng.integers(-128, 128, s).astype(np.int8) for s in (a, b)]
    check(w.finish([x, z], [y]), xs, exact=True)


@pytest.mark.parametrize("op", ["FLOOR"])
def test_quantized_forms_are_refused_naming_the_operator(op):
    shapes = [(2, 4)]
    consts = []
    w = TFLiteWriter()
    ins = [w.tensor(f"x{k}", s, "int8", quant=(0.1, 0)) for k, s in enumerate(shapes)]
    cs = [w.const("alpha", c, quant=(0.1, 0)) for c in consts]
    y = w.tensor("y", (2, 4), "int8", quant=(0.1, 0))
    w.op(op, [*ins, *cs], [y])
    with pytest.raises(FrontendError, match=rf"operator 0 \({op}\): {op} of INT8 is not supported yet"):
        from_tflite(w.finish(ins, [y]))


@pytest.mark.parametrize("b_shape", [(2, 5, 6, 3), (3,), (1, 1, 6, 1)])
@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
def test_int8_maximum_minimum_equal_tflite_micro(op, b_shape):
    shape = (2, 5, 6, 3)
    w = TFLiteWriter()
    x = w.tensor("x", shape, "int8", quant=(0.05, -3))
    z = w.tensor("z", b_shape, "int8", quant=(0.05, -3))
    y = w.tensor("y", shape, "int8", quant=(0.05, -3))
    w.op(op, [x, z], [y])
    xs = [rng.integers(-128, 128, s).astype(np.int8) for s in (shape, b_shape)]
    check(w.finish([x, z], [y]), xs, exact=True)


FLOAT_UNARY = ["RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LOGISTIC", "TANH", "EXP", "SQRT", "RSQRT", "ABS", "NEG",
               "HARD_SWISH", "ELU", "LOG", "FLOOR", "LEAKY_RELU"]
POSITIVE = ("SQRT", "RSQRT", "LOG")


@pytest.mark.parametrize("op", FLOAT_UNARY)
def test_float_unary_operators(op):
    shape = (2, 5, 6, 3)
    x = r(*shape) * 4
    if op in POSITIVE:
        x = np.abs(x) + np.float32(0.05)
    options = {"Alpha": 0.2} if op == "LEAKY_RELU" else {}
    check(one_op(op, [shape], shape, **options), [x])


@pytest.mark.parametrize("b_shape", [(2, 5, 6, 3), (3,), (1, 6, 1)])
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE"])
def test_float_binary_operators(op, b_shape):
    shape = (2, 5, 6, 3)
    b = r(*b_shape)
    if op == "DIV":
        b = np.where(np.abs(b) < 0.3, np.float32(0.7), b).astype(np.float32)
    check(one_op(op, [shape, b_shape], shape), [r(*shape), b])


@pytest.mark.parametrize("q1, q2, qo", [((0.05, -3), (0.05, -3), (0.2, -128)), ((0.02, 10), (0.07, -50), (0.1, -100)),
                                        ((0.1, 0), (0.01, 3), (0.5, -128))])
@pytest.mark.parametrize("b_shape", [(2, 5, 6, 3), (3,)])
def test_int8_squared_difference_equals_tflite_micro(b_shape, q1, q2, qo):
    shape = (2, 5, 6, 3)
    w = TFLiteWriter()
    x = w.tensor("x", shape, "int8", quant=q1)
    z = w.tensor("z", b_shape, "int8", quant=q2)
    y = w.tensor("y", shape, "int8", quant=qo)
    w.op("SQUARED_DIFFERENCE", [x, z], [y])
    xs = [rng.integers(-128, 128, s).astype(np.int8) for s in (shape, b_shape)]
    check(w.finish([x, z], [y]), xs, exact=True)
