"""Instruction counts of the int8 models on Cortex-M cores with and without the DSP extension (QEMU).

    python bench/quant_dsp.py                           # the table of docs/quantization.md ("SMLAD")
    python bench/quant_dsp.py --cores cortex-m4f --models cnn

One QEMU run per (model, core) with plait's instruction-counting plugin (:func:`plait.executor.aot.measure.measure`,
what ``plait measure`` does): the instructions of every operator call summed, and of the calls that hold a
``qnn.conv2d``, ``qnn.dense`` or ``qnn.matmul`` (with their fused bias and requantization). Models: the small CNN
of tests/quant (QDQ, per channel, int8 activations) and ``quantized_model("ds_cnn")``; each core's default
requantization. Counts, not time: independent of the machine's load.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import plait  # noqa: E402
from plait.executor.aot.measure import measure  # noqa: E402
from plait.frontend.onnx import from_onnx  # noqa: E402
from plait.testing.quantized import quantize, quantized_model  # noqa: E402

CORES = {"cortex-m0": "c -mcpu=cortex-m0 -ram-kb=256 -board=mps2-an385", "cortex-m3": "c -mcpu=cortex-m3",
         "cortex-m4f": "c -mcpu=cortex-m4f", "cortex-m7f": "c -mcpu=cortex-m7f"}
PRODUCTS = ("qnn.conv2d", "qnn.dense", "qnn.matmul")


def models() -> dict[str, Any]:
    from tests.quant.test_ort_quantized import float_cnn

    return {"cnn": lambda: quantize(float_cnn(), "qdq", True, "int8"), "ds_cnn": lambda: quantized_model("ds_cnn")}


def measure_row(model: Any, target: str, cache: str) -> dict[str, Any]:
    mod = from_onnx(model)
    art = plait.build(mod, target=target, executor="aot",
                      config={"aot.name": "net", "cc.cache_dir": cache, "c.host_simulation": True})
    _, rows = measure(mod, art, cache_dir=cache)
    total = sum(r.instructions for r in rows)
    prod = sum(r.instructions for r in rows if any(op in PRODUCTS for op in r.ops))
    return {"target": target, "instructions": total, "products": prod}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write the rows here too")
    p.add_argument("--cores", default="cortex-m0,cortex-m4f,cortex-m7f", help=f"comma-separated, of {', '.join(CORES)}")
    p.add_argument("--models", default="cnn,ds_cnn", help="comma-separated, of cnn, ds_cnn")
    args = p.parse_args(argv)
    makers = models()
    out = []
    with tempfile.TemporaryDirectory(prefix="plait_quant_dsp_") as cache:
        print(f"{'model':7} {'core':11} {'instructions':>13} {'conv/dense/matmul':>18}")
        for name in args.models.split(","):
            model = makers[name]()
            for core in args.cores.split(","):
                r = {"model": name, "core": core, **measure_row(model, CORES[core], cache)}
                out.append(r)
                print(f"{name:7} {core:11} {r['instructions']:13,} {r['products']:18,}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
