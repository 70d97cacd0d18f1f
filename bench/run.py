"""Latency of plait (graph executor) vs ONNX Runtime single-thread and numpy, on the reference models.

    python bench/run.py                               # all models, target c
    python bench/run.py --models mlp,ds_cnn --repeat 50 --target "c" --json out.json

Everything is measured in the same process and run: for each model, plait builds it (compile time
includes the C compiler: a fresh compile cache is used unless --cache), then plait, ONNX Runtime
(intra_op_num_threads=1, inter_op_num_threads=1, sequential execution) and the numpy reference
interpreter each run the same inputs: warmup runs, then the median of the timed runs. plait and ORT
are timed end to end (inputs in, outputs out) and in alternation (one run of each per round, so that
other load on the machine affects both alike); numpy gets fewer runs (a time budget) on big models.
The outputs are compared (max abs diff of plait vs ORT).

``--json`` writes ``{"models": {NAME: {"plait_ms", "ort_ms", "ratio", "compile_s", "numpy_ms",
"max_abs_diff", "target"}}, "machine": {...}}`` so that results can be compared across commits.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from plait.testing.onnx_models import MODELS  # noqa: E402


def time_ms(fn: Callable[[], Any], repeat: int, warmup: int, budget_s: float | None = None) -> float:
    """Median wall time of ``fn`` in milliseconds over ``repeat`` runs after ``warmup`` runs
    (fewer runs, at least 3, if ``budget_s`` seconds are spent first)."""
    for _ in range(warmup):
        fn()
    times = []
    spent = 0.0
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
        if budget_s is not None and spent > budget_s and len(times) >= 3:
            break
    return statistics.median(times) * 1e3


def time_interleaved_ms(fns: list[Callable[[], Any]], repeat: int, warmup: int) -> list[float]:
    """Median wall times (ms) of several functions measured in alternation (one run of each per
    round), so that a change in machine load affects them alike."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return [statistics.median(t) * 1e3 for t in times]


def feeds_for(model: Any, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in model.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def ort_session(model: Any) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def bench_model(name: str, target: str, repeat: int, warmup: int, numpy: bool, cache_dir: str | None,
                profile: int = 0) -> dict[str, Any]:
    import plait
    from plait.executor import GraphModule
    from plait.frontend.onnx import from_onnx
    from plait.relay import flatten_value, run

    model = MODELS[name]()
    feeds = feeds_for(model)
    mod = from_onnx(model)
    config = {"cc.cache_dir": cache_dir} if cache_dir else {}
    t0 = time.perf_counter()
    art = plait.build(mod, target=target, config=config)
    compile_s = time.perf_counter() - t0
    gm = GraphModule(art)
    sess = ort_session(model)

    got = gm(**feeds)
    want = sess.run(None, feeds)
    diff = max(float(np.max(np.abs(g - w))) if g.size else 0.0 for g, w in zip(got, want))

    row: dict[str, Any] = {"target": target, "compile_s": round(compile_s, 3), "max_abs_diff": diff}
    row["plait_ms"], row["ort_ms"] = time_interleaved_ms([lambda: gm(**feeds), lambda: sess.run(None, feeds)],
                                                         repeat, warmup)
    row["ratio"] = row["plait_ms"] / row["ort_ms"]
    if profile:
        calls = sorted(gm.profile(repeat=min(repeat, 10)), key=lambda c: -c["ms"])
        row["slowest_calls"] = [{"func": c["func"], "ms": round(c["ms"], 4)} for c in calls[:profile]]
    if numpy:
        ref = flatten_value(run(mod, feeds))
        row["numpy_diff"] = max(float(np.max(np.abs(r - w))) if r.size else 0.0 for r, w in zip(ref, want))
        row["numpy_ms"] = time_ms(lambda: run(mod, feeds), repeat, 1, budget_s=2.0)
    return row


def machine() -> dict[str, Any]:
    import onnxruntime

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "onnxruntime": onnxruntime.__version__}


def table(results: dict[str, dict[str, Any]]) -> str:
    head = f"{'model':22s} {'plait ms':>10s} {'ORT ms':>10s} {'plait/ORT':>10s} {'numpy ms':>10s} " \
           f"{'compile s':>10s} {'max|diff|':>10s}"
    lines = [head, "-" * len(head)]
    for name, r in results.items():
        if "error" in r:
            lines.append(f"{name:22s} error: {r['error']}")
            continue
        numpy_ms = f"{r['numpy_ms']:10.3f}" if "numpy_ms" in r else f"{'-':>10s}"
        lines.append(f"{name:22s} {r['plait_ms']:10.3f} {r['ort_ms']:10.3f} {r['ratio']:9.2f}x {numpy_ms} "
                     f"{r['compile_s']:10.2f} {r['max_abs_diff']:10.2e}")
        for c in r.get("slowest_calls", []):
            lines.append(f"{'':24s}{c['ms']:10.3f} ms  {c['func']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated (default: {','.join(MODELS)})")
    p.add_argument("--repeat", type=int, default=30, help="timed runs per measurement (median; default 30)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    p.add_argument("--target", default="c", help='plait target (default "c")')
    p.add_argument("--json", help="write the results to this JSON file")
    p.add_argument("--no-numpy", action="store_true", help="skip the numpy reference interpreter")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="also show the N slowest calls of each model (graph executor profile)")
    p.add_argument("--cache", action="store_true", help="use the default C compile cache (compile_s then "
                                                          "excludes the C compiler when the code is unchanged)")
    args = p.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        p.error(f"unknown model '{unknown[0]}' (models: {', '.join(MODELS)})")

    from plait.errors import PlaitError

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="plait-bench-cc-") as tmp:
        for name in names:
            try:
                results[name] = bench_model(name, args.target, args.repeat, args.warmup, not args.no_numpy,
                                            None if args.cache else tmp, args.profile)
            except PlaitError as exc:
                results[name] = {"target": args.target, "error": str(exc).splitlines()[0]}
            print(f"  {name}: done", file=sys.stderr, flush=True)
    print(f"target: {args.target}   ORT: 1 thread, sequential   median of {args.repeat} runs after {args.warmup} warmup")
    print(table(results))
    if args.json:
        out = {"models": results, "machine": machine(), "repeat": args.repeat, "warmup": args.warmup}
        Path(args.json).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
