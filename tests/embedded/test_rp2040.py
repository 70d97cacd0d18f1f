"""The rp2040 tag: a Cortex-M0+ part with room for real models (264 KiB SRAM, 2 MB flash). Its default
board is mps2-an385 (ARMv6-M code runs unchanged on the Cortex-M3), where ds_cnn runs and matches ONNX
Runtime; its facts are the RP2040's, not the board's."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import plait
from plait.executor.aot.qemu import QemuModule
from plait.frontend.onnx import from_onnx
from plait.target import Target
from plait.target.boards import board_for
from plait.testing import onnx_models
from plait.testing.ort_reference import reference_session

HAVE = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None


def test_rp2040_tag_facts_and_board():
    t = Target("rp2040")
    assert t.options["mcpu"] == "cortex-m0plus"
    assert (t.facts.ram_kb.value, t.facts.flash_kb.value, t.facts.clock_mhz.value, t.facts.fpu.value) == \
        (264, 2048, 133, "none")
    assert board_for(t).name == "mps2-an385"
    assert board_for(Target("c -mcpu=cortex-m0plus")).name == "mps2-an385"  # an M0+ part is not a micro:bit
    assert Target("c -mcpu=cortex-m0plus").facts.ram_kb.value == 264  # the tag's facts, by its -mcpu


@pytest.mark.skipif(not HAVE, reason="needs qemu-system-arm and arm-none-eabi-gcc")
def test_ds_cnn_runs_on_the_rp2040_under_qemu_and_matches_ort(tmp_path):
    model = onnx_models.ds_cnn()
    x = np.random.default_rng(11).standard_normal((1, 1, 49, 10)).astype(np.float32)
    art = plait.build(from_onnx(model), target="rp2040", executor="aot",
                      config={"aot.name": "kws", "cc.cache_dir": str(tmp_path), "c.host_simulation": True})
    m = QemuModule(art)
    assert m.board.name == "mps2-an385"
    (got,) = m(input=x)
    s = reference_session(model)
    np.testing.assert_allclose(got, s.run(None, {"input": x})[0], rtol=1e-4, atol=1e-4)
