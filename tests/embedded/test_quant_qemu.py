"""The quantized ds_cnn (int8, QDQ and QOperator) as AOT firmware on emulated cores: the design's composite (one
image on mps2-an500, each piece's operators built for its own core), the Cortex-M0 alone (on mps2-an385) and the
Cortex-M7F alone. Integer kernels, and float32 requantization without contraction: QEMU's outputs equal the host
simulation of the same C bit for bit, on every core and in both requantization modes."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import plait
from plait.executor.graph.module import GraphModule
from plait.executor.aot.qemu import QemuModule
from plait.frontend.onnx import from_onnx
from plait.placement.explain import rules_of
from plait.target import CompositeTarget
from plait.testing.quantized import int8_steps, ort_session, output_scales, quantized_model

HAVE = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None
pytestmark = pytest.mark.skipif(not HAVE, reason="needs qemu-system-arm and arm-none-eabi-gcc")
DESIGN = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"
M0 = "c -mcpu=cortex-m0 -ram-kb=256 -board=mps2-an385"  # 40,000 B of activations: not the microbit
M7F = "c -mcpu=cortex-m7f"


@pytest.fixture(scope="module", params=["qdq", "qoperator"])
def model(request):
    return quantized_model("ds_cnn", request.param)


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(3).standard_normal((1, 1, 49, 10)).astype(np.float32)


def build(model, target: str, executor: str, cache, place: str | None = None):
    return plait.build(from_onnx(model), target=target, executor=executor,
                       place=rules_of(place, CompositeTarget(target)) if place else None,
                       config={"aot.name": "kws", "cc.cache_dir": str(cache), "c.host_simulation": True})


def run(model, target: str, x, tmp_path, place: str | None = None) -> tuple[np.ndarray, np.ndarray, QemuModule]:
    """(QEMU's output, the host simulation's output, the QemuModule)."""
    q = QemuModule(build(model, target, "aot", tmp_path / "cc", place), timeout_s=60, build_dir=tmp_path / "fw")
    (y,) = q(input=x)
    (g,) = GraphModule(build(model, target, "graph", tmp_path / "cc", place))(input=x)
    return y, g, q


def ort_steps(model, y: np.ndarray, x: np.ndarray) -> float:
    """The largest difference to ONNX Runtime, in quantization steps of the output."""
    s = ort_session(model)
    (scale,) = output_scales(model).values()
    return float(int8_steps(y, s.run(None, {s.get_inputs()[0].name: x})[0], scale).max())


def test_design_composite_fc_on_the_m0(model, x, tmp_path):
    # as docs/embedded.md runs the float ds_cnn: the fc (int8 dense + int32 bias) on the M0 piece
    y, g, q = run(model, DESIGN, x, tmp_path, "/fc/*=low_power_cpu")
    assert q.board.name == "mps2-an500"
    assert {n["piece"] for n in q.art.graph["nodes"] if n["op"] == "call"} == {"low_power_cpu", "inference_cpu"}
    np.testing.assert_array_equal(y, g)
    assert ort_steps(model, y, x) == 0  # the requantizations run on the M7F piece, in float: ONNX Runtime's


def test_design_composite_convolutions_on_the_m0(x, tmp_path):
    # ds_cnn's first block on the M0 piece: its requantizations are fixed-point (no FPU), the M7F's float, in
    # one image; the M0's activations fit its chip's 16 KiB of RAM
    model = quantized_model("ds_cnn")
    y, g, q = run(model, DESIGN, x, tmp_path, "/block0/*=low_power_cpu")
    np.testing.assert_array_equal(y, g)
    pools = {p["piece"]: p["bytes"] for p in q.art.metadata["pools"]}
    assert pools["low_power_cpu"] == 16_000 <= 16 * 1024
    src = {p: (tmp_path / "fw" / "src" / f"plait_kws_{p}_ops.c").read_text() for p in pools}
    assert "float" not in src["low_power_cpu"] and "int64_t" in src["low_power_cpu"]  # fixed point
    assert "nearbyintf" in src["inference_cpu"]  # float requantization
    arch = subprocess.run(["arm-none-eabi-readelf", "-A", str(tmp_path / "fw" / "firmware" / "build" /
                                                               "plait_kws_low_power_cpu_ops.o")],
                          capture_output=True, text=True, check=True).stdout
    assert "Tag_CPU_arch: v6S-M" in arch
    assert ort_steps(model, y, x) <= 1


def test_m0_alone(model, x, tmp_path):
    # fixed-point requantization, the M0's default: within a step of ONNX Runtime's float one
    y, g, q = run(model, M0, x, tmp_path)
    assert q.board.name == "mps2-an385"
    np.testing.assert_array_equal(y, g)
    assert ort_steps(model, y, x) <= 1


def test_m7f_alone(model, x, tmp_path):
    # float requantization (the M7F's default): float32(acc) * scale, rounded by nearbyintf (exact in newlib and
    # glibc), no fused multiply-add on either side: bit-identical, and ONNX Runtime's
    y, g, q = run(model, M7F, x, tmp_path)
    assert q.board.name == "mps2-an500"
    np.testing.assert_array_equal(y, g)
    assert ort_steps(model, y, x) == 0


def test_m0_with_float_requantization(x, tmp_path):
    # -requantize=float on the M0: soft-float multiplies and nearbyintf from newlib, still bit-identical
    model = quantized_model("ds_cnn")
    y, g, _ = run(model, M0 + " -requantize=float", x, tmp_path)
    np.testing.assert_array_equal(y, g)
    assert ort_steps(model, y, x) == 0
