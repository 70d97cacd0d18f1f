"""int8 convolutions channels-last: ``qnn.conv2d(data_layout="NHWC")`` (plait/op/qnn_nn.py, its forms in
plait/op/_qnn_nhwc.py, the C kernel ``plait_q8_conv``) and the ChannelsLast pass
(plait/relay/passes/channels_last.py) the c kind legalizes with on hosts with AVX512-VNNI or AVX2 (the llvm kind
when every convolution of a function has a form). The pass's graphs (no transposes between consecutive
convolutions) and compiled results equal to the NCHW reference bit for bit."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import plait
from plait.executor import GraphModule
from plait.ir.transform import PassContext
from plait.op._compute import compute_facts
from plait.op._qnn_nhwc import conv_kernel_body, folds, nhwc_form
from plait.op import get_op
from plait.relay import IRModule, call, const, infer_type, run, var
from plait.relay.expr import Call, Function
from plait.relay.passes import ChannelsLast
from plait.relay.visitor import post_order
from plait.target import Target
from plait.testing.ort_reference import reference_session

from .kernel_lib import X86_GCC, kernel_library

HOST = "c -simd-bits=512 -clock-mhz=2445 -int8-dot=vnni"  # (the forms on any machine: without VNNI the plain body)
FACTS = (("compiled_as_c", True), ("narrow_macs", 2), ("simd_bits", 512), ("vnni", True))
AVX2 = "c -march=x86-64-v3 -simd-bits=256 -int8-dot=none"  # (an AMD Zen 2/3: AVX2, no VNNI; runs here too)


def _ints(shape, dtype, seed, lo=None, hi=None):
    lo_, hi_ = (-128, 128) if dtype == "int8" else (0, 256)
    return np.random.default_rng(seed).integers(lo_ if lo is None else lo, hi_ if hi is None else hi,
                                                shape).astype(dtype)


def _ops(fn: Function) -> list[Call]:
    return [e for e in post_order(fn.body) if isinstance(e, Call) and hasattr(e.op, "name")]


def _block(x, c_in, c_out, seed, dtype="int8", zx=-128, per_channel=True, **attrs):
    """conv -> bias add -> requantize (int8 out, zero point -128 for int8, 0 for uint8)."""
    groups = attrs.get("groups", 1)
    k = attrs.pop("k", (1, 1))
    w = const(_ints((c_out, c_in // groups, *k), "int8", seed, -60, 60))
    acc = call("qnn.conv2d", x, w, input_zero_point=zx, **attrs)
    bias = const(_ints((c_out, 1, 1), "int32", seed + 1, -2000, 2000))
    scale = np.random.default_rng(seed + 2).uniform(0.002, 0.02, c_out if per_channel else ()).astype(np.float32)
    return call("qnn.requantize", call("add", acc, bias), const(scale), zero_point=-128 if dtype == "int8" else 0,
                out_dtype=dtype, axis=1)


def _chain():
    """ds_cnn-like: depthwise 3x3 -> pointwise -> residual qnn.add -> global average pool sum."""
    x = var("x", (1, 32, 9, 5), "int8")
    dw = _block(x, 32, 32, 1, groups=32, k=(3, 3), padding=(1, 1, 1, 1))
    pw = _block(dw, 32, 32, 5)
    res = call("qnn.add", pw, dw, a_multiplier=0.75, b_multiplier=0.5, offset=3.0)
    pool = call("sum", call("cast", res, dtype="int32"), axis=(2, 3), keepdims=True)
    out = call("qnn.requantize", call("add", pool, const(np.int32(5760))), const(np.float32(0.02)),
               zero_point=-128, axis=1)
    return Function((x,), call("flatten", out, axis=1))


def test_the_pass_leaves_no_transpose_between_consecutive_convolutions():
    mod = infer_type(IRModule.from_expr(_chain()))
    new = PassContext(opt_level=2).run(ChannelsLast(FACTS), mod)["main"]
    ops = _ops(new)
    convs = [c for c in ops if c.op.name == "qnn.conv2d"]
    assert [c.attrs["data_layout"] for c in convs] == ["NHWC", "NHWC"]
    moves = [c for c in ops if c.op.name in ("transpose", "reshape")]
    # one transpose into NHWC at the input; the pooled [1, 1, 1, 32] back to NCHW as a reshape (one pixel)
    assert [(c.op.name, tuple(c.attrs.get("axes") or c.attrs.get("newshape"))) for c in moves] == \
        [("transpose", (0, 2, 3, 1)), ("reshape", (1, 32, 1, 1))]
    assert all(c.attrs["axis"] == 3 for c in ops if c.op.name == "qnn.requantize" and
               c.args[1].checked_type.shape == (32,))
    assert [tuple(c.attrs["axis"]) for c in ops if c.op.name == "sum"] == [(1, 2)]
    adds = [c for c in ops if c.op.name == "add" and c.args[1].checked_type.shape == (1, 1, 1, 32)]
    assert len(adds) == 2  # the biases [32, 1, 1] transposed at compile time
    x = _ints((1, 32, 9, 5), "int8", 3)
    np.testing.assert_array_equal(run(IRModule({"main": new}), [x]), run(mod, [x]))


def test_a_residual_nchw_operand_shares_the_transpose_of_the_convolution_input():
    x = var("x", (1, 16, 6, 6), "int8")
    conv = _block(x, 16, 16, 3, k=(3, 3), padding=(1, 1, 1, 1))
    res = call("qnn.add", conv, x, a_multiplier=0.5, b_multiplier=0.75, offset=-2.0)
    mod = infer_type(IRModule.from_expr(Function((x,), res)))
    new = PassContext(opt_level=2).run(ChannelsLast(FACTS), mod)["main"]
    moves = [c for c in _ops(new) if c.op.name == "transpose"]
    assert [tuple(c.attrs["axes"]) for c in moves] == [(0, 2, 3, 1), (0, 3, 1, 2)]  # in once, out once
    assert all(c.meta["fusion"] == "relayout" for c in moves)  # (groups of their own in FuseOps)
    (add,) = [c for c in _ops(new) if c.op.name == "qnn.add"]
    assert add.args[1] is moves[0]
    xv = _ints((1, 16, 6, 6), "int8", 9)
    np.testing.assert_array_equal(run(IRModule({"main": new}), [xv]), run(mod, [xv]))
    np.testing.assert_array_equal(GraphModule(plait.build(mod, target=HOST))(x=xv)[0], run(mod, [xv]))


def test_the_pass_keeps_convolutions_without_a_form_nchw():
    x = var("x", (1, 12, 6, 6), "int8")
    grouped = _block(x, 12, 12, 1, groups=3, k=(3, 3), padding=(1, 1, 1, 1))  # (3 groups: no form)
    mod = infer_type(IRModule.from_expr(Function((x,), grouped)))
    assert PassContext(opt_level=2).run(ChannelsLast(FACTS), mod) is mod
    mixed = infer_type(IRModule.from_expr(Function((x,), _block(grouped, 12, 16, 7, k=(3, 3)))))
    new = PassContext(opt_level=2).run(ChannelsLast(FACTS), mixed)["main"]
    assert [c.attrs["data_layout"] for c in _ops(new) if c.op.name == "qnn.conv2d"] == ["NCHW", "NHWC"]
    assert PassContext(opt_level=2).run(ChannelsLast(FACTS, every_conv=True), mixed) is mixed


def test_legalize_runs_the_pass_on_vnni_and_avx2_hosts_and_llvm_not_on_cortex_m():
    names = lambda t: [type(p).__name__ for p in Target(t).kind.backend.legalize(Target(t))]  # noqa: E731
    assert names(HOST) == ["ChannelsLast"]
    assert names(AVX2) == ["ChannelsLast"]  # (the kernel's AVX2 body)
    assert names("c -simd-bits=512 -int8-dot=none") == ["ChannelsLast"]
    assert names("c -march=x86-64 -simd-bits=128 -int8-dot=none") == []  # (SSE2 only: the plain body)
    assert names("c -mcpu=cortex-m7f") == []
    assert names("c -mcpu=cortex-m0") == ["FixedPointRequantize"]
    assert names("llvm") == ["ChannelsLast"]


def test_nhwc_forms():
    attrs = get_op("qnn.conv2d").make_attrs
    with compute_facts(**dict(FACTS)):
        assert nhwc_form((1, 25, 5, 64), (64, 64, 1, 1), "int8", attrs({})) == "outer"
        assert nhwc_form((1, 48, 48, 3), (16, 3, 3, 3), "int8", attrs(dict(strides=(2, 2)))) == "outer"
        assert nhwc_form((1, 49, 10, 1), (64, 1, 10, 4), "int8", attrs({})) == "outer"  # (rows folded: 4 channels)
        assert folds(1, 4) and folds(2, 2) and not folds(1, 2) and not folds(3, 3)
        assert nhwc_form((1, 49, 10, 1), (64, 1, 10, 2), "int8", attrs({})) != "outer"  # (2 taps a row)
        assert nhwc_form((1, 25, 5, 64), (64, 1, 3, 3), "int8", attrs(dict(groups=64))) == "depthwise"
        assert nhwc_form((1, 25, 5, 64), (64, 64, 1, 1), "int8", attrs(dict(kernel_zero_point=2))) == "packed"
        assert nhwc_form((1, 6, 6, 12), (12, 4, 3, 3), "int8", attrs(dict(groups=3))) is None
    for avx2 in (dict(simd_bits=256, vnni=False), dict(simd_bits=512, vnni=False)):
        with compute_facts(**{**dict(FACTS), **avx2}):
            assert conv_kernel_body() == "avx2"
            assert nhwc_form((1, 25, 5, 64), (64, 64, 1, 1), "int8", attrs({})) == "outer"
            assert nhwc_form((1, 48, 48, 3), (16, 3, 3, 3), "int8", attrs(dict(strides=(2, 2)))) == "outer"
            assert nhwc_form((1, 25, 5, 64), (64, 1, 3, 3), "int8", attrs(dict(groups=64))) == "depthwise"
    with compute_facts(**dict(FACTS)):
        assert conv_kernel_body() == "vnni"
    with compute_facts(**{**dict(FACTS), "simd_bits": 128, "vnni": False}):
        assert conv_kernel_body() is None
        assert nhwc_form((1, 25, 5, 64), (64, 64, 1, 1), "int8", attrs({})) == "packed"
    with compute_facts(compiled_as_c=False, simd_bits=512, vnni=False):  # (LLVM)
        assert conv_kernel_body() is None
        assert nhwc_form((1, 25, 5, 64), (64, 64, 1, 1), "int8", attrs({})) == "packed"
        assert nhwc_form((1, 48, 48, 8), (48, 8, 1, 1), "int8", attrs({})) == "channels"


def test_nhwc_relation_and_its_errors():
    x, w = var("x", (1, 9, 7, 5), "int8"), var("w", (16, 5, 3, 3), "int8")
    fn = infer_type(IRModule.from_expr(Function((x, w), call("qnn.conv2d", x, w, data_layout="NHWC",
                                                              strides=(2, 2)))))["main"]
    assert fn.body.checked_type.shape == (1, 4, 3, 16)
    with pytest.raises(plait.PlaitError, match="conv2d: data_layout: expected NCHW or NHWC, got 'NWHC'"):
        infer_type(IRModule.from_expr(call("qnn.conv2d", x, w, data_layout="NWHC")))
    with pytest.raises(plait.PlaitError, match=r"conv2d: data: expected a 4-D NHWC tensor, got Tensor\[\(9, 7, 5\), int8\]"):
        infer_type(IRModule.from_expr(call("qnn.conv2d", var("y", (9, 7, 5), "int8"), w, data_layout="NHWC")))


# (data NCHW shape, dtype, output channels, zero point, attrs): 1x1, 3x3, strides, padding, depthwise,
# C not a multiple of 4, O not a multiple of 16, uint8 data, a kernel zero point, dilation
CONVS = [
    ((1, 64, 25, 5), "int8", 64, -128, {}),
    ((2, 5, 9, 7), "uint8", 20, 7, dict(k=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))),
    ((1, 16, 8, 8), "uint8", 48, 0, {}),
    ((1, 5, 8, 11), "int8", 17, 3, dict(k=(2, 3), strides=(1, 2), padding=(0, 1, 1, 0), dilation=(2, 1))),
    ((1, 24, 12, 12), "int8", 24, -5, dict(k=(3, 3), groups=24, strides=(2, 2), padding=(1, 1, 1, 1))),
    ((1, 1, 49, 10), "int8", 64, -7, dict(k=(10, 4), strides=(2, 2), padding=(4, 1, 5, 2))),
    ((1, 16, 10, 10), "int8", 32, 9, dict(k=(3, 3), padding=(1, 1, 1, 1), kernel_zero_point=3)),
    ((1, 3, 20, 20), "int8", 8, -3, dict(k=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))),
    ((1, 64, 9, 7), "int8", 64, -128, dict(k=(3, 3), groups=64, strides=(2, 2), padding=(1, 1, 1, 1),
                                          kernel_zero_point=1)),  # (taps unrolled in the channel loop)
    # window rows folded into the channels (folds): dilated along the rows, 2 channels
    ((2, 1, 9, 11), "uint8", 20, 3, dict(k=(3, 3), strides=(1, 2), padding=(1, 0, 1, 2), dilation=(1, 2))),
    ((1, 2, 8, 7), "int8", 17, 0, dict(k=(2, 2))),
]


def _conv_model(k, per_channel=True):
    xs, dtype, o, zx, attrs = CONVS[k]
    attrs = dict(attrs)
    kzp = attrs.pop("kernel_zero_point", 0)
    kk = attrs.pop("k", (1, 1))
    x = var("x", xs, dtype)
    groups = attrs.get("groups", 1)
    w = const(_ints((o, xs[1] // groups, *kk), "int8", 40 + k))
    acc = call("qnn.conv2d", x, w, input_zero_point=zx, kernel_zero_point=kzp, **attrs)
    bias = const(_ints((o, 1, 1), "int32", k, -3000, 3000))
    n = int(np.prod(w.data.shape[1:]))
    scale = (np.random.default_rng(k).uniform(0.5, 2.0, o if per_channel else ()) / (n * 40)).astype(np.float32)
    out = call("qnn.requantize", call("add", acc, bias), const(scale), zero_point=-3, axis=1)
    return IRModule.from_expr(Function((x,), out)), _ints(xs, dtype, k)


@pytest.mark.parametrize("k", range(len(CONVS)))
def test_converted_convolutions_equal_the_nchw_reference_bit_for_bit(k):
    mod, x = _conv_model(k, per_channel=k % 2 == 0)
    want = run(mod, [x])
    assert len(np.unique(want)) > 10
    for target in (HOST, AVX2, "llvm"):
        np.testing.assert_array_equal(GraphModule(plait.build(mod, target=target))(x=x)[0], want, err_msg=target)


@pytest.mark.parametrize("k", [0, 3, 4])
def test_nhwc_convolutions_equal_the_reference_on_any_target(k):
    xs, dtype, o, zx, attrs = CONVS[k]
    attrs = dict(attrs)
    kk = attrs.pop("k", (1, 1))
    nhwc = (xs[0], xs[2], xs[3], xs[1])
    w = _ints((o, xs[1] // attrs.get("groups", 1), *kk), "int8", k)
    mod = IRModule.from_expr(call("qnn.conv2d", var("x", nhwc, dtype), var("w", w.shape, "int8"), input_zero_point=zx,
                                  data_layout="NHWC", **attrs))
    x = _ints(nhwc, dtype, k)
    nchw = call("qnn.conv2d", var("x", xs, dtype), var("w", w.shape, "int8"), input_zero_point=zx, **attrs)
    want = np.transpose(run(IRModule.from_expr(nchw), [np.ascontiguousarray(np.transpose(x, (0, 3, 1, 2))), w]),
                        (0, 2, 3, 1))
    np.testing.assert_array_equal(run(mod, [x, w]), want)
    for target in (HOST, AVX2, "llvm", "c -march=x86-64 -simd-bits=128 -int8-dot=none", "c -mcpu=cortex-m4f"):
        cfg = {"c.host_simulation": True, "c.cross_check": False} if "cortex" in target else {}
        got = GraphModule(plait.build(mod, target=target, config=cfg))(x=x, w=w)[0]
        np.testing.assert_array_equal(got, want, err_msg=target)


def test_a_residual_chain_with_pooling_equals_the_reference():
    mod = IRModule.from_expr(_chain())
    x = _ints((1, 32, 9, 5), "int8", 11)
    want = run(mod, [x])
    for target in (HOST, AVX2, "llvm"):
        np.testing.assert_array_equal(GraphModule(plait.build(mod, target=target))(x=x)[0], want, err_msg=target)


def test_nhwc_convolution_exports_to_onnx_between_transposes():
    pytest.importorskip("onnxruntime")
    from plait.frontend.onnx_export import to_onnx

    x, w = var("x", (1, 6, 5, 8), "uint8"), const(_ints((16, 8, 3, 3), "int8", 2))
    fn = infer_type(IRModule.from_expr(Function((x,), call("qnn.conv2d", x, w, input_zero_point=3, padding=(1, 1, 1, 1),
                                                          data_layout="NHWC"))))["main"]
    model = to_onnx(fn)
    assert [n.op_type for n in model.graph.node] == ["Transpose", "ConvInteger", "Transpose"]
    xv = _ints((1, 6, 5, 8), "uint8", 4)
    sess = reference_session(model)
    (got,) = sess.run(None, {sess.get_inputs()[0].name: xv})
    np.testing.assert_array_equal(got, run(IRModule({"main": fn}), [xv]))


@X86_GCC
@pytest.mark.parametrize("flags", [["-mavx512f", "-mavx512vnni"], ["-march=x86-64-v3"], ["-march=x86-64"]],
                         ids=["vnni", "avx2", "baseline"])
def test_conv_kernel_bodies_give_the_same_sums(tmp_path, flags):
    lib = kernel_library(tmp_path, "plait_q8_conv",
                         "void run(const void* x, const void* w, void* s, const int32_t* a) { plait_q8_conv(x, w, s, "
                         "a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12]); }\n", flags)
    lib.run.argtypes = [ctypes.c_void_p] * 4
    # (n, padded h, w, cp, o, kh, kw, stride h, w, dilation h, w)
    # (odd pixel counts: the one-pixel tails; o not a multiple of 16: masked stores; extreme values:
    # 255 x -128 pairs, which a saturating vpmaddubsw would clip)
    for n, hp, wp, cp, o, kh, kw, sh, sw, dh, dw in [(1, 25, 5, 64, 64, 1, 1, 1, 1, 1, 1),
                                                     (2, 11, 9, 8, 20, 3, 3, 2, 1, 1, 1),
                                                     (1, 9, 12, 4, 17, 2, 3, 1, 2, 2, 1),
                                                     (1, 7, 3, 12, 33, 3, 1, 2, 1, 1, 1),
                                                     (3, 5, 5, 4, 1, 1, 1, 1, 1, 1, 1)]:
        oh, ow = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
        x = _ints((n, hp, wp, cp), "uint8", hp)
        w = _ints((o, kh, kw, cp), "int8", o)
        x.reshape(-1)[::7], w.reshape(-1)[::5] = 255, -128
        nb = -(-o // 16)
        wz = np.zeros((nb * 16, kh * kw * cp), np.int8)
        wz[:o] = w.reshape(o, -1)
        packed = np.ascontiguousarray(wz.reshape(nb, 16, kh * kw * cp // 4, 4).transpose(0, 2, 1, 3))
        s = np.zeros((n, oh, ow, o), np.int32)
        args = np.array([n, hp, wp, cp, oh, ow, o, kh, kw, sh, sw, dh, dw], np.int32)
        lib.run(x.ctypes.data, packed.ctypes.data, s.ctypes.data, args.ctypes.data)
        want = np.zeros((n, oh, ow, o), np.int64)
        for ry in range(kh):
            for rx in range(kw):
                xs = x[:, ry * dh: ry * dh + (oh - 1) * sh + 1: sh, rx * dw: rx * dw + (ow - 1) * sw + 1: sw, :]
                want += np.einsum("nyxc,oc->nyxo", xs.astype(np.int64), w[:, ry, rx, :].astype(np.int64))
        np.testing.assert_array_equal(s, want.astype(np.int32))


def test_the_transpose_back_to_nchw_is_copied_in_tiles():
    """The pass's transpose of an NHWC int8 value back to NCHW (a group of its own): its loads run along
    the channels, which the schedule moves just outside the pixels and tiles with them (unrolled 8 x 4
    tiles that gcc transposes in registers; resnet_block's 56 x 56 x 64: 111 -> 34 us)."""
    from plait.backends.c.backend import codegen_c
    from plait.lowering.lower import lower_function

    x = var("x", (1, 8, 8, 64), "int8")
    fn = infer_type(IRModule.from_expr(Function((x,), call("transpose", x, axes=(0, 3, 1, 2)))))["main"]
    src = codegen_c([lower_function(fn, "back", HOST)], HOST).source
    assert "#pragma GCC unroll 8" in src and "#pragma GCC unroll 4" in src, src
    xv = _ints((1, 8, 8, 64), "int8", 1)
    got = GraphModule(plait.build(IRModule({"main": fn}), target=HOST))(x=xv)[0]
    np.testing.assert_array_equal(got, np.transpose(xv, (0, 3, 1, 2)))
