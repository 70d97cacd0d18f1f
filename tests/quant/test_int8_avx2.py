"""int8 convolutions on x86-64 hosts without VNNI (AVX2: AMD Zen 2/3, target ``c -march=x86-64-v3
-simd-bits=256 -int8-dot=none``): the ChannelsLast pass and the channels-last ``"outer"`` form run
there too, the kernel ``plait_q8_conv`` taking its AVX2 body (int16 ``vpmaddwd`` pairs; the body's own
sums against numpy: tests/quant/test_channels_last.py). AVX2 code runs on an AVX-512 machine, so the
whole quantized models are built for that target and compared, bit for bit, with plait's numpy
reference and with the build for an AVX-512 VNNI host (integer results never depend on the
instruction set)."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.backends.c.kernels import KERNELS
from plait.executor import GraphModule
from plait.relay import run
from plait.target.host import cpu_has
from plait.testing.quantized import calibration_feeds, int8_steps, output_scales, quantized_model

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
    assert "plait_q8_conv" in str(art.ir)  # (the channels-last outer form: the kernel's AVX2 body)
    got = [np.asarray(g) for g in GraphModule(art)(**feed)]
    for target in (BASELINE, VNNI):
        other = GraphModule(plait.build(mod, target=target))(**feed)
        for g, o in zip(got, other):
            np.testing.assert_array_equal(g, np.asarray(o), err_msg=target)
    want = run(mod, list(feed.values()))
    scales = output_scales(model)
    for g, w, out in zip(got, want if isinstance(want, (list, tuple)) else [want], model.graph.output):
        assert int8_steps(g, np.asarray(w), scales[out.name]).max() <= 1
