"""``plait explain``: where every call would run on a composite target, why, and the alternatives."""

from __future__ import annotations

import argparse
import sys

from plait.cli.common import UsageError, placement_flags, placement_options, shape_flags
from plait.cli.shapes import load_with_shapes, parse_input_shapes, parse_opt_level
from plait.cli.messages import say
from plait.errors import PlaitError


def explain_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX model file (.onnx) or Relay text file (.relay)")
    p.add_argument("--target", required=True,
                   help='a composite target, e.g. "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"')
    shape_flags(p)
    placement_flags(p)
    p.add_argument("--graph", metavar="FILE",
                   help="also draw the placement: .svg, .png or .pdf (needs graphviz's dot), or .dot")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")


def cmd_explain(args: argparse.Namespace) -> int:
    import shutil
    from pathlib import Path

    from plait.placement.explain import NO_DOT, explain

    opts = placement_options(args)
    shapes, opt_level = parse_input_shapes(args.input_shapes), parse_opt_level(args.opt_level)
    if args.graph is not None:
        fmt = Path(args.graph).suffix.lower().lstrip(".")
        if fmt not in ("svg", "png", "pdf", "dot", "gv"):
            raise UsageError(f"--graph: cannot draw to '{args.graph}': expected a .svg, .png, .pdf or .dot file")
        if fmt not in ("dot", "gv") and shutil.which("dot") is None:
            raise PlaitError(NO_DOT)
    mod = load_with_shapes(args.model, shapes)
    report = explain(mod, opts["target"], opts["objective"], opts["place"], opts["weight"], opt_level=opt_level)
    print(report.to_json() if args.json else report.text(), end="\n" if args.json else "")
    if args.graph is not None:
        path = report.render(args.graph)
        say(f"wrote the placement drawing to {path}", file=sys.stderr if args.json else sys.stdout)
    return 0
