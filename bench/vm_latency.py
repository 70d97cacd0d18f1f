"""Latency of the VM executor vs the Graph executor on the static bench models (same build target, same run).

    python bench/vm_latency.py                          # every bundled model
    python bench/vm_latency.py --models mlp,ds_cnn --repeat 200 --json out.json

Each model is built twice for target ``c`` (``executor="graph"`` and ``executor="vm"``, one compile
cache), then both run the same inputs, end to end (inputs in, outputs out), in alternation (one run of
each per round, so that other load on the machine affects them alike): warmup rounds, then the median
of the timed runs. The table gives both medians and ``vm / graph`` (the issue's acceptance: at most
1.15 on every model); the outputs are compared (bit-identical: the same lowered functions run).
Exit status 1 when a ratio is above ``--limit``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from plait.testing.onnx_models import MODELS  # noqa: E402


def alternating_medians_ms(fns: list[Callable[[], Any]], repeat: int, warmup: int) -> list[float]:
    """The median wall time (ms) of each of ``fns``, run in alternation: ``warmup`` rounds, then ``repeat``."""
    for _ in range(warmup):
        for f in fns:
            f()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, f in enumerate(fns):
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    return [statistics.median(t) * 1e3 for t in times]


def measure(name: str, repeat: int, warmup: int, cache_dir: str) -> dict[str, Any]:
    """Build ``name`` for both executors and time them on the same inputs."""
    import plait
    from plait.executor import GraphModule, VirtualMachine
    from plait.frontend.onnx import from_onnx
    from plait.relay.io import make_inputs

    model = MODELS[name]()
    config = {"cc.cache_dir": cache_dir}
    gm = GraphModule(plait.build(from_onnx(model), target="c", executor="graph", config=config))
    vm = VirtualMachine(plait.build(from_onnx(model), target="c", executor="vm", config=config))
    feeds = make_inputs(from_onnx(model), {}, seed=0)
    same = all(np.array_equal(a, b) for a, b in zip(gm(**feeds), vm(**feeds)))
    graph_ms, vm_ms = alternating_medians_ms([lambda: gm(**feeds), lambda: vm(**feeds)], repeat, warmup)
    return {"graph_ms": graph_ms, "vm_ms": vm_ms, "ratio": vm_ms / graph_ms, "identical": same}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated (default: {','.join(MODELS)})")
    p.add_argument("--repeat", type=int, default=100, help="timed rounds (default 100)")
    p.add_argument("--warmup", type=int, default=10, help="warmup rounds (default 10)")
    p.add_argument("--limit", type=float, default=1.15, help="the largest acceptable vm/graph ratio (default 1.15)")
    p.add_argument("--json", help="write the results to this JSON file")
    args = p.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)} (models: {', '.join(MODELS)})")
    results: dict[str, Any] = {}
    print(f"{'model':<16} {'graph ms':>10} {'vm ms':>10} {'vm/graph':>9}  outputs")
    with tempfile.TemporaryDirectory(prefix="plait-vm-bench-") as cache:
        for name in names:
            r = results[name] = measure(name, args.repeat, args.warmup, cache)
            print(f"{name:<16} {r['graph_ms']:>10.4f} {r['vm_ms']:>10.4f} {r['ratio']:>9.3f}  "
                  f"{'identical' if r['identical'] else 'DIFFERENT'}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    bad = [n for n, r in results.items() if r["ratio"] > args.limit or not r["identical"]]
    if bad:
        print(f"above {args.limit} or different outputs: {', '.join(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
