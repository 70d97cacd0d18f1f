"""``plait measure MODEL --target T -o costs.json``: instruction counts of every call under QEMU, as a cost database."""

from __future__ import annotations

import argparse

from plait.cli.messages import say
from plait.cli.shapes import load_with_shapes, parse_input_shapes


def measure_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX model file (.onnx) or Relay text file (.relay)")
    p.add_argument("--target", required=True, help='one Cortex-M piece, e.g. "c -mcpu=cortex-m7f"')
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the cost database to write (JSON)")
    p.add_argument("--input-shapes", action="append", metavar="SHAPES",
                   help='fix symbolic dims of the inputs: "x:1,3,224,224 y:1,10"')
    p.add_argument("--qemu-timeout", type=float, default=120.0, metavar="S", help="time limit of the QEMU run")
    p.add_argument("--cache-dir", metavar="DIR", help="the C compile cache (also holds the QEMU plugin)")


def cmd_measure(args: argparse.Namespace) -> int:
    from plait.driver import build
    from plait.executor.measure import check_measurable, measure

    check_measurable(args.target)
    mod = load_with_shapes(args.model, parse_input_shapes(args.input_shapes))
    art = build(mod, target=args.target, executor="aot",
                config={"aot.name": "measure", "cc.cache_dir": args.cache_dir, "c.host_simulation": True})
    db, rows = measure(mod, art, timeout_s=args.qemu_timeout, cache_dir=args.cache_dir)
    for r in rows:
        say(f"node {r.node:>4}  {r.func:<40} {r.instructions:>14,} instructions")
    from plait.executor.measure import fit_calibration, median_error

    factors = fit_calibration(db, str(art.metadata["target"]), rows)
    say(f"analytic model calibrated x{factors.get('*', 1.0):.3g} (median per op): median error "
        f"{median_error(rows):.0%} before, {median_error(rows, factors):.0%} after")
    db.save(args.output)
    say(f"wrote {len(db)} entries ({len(rows)} calls) to {args.output}")
    return 0
