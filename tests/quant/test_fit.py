"""The fit that makes microcontrollers worth targeting (issue 15): the quantized ds_cnn on the design's
example composite (a Cortex-M0 piece and a Cortex-M7F piece), weights in each piece's flash, activations
in its RAM, as plait explain reports them; its int8 calls priced far below float on the M0."""

from __future__ import annotations

import json

import pytest

from plait.cli import main
from plait.testing.onnx_models import MODELS
from plait.testing.quantized import quantized_model

DESIGN = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"
KB = 1024
WEIGHTED = {"nn.conv2d", "nn.dense", "qnn.conv2d", "qnn.dense"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("fit")
    out = {}
    for name, model in (("float", MODELS["ds_cnn"]()), ("qdq", quantized_model("ds_cnn")),
                        ("qoperator", quantized_model("ds_cnn", "qoperator"))):
        out[name] = d / f"ds_cnn_{name}.onnx"
        out[name].write_bytes(model.SerializeToString())
    return out


def explain(path, capsys, place: str | None = None) -> dict:
    capsys.readouterr()
    assert main(["explain", str(path), "--target", DESIGN, "--json", *(["--place", place] if place else [])]) == 0
    return json.loads(capsys.readouterr().out)


def weights(report: dict) -> tuple[int, int, int]:
    """(bytes of the convolution and dense weights, of their biases, of everything else) explain reports."""
    calls = report["calls"]
    w = sum(c["weight_bytes"] for c in calls if c["op"] in WEIGHTED)
    # the biases: adds after a convolution or dense (an int8 global average pool's zero-point correction is an add too)
    bias = sum(c["weight_bytes"] for c in calls if c["op"] == "add" and "Pool" not in c["name"])
    return w, bias, sum(c["weight_bytes"] for c in calls) - w - bias


@pytest.mark.parametrize("form", ["qdq", "qoperator"])
def test_int8_weights_are_a_quarter_of_float_plus_int32_biases(models, capsys, form):
    f, q = explain(models["float"], capsys, "/fc/*=low_power_cpu"), explain(models[form], capsys, "/fc/*=low_power_cpu")
    (fw, fb, fo), (qw, qb, qo) = weights(f), weights(q)
    assert (fw, fb, fo) == (88_064, 2_352, 0)  # ds_cnn: 5 conv weights + dense, 10 biases, float32
    assert qw * 4 == fw  # int8
    assert qb == fb  # int32 biases, as many bytes as float32 ones
    # the rest: the requantizations' per-channel scales (one float32 per output channel: as many bytes as the
    # biases) and the scale and zero point of each quantize/dequantize of the model's inputs and outputs
    assert 2_352 <= qo <= 2_352 + 64
    assert (qw + qb + qo) / (fw + fb) == pytest.approx(0.296, abs=0.002)
    # per piece, in flash: the M0 holds the fc (int8: 768 B of weights, 48 B of int32 biases; in the QOperator
    # form the QGemm's requantization is named /fc/Gemm too and comes along with its 12 float32 scales)
    for r, used in ((f, {"low_power_cpu": 3_120, "inference_cpu": 87_296}),
                    (q, {"low_power_cpu": {"qdq": 816, "qoperator": 864}[form]})):
        for piece, n in used.items():
            assert r["memory"][piece]["memory"] == "flash"
            assert r["memory"][piece]["used"] == n
    assert sum(m["used"] for m in q["memory"].values()) == qw + qb + qo
    assert all(m["used"] <= m["capacity"] for m in q["memory"].values())


def test_int8_activations_fit_the_m0s_ram(models, capsys):
    # ds_cnn's first block (depthwise + pointwise convolutions) on the M0 piece: in int8 its activations (8,000 B
    # each) fit the nRF51822's 16 KiB of RAM; in float32 they take four times as much
    place = "/block0/*=low_power_cpu"
    q, f = explain(models["qdq"], capsys, place), explain(models["float"], capsys, place)
    pools = {r: {p["piece"]: p for p in rep["memory_plan"]["pools"]} for r, rep in (("int8", q), ("float", f))}
    m0 = pools["int8"]["low_power_cpu"]
    assert m0["ram_bytes"] == 16 * KB and m0["bytes"] == 16_000 <= m0["ram_bytes"]
    assert pools["float"]["low_power_cpu"]["bytes"] == 64_000 > 16 * KB
    m7 = pools["int8"]["inference_cpu"]
    assert m7["bytes"] <= m7["ram_bytes"] == 320 * KB
    # and its weights in the M0's flash: depthwise 576 + pointwise 4,096 int8, 2 x 256 B of int32 biases and of scales
    assert q["memory"]["low_power_cpu"] == {"used": 5_696, "capacity": 256 * KB, "memory": "flash"}
    assert {c["piece"] for c in q["calls"] if c["name"].startswith("/block0/")} == {"low_power_cpu"}


def test_explain_prices_int8_far_below_float_on_the_m0(models, capsys):
    f, q = explain(models["float"], capsys), explain(models["qdq"], capsys)
    one = {r: {p: v["seconds"] for p, v in rep["single_piece"].items()} for r, rep in (("float", f), ("int8", q))}
    assert one["int8"]["low_power_cpu"] < one["float"]["low_power_cpu"] / 5  # soft float against MULS + ADDS
    # an FPU, and SMLAD for the int8 dot products (two MACs per instruction): about half (measured on QEMU:
    # 0.38x the float model's instructions, bench/quant_m0.py)
    assert 0.3 < one["int8"]["inference_cpu"] / one["float"]["inference_cpu"] < 0.7
    # per convolution too: every int8 convolution on the M0 below a quarter of its float counterpart
    conv = {r: [c["costs"]["low_power_cpu"]["seconds"] for c in rep["calls"] if c["op"] in ("nn.conv2d", "qnn.conv2d")]
            for r, rep in (("float", f), ("int8", q))}
    assert len(conv["int8"]) == len(conv["float"]) == 9
    assert all(i < x / 4 for i, x in zip(conv["int8"], conv["float"]))
    # latency: the M7F is 13.5x the M0's clock, so everything goes there, int8 or float
    assert {c["piece"] for c in q["calls"]} == {c["piece"] for c in f["calls"]} == {"inference_cpu"}
