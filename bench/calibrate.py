"""The placement cost model against wall time: estimate / measured per piece kind and operator family.

    python bench/calibrate.py                     # the bench models, rows c and blas of bench/run.py
    python bench/calibrate.py --models ds_cnn --repeat 50 --json out.json

Each bench model is built for ``host: c; blas: blas`` twice, as bench/run.py's rows: ``c`` (``--place
"*=host"``: every call on the C piece) and ``blas`` (``--place "*=blas?"``). The graph executor's
profile (median of ``--repeat`` runs of each call) is matched to placement's units (fusion groups and
single calls, in execution order, as ``plait measure`` does) and each unit's measured time is divided by
the estimate placement used for it (the sum of its calls' estimates: schedule estimates on c, the
kind's cost hook on blas). The table gives, per piece kind and operator family (a unit's first
non-elementwise operator), the median measured / estimated ratio, the number of units and the range:
the per-family factors a calibration of the analytic model would apply (a ``"calibration"`` section of
a cost database, docs/placement.md). The machine is shared: rerun for the quietest; the header gives the
facts the estimates used (SIMD width, clock: the vector-width class of the blas kind's fit) and the load.

What the ratios showed, and what changed in the models instead of shipping per-family factors
(docs/placement.md, "Host estimates"): a vectorized tile whose width is not a multiple of the lanes
(DS-CNN's rows of 25, MobileNetV2's 6x6 maps) ran at half the estimated speed (the remainder's vectors:
``plait.schedule.cost.vector_ops``); matrix-vector products ran at what L2 streams (``Machine.l1_bytes``,
``l2_bytes_per_cycle``); OpenBLAS ran 1.4x faster than the blas kind's AVX2 fit on an AVX-512 host
(``plait.backends.blas.backend.SGEMM_FITS``, per vector-width class). Then 3x3 convolutions of the same
flops ran 0.7x-1.9x their c estimates in a pattern that two probed host facts explain (plait.target.host):
the effective clock (this VM's cores run at 3.7 GHz, its /proc/cpuinfo says 2596 MHz) and the FMA pass
width (Zen 4 runs 512-bit FMAs as two 256-bit passes: ``plait.schedule.cost.vector_passes``). Units of a
few microseconds also carry the graph executor's ~0.4 us per call, which no estimate includes (the same
on both pieces).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import plait  # noqa: E402
from plait.executor import GraphModule  # noqa: E402
from plait.frontend.onnx import from_onnx  # noqa: E402
from plait.relay.io import make_inputs  # noqa: E402
from plait.testing.onnx_models import MODELS  # noqa: E402

TARGET = "host: c; blas: blas"
ROWS = {"c": "*=host", "blas": "*=blas?"}
ELEMENTWISE = {"add", "multiply", "subtract", "divide", "nn.relu", "clip", "sigmoid", "tanh", "nn.bias_add",
               "erf", "sqrt", "rsqrt", "power", "exp", "negative", "cast"}


def family(group: tuple[Any, ...]) -> str:
    ops = [c.op_name for c in group]
    return next((o for o in ops if o not in ELEMENTWISE), "elementwise")


def measure_model(name: str, repeat: int) -> list[dict[str, Any]]:
    mod = from_onnx(MODELS[name]())
    rows = []
    for row, place in ROWS.items():
        art = plait.build(mod, target=TARGET, place=place)
        gm = GraphModule(art)
        for k, v in make_inputs(mod, {}).items():
            gm.set_input(k, v)
        gm.run()
        prof = [p for p in gm.profile(repeat=repeat) if p["func"] != "copy"]
        a = art.placement
        us = a.units()
        if len(us) != len(prof):
            print(f"{name} {row}: {len(prof)} graph calls but {len(us)} placement units: skipped", file=sys.stderr)
            continue
        for node, g in zip(prof, us):
            est = sum(a[c].estimate.seconds for c in g)
            piece = a[g[0]].piece
            rows.append({"model": name, "row": row, "kind": piece if piece != "host" else "c", "func": node["func"],
                         "family": family(g), "measured_s": node["ms"] * 1e-3, "estimate_s": est,
                         "source": "+".join(sorted({a[c].estimate.source for c in g}))})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    from plait.backends.blas.backend import sgemm_fit
    from plait.schedule import machine_for
    from plait.target import CompositeTarget

    host, blas = CompositeTarget(TARGET).pieces
    m = machine_for(host.target)
    fit, clock = sgemm_fit(blas.target)
    print(f"c: {m.simd_bits}-bit SIMD in {m.fma_bits or m.simd_bits}-bit FMA passes at {m.clock_mhz:g} MHz "
          f"({host.target.facts.clock_mhz.where}); blas: {fit.flops_per_cycle:.1f} flops/cycle at {clock:g} MHz "
          f"({fit.source})")
    print(f"load average before: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = []
    for name in args.models.split(","):
        rows += measure_model(name.strip(), args.repeat)
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    table: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r["estimate_s"] > 0:
            table.setdefault((r["kind"], r["family"]), []).append(r["measured_s"] / r["estimate_s"])
    print(f"{'kind':<6} {'family':<22} {'units':>5} {'measured/estimate':>18} {'min':>7} {'max':>7}")
    factors = {}
    for (kind, fam), v in sorted(table.items()):
        med = statistics.median(v)
        factors.setdefault(kind, {})[fam] = med
        print(f"{kind:<6} {fam:<22} {len(v):>5} {med:>17.2f}x {min(v):>6.2f}x {max(v):>6.2f}x")
    totals = {}
    for r in rows:
        t = totals.setdefault((r["model"], r["row"]), [0.0, 0.0])
        t[0] += r["measured_s"]
        t[1] += r["estimate_s"]
    print(f"\n{'model':<22} {'row':<5} {'measured ms':>12} {'estimate ms':>12} {'ratio':>7}")
    for (m, row), (meas, est) in totals.items():
        print(f"{m:<22} {row:<5} {meas * 1e3:>12.3f} {est * 1e3:>12.3f} {meas / est if est else np.nan:>6.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "factors": factors}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
