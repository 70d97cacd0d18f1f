"""Measured costs: the instruction-counting QEMU plugin counts a known loop exactly; plait measure writes a
cost database whose entries match the calls; explain --costs prices every call from it ("measured")."""

from __future__ import annotations

import json
import shutil
import subprocess

import onnx
import pytest

from plait.cli import main
from plait.executor.aot.firmware import SEMIHOST_C, SEMIHOST_H, _linker, _startup
from plait.executor.aot.insn_plugin import plugin_library, read_counts, write_ranges
from plait.executor.aot.measure import function_ranges
from plait.executor.aot.qemu import run_firmware
from plait.placement.cost import CostDatabase
from plait.target.boards import get_board
from plait.testing import onnx_models

HAVE = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None
pytestmark = pytest.mark.skipif(not HAVE, reason="needs qemu-system-arm and arm-none-eabi-gcc")

SPIN = """__attribute__((naked, noinline)) void spin(void) {
  __asm volatile(".syntax unified\\n movs r0, #100\\n1: subs r0, r0, #1\\n bne 1b\\n bx lr");
}
int main(void) { spin(); spin(); spin(); return 0; }
"""


def test_plugin_counts_a_known_loop_exactly(tmp_path):
    board = get_board("mps2-an385")
    for name, text in (("startup.c", _startup(board)), ("semihost.c", SEMIHOST_C), ("semihost.h", SEMIHOST_H),
                       ("board.ld", _linker(board)), ("main.c", SPIN)):
        (tmp_path / name).write_text(text)
    subprocess.run(["arm-none-eabi-gcc", "-mcpu=cortex-m0", "-mthumb", "-O2", "-nostartfiles", "--specs=nano.specs",
                    "--specs=nosys.specs", "-T", "board.ld", "startup.c", "semihost.c", "main.c", "-o", "fw.elf"],
                   cwd=tmp_path, check=True)
    r = function_ranges(tmp_path / "fw.elf", ["spin"])
    write_ranges(tmp_path / "r.txt", [r["spin"]])
    so = plugin_library(tmp_path / "cc")
    run_firmware(tmp_path / "fw.elf", board, tmp_path, 20,
                 ["-plugin", f"{so},in={tmp_path / 'r.txt'},out={tmp_path / 'c.txt'}"])
    c = read_counts(tmp_path / "c.txt", 1)
    # movs + 100 x (subs, bne) + bx lr = 202 per call, 3 calls
    assert c.ranges == [(606, 3)]
    assert [m[0] for m in c.marks] == [0, 0, 0]
    # between two entries: the 202 of spin and main's next bl
    assert [b - a for (_, a), (_, b) in zip(c.marks, c.marks[1:])] == [203, 203]
    assert c.total > 606


def test_measure_writes_a_database_and_explain_costs_shows_measured(tmp_path, capsys):
    model = tmp_path / "mlp.onnx"
    onnx.save(onnx_models.mlp(sizes=(16, 32, 4)), model)
    out = tmp_path / "costs.json"
    target = "c -mcpu=cortex-m7f"
    assert main(["measure", str(model), "--target", target, "-o", str(out), "--cache-dir", str(tmp_path / "cc")]) == 0
    data = json.loads(out.read_text())
    assert {e["source"] for e in data["entries"]} == {"measured qemu"}
    assert all(e["instructions"] > 0 and e["board"] == "mps2-an500" and e["cpi"] == 0.8 for e in data["entries"])
    assert abs(data["entries"][0]["seconds"] - data["entries"][0]["instructions"] * 0.8 / 216e6) < 1e-12
    assert len(CostDatabase.load(out)) == len(data["entries"])
    capsys.readouterr()
    assert main(["explain", str(model), "--target", target, "--costs", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    calls = [c for c in report["calls"] if c["op"] not in ("reshape", "flatten")]
    assert calls and all(c["costs"]["c"]["source"] == "measured" and
                         c["costs"]["c"]["detail"].startswith("measured qemu: ") for c in calls)
    sigs = {e["op"] for e in data["entries"]}
    assert len(sigs) == len(data["entries"])
    # the fitted calibration of the piece's target: one factor per op and "*"
    cal = {c["op"]: c["factor"] for c in data["calibration"]}
    assert set(cal) == {"*", "nn.dense", "add", "nn.relu", "nn.softmax"} and all(k > 0 for k in cal.values())
    assert main(["compile", str(model), "--target", target, "--costs", str(out), "-o", str(tmp_path / "art")]) == 0


def test_measure_composite_measures_every_cortex_m_piece(tmp_path, capsys):
    model = tmp_path / "mlp.onnx"
    onnx.save(onnx_models.mlp(sizes=(16, 32, 4)), model)
    ct = "small: c -mcpu=cortex-m0; big: c -mcpu=cortex-m7f; host: c"
    out = tmp_path / "costs.json"
    assert main(["measure", str(model), "--target", ct, "-o", str(out), "--cache-dir", str(tmp_path / "cc")]) == 0
    said = capsys.readouterr().out
    assert "piece 'small' (c -mcpu=cortex-m0) on board mps2-an385:" in said
    assert "piece 'host' (c): not a Cortex-M core, not measured" in said
    data = json.loads(out.read_text())
    by_target = {}
    for e in data["entries"]:
        by_target.setdefault(e["target"], []).append(e)
    m0 = [e for e in by_target["c -mcpu=cortex-m0"]]
    assert m0 and all(e["board"] == "mps2-an385" and "-board=mps2-an385" in e["measured_as"] for e in m0)
    assert len(by_target) == 2
    # soft float: the M0 runs many more instructions for the same call
    m7 = {e["op"]: e["instructions"] for e in by_target["c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard"]}
    dense = [e for e in m0 if e["op"].startswith("nn.dense")][0]
    assert dense["instructions"] > 5 * m7[dense["op"]]
    capsys.readouterr()
    assert main(["explain", str(model), "--target", ct, "--costs", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for c in report["calls"]:
        if c["op"] not in ("reshape", "flatten"):
            assert c["costs"]["small"]["source"] == c["costs"]["big"]["source"] == "measured"


@pytest.mark.parametrize("target,msg", [
    ("c", "plait measure needs a Cortex-M target (one of cortex-m0, cortex-m0plus, cortex-m3, cortex-m4, "
          "cortex-m55, cortex-m7), got 'c'"),
    ("a: c; b: c -opt-level=3", "plait measure: no piece of 'a: c; b: c -opt-level=3' is a Cortex-M core"),
])
def test_measure_needs_a_cortex_m_piece(tmp_path, capsys, target, msg):
    model = tmp_path / "mlp.onnx"
    onnx.save(onnx_models.mlp(sizes=(16, 32, 4)), model)
    assert main(["measure", str(model), "--target", target, "-o", str(tmp_path / "c.json")]) == 1
    assert capsys.readouterr().err.strip() == f"plait: error: {msg}"
