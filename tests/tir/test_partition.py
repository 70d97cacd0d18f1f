"""partition_loops (plait/tir/partition.py): a guarded copy's loops split where the bounds test is decided;
bit-identical results in the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from plait import tir
from plait.tir import Buffer, For, PrimFunc, Var, parse_prim_func, post_order, print_prim_func, structural_equal, verify
from plait.tir.partition import PartitionLoops, partition_loops

from .fixtures import FIXTURES


def _pack(h: int = 5, w: int = 4, pad: int = 1, kind: str = "serial", cond=None) -> PrimFunc:
    """``P[y, x] = (y - pad in [0, h) and x - pad in [0, w)) ? int16(X[y - pad, x - pad] + 128) : 7``."""
    X, P = Buffer("X", (h, w), "int8"), Buffer("P", (h + 2 * pad, w + 2 * pad), "int16")
    y, x = Var("yy"), Var("f")
    inside = cond(y, x) if cond else (y - pad >= 0) & (y - pad < h) & (x - pad >= 0) & (x - pad < w)
    val = tir.select(inside, tir.cast("int16", tir.cast("int32", X[tir.max(tir.min(y - pad, h - 1), 0),
                                                                  tir.max(tir.min(x - pad, w - 1), 0)]) + 128),
                     tir.const(7, "int16"))
    body = For(y, 0, h + 2 * pad, "serial", For(x, 0, w + 2 * pad, kind, P.store((y, x), val)))
    return PrimFunc((X, P), body, {"global_symbol": "pack", "num_inputs": 1})


def _run(f: PrimFunc) -> np.ndarray:
    X, P = f.params
    x = np.random.default_rng(5).integers(-128, 128, X.static_shape).astype(np.int8)
    p = np.full(P.static_shape, -1, np.int16)
    tir.evaluate(f, x, p)
    return p


def _loops(f: PrimFunc) -> list[tuple[str, int, int, str]]:
    return [(n.loop_var.name, n.min.value, getattr(n.extent, "value", n.extent), n.kind)
            for n in post_order(f.body) if isinstance(n, For)]


def _selects(f: PrimFunc) -> int:
    return sum(isinstance(n, tir.Select) for n in post_order(f.body))


def _check(f: PrimFunc) -> PrimFunc:
    g = partition_loops(f)
    verify(g)
    assert structural_equal(parse_prim_func(print_prim_func(g)), g)
    np.testing.assert_array_equal(_run(g), _run(f))  # bit for bit
    return g


def test_rows_and_columns_split_into_border_and_interior():
    g = _check(_pack(5, 4, 1, "vectorized"))
    loops = sorted(_loops(g))
    assert [lp for lp in loops if lp[0] == "yy"] == [("yy", 0, 1, "serial"), ("yy", 1, 5, "serial"),
                                                       ("yy", 6, 1, "serial")]
    assert ("f", 1, 4, "vectorized") in loops and ("f", 0, 1, "serial") in loops  # the kind is kept (not on 1)
    assert _selects(g) == 0  # the interior stores without a test, the borders store the constant
    text = print_prim_func(g)
    assert "P[yy, f] = 7i16" in text


def test_condition_on_one_loop_only_and_on_two_loops():
    g = _check(_pack(6, 3, 2, cond=lambda y, x: (y - 2 >= 0) & (x * 2 < y + 5) & (y - 2 < 6)))
    assert sorted(lp[:3] for lp in _loops(g) if lp[0] == "yy") == [("yy", 0, 2), ("yy", 2, 6), ("yy", 8, 2)]
    assert _selects(g) == 1  # the conjunct over both loops stays, in the interior rows only
    assert "x * 2" not in print_prim_func(g) and "f * 2 < yy + 5" in print_prim_func(g)


def test_condition_never_true_and_always_true():
    g = _check(_pack(3, 3, 1, cond=lambda y, x: (y > 100) & (x >= 0)))
    assert _selects(g) == 0 and "P[yy, f] = 7i16" in print_prim_func(g)
    g = _check(_pack(3, 3, 1, cond=lambda y, x: (y >= 0) & (x < 5)))
    assert _selects(g) == 0 and "7i16" not in print_prim_func(g)
    assert sorted(_loops(g)) == [("f", 0, 5, "serial"), ("yy", 0, 5, "serial")]  # one loop each, no test


def test_condition_not_one_range_is_left_alone():
    f = _pack(4, 4, 1, cond=lambda y, x: (y % 2 == 0) & (x >= 0))
    g = _check(f)
    assert sorted(lp[0] for lp in _loops(g) if lp[0] == "yy") == ["yy"]  # rows untouched, columns always true


def test_a_condition_on_loaded_values_stays():
    M = Buffer("M", (8,), "int8")
    f = _pack(3, 3, 1, cond=lambda y, x: (y >= 1) & (M[y] > 0) & (x < 4))
    f = PrimFunc((*f.params, M), f.body, {"global_symbol": "pack", "num_inputs": 2})
    g = partition_loops(f)
    verify(g)
    assert "M[yy] > 0" in print_prim_func(g) and sorted(lp[:3] for lp in _loops(g) if lp[0] == "yy") == [
        ("yy", 0, 1), ("yy", 1, 4)]
    x = np.random.default_rng(1).integers(-128, 128, (3, 3)).astype(np.int8)
    m = np.array([1, -1, 2, 0, 3, 1, 1, 1], np.int8)
    ps = [np.full((5, 5), -1, np.int16) for _ in range(2)]
    tir.evaluate(f, x, ps[0], m)
    tir.evaluate(g, x, ps[1], m)
    np.testing.assert_array_equal(ps[1], ps[0])


def test_symbolic_extents_are_left_alone():
    n = Var("n")
    X, P = Buffer("X", (n, 4), "float32"), Buffer("P", (n, 6), "float32")
    i, x = Var("i"), Var("x")
    val = tir.select((i >= 1) & (x - 1 >= 0) & (x - 1 < 4), X[i, tir.max(tir.min(x - 1, 3), 0)], tir.const(0.0))
    f = PrimFunc((n, X, P), For(i, 0, n, "serial", For(x, 0, 6, "serial", P.store((i, x), val))),
                 {"global_symbol": "f", "num_inputs": 2})
    g = partition_loops(f)
    verify(g)
    loops = _loops(g)
    assert [lp[0] for lp in loops].count("i") == 1 and [lp[0] for lp in loops].count("x") == 3
    assert "i >= 1" in print_prim_func(g)  # the symbolic loop keeps its test
    xs, ps = np.arange(12, dtype=np.float32).reshape(3, 4), [np.zeros((3, 6), np.float32) for _ in range(2)]
    tir.evaluate(f, 3, xs, ps[0])
    tir.evaluate(g, 3, xs, ps[1])
    np.testing.assert_array_equal(ps[1], ps[0])


@pytest.mark.parametrize("name", list(FIXTURES))
def test_fixtures_give_the_same_results(name):
    f = FIXTURES[name]()
    g = partition_loops(f)
    verify(g)
    assert structural_equal(parse_prim_func(print_prim_func(g)), g)


def test_nothing_to_do_returns_the_function():
    f = FIXTURES["matmul"]()
    assert partition_loops(f) is f


def test_the_pass_runs_on_every_prim_func():
    from plait.ir.transform import PassContext
    from plait.relay import IRModule

    mod = IRModule({"pack": _pack()})
    out = PartitionLoops().run(mod, PassContext())
    assert _selects(next(f for _, f in out.items())) == 0
