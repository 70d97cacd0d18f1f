"""Hybrid TFLite operators (float32 activations, int8 or legacy uint8 constant weights) against LiteRT's
default interpreter (the XNNPACK delegate runs CONV_2D and FULLY_CONNECTED, TFLite's kernels the
depthwise convolution and the uint8 forms: plait.frontend.tflite_ops_hybrid): single-operator models
written with TFLiteWriter and a DS-CNN-like chain of hybrid layers, each on 20 seeded inputs (standard
normal and uniform in [-50, 50]) within 1e-5 * max|LiteRT| + 1e-6; plait's numpy interpreter agrees."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.testing import tflite_reference as reference
from plait.errors import UnsupportedError
from plait.frontend.tflite import from_tflite
from plait.frontend.tflite_write import TFLiteWriter
from plait.relay.interpreter import run as interpret

lit = pytest.importorskip("ai_edge_litert.interpreter")

ACTS = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3, "TANH": 4}


def inputs(shape: tuple[int, ...], n: int = 20) -> list[np.ndarray]:
    """Half standard normal, half uniform in [-50, 50] (the range of kws's MFCC features)."""
    out = []
    for seed in range(n):
        r = np.random.default_rng(seed)
        v = r.standard_normal(shape) if seed % 2 == 0 else r.uniform(-50, 50, shape)
        out.append(v.astype(np.float32))
    return out


def litert(buf: bytes, xs: list[np.ndarray]) -> list[np.ndarray]:
    return reference.litert(buf, xs, reference_kernels=False)  # the default interpreter, XNNPACK's delegate


def check(buf: bytes, xs: list[np.ndarray]) -> None:
    want = litert(buf, xs)
    mod = from_tflite(buf)
    graph = plait.executor.GraphModule(plait.build(mod, "c"))
    for k, (x, w) in enumerate(zip(xs, want)):
        (got,) = graph(x)
        assert got.dtype == w.dtype and got.shape == w.shape
        tol = 1e-5 * float(np.abs(w).max()) + 1e-6
        assert float(np.abs(got - w).max()) <= tol, f"input {k}"
        if k < 2:
            interp = interpret(mod, [x])
            interp = interp[0] if isinstance(interp, (list, tuple)) else interp
            assert float(np.abs(np.asarray(interp) - w).max()) <= tol, f"input {k} (interpreter)"


def int8_weights(rng, shape: tuple[int, ...], axis: int, per_channel: bool):
    """Symmetric int8 weights as the TFLite converter writes them ([-127, 127], zero points 0)."""
    n = shape[axis] if per_channel else 1
    scales = rng.uniform(0.002, 0.02, n).astype(np.float32)
    return rng.integers(-127, 128, shape).astype(np.int8), (scales, np.zeros(n, np.int64), axis if per_channel else 0)


def uint8_weights(rng, shape: tuple[int, ...]):
    """Legacy uint8 weights (LiteRT reads the bytes as int8). Byte 128 (-128) is left out: LiteRT's x86
    dot product (maddubs of |x| and sign(w, x)) gets -128 times a negative input wrong."""
    v = rng.integers(0, 255, shape)
    return np.where(v >= 128, v + 1, v).astype(np.uint8), (np.array([0.01], np.float32), np.array([128]), 0)


def conv_model(op: str, x_shape, kv, kq, o: int, act: str = "RELU", padding: int = 0, stride=(1, 1), dil: int = 1,
               mult: int = 1, bias: bool = True, seed: int = 0) -> bytes:
    n, h, w, _ = x_shape
    kh, kw = kv.shape[1], kv.shape[2]
    eh, ew = (kh - 1) * dil + 1, (kw - 1) * dil + 1
    oh, ow = ((-(-h // stride[0]), -(-w // stride[1])) if padding == 0
              else ((h - eh) // stride[0] + 1, (w - ew) // stride[1] + 1))
    wr = TFLiteWriter()
    x = wr.tensor("x", x_shape)
    k = wr.const("k", kv, quant=kq)
    ins = [x, k]
    if bias:
        ins.append(wr.const("b", np.random.default_rng(seed).standard_normal(o).astype(np.float32)))
    y = wr.tensor("y", (n, oh, ow, o))
    opts = dict(Padding=padding, StrideH=stride[0], StrideW=stride[1], DilationHFactor=dil, DilationWFactor=dil,
                FusedActivationFunction=ACTS[act])
    if op == "DEPTHWISE_CONV_2D":
        opts["DepthMultiplier"] = mult
    wr.op(op, ins, [y], **opts)
    return wr.finish([x], [y])


CONV_CASES = {  # name: (input NHWC, O, KHxKW, groups, padding, stride, dilation, activation, per channel)
    "3x3 same stride 2 per tensor (quantized per image)": ((1, 9, 8, 3), 6, (3, 3), 1, 0, (2, 2), 1, "RELU", False),
    "3x3 valid per channel, batch 2": ((2, 7, 6, 4), 5, (3, 3), 1, 1, (1, 1), 1, "RELU6", True),
    "10x4 stride 2, one input channel (kws's first)": ((1, 20, 10, 1), 8, (10, 4), 1, 0, (2, 2), 1, "RELU", False),
    "1x1 stride 1 (XNNPACK's fully connected: per pixel)": ((2, 5, 4, 8), 6, (1, 1), 1, 0, (1, 1), 1, "NONE", True),
    "1x1 stride 1 with C + O = 2 (per image)": ((1, 5, 4, 1), 1, (1, 1), 1, 0, (1, 1), 1, "RELU", False),
    "1x1 stride 2 (per image)": ((1, 6, 6, 4), 4, (1, 1), 1, 0, (2, 2), 1, "RELU", False),
    "grouped": ((1, 6, 5, 6), 4, (2, 2), 2, 0, (1, 1), 1, "RELU_N1_TO_1", True),
    "dilated": ((1, 9, 9, 2), 3, (3, 3), 1, 0, (1, 1), 2, "NONE", False),
}


@pytest.mark.parametrize("name", list(CONV_CASES))
def test_hybrid_conv2d(name):
    x_shape, o, (kh, kw), groups, padding, stride, dil, act, per_channel = CONV_CASES[name]
    rng = np.random.default_rng(len(name))
    kv, kq = int8_weights(rng, (o, kh, kw, x_shape[3] // groups), 0, per_channel)
    check(conv_model("CONV_2D", x_shape, kv, kq, o, act, padding, stride, dil), inputs(x_shape))


@pytest.mark.parametrize("x_shape, mult, padding, stride, act", [
    ((1, 9, 8, 8), 1, 0, (1, 1), "RELU"),     # 8 channels: TFLite's 4-wide store loop covers all
    ((2, 7, 6, 3), 2, 1, (2, 1), "RELU6"),    # 6 channels: the last 2 are scaled in the other order
    ((1, 5, 5, 5), 1, 0, (2, 2), "NONE"),
])
def test_hybrid_depthwise(x_shape, mult, padding, stride, act):
    rng = np.random.default_rng(x_shape[3] * 10 + mult)
    o = x_shape[3] * mult
    kv, kq = int8_weights(rng, (1, 3, 3, o), 3, True)
    check(conv_model("DEPTHWISE_CONV_2D", x_shape, kv, kq, o, act, padding, stride, mult=mult), inputs(x_shape))


def fc_model(x_shape, kv, kq, out_shape, act: str = "NONE", keep: bool = False, asym: bool = False,
             bias: bool = True) -> bytes:
    wr = TFLiteWriter()
    x = wr.tensor("x", x_shape)
    ins = [x, wr.const("k", kv, quant=kq)]
    if bias:
        ins.append(wr.const("b", np.random.default_rng(1).standard_normal(kv.shape[0]).astype(np.float32)))
    y = wr.tensor("y", out_shape)
    wr.op("FULLY_CONNECTED", ins, [y], FusedActivationFunction=ACTS[act], KeepNumDims=keep,
          AsymmetricQuantizeInputs=asym)
    return wr.finish([x], [y])


@pytest.mark.parametrize("x_shape, out_shape, per_channel, act, keep, asym, bias", [
    ((2, 24), (2, 7), False, "NONE", False, False, True),        # quantized per row
    ((1, 40), (1, 12), True, "RELU", False, False, True),
    ((3, 2, 12), (3, 2, 7), False, "RELU6", True, False, True),
    ((2, 16), (2, 5), True, "NONE", False, True, True),          # XNNPACK ignores AsymmetricQuantizeInputs
    ((2, 16), (2, 5), False, "NONE", False, False, False),       # no bias
])
def test_hybrid_fully_connected(x_shape, out_shape, per_channel, act, keep, asym, bias):
    rng = np.random.default_rng(x_shape[-1])
    kv, kq = int8_weights(rng, (out_shape[-1], x_shape[-1]), 0, per_channel)
    check(fc_model(x_shape, kv, kq, out_shape, act, keep, asym, bias), inputs(x_shape))


def test_legacy_uint8_weights():
    """TFLite's own hybrid kernels: the weights' bytes read as int8, the input quantized symmetrically
    (or, for FULLY_CONNECTED with AsymmetricQuantizeInputs, asymmetrically)."""
    rng = np.random.default_rng(8)
    kv, kq = uint8_weights(rng, (5, 3, 3, 3))
    check(conv_model("CONV_2D", (1, 7, 6, 3), kv, kq, 5, "RELU", 0, (1, 1)), inputs((1, 7, 6, 3)))
    kv, kq = uint8_weights(rng, (6, 20))
    for asym in (False, True):
        check(fc_model((2, 20), kv, kq, (2, 6), "NONE", asym=asym), inputs((2, 20)))


def ds_cnn(x_shape=(1, 20, 10, 1), c: int = 16, classes: int = 5, float_depthwise: bool = False) -> bytes:
    """DS-CNN as in MLPerf Tiny's kws, smaller, with every convolution hybrid (a dynamic-range quantized
    depthwise filter is int8 per channel; with ``float_depthwise`` it stays float, as the converter
    leaves a filter of fewer than 1,024 weights): conv 10x4 / 2 -> (depthwise 3x3 -> conv 1x1) x 2 ->
    global average pool -> float FULLY_CONNECTED -> SOFTMAX."""
    rng = np.random.default_rng(7)
    wr = TFLiteWriter()
    x = wr.tensor("x", x_shape)
    h, w = -(-x_shape[1] // 2), -(-x_shape[2] // 2)

    def layer(op, src, kv, kq, stride):
        y = wr.tensor(f"t{len(wr.tensors)}", (1, h, w, c))
        b = wr.const(f"b{len(wr.tensors)}", rng.standard_normal(c).astype(np.float32) * 0.1)
        opts = dict(Padding=0, StrideH=stride, StrideW=stride, FusedActivationFunction=1)
        if op == "DEPTHWISE_CONV_2D":
            opts["DepthMultiplier"] = 1
        wr.op(op, [src, wr.const(f"k{len(wr.tensors)}", kv, quant=kq), b], [y], **opts)
        return y

    def depthwise(src):
        if float_depthwise:
            return layer("DEPTHWISE_CONV_2D", src, rng.standard_normal((1, 3, 3, c)).astype(np.float32) * 0.3, None, 1)
        return layer("DEPTHWISE_CONV_2D", src, *int8_weights(rng, (1, 3, 3, c), 3, True), 1)

    t = layer("CONV_2D", x, *int8_weights(rng, (c, 10, 4, x_shape[3]), 0, False), 2)
    for _ in range(2):
        t = depthwise(t)
        t = layer("CONV_2D", t, *int8_weights(rng, (c, 1, 1, c), 0, False), 1)
    p = wr.tensor("pool", (1, 1, 1, c))
    wr.op("AVERAGE_POOL_2D", [t], [p], Padding=1, StrideH=h, StrideW=w, FilterHeight=h, FilterWidth=w)
    f = wr.tensor("flat", (1, c))
    wr.op("RESHAPE", [p, wr.const("shape", np.array([1, c], np.int32))], [f], NewShape=[1, c])
    logits = wr.tensor("logits", (1, classes))
    wr.op("FULLY_CONNECTED", [f, wr.const("fc", rng.standard_normal((classes, c)).astype(np.float32)),
                              wr.const("fcb", rng.standard_normal(classes).astype(np.float32))], [logits])
    y = wr.tensor("y", (1, classes))
    wr.op("SOFTMAX", [logits], [y], Beta=1.0)
    return wr.finish([x], [y])


def test_ds_cnn_chain_of_hybrid_layers():
    """Each hybrid layer computes LiteRT's numbers exactly, so the next one quantizes the same values (a
    float layer computed in another order between two hybrid ones would not: a value one ulp away from
    a rounding boundary of the run-time quantization changes a quantized input by one)."""
    check(ds_cnn(), inputs((1, 20, 10, 1)))


def test_ds_cnn_with_float_depthwise_layers():
    """kws_ref_model_float32's shape: float depthwise layers between hybrid ones. Each is computed in
    XNNPACK's order, so the hybrid layer after it quantizes LiteRT's very values (in plait's usual order
    the model's outputs were 1.26e-5 * max|ref| away)."""
    check(ds_cnn(float_depthwise=True), inputs((1, 20, 10, 1)))


FLOAT_LAYER_CASES = {  # name: (operator, input NHWC, O, KHxKW, groups / depth multiplier, padding, stride, dilation,
    # activation)
    "depthwise 3x3 same, 20 channels (a 16-wide block and a masked rest)":
        ("DEPTHWISE_CONV_2D", (1, 9, 7, 20), 20, (3, 3), 1, 0, (1, 1), 1, "RELU"),
    "depthwise 3x3 valid stride 2, batch 2": ("DEPTHWISE_CONV_2D", (2, 9, 8, 5), 5, (3, 3), 1, 1, (2, 2), 1, "NONE"),
    "depthwise, multiplier 3 (a grouped igemm: taps row by row)":
        ("DEPTHWISE_CONV_2D", (1, 6, 5, 2), 6, (3, 3), 3, 0, (1, 1), 1, "RELU6"),
    "depthwise 5x3 dilated 2": ("DEPTHWISE_CONV_2D", (1, 11, 9, 4), 4, (5, 3), 1, 0, (1, 2), 2, "RELU_N1_TO_1"),
    "depthwise 7x7 (more taps than its dwconv kernels take)":
        ("DEPTHWISE_CONV_2D", (1, 9, 9, 3), 3, (7, 7), 1, 0, (1, 1), 1, "NONE"),
    "conv 3x3x3 stride 2 (MobileNet's first, left float)": ("CONV_2D", (1, 12, 11, 3), 16, (3, 3), 1, 0, (2, 2), 1,
                                                              "RELU6"),
    "conv 1x1": ("CONV_2D", (1, 5, 4, 8), 6, (1, 1), 1, 0, (1, 1), 1, "NONE"),
    "conv grouped 2": ("CONV_2D", (1, 6, 5, 6), 4, (2, 2), 2, 1, (1, 1), 1, "RELU"),
    "fully connected, 3 rows": ("FULLY_CONNECTED", (3, 37), 5, None, 1, 0, None, 1, "NONE"),
}


def float_layer_model(name: str, hybrid: bool) -> bytes:
    """One float layer (output 0) and, with ``hybrid``, a hybrid FULLY_CONNECTED of the flattened input
    beside it (output 1), which makes the model hybrid."""
    op, x_shape, o, ks, g, padding, stride, dil, act = FLOAT_LAYER_CASES[name]
    rng = np.random.default_rng(3)
    wr = TFLiteWriter()
    x = wr.tensor("x", x_shape)
    b = wr.const("b", rng.standard_normal(o).astype(np.float32))
    if op == "FULLY_CONNECTED":
        y = wr.tensor("y", (x_shape[0], o))
        wr.op(op, [x, wr.const("k", rng.standard_normal((o, x_shape[1])).astype(np.float32)), b], [y],
              FusedActivationFunction=ACTS[act])
    else:
        n, h, w, c = x_shape
        eh, ew = (ks[0] - 1) * dil + 1, (ks[1] - 1) * dil + 1
        oh, ow = ((-(-h // stride[0]), -(-w // stride[1])) if padding == 0
                  else ((h - eh) // stride[0] + 1, (w - ew) // stride[1] + 1))
        k_shape = (1, *ks, o) if op == "DEPTHWISE_CONV_2D" else (o, *ks, c // g)
        opts = dict(DepthMultiplier=g) if op == "DEPTHWISE_CONV_2D" else {}
        y = wr.tensor("y", (n, oh, ow, o))
        wr.op(op, [x, wr.const("k", rng.standard_normal(k_shape).astype(np.float32)), b], [y], Padding=padding,
              StrideH=stride[0], StrideW=stride[1], DilationHFactor=dil, DilationWFactor=dil,
              FusedActivationFunction=ACTS[act], **opts)
    if not hybrid:
        return wr.finish([x], [y])
    size = int(np.prod(x_shape[1:]))
    flat = wr.tensor("flat", (x_shape[0], size))
    wr.op("RESHAPE", [x, wr.const("shape", np.array([x_shape[0], size], np.int32))], [flat],
          NewShape=[x_shape[0], size])
    kv, kq = int8_weights(rng, (4, size), 0, False)
    z = wr.tensor("z", (x_shape[0], 4))
    wr.op("FULLY_CONNECTED", [flat, wr.const("fc", kv, quant=kq), wr.const("fcb", np.ones(4, np.float32))], [z])
    return wr.finish([x], [y, z])


@pytest.mark.parametrize("name", FLOAT_LAYER_CASES)
def test_float_layer_of_a_hybrid_model_is_xnnpacks_bit_for_bit(name):
    """A float layer of a hybrid model equals LiteRT's default interpreter bit for bit (XNNPACK's FMA
    chain from the bias: a depthwise layer's taps column by column, any other's row by row, channels in
    order); the same layer in a float model keeps plait's usual order, which differs from it in the last
    bit somewhere (so the test tells the orders apart)."""
    xs = inputs(FLOAT_LAYER_CASES[name][1], 6)
    buf = float_layer_model(name, hybrid=True)
    want = litert(buf, xs)
    graph = plait.executor.GraphModule(plait.build(from_tflite(buf), "c"))
    for k, (x, w) in enumerate(zip(xs, want)):
        assert np.array_equal(graph(x)[0], w), f"input {k}"
    alone = plait.executor.GraphModule(plait.build(from_tflite(float_layer_model(name, hybrid=False)), "c"))
    assert sum(int(np.sum(alone(x)[0] != w)) for x, w in zip(xs, want)) > 0


def _refused(buf: bytes) -> str:
    with pytest.raises(UnsupportedError) as exc:
        from_tflite(buf)
    return str(exc.value)


def test_cases_litert_runs_otherwise_are_refused():
    rng = np.random.default_rng(0)
    kv = rng.integers(-127, 128, (1, 3, 3, 3)).astype(np.int8)
    one_scale = (np.array([0.01], np.float32), np.zeros(1, np.int64), 0)
    assert _refused(conv_model("DEPTHWISE_CONV_2D", (1, 5, 5, 3), kv, one_scale, 3)) == (
        "model uses 1 unsupported operator(s):\n  operator 0 (DEPTHWISE_CONV_2D): a hybrid DEPTHWISE_CONV_2D needs one "
        "filter scale per output channel (3), got 1 (LiteRT reads the missing ones past the end of the list)")
    kv, kq = int8_weights(rng, (4, 3, 3, 3), 0, False)
    assert _refused(conv_model("CONV_2D", (1, 5, 5, 3), kv, kq, 4, act="TANH")) == (
        "model uses 1 unsupported operator(s):\n  operator 0 (CONV_2D): a hybrid CONV_2D with fused activation TANH "
        "is not supported (LiteRT runs it with another kernel than the clamping activations)")
    assert _refused(conv_model("CONV_2D", (1, 5, 5, 3), kv, kq, 4, bias=False)) == (
        "model uses 1 unsupported operator(s):\n  operator 0 (CONV_2D): a hybrid CONV_2D without a bias is not "
        "supported (LiteRT runs it with another kernel)")
    kv, kq = uint8_weights(rng, (1, 3, 3, 3))
    assert _refused(conv_model("DEPTHWISE_CONV_2D", (1, 5, 5, 3), kv, kq, 3)) == (
        "model uses 1 unsupported operator(s):\n  operator 0 (DEPTHWISE_CONV_2D): a hybrid DEPTHWISE_CONV_2D with "
        "uint8 weights is not supported (LiteRT refuses it)")
