"""The design's composite target on emulated cores: ds_cnn with its fc on the Cortex-M0 piece and the rest
on the Cortex-M7F piece, one image on mps2-an500 (each piece's operators built for its own core), matches
ONNX Runtime and the host Graph executor; the CLI's --on qemu runs it; no board for the pieces is an error."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import plait
from plait.cli import main
from plait.executor.aot.firmware import add_firmware
from plait.executor.graph.module import GraphModule
from plait.executor.aot.qemu import QemuModule
from plait.frontend.onnx import from_onnx
from plait.placement.explain import rules_of
from plait.target import CompositeTarget
from plait.target.errors import TargetError
from plait.testing import onnx_models
from plait.testing.ort_reference import reference_session

HAVE = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None
needs_qemu = pytest.mark.skipif(not HAVE, reason="needs qemu-system-arm and arm-none-eabi-gcc")
DESIGN = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"
PLACE = "/fc/*=low_power_cpu"


@pytest.fixture(scope="module")
def ds_cnn():
    return onnx_models.ds_cnn()


def build(model, target: str, executor: str, cache: str):
    return plait.build(from_onnx(model), target=target, executor=executor,
                       place=rules_of(PLACE, CompositeTarget(target)),
                       config={"aot.name": "kws", "cc.cache_dir": cache, "c.host_simulation": True})


@needs_qemu
def test_ds_cnn_on_the_design_composite(ds_cnn, tmp_path):
    art = build(ds_cnn, DESIGN, "aot", str(tmp_path / "cc"))
    pieces = {n["piece"] for n in art.graph["nodes"] if n["op"] == "call"}
    assert pieces == {"low_power_cpu", "inference_cpu"}  # at least one call on each piece
    q = QemuModule(art, timeout_s=60, build_dir=tmp_path / "fw")
    assert q.board.name == "mps2-an500"
    # each piece's operators were cross-compiled for its own core (the ELF attributes of the objects)
    build_dir = tmp_path / "fw" / "firmware" / "build"
    arch = {f: subprocess.run(["arm-none-eabi-readelf", "-A", str(build_dir / f"plait_kws_{f}_ops.o")],
                              capture_output=True, text=True, check=True).stdout
            for f in ("low_power_cpu", "inference_cpu")}
    assert "Tag_CPU_arch: v6S-M" in arch["low_power_cpu"] and "Tag_FP_arch" not in arch["low_power_cpu"]
    assert "Tag_CPU_arch: v7E-M" in arch["inference_cpu"] and "Tag_FP_arch: FPv5" in arch["inference_cpu"]
    assert art.metadata["firmware"]["source_flags"]["src/plait_kws_inference_cpu_ops.c"][-3:] == [
        "-ffunction-sections", "-fdata-sections", "-ffp-contract=off"]
    x = np.random.default_rng(3).standard_normal((1, 1, 49, 10)).astype(np.float32)
    (y,) = q(input=x)
    s = reference_session(ds_cnn)
    np.testing.assert_allclose(y, s.run(None, {s.get_inputs()[0].name: x})[0], rtol=0, atol=1e-4)
    (g,) = GraphModule(build(ds_cnn, DESIGN, "graph", str(tmp_path / "cc")))(input=x)
    # both pieces are Cortex-M: built without contraction everywhere, so the host simulation and the two
    # emulated cores agree bit for bit (ds_cnn has no transcendental functions)
    np.testing.assert_array_equal(y, g)


@needs_qemu
def test_cli_runs_the_composite_on_qemu(ds_cnn, tmp_path, capsys):
    path = tmp_path / "ds_cnn.onnx"
    path.write_bytes(ds_cnn.SerializeToString())
    out = tmp_path / "y.npz"
    assert main(["run", str(path), "--target", DESIGN, "--place", PLACE, "--executor", "aot", "--on", "qemu",
                 "--fill", "ones", "--output", str(out), "--cache-dir", str(tmp_path / "cc")]) == 0
    (y,) = np.load(out).values()
    s = reference_session(ds_cnn)
    x = np.ones((1, 1, 49, 10), np.float32)
    np.testing.assert_allclose(y, s.run(None, {s.get_inputs()[0].name: x})[0], rtol=0, atol=1e-4)


def test_a_piece_for_no_board_is_named(ds_cnn, tmp_path):
    target = "cpu: c; inference_cpu: c -mcpu=cortex-m7f"
    art = plait.build(from_onnx(ds_cnn), target=target, executor="aot",
                      place=rules_of("/fc/*=cpu", CompositeTarget(target)),
                      config={"aot.name": "kws", "cc.cache_dir": str(tmp_path / "cc"), "c.host_simulation": True})
    with pytest.raises(TargetError) as e:
        add_firmware(art)
    assert str(e.value) == ("piece 'cpu' of the composite target: target 'c' is not for a Cortex-M core: no board "
                            "runs it under QEMU")
