"""Every bundled example model, float32 and int8 (ONNX Runtime's QDQ quantization), on the emulated Cortex-M0
(mps2-an385, the microbit being too small), M4F (mps2-an386), M7F (mps2-an500) and M55 (mps3-an547): the AOT
firmware under QEMU gives the same bits as the graph executor's host simulation of the same C (no contraction,
plait's own float32 math routines: docs/embedded.md, Bit-exactness), and the float outputs match ONNX Runtime.
The chips' RAM and flash are raised with -ram-kb/-flash-kb to the boards' (the bundled models are bigger than
the chips).

The default run covers every model on the M7F and the transcendental ones (softmax, GELU, tanh) and the
smallest on every core; the rest (minutes in all, the M0's soft float the slowest) is ``long``:
``python3 -m pytest -m long tests/embedded/test_models_qemu.py``."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import plait
from plait.executor import GraphModule
from plait.executor.aot.qemu import QemuModule
from plait.frontend.onnx import from_onnx
from plait.testing.onnx_models import MODELS
from plait.testing.ort_reference import reference_session
from plait.testing.quantized import quantized_model

HAVE = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None
pytestmark = pytest.mark.skipif(not HAVE, reason="needs qemu-system-arm and arm-none-eabi-gcc")

CORES = {"m0": "c -mcpu=cortex-m0 -ram-kb=4096 -flash-kb=4096 -board=mps2-an385",
         "m4f": "c -mcpu=cortex-m4f -ram-kb=4096 -flash-kb=4096",
         "m7f": "c -mcpu=cortex-m7f -ram-kb=4096 -flash-kb=4096",
         "m55": "c -mcpu=cortex-m55 -ram-kb=4096 -flash-kb=2048"}  # the AN547's 2 MiB SRAM holds the constants
KINDS = ("float", "int8")
#: run by default: every model on the M7F (int8: the five quickest); on every core the models with
#: transcendental functions and ds_cnn
DEFAULT = {(m, "float", "m7f") for m in MODELS} | {
    (m, "int8", "m7f") for m in MODELS if m not in ("unet", "mobilenet_v2", "resnet_block")} | {
    (m, "float", c) for m in ("mlp", "transformer_encoder", "ds_cnn") for c in CORES} | {
    ("ds_cnn", "int8", c) for c in CORES}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


def _model(name: str, kind: str):
    return MODELS[name]() if kind == "float" else quantized_model(name)


@pytest.mark.parametrize("name, kind, core", [
    pytest.param(m, k, c, id=f"{m}-{k}-{c}", marks=[] if (m, k, c) in DEFAULT else [pytest.mark.long])
    for m in MODELS for k in KINDS for c in CORES])
def test_bundled_model_on_an_emulated_core_equals_host_simulation_bit_for_bit(name, kind, core, cache):
    model = _model(name, kind)
    sess = reference_session(model)
    feeds = {i.name: np.random.default_rng(4).standard_normal(i.shape).astype(np.float32) for i in sess.get_inputs()}
    target = CORES[core]
    config = {"aot.name": name, "cc.cache_dir": cache, "c.host_simulation": True}
    got = QemuModule(plait.build(from_onnx(model), target, executor="aot", config=config), timeout_s=900)(**feeds)
    host = GraphModule(plait.build(from_onnx(model), target, config=config))(**feeds)
    assert len(got) == len(host)
    for k, (g, h) in enumerate(zip(got, host)):
        assert g.dtype == h.dtype and g.shape == h.shape
        assert np.array_equal(g.view(np.uint8), h.view(np.uint8)), (
            f"output {k}: {int(np.count_nonzero(g != h))} of {g.size} elements differ, at most "
            f"{float(np.max(np.abs(g.astype(np.float64) - h)))}")
    if kind == "float":
        for g, w in zip(got, sess.run(None, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
