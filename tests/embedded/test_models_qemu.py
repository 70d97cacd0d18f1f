"""Every bundled example model on emulated cores (issue 13's acceptance): Cortex-M0 code (on mps2-an385,
the microbit being too small), the Cortex-M7F (mps2-an500) and the Cortex-M55 (mps3-an547) where the
board holds the model. The chips' RAM and flash are raised with -ram-kb/-flash-kb to the board's (the
bundled models are bigger than the chips). Outputs match ONNX Runtime; against host simulation they are
bit-identical for models without transcendental functions, and within float32 rounding (1e-5) for the
ones with them (libm: glibc on the host, newlib on the device; docs/embedded.md, Bit-exactness).

resnet_block on the Cortex-M0 (soft float, ~500 M instructions) takes minutes: marked ``long``, run it
with ``python3 -m pytest -m long tests/embedded``."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import plait
from plait.executor import GraphModule
from plait.executor.qemu import QemuModule
from plait.frontend.onnx import from_onnx
from plait.testing.onnx_models import MODELS
from plait.testing.ort_reference import reference_session

HAVE = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None
pytestmark = pytest.mark.skipif(not HAVE, reason="needs qemu-system-arm and arm-none-eabi-gcc")

M0 = "c -mcpu=cortex-m0 -ram-kb=4096 -flash-kb=4096 -board=mps2-an385"
M7F = "c -mcpu=cortex-m7f -ram-kb=4096 -flash-kb=4096"
M55 = "c -mcpu=cortex-m55 -ram-kb=512 -flash-kb=512"  # the board's DTCM and ITCM
TRANSCENDENTAL = {"mlp", "transformer_encoder"}  # softmax / erf / tanh: libm differs between host and device
CASES = [(m, t) for m in MODELS for t in (M0, M7F, M55)  # M55: weights or activations beyond its 512 KiB
         if not (t == M55 and m in ("mlp", "resnet_block", "mobilenet_v2", "unet", "autoencoder"))]
LONG = {("resnet_block", M0)}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


@pytest.mark.parametrize("name, target", [
    pytest.param(m, t, id=f"{m}-{t.split()[1][6:]}", marks=[pytest.mark.long] if (m, t) in LONG else [])
    for m, t in CASES])
def test_bundled_model_on_an_emulated_core_matches_ort_and_host_simulation(name, target, cache):
    model = MODELS[name]()
    sess = reference_session(model)
    feeds = {i.name: np.random.default_rng(4).standard_normal(i.shape).astype(np.float32) for i in sess.get_inputs()}
    config = {"aot.name": name, "cc.cache_dir": cache, "c.host_simulation": True}
    got = QemuModule(plait.build(from_onnx(model), target, executor="aot", config=config), timeout_s=600)(**feeds)
    host = GraphModule(plait.build(from_onnx(model), target, config=config))(**feeds)
    for g, w, h in zip(got, sess.run(None, feeds), host):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
        if name in TRANSCENDENTAL:
            np.testing.assert_allclose(g, h, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(g, h)
