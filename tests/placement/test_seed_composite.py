"""Issue 5's acceptance: the seed composite target places, cross-compiles and runs DS-CNN (float32)."""

import shutil
import subprocess

import numpy as np
import pytest

import plait
from plait.errors import PlaitError
from plait.executor import GraphModule
from plait.frontend.onnx import from_onnx
from plait.runtime.module import CrossModule
from plait.target import Target
from plait.target.testing import register_test_backend
from plait.testing import onnx_models
from plait.testing.ort_reference import reference_session

SEED = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"
HEAD = "/pool/*=low_power_cpu,/Flatten=low_power_cpu,/fc/*=low_power_cpu"
# the head on the M0 receives the last block's 32,000-byte activation: more than the nRF51822's 16 KiB of RAM
ROOMY = "low_power_cpu: c -mcpu=cortex-m0 -ram-kb=64; inference_cpu: c -mcpu=cortex-m7f"

needs_arm = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                               reason="arm-none-eabi-gcc is not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def ds_cnn():
    model = onnx_models.ds_cnn()
    x = np.random.default_rng(7).standard_normal((1, 1, 49, 10)).astype(np.float32)
    sess = reference_session(model)
    (want,) = sess.run(None, {sess.get_inputs()[0].name: x})
    return from_onnx(model), sess.get_inputs()[0].name, x, want


def _readelf_attrs(path):
    return subprocess.run(["arm-none-eabi-readelf", "-A", str(path)], capture_output=True, text=True).stdout


@needs_arm
def test_latency_puts_every_convolution_on_the_m7_and_runs_on_the_host(ds_cnn, tmp_path):
    mod, name, x, want = ds_cnn
    art = plait.build(mod, SEED, objective="latency", config={"c.host_simulation": True, "cc.cache_dir": str(tmp_path)})
    convs = [p for p in art.placement if p.call.op_name == "nn.conv2d"]
    assert len(convs) == 9 and {p.piece for p in convs} == {"inference_cpu"}
    for p in convs:  # the M7 was cheaper: the M0 has no FPU
        assert p.alternatives["low_power_cpu"].seconds > 10 * p.alternatives["inference_cpu"].seconds
    (got,) = GraphModule(art)(**{name: x})
    np.testing.assert_allclose(got, want, atol=1e-4)
    cross = art.cross_modules["inference_cpu"]
    assert isinstance(cross, CrossModule) and "-mcpu=cortex-m7" in cross.flags and "-mfloat-abi=hard" in cross.flags
    assert "Tag_FP_arch" in _readelf_attrs(cross.object_path)


@needs_arm
def test_pinned_head_on_the_m0_cross_compiles_both_pieces_and_matches_ort(ds_cnn, tmp_path):
    mod, name, x, want = ds_cnn
    art = plait.build(mod, ROOMY, place=HEAD, config={"c.host_simulation": True, "cc.cache_dir": str(tmp_path)})
    on = {p.call.meta.get("name"): p.piece for p in art.placement}
    assert on["/fc/Gemm"] == on["/pool/GlobalAveragePool"] == on["/Flatten"] == "low_power_cpu"
    assert all(on[n] == "inference_cpu" for n in on if n.endswith("/Conv"))
    assert all(p.reason.startswith("pinned by") for p in art.placement if p.piece == "low_power_cpu")
    # each piece's C, cross-compiled with its own flags
    m0, m7 = art.cross_modules["low_power_cpu"], art.cross_modules["inference_cpu"]
    assert "-mcpu=cortex-m0" in m0.flags and "-mthumb" in m0.flags and not any("mfpu" in f for f in m0.flags)
    assert "-mcpu=cortex-m7" in m7.flags and "-mfpu=fpv5-sp-d16" in m7.flags
    assert "Tag_FP_arch" not in _readelf_attrs(m0.object_path)
    assert "Tag_CPU_arch: v6S-M" in _readelf_attrs(m0.object_path)
    assert "Tag_CPU_arch: v7E-M" in _readelf_attrs(m7.object_path)
    # data crosses from the M7's memory to the M0's once, where the head starts
    copies = [(n["src"], n["dst"]) for n in art.graph["nodes"] if n["op"] == "copy"]
    assert copies.count(("inference_cpu", "low_power_cpu")) == 1
    # the whole model runs on the host, each piece's C compiled natively
    assert set(art.piece_modules) == {"low_power_cpu", "inference_cpu"}
    (got,) = GraphModule(art)(**{name: x})
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_infeasible_requests_fail_with_exact_messages(ds_cnn):
    mod = ds_cnn[0]
    with pytest.raises(PlaitError) as e:  # the weights fit the M0's flash; its RAM is too small
        plait.build(mod, SEED, place="*=low_power_cpu")
    assert str(e.value) == ("piece 'low_power_cpu' (c -mcpu=cortex-m0): the activations and workspaces in pool "
                            "'workspace_low_power_cpu' need "
                            "64,000 bytes of RAM, more than its 16,384 bytes")
    with pytest.raises(PlaitError) as e:
        plait.build(mod, SEED, place=HEAD)
    assert str(e.value) == ("piece 'low_power_cpu' (c -mcpu=cortex-m0): the activations and workspaces in pool "
                            "'workspace_low_power_cpu' need "
                            "32,256 bytes of RAM, more than its 16,384 bytes")
    register_test_backend("relu_only", doc="test kind: runs nn.relu only", supports=lambda call, target: call.op_name == "nn.relu")
    with pytest.raises(PlaitError) as e:
        plait.build(mod, "cpu: c; npu: relu_only", place="/conv0/*=npu")
    assert str(e.value) == ("call '/conv0/Conv' (nn.conv2d) is pinned to piece 'npu' by --place rule '/conv0/*=npu', "
                            "but that piece cannot run it: the 'supports' hook of target kind 'relu_only' says no")
    with pytest.raises(PlaitError) as e:
        plait.build(mod, SEED, place="Conv=inference_cp")
    assert str(e.value) == ("--place: rule 'Conv=inference_cp': unknown piece 'inference_cp'; did you mean "
                            "'inference_cpu'? (pieces: low_power_cpu, inference_cpu)")
    with pytest.raises(PlaitError) as e:
        plait.build(mod, SEED, objective="speed")
    assert "speed" in str(e.value)


@needs_arm
def test_export_writes_each_pieces_c_and_object_file(ds_cnn, tmp_path):
    import json

    from plait.executor import GraphArtifact

    mod = ds_cnn[0]
    art = plait.build(mod, ROOMY, place=HEAD, config={"cc.cache_dir": str(tmp_path / "cc")})
    out = art.export(tmp_path / "fw")
    files = sorted(p.name for p in out.iterdir())
    assert files == ["graph.json", "lib.c", "lib.o", "lib_1.c", "lib_1.o", "manifest.json", "params.npz"]
    attrs = {f: _readelf_attrs(out / f) for f in ("lib.o", "lib_1.o")}
    assert sorted("v6S-M" in a for a in attrs.values()) == [False, True]  # one object per core
    manifest = json.loads((out / "manifest.json").read_text())
    assert [e["file"] for e in manifest["modules"]] == ["lib.c", "lib_1.c"]
    assert GraphArtifact.load(out).graph == art.graph


# ---- issue 10: honest memory facts on the README's composite target ----------------------------------


def test_ds_cnn_is_placed_with_its_weights_in_flash(ds_cnn, tmp_path):
    mod, name, x, want = ds_cnn
    art = plait.build(mod, SEED, config={"c.host_simulation": True, "c.cross_check": False,
                                         "cc.cache_dir": str(tmp_path)})
    a = art.placement
    assert a.weights_in == {"low_power_cpu": "flash", "inference_cpu": "flash"}
    assert a.memory == {"low_power_cpu": (0, 256 * 1024), "inference_cpu": (90416, 1024 * 1024)}
    (got,) = GraphModule(art)(**{name: x})
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_the_bundled_mlp_is_refused_for_flash_until_the_m7_has_more():
    mod = from_onnx(onnx_models.mlp())  # 1,597,480 bytes of weights
    with pytest.raises(PlaitError) as e:
        plait.build(mod, SEED)
    assert str(e.value) == ("piece 'inference_cpu' (c -mcpu=cortex-m7f): the weights of the 2 calls that cannot go "
                            "to another piece need 1,572,864 bytes of flash, more than its 1,048,576 bytes")
    with pytest.raises(PlaitError) as e:  # alone on the M7 (one piece: no solver, the same check)
        plait.build(mod, "c -mcpu=cortex-m7f")
    assert str(e.value) == ("piece 'c' (c -mcpu=cortex-m7f): the weights need 1,597,480 bytes of flash, more than "
                            "its 1,048,576 bytes")
    bigger = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f -flash-kb=2048"
    art = plait.build(mod, bigger, config={"c.host_simulation": True, "c.cross_check": False})
    assert art.placement.memory["inference_cpu"] == (1597480, 2048 * 1024)
    x = np.random.default_rng(0).standard_normal((1, 256)).astype(np.float32)
    (got,) = GraphModule(art)(x=x)
    np.testing.assert_allclose(got, plait.relay.run(mod, {"x": x}), rtol=1e-5, atol=1e-6)


def test_resnet_block_is_refused_for_ram():
    """Its weights (295 KB) fit the M7's flash; its activations (2.4 MB on the M7, 4.3 MB for the whole plan)
    do not fit 320 KiB of RAM, nor does its 802,816-byte result fit the host M0's 16 KiB."""
    mod = from_onnx(onnx_models.resnet_block())
    with pytest.raises(PlaitError) as e:
        plait.build(mod, SEED)
    assert str(e.value) == (
        "piece 'low_power_cpu' (c -mcpu=cortex-m0): the activations and workspaces in pool 'workspace_low_power_cpu' "
        "need 802,816 bytes of RAM, more than its 16,384 bytes; piece 'inference_cpu' (c -mcpu=cortex-m7f): the "
        "activations and workspaces in pool 'workspace_inference_cpu' need 2,408,448 bytes of RAM, more than its "
        "327,680 bytes")
    assert type(e.value).__name__ == "FitError"
    # a piece simulated on the host is checked against its own facts all the same
    with pytest.raises(PlaitError) as e:
        plait.build(mod, "c -mcpu=cortex-m7f", config={"c.host_simulation": True})
    assert str(e.value).startswith("piece 'c' (c -mcpu=cortex-m7f): the activations and workspaces in pool 'workspace_c' "
                                   "need ")
    # the host has the machine's RAM: it fits
    art = plait.build(mod, "c -simd-bits=256")
    assert art.graph["memory"]["peak_bytes"] < Target("c").facts.ram_kb.value * 1024
