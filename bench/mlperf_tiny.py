"""The MLPerf Tiny reference models (TFLite) against their own runtimes, on every executor and on QEMU.

    python bench/mlperf_tiny.py                          # every file of ../shared/models/mlperf_tiny
    python bench/mlperf_tiny.py --dir DIR --seeds 20 --qemu --json out.json

For each ``.tflite`` file: import, build for ``c`` (graph executor) and run ``--seeds`` seeded inputs; int8
models are compared with TensorFlow Lite Micro's interpreter (``tflite-micro``: equal bit for bit, or the
number of differing outputs), float models with LiteRT's default interpreter (XNNPACK; the largest
``|a - b| / max|ref|``). The AOT executor on the host runs the first input. With ``--qemu``, the model is
also built for a ``c -mcpu=cortex-m7f`` piece and its firmware run under QEMU on the first two inputs (a
model that does not fit prints the fit error, as ``ad01_fp32`` must: 1.06 MB of weights); the RAM column
is the AOT memory plan's pool on the M7F, beside TensorFlow Lite Micro's arena for the same file (its
``print_allocations``: head, the planned activations, and the whole arena).

Inputs: int8 inputs are noise on a ramp across the input's quantized range (pure uniform noise saturates
the keyword and image models' softmax at -128 for every input); float inputs the same in [-1, 1].
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import plait  # noqa: E402
from plait.executor.aot.module import AotModule  # noqa: E402
from plait.executor.graph.module import GraphModule  # noqa: E402
from plait.frontend.tflite import load_tflite  # noqa: E402
from plait.testing.tflite_reference import litert, ramp_inputs, tflm  # noqa: E402

DEFAULT_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "models" / "mlperf_tiny"
M7F = "c -mcpu=cortex-m7f"


def reference(buf: bytes, quant: bool, xs: list[np.ndarray]) -> tuple[list[np.ndarray], str, dict]:
    if quant:
        return tflm(buf, xs), "TFLM", _tflm_arena(buf)
    return litert(buf, xs, reference_kernels=False), "LiteRT", {}  # its default interpreter, as users run it


def _tflm_arena(buf: bytes) -> dict:
    """TensorFlow Lite Micro's arena (print_allocations goes to the C stdout: captured through a pipe)."""
    import os
    import subprocess

    code = ("import sys; from tflite_micro.python.tflite_micro import runtime; "
            "runtime.Interpreter.from_bytes(open(sys.argv[1], 'rb').read()).print_allocations()")
    with tempfile.NamedTemporaryFile(suffix=".tflite") as f:
        f.write(buf)
        f.flush()
        res = subprocess.run([sys.executable, "-c", code, f.name], capture_output=True, text=True, env=os.environ)
    text = res.stdout + res.stderr
    out = {}
    for key, pat in (("head", r"[Hh]ead.*?(\d+)\s*bytes"), ("total", r"[Tt]otal.*?(\d+)\s*bytes")):
        m = re.search(pat, text)
        if m:
            out[key] = int(m.group(1))
    return out


def compare(got: np.ndarray, want: np.ndarray, quant: bool) -> float:
    if quant:
        return float(np.count_nonzero(got.astype(np.int64) != want.astype(np.int64)))
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))


def run_file(path: Path, seeds: int, qemu: bool, cache: str) -> dict[str, Any]:
    row: dict[str, Any] = {"model": path.stem}
    buf = path.read_bytes()
    mod = load_tflite(path)
    t = mod["main"].params[0].checked_type
    quant = t.dtype == "int8"
    xs = ramp_inputs(t.shape, t.dtype, seeds)
    want, ref, arena = reference(buf, quant, xs)
    row.update(reference=ref, dtype=t.dtype, tflm_arena=arena)
    config = {"cc.cache_dir": cache}
    g = GraphModule(plait.build(mod, "c", config=config))
    row["graph"] = max(compare(g(x)[0], w, quant) for x, w in zip(xs, want))
    (a,) = AotModule(plait.build(mod, "c", executor="aot", config=config))(xs[0])
    row["aot_host"] = compare(a, want[0], quant)
    if qemu:
        from plait.executor.aot.qemu import QemuModule

        try:
            art = plait.build(mod, M7F, executor="aot", config={**config, "c.host_simulation": True})
        except plait.PlaitError as exc:
            row["qemu_m7f"] = f"does not fit: {exc}"
        else:
            row["m7f_pool_bytes"] = _pool_bytes(art)
            with tempfile.TemporaryDirectory() as d:
                q = QemuModule(art, timeout_s=600, build_dir=Path(d))
                row["qemu_m7f"] = max(compare(q(x)[0], w, quant) for x, w in zip(xs[:2], want[:2]))
    return row


def _pool_bytes(art: Any) -> int:
    """The bytes of the AOT memory plan's pools (activations and workspaces)."""
    return int(sum(p["bytes"] for p in art.memory["pools"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(DEFAULT_DIR))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--qemu", action="store_true", help="also run the firmware of a Cortex-M7F piece under QEMU")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args(argv)
    files = sorted(Path(args.dir).glob("*.tflite"))
    if not files:
        print(f"no .tflite files in {args.dir}", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        print(f"{'model':28s} {'ref':7s} {'graph':>10s} {'aot host':>10s} {'qemu m7f':>10s} {'M7F pool B':>11s} "
              f"{'TFLM arena B':>13s}  (int8: outputs differing; float: max rel. error)")
        for f in files:
            try:
                row = run_file(f, args.seeds, args.qemu, cache)
            except plait.PlaitError as exc:
                print(f"{f.stem:28s} refused: {str(exc).splitlines()[-1].strip()}", flush=True)
                rows.append({"model": f.stem, "error": str(exc)})
                continue
            rows.append(row)
            q = row.get("qemu_m7f", "-")
            q = q if isinstance(q, str) else f"{q:.3g}"
            arena = row["tflm_arena"].get("total", "-")
            print(f"{row['model']:28s} {row['reference']:7s} {row['graph']:10.3g} {row['aot_host']:10.3g} "
                  f"{q[:40]:>10s} {row.get('m7f_pool_bytes', '-'):>11} {arena:>13}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
