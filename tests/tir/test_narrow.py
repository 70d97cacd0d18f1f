"""narrow_indices (plait/tir/narrow.py): int32 loop variables and index arithmetic where every value fits;
int64 kept for symbolic extents, buffers past 2**31 elements and data; results identical (the interpreter)."""

from __future__ import annotations

import numpy as np
import pytest

from plait import tir
from plait.tir import (
    Buffer, Cast, For, IfThenElse, LetStmt, PrimFunc, Var, parse_prim_func, post_order, print_prim_func,
    structural_equal, verify,
)
from plait.tir.narrow import NarrowIndices, narrow_indices

from .fixtures import FIXTURES

RNG = np.random.default_rng(3)


def _loop_dtypes(f: PrimFunc) -> dict[str, str]:
    return {n.loop_var.name: n.loop_var.dtype for n in post_order(f.body) if isinstance(n, For)}


def _args(func: PrimFunc) -> list:
    env, out = {}, []
    for p in func.params:
        if isinstance(p, Var):
            env[p] = 3
            out.append(3)
            continue
        shape = tuple(int(tir.evaluate_expr(d, env)) for d in p.shape)
        if p.dtype.startswith("float"):
            a = (RNG.standard_normal(shape) * 4).astype(p.dtype)
        elif p.dtype == "bool":
            a = RNG.random(shape) < 0.5
        else:
            a = RNG.integers(0 if p.dtype[0] == "u" else -9, 10, shape).astype(p.dtype)
        out.append(np.asarray(a, p.dtype))
    return out


def _sgemm(m, n, k, a, b, c):
    c[: m * n] = (a[: m * k].reshape(m, k) @ b[: k * n].reshape(k, n)).reshape(-1)


def _run(f: PrimFunc, args: list) -> list:
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    tir.evaluate(f, *got, externs={"plait_sgemm": _sgemm})
    return got


@pytest.mark.parametrize("name", list(FIXTURES))
def test_fixtures_give_the_same_results_narrowed(name):
    f = FIXTURES[name]()
    g = narrow_indices(f)
    verify(g)
    assert structural_equal(parse_prim_func(print_prim_func(g)), g)
    args = _args(f)
    for want, got in zip(_run(f, args), _run(g, args)):
        np.testing.assert_array_equal(got, want)  # bit for bit


def test_loops_and_indices_become_int32():
    f = FIXTURES["conv2d"]()
    g = narrow_indices(f)
    assert set(_loop_dtypes(f).values()) == {"int64"}
    assert set(_loop_dtypes(g).values()) == {"int32"}
    text = print_prim_func(g)
    assert "serial(0i32, 3i32)" in text and "y * 2i32 + ry - 1i32" in text  # the padded window's index
    assert "int64" not in text  # every index of the convolution fits


def test_data_keeps_its_type_and_takes_a_cast_of_the_index():
    A, B = Buffer("A", (4, 6), "int64"), Buffer("B", (4, 6), "float32")
    i, j = Var("i"), Var("j")
    body = For(i, 0, 4, "serial", For(j, 0, 6, "serial", seq_(
        A.store((i, j), A[i, j] * 3 + (i * 6 + j)),  # an int64 value plus an index: the index is cast back
        B.store((i, j), tir.cast("float32", i * 6 + j)))))  # an index cast to float: converted from int32
    f = PrimFunc((A, B), body, {"global_symbol": "f", "num_inputs": 0})
    g = narrow_indices(f)
    text = print_prim_func(g)
    assert "A[i, j] = A[i, j] * 3 + cast(int64, i * 6i32 + j)" in text
    assert "B[i, j] = cast(float32, i * 6i32 + j)" in text
    args = [np.arange(24, dtype=np.int64).reshape(4, 6) * 7 - 50, np.zeros((4, 6), np.float32)]
    for want, got in zip(_run(f, args), _run(g, args)):
        np.testing.assert_array_equal(got, want)


def seq_(*s):
    return tir.seq(*s)


def test_let_bound_index_and_comparisons_narrow():
    A = Buffer("A", (64,), "float32")
    i, j, t = Var("i"), Var("j"), Var("t")
    body = For(i, 0, 8, "serial", For(j, 0, 8, "serial", LetStmt(t, i * 8 + j, IfThenElse(
        t < 40, A.store((t,), tir.cast("float32", t)), A.store((t,), tir.const(-1.0))))))
    g = narrow_indices(PrimFunc((A,), body, {"global_symbol": "f", "num_inputs": 0}))
    lets = [n for n in post_order(g.body) if isinstance(n, LetStmt)]
    assert [n.var.dtype for n in lets] == ["int32"]
    assert "if t < 40i32:" in print_prim_func(g)


def test_symbolic_extents_stay_int64():
    n = Var("n")
    A, B = Buffer("A", (n, 8), "float32"), Buffer("B", (n, 8), "float32")
    i, c = Var("i"), Var("c")
    body = For(i, 0, n, "serial", For(c, 0, 8, "serial", B.store((i, c), A[i, c] + tir.cast("float32", i * 8 + c))))
    g = narrow_indices(PrimFunc((n, A, B), body, {"global_symbol": "f", "num_inputs": 1}))
    assert _loop_dtypes(g) == {"i": "int64", "c": "int32"}
    assert "cast(float32, i * 8 + cast(int64, c))" in print_prim_func(g)  # i is unbounded: the sum stays int64


def test_more_than_2_31_elements_stay_int64():
    big = 2**31 + 5
    A = Buffer("A", (big,), "int8")
    i = Var("i")
    f = PrimFunc((A,), For(i, 0, big, "serial", A.store((i,), tir.const(1, "int8"))),
                 {"global_symbol": "f", "num_inputs": 0})
    assert narrow_indices(f) is f  # the loop's values do not fit int32
    B = Buffer("B", (2**31 - 1, 4), "int8")  # each index fits; the flat offset does not (the emitter's int64)
    j, k = Var("j"), Var("k")
    g = narrow_indices(PrimFunc((B,), For(j, 0, 2**31 - 1, "serial", For(k, 0, 4, "serial", B.store(
        (j, k), tir.cast("int8", j * 4 + k)))), {"global_symbol": "g", "num_inputs": 0}))
    assert _loop_dtypes(g) == {"j": "int32", "k": "int32"}
    store = next(n for n in post_order(g.body) if isinstance(n, tir.BufferStore))
    assert isinstance(store.value, Cast) and store.value.value.dtype == "int64"  # j * 4 + k > 2**31: int64


def test_the_pass_runs_on_every_prim_func():
    from plait.ir.transform import PassContext
    from plait.relay import IRModule

    mod = IRModule({"matmul": FIXTURES["matmul"](), "conv2d": FIXTURES["conv2d"]()})
    out = NarrowIndices().run(mod, PassContext())
    assert all(set(_loop_dtypes(f).values()) == {"int32"} for _, f in out.items())
