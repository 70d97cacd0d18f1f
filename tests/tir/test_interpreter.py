"""The TIR interpreter against numpy on small hand-written PrimFuncs."""

import math

import numpy as np
import pytest

from plait import tir
from plait.tir import Buffer, For, IntImm, PrimFunc, Var, seq

from .fixtures import ALL_DTYPES, FIXTURES, spec_cast

RNG = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def test_matmul_matches_numpy():
    a, b, c = rand(4, 5), rand(5, 6), np.zeros((4, 6), np.float32)
    f = FIXTURES["matmul"]()
    tir.evaluate(f, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    c2 = np.zeros_like(c)
    tir.evaluate(f, a, b, c2, reverse_parallel=True)  # independent iterations: same result
    np.testing.assert_array_equal(c, c2)


def conv2d_ref(x, w, pad, stride):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.float32)
    for y in range(oh):
        for z in range(ow):
            patch = xp[:, :, y * stride:y * stride + kh, z * stride:z * stride + kw]
            out[:, :, y, z] = np.einsum("nchw,ochw->no", patch, w)
    return out


def test_conv2d_with_padding_select_matches_numpy():
    x, w = rand(1, 2, 5, 5), rand(3, 2, 3, 3)
    y = np.zeros((1, 3, 3, 3), np.float32)
    tir.evaluate(FIXTURES["conv2d"](), x, w, y)
    np.testing.assert_allclose(y, conv2d_ref(x, w, 1, 2), rtol=1e-5, atol=1e-5)


def test_softmax_through_workspace():
    x, y = rand(8), np.zeros(8, np.float32)
    tir.evaluate(FIXTURES["softmax_workspace"](), x, y)
    e = np.exp(x)
    np.testing.assert_allclose(y, e / e.sum(), rtol=1e-6)


def test_extern_call_gets_flat_views_and_writes_through_them():
    calls = []

    def sgemm(m, n, k, a, b, c):
        calls.append((int(m), int(n), int(k), a.shape, b.shape, c.shape))
        c[: m * n] = (a[: m * k].reshape(m, k) @ b[: k * n].reshape(k, n)).reshape(-1)

    a, b, bias, c = rand(2, 4), rand(4, 3), rand(3), np.zeros((2, 3), np.float32)
    tir.evaluate(FIXTURES["extern_gemm"](), a, b, bias, c, externs={"plait_sgemm": sgemm})
    assert calls == [(2, 3, 4, (8,), (12,), (6,))]
    np.testing.assert_allclose(c, a @ b + bias, rtol=1e-5)
    with pytest.raises(tir.TIREvalError) as e:
        tir.evaluate(FIXTURES["extern_gemm"](), a, b, bias, c)
    assert str(e.value) == ("extern function 'plait_sgemm' has no Python implementation "
                            "(pass externs={'plait_sgemm': ...})")


def test_lets_selects_and_integer_ops():
    x = np.array([5, -2, 2, -7, 0, 9], np.int32)
    y, z = np.zeros(6, np.int32), np.zeros(2, np.int32)
    tir.evaluate(FIXTURES["lets_and_selects"](), x, y, z)
    ey, acc = np.zeros(6, np.int32), 0
    for k, v in enumerate(x.tolist()):
        t = v * 2
        ey[k] = t if t > 0 and t != 4 else (-t if t < -2 else max(-3, min(3, v)))
        acc += int(math.trunc(v / 4)) + int(math.fmod(v, 3))
    np.testing.assert_array_equal(y, ey)
    vv = acc % 5
    assert z.tolist() == [(acc << 2) >> 1, 48 + vv]


def test_all_dtypes_match_the_defined_semantics():
    x = np.array([1.7, -2.5, 300.25, np.nan, -np.inf, 3e9], np.float32)
    outs = [np.zeros(6, d) for d in ALL_DTYPES]
    tir.evaluate(FIXTURES["all_dtypes"](6), x, *outs)
    with np.errstate(all="ignore"):
        for d, got in zip(ALL_DTYPES, outs):
            v = x.astype(d) if d == "bool" or d.startswith("float") else \
                np.array([spec_cast(float(e), d) for e in x], d)  # saturating: 300.25 -> 127 in int8
            if d == "bool":
                want = v | (x > 100)
            elif d.startswith("float"):
                want = v * np.array(2, d) + np.array(0.5, d)
            else:
                want = (v * np.array(3, d) + np.array(1, d)) & np.array(127, d)
            np.testing.assert_array_equal(got, want, err_msg=d)


def test_symbolic_shape_and_intrinsics():
    f = FIXTURES["symbolic"]()
    a = np.array([[1.0, -4.0, np.nan, 0.5]] * 3, np.float32)
    b = np.zeros((3, 4), np.float32)
    tir.evaluate(f, 3, a, b)
    want = np.where(np.isnan(a), -np.inf, np.maximum(np.sqrt(np.abs(a)) * -0.0, a ** 2))
    np.testing.assert_array_equal(b, want)
    with pytest.raises(tir.TIRError) as e:
        tir.evaluate(f, 2, a, b)
    assert str(e.value) == "PrimFunc 'symbolic': argument 1 ('A'): expected shape (2, 4), got (3, 4)"


def test_zero_dim_buffers():
    x, s = rand(10), np.zeros((), np.float32)
    tir.evaluate(FIXTURES["zero_dim"](), x, s)
    np.testing.assert_allclose(s, np.prod(x[2:10]), rtol=1e-5)  # min 2, extent 8


def test_runtime_errors_name_the_access():
    A = Buffer("A", (4,))
    i = Var("i")
    f = PrimFunc((A,), For(i, 0, 5, "serial", A.store(i, A[i] + 1.0)), {"global_symbol": "oob"})
    with pytest.raises(tir.TIREvalError) as e:
        tir.evaluate(f, np.zeros(4, np.float32))
    assert str(e.value) == "load A[4]: index 0 is out of bounds for shape (4,)"


def test_argument_checks():
    f = FIXTURES["matmul"]()
    with pytest.raises(tir.TIRError) as e:
        tir.evaluate(f, rand(4, 5))
    assert str(e.value) == "PrimFunc 'matmul' takes 3 argument(s), got 1"
    with pytest.raises(tir.TIRError) as e:
        tir.evaluate(f, rand(4, 5), rand(5, 6, dtype="float64"), rand(4, 6))
    assert str(e.value) == "PrimFunc 'matmul': argument 1 ('B'): expected a numpy array of float32, got float64 array"


def test_reverse_parallel_exposes_loop_carried_dependencies():
    A = Buffer("A", (6,))
    i = Var("i")
    scan = PrimFunc((A,), For(i, 1, 5, "parallel", A.store(i, A[i - 1] + 1.0)))
    a, b = np.zeros(6, np.float32), np.zeros(6, np.float32)
    tir.evaluate(scan, a)
    tir.evaluate(scan, b, reverse_parallel=True)
    assert a.tolist() == [0, 1, 2, 3, 4, 5] and b.tolist() == [0, 1, 1, 1, 1, 1]


def test_uninitialized_workspace_reads_show_up():
    Y = Buffer("Y", (2,))
    T = Buffer("T", (2,), "float32", "global.workspace")
    f = PrimFunc((Y,), tir.Allocate(T, seq(T.store(0, 1.0), Y.store(0, T[0]), Y.store(1, T[1]))))
    y = np.zeros(2, np.float32)
    tir.evaluate(f, y)
    assert y[0] == 1.0 and np.isnan(y[1])


def test_integer_wraparound_and_casts_follow_c():
    x8 = Var("x", "int8")
    assert tir.evaluate_expr(x8 + 1, {x8: 127}) == -128
    u = Var("u", "uint8")
    assert tir.evaluate_expr(u - 1, {u: 0}) == 255
    f = Var("f")
    f32 = Var("f", "float32")
    assert tir.evaluate_expr(tir.cast("int32", f32), {f32: -2.9}) == -2
    assert tir.evaluate_expr(tir.cast("bool", f32), {f32: 0.25}) == np.True_
    assert tir.evaluate_expr(tir.truncdiv(f, -2), {f: 7}) == -3 and tir.evaluate_expr(f // -2, {f: 7}) == -4
    assert tir.evaluate_expr(tir.truncmod(f, -2), {f: -7}) == -1 and tir.evaluate_expr(f % -2, {f: -7}) == -1
    assert tir.evaluate_expr(tir.shift_right(f, 1), {f: -7}) == -4
    v = tir.evaluate_expr(f32 * 3.0, {f32: 0.1})
    assert v.dtype == np.float32 and v == np.float32(0.1) * np.float32(3.0)


@pytest.mark.parametrize("name,x,want", [
    ("round", 2.5, 3.0), ("round", -2.5, -3.0), ("round", 0.49999997, 0.0), ("nearbyint", 2.5, 2.0),
    ("erf", 0.5, math.erf(0.5)), ("exp", 1.0, math.e), ("rsqrt", 4.0, 0.5), ("trunc", -1.5, -1.0),
])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_intrinsics(name, x, want, dtype):
    if dtype == "float16" and x == 0.49999997:
        x, want = 0.4998, 0.0  # 0.49999997 is 0.5 in float16
    v = Var("v", dtype)
    got = tir.evaluate_expr(tir.call_intrin(name, v), {v: x})
    assert got.dtype == np.dtype(dtype)
    assert float(got) == pytest.approx(float(np.dtype(dtype).type(want)), rel=1e-3 if dtype == "float16" else 1e-6)


def test_select_and_logic_are_lazy():
    A = Buffer("A", (2,))
    i = Var("i")
    guarded = tir.select(i < 2, A[i], tir.const(-1.0))
    assert tir.evaluate_expr(guarded, {i: 5}, {A: np.ones(2, np.float32)}) == -1.0
    both = tir.logical_and(i < 2, A[i] > 0.0)
    assert not tir.evaluate_expr(both, {i: 7}, {A: np.ones(2, np.float32)})
    with pytest.raises(tir.TIREvalError):
        tir.evaluate_expr(A[i], {i: 2}, {A: np.ones(2, np.float32)})
    assert tir.evaluate_expr(tir.min(tir.const(float("nan")), 1.0)) == 1.0  # a < b ? a : b
    assert np.isnan(tir.evaluate_expr(tir.max(0.0, tir.const(float("nan")))))
    assert isinstance(IntImm(0), tir.PrimExpr)


def test_what_c_leaves_undefined_has_one_defined_result():
    """Division by zero, INT_MIN / -1, shifts by any amount, float -> int casts of NaN, infinities and
    out-of-range values: docs/tir.md, "Numeric semantics" (what numpy gives for the same operations)."""
    a, b = Var("a", "int32"), Var("b", "int32")
    lo = -2**31
    for fn in (tir.floordiv, tir.truncdiv, tir.floormod, tir.truncmod):
        assert tir.evaluate_expr(fn(a, b), {a: 7, b: 0}) == 0
        assert tir.evaluate_expr(fn(a, b), {a: lo, b: 0}) == 0
    assert tir.evaluate_expr(tir.floordiv(a, b), {a: lo, b: -1}) == lo
    assert tir.evaluate_expr(tir.truncdiv(a, b), {a: lo, b: -1}) == lo
    assert tir.evaluate_expr(tir.floormod(a, b), {a: lo, b: -1}) == 0
    assert tir.evaluate_expr(tir.truncmod(a, b), {a: lo, b: -1}) == 0
    u, n = Var("u", "uint8"), Var("n", "uint8")
    assert tir.evaluate_expr(tir.floordiv(u, n), {u: 200, n: 0}) == 0
    x8, s8 = Var("x", "int8"), Var("s", "int8")
    for x, s, left, right in [(1, 8, 0, 0), (-3, 8, 0, -1), (-3, -1, 0, -1), (5, -1, 0, 0), (-128, 7, 0, -1),
                              (3, 7, -128, 0), (-1, 1, -2, -1), (100, 100, 0, 0)]:
        assert tir.evaluate_expr(tir.shift_left(x8, s8), {x8: x, s8: s}) == left, (x, s)
        assert tir.evaluate_expr(tir.shift_right(x8, s8), {x8: x, s8: s}) == right, (x, s)
    assert tir.evaluate_expr(tir.shift_right(u, n), {u: 200, n: 8}) == 0
    for src in ("float16", "float32", "float64"):
        v = Var("v", src)
        for d in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"):
            for x in (float("nan"), float("inf"), -float("inf"), -0.75, -1.0, 2.9, 300.5, -300.5, 65504.0,
                      -65504.0, 3e9, -3e9, 1e19, 2.0**63, 2.0**64, 1e300):
                with np.errstate(over="ignore"):
                    xv = float(np.array(x, src))  # the value in src: 1e300 is inf in float32
                got = tir.evaluate_expr(tir.cast(d, v), {v: xv})
                assert got.dtype == np.dtype(d) and int(got) == spec_cast(xv, d), (src, d, x, got)
