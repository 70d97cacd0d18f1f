"""int8 convolutions on x86-64 hosts without VNNI (AVX2: AMD Zen 2/3, target ``c -march=x86-64-v3
-simd-bits=256 -int8-dot=none``): the ChannelsLast pass and the channels-last ``"outer"`` form run
there too, the kernel ``plait_q8_conv`` taking its AVX2 body (int16 ``vpmaddwd`` pairs; the body's own
sums against numpy: tests/quant/test_channels_last.py). AVX2 code runs on an AVX-512 machine, so the
whole quantized models are built for that target and compared, bit for bit, with plait's numpy
reference and with the build for an AVX-512 VNNI host (integer results never depend on the
instruction set). The depthwise sums there: the kernel plait_dw16 (pairs of taps by vpmaddwd)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import plait
from plait.backends.c.kernels import KERNELS
from plait.executor import GraphModule
from plait.relay import run
from plait.target.host import cpu_has
from plait.testing.quantized import calibration_feeds, int8_steps, output_scales, quantized_model

from .kernel_lib import X86_GCC, kernel_library

AVX2 = "c -march=x86-64-v3 -simd-bits=256 -int8-dot=none"
VNNI = "c -simd-bits=512 -int8-dot=vnni"

pytestmark = pytest.mark.skipif(not cpu_has("avx2"), reason="needs a CPU with AVX2 to run x86-64-v3 code")


def test_the_avx2_body_is_exact():
    """No saturating instruction: uint8 x int8 pairs widened to int16, summed by vpmaddwd."""
    src = KERNELS["plait_q8_conv"]
    assert "#elif defined(__AVX2__)" in src and "_mm256_madd_epi16" in src
    assert "maddubs" not in src


BASELINE = "c -march=x86-64 -simd-bits=128 -int8-dot=none"  # (SSE2: no channels-last, the NCHW forms)


@pytest.mark.parametrize("name,act", [("ds_cnn", "int8"), ("resnet8", "int8"), ("mobilenet_v2", "uint8")])
def test_quantized_models_built_for_avx2_equal_the_reference(name, act):
    """Bit for bit the NCHW build's and the VNNI build's outputs; plait's numpy reference within one
    quantization step (its float tail, e.g. resnet8's last dequantize, rounds one logit otherwise)."""
    model = quantized_model(name, "qdq", True, act)
    mod = plait.from_onnx(model)
    feed = calibration_feeds(model, 1, seed=3)[0]
    art = plait.build(mod, target=AVX2)
    assert 'call_kernel(void, "q8_conv"' in str(art.ir)  # (the channels-last outer form: the kernel's AVX2 body)
    got = [np.asarray(g) for g in GraphModule(art)(**feed)]
    for target in (BASELINE, VNNI):
        other = GraphModule(plait.build(mod, target=target))(**feed)
        for g, o in zip(got, other):
            np.testing.assert_array_equal(g, np.asarray(o), err_msg=target)
    want = run(mod, list(feed.values()))
    scales = output_scales(model)
    for g, w, out in zip(got, want if isinstance(want, (list, tuple)) else [want], model.graph.output):
        assert int8_steps(g, np.asarray(w), scales[out.name]).max() <= 1


@X86_GCC
@pytest.mark.parametrize("flags", [["-march=x86-64-v3"], ["-march=x86-64"]], ids=["avx2", "baseline"])
def test_depthwise_kernel_bodies_equal_numpy(tmp_path, flags):
    """plait_dw16 (the channels-last depthwise sums on AVX2 hosts): blocks of 16 channels and the channels
    past them, odd and even tap counts, strides, dilations, extreme int16 values (+-255)."""
    lib = kernel_library(tmp_path, "plait_dw16",
                         "void run(const void* x, const void* w, void* s, const int32_t* a) { plait_dw16(x, w, s, "
                         "a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]); }\n", flags, "-O2")
    lib.run.argtypes = [ctypes.c_void_p] * 4
    rng = np.random.default_rng(1)
    # (n, padded h, w, c, kh, kw, stride h, w, dilation h, w)
    for n, hp, wp, c, kh, kw, sh, sw, dh, dw in [(1, 27, 7, 64, 3, 3, 1, 1, 1, 1), (2, 9, 11, 40, 3, 3, 2, 2, 1, 1),
                                                 (1, 10, 9, 16, 2, 5, 1, 2, 2, 1), (1, 6, 6, 8, 3, 3, 1, 1, 1, 1),
                                                 (1, 8, 8, 33, 1, 1, 1, 1, 1, 1), (1, 5, 5, 16, 2, 2, 1, 1, 1, 1)]:
        oh, ow = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
        x = rng.integers(-255, 256, (n, hp, wp * c)).astype(np.int16)
        w = rng.integers(-255, 256, (kh, kw * c)).astype(np.int16)
        x.reshape(-1)[::5], w.reshape(-1)[::3] = -255, -255
        s = np.zeros((n, oh, ow, c), np.int32)
        lib.run(x.ctypes.data, w.ctypes.data, s.ctypes.data,
                np.array([n, hp, wp * c, c, oh, ow, kh, kw, sh, sw, dh, dw], np.int32).ctypes.data)
        xr, wr = x.reshape(n, hp, wp, c).astype(np.int64), w.reshape(kh, kw, c).astype(np.int64)
        want = np.zeros((n, oh, ow, c), np.int64)
        for ry in range(kh):
            for rx in range(kw):
                want += xr[:, ry * dh: ry * dh + (oh - 1) * sh + 1: sh, rx * dw: rx * dw + (ow - 1) * sw + 1: sw] * \
                    wr[ry, rx]
        np.testing.assert_array_equal(s, want.astype(np.int32))


def test_avx2_targets_call_the_depthwise_kernel():
    from plait.backends.c.backend import codegen_c
    from plait.lowering.lower import lower_function
    from plait.relay import IRModule, call, infer_type, var
    from plait.relay.expr import Function

    x, w = var("x", (1, 9, 5, 32), "int8"), var("w", (32, 1, 3, 3), "int8")
    fn = infer_type(IRModule.from_expr(Function((x, w), call("qnn.conv2d", x, w, input_zero_point=-3, groups=32,
                                                             padding=(1, 1, 1, 1), data_layout="NHWC"))))["main"]
    assert "plait_dw16(&" in codegen_c([lower_function(fn, "dw", AVX2)], AVX2).source
    assert "plait_dw16(&" not in codegen_c([lower_function(fn, "dw", VNNI)], VNNI).source
