"""TIR semantics in the generated C: integer division and wrap-around, casts, float16, intrinsics,
min/max with NaN, lazy select/and/or, lets, deep expressions."""

from __future__ import annotations

import numpy as np
import pytest

from plait import tir
from plait.backends.c.backend import codegen_c
from plait.tir import Buffer, For, IntImm, LetStmt, PrimFunc, Var, seq
from tir.fixtures import ALL_DTYPES, spec_cast

from .conftest import assert_same, run_c, run_ref

RNG = np.random.default_rng(3)


def elementwise(name, in_dtypes, outs, n, loop_dtype="int64"):
    """A PrimFunc over ``n`` elements: inputs X0, X1... and one output per (dtype, fn(i, *loads))."""
    ins = [Buffer(f"X{k}", (n,), d) for k, d in enumerate(in_dtypes)]
    obufs = [Buffer(f"Y{k}", (n,), d) for k, (d, _) in enumerate(outs)]
    i = Var("i", loop_dtype)
    loads = [b[i] for b in ins]
    body = For(i, 0, n, "serial", seq(*[o.store(i, fn(i, *loads)) for o, (_, fn) in zip(obufs, outs)]))
    return PrimFunc((*ins, *obufs), body, {"global_symbol": name, "num_inputs": len(ins)})


def check(func, inputs, cache_dir, rtol=0.0, atol=0.0, interpret=True):
    """Run ``func`` compiled (and, with ``interpret``, compare with the TIR interpreter); the outputs."""
    outs = [np.zeros(b.static_shape, b.dtype) for b in func.params[len(inputs):]]
    args = [*inputs, *outs]
    (got,) = run_c([func], [args], cache_dir)
    if interpret:
        assert_same(got, run_ref(func, args), rtol, atol)
    return got[len(inputs):]


# ---- integers -------------------------------------------------------------------------------------

DIVS = {"floordiv": tir.floordiv, "floormod": tir.floormod, "truncdiv": tir.truncdiv, "truncmod": tir.truncmod}


def _py_div(kind, a, b):
    """Exact TIR semantics on Python ints (or int64/object arrays): floor or truncation."""
    if kind == "floordiv":
        return a // b
    if kind == "floormod":
        return a % b
    same = (a < 0) == (b < 0)
    q = abs(a) // abs(b) * (np.where(same, 1, -1) if isinstance(a, np.ndarray) else (1 if same else -1))
    return q if kind == "truncdiv" else a - b * q


def _wrap(v, dtype):
    info = np.iinfo(dtype)
    span = int(info.max) - int(info.min) + 1
    return (v - int(info.min)) % span + int(info.min)


def test_int8_division_on_every_pair_of_values(cache_dir):
    a, b = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    keep = b != 0
    a, b = a[keep].astype(np.int8), b[keep].astype(np.int8)
    f = elementwise("div8", ["int8", "int8"], [("int8", lambda i, x, y, fn=fn: fn(x, y)) for fn in DIVS.values()],
                    a.size)
    got = check(f, [a, b], cache_dir, interpret=False)  # the interpreter is slow on 65280 pairs: Python ints
    for (kind, _), g in zip(DIVS.items(), got):
        want = _wrap(_py_div(kind, a.astype(np.int64), b.astype(np.int64)), "int8")
        np.testing.assert_array_equal(g, want.astype(np.int8), err_msg=kind)


@pytest.mark.parametrize("dtype", ["int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_division_edge_values(dtype, cache_dir):
    info = np.iinfo(dtype)
    edges = sorted({int(info.min), int(info.min) + 1, -7, -3, -1, 0, 1, 3, 7, int(info.max) - 1, int(info.max)})
    edges = [v for v in edges if info.min <= v <= info.max]
    pairs = [(x, y) for x in edges for y in edges if y != 0]
    rnd = RNG.integers(info.min, info.max, (200, 2), dtype=dtype, endpoint=True)
    pairs += [(int(x), int(y)) for x, y in rnd if y != 0]
    a = np.array([p[0] for p in pairs], dtype)
    b = np.array([p[1] for p in pairs], dtype)
    outs = [(dtype, lambda i, x, y, fn=fn: fn(x, y)) for fn in DIVS.values()]
    # literal divisors take the inline path (positive) or the helper (negative, -1)
    for lit in (4, -3, -1) if dtype[0] != "u" else (4,):
        c = tir.const(lit, dtype)
        outs += [(dtype, lambda i, x, y, fn=fn, c=c: fn(x, c)) for fn in DIVS.values()]
    got = check(elementwise("divs", [dtype, dtype], outs, len(pairs)), [a, b], cache_dir)
    for (kind, _), g in zip(DIVS.items(), got):
        want = [_wrap(int(_py_div(kind, x, y)), dtype) for x, y in pairs]
        np.testing.assert_array_equal(g, np.array(want, dtype), err_msg=kind)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_integer_arithmetic_wraps_like_tir(dtype, cache_dir):
    info = np.iinfo(dtype)
    vals = np.array([info.min, info.max, info.max - 1, 0, 1, 3, -1 if dtype[0] != "u" else 2, 100], dtype)
    other = np.array([1, 1, 3, info.max, info.min, 7, info.max, 3], dtype)
    width = np.dtype(dtype).itemsize * 8
    outs = [(dtype, lambda i, x, y: x + y), (dtype, lambda i, x, y: x - y), (dtype, lambda i, x, y: x * y),
            (dtype, lambda i, x, y: x << tir.const(width - 2, dtype)), (dtype, lambda i, x, y: x >> tir.const(1, dtype)),
            (dtype, lambda i, x, y: ~x), (dtype, lambda i, x, y: (x & y) | (x ^ y)),
            (dtype, lambda i, x, y: tir.min(x, y)), (dtype, lambda i, x, y: tir.max(x, y)),
            ("bool", lambda i, x, y: x < y), ("bool", lambda i, x, y: tir.eq(x, y))]
    check(elementwise("wrap", [dtype, dtype], outs, len(vals)), [vals, other], cache_dir)


def test_int64_literals_compute_in_64_bits(cache_dir):
    one, big = tir.const(1, "int64"), tir.const(100000, "int64")
    c = IntImm(3, "int64")
    outs = [("int64", lambda i: tir.ShiftLeft(one, IntImm(40, "int64"))), ("int64", lambda i: tir.Mul(big, big)),
            ("int64", lambda i: tir.Add(IntImm(2**31 - 1, "int64"), IntImm(2**31 - 1, "int64"))),
            ("int64", lambda i: tir.ShiftLeft(tir.Select(i > 0, c, c), IntImm(33, "int64"))),
            ("int64", lambda i: tir.Sub(IntImm(-2**63, "int64"), one)),
            ("int64", lambda i: tir.BitwiseNot(IntImm(5, "int64")))]
    got = check(elementwise("lit64", [], outs, 2), [], cache_dir)
    assert [int(g[0]) for g in got] == [1 << 40, 10**10, 2**32 - 2, 3 << 33, 2**63 - 1, -6]


def test_int32_index_arithmetic_and_wider_buffers(cache_dir):
    # int32 loop variables index a buffer: the offset is computed in int32 (static size < 2**31)
    X, Y = Buffer("X", (3, 5), "float32"), Buffer("Y", (5, 3), "float32")
    i, j = Var("i", "int32"), Var("j", "int32")
    f = PrimFunc((X, Y), For(i, 0, 3, "serial", For(j, 0, 5, "serial", Y.store((j, i), X[i, j]))),
                 {"global_symbol": "transpose32"})
    assert "Y[j * 3 + i] = X[i * 5 + j];" in codegen_c([f]).source
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    (got,) = run_c([f], [[x, np.zeros((5, 3), np.float32)]], cache_dir)
    np.testing.assert_array_equal(got[1], x.T)


def test_symbolic_shapes_use_horner_form_and_scalar_params(cache_dir):
    n, m = Var("n"), Var("m")
    s = Var("scale", "float32")
    X, Y = Buffer("X", (n, m)), Buffer("Y", (m, n))
    i, j = Var("i"), Var("j")
    body = For(i, 0, n, "serial", For(j, 0, m, "vectorized", Y.store((j, i), X[i, j] * s)))
    f = PrimFunc((n, m, s, X, Y), body, {"global_symbol": "tr"})
    src = codegen_c([f]).source
    assert "int32_t tr(int64_t n, int64_t m, float scale, const float* restrict X, float* restrict Y) {" in src
    assert "Y[j * n + i] = X[i * m + j] * scale;" in src
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    (got,) = run_c([f], [[4, 6, 0.5, x, np.zeros((6, 4), np.float32)]], cache_dir)
    np.testing.assert_array_equal(got[4], (x * np.float32(0.5)).T)


# ---- casts and float16 ----------------------------------------------------------------------------


@pytest.mark.parametrize("src", ALL_DTYPES)
def test_casts_between_every_pair_of_dtypes(src, cache_dir):
    if src == "bool":
        x = np.array([True, False, True, True, False, False])
    elif src.startswith("float"):
        x = np.array([0.0, -0.0, 1.5, -2.75, 100.25, -7.5], src)
    else:
        x = np.array([0, 1, 100, 7, 3, 12] if src[0] == "u" else [0, -1, 100, -7, 3, -12], src)
    outs = [(d, lambda i, v, d=d: tir.cast(d, v)) for d in ALL_DTYPES]
    check(elementwise("casts", [src], outs, len(x)), [x], cache_dir)


def test_float64_to_float16_rounds_once(cache_dir):
    # 1 + 2**-11 + 2**-40 is just above the midpoint of two float16 values: through float32 it would
    # become the midpoint and round to even (1.0); rounding once gives 1 + 2**-10
    x = np.array([1 + 2**-11 + 2**-40, 65519.99, 65520.0, 2**-25, 2**-25 * 1.0001, -2**-24 * 1.5, 1e-30], np.float64)
    (got,) = check(elementwise("d2h", ["float64"], [("float16", lambda i, v: tir.cast("float16", v))], len(x)),
                   [x], cache_dir)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, x.astype(np.float16))
    assert got[0] == np.float16(1 + 2**-10)


@pytest.mark.parametrize("n", [2, 3, 6, 64])
def test_float64_rounded_to_float32_and_widened_again_keeps_the_rounding(n, cache_dir):
    # gcc 12's SLP vectorizer drops the rounding of (double)(float)(a * c) in a group of two doubles
    # (n = 2, 3, 6 gave the unrounded product): such a function is compiled without it
    a, c = RNG.standard_normal(n), RNG.standard_normal(n)
    func = elementwise("d2f2d", ["float64", "float64"],
                       [("float64", lambda i, x, y: tir.cast("float64", tir.cast("float32", x * y)))], n)
    (got,) = check(func, [a, c], cache_dir)
    np.testing.assert_array_equal(got, (a * c).astype(np.float32).astype(np.float64))
    assert 'PLAIT_C_OPTIMIZE("no-tree-slp-vectorize")\nint32_t d2f2d(' in codegen_c([func]).source


def test_float16_every_value_loads_stores_and_computes(cache_dir):
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    x = bits.view(np.float16)
    outs = [("float16", lambda i, v: v), ("float16", lambda i, v: v * tir.const(1.5, "float16") + tir.const(0.25, "float16")),
            ("float16", lambda i, v: v / tir.const(3.0, "float16")), ("float32", lambda i, v: tir.cast("float32", v)),
            ("float16", lambda i, v: tir.sqrt(v)), ("bool", lambda i, v: tir.isnan(v)),
            ("float16", lambda i, v: tir.max(v, tir.const(0.5, "float16")))]
    got = check(elementwise("h", ["float16"], outs, x.size), [x], cache_dir, interpret=False)
    same = ~np.isnan(x)
    np.testing.assert_array_equal(got[0].view(np.uint16)[same], bits[same])  # bit exact, signed zeros too
    with np.errstate(all="ignore"):  # numpy computes float16 like TIR: in float32, rounded once
        want = [x, x * np.float16(1.5) + np.float16(0.25), x / np.float16(3.0), x.astype(np.float32), np.sqrt(x),
                np.isnan(x), np.where(x > np.float16(0.5), x, np.float16(0.5))]
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"output {k}")


def test_float32_to_float16_matches_numpy_on_random_bit_patterns(cache_dir):
    x = RNG.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([x, np.array([65504.0, 65519.0, 65520.0, 6e-8, 2**-24, 2**-25, -0.0, np.inf, -np.inf],
                                    np.float32)])
    (got,) = check(elementwise("f2h", ["float32"], [("float16", lambda i, v: tir.cast("float16", v))], x.size),
                   [x], cache_dir)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got.view(np.uint16)[ok], want.view(np.uint16)[ok])
    assert np.isnan(got[~ok]).all()


# ---- floats -----------------------------------------------------------------------------------------

UNARY_DOMAIN = {"acosh": (1.0, 4.0), "acos": (-1.0, 1.0), "asin": (-1.0, 1.0), "atanh": (-0.9, 0.9),
                "log": (0.1, 5.0), "log2": (0.1, 5.0), "log10": (0.1, 5.0), "log1p": (-0.5, 5.0),
                "sqrt": (0.0, 9.0), "rsqrt": (0.1, 9.0)}


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_every_intrinsic(dtype, cache_dir):
    n = 64
    names = list(tir.INTRINSICS)
    outs, inputs = [], []
    for k, name in enumerate(names):
        intr = tir.get_intrinsic(name)
        lo, hi = UNARY_DOMAIN.get(name, (-3.0, 3.0))
        inputs.append(RNG.uniform(lo, hi, n).astype(dtype))
        if intr.arity == 3:
            fn = (lambda i, *x, k=k, name=name: tir.call_intrin(name, x[k], x[-1], x[k]))
        elif intr.arity == 2:
            fn = (lambda i, *x, k=k, name=name: tir.call_intrin(name, x[k], x[-1]))
        else:
            fn = (lambda i, *x, k=k, name=name: tir.call_intrin(name, x[k]))
        outs.append((intr.result_dtype(dtype), fn))
    second = RNG.uniform(0.5, 2.0, n).astype(dtype)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.5, -2.5, 0.5], dtype)
    inputs = [np.concatenate([x[:-len(special)], special]) for x in inputs] + [second]
    f = elementwise(f"intrin_{dtype}", [dtype] * (len(names) + 1), outs, n)
    rtol = {"float32": 2e-6, "float64": 1e-13, "float16": 1e-3}[dtype]
    got = check(f, inputs, cache_dir, rtol=rtol, atol=rtol)
    assert "sqrtf(" in codegen_c([f]).source if dtype != "float64" else "sqrt(" in codegen_c([f]).source
    # and against numpy for a few
    x = inputs[names.index("exp")]
    np.testing.assert_allclose(got[names.index("exp")].astype(np.float64), np.exp(x.astype(np.float64)),
                               rtol=max(rtol, 1e-3 if dtype == "float16" else rtol), equal_nan=True)


def test_fma_rounds_once(cache_dir):
    """``fma`` is one rounding where two differ: products of an 8-bit integer and a float32 that are
    float32 midpoints, plus an addend too small to survive a rounding to double first."""
    from fractions import Fraction

    n = 512
    a = RNG.integers(-128, 256, n).astype(np.float32)
    b = (RNG.standard_normal(n) * np.exp2(RNG.integers(-20, 20, n))).astype(np.float32)
    c = (RNG.standard_normal(n) * np.exp2(RNG.integers(-40, 20, n))).astype(np.float32)
    a[:64], b[:64] = 3.0, np.float32(1 + 2 ** -23)  # 3 + 1.5 ulp: a midpoint of float32
    c[:64] = np.where(np.arange(64) % 2, 1e-30, -1e-30).astype(np.float32)
    f = elementwise("fma32", ["float32"] * 3, [("float32", lambda i, x, y, z: tir.fma(x, y, z))], n)
    (got,) = check(f, [a, b, c], cache_dir)
    exact = np.array([float(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in zip(a, b, c)])
    want = np.array([min((np.float32(e), np.nextafter(np.float32(e), np.float32(np.inf)),
                          np.nextafter(np.float32(e), np.float32(-np.inf))),
                         key=lambda v: abs(Fraction(float(v)) - (Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))))
                     for e, x, y, z in zip(exact, a, b, c)], np.float32)
    assert got.view(np.int32).tolist() == want.view(np.int32).tolist()
    twice = (a.astype(np.float64) * b + c).astype(np.float32)  # rounded to double, then to float32
    assert (twice != want).sum() >= 32  # the test would catch a double-rounding fma


def test_min_max_follow_tir_with_nan(cache_dir):
    a = np.array([np.nan, 1.0, np.nan, -0.0, 0.0, 2.0], np.float32)
    b = np.array([1.0, np.nan, np.nan, 0.0, -0.0, 3.0], np.float32)
    outs = [("float32", lambda i, x, y: tir.min(x, y)), ("float32", lambda i, x, y: tir.max(x, y))]
    mn, mx = check(elementwise("mm", ["float32", "float32"], outs, 6), [a, b], cache_dir)
    np.testing.assert_array_equal(mn, [1.0, np.nan, np.nan, 0.0, -0.0, 2.0])  # a < b ? a : b
    np.testing.assert_array_equal(np.signbit(mn), [False, False, False, False, True, False])


def test_float_literals_are_exact(cache_dir):
    vals = [0.1, 1 / 3, 3.4028234663852886e38, 1.401298464324817e-45, -0.0, float("inf"), float("-inf"), 1e-300, 2.5]
    outs = [("float32", lambda i, v=v: tir.const(v if abs(v) < 1e39 and (v == 0 or abs(v) > 1e-46) else 0.0,
                                                 "float32")) for v in vals]
    outs += [("float64", lambda i, v=v: tir.const(v, "float64")) for v in vals]
    outs += [("float32", lambda i: tir.const(float("nan"), "float32"))]
    got = check(elementwise("lits", [], outs, 1), [], cache_dir)
    assert [float(g[0]) for g in got[len(vals):2 * len(vals)]] == vals
    assert np.isnan(got[-1][0])


# ---- laziness, lets, depth --------------------------------------------------------------------------

BIG = 1 << 28  # an index this far out of bounds would crash if it were loaded


def test_select_and_logical_ops_never_evaluate_the_unchosen_load(cache_dir):
    n = 8
    X, Y = Buffer("X", (n,)), Buffer("Y", (n, 3))
    i, v = Var("i"), Var("v", "float32")
    far = X[i + BIG]  # only loaded when i < 0, never
    guarded = tir.select(i < 0, tir.Let(v, far, v * v), X[i])  # a let inside the lazy branch
    and_ = tir.logical_and(i < 0, far > 0.0)
    or_ = tir.logical_or(i >= 0, tir.Let(v2 := Var("v2", "float32"), far, v2 > 0.0))
    body = For(i, 0, n, "serial", seq(
        Y.store((i, 0), guarded),
        Y.store((i, 1), tir.select(and_, 1.0, 2.0)),
        Y.store((i, 2), tir.select(or_, 3.0, 4.0))))
    f = PrimFunc((X, Y), body, {"global_symbol": "lazy"})
    src = codegen_c([f]).source
    assert "if (i < 0) {" in src and "if (!cond) {" in src
    x = RNG.standard_normal(n).astype(np.float32)
    got = check(f, [x], cache_dir)[0]
    np.testing.assert_array_equal(got[:, 0], x)
    np.testing.assert_array_equal(got[:, 1:], np.tile([2.0, 3.0], (n, 1)))


def test_lets_shared_and_nested(cache_dir):
    n = 5
    X, Y = Buffer("X", (n,)), Buffer("Y", (n,))
    i, a, b, t = Var("i"), Var("a", "float32"), Var("b", "float32"), Var("t", "float32")
    shared = tir.Let(a, X[i] * 2.0, tir.Let(b, a + 1.0, a * b))  # the same Let node used twice
    body = For(i, 0, n, "serial", LetStmt(t, X[i], Y.store(i, shared + shared - t)))
    check(PrimFunc((X, Y), body, {"global_symbol": "lets2"}), [RNG.standard_normal(n).astype(np.float32)],
          cache_dir, rtol=1e-6)


def test_deep_expressions_and_loop_nests(cache_dir):
    X, Y = Buffer("X", (2,)), Buffer("Y", (2,))
    i = Var("i")
    e = X[i]
    for k in range(1500):
        e = e * 0.5 + 1.0 if k % 2 else e - 0.25
    body = Y.store(i, e)
    loops = [Var(f"l{k}") for k in range(60)]
    for v in reversed(loops):
        body = For(v, 0, 1, "serial", body)
    f = PrimFunc((X, Y), For(i, 0, 2, "serial", body), {"global_symbol": "deep"})
    check(f, [np.array([1.0, -3.0], np.float32)], cache_dir, rtol=1e-5)


def test_loop_bounds_from_memory_are_read_once(cache_dir):
    N, X = Buffer("N", (1,), "int64"), Buffer("X", (10,), "int64")
    i = Var("i")
    # the body changes N[0]: the extent is evaluated once, at loop entry (TIR semantics)
    f = PrimFunc((N, X), For(i, 1, N[0], "serial", seq(X.store(i, i), N.store(0, N[0] + 1))),
                 {"global_symbol": "bounds"})
    assert "const int64_t i_end = 1 + N[0];" in codegen_c([f]).source
    got = check(f, [np.array([4])], cache_dir)
    np.testing.assert_array_equal(got[0], [0, 1, 2, 3, 4, 0, 0, 0, 0, 0])


# ---- what C leaves undefined: one defined result (docs/tir.md, "Numeric semantics") -------------------

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def hostile_floats(dtype):
    """NaN, infinities, signed zeros, fractions, and the values at and around every integer type's
    limits (2**31 - 128 is the largest float32 below 2**31), as ``dtype`` holds them."""
    edges = [0.0, -0.0, 0.5, -0.5, -0.99, -1.0, 0.99, 2.5, -2.5, 127.5, 128.0, -128.5, -129.0, 255.5, 256.0,
             32767.5, -32768.75, 65535.9, 65536.0, 2.0**31 - 128, 2.0**31, -2.0**31, -2.0**31 - 256, 2.0**32 - 256,
             2.0**32, 2.0**63, -2.0**63, 2.0**64, -2.0**64, 1e30, -1e30, float(np.finfo(dtype).max),
             float(np.finfo(dtype).min), float("nan"), float("inf"), float("-inf")]
    with np.errstate(over="ignore"):
        return np.array(edges, dtype)


@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
def test_float_to_int_casts_truncate_and_saturate(src, cache_dir):
    x = hostile_floats(src)
    outs = [(d, lambda i, v, d=d: tir.cast(d, v)) for d in INT_DTYPES + ["bool"]]
    got = check(elementwise("fcasts", [src], outs, len(x)), [x], cache_dir)
    for d, g in zip(INT_DTYPES, got):
        want = np.array([spec_cast(float(v), d) for v in x], d)  # written out independently of plait
        np.testing.assert_array_equal(g, want, err_msg=f"{src} -> {d}")
    np.testing.assert_array_equal(got[-1], x != 0)  # NaN -> true


@pytest.mark.parametrize("dst", ["float16", "float32", "float64"])
def test_int_and_float_to_float_casts_round_to_nearest(dst, cache_dir):
    def edges(d):
        lo, hi = int(np.iinfo(d).min), int(np.iinfo(d).max)
        return np.array([lo, hi, hi - 1, 0, 1, min(65519, hi), min(65520, hi), min(2**24 + 1, hi)], d)

    ins = [edges(d) for d in INT_DTYPES]
    ins.append(np.array([1e300, -1e300, 3.5e38, 65520.0, 65519.99, 1 + 2**-30, np.nan, -np.inf], np.float64))
    outs = [(dst, lambda i, *v, k=k: tir.cast(dst, v[k])) for k in range(len(ins))]
    got = check(elementwise("tofloat", INT_DTYPES + ["float64"], outs, 8), ins, cache_dir)
    with np.errstate(over="ignore"):  # integer and float64 -> float conversions round once, to nearest
        for g, a in zip(got, ins):
            np.testing.assert_array_equal(g, a.astype(dst), err_msg=f"{a.dtype} -> {dst}")


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_division_by_zero_and_int_min_by_minus_one(dtype, cache_dir):
    info = np.iinfo(dtype)
    a = np.array([info.min, info.max, 7, -7 if dtype[0] != "u" else 9, 0, info.min], dtype)
    b = np.array([0, 0, 0, 0, 0, -1 if dtype[0] != "u" else 1], dtype)
    outs = [(dtype, lambda i, x, y, fn=fn: fn(x, y)) for fn in DIVS.values()]
    lits = (0, -1) if dtype[0] != "u" else (0,)
    for lit in lits:
        c = tir.const(lit, dtype)
        outs += [(dtype, lambda i, x, y, fn=fn, c=c: fn(x, c)) for fn in DIVS.values()]
    got = check(elementwise("divzero", [dtype, dtype], outs, len(a)), [a, b], cache_dir)
    for k, g in enumerate(got[:4]):  # by the variable divisor: 0 for a zero divisor, min / -1 wraps
        want = [0, 0, 0, 0, 0, int(info.min) if k % 2 == 0 else 0]  # (unsigned: 0 / 1 == 0, 0 % 1 == 0)
        np.testing.assert_array_equal(g, np.array(want, dtype), err_msg=list(DIVS)[k])
    for g in got[4:8]:  # by a literal 0
        np.testing.assert_array_equal(g, np.zeros(len(a), dtype))
    if dtype[0] != "u":  # by a literal -1: negation, wrapping at min; remainders 0
        neg = np.array([_wrap(-int(v), dtype) for v in a], dtype)
        for k, g in enumerate(got[8:12]):
            np.testing.assert_array_equal(g, neg if k % 2 == 0 else np.zeros(len(a), dtype))
    with np.errstate(all="ignore"):  # numpy's integer division and remainder give the same
        np.testing.assert_array_equal(got[0], np.floor_divide(a, b))
        np.testing.assert_array_equal(got[1], np.remainder(a, b))
        np.testing.assert_array_equal(got[3], np.fmod(a, b))


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_shifts_by_every_amount(dtype, cache_dir):
    info, width = np.iinfo(dtype), np.dtype(dtype).itemsize * 8
    amounts = [n for n in range(-2 * width, 2 * width + 1) if info.min <= n <= info.max]
    amounts += [int(info.min), int(info.max)]
    values = [int(info.min), int(info.max), 1, 3, -1 if dtype[0] != "u" else 2, -77 if dtype[0] != "u" else 77]
    pairs = [(v, n) for v in values for n in amounts]
    x = np.array([p[0] for p in pairs], dtype)
    n = np.array([p[1] for p in pairs], dtype)
    outs = [(dtype, lambda i, a, b: tir.shift_left(a, b)), (dtype, lambda i, a, b: tir.shift_right(a, b))]
    for lit in (0, 1, width - 1, width, width + 3) + ((-1,) if dtype[0] != "u" else ()):
        c = tir.const(lit, dtype)
        outs += [(dtype, lambda i, a, b, c=c: tir.shift_left(a, c)), (dtype, lambda i, a, b, c=c: tir.shift_right(a, c))]
    got = check(elementwise("shifts", [dtype, dtype], outs, len(pairs)), [x, n], cache_dir)
    # numpy defines shifts for every amount: 0 once every bit is shifted out (the sign for >>)
    np.testing.assert_array_equal(got[0], np.left_shift(x, n))
    np.testing.assert_array_equal(got[1], np.right_shift(x, n))
    for k, lit in enumerate((0, 1, width - 1, width, width + 3) + ((-1,) if dtype[0] != "u" else ())):
        c = np.full_like(n, lit)
        np.testing.assert_array_equal(got[2 + 2 * k], np.left_shift(x, c), err_msg=f"<< {lit}")
        np.testing.assert_array_equal(got[3 + 2 * k], np.right_shift(x, c), err_msg=f">> {lit}")


def test_multiplications_that_overflow_int_wrap(cache_dir):
    # uint16 * uint16 is computed in C's int and overflows it; int32/int64 products wrap in unsigned
    a = {"uint16": [65535, 40000, 256], "int16": [-32768, 32767, -32768], "int32": [2**31 - 1, -2**31, 46341],
         "int64": [2**63 - 1, -2**63, 3037000500], "uint32": [2**32 - 1, 65536, 3], "uint64": [2**64 - 1, 2**32, 5]}
    dts = list(a)
    ins = [np.array(a[d], d) for d in dts]
    outs = [(d, lambda i, *v, k=k: v[k] * v[k]) for k, d in enumerate(dts)]
    outs += [(d, lambda i, *v, k=k: v[k] + v[k] - tir.const(1, v[k].dtype)) for k, d in enumerate(dts)]
    got = check(elementwise("mulwrap", dts, outs, 3), ins, cache_dir)
    for k, d in enumerate(dts):
        np.testing.assert_array_equal(got[k], np.array([_wrap(v * v, d) for v in a[d]], d), err_msg=d)
        np.testing.assert_array_equal(got[len(dts) + k], np.array([_wrap(2 * v - 1, d) for v in a[d]], d))
