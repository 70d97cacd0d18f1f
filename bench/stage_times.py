"""Per-stage build times of the bench models with a warm compile cache, and placement's share.

    python bench/stage_times.py                                   # every bench model, host: c; blas: blas
    python bench/stage_times.py --models ds_cnn --target "host: c; blas: blas" --repeat 5

Each model is built once to fill a fresh C compile cache (config key ``cc.cache_dir``), then
``--repeat`` more times with that warm cache (a fresh import each time; every Python stage runs
again, the C compiler does not). The lowering cache is per build, so these builds lower everything
again. Printed per model: the median seconds of each top-level stage (the artifact's ``timings``:
nested stages such as ``fuse_ops`` inside ``lower`` are left out of the sum), the build's total,
and ``place / total`` (the solver; ``price``, before it, lowers and prices the calls and fusion groups:
the lowering the build then reuses). The machine may be busy: rerun for the quietest figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import plait  # noqa: E402
from plait.testing.onnx_models import MODELS  # noqa: E402

TOP = ("infer_type", "fold_constant", "fold_batch_norm", "price", "place", "partition", "lower",
       "lift_workspaces", "check_memory_fit", "codegen_pieces", "graph_executor_codegen", "total")


def stage_times(name: str, target: str, repeat: int) -> dict[str, float]:
    """Median seconds per top-level stage of ``repeat`` warm-cache builds of bundled model ``name``."""
    cache = tempfile.mkdtemp(prefix="plait-stages-")
    plait.build(plait.from_onnx(MODELS[name]()), target, config={"cc.cache_dir": cache})  # fills the C cache
    runs: dict[str, list[float]] = {}
    for _ in range(repeat):
        art = plait.build(plait.from_onnx(MODELS[name]()), target, config={"cc.cache_dir": cache})
        sums: dict[str, float] = {}
        for stage, secs in art.timings:
            if stage in TOP:
                sums[stage] = sums.get(stage, 0.0) + secs
        for stage, secs in sums.items():
            runs.setdefault(stage, []).append(secs)
    return {stage: statistics.median(v) for stage, v in runs.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated (default: {','.join(MODELS)})")
    p.add_argument("--target", default="host: c; blas: blas", help="plait target (default: 'host: c; blas: blas')")
    p.add_argument("--repeat", type=int, default=3, help="warm builds per model (median; default 3)")
    args = p.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown or args.repeat < 1:
        print(f"stage_times: unknown model(s) {', '.join(unknown)} (have: {', '.join(MODELS)})" if unknown
              else "stage_times: --repeat must be >= 1", file=sys.stderr)
        return 2
    print(f"target {args.target!r}, warm C compile cache, median of {args.repeat} builds (seconds)")
    for name in names:
        t = stage_times(name, args.target, args.repeat)
        total = t.get("total", 0.0)
        print(f"\n{name}")
        for stage in TOP:
            if stage in t:
                print(f"  {stage:<24} {t[stage]:8.3f}")
        if not total:
            print("  (no total)")
            continue
        print(f"  place / total            {t.get('place', 0.0) / total:8.1%}")
        print(f"  (price + place) / total  {(t.get('price', 0.0) + t.get('place', 0.0)) / total:8.1%}"
              "   (price: lowering + costs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
