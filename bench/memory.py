"""Arena bytes of every memory-planning algorithm on the bench models, against the lower bound.

    python bench/memory.py                                  # every bench model, target c
    python bench/memory.py --models ds_cnn,mlp --align 64
    python bench/memory.py --target "host: c; acc: c -mcpu=cortex-m7f" --json out.json
    python bench/memory.py path/to/model.onnx

For each model the module is lowered as ``plait.build`` lowers it (no C is compiled), the lowered
``main`` is serialized by the graph executor's codegen and its memory planned
(:func:`plait.memory.plan.plan_memory`, every algorithm of :data:`plait.memory.algorithms.ALGORITHMS`
run on every pool). Printed per pool: each algorithm's pool bytes, the lower bound (the most bytes live
at one time, each buffer rounded up to the alignment), the plan chosen and its excess over the lower
bound; ``opt`` marks a size the exact solver proved optimal. The pool sizes are deterministic (no
wall-time limit anywhere), so two runs print the same table.

``--json`` writes ``{"align", "target", "models": {NAME: [{"pool", "piece", "lower_bound", "chosen",
"algorithm", "optimal", "sizes": {ALG: bytes}}]}}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from plait.testing.onnx_models import MODELS  # noqa: E402


def pools_of(model: Any, target: str, align: int) -> list[dict[str, Any]]:
    """The planned pools of ``model`` (an ONNX ModelProto) lowered for ``target``."""
    import plait
    from plait.driver import _composite, lowered_module
    from plait.executor.graph_codegen import graph_codegen
    from plait.ir.transform import PassContext
    from plait.lowering.cache import LoweringCache
    from plait.memory.plan import plan_memory

    mod = plait.from_onnx(model)
    with LoweringCache().active():
        lowered = lowered_module(mod, _composite(target), PassContext())
    graph, _ = graph_codegen(lowered.mod)
    plan_memory(graph, "auto", align)
    return [{"pool": p["name"], "piece": p["piece"], "lower_bound": p["lower_bound"], "chosen": p["bytes"],
             "algorithm": p["algorithm"], "optimal": p["optimal"], "sizes": dict(p["sizes"])}
            for p in graph["pools"]]


def table(results: dict[str, list[dict[str, Any]]]) -> str:
    from plait.memory.algorithms import ALGORITHMS

    head = ["model", "pool", *ALGORITHMS, "lower bound", "chosen", "excess"]
    rows = [head]
    for name, pools in results.items():
        for p in pools:
            cells = []
            for a in ALGORITHMS:
                b = p["sizes"].get(a)
                opt = " opt" if a == "ilp" and p["optimal"] and b == p["chosen"] else ""
                cells.append("-" if b is None else f"{b:,}{opt}")
            lb = p["lower_bound"]
            excess = (p["chosen"] - lb) / lb * 100 if lb else 0.0
            rows.append([name, p["pool"], *cells, f"{lb:,}", f"{p['chosen']:,} ({p['algorithm']})",
                         f"{excess:.2f}%"])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/memory.py", description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="*", help="ONNX files (or bundled model names) instead of --models")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated (default: {','.join(MODELS)})")
    p.add_argument("--target", default="c", help='target or composite target (default "c")')
    p.add_argument("--align", type=int, default=16, help="byte alignment of every buffer (default 16)")
    p.add_argument("--json", help="also write the results to this JSON file")
    args = p.parse_args(argv)
    import onnx

    names = args.files or [m for m in args.models.split(",") if m]
    results: dict[str, list[dict[str, Any]]] = {}
    for n in names:
        if n in MODELS and not os.path.exists(n):
            model = MODELS[n]()
        elif os.path.exists(n):
            model = onnx.load(n)
        else:
            p.error(f"unknown model '{n}' (models: {', '.join(MODELS)}; or give an ONNX file)")
        results[n] = pools_of(model, args.target, args.align)
    print(f"pool bytes per algorithm, target '{args.target}', alignment {args.align}")
    print(table(results), end="")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"align": args.align, "target": args.target, "models": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
