"""How much faster ``plait tune`` finishes with 2 local workers than with 1 (issue 16: at least 1.5x).

    python bench/tune_speed.py                       # ds_cnn on c, wall measurement, 16 trials per function
    python bench/tune_speed.py --measure analytic --trials 32 --model ds_cnn --target "host: c; blas: blas"
    python bench/tune_speed.py --workers 1,2,4 --json out.json

Each run tunes the same model with the same seed (so the same candidates) from a fresh, empty C compile
cache (``--cache-dir``: nothing compiled by an earlier run is reused). Wall time is of the whole
:func:`plait.tune.tune` call (finding the workloads included). Also printed: the functions' default
and best times summed (a model-level view of what tuning found; wall measurements on a busy machine
vary: compare within one run). ``--rounds`` repeats each setting in alternation and keeps the median.
The machine is shared: a busy one inflates both settings, rerun for the quietest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from plait.frontend.onnx import from_onnx  # noqa: E402
from plait.testing.onnx_models import MODELS  # noqa: E402
from plait.tune import tune  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="ds_cnn", choices=sorted(MODELS))
    ap.add_argument("--target", default="c")
    ap.add_argument("--measure", default="wall", choices=("wall", "analytic"))
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", default="1,2", help="worker counts, comma-separated (the first is the baseline)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each worker count, alternated (median kept)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]
    mod = from_onnx(MODELS[args.model]())
    times: dict[int, list[float]] = {w: [] for w in workers}
    found: dict[int, tuple[int, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="plait_tune_speed_") as tmp:
        for r in range(args.rounds):
            for w in workers:
                cache = os.path.join(tmp, f"cc_{w}_{r}")  # fresh: the C compiler runs for every candidate
                t0 = time.perf_counter()
                db, info = tune(mod, args.target, trials=args.trials, seed=args.seed, measure=args.measure, jobs=w,
                                cache_dir=cache)
                times[w].append(time.perf_counter() - t0)
                recs = db.tuning()
                found[w] = (sum(len(res.configs) for res in info.results.values()),
                            sum(x.info.get("default_seconds", x.seconds) for x in recs), sum(x.seconds for x in recs))
    base = statistics.median(times[workers[0]])
    print(f"plait tune {args.model} --target '{args.target}' --measure {args.measure} --trials {args.trials} "
          f"(seed {args.seed}; {os.cpu_count()} CPUs)")
    print(f"{'workers':>8} {'seconds':>9} {'speedup':>8} {'candidates':>11} {'default us':>11} {'best us':>9}")
    out = {}
    for w in workers:
        t = statistics.median(times[w])
        n, d, b = found[w]
        print(f"{w:>8} {t:>9.2f} {base / t:>7.2f}x {n:>11} {d * 1e6:>11.1f} {b * 1e6:>9.1f}")
        out[str(w)] = {"seconds": t, "runs": times[w], "speedup": base / t, "candidates": n,
                       "default_seconds": d, "best_seconds": b}
    if args.json:
        Path(args.json).write_text(json.dumps({"model": args.model, "target": args.target, "measure": args.measure,
                                               "trials": args.trials, "workers": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
