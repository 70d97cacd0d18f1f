"""``plait measure MODEL --target T -o costs.json``: instruction counts of every call under QEMU, as a cost database."""

from __future__ import annotations

import argparse

from plait.cli.common import MODEL_HELP, signature_flag
from plait.cli.messages import say
from plait.cli.shapes import load_with_shapes, parse_input_shapes


def measure_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--target", required=True,
                   help='a Cortex-M target, e.g. "c -mcpu=cortex-m7f", or a composite target: each Cortex-M piece is '
                        "measured running the whole model alone")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the cost database to write (JSON)")
    signature_flag(p)
    p.add_argument("--input-shapes", action="append", metavar="SHAPES",
                   help='fix symbolic dims of the inputs: "x:1,3,224,224 y:1,10"')
    p.add_argument("--qemu-timeout", type=float, default=120.0, metavar="S", help="time limit of the QEMU run")
    p.add_argument("--cache-dir", metavar="DIR", help="the C compile cache (also holds the QEMU plugin)")


def cmd_measure(args: argparse.Namespace) -> int:
    from plait.driver import build
    from plait.executor.aot.measure import (
        CPI, MeasureError, core_of, fit_calibration, measure, measuring_target, median_error,
    )
    from plait.placement.cost import CostDatabase
    from plait.target import CompositeTarget

    ct = CompositeTarget(args.target)
    mod = load_with_shapes(args.model, parse_input_shapes(args.input_shapes), args.signature)
    db, done = CostDatabase(), set()
    for piece in ct.pieces:
        t = piece.target
        if str(t) in done:
            continue
        if core_of(t) not in CPI:
            if len(ct.pieces) == 1:
                raise MeasureError(f"plait measure needs a Cortex-M target (one of {', '.join(sorted(CPI))}), "
                                   f"got '{args.target}'")
            say(f"piece '{piece.name}' ({t}): not a Cortex-M core, not measured")
            continue
        # one piece: the target as given; a composite's piece: alone, on a board that holds the model
        run_as = t if len(ct.pieces) == 1 else measuring_target(t)
        art = build(mod, target=run_as, executor="aot",
                    config={"aot.name": "measure", "cc.cache_dir": args.cache_dir, "c.host_simulation": True})
        got, rows = measure(mod, art, timeout_s=args.qemu_timeout, cache_dir=args.cache_dir, key=str(t))
        say(f"piece '{piece.name}' ({t}) on board {art.metadata['firmware']['board']}:")
        for r in rows:
            say(f"  node {r.node:>4}  {r.func:<40} {r.instructions:>14,} instructions")
        factors = fit_calibration(CostDatabase(), str(t), rows)
        say(f"  analytic model calibrated x{factors.get('*', 1.0):.3g} (and per op): median error "
            f"{median_error(rows):.0%} before, {median_error(rows, factors):.0%} after")
        db.merge(got)
        done.add(str(t))
    if not done:
        raise MeasureError(f"plait measure: no piece of '{args.target}' is a Cortex-M core")
    db.save(args.output)
    say(f"wrote {len(db)} entries to {args.output}")
    return 0
