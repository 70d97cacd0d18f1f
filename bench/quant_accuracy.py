"""How far plait's outputs are from ONNX Runtime's on the quantized bench models.

    python bench/quant_accuracy.py                                  # every bench model, int8 activations
    python bench/quant_accuracy.py --models mlp,resnet_block --activation uint8
    python bench/quant_accuracy.py --inputs 5 --json out.json
    python bench/quant_accuracy.py --models unet --forms qdq --trace    # where the outputs start to differ

Each bench model of :data:`plait.testing.onnx_models.MODELS` is quantized by ONNX Runtime's own
quantizer (:func:`plait.testing.quantized.quantized_model`: ``quantize_static``, QDQ and QOperator,
per channel and per tensor, int8 weights, the activation type of ``--activation``), compiled for the
``c`` target twice (``float`` requantization, the default, and ``-requantize=fixed``) and run on
``--inputs`` standard-normal inputs (fixed seed) next to ONNX Runtime's default session (graph
optimizations on, one thread; ``session.x64quantprecision`` set where it accepts it, so that its u8 x s8
sums are exact on x86-64 without VNNI too: :mod:`plait.testing.ort_reference`): the reference. For every output made by a ``DequantizeLinear`` the
difference is counted in quantization steps of that output's scale: the largest, and the fraction
of elements that differ at all. The last two columns compare the ``float`` build again, with ONNX
Runtime's option ``session.qdqisint8allowed`` set (:data:`plait.testing.quantized.INT8_FUSION`): its
optimizer then fuses every int8 QDQ group into its integer operator, as its ARM builds do by default;
on x86-64 it otherwise runs some of them in float (docs/quantization.md). An output made otherwise (a float operator after the last
dequantize) is compared in float: its largest absolute difference is printed, marked ``float``.

``--trace`` prints, instead, every quantized tensor of the model (each ``QuantizeLinear``'s output, made
an output of the graph) for the first input: plait's values against ONNX Runtime's with graph
optimizations off, which computes the QDQ graph as written (each operator in float between its
dequantizes and its quantize). It shows where a difference starts and how it spreads: one quantization
step on a value near a rounding tie in one convolution reaches several outputs of the next.

``--json`` writes ``{"onnxruntime", "activation", "inputs", "rows": [{"model", "form", "per_channel",
"float_steps", "float_off", "fixed_steps", "fused_steps", "fused_off", "float_outputs": {NAME: max_abs_diff}}]}`` (a model plait
cannot compile has ``"error"`` instead: the reason, also printed in its row).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from plait.testing.onnx_models import MODELS  # noqa: E402


def compare(model: Any, n_inputs: int = 3, fixed: bool = True) -> dict[str, Any]:
    """plait (float and fixed requantization) against ONNX Runtime on one quantized model."""
    import plait
    from plait.executor import GraphModule
    from plait.testing.quantized import calibration_feeds, int8_steps, ort_session, output_scales

    sess = ort_session(model)
    names = [o.name for o in model.graph.output]
    scales = output_scales(model)
    feeds = calibration_feeds(model, n_inputs, seed=7)
    wants = [sess.run(None, f) for f in feeds]
    fused = ort_session(model, int8_fusion=True)
    fused_wants = [fused.run(None, f) for f in feeds]
    row: dict[str, Any] = {}
    for mode in ("float", "fixed") if fixed else ("float",):
        target = "c" if mode == "float" else "c -requantize=fixed"
        art = GraphModule(plait.build(plait.from_onnx(model), target=target))
        steps: list[np.ndarray] = []
        floats: dict[str, float] = {}
        for feed, want in zip(feeds, wants):
            got = art(**feed)
            for name, g, w in zip(names, got, want):
                if name in scales:
                    steps.append(int8_steps(np.asarray(g), w, scales[name]).ravel())
                else:
                    d = float(np.max(np.abs(np.asarray(g, np.float64) - w))) if w.size else 0.0
                    floats[name] = max(floats.get(name, 0.0), d)
        s = np.concatenate(steps) if steps else np.zeros(0)
        row[f"{mode}_steps"] = int(s.max()) if s.size else 0
        row[f"{mode}_off"] = float((s > 0).mean()) if s.size else 0.0
        if mode == "float":
            row["float_outputs"] = floats
            s = np.concatenate([int8_steps(np.asarray(g), w, scales[name]).ravel()
                                for feed, want in zip(feeds, fused_wants)
                                for name, g, w in zip(names, art(**feed), want) if name in scales] or [np.zeros(0)])
            row["fused_steps"] = int(s.max()) if s.size else 0
            row["fused_off"] = float((s > 0).mean()) if s.size else 0.0
    return row


def trace(model: Any) -> list[tuple[str, int, float]]:
    """``(tensor, largest difference in steps, fraction of elements that differ)`` of every quantized tensor of
    ``model`` (the outputs of its QuantizeLinear nodes, in graph order), plait against ONNX Runtime with graph
    optimizations off, on the first calibration input."""
    import onnx
    from onnx import numpy_helper

    import plait
    from plait.executor import GraphModule
    from plait.testing.quantized import calibration_feeds, ort_session

    consts = {i.name for i in model.graph.initializer}
    traced = onnx.ModelProto()
    traced.CopyFrom(model)
    names = [n.output[0] for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in consts]
    zero_points = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "QuantizeLinear" and n.output[0] in names:
            zp = zero_points.get(n.input[2]) if len(n.input) > 2 else None
            dt = onnx.helper.np_dtype_to_tensor_dtype(zp.dtype) if zp is not None else onnx.TensorProto.UINT8
            traced.graph.output.append(onnx.helper.make_tensor_value_info(n.output[0], dt, None))
    feed = calibration_feeds(model, 1, seed=7)[0]
    want = ort_session(traced, optimized=False).run(names, feed)
    got = GraphModule(plait.build(plait.from_onnx(traced), target="c"))(**feed)[len(model.graph.output):]
    rows = []
    for name, g, w in zip(names, got, want):
        d = np.abs(np.asarray(g, np.int64) - np.asarray(w, np.int64))
        rows.append((name, int(d.max()) if d.size else 0, float((d > 0).mean()) if d.size else 0.0))
    return rows


def main(argv: list[str] | None = None) -> int:
    import onnxruntime

    from plait.errors import PlaitError
    from plait.testing.quantized import quantized_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated bench models")
    ap.add_argument("--forms", default="qdq,qoperator", help="qdq, qoperator or both")
    ap.add_argument("--activation", default="int8", choices=("int8", "uint8"))
    ap.add_argument("--inputs", type=int, default=3, help="inputs per model")
    ap.add_argument("--no-fixed", action="store_true", help="skip the fixed-point requantization build")
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--trace", action="store_true",
                    help="every quantized tensor against ONNX Runtime without graph optimizations, first input")
    args = ap.parse_args(argv)
    if args.trace:
        for name in args.models.split(","):
            for form in args.forms.split(","):
                for per_channel in (True, False):
                    print(f"{name} {form} {'per channel' if per_channel else 'per tensor'}, {args.activation}:")
                    model = quantized_model(name, form, per_channel, args.activation)
                    for tensor, steps, off in trace(model):
                        print(f"  {tensor:64} {steps:>3} steps on {off:8.4%}", flush=True)
        return 0
    rows = []
    print(f"onnxruntime {onnxruntime.__version__}, {args.activation} activations, int8 weights, {args.inputs} inputs")
    print(f"{'model':22} {'form':9} {'scales':11} {'float: steps':>12} {'off':>9} {'fixed: steps':>12} "
          f"{'int8-fused ORT: steps':>21} {'off':>9}  float outputs")
    for name in args.models.split(","):
        for form in args.forms.split(","):
            for per_channel in (True, False):
                model = quantized_model(name, form, per_channel, args.activation)
                r = {"model": name, "form": form, "per_channel": per_channel}
                try:
                    r.update(compare(model, args.inputs, not args.no_fixed))
                except PlaitError as exc:  # a model plait cannot compile: the reason, in the row
                    r["error"] = str(exc).splitlines()[-1].strip()
                    print(f"{name:22} {form:9} {'per channel' if per_channel else 'per tensor':11} "
                          f"not compiled: {r['error']}", flush=True)
                    rows.append(r)
                    continue
                rows.append(r)
                fl = ", ".join(f"{k} {v:.3g}" for k, v in r["float_outputs"].items())
                print(f"{name:22} {form:9} {'per channel' if per_channel else 'per tensor':11} "
                      f"{r['float_steps']:>12} {r['float_off']:>9.4%} {r.get('fixed_steps', '-'):>12} "
                      f"{r['fused_steps']:>21} {r['fused_off']:>9.4%}  "
                      f"{('float: ' + fl) if fl else ''}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"onnxruntime": onnxruntime.__version__, "activation": args.activation,
                                               "inputs": args.inputs, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
