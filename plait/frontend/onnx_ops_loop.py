"""ONNX converters for iteration: Scan (static sequence length, unrolled) and Loop. A Loop whose trip
count and conditions are known at import time is unrolled (up to :data:`MAX_UNROLL` iterations): the
body is converted once per iteration, with that iteration's values bound to its inputs. Any other Loop
becomes a Relay :class:`~plait.relay.expr.Loop` (its body converted once, a function of
``(iter, cond, *state)``), run by the VM executor.
"""

from __future__ import annotations

import numpy as np

from plait.frontend.onnx_node import NodeContext, Unsupported, Value, short, value_type
from plait.errors import FrontendError
from plait.frontend.onnx_registry import Converter, converters
from plait.ir.types import TensorType
from plait.relay.expr import Expr, Function, Loop, Tuple, Var
from plait.relay.infer import infer_expr

MAX_UNROLL = 4096


def stack(cx: NodeContext, items: list[Value], axis: int) -> Expr:
    """Stack per-iteration values along a new ``axis`` (negative counts in the result's rank)."""
    rank = value_type(items[0]).ndim + 1
    axis = axis + rank if axis < 0 else axis
    parts = [cx.call("expand_dims", cx.as_expr(v), axes=(axis,)) for v in items]
    return parts[0] if len(parts) == 1 else cx.call("concatenate", *parts, axis=axis)


def scan(cx: NodeContext) -> object:
    body = cx.attr("body")
    m = cx.attr("num_scan_inputs")
    n_state = len(cx.inputs) - m
    k = len(body.output) - n_state
    if not 1 <= m <= len(cx.inputs) or k < 0 or len(body.input) != n_state + m:
        raise FrontendError(f"num_scan_inputs {m} does not fit {len(cx.inputs)} inputs and a body of "
                            f"{len(body.input)} inputs and {len(body.output)} outputs")
    in_axes = list(cx.attr("scan_input_axes", [0] * m))
    in_dirs = list(cx.attr("scan_input_directions", [0] * m))
    out_axes = list(cx.attr("scan_output_axes", [0] * k))
    out_dirs = list(cx.attr("scan_output_directions", [0] * k))
    if (len(in_axes), len(in_dirs), len(out_axes), len(out_dirs)) != (m, m, k, k):
        raise FrontendError(f"scan axes and directions must list {m} inputs and {k} outputs")
    if any(d not in (0, 1) for d in in_dirs + out_dirs):
        raise FrontendError(f"scan directions {short(in_dirs + out_dirs)} must be 0 (forward) or 1 (reverse)")
    scans = [cx.value(n_state + j) for j in range(m)]
    lengths = set()
    for j, v in enumerate(scans):
        t = value_type(v)
        in_axes[j] = cx.axis(in_axes[j], t.ndim, "scan_input_axes: axis")
        lengths.add(t.shape[in_axes[j]])
    if len(lengths) != 1 or not isinstance(next(iter(lengths)), int):
        raise Unsupported(f"scan inputs need one static sequence length, got {sorted(map(str, lengths))}")
    steps = next(iter(lengths))
    if not 0 < steps <= MAX_UNROLL:
        raise Unsupported(f"sequence length {steps} cannot be unrolled")
    return _unrolled_scan(cx, body, [cx.value(i) for i in range(n_state)], scans, steps, in_axes, in_dirs,
                          out_axes, out_dirs)


def _unrolled_scan(cx: NodeContext, body: object, states: list[Value], scans: list[Value], steps: int,
                   in_axes: list[int], in_dirs: list[int], out_axes: list[int], out_dirs: list[int]) -> list[Value]:
    """The final states, then each scan output: ``body`` converted once per step."""
    n_state, k = len(states), len(out_axes)
    per_step: list[list[Value]] = [[] for _ in range(k)]
    for t in range(steps):
        slices = []
        for j, v in enumerate(scans):
            index = steps - 1 - t if in_dirs[j] else t
            slices.append(cx.call("take", v, cx.constant(index, "int64"), axis=in_axes[j]))
        outs = cx.subgraph(body, states + slices)
        states = outs[:n_state]
        for j in range(k):
            per_step[j].append(outs[n_state + j])
    results: list[Value] = list(states)
    for j in range(k):
        items = per_step[j][::-1] if out_dirs[j] else per_step[j]
        results.append(stack(cx, items, out_axes[j]))
    return results


def scan8(cx: NodeContext) -> object:
    """Scan of opset 8: every state and scan input has a leading batch axis (the sequence is axis 1 of the
    scan inputs) and each batch element runs the body on its own; ``sequence_lens`` (input 0) may only give
    the full length. Unrolled per batch element and step, the results stacked on the batch axis."""
    body = cx.attr("body")
    m = cx.attr("num_scan_inputs")
    values = [cx.value(i) for i in range(1, len(cx.inputs))]
    n_state = len(values) - m
    k = len(body.output) - n_state
    if not 1 <= m <= len(values) or k < 0 or len(body.input) != n_state + m:
        raise FrontendError(f"num_scan_inputs {m} does not fit {len(values)} inputs and a body of "
                            f"{len(body.input)} inputs and {len(body.output)} outputs")
    dirs = list(cx.attr("directions", [0] * m))
    if len(dirs) != m or any(d not in (0, 1) for d in dirs):
        raise FrontendError(f"scan directions {short(dirs)} must list {m} values, 0 (forward) or 1 (reverse)")
    shapes = [value_type(v).shape for v in values]
    if any(len(sh) < (2 if j >= n_state else 1) for j, sh in enumerate(shapes)):
        raise FrontendError("Scan (opset 8): states need a batch axis and scan inputs a batch and a sequence axis")
    batches, lengths = {sh[0] for sh in shapes}, {sh[1] for sh in shapes[n_state:]}
    if len(batches) != 1 or len(lengths) != 1 or not all(isinstance(d, int) for d in (*batches, *lengths)):
        raise Unsupported(f"Scan (opset 8) needs one static batch size and sequence length, got batch "
                          f"{sorted(map(str, batches))} and sequence {sorted(map(str, lengths))}")
    batch, steps = next(iter(batches)), next(iter(lengths))
    if not 0 < batch * steps <= MAX_UNROLL:
        raise Unsupported(f"{batch} x {steps} scan steps cannot be unrolled")
    if cx.has(0) and any(int(n) != steps for n in cx.const(0, "sequence_lens").reshape(-1)):
        raise Unsupported(f"sequence_lens shorter than the sequence length {steps} is not supported")
    per_batch = []
    for b in range(batch):
        mine = [cx.call("take", v, cx.constant(b, "int64"), axis=0) for v in values]
        per_batch.append(_unrolled_scan(cx, body, mine[:n_state], mine[n_state:], steps, [0] * m, dirs,
                                        [0] * k, [0] * k))
    return [stack(cx, [r[j] for r in per_batch], 0) for j in range(n_state + k)]


def any_scan(cx: NodeContext) -> object:
    """Scan: opset 8's batched form, or opset 9's (axes and directions per input and output)."""
    return scan8(cx) if cx.version < 9 else scan(cx)


def loop(cx: NodeContext) -> object:
    """Unrolled when the trip count and every condition are known at import time, else a Relay Loop."""
    if (not cx.has(0) or cx.is_const(0)) and (not cx.has(1) or cx.is_const(1)):
        try:
            return unrolled_loop(cx)
        except _RunTime:
            pass
    return loop_node(cx)


class _RunTime(Exception):
    """The loop cannot be unrolled: it runs a relay Loop."""


def loop_node(cx: NodeContext) -> object:
    """The Loop as a Relay :class:`~plait.relay.expr.Loop`: the body converted once."""
    body = cx.attr("body")
    carried = [cx.expr(i) for i in range(2, len(cx.inputs))]
    n = len(carried)
    k = len(body.output) - 1 - n
    if len(body.input) != 2 + n or k < 0:
        raise FrontendError(f"a Loop with {n} loop-carried values needs a body of {2 + n} inputs and at least "
                            f"{1 + n} outputs, got {len(body.input)} and {len(body.output)}")
    params = [Var(body.input[0].name, TensorType((), "int64")), Var(body.input[1].name, TensorType((), "bool"))]
    params += [Var(vi.name, value_type(x)) for vi, x in zip(body.input[2:], carried)]
    outs = [cx.as_expr(v) for v in cx.subgraph(body, params)]
    for j, (x, o) in enumerate(zip(carried, outs[1:1 + n])):
        if value_type(o) != value_type(x):
            raise Unsupported(f"loop-carried value {j} ('{body.input[2 + j].name}') changes type from "
                              f"{value_type(x)} to {value_type(o)}")
    fn = Function(tuple(params), Tuple(tuple(outs)))
    lp = Loop(cx.expr(0) if cx.has(0) else None, cx.expr(1) if cx.has(1) else None, tuple(carried), fn, k)
    infer_expr(lp)
    return [cx.get(lp, i) for i in range(n + k)]


def unrolled_loop(cx: NodeContext) -> object:
    """The Loop unrolled (raises :class:`_RunTime` when a condition is computed at run time, or for
    more than :data:`MAX_UNROLL` or no iterations with scan outputs)."""
    body = cx.attr("body")
    trip = int(cx.const(0, "M").reshape(-1)[0]) if cx.has(0) else None
    cond = bool(cx.const(1, "cond").reshape(-1)[0]) if cx.has(1) else True
    carried: list[Value] = [cx.value(i) for i in range(2, len(cx.inputs))]
    n = len(carried)
    k = len(body.output) - 1 - n
    per_step: list[list[Value]] = [[] for _ in range(k)]
    t = 0
    while cond and (trip is None or t < trip):
        if t >= MAX_UNROLL:
            raise _RunTime()
        outs = cx.subgraph(body, [np.array(t, np.int64), np.array(cond)] + carried)
        c = outs[0]
        if not isinstance(c, np.ndarray):
            raise _RunTime()
        cond = bool(c.reshape(-1)[0])
        carried = outs[1:1 + n]
        for j in range(k):
            per_step[j].append(outs[1 + n + j])
        t += 1
    if k and t == 0:
        raise _RunTime()
    return carried + [stack(cx, per_step[j], 0) for j in range(k)]


CONVERTERS: list[Converter] = [
    *converters(["Scan"], any_scan,
                attrs=("body", "num_scan_inputs", "scan_input_axes", "scan_input_directions", "scan_output_axes",
                       "scan_output_directions", "directions"),
                min_version=8, ops=("take", "expand_dims", "concatenate")),
    *converters(["Loop"], loop, attrs=("body",), min_version=11, ops=("expand_dims", "concatenate")),  # or a Loop
]
