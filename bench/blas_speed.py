"""OpenBLAS single-thread speed on this machine vs the blas kind's cost model (plait.backends.blas.backend).

    python bench/blas_speed.py            # product shapes: measured vs gemm_seconds()
    python bench/blas_speed.py --calls    # the GEMM-like calls of the bench models: c vs blas,
                                          # measured (each call alone) and as the placement estimates them
    python bench/blas_speed.py --calls --database costs.json   # ... and save the measurements

The first table times each shape of ``plait.backends.blas.backend.SHAPES`` with a small C loop calling
OpenBLAS the way the lowered PrimFuncs do (``cblas_sgemm``; ``cblas_sgemv`` when one side is a
vector) next to the cost hook's model: where its constants come from (docs/kind-blas.md).

The second lowers every dense / matmul / conv2d call of the bench models alone, once by default
lowering for ``c`` and once by the blas kind, compiles both, and times them in alternation (raw
calls, best and median of ``--repeat``), next to the placement cost model's estimates for the two
pieces of ``host: c; blas: blas`` (c: the default-schedule estimate; blas: the cost hook).
``--database PATH`` also writes those measurements as a placement cost database (measured costs
come before the kinds' estimates: plait.placement.cost).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def calls_table(models: list[str], repeat: int, database: str | None = None) -> None:
    from plait.backends.blas import backend as blas
    from plait.backends.c.backend import build_c
    from plait.lowering.lower import lower_function
    from plait.frontend.onnx import from_onnx
    from plait.ir.transform import PassContext
    from plait.placement.cost import CostModel, signature
    from plait.relay import infer_type
    from plait.relay.expr import Call, Function, Var
    from plait.relay.infer import infer_expr
    from plait.relay.infer import InferType
    from plait.relay.passes import FoldBatchNorm, FoldConstant
    from plait.relay.visitor import post_order
    from plait.target import CompositeTarget
    from plait.testing.onnx_models import MODELS

    ct = CompositeTarget("host: c; blas: blas")
    host, bl = ct.piece("host"), ct.piece("blas")
    cm = CostModel()
    entries = []
    print(f"{'model':20s} {'call':44s} {'c us':>9s} {'blas us':>9s} {'c/blas':>7s}   {'c est':>8s} {'blas est':>8s}")
    for name in models:
        mod = from_onnx(MODELS[name]())
        ctx = PassContext()
        for p in (InferType(), FoldConstant(), FoldBatchNorm(), InferType()):
            mod = ctx.run(p, mod)
        mod = infer_type(mod)
        seen = set()
        for call in post_order(mod["main"].body):
            if not (isinstance(call, Call) and blas.plan(call) is not None):
                continue
            sig = signature(call)
            if sig in seen:
                continue
            seen.add(sig)
            params = [Var(f"p{k}", a.checked_type) for k, a in enumerate(call.args)]
            fn = Function(tuple(params), Call(call.op, tuple(params), call.attrs), None, {"Primitive": 1})
            infer_expr(fn)
            cf = lower_function(fn, "c_call", host.target)
            bf = blas.lower_call(call, bl.target).with_attrs(global_symbol="blas_call", num_inputs=len(call.args))
            fc = build_c([cf], host.target).raw("c_call")
            fb = build_c([bf], bl.target, name="blas", link_flags=blas.openblas().link_flags).raw("blas_call")
            rng = np.random.default_rng(0)
            args = [rng.standard_normal(tuple(a.checked_type.shape)).astype(np.float32) for a in call.args]
            args.append(np.zeros(tuple(call.checked_type.shape), np.float32))
            ptrs = [ctypes.c_void_p(a.ctypes.data) for a in args]
            tc, tb = [], []
            fc(*ptrs), fb(*ptrs)
            for _ in range(repeat):
                for fn_, ts in ((fc, tc), (fb, tb)):
                    t0 = time.perf_counter()
                    fn_(*ptrs)
                    ts.append(time.perf_counter() - t0)
            ec, eb = cm.call_cost(call, host).seconds, cm.call_cost(call, bl).seconds
            shapes = "x".join(str(list(a.checked_type.shape)) for a in call.args)
            label = f"{call.op_name} {shapes}"[:44]
            mc, mb = min(tc), min(tb)
            entries += [{"op": sig, "target": str(host.target), "seconds": mc},
                        {"op": sig, "target": str(bl.target), "seconds": mb}]
            print(f"{name:20s} {label:44s} {mc * 1e6:9.1f} {mb * 1e6:9.1f} {mc / mb:7.2f}   "
                  f"{ec * 1e6:8.1f} {eb * 1e6:8.1f}   (medians {statistics.median(tc) * 1e6:.1f} / "
                  f"{statistics.median(tb) * 1e6:.1f})")
    if database:
        import json

        Path(database).write_text(json.dumps({"entries": entries}, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {database}: {len(entries)} measured costs (plait.placement.cost.CostDatabase.load)")


def main(argv: list[str] | None = None) -> int:
    from plait.testing.onnx_models import MODELS

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", action="store_true", help="compare c and blas on the bench models' calls")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--database", metavar="PATH", help="with --calls: write the measured times (best run) as a "
                   "cost database for plait.build(..., cost_model=CostModel(CostDatabase.load(PATH)))")
    args = p.parse_args(argv)
    if args.calls:
        calls_table([m for m in args.models.split(",") if m], args.repeat, args.database)
    else:
        from plait.backends.blas.backend import main as shapes_table

        shapes_table()
    return 0


if __name__ == "__main__":
    sys.exit(main())
