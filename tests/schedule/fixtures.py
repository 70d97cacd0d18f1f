"""Hand-built PrimFuncs shaped like ``te.create_prim_func`` output: one loop nest per stage, the
outermost loop annotated {stage, op, pattern}, reduction stages with a ``local`` accumulator and the
elementwise epilogue applied at the final store. Loop names are unique (stage name + axis)."""

from __future__ import annotations

import numpy as np

from plait import tir
from plait.tir import Allocate, Buffer, For, PrimFunc, Var, seq


def _nest(names, extents, body, ann=None):
    vs = [Var(n) for n in names]
    stmt = body(*vs)
    for k in reversed(range(len(vs))):
        stmt = For(vs[k], 0, extents[k], "serial", stmt, ann if k == 0 and ann else {})
    return stmt


def _stage(name, op, pattern):
    return {"stage": name, "op": op, "pattern": pattern}


def _reduce_stage(names, extents, rnames, rextents, init, update, epilogue, ann):
    """for spatial: acc = init; for reduce: acc = update(acc, *vars); epilogue(acc, *spatial)."""
    def body(*s):
        acc = Buffer(f"{ann['stage']}_acc", (1,), "float32", "local")
        red = _nest(rnames, rextents, lambda *r: acc.store(0, update(acc[0], *s, *r)))
        return Allocate(acc, seq(acc.store(0, init), red, epilogue(acc[0], *s)))
    return _nest(names, extents, body, ann)


def conv2d(n=1, c=3, h=6, w=7, o=4, k=3, pad=1, stride=1, relu=True):
    """NCHW conv2d + bias (+ relu), zero padding inlined as a guarded select."""
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    X, W, B = Buffer("data", (n, c, h, w)), Buffer("weight", (o, c, k, k)), Buffer("bias", (o,))
    Y = Buffer("out", (n, o, oh, ow))

    def update(acc, b, oc, y, x, ic, ry, rx):
        iy, ix = y * stride + ry - pad, x * stride + rx - pad
        inside = tir.all_(iy >= 0, iy < h, ix >= 0, ix < w)
        return acc + tir.select(inside, X[b, ic, iy, ix], 0.0) * W[oc, ic, ry, rx]

    def epi(acc, b, oc, y, x):
        v = acc + B[oc]
        return Y.store((b, oc, y, x), tir.max(v, tir.const(0.0)) if relu else v)

    body = _reduce_stage(["conv_n", "conv_oc", "conv_oh", "conv_ow"], [n, o, oh, ow],
                         ["conv_ic", "conv_kh", "conv_kw"], [c, k, k], 0.0, update, epi,
                         _stage("conv", "nn.conv2d", "out_elemwise_fusable"))
    return PrimFunc((X, W, B, Y), body, {"global_symbol": "fused_conv2d_add_relu", "num_inputs": 3})


def depthwise_conv2d(n=1, c=4, h=6, w=5, k=3, pad=1):
    oh, ow = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    X, W, Y = Buffer("data", (n, c, h, w)), Buffer("weight", (c, 1, k, k)), Buffer("out", (n, c, oh, ow))

    def update(acc, b, ch, y, x, ry, rx):
        iy, ix = y + ry - pad, x + rx - pad
        inside = tir.all_(iy >= 0, iy < h, ix >= 0, ix < w)
        return acc + tir.select(inside, X[b, ch, iy, ix], 0.0) * W[ch, 0, ry, rx]

    body = _reduce_stage(["dw_n", "dw_c", "dw_oh", "dw_ow"], [n, c, oh, ow], ["dw_kh", "dw_kw"], [k, k], 0.0,
                         update, lambda acc, b, ch, y, x: Y.store((b, ch, y, x), acc),
                         _stage("dw", "nn.conv2d", "out_elemwise_fusable"))
    return PrimFunc((X, W, Y), body, {"global_symbol": "fused_dwconv", "num_inputs": 2})


def dense(m=1, n=12, k=16):
    """out = x @ W.T + bias (nn.dense: weight [N, K])."""
    X, W, B, Y = Buffer("x", (m, k)), Buffer("w", (n, k)), Buffer("b", (n,)), Buffer("y", (m, n))
    body = _reduce_stage(["dense_i", "dense_j"], [m, n], ["dense_k"], [k], 0.0,
                         lambda acc, i, j, r: acc + X[i, r] * W[j, r],
                         lambda acc, i, j: Y.store((i, j), acc + B[j]),
                         _stage("dense", "nn.dense", "out_elemwise_fusable"))
    return PrimFunc((X, W, B, Y), body, {"global_symbol": "fused_dense_add", "num_inputs": 3})


def matmul(m=6, n=16, k=5):
    """out = A @ B (nn.matmul, B is [K, N])."""
    A, Bm, Y = Buffer("A", (m, k)), Buffer("B", (k, n)), Buffer("Y", (m, n))
    body = _reduce_stage(["mm_i", "mm_j"], [m, n], ["mm_k"], [k], 0.0,
                         lambda acc, i, j, r: acc + A[i, r] * Bm[r, j],
                         lambda acc, i, j: Y.store((i, j), acc),
                         _stage("mm", "nn.matmul", "out_elemwise_fusable"))
    return PrimFunc((A, Bm, Y), body, {"global_symbol": "fused_matmul", "num_inputs": 2})


def elementwise(shape=(2, 3, 10)):
    """out = relu(a + b) with b broadcast along the last axis."""
    A, Bb, Y = Buffer("a", shape), Buffer("b", shape[:-1] + (1,)), Buffer("y", shape)
    names = [f"add_i{k}" for k in range(len(shape))]

    def body(*v):
        return Y.store(v, tir.max(A[v] + Bb[(*v[:-1], 0)], tir.const(0.0)))
    return PrimFunc((A, Bb, Y), _nest(names, list(shape), body, _stage("add", "add", "broadcast")),
                    {"global_symbol": "fused_add_relu", "num_inputs": 2})


def _nan_max(a, b):
    """max that propagates NaN (commutative, unlike C's a > b ? a : b), as TE's max reducer."""
    return tir.select(tir.logical_or(tir.isnan(a), a > b), a, b)


def softmax(rows=3, cols=10):
    """Softmax over the last axis in four stages through workspace buffers."""
    X, Y = Buffer("x", (rows, cols)), Buffer("y", (rows, cols))
    mx = Buffer("T_max", (rows,), "float32", "global.workspace")
    ex = Buffer("T_exp", (rows, cols), "float32", "global.workspace")
    sm = Buffer("T_sum", (rows,), "float32", "global.workspace")
    s1 = _reduce_stage(["max_i"], [rows], ["max_k"], [cols], float("-inf"),
                       lambda acc, i, r: _nan_max(acc, X[i, r]), lambda acc, i: mx.store(i, acc),
                       _stage("max", "max", "reduction"))
    s2 = _nest(["exp_i", "exp_j"], [rows, cols], lambda i, j: ex.store((i, j), tir.exp(X[i, j] - mx[i])),
               _stage("exp", "exp", "injective"))
    s3 = _reduce_stage(["sum_i"], [rows], ["sum_k"], [cols], 0.0, lambda acc, i, r: acc + ex[i, r],
                       lambda acc, i: sm.store(i, acc), _stage("sum", "sum", "reduction"))
    s4 = _nest(["div_i", "div_j"], [rows, cols], lambda i, j: Y.store((i, j), ex[i, j] / sm[i]),
               _stage("div", "divide", "broadcast"))
    body = Allocate(mx, Allocate(ex, Allocate(sm, seq(s1, s2, s3, s4))))
    return PrimFunc((X, Y), body, {"global_symbol": "fused_softmax", "num_inputs": 1})


def two_stages(shape=(3, 4)):
    """T = a * 2 (workspace), y = T + 1: an injective producer and an elementwise consumer."""
    A, Y = Buffer("a", shape), Buffer("y", shape)
    T = Buffer("T", shape, "float32", "global.workspace")
    s1 = _nest(["p_i", "p_j"], list(shape), lambda i, j: T.store((i, j), A[i, j] * 2.0), _stage("p", "multiply", "elemwise"))
    s2 = _nest(["c_i", "c_j"], list(shape), lambda i, j: Y.store((i, j), T[i, j] + 1.0), _stage("c", "add", "elemwise"))
    return PrimFunc((A, Y), Allocate(T, seq(s1, s2)), {"global_symbol": "two", "num_inputs": 1})


def conv_then_relu(n=1, c=2, h=5, w=5, o=3, k=3):
    """A reduction stage writing a workspace, then a separate relu stage (reverse_compute_inline)."""
    X, W, Y = Buffer("data", (n, c, h, w)), Buffer("weight", (o, c, k, k)), Buffer("out", (n, o, h - k + 1, w - k + 1))
    T = Buffer("T_conv", Y.shape, "float32", "global.workspace")
    s1 = _reduce_stage(["cv_n", "cv_oc", "cv_oh", "cv_ow"], [n, o, h - k + 1, w - k + 1], ["cv_ic", "cv_kh", "cv_kw"],
                       [c, k, k], 0.0, lambda acc, b, oc, y, x, ic, ry, rx: acc + X[b, ic, y + ry, x + rx] * W[oc, ic, ry, rx],
                       lambda acc, b, oc, y, x: T.store((b, oc, y, x), acc), _stage("cv", "nn.conv2d", "out_elemwise_fusable"))
    s2 = _nest(["r_n", "r_c", "r_h", "r_w"], list(Y.static_shape),
               lambda *v: Y.store(v, tir.max(T[v], tir.const(0.0))), _stage("relu", "nn.relu", "elemwise"))
    return PrimFunc((X, W, Y), Allocate(T, seq(s1, s2)), {"global_symbol": "conv_relu", "num_inputs": 2})


def inputs_for(func: PrimFunc, seed: int = 0) -> list[np.ndarray]:
    """Random inputs and zeroed outputs for ``func``'s buffer parameters."""
    rng = np.random.default_rng(seed)
    n_in = func.attrs["num_inputs"]
    out = []
    for k, p in enumerate(func.params):
        shape = p.static_shape
        if k < n_in:
            out.append(rng.standard_normal(shape).astype(p.dtype))
        else:
            out.append(np.zeros(shape, p.dtype))
    return out


def run(func: PrimFunc, args: list[np.ndarray], reverse_parallel: bool = False) -> list[np.ndarray]:
    """Evaluate ``func`` on copies of ``args``; returns the outputs."""
    arrays = [a.copy() for a in args]
    tir.evaluate(func, *arrays, reverse_parallel=reverse_parallel)
    return arrays[func.attrs["num_inputs"]:]


ALL = {"conv2d": conv2d, "depthwise_conv2d": depthwise_conv2d, "dense": dense, "matmul": matmul,
       "elementwise": elementwise, "softmax": softmax, "two_stages": two_stages, "conv_then_relu": conv_then_relu}
