"""``plait explain``: where every call would run on a composite target, why, and the alternatives."""

from __future__ import annotations

import argparse
import json
import sys

from plait.cli.common import MODEL_HELP, UsageError, placement_flags, placement_options, shape_flags
from plait.cli.shapes import load_with_shapes, parse_input_shapes, parse_opt_level
from plait.cli.messages import say
from plait.errors import PlaitError


def explain_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--target", required=True,
                   help='a composite target, e.g. "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"')
    shape_flags(p)
    placement_flags(p)
    p.add_argument("--graph", metavar="FILE",
                   help="also draw the placement: .svg, .png or .pdf (needs graphviz's dot), or .dot")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")


def memory_plan(placed, ct, ctx) -> dict:
    """The planned graph of a placement (partitioned and lowered as plait.build does, no C compiled and
    no fit check: the summary shows each pool against its piece's RAM), or ``{"error": why}`` when it
    cannot be lowered (the report is still printed; plait compile says why)."""
    from plait.executor.graph_codegen import graph_codegen
    from plait.pipeline import lower_stage

    try:
        lowered = lower_stage(placed, ct, ctx)
        graph, _ = graph_codegen(lowered.mod)
    except PlaitError as exc:
        return {"error": str(exc)}
    return {"pools": [{**p, "ram_bytes": _ram(ct, p["piece"])} for p in graph["pools"]], "planned_graph": graph}


def _ram(ct, piece: str):
    from plait.placement.fit import piece_memory

    try:
        return piece_memory(ct.piece(piece).target).ram_bytes
    except PlaitError:
        return None


def memory_summary(memory: dict) -> str:
    """The memory plan per piece: each pool's bytes against the lower bound and the piece's RAM, and the
    algorithm chosen."""
    from plait.memory.plan import pool_lines

    if "error" in memory:
        return f"memory plan: not available: {memory['error']}\n"
    if not memory:
        return ""
    lines = pool_lines(memory["planned_graph"]) or ["  no pools (the model has no activations or workspaces)"]
    for k, p in enumerate(memory["pools"]):
        if k < len(lines) and p["ram_bytes"]:
            lines[k] += f"; {p['bytes'] / p['ram_bytes']:.0%} of the piece's {p['ram_bytes']:,} B of RAM"
    return "memory plan (activations and workspaces, per piece):\n" + "\n".join(lines) + "\n"


def cmd_explain(args: argparse.Namespace) -> int:
    import shutil
    from pathlib import Path

    from plait.pipeline.explain import explain
    from plait.placement.explain import NO_DOT

    opts = placement_options(args)
    shapes, opt_level = parse_input_shapes(args.input_shapes), parse_opt_level(args.opt_level)
    if args.graph is not None:
        fmt = Path(args.graph).suffix.lower().lstrip(".")
        if fmt not in ("svg", "png", "pdf", "dot", "gv"):
            raise UsageError(f"--graph: cannot draw to '{args.graph}': expected a .svg, .png, .pdf or .dot file")
        if fmt not in ("dot", "gv") and shutil.which("dot") is None:
            raise PlaitError(NO_DOT)
    mod = load_with_shapes(args.model, shapes, args.signature)
    memory: dict = {}
    report = explain(mod, opts["target"], opts["objective"], opts["place"], opts["weight"], opt_level=opt_level,
                     cost_model=opts["cost_model"],
                     then=lambda placed, ct, ctx: memory.update(memory_plan(placed, ct, ctx)))
    if args.json:
        print(json.dumps({**json.loads(report.to_json()),
                          "memory_plan": {k: v for k, v in memory.items() if k != "planned_graph"}},
                         indent=1))
    else:
        text = report.text()
        cut = text.find("\nfacts of the pieces")  # the memory plan goes before the facts
        cut = len(text) if cut < 0 else cut + 1
        print(text[:cut] + memory_summary(memory) + ("\n" if cut < len(text) else "") + text[cut:], end="")
    if args.graph is not None:
        path = report.render(args.graph)
        say(f"wrote the placement drawing to {path}", file=sys.stderr if args.json else sys.stdout)
    return 0
