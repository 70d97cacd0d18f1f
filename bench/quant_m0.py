"""Instruction counts of ds_cnn, float and int8, on a Cortex-M0 and a Cortex-M7F (QEMU, plait measure).

    python bench/quant_m0.py                      # the table of docs/quantization.md ("Microcontrollers")
    python bench/quant_m0.py --json out.json

Each row builds one model for one core with the AOT executor, runs its firmware once under QEMU with
plait's instruction-counting TCG plugin (:func:`plait.executor.aot.measure.measure`, what ``plait measure``
does) and prints the instructions of every operator call summed, split into the convolutions (with
their fused bias, activation and requantization), the rest, and the analytic model's estimate of the same
calls in cycles (the placement cost model, uncalibrated; fixed-point requantizations priced as such), so
that the two can be compared core by core.
The int8 model is ``plait.testing.quantized.quantized_model("ds_cnn")`` (QDQ, per-channel int8 weights,
int8 activations, ONNX Runtime's ``quantize_static`` on fixed-seed calibration data); requantization
``fixed`` (the M0's default) and ``float`` (the M7F's default) are both measured on both cores.
Instruction counts do not depend on the machine's load (QEMU counts, it does not time); the soft-float
ones depend a little on the data (a fixed-seed input).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import plait  # noqa: E402
from plait.executor.aot.measure import CPI, core_of, measure  # noqa: E402
from plait.frontend.onnx import from_onnx  # noqa: E402
from plait.target import Target  # noqa: E402
from plait.testing.onnx_models import MODELS  # noqa: E402
from plait.testing.quantized import quantized_model  # noqa: E402

#: the M0 runs on mps2-an385 (same ARMv6-M instructions) with the chip's RAM raised: the microbit's 16 KiB
#: hold neither model's activations (docs/embedded.md)
CORES = {"cortex-m0": "c -mcpu=cortex-m0 -ram-kb=256 -board=mps2-an385", "cortex-m7f": "c -mcpu=cortex-m7f"}
#: (row name, model, the target's extra option)
ROWS = (("float", "float", ""), ("int8 fixed", "int8", " -requantize=fixed"),
        ("int8 float", "int8", " -requantize=float"))
CONVS = ("nn.conv2d", "qnn.conv2d")


def measure_row(model: Any, target: str, cache: str) -> dict[str, Any]:
    """Instructions of every call of ``model`` on ``target`` (one QEMU run): total, in convolution
    groups, elsewhere; and the analytic estimate of the same calls in cycles."""
    mod = from_onnx(model)
    art = plait.build(mod, target=target, executor="aot",
                      config={"aot.name": "kws", "cc.cache_dir": cache, "c.host_simulation": True})
    t = Target(target)
    _, rows = measure(mod, art, cache_dir=cache)
    clock = float(t.facts.clock_mhz.value) * 1e6
    conv = sum(r.instructions for r in rows if any(op in CONVS for op in r.ops))
    total = sum(r.instructions for r in rows)
    analytic = sum(sum(r.analytic) for r in rows) * clock
    return {"target": target, "instructions": total, "conv": conv, "other": total - conv,
            "analytic_cycles": analytic, "cpi": CPI[core_of(t)]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write the rows here too")
    p.add_argument("--cores", default=",".join(CORES), help=f"comma-separated, of {', '.join(CORES)}")
    args = p.parse_args(argv)
    models = {"float": MODELS["ds_cnn"](), "int8": quantized_model("ds_cnn")}
    out = []
    with tempfile.TemporaryDirectory(prefix="plait_quant_m0_") as cache:
        print(f"{'core':11} {'model':11} {'instructions':>13} {'convolutions':>13} {'other':>11} "
              f"{'vs float':>9} {'analytic cycles':>16} {'analytic vs float':>18}")
        for core in args.cores.split(","):
            base: dict[str, Any] = {}
            for name, model, extra in ROWS:
                target = CORES[core] + (extra if model == "int8" else "")
                r = {"core": core, "model": name, **measure_row(models[model], target, cache)}
                base = base or r
                out.append(r)
                print(f"{core:11} {name:11} {r['instructions']:13,} {r['conv']:13,} {r['other']:11,} "
                      f"{r['instructions'] / base['instructions']:9.2f} {r['analytic_cycles']:16,.0f} "
                      f"{r['analytic_cycles'] / base['analytic_cycles']:18.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
