"""Compile time of ``plait.build(..., target="c")`` against model size: is every stage linear?

    python bench/compile_time.py                          # 3 models x 100, 1000, 10000 nodes (about a minute)
    python bench/compile_time.py --models matmul_relu_distinct        # the worst case (a few minutes)
    python bench/compile_time.py --models relu_chain --sizes 100,1000,3000 --stages
    python bench/compile_time.py --json out.json

Models (:mod:`plait.testing.chain_models`): ``matmul_relu`` (MatMul with a small constant and Relu,
alternating: one kernel called n / 2 times), ``residual`` (``relu(matmul(h, W) + h)`` repeated),
``relu_chain`` (Relu calls: they fuse, in groups of at most 256) and ``matmul_relu_distinct``
(like matmul_relu, but every MatMul has other widths, so every kernel is different: the per-kernel
costs, the C compiler's above all). Each model and size is built twice with the same fresh compile
cache (config key ``cc.cache_dir``): *cold* (the C compiler runs) and *warm* (the cached library is
reused; every Python stage runs again). The table gives wall seconds, CPU seconds (this process and
the C compiler: what a busy machine does not inflate) and milliseconds per node; ``--stages`` adds
the cold build's per-stage breakdown (the artifact's ``timings``; nested stages such as
``fuse_ops`` inside ``lower`` are indented). Results up to ``--check-max`` nodes are compared with
the reference interpreter (``plait.relay.run``): a fast compiler that computes something else is
worthless. The machine may be busy: compare ratios within one run, and rerun for the quietest.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import plait  # noqa: E402
from plait.executor import GraphModule  # noqa: E402
from plait.relay import run  # noqa: E402
from plait.testing.chain_models import CHAIN_MODELS, count_calls  # noqa: E402

NESTED = {"fuse_ops": "lower", "lower_to_tir": "lower", "codegen": "codegen_pieces"}


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the C compiler) so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def build_timed(mod: Any, cache_dir: str) -> tuple[Any, float, float]:
    """(artifact, wall seconds, CPU seconds) of one ``plait.build`` for target ``c``. CPU time
    (Python and the C compiler) does not count waiting for the other jobs of a busy machine."""
    gc.collect()
    c0, t0 = cpu_seconds(), time.perf_counter()
    art = plait.build(mod, target="c", config={"cc.cache_dir": cache_dir})
    return art, time.perf_counter() - t0, cpu_seconds() - c0


def check(mod: Any, art: Any, seed: int = 0) -> float:
    """Max abs difference of the compiled model and the interpreter on a random input; raises if
    they disagree."""
    rng = np.random.default_rng(seed)
    inputs = {p.name_hint: rng.standard_normal(tuple(int(d) for d in p.checked_type.shape)).astype(p.checked_type.dtype)
              for p in mod.main.params}
    want = np.asarray(run(mod, inputs))
    (got,) = GraphModule(art)(**inputs)
    scale = max(1.0, float(np.abs(want).max()))
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4, atol=1e-5 * scale):
        raise SystemExit(f"compiled result differs from the interpreter: max abs diff "
                         f"{float(np.abs(got - want).max())} (max |ref| {scale})")
    return float(np.abs(got - want).max())


def stage_lines(timings: list[tuple[str, float]]) -> list[str]:
    """The per-stage breakdown, nested stages indented under their parent."""
    return [("    " if name in NESTED else "  ") + f"{name:<28} {secs:8.3f} s" for name, secs in timings]


def measure(name: str, size: int, check_max: int, warm: bool) -> dict[str, Any]:
    mod = CHAIN_MODELS[name](size)
    nodes = count_calls(mod)
    cache = tempfile.mkdtemp(prefix="plait_cc_bench_")
    try:
        art, cold, cold_cpu = build_timed(mod, cache)
        row: dict[str, Any] = {"model": name, "nodes": nodes, "cold_s": cold, "cold_cpu_s": cold_cpu,
                               "functions": len(art.lib.function_names()) if hasattr(art.lib, "function_names") else None,
                               "stages": [[k, v] for k, v in art.timings]}
        if warm:
            art2, row["warm_s"], row["warm_cpu_s"] = build_timed(mod, cache)
            row["warm_stages"] = [[k, v] for k, v in art2.timings]
        if nodes <= check_max:
            row["max_abs_diff"] = check(mod, art)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="matmul_relu,residual,relu_chain",
                    help="comma-separated, from: " + ", ".join(CHAIN_MODELS) + " (default: the first three)")
    ap.add_argument("--sizes", default="100,1000,10000", help="comma-separated node counts (default 100,1000,10000)")
    ap.add_argument("--check-max", type=int, default=1000, help="compare with the interpreter up to this many nodes")
    ap.add_argument("--no-warm", action="store_true", help="cold builds only")
    ap.add_argument("--stages", action="store_true", help="print the cold build's per-stage breakdown")
    ap.add_argument("--json", help="write the results to this file")
    args = ap.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in CHAIN_MODELS:
            ap.error(f"unknown model '{m}' (choose from {', '.join(CHAIN_MODELS)})")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    rows = []
    print(f"{'model':<20} {'nodes':>6} {'kernels':>7} {'cold s':>7} {'(cpu)':>7} {'warm s':>7} {'(cpu)':>7} "
          f"{'cold ms/node':>12} {'warm ms/node':>12}  check", flush=True)
    for m in models:
        for size in sizes:
            r = measure(m, size, args.check_max, not args.no_warm)
            rows.append(r)
            n = r["nodes"]

            def num(key: str, width: int = 7, scale: float = 1.0) -> str:
                return f"{scale * r[key]:{width}.2f}" if key in r else f"{'-':>{width}}"

            ok = f"ok (max diff {r['max_abs_diff']:.1e})" if "max_abs_diff" in r else "-"
            print(f"{m:<20} {n:>6} {r['functions'] or 0:>7} {num('cold_s')} {num('cold_cpu_s')} {num('warm_s')} "
                  f"{num('warm_cpu_s')} {num('cold_s', 12, 1e3 / n)} {num('warm_s', 12, 1e3 / n)}  {ok}", flush=True)
            if args.stages:
                print("\n".join(stage_lines(r["stages"])), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
