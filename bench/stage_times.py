"""Per-stage build times of the bench models with a warm compile cache, and placement's share.

    python bench/stage_times.py                                   # every bench model, host: c; blas: blas
    python bench/stage_times.py --models ds_cnn --target "host: c; blas: blas" --repeat 5

Each model is built once to fill a fresh C compile cache (config key ``cc.cache_dir``), then
``--repeat`` more times with that warm cache (a fresh import each time; every Python stage runs
again, the C compiler does not). The lowering cache is per build, so these builds lower everything
again. Printed per model: the median seconds of each top-level stage (the artifact's ``timings``:
nested stages such as ``fuse_ops`` inside ``lower`` are left out of the sum), the build's total,
and the shares: ``place / total`` (the solver), ``(price + place) / total`` (``price``, before it,
lowers and prices the calls and fusion groups: the lowering the ``lower`` stage then takes from the
cache) and ``placement's own / total`` (price without the time it spends lowering, measured around
``LoweringCache.lower``, plus place). The machine may be busy: rerun for the quietest figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import plait  # noqa: E402
from plait.testing.onnx_models import MODELS  # noqa: E402

TOP = ("infer_type", "fold_constant", "fold_batch_norm", "price", "place", "partition", "lower",
       "lift_workspaces", "check_memory_fit", "codegen_pieces", "graph_executor_codegen", "total")


class LoweringClock:
    """Instrument + wrapper: seconds spent lowering (LoweringCache misses: TE compute, schedule, TIR)
    inside each top-level stage, so that pricing's lowering (which default lowering then reuses from the
    cache) can be told from placement's own work."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.seconds: dict[str, float] = {}

    def before(self, p, mod) -> None:
        self.stack.append(p.name)

    def after(self, p, mod) -> None:
        self.stack.pop()

    @contextmanager
    def counting(self):
        from plait.lowering.cache import LoweringCache

        real = LoweringCache.lower

        def timed(cache, *args, **kwargs):
            start = time.perf_counter()
            try:
                return real(cache, *args, **kwargs)
            finally:
                if self.stack:
                    top = self.stack[0]
                    self.seconds[top] = self.seconds.get(top, 0.0) + time.perf_counter() - start

        LoweringCache.lower = timed
        try:
            yield self
        finally:
            LoweringCache.lower = real


def stage_times(name: str, target: str, repeat: int) -> dict[str, float]:
    """Median seconds per top-level stage of ``repeat`` warm-cache builds of bundled model ``name``; also
    ``price.lowering``: the part of ``price`` spent lowering functions (what default lowering reuses)."""
    cache = tempfile.mkdtemp(prefix="plait-stages-")
    plait.build(plait.from_onnx(MODELS[name]()), target, config={"cc.cache_dir": cache})  # fills the C cache
    runs: dict[str, list[float]] = {}
    for _ in range(repeat):
        clock = LoweringClock()
        with clock.counting():
            art = plait.build(plait.from_onnx(MODELS[name]()), target, config={"cc.cache_dir": cache},
                              instruments=[clock])
        sums: dict[str, float] = {"price.lowering": clock.seconds.get("price", 0.0)}
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
        own = t.get("price", 0.0) - t.get("price.lowering", 0.0) + t.get("place", 0.0)
        print(f"  price: lowering          {t.get('price.lowering', 0.0):8.3f}   (TIR the lower stage then reuses)")
        print(f"  place / total            {t.get('place', 0.0) / total:8.1%}   (the solver)")
        print(f"  (price + place) / total  {(t.get('price', 0.0) + t.get('place', 0.0)) / total:8.1%}"
              "   (with the lowering pricing does for the build)")
        print(f"  placement's own / total  {own / total:8.1%}   (price without its lowering, + place)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
