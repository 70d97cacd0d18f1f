"""Deep Relay models of a chosen number of operator calls, for compile-time benchmarks and tests.

    mod = matmul_relu(1000)            # 1000 calls: MatMul with a small constant, Relu, alternating
    mod = residual(1000)               # 999 calls: relu(matmul(h, W) + h) repeated
    mod = relu_chain(1000)             # 1000 Relu calls (elementwise: they fuse)
    mod = matmul_relu_distinct(1000)   # like matmul_relu, every MatMul of other widths

``CHAIN_MODELS`` maps a name to its builder ``(nodes) -> IRModule``. Weights come from a seeded
generator, so every call builds the same module. ``matmul_relu`` and ``residual`` repeat one block
(lowered to one kernel called many times: the per-call costs of the compiler); the widths of
``matmul_relu_distinct`` walk over (in, out) pairs that are all different for the first
:data:`DISTINCT_PAIRS` MatMuls, so that lowering gives that many different kernels (the per-kernel
costs, the C compiler's above all).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from plait.relay.module import IRModule

WIDTH_BASE = 4
"""The smallest feature width of ``matmul_relu_distinct``."""
WIDTH_COUNT = 73
"""How many widths ``matmul_relu_distinct`` uses (a prime: the walk below visits every pair)."""
DISTINCT_PAIRS = WIDTH_COUNT * (WIDTH_COUNT - 1)
"""How many MatMuls of ``matmul_relu_distinct`` have a (in, out) width pair of their own."""
RESIDUAL_WIDTH = 32
MATMUL_WIDTH = 16


def width_walk(count: int) -> list[int]:
    """``count + 1`` widths whose consecutive pairs are all different for the first
    :data:`DISTINCT_PAIRS` steps: for step d = 1, 2, ... walk x -> x + d (mod a prime), which comes
    back to its start after :data:`WIDTH_COUNT` steps, having used every pair (x, x + d) once."""
    out, x, d = [0], 0, 1
    for k in range(count):
        x = (x + d) % WIDTH_COUNT
        out.append(x)
        if (k + 1) % WIDTH_COUNT == 0:
            d = d % (WIDTH_COUNT - 1) + 1
    return [WIDTH_BASE + w for w in out]


def _matmul_relu(name: str, widths: list[int], seed: int) -> IRModule:
    """``h = relu(h @ W_k)`` for the consecutive widths; W_k has mean 1 and standard deviation 1
    before scaling (so that few outputs of a layer are negative and the chain never dies out to
    zeros) and is scaled to keep the values of a probe input near 1 (so that they neither vanish nor
    blow up along the chain)."""
    from plait.frontend.builder import Builder

    rng = np.random.default_rng(seed)
    b = Builder(name)
    h = b.input("x", (1, widths[0]))
    probe = np.abs(rng.standard_normal(widths[0]))
    for k in range(len(widths) - 1):
        w = rng.standard_normal((widths[k], widths[k + 1])) + 1.0
        out = np.maximum(probe @ w, 0.0)
        scale = np.sqrt(widths[k + 1]) / max(float(np.linalg.norm(out)), 1e-6)
        probe = out * scale
        h = b.nn.relu(b.nn.matmul(h, b.const((w * scale).astype(np.float32))))
    return b.finish(h)


def matmul_relu(nodes: int, seed: int = 0) -> IRModule:
    """``nodes`` calls (rounded down to even): MatMul with a small (16, 16) constant, then Relu,
    alternating. Every pair is the same kernel (lowered once, called ``nodes / 2`` times)."""
    return _matmul_relu("matmul_relu", [MATMUL_WIDTH] * (max(1, nodes // 2) + 1), seed)


def matmul_relu_distinct(nodes: int, seed: int = 0) -> IRModule:
    """Like :func:`matmul_relu`, but the widths follow :func:`width_walk`, so that each of the first
    :data:`DISTINCT_PAIRS` pairs is a kernel of its own: the worst case for code generation and the
    C compiler (a real model repeats its blocks)."""
    return _matmul_relu("matmul_relu_distinct", width_walk(max(1, nodes // 2)), seed)


def residual(nodes: int, seed: int = 0) -> IRModule:
    """``nodes // 3`` residual blocks ``h = relu(matmul(h, W_k) + h)`` of width 32 (W_k small, so
    that values grow slowly along the chain)."""
    from plait.frontend.builder import Builder

    rng = np.random.default_rng(seed)
    n = RESIDUAL_WIDTH
    b = Builder("residual")
    h = b.input("x", (1, n))
    for _ in range(max(1, nodes // 3)):
        w = rng.standard_normal((n, n)).astype(np.float32) * np.float32(0.1 / np.sqrt(n))
        h = b.nn.relu(b.add(b.nn.matmul(h, b.const(w)), h))
    return b.finish(h)


def relu_chain(nodes: int, seed: int = 0) -> IRModule:
    """``nodes`` Relu calls on a (1, 16) input: elementwise, so they all fuse into one kernel."""
    from plait.frontend.builder import Builder

    b = Builder("relu_chain")
    h = b.input("x", (1, 16))
    for _ in range(max(1, nodes)):
        h = b.nn.relu(h)
    return b.finish(h)


def count_calls(mod: IRModule) -> int:
    """Operator calls in ``main`` (what the models' sizes count)."""
    from plait.ir.op import Op
    from plait.relay.expr import Call
    from plait.relay.visitor import post_order

    return sum(1 for n in post_order(mod.main.body) if isinstance(n, Call) and isinstance(n.op, Op))


CHAIN_MODELS: dict[str, Callable[..., IRModule]] = {
    "matmul_relu": matmul_relu, "residual": residual, "relu_chain": relu_chain,
    "matmul_relu_distinct": matmul_relu_distinct}

__all__ = ["CHAIN_MODELS", "DISTINCT_PAIRS", "count_calls", "matmul_relu", "matmul_relu_distinct", "relu_chain", "residual",
           "width_walk"]
