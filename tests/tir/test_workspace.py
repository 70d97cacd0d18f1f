"""lift_workspaces: global.workspace allocations become slices of a workspace arena parameter; the
lifted function verifies, keeps its Relay type and computes the same numbers in the interpreter
and compiled C."""

import numpy as np
import pytest

from plait import te, tir
from plait.errors import PlaitError
from plait.relay import IRModule
from plait.tir import Allocate, Buffer, Evaluate, For, PrimFunc, Var, seq
from plait.memory.workspace import LiftWorkspaces, lift_workspaces, plan_slices, workspace_arrays, workspace_params


def softmax_rows(m=4, n=8) -> PrimFunc:
    """Three materialized stages (B = 2A, C = sum B, D = B / C): workspaces B and C."""
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] * 2.0, name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((m,), lambda i: te.sum(B[i, k], axis=k), name="C")
    D = te.compute((m, n), lambda i, j: B[i, j] / C[i], name="D")
    return te.create_prim_func([A, D], name="softmax_rows", inline=False).with_attrs(piece="c")


def chain_of_stages(n=16) -> PrimFunc:
    """x -> s0 -> s1 -> s2 -> y, each stage a loop: s0 and s2 are never live together."""
    x, y = Buffer("x", (n,)), Buffer("y", (n,))
    s = [Buffer(f"s{k}", (n,), "float32", "global.workspace") for k in range(3)]
    i = [Var(f"i{k}") for k in range(4)]
    body = seq(
        For(i[0], 0, n, "serial", s[0].store(i[0], x[i[0]] + 1.0)),
        For(i[1], 0, n, "serial", s[1].store(i[1], s[0][i[1]] * 3.0)),
        For(i[2], 0, n, "serial", s[2].store(i[2], s[1][i[2]] - 2.0)),
        For(i[3], 0, n, "serial", y.store(i[3], s[2][i[3]] * s[2][i[3]])),
    )
    for b in reversed(s):
        body = Allocate(b, body)
    return PrimFunc((x, y), body, {"global_symbol": "chain", "num_inputs": 1, "piece": "c"})


def chain_reference(x):
    return ((x + 1) * 3 - 2) ** 2


def mixed_dtypes(n=10) -> PrimFunc:
    """An int32 and a float32 workspace: two arena params over the same bytes."""
    x, y = Buffer("x", (n,)), Buffer("y", (n,))
    q = Buffer("q", (n,), "int32", "global.workspace")
    f = Buffer("f", (2, n), "float32", "global.workspace")
    i, j, k = Var("i"), Var("j"), Var("k")
    body = seq(
        For(i, 0, n, "serial", q.store(i, tir.cast("int32", x[i] * 4.0))),
        For(j, 0, n, "serial", seq(f.store((0, j), tir.cast("float32", q[j])), f.store((1, j), x[j]))),
        For(k, 0, n, "serial", y.store(k, f[0, k] - f[1, k])),
    )
    body = Allocate(q, Allocate(f, body))
    return PrimFunc((x, y), body, {"global_symbol": "mixed", "num_inputs": 1, "piece": "c"})


def run_interp(func, *args):
    tir.evaluate(func, *args, *workspace_arrays(func))


def test_lift_softmax_rows_interpreter_and_attrs():
    f = softmax_rows()
    g = lift_workspaces(f)
    tir.verify(g)
    assert not [n for n in tir.pre_order(g.body) if isinstance(n, Allocate) and n.buffer.scope == "global.workspace"]
    # arena appended last; B (128 bytes) then C at the next multiple of 64: they are live together
    assert g.attrs["workspace_param"] == 2 and len(g.params) == 3 and g.params[2].name == "workspace"
    assert g.attrs["workspace_bytes"] == 192 and g.params[2].static_shape == (48,)
    assert g.relay_type is not None and str(g.relay_type) == str(f.relay_type)
    a = np.random.default_rng(0).random((4, 8)).astype(np.float32)
    want = np.zeros((4, 8), np.float32)
    got = np.zeros((4, 8), np.float32)
    tir.evaluate(f, a, want)
    run_interp(g, a, got)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, (2 * a) / (2 * a).sum(1, keepdims=True), rtol=1e-6)
    # the lifted function prints and parses back
    text = tir.print_prim_func(g)
    assert "allocate" not in text and "workspace_bytes=192" in text
    assert tir.structural_equal(tir.parse_prim_func(text), g)


def test_disjoint_lifetimes_share_offsets():
    f = chain_of_stages(16)  # 64 bytes each
    slices, total = plan_slices(f)
    assert [(s.buffer.name, s.offset, s.first, s.last) for s in slices] == [
        ("s0", 0, 0, 1), ("s1", 64, 1, 2), ("s2", 0, 2, 3)]
    assert total == 128
    assert plan_slices(f, share=False)[1] == 192
    x = np.random.default_rng(1).standard_normal(16).astype(np.float32)
    for share in (True, False):
        g = lift_workspaces(f, share)
        y = np.zeros(16, np.float32)
        run_interp(g, x, y)
        np.testing.assert_allclose(y, chain_reference(x), rtol=1e-6)


def test_mixed_dtypes_get_one_arena_param_each():
    f = mixed_dtypes()
    g = lift_workspaces(f)
    tir.verify(g)
    ws = workspace_params(g)
    assert [(p.name, p.dtype) for p in ws] == [("workspace_int32", "int32"), ("workspace_float32", "float32")]
    assert g.attrs["workspace_param"] == 2 and g.attrs["workspace_bytes"] == 192  # f (80 B) at 0, q (40 B) at 128
    assert all(p.static_shape == (192 // 4,) for p in ws)
    arena = np.full(200, 0x5A, np.uint8)
    views = workspace_arrays(g, arena)
    assert all(v.ctypes.data == arena.ctypes.data for v in views)
    x = np.linspace(-2, 2, 10).astype(np.float32)
    y = np.zeros(10, np.float32)
    tir.evaluate(g, x, y, *views)
    np.testing.assert_array_equal(y, np.trunc(x * 4).astype(np.float32) - x)


def test_lifted_functions_compile_to_c(tmp_path):
    from plait.backends.c.backend import build_c, codegen_c

    funcs = [lift_workspaces(f) for f in (softmax_rows(), chain_of_stages(), mixed_dtypes())]
    src = codegen_c(funcs).source
    assert "static " not in src.replace("static inline ", "")  # no static scratch arrays left: reentrant
    assert "float* restrict workspace)" in src
    # the mixed function's two arenas are the same bytes: not restrict (gcc -Werror=restrict refuses the call)
    assert "int32_t* workspace_int32, float* workspace_float32)" in src
    lib = build_c(funcs, cache_dir=str(tmp_path))
    rng = np.random.default_rng(2)
    a = rng.random((4, 8)).astype(np.float32)
    out = np.zeros((4, 8), np.float32)
    arena = np.full(256, 0xFF, np.uint8)  # garbage: the function must write before it reads
    lib["softmax_rows"](a, out, *workspace_arrays(funcs[0], arena))
    np.testing.assert_allclose(out, (2 * a) / (2 * a).sum(1, keepdims=True), rtol=1e-6)
    x = rng.standard_normal(16).astype(np.float32)
    y = np.zeros(16, np.float32)
    lib["chain"](x, y, *workspace_arrays(funcs[1], arena))
    np.testing.assert_allclose(y, chain_reference(x), rtol=1e-6)
    x = np.linspace(-2, 2, 10).astype(np.float32)
    y = np.zeros(10, np.float32)
    lib["mixed"](x, y, *workspace_arrays(funcs[2], arena))
    np.testing.assert_array_equal(y, np.trunc(x * 4).astype(np.float32) - x)


def test_fused_index_pairs_fold_and_address_of_is_lifted():
    """An im2col-like buffer passed to an extern call through address_of, indexed (x // 6, x % 6)."""
    x_in, y = Buffer("x", (4, 6)), Buffer("y", (4,))
    col = Buffer("col", (4, 6), "float32", "global.workspace")
    f_, r = Var("f"), Var("r")
    body = Allocate(col, seq(
        For(f_, 0, 24, "serial", col.store((tir.floordiv(f_, 6), tir.floormod(f_, 6)),
                                           x_in[tir.floordiv(f_, 6), tir.floormod(f_, 6)] * 2.0)),
        For(r, 0, 4, "serial", Evaluate(tir.call_extern("void", "rowsum", tir.AddressOf(col, (r, 0)),
                                                        tir.AddressOf(y, (r,))))),
    ))
    f = PrimFunc((x_in, y), body, {"global_symbol": "im2col_like", "num_inputs": 1})
    g = lift_workspaces(f)
    text = tir.print_prim_func(g)
    assert "workspace[f] = x[f // 6, f % 6] * 2.0" in text
    assert "address_of(workspace[r * 6])" in text

    def rowsum(src, dst):
        dst[0] = src[:6].sum()

    xv = np.arange(24, dtype=np.float32).reshape(4, 6)
    got = np.zeros(4, np.float32)
    tir.evaluate(g, xv, got, *workspace_arrays(g), externs={"rowsum": rowsum})
    np.testing.assert_array_equal(got, (2 * xv).sum(1))


def test_what_is_not_lifted():
    n = Var("n")
    x, y = Buffer("x", (n,)), Buffer("y", (n,))
    dyn = Buffer("dyn", (n,), "float32", "global.workspace")
    loc = Buffer("acc", (1,), "float32", "local")
    i = Var("i")
    body = Allocate(dyn, Allocate(loc, For(i, 0, n, "serial", seq(
        loc.store(0, x[i]), dyn.store(i, loc[0]), y.store(i, dyn[i])))))
    f = PrimFunc((x, y, n), body, {"global_symbol": "dyn", "num_inputs": 1})
    g = lift_workspaces(f)  # the symbolic workspace becomes a parameter before the size variable
    assert [getattr(p, "name", None) for p in g.params] == ["x", "y", "dyn", "n"] and g.params[3] is n
    assert g.params[2].shape == (n,) and g.params[2].scope == "global"
    assert g.attrs["workspace_param"] == 2 and g.attrs["dynamic_workspaces"] == 1 and g.attrs["workspace_bytes"] == 0
    assert isinstance(g.body, Allocate) and g.body.buffer is loc  # the local accumulator stays
    assert str(g.relay_type) == "fn (Tensor[(n,), float32]) -> Tensor[(n,), float32]"
    assert workspace_params(g) == [] and workspace_arrays(g) == []
    xs = np.arange(5, dtype=np.float32)
    ys, ws = np.zeros(5, np.float32), np.zeros(5, np.float32)
    tir.evaluate(g, xs, ys, ws, 5)
    assert np.array_equal(ys, xs) and np.array_equal(ws, xs)
    assert lift_workspaces(g) is g


def test_pass_over_a_module_skips_external_and_is_idempotent():
    f, ext = softmax_rows(), chain_of_stages().with_attrs(external=1)
    mod = IRModule({"softmax_rows": f, "ext": ext})
    out = LiftWorkspaces()(mod)
    assert out["ext"] is ext and out["softmax_rows"].attrs["workspace_bytes"] == 192
    again = LiftWorkspaces()(out)
    assert again["softmax_rows"] is out["softmax_rows"]
    tir.verify(out)


def test_errors():
    with pytest.raises(PlaitError) as e:
        lift_workspaces("f")
    assert str(e.value) == "lift_workspaces expects a PrimFunc, got str"
    g = lift_workspaces(chain_of_stages())
    extra = Buffer("extra", (4,), "float32", "global.workspace")
    i = Var("i")
    bad = g.with_body(Allocate(extra, seq(For(i, 0, 4, "serial", extra.store(i, 0.0)), g.body)))
    with pytest.raises(PlaitError) as e:
        lift_workspaces(bad)
    assert str(e.value) == ("lift_workspaces: PrimFunc 'chain' already has a workspace arena (attrs workspace_param) "
                            "and still allocates global.workspace buffers")
    with pytest.raises(PlaitError) as e:
        workspace_arrays(g, np.zeros(10, np.uint8))
    assert str(e.value) == "workspace_arrays: the arena must be a 1-d uint8 array of at least 128 bytes"
