"""TE computes of the elementwise operators vs their numpy references (TIR interpreter)."""

from __future__ import annotations

import numpy as np
import pytest
from computes_util import check, rand, rng_for, run

INTS = ["int8", "int32", "int64", "uint8", "uint32"]
FLOATS = ["float32", "float64", "float16"]
# broadcasting shape pairs: same, scalar, row/column, rank promotion
BCAST = [((2, 3), (2, 3)), ((2, 3), ()), ((3, 1), (1, 4)), ((2, 1, 3), (4, 1)), ((), (5,))]


def _pair(op, dtype, sa, sb, lo=-9, hi=9):
    rng = rng_for(op, dtype, sa, sb)
    return rand(rng, sa, dtype, lo, hi), rand(rng, sb, dtype, lo, hi)


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_arith(op, dtype):
    for sa, sb in BCAST:
        check(op, list(_pair(op, dtype, sa, sb)))


def test_integer_wraparound():
    a = np.array([120, -128, 100], np.int8)
    b = np.array([10, -1, 100], np.int8)
    for op in ("add", "subtract", "multiply"):
        check(op, [a, b])


@pytest.mark.parametrize("dtype", INTS + FLOATS)
def test_divide(dtype):
    a, b = _pair("divide", dtype, (3, 4), (4,), -20 if dtype[0] != "u" else 0, 20)
    b = np.where(b == 0, np.ones_like(b), b)
    got = check("divide", [a, b])
    if dtype == "int32":  # truncation toward zero: -7 / 2 == -3
        np.testing.assert_array_equal(run("divide", [np.array([-7, 7], "int32"), np.array([2, -2], "int32")])[0],
                                      [-3, -3])
    assert got[0].dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "float16"])
def test_power(dtype):
    rng = rng_for("pow", dtype)
    a = rand(rng, (2, 5), dtype, 1 if dtype[0] == "f" else -4, 4)
    b = rand(rng, (5,), dtype, -2, 3)
    check("power", [a, b], rtol=1e-5 if dtype != "float16" else 1e-3)


@pytest.mark.parametrize("dtype,fmod", [(d, f) for d in INTS for f in (False, True)]
                         + [(d, f) for d in ("float32", "float64") for f in (False, True)])
def test_mod(dtype, fmod):
    a, b = _pair("mod", dtype, (4, 5), (5,), -20 if dtype[0] != "u" else 0, 20)
    b = np.where(b == 0, np.ones_like(b), b)
    if dtype[0] == "f":
        a = np.concatenate([a, np.round(a[:1])])  # exact multiples: a zero remainder takes b's sign
        b = np.round(b)
        b = np.where(b == 0, np.ones_like(b), b)
    check("mod", [a, b], fmod=fmod)


@pytest.mark.parametrize("op", ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"])
@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8", "float32", "float16", "bool"])
def test_compare(op, dtype):
    a, b = _pair(op, dtype, (3, 4), (4,), -2, 2)
    check(op, [a, b])


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logical(op):
    a, b = _pair(op, "bool", (3, 1), (1, 4))
    check(op, [a, b])


@pytest.mark.parametrize("op", ["bitwise_and", "bitwise_or", "bitwise_xor"])
@pytest.mark.parametrize("dtype", INTS)
def test_bitwise(op, dtype):
    check(op, list(_pair(op, dtype, (2, 3), (3,), -100, 100)))


@pytest.mark.parametrize("op", ["left_shift", "right_shift"])
@pytest.mark.parametrize("dtype", ["uint8", "uint32", "int64"])
def test_shift(op, dtype):
    rng = rng_for(op, dtype)
    check(op, [rand(rng, (2, 4), dtype, 0, 100), rand(rng, (4,), dtype, 0, 7)])


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
def test_where(dtype):
    rng = rng_for("where", dtype)
    check("where", [rand(rng, (3, 1), "bool"), rand(rng, (1, 4), dtype), rand(rng, (2, 1, 1), dtype)])


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_prelu(dtype):
    rng = rng_for("prelu", dtype)
    check("nn.prelu", [rand(rng, (2, 3, 4), dtype), rand(rng, (3, 1), dtype)])


# ---- unary ----------------------------------------------------------------------------------

# op, attrs, value range
UNARY = [
    ("nn.relu", {}, (-3, 3)), ("nn.leaky_relu", {"alpha": 0.2}, (-3, 3)), ("sigmoid", {}, (-30, 30)),
    ("tanh", {}, (-5, 5)), ("exp", {}, (-5, 5)), ("log", {}, (0.01, 10)), ("sqrt", {}, (0, 10)),
    ("rsqrt", {}, (0.01, 10)), ("erf", {}, (-4, 4)), ("abs", {}, (-3, 3)), ("negative", {}, (-3, 3)),
    ("sign", {}, (-3, 3)), ("floor", {}, (-3, 3)), ("ceil", {}, (-3, 3)), ("round", {}, (-4, 4)),
    ("reciprocal", {}, (0.1, 5)), ("sin", {}, (-4, 4)), ("cos", {}, (-4, 4)), ("tan", {}, (-1.4, 1.4)),
    ("asin", {}, (-1, 1)), ("acos", {}, (-1, 1)), ("atan", {}, (-5, 5)), ("sinh", {}, (-3, 3)),
    ("cosh", {}, (-3, 3)), ("asinh", {}, (-5, 5)), ("acosh", {}, (1, 5)), ("atanh", {}, (-0.99, 0.99)),
    ("nn.gelu", {}, (-4, 4)), ("nn.gelu", {"approximate": "tanh"}, (-4, 4)),
    ("nn.hard_sigmoid", {"alpha": 0.3, "beta": 0.4}, (-5, 5)), ("nn.hard_swish", {}, (-5, 5)),
    ("nn.elu", {"alpha": 0.7}, (-4, 4)), ("nn.selu", {}, (-4, 4)), ("nn.celu", {"alpha": 1.5}, (-4, 4)),
    ("nn.softplus", {}, (-30, 30)), ("nn.softsign", {}, (-4, 4)), ("nn.mish", {}, (-6, 6)),
    ("nn.silu", {}, (-6, 6)), ("nn.thresholded_relu", {"alpha": 0.5}, (-2, 2)),
    ("clip", {"a_min": -1.0, "a_max": 2.0}, (-3, 3)),
]


@pytest.mark.parametrize("op,attrs,bounds", UNARY, ids=[f"{u[0]}{'-' + str(u[1]) if u[1] else ''}" for u in UNARY])
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_float(op, attrs, bounds, dtype):
    x = rand(rng_for(op, dtype), (3, 7), dtype, *bounds)
    if op == "round":
        x = np.concatenate([x.reshape(-1), np.array([0.5, 1.5, 2.5, -0.5, -2.5], dtype)])
    special = np.array([np.nan, np.inf, -np.inf, 0.0], dtype)
    if op not in ("acosh", "atanh", "asin", "acos", "log", "sqrt", "rsqrt"):
        x = np.concatenate([x.reshape(-1), special])
    check(op, [x], rtol=2e-6 if dtype != "float16" else None, **attrs)


@pytest.mark.parametrize("op", ["nn.relu", "abs", "negative", "sign"])
@pytest.mark.parametrize("dtype", INTS)
def test_unary_int(op, dtype):
    x = rand(rng_for(op, dtype), (4, 5), dtype, -100, 100)
    check(op, [np.concatenate([x.reshape(-1), np.array([np.iinfo(dtype).min, 0], dtype)])])


@pytest.mark.parametrize("dtype", INTS + FLOATS)
@pytest.mark.parametrize("lo,hi", [(None, None), (-2.5, None), (None, 3.0), (-2.0, 3.0), (5.0, 1.0), (-1e30, 1e30)])
def test_clip(dtype, lo, hi):
    x = rand(rng_for("clip", dtype), (3, 5), dtype, -6, 6)
    check("clip", [x], a_min=lo, a_max=hi)


def test_logical_not_bitwise_not():
    check("logical_not", [rand(rng_for("not"), (3, 4), "bool")])
    for dtype in INTS:
        check("bitwise_not", [rand(rng_for("bnot", dtype), (3, 4), dtype, -100, 100)])


@pytest.mark.parametrize("dtype", FLOATS)
def test_isnan_isinf(dtype):
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0, -2.0], dtype)
    check("isnan", [x])
    for pos in (False, True):
        for neg in (False, True):
            check("isinf", [x], detect_positive=pos, detect_negative=neg)


CAST_FROM = ["bool", "int8", "uint8", "int32", "int64", "float16", "float32", "float64"]


@pytest.mark.parametrize("src", CAST_FROM)
def test_cast(src):
    rng = rng_for("cast", src)
    x = rand(rng, (4, 5), src, -100, 100)
    if src[0] == "f":
        x = np.concatenate([x.reshape(-1), np.array([0.5, -0.5, -1.7, 1000.5], src)])
    for dst in CAST_FROM:
        if src[0] == "f" and dst in ("uint8", "int8"):
            continue  # out-of-range float -> int conversions are undefined
        xs = x if not (src[0] == "f" and dst[0] in "iu") else np.clip(x, -100, 100)
        check("cast", [xs], dtype=dst)
