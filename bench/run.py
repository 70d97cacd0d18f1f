"""Latency of plait (graph executor) vs ONNX Runtime single-thread and numpy, on the reference models.

    python bench/run.py                               # all models, rows c, blas, llvm, auto
    python bench/run.py path/to/model.onnx mlp        # any ONNX file (and bundled models by name)
    python bench/run.py --models mlp,ds_cnn --repeat 50 --rows c,blas --json out.json
    python bench/run.py --target "c -opt-level=3" --place ...   # one custom row instead
    python bench/run.py --int8 qdq                     # the quantized models (per-channel int8) instead

Rows (``--rows``, default all of them): ``c`` (target ``c``), ``blas`` (``host: c; blas: blas`` with
``--place "*=blas?"``: every call the blas kind can run on it, the rest on c), ``llvm`` (target
``llvm``; skipped with a note when that kind cannot build here) and ``auto`` (``host: c; blas: blas``
placed by the cost model, no rules). The auto row is checked against the better of ``c`` and
``blas`` (``auto <= min * (1 + --tolerance)`` on the fastest run of each), the issue's acceptance.
``--tuned`` adds the row ``auto+tuned``: first ``plait tune`` of the model on ``host: c; blas: blas``
(wall-clock measurements, ``--tune-trials`` candidates per function; its time is the row's
``tune_s``), then the auto row's build with those tuning records (schedules and measured costs; the
calls blas may take measured alone, as measured entries: placement compares measured with measured);
it is checked like ``auto``.

Everything is measured in the same process and run: for each model, plait builds each row (compile
time includes the C compiler: a fresh compile cache is used unless --cache), then every row and ONNX
Runtime (intra_op_num_threads=1, inter_op_num_threads=1, sequential execution) run the same inputs,
timed end to end (inputs in, outputs out) and in alternation (one run of each per round, so that other
load on the machine affects them alike): warmup rounds, then the median (and the fastest) of the timed
runs; ratios to ORT are of medians. The numpy
reference interpreter gets fewer runs (a time budget) on big models. The outputs are compared (max
abs diff of plait vs ORT).

``--int8 qdq`` (or ``qoperator``) measures the quantized version of each bundled model instead
(:func:`plait.testing.quantized.quantized_model`: ONNX Runtime's ``quantize_static``, per-channel
int8 weights and activations, fixed-seed calibration), plait and ONNX Runtime running that same
quantized model; the table says "int8 qdq" and the agreement column counts int8 steps (the largest
difference of an output in units of its quantization scale) instead of the absolute difference.

Models: the bundled ones by name (``--models``, or as arguments), or any ONNX file given as an
argument (its name in the table is the path as given). A file's inputs are random from a fixed seed
(:func:`plait.relay.io.make_inputs`, the inputs of ``plait run``); its shapes must be static. A
missing file or one that is not a valid ONNX model is an error before anything is measured (exit 2).

``--json`` writes ``{"models": {NAME: {"ort_ms", "ort_best_ms", "numpy_ms", "rows": {ROW: {"plait_ms", "best_ms", "ratio",
"compile_s", "max_abs_diff", "max_int8_steps" (--int8), "target", "place", "tune_s" (auto+tuned)}}}}, "machine": {...}}`` so that results can be
compared across commits.
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


def time_interleaved_ms(fns: list[Callable[[], Any]], repeat: int, warmup: int,
                        best: list[float] | None = None) -> list[float]:
    """Median wall times (ms) of several functions measured in alternation (one run of each per
    round), so that a change in machine load affects them alike. ``best`` (a list) receives the
    fastest run of each (ms)."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    if best is not None:
        best.extend(min(t) * 1e3 for t in times)
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


# row name -> (target, place rules, what it is)
ROWS: dict[str, tuple[str, str | None, str]] = {
    "c": ("c", None, "C through gcc -O3 -march=native"),
    "blas": ("host: c; blas: blas", "*=blas?", "every call the blas kind can run on OpenBLAS, the rest on c"),
    "llvm": ("llvm", None, "LLVM JIT (llvmlite)"),
    "auto": ("host: c; blas: blas", None, "c + blas placed by the cost model"),
}
TUNED = "auto+tuned"  # --tuned: the auto row with the tuning records of plait tune on the same target


def tuned_model(mod: Any, target: str, trials: int, cache_dir: str | None) -> tuple[Any, float]:
    """``plait tune`` of ``mod`` on ``target`` (wall-clock measurements, ``trials`` candidates per function):
    a cost model whose database holds the records, and the seconds the tuning took."""
    from plait.placement.cost import CostModel
    from plait.tune.runner import tune

    t0 = time.perf_counter()
    db, _ = tune(mod, target, trials=trials, measure="wall", cache_dir=cache_dir)
    return CostModel.for_target(target, db), time.perf_counter() - t0


def build_row(mod: Any, target: str, place: str | None, config: dict[str, Any],
              cost_model: Any = None) -> tuple[Any, float]:
    import plait

    t0 = time.perf_counter()
    art = plait.build(mod, target=target, place=place, config=config, cost_model=cost_model)
    return art, time.perf_counter() - t0


def load_file(path: str) -> Any:
    """The ONNX model in ``path``, checked (``onnx.checker``); ValueError with a one-line reason."""
    import onnx

    if not os.path.exists(path):
        raise ValueError(f"no such file '{path}'")
    if os.path.isdir(path):
        raise ValueError(f"'{path}' is a directory, not an ONNX file")
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx raises DecodeError, ValidationError, OSError...
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"'{path}' is not a valid ONNX model: {reason}") from None
    return model


def load_model(name: str, int8: str | None) -> Any:
    """The ONNX model of a bundled name (quantized by ONNX Runtime in the ``int8`` form when given)
    or of a file (checked by load_file in main)."""
    if int8:
        from plait.testing.quantized import quantized_model

        if name not in MODELS:
            raise ValueError(f"--int8 needs a bundled model, not '{name}'")
        return quantized_model(name, int8)
    return MODELS[name]() if name in MODELS else load_file(name)


def int8_steps(model: Any, got: list[np.ndarray], want: list[np.ndarray]) -> float | None:
    """The largest difference of an output in quantization steps of its scale (None when no output
    is made by a DequantizeLinear of one scale)."""
    from plait.testing.quantized import int8_steps as steps, output_scales

    scales = output_scales(model)
    worst = None
    for o, g, w in zip(model.graph.output, got, want):
        if o.name in scales and g.size:
            n = float(np.max(steps(g, w, scales[o.name])))
            worst = n if worst is None else max(worst, n)
    return worst


def bench_model(name: str, rows: dict[str, tuple[str, str | None]], repeat: int, warmup: int, numpy: bool,
                cache_dir: str | None, profile: int = 0, int8: str | None = None,
                tune_trials: int = 0) -> dict[str, Any]:
    from plait.errors import PlaitError
    from plait.executor import GraphModule
    from plait.frontend.onnx import from_onnx
    from plait.relay import flatten_value, run

    model = load_model(name, int8)
    mod = from_onnx(model)
    if name in MODELS:
        feeds = feeds_for(model)
    else:
        from plait.relay.io import make_inputs

        feeds = make_inputs(mod, {}, seed=0)
    config = {"cc.cache_dir": cache_dir} if cache_dir else {}
    sess = ort_session(model)
    want = sess.run(None, feeds)
    out: dict[str, Any] = {"rows": {}}
    gms = {}
    for row, (target, place) in rows.items():
        r: dict[str, Any] = {"target": target, "place": place}
        try:
            cm = None
            if row == TUNED:
                cm, r["tune_s"] = tuned_model(mod, target, tune_trials, cache_dir)
            art, r["compile_s"] = build_row(mod, target, place, config, cm)
        except PlaitError as exc:
            r["error"] = " ".join(ln.strip() for ln in str(exc).splitlines())[:300]
            out["rows"][row] = r
            continue
        gm = GraphModule(art)
        got = gm(**feeds)
        r["compile_s"] = round(r["compile_s"], 3)
        r["max_abs_diff"] = max(float(np.max(np.abs(g - w))) if g.size else 0.0 for g, w in zip(got, want))
        if int8:
            r["max_int8_steps"] = int8_steps(model, got, want)
        if art.placement is not None:
            r["on"] = {}
            for p in art.placement.placed:
                r["on"][p.piece] = r["on"].get(p.piece, 0) + 1
        out["rows"][row] = r
        gms[row] = gm
    names = list(gms)
    fns = [(lambda gm=gms[n]: gm(**feeds)) for n in names] + [lambda: sess.run(None, feeds)]
    fastest: list[float] = []
    times = time_interleaved_ms(fns, repeat, warmup, fastest)
    out["ort_ms"], out["ort_best_ms"] = times[-1], fastest[-1]
    for n, ms, b in zip(names, times, fastest):
        out["rows"][n]["plait_ms"] = ms
        out["rows"][n]["best_ms"] = b
        out["rows"][n]["ratio"] = ms / out["ort_ms"]
        if profile:
            calls = sorted(gms[n].profile(repeat=min(repeat, 10)), key=lambda c: -c["ms"])
            out["rows"][n]["slowest_calls"] = [{"func": c["func"], "ms": round(c["ms"], 4)} for c in calls[:profile]]
    if numpy:
        ref = flatten_value(run(mod, feeds))
        out["numpy_diff"] = max(float(np.max(np.abs(r - w))) if r.size else 0.0 for r, w in zip(ref, want))
        out["numpy_ms"] = time_ms(lambda: run(mod, feeds), repeat, 1, budget_s=2.0)
    return out


def auto_check(result: dict[str, Any], tolerance: float, row: str = "auto") -> str | None:
    """'ok' / 'SLOWER' when the ``row`` (auto, or auto+tuned) is within ``tolerance`` of the better of c and
    blas (or not), on the fastest run of each (the least disturbed by other load on the machine; a median
    moves by more than 5% on a busy machine even between two identical builds); None when a row is missing."""
    rows = result.get("rows", {})
    if not all("best_ms" in rows.get(k, {}) for k in (row, "c", "blas")):
        return None
    best = min(rows["c"]["best_ms"], rows["blas"]["best_ms"])
    return "ok" if rows[row]["best_ms"] <= best * (1 + tolerance) else "SLOWER"


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


def _agreement(r: dict[str, Any]) -> str:
    """The agreement column: int8 steps with --int8 (when the outputs have a scale), else max |diff|."""
    if r.get("max_int8_steps") is not None:
        return f"{r['max_int8_steps']:4.0f} steps"
    return f"{r['max_abs_diff']:10.2e}"


def table(results: dict[str, dict[str, Any]], tolerance: float, int8: str | None = None) -> str:
    diff = "int8 steps" if int8 else "max|diff|"
    head = f"{'model':20s} {'row':10s} {'plait ms':>10s} {'best':>8s} {'ORT ms':>9s} {'plait/ORT':>10s} {'numpy ms':>9s} " \
           f"{'compile s':>10s} {diff:>10s}  placement"
    title = [f"int8 {int8}: the quantized models (per-channel int8), plait and ORT on the same model"] if int8 else []
    lines = title + [head, "-" * len(head)]
    for name, res in results.items():
        if "error" in res:
            lines.append(f"{name:20s} error: {res['error']}")
            continue
        first = True
        for row, r in res["rows"].items():
            label = f"{name if first else '':20s} {row:10s}"
            first = False
            if "error" in r:
                lines.append(f"{label} skipped: {r['error']}")
                continue
            numpy_ms = f"{res['numpy_ms']:9.3f}" if "numpy_ms" in res else f"{'-':>9s}"
            on = ", ".join(f"{k} {v}" for k, v in r.get("on", {}).items())
            lines.append(f"{label} {r['plait_ms']:10.3f} {r['best_ms']:8.3f} {res['ort_ms']:9.3f} {r['ratio']:9.2f}x {numpy_ms} "
                         f"{r['compile_s']:10.2f} {_agreement(r)}  {on}")
            for c in r.get("slowest_calls", []):
                lines.append(f"{'':33s}{c['ms']:10.3f} ms  {c['func']}")
        for auto in ("auto", TUNED):
            check = auto_check(res, tolerance, auto)
            if check is not None:
                rows = res["rows"]
                best = min(("c", "blas"), key=lambda k: rows[k]["best_ms"])
                tuned = f" (tuned in {rows[auto]['tune_s']:.0f} s)" if "tune_s" in rows[auto] else ""
                lines.append(f"{'':20s} {auto} vs the better single-piece build ({best}), fastest runs: "
                             f"{rows[auto]['best_ms'] / rows[best]['best_ms']:.2f}x  {check}{tuned}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*", metavar="MODEL",
                   help="ONNX files (or bundled model names) to measure instead of --models")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated (default: {','.join(MODELS)})")
    p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated rows (default: {','.join(ROWS)})")
    p.add_argument("--repeat", type=int, default=30, help="timed runs per measurement (median; default 30)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs first (default 3)")
    p.add_argument("--target", help="one custom row: this plait target instead of --rows")
    p.add_argument("--place", help="--place rules of the custom --target row")
    p.add_argument("--tolerance", type=float, default=0.05,
                   help="noise allowed when checking auto against the better of c and blas (default 0.05)")
    p.add_argument("--json", help="write the results to this JSON file")
    p.add_argument("--no-numpy", action="store_true", help="skip the numpy reference interpreter")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="also show the N slowest calls of each model and row (graph executor profile)")
    p.add_argument("--int8", choices=("qdq", "qoperator"), help="bench the quantized bundled models "
                   "(per-channel int8, ONNX Runtime's quantizer) in this form, against ORT on the same model")
    p.add_argument("--tuned", action="store_true",
                   help=f"add the row {TUNED}: plait tune of each model on the auto row's target first")
    p.add_argument("--tune-trials", type=int, default=8, metavar="N",
                   help="candidates per function for --tuned (default 8)")
    p.add_argument("--cache", action="store_true", help="use the default C compile cache (compile_s then "
                                                          "excludes the C compiler when the code is unchanged)")
    args = p.parse_args(argv)
    names = args.files or [n.strip() for n in args.models.split(",") if n.strip()]
    for n in names:
        if n in MODELS and not os.path.exists(n):
            continue
        if args.int8:
            p.error(f"--int8 quantizes the bundled models only; '{n}' is not one (models: {', '.join(MODELS)})")
        if not args.files:
            p.error(f"unknown model '{n}' (models: {', '.join(MODELS)}; or give an ONNX file as an argument)")
        try:
            load_file(n)
        except ValueError as exc:
            p.error(f"{exc} (bundled models: {', '.join(MODELS)})")
    if args.target:
        rows = {"custom": (args.target, args.place)}
    else:
        wanted = [r.strip() for r in args.rows.split(",") if r.strip()]
        bad = [r for r in wanted if r not in ROWS]
        if bad:
            p.error(f"unknown row '{bad[0]}' (rows: {', '.join(ROWS)})")
        rows = {r: ROWS[r][:2] for r in wanted}
        if args.tuned:
            rows[TUNED] = ROWS["auto"][:2]

    from plait.errors import PlaitError

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="plait-bench-cc-") as tmp:
        for name in names:
            try:
                results[name] = bench_model(name, rows, args.repeat, args.warmup, not args.no_numpy,
                                            None if args.cache else tmp, args.profile, args.int8,
                                            args.tune_trials)
            except PlaitError as exc:
                results[name] = {"error": " ".join(ln.strip() for ln in str(exc).splitlines())[:300]}
            print(f"  {name}: done", file=sys.stderr, flush=True)
    print("rows: " + "; ".join(f"{r} = {t!r}" + (f" --place {pl!r}" if pl else "") for r, (t, pl) in rows.items()))
    print(f"ORT: 1 thread, sequential   median of {args.repeat} runs after {args.warmup} warmup, "
          "all rows and ORT in alternation")
    print(table(results, args.tolerance, args.int8))
    if args.json:
        out = {"models": results, "machine": machine(), "repeat": args.repeat, "warmup": args.warmup,
               "int8": args.int8}
        Path(args.json).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    failed = any("error" in r for r in results.values())
    failed = failed or any(auto_check(r, args.tolerance, row) == "SLOWER" for r in results.values()
                           for row in ("auto", TUNED))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
