"""Hand-built lowered modules for the graph executor tests: PrimFuncs written with plait.tir, a
``main`` calling them through GlobalVars, and hand-written C implementing the same functions."""

from __future__ import annotations

import numpy as np

from plait import relay, tir
from plait.relay import IRModule
from plait.runtime import CSourceModule, PyModule
from plait.tir import Buffer, For, PrimFunc, Var, seq


def _elementwise(name: str, shape: tuple[int, int], n_in: int, body, n_out: int = 1) -> PrimFunc:
    """``outs[k][i, j] = body(k, *ins[i, j])`` for a 2-d shape."""
    ins = [Buffer(f"in{k}", shape) for k in range(n_in)]
    outs = [Buffer(f"out{k}", shape) for k in range(n_out)]
    i, j = Var("i"), Var("j")
    stores = [o.store((i, j), body(k, *[b[i, j] for b in ins])) for k, o in enumerate(outs)]
    loop = For(i, 0, shape[0], "serial", For(j, 0, shape[1], "serial", seq(*stores)))
    return PrimFunc((*ins, *outs), loop, {"global_symbol": name, "num_inputs": n_in, "piece": "c"})


def prim_funcs(shape=(2, 3)) -> dict[str, PrimFunc]:
    return {
        "add": _elementwise("add", shape, 2, lambda k, a, b: a + b),
        "relu": _elementwise("relu", shape, 1, lambda k, a: tir.max(a, tir.const(0.0))),
        "twice": _elementwise("twice", shape, 1, lambda k, a: a * 2.0),
        # two outputs: (a * 2, a - 1)
        "split2": _elementwise("split2", shape, 1, lambda k, a: a * 2.0 if k == 0 else a - 1.0, n_out=2),
    }


C_SOURCE = """
#include <stdint.h>
#define N {n}
int32_t add(float* restrict a, float* restrict b, float* restrict c) {{
  for (int i = 0; i < N; ++i) c[i] = a[i] + b[i];
  return 0;
}}
int32_t relu(float* restrict a, float* restrict c) {{
  for (int i = 0; i < N; ++i) c[i] = a[i] > 0.0f ? a[i] : 0.0f;
  return 0;
}}
int32_t twice(float* restrict a, float* restrict c) {{
  for (int i = 0; i < N; ++i) c[i] = a[i] * 2.0f;
  return 0;
}}
int32_t split2(float* restrict a, float* restrict c, float* restrict d) {{
  for (int i = 0; i < N; ++i) {{ c[i] = a[i] * 2.0f; d[i] = a[i] - 1.0f; }}
  return 0;
}}
int32_t failing(float* restrict a, float* restrict c) {{ return 7; }}
"""


def c_module(shape=(2, 3)) -> CSourceModule:
    sigs = {"add": ("ptr",) * 3, "relu": ("ptr",) * 2, "twice": ("ptr",) * 2, "split2": ("ptr",) * 3,
            "failing": ("ptr",) * 2}
    return CSourceModule(C_SOURCE.format(n=int(np.prod(shape))), sigs, name="hand_written")


def tir_module(funcs: dict[str, PrimFunc]) -> PyModule:
    """A runtime module whose functions run the PrimFuncs in the TIR interpreter."""
    return PyModule({name: (lambda *bufs, f=f: tir.evaluate(f, *bufs)) for name, f in funcs.items()})


def call(name: str, *args, node: str | None = None) -> relay.Call:
    return relay.Call(relay.GlobalVar(name), args, meta={"name": node} if node else {})


def diamond(shape=(2, 3), seed: int = 0) -> tuple[IRModule, np.ndarray]:
    """main(x) = (add(t, twice(relu(t)))  with  t = add(x, C),  split2(t).1)

    Returns the module and the constant C. Uses a Let, a tuple result of a call, a tuple of
    outputs, and a constant argument.
    """
    rng = np.random.default_rng(seed)
    c = rng.standard_normal(shape).astype(np.float32)
    x = relay.var("x", shape)
    t = relay.Var("t")
    a = call("add", x, relay.const(c), node="/add0")
    r = call("relu", t, node="/relu")
    w = call("twice", r, node="/twice")
    s = call("split2", t, node="/split")
    y = call("add", t, w, node="/add1")
    body = relay.Let(t, a, relay.Tuple((y, relay.TupleGetItem(s, 1))))
    funcs = prim_funcs(shape)
    mod = IRModule({"main": relay.Function((x,), body), **funcs}, attrs={"output_names": ["y", "z"]})
    return mod, c


def diamond_reference(x: np.ndarray, c: np.ndarray) -> list[np.ndarray]:
    t = x + c
    return [t + np.maximum(t, 0) * 2, t - 1]


def chain(length: int, shape=(2, 3)) -> IRModule:
    """main(x) = twice(twice(...(x)))."""
    x = relay.var("x", shape)
    e: relay.Expr = x
    for k in range(length):
        e = call("twice", e, node=f"/twice{k}")
    return IRModule({"main": relay.Function((x,), e), "twice": prim_funcs(shape)["twice"]})
