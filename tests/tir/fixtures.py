"""Hand-written PrimFuncs used across the TIR tests (each one verifies)."""

from __future__ import annotations

import math

import numpy as np

from plait import tir
from plait.tir import (
    Allocate, AssertStmt, Buffer, Evaluate, For, IfThenElse, Let, LetStmt, PrimFunc, Var, seq,
)


def matmul(m: int = 4, n: int = 6, k: int = 5) -> PrimFunc:
    """C = A @ B with a vectorized inner loop and a reduction loop."""
    A, B, C = Buffer("A", (m, k)), Buffer("B", (k, n)), Buffer("C", (m, n))
    i, j, r = Var("i"), Var("j"), Var("k")
    body = For(i, 0, m, "parallel", For(j, 0, n, "vectorized", seq(
        C.store((i, j), 0.0),
        For(r, 0, k, "serial", C.store((i, j), C[i, j] + A[i, r] * B[r, j])),
    )))
    return PrimFunc((A, B, C), body, {"global_symbol": "matmul", "piece": "c", "num_inputs": 2})


def conv2d(n: int = 1, c: int = 2, h: int = 5, w: int = 5, o: int = 3, kh: int = 3, kw: int = 3,
           pad: int = 1, stride: int = 2) -> PrimFunc:
    """NCHW conv2d with zero padding guarded by a select (the load out of bounds is never run)."""
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    X, Wt, Y = Buffer("data", (n, c, h, w)), Buffer("weight", (o, c, kh, kw)), Buffer("out", (n, o, oh, ow))
    b, oc, y, x, ic, ry, rx = (Var(s) for s in ("b", "oc", "y", "x", "ic", "ry", "rx"))
    iy, ix = y * stride + ry - pad, x * stride + rx - pad
    inside = tir.all_(iy >= 0, iy < h, ix >= 0, ix < w)
    val = tir.select(inside, X[b, ic, iy, ix], 0.0)
    red = For(ic, 0, c, "serial", For(ry, 0, kh, "unrolled", For(rx, 0, kw, "unrolled",
              Y.store((b, oc, y, x), Y[b, oc, y, x] + val * Wt[oc, ic, ry, rx]))))
    body = For(b, 0, n, "serial", For(oc, 0, o, "parallel", For(y, 0, oh, "serial", For(x, 0, ow, "serial",
               seq(Y.store((b, oc, y, x), 0.0), red)))))
    return PrimFunc((X, Wt, Y), body, {"global_symbol": "conv2d", "num_inputs": 2})


def softmax_workspace(n: int = 8) -> PrimFunc:
    """Softmax of a vector through a global.workspace buffer and a local accumulator."""
    X, Y = Buffer("x", (n,)), Buffer("y", (n,))
    T = Buffer("exps", (n,), "float32", "global.workspace")
    acc = Buffer("acc", (1,), "float32", "local")
    i, j, k = Var("i"), Var("j"), Var("k")
    body = Allocate(T, seq(
        For(i, 0, n, "vectorized", T.store(i, tir.exp(X[i]))),
        Allocate(acc, seq(
            acc.store(0, 0.0),
            For(j, 0, n, "serial", acc.store(0, acc[0] + T[j])),
            For(k, 0, n, "serial", Y.store(k, T[k] / acc[0])),
        )),
    ))
    return PrimFunc((X, Y), body, {"global_symbol": "softmax", "num_inputs": 1})


def extern_gemm(m: int = 2, n: int = 3, k: int = 4) -> PrimFunc:
    """C = A @ B through an extern BLAS-like call on buffer addresses, then a bias in TIR."""
    A, B, bias, C = Buffer("A", (m, k)), Buffer("B", (k, n)), Buffer("bias", (n,)), Buffer("C", (m, n))
    i, j = Var("i", "int32"), Var("j", "int32")
    call = tir.call_extern("void", "plait_sgemm", tir.const(m, "int32"), tir.const(n, "int32"),
                           tir.const(k, "int32"), tir.address_of(A[0, 0]), tir.address_of(B),
                           tir.address_of(C[0, 0]))
    body = seq(Evaluate(call), For(i, 0, m, "serial", For(j, 0, n, "serial",
                                                           C.store((i, j), C[i, j] + bias[j]))))
    return PrimFunc((A, B, bias, C), body, {"global_symbol": "gemm_bias", "num_inputs": 3})


def lets_and_selects(n: int = 6) -> PrimFunc:
    """Let statements (flat and scoped), let expressions, selects, if/else, all loop kinds, int32 loops."""
    X, Y, Z = Buffer("X", (n,), "int32"), Buffer("Y", (n,), "int32"), Buffer("Z", (2,), "int32")
    i = Var("i", "int32")
    t, u, v = Var("t", "int32"), Var("u", "int32"), Var("v", "int32")
    w = Var("w", "int32")
    clipped = tir.select(X[i] > 3, tir.const(3, "int32"), tir.select(X[i] < -3, tir.const(-3, "int32"), X[i]))
    loop = For(i, 0, n, "unrolled", seq(
        LetStmt(t, X[i] * 2, IfThenElse(tir.logical_and(t > 0, tir.logical_not(tir.eq(t, 4))),
                                        Y.store(i, t),
                                        IfThenElse(t < -2, Y.store(i, -t), Y.store(i, clipped)))),
        LetStmt(u, tir.truncdiv(X[i], 4) + tir.truncmod(X[i], 3), Z.store(0, Z[0] + u)),
    ), annotations={"pragma_unroll_explicit": True, "note": "hand written"})
    init = seq(Z.store(0, 0), Z.store(1, Let(w, tir.const(7, "int32"), w * w - 1)))
    tail = LetStmt(v, Z[0] % 5, seq(Z.store(1, Z[1] + v), Z.store(0, (Z[0] << 2) >> 1)))
    return PrimFunc((X, Y, Z), seq(init, loop, tail), {"global_symbol": "lets", "num_inputs": 1})


def spec_cast(value: float, dtype: str) -> int:
    """TIR's float -> integer conversion written out independently of plait (docs/tir.md): truncation
    toward zero, NaN -> 0, saturation at the type's limits (infinities too)."""
    info = np.iinfo(dtype)
    if math.isnan(value):
        return 0
    if math.isinf(value):
        return int(info.max) if value > 0 else int(info.min)
    return min(max(math.trunc(value), int(info.min)), int(info.max))


ALL_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64")


def all_dtypes(n: int = 3) -> PrimFunc:
    """One buffer per dtype, each written from the float32 input through casts and dtype-specific ops."""
    X = Buffer("x", (n,), "float32")
    outs = [Buffer(f"out_{d}", (n,), d) for d in ALL_DTYPES]
    i = Var("i")
    stores = []
    for b in outs:
        v = tir.cast(b.dtype, X[i])
        if b.dtype == "bool":
            v = tir.logical_or(v, X[i] > 100.0)
        elif b.dtype.startswith("float"):
            v = v * tir.const(2.0, b.dtype) + tir.const(0.5, b.dtype)
        else:
            v = (v * 3 + 1) & tir.const(127, b.dtype)
        stores.append(b.store(i, v))
    return PrimFunc((X, *outs), For(i, 0, n, "serial", seq(*stores)), {"global_symbol": "all_dtypes",
                                                                       "num_inputs": 1})


def symbolic(n_name: str = "n") -> PrimFunc:
    """A scalar parameter used as a buffer extent and a loop bound; intrinsics and literals."""
    n = Var(n_name)
    A, B = Buffer("A", (n, 4)), Buffer("B", (n, 4))
    i, j = Var("i"), Var("j")
    x = A[i, j]
    val = tir.select(tir.isnan(x), tir.const(float("-inf")),
                     tir.max(tir.sqrt(tir.fabs(x)) * tir.const(-0.0), tir.pow(x, 2.0)))
    body = For(i, 0, n, "serial", For(j, 0, 4, "vectorized", B.store((i, j), val)))
    return PrimFunc((n, A, B), body, {"global_symbol": "symbolic"})


def weird_names() -> PrimFunc:
    """Names from models: quotes, comment markers, newlines, keywords, duplicates, non-identifiers."""
    A = Buffer('in"put*/\nx', (2,))
    B = Buffer("for", (2,))
    i1, i2 = Var("i"), Var("i")
    tmp = Buffer("i", (2,), "float32", "local")
    body = seq(
        For(i1, 0, 2, "serial", B.store(i1, A[i1])),
        Allocate(tmp, seq(For(i2, 0, 2, "serial", tmp.store(i2, B[i2] * 2.0)),
                          B.store(0, tmp[0] + tmp[1]))),
    )
    return PrimFunc((A, B), body, {"global_symbol": "weird \"fn\" */", "source": ("a\tb", 1, 2.5, None)})


def zero_dim() -> PrimFunc:
    """A 0-d buffer, a loop with a non-zero min and an empty-shape allocation."""
    S, X = Buffer("s", ()), Buffer("x", (10,))
    i = Var("i")
    t = Buffer("t", (), "float32", "local")
    body = Allocate(t, seq(t.store((), 1.0), For(i, 2, 8, "serial", t.store((), t[()] * X[i])),
                           S.store((), t[()])))
    return PrimFunc((X, S), body, {"global_symbol": "prod", "num_inputs": 1})


def checked_gather(n: int = 6, size: int = 10) -> PrimFunc:
    """out[i] = data[idx[i]] (negative from the end) after a serial loop checking every index is in
    [-size, size - 1] (status 1 otherwise), as TE emits a gather's check."""
    D, I, O = Buffer("data", (size,)), Buffer("idx", (n,), "int32"), Buffer("out", (n,))
    c, i = Var("c"), Var("i")
    v = tir.cast("int64", I[c])
    check = For(c, 0, n, "serial", AssertStmt(tir.all_(v >= -size, v < size), 1))
    w = tir.cast("int64", I[i])
    pos = tir.min(tir.max(tir.select(w < 0, w + size, w), 0), size - 1)
    body = seq(check, For(i, 0, n, "vectorized", O.store((i,), D[pos])))
    return PrimFunc((D, I, O), body, {"global_symbol": "checked_gather", "num_inputs": 2})


FIXTURES = {
    "matmul": matmul, "conv2d": conv2d, "softmax_workspace": softmax_workspace, "extern_gemm": extern_gemm,
    "lets_and_selects": lets_and_selects, "all_dtypes": all_dtypes, "symbolic": symbolic,
    "weird_names": weird_names, "zero_dim": zero_dim, "checked_gather": checked_gather,
}

