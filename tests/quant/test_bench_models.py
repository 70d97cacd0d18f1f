"""The quantized bench models (plait.testing.quantized.quantized_model: ONNX Runtime's quantizer, int8
weights) against ONNX Runtime's default session, with ``float`` requantization: the acceptance is
equal outputs, or at most one quantization step apart on at most 0.1% of the elements.

The fast test runs the configurations that exercise each integer operator ONNX Runtime's optimized
session fuses (QLinearSoftmax in mlp and transformer_encoder, QLinearAdd / QLinearAveragePool in
resnet8, QLinearGlobalAveragePool in ds_cnn) and unet's linear Resize (float in the QDQ form, int8 in
the QOperator form) and ConvTranspose: all equal. The long one (``-m long``) runs every model in
both forms, per channel and per tensor, int8 and uint8 activations (bench/quant_accuracy.py prints the
same table); the configurations still off are pinned with their cause (docs/quantization.md): ONNX
Runtime's x86-64 build runs some int8 convolutions in float. Against ONNX Runtime with its int8 QDQ
fusion on (``session.qdqisint8allowed``, the default of its ARM builds) every configuration is equal."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.executor import GraphModule
from plait.testing.onnx_models import MODELS
from plait.testing.quantized import calibration_feeds, int8_steps, ort_session, output_scales, quantized_model


def steps_to_onnx_runtime(name: str, fmt: str, per_channel: bool, act: str, n: int = 3,
                          int8_fusion: tuple = (None,)) -> list[np.ndarray]:
    """How many quantization steps each output element of plait is from ONNX Runtime's (an output not made
    by a DequantizeLinear is compared in float): one array per session, ``int8_fusion`` its
    :func:`ort_session` option (None: ONNX Runtime's default here; True: int8 QDQ groups fused)."""
    model = quantized_model(name, fmt, per_channel, act)
    scales = output_scales(model)
    names = [o.name for o in model.graph.output]
    art = GraphModule(plait.build(plait.from_onnx(model), target="c"))
    feeds = calibration_feeds(model, n, seed=7)
    gots = [art(**feed) for feed in feeds]
    result = []
    for fusion in int8_fusion:
        sess, out = ort_session(model, int8_fusion=fusion), []
        for feed, got in zip(feeds, gots):
            for k, g, want in zip(names, got, sess.run(None, feed)):
                if k in scales:
                    out.append(int8_steps(np.asarray(g), want, scales[k]).ravel())
                else:  # a float operator after the last dequantize (QOperator transformer_encoder's LayerNorm)
                    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-5)
        result.append(np.concatenate(out) if out else np.zeros(1))  # (every output compared in float above)
    return result


@pytest.mark.parametrize("name,fmt,per_channel,act", [
    ("mlp", "qdq", False, "int8"), ("transformer_encoder", "qdq", True, "int8"), ("resnet8", "qdq", True, "int8"),
    ("ds_cnn", "qoperator", False, "int8"),
    ("unet", "qdq", True, "uint8"),  # the linear Resize: ONNX Runtime's float operation order
    ("unet", "qoperator", False, "int8"),  # int8 linear Resize; the ConvTranspose's weight quantization
])
def test_bench_models_equal_onnx_runtime(name, fmt, per_channel, act):
    s, = steps_to_onnx_runtime(name, fmt, per_channel, act)
    assert s.max() == 0, f"{(s > 0).mean():.4%} of the outputs differ, by up to {s.max()} steps"


# (model, form, per channel, activation) -> (largest difference in steps, fraction of elements off) of
# the configurations that do not meet the bound, measured with ONNX Runtime 1.32 on x86-64:
KNOWN = {
    # ONNX Runtime on x86-64 runs the first convolution in float (its int8 input keeps two consumers,
    # so its S8-to-U8 conversion does not apply and int8 QLinearConv is not fused there); plait's
    # exact integer sums differ where its float sums land on a rounding tie
    ("resnet_block", "qdq", True, "int8"): (2, 0.0001),
    # likewise: ONNX Runtime on x86-64 runs six of unet's int8 convolutions in float (from the first
    # one that differs, /enc1/conv2, every later value is off by the ties its float sums land on)
    ("unet", "qdq", False, "int8"): (2, 0.03),
}


@pytest.mark.parametrize("name,fmt,per_channel,act", sorted(KNOWN))
def test_known_differences_are_onnx_runtime_float_fallback(name, fmt, per_channel, act):
    """The configurations of KNOWN equal ONNX Runtime bit for bit once it fuses their int8 QDQ groups into its
    integer operators (``session.qdqisint8allowed``, its ARM builds' default): the difference is its x86-64 float
    fallback, not plait's integer arithmetic."""
    s, = steps_to_onnx_runtime(name, fmt, per_channel, act, int8_fusion=(True,))
    assert s.max() == 0, f"{(s > 0).mean():.4%} of the outputs differ, by up to {s.max()} steps"


# equal to ONNX Runtime, bit for bit: the linear Resize in ONNX Runtime's float operation order (QDQ)
# or its int8 arithmetic (QOperator), the QOperator ConvTranspose's weight and bias quantized as
# ONNX Runtime's optimizer quantizes them
EXACT = {("unet", f, pc, a) for f in ("qdq", "qoperator") for pc in (True, False) for a in ("int8", "uint8")} - {
    ("unet", "qdq", True, "int8"), ("unet", "qdq", False, "int8")}

MATRIX = [(m, f, pc, a) for m in MODELS for f in ("qdq", "qoperator") for pc in (True, False) for a in ("int8", "uint8")]


@pytest.mark.long
@pytest.mark.parametrize("name,fmt,per_channel,act", MATRIX)
def test_every_bench_model_within_one_step_of_onnx_runtime(name, fmt, per_channel, act):
    s, fused = steps_to_onnx_runtime(name, fmt, per_channel, act, int8_fusion=(None, True))
    off = float((s > 0).mean())
    print(f"{name} {fmt} per_channel={per_channel} {act}: largest {s.max()} steps, {off:.4%} off")
    most, frac = (0, 0.0) if (name, fmt, per_channel, act) in EXACT else KNOWN.get((name, fmt, per_channel, act),
                                                                                   (1, 0.001))
    assert s.max() <= most and off <= frac
    # against ONNX Runtime's integer operators (every int8 QDQ group fused, as on ARM): equal, every one
    assert fused.max() == 0, f"{(fused > 0).mean():.4%} differ from int8-fused ONNX Runtime, by up to {fused.max()}"
