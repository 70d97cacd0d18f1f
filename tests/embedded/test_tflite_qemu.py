"""The MLPerf Tiny architectures read from TFLite (built in code) as AOT firmware on an emulated Cortex-M7F:
int8 outputs equal TensorFlow Lite Micro's interpreter bit for bit, float ones within 1e-5 of LiteRT. The
keyword-spotting and autoencoder networks run in CI; the ResNet-8 and the MobileNetV1 under the long marker
(bench/mlperf_tiny.py --qemu runs the reference files themselves)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import plait
from plait.executor.aot.qemu import QemuModule
from plait.frontend.tflite import from_tflite
from plait.testing import tflite_models as tm
from plait.testing.tflite_reference import ramp_inputs

HAVE = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None
pytestmark = pytest.mark.skipif(not HAVE, reason="needs qemu-system-arm and arm-none-eabi-gcc")
tflm_runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
M7F = "c -mcpu=cortex-m7f"
CASES = [("ds_cnn", {}), ("autoencoder", {}),
         pytest.param("resnet8", {}, marks=pytest.mark.long), pytest.param("mobilenet_v1", {}, marks=pytest.mark.long)]


@pytest.mark.parametrize("name, kw", CASES)
def test_int8_firmware_equals_tflite_micro(name, kw, tmp_path):
    buf = tm.MODELS[name](quant=True, **kw)
    mod = from_tflite(buf)
    xs = ramp_inputs(mod["main"].params[0].checked_type.shape, "int8", 2)
    art = plait.build(mod, M7F, executor="aot", config={"cc.cache_dir": str(tmp_path / "cc"), "c.host_simulation": True})
    q = QemuModule(art, timeout_s=300, build_dir=tmp_path / "fw")
    it = tflm_runtime.Interpreter.from_bytes(buf)
    for x in xs:
        it.set_input(x, 0)
        it.invoke()
        (got,) = q(x)
        np.testing.assert_array_equal(got, it.get_output(0))
