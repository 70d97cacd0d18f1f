"""TE: building stages, create_prim_func's loop nests (inlining, workspace, epilogues), numerics vs numpy."""

from __future__ import annotations

import numpy as np
import pytest

from plait import te, tir
from plait.errors import PlaitError
from plait.te import TEError
from plait.tir import Allocate, BufferStore, For, pre_order

RNG = np.random.default_rng(0)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def run(func, *inputs, out_shapes, out_dtypes=None):
    outs = [np.zeros(s, d) for s, d in zip(out_shapes, out_dtypes or ["float32"] * len(out_shapes))]
    tir.evaluate(func, *inputs, *outs)
    return outs


def loops(func):
    return [n for n in pre_order(func.body) if isinstance(n, For)]


def annotated(func):
    return [dict(f.annotations) for f in loops(func) if "stage" in f.annotations]


def allocs(func):
    return [(n.buffer.name, n.buffer.scope) for n in pre_order(func.body) if isinstance(n, Allocate)]


def relu(t, name="relu"):
    return te.compute(t.shape, lambda *i: tir.max(t[i], tir.const(0.0, t.dtype)), name=name)


# ---- building -----------------------------------------------------------------------------------------

def test_placeholder_and_compute_shapes():
    A = te.placeholder((2, 3), "float32", "A")
    assert A.shape == (2, 3) and A.dtype == "float32" and A.ndim == 2 and A.static_shape == (2, 3)
    B = te.compute((2, 3), lambda i, j: A[i, j] * 2.0, name="B")
    assert isinstance(B, te.Tensor) and B.op.input_tensors == (A,)
    assert [v.name for v in B.op.axis] == ["i", "j"]
    load = B[1, 2]
    assert isinstance(load, tir.BufferLoad) and load.buffer is B.buffer
    assert all(i.dtype == "int64" for i in load.indices)
    C = te.compute(4, lambda *i: tir.const(1, "int32"), name="C")
    assert C.shape == (4,) and C.dtype == "int32" and [v.name for v in C.op.axis] == ["ax0"]


def test_symbolic_dims_are_size_vars():
    A = te.placeholder(("n", 3), name="A")
    assert A.shape[0] is te.size_var("n") and A.static_shape is None
    B = relu(A)
    f = te.create_prim_func([A, B], "dyn")
    assert f.params[-1] is te.size_var("n")
    assert str(f.relay_type) == "fn (Tensor[(n, 3), float32]) -> Tensor[(n, 3), float32]"
    x = rand(5, 3)
    out = np.zeros((5, 3), "float32")
    tir.evaluate(f, x, out, 5)
    np.testing.assert_array_equal(out, np.maximum(x, 0))


@pytest.mark.parametrize("build, msg", [
    (lambda A: A[0], "tensor 'A' has 2 dimension(s), indexed with 1"),
    (lambda A: A[0, 0.5], "tensor 'A': an index must be an int or an integer expression, got 0.5"),
    (lambda A: te.compute((2,), lambda i: te.sum(A[i, te.reduce_axis((0, 3))], axis=[]), name="s"),
     "te.sum: no reduce axis given"),
    (lambda A: te.compute((2,), lambda i: te.sum(A[i, 0], axis=tir.Var("k")), name="s"),
     "Var(k) is not a reduce axis (make one with te.reduce_axis)"),
    (lambda A: te.sum(A[0, 0], axis=te.reduce_axis((0, 3))) * 2.0,
     "te.sum(...) must be the whole body of a compute; apply further arithmetic in a second te.compute "
     "(it is fused as an epilogue)"),
    (lambda A: te.compute((2,), lambda i: (A[i, 0], te.sum(A[i, 0], axis=te.reduce_axis((0, 3)))), name="m"),
     "compute 'm': a reduction must be the whole body of a compute (one te.sum/max/min or a comm_reducer "
     "call over a tuple)"),
    (lambda A: te.sum(A[0, 0], axis=te.reduce_axis((0, 3)), where=True),
     "te.sum: 'where' must be a bool TIR expression, got True (note that == on expressions is identity: use "
     "tir.eq)"),
    (lambda A: te.compute((2,), lambda i: "x", name="m"), "compute 'm': value 0 must be a TIR expression, got 'x'"),
    (lambda A: te.compute((2,), lambda i: tir.Buffer("raw", (2,))[i], name="m"),
     "compute 'm' loads buffer 'raw', which is not a tensor's buffer (index te tensors: T[i, j])"),
    (lambda A: te.placeholder((2,), "float8", "p"), "placeholder 'p': unsupported dtype 'float8'"),
    (lambda A: te.compute((-1,), lambda i: A[0, 0], name="neg"), "compute 'neg': dimensions must be >= 0, got -1"),
])
def test_building_errors(build, msg):
    A = te.placeholder((2, 3), name="A")
    with pytest.raises(TEError) as exc:
        build(A)
    assert str(exc.value).startswith(msg)


def test_create_prim_func_errors():
    A = te.placeholder((2,), name="A")
    B = te.placeholder((2,), name="B")
    C = te.compute((2,), lambda i: A[i] + B[i], name="C")
    with pytest.raises(TEError, match=r"^create_prim_func 'f': tensor 'B' is used but is not one of the inputs$"):
        te.create_prim_func([A, C], "f")
    with pytest.raises(TEError, match=r"^create_prim_func 'f': no output tensor$"):
        te.create_prim_func([A, B], "f")
    with pytest.raises(TEError, match=r"^create_prim_func 'f': input 'C' is not a placeholder$"):
        te.create_prim_func([C, A], "f", num_inputs=1)
    with pytest.raises(TEError, match=r"^create_prim_func 'f': item 1 is not a te.Tensor: 3$"):
        te.create_prim_func([A, 3], "f")


def test_te_error_is_a_plait_error():
    assert issubclass(TEError, PlaitError)


# ---- loop nests ----------------------------------------------------------------------------------------

def test_injective_chain_is_inlined_into_one_nest():
    A = te.placeholder((3, 4), name="A")
    B = te.compute((3, 4), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((4, 3), lambda i, j: B[j, i] * 2.0, name="C")  # transpose
    D = relu(C, "D")
    f = te.create_prim_func([A, D], "chain")
    assert annotated(f) == [{"stage": "D", "op": "D", "pattern": "injective"}]
    assert [lp.loop_var.name for lp in loops(f)] == ["D_ax0", "D_ax1"]
    assert allocs(f) == []
    x = rand(3, 4)
    np.testing.assert_allclose(run(f, x, out_shapes=[(4, 3)])[0], np.maximum((x + 1).T * 2, 0))


def test_no_inline_gives_workspace_buffers():
    A = te.placeholder((3, 4), name="A")
    B = te.compute((3, 4), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((3, 4), lambda i, j: B[i, j] * B[i, j], name="C", attrs={"inline": False})
    D = relu(C, "D")
    f = te.create_prim_func([A, D], "ws")
    assert allocs(f) == [("C", "global.workspace")]
    assert [a["stage"] for a in annotated(f)] == ["C", "D"]
    g = te.create_prim_func([A, D], "ws_all", inline=False)
    assert allocs(g) == [("B", "global.workspace"), ("C", "global.workspace")]
    x = rand(3, 4)
    want = np.maximum((x + 1) ** 2, 0)
    np.testing.assert_allclose(run(f, x, out_shapes=[(3, 4)])[0], want, rtol=1e-6)
    np.testing.assert_allclose(run(g, x, out_shapes=[(3, 4)])[0], want, rtol=1e-6)


def test_stage_names_are_unique_and_outputs_keep_their_buffers():
    A = te.placeholder((2,), name="A")
    B = te.compute((2,), lambda i: A[i] + 1.0, name="T")
    C = te.compute((2,), lambda i: B[i] + 1.0, name="T")
    f = te.create_prim_func([A, B, C], "two")
    assert [a["stage"] for a in annotated(f)] == ["T", "T_1"]
    assert f.params[1] is B.buffer and f.params[2] is C.buffer
    x = rand(2)
    b, c = run(f, x, out_shapes=[(2,), (2,)])
    np.testing.assert_allclose(b, x + 1) and np.testing.assert_allclose(c, x + 2)


def test_output_that_is_an_input_is_copied():
    A = te.placeholder((2, 2), name="A")
    f = te.create_prim_func([A, A], "identity", num_inputs=1)
    assert annotated(f)[0]["stage"] == "A_copy"
    x = rand(2, 2)
    np.testing.assert_array_equal(run(f, x, out_shapes=[(2, 2)])[0], x)


def test_zero_dim_stage_gets_a_unit_loop():
    A = te.placeholder((), name="A")
    B = te.compute((), lambda: A[()] * 3.0, name="B")
    f = te.create_prim_func([A, B], "scalar")
    assert [(lp.loop_var.name, lp.extent.value) for lp in loops(f)] == [("B_ax", 1)]
    np.testing.assert_allclose(run(f, np.array(2.0, "float32"), out_shapes=[()])[0], 6.0)


# ---- reductions ----------------------------------------------------------------------------------------

def _dense(m=3, k=5, n=4):
    A, W = te.placeholder((m, k), name="A"), te.placeholder((n, k), name="W")
    r = te.reduce_axis((0, k), "r")
    D = te.compute((m, n), lambda i, j: te.sum(A[i, r] * W[j, r], axis=r), name="dense")
    return A, W, D


def test_reduction_alone_accumulates_in_its_buffer():
    A, W, D = _dense()
    f = te.create_prim_func([A, W, D], "dense")
    assert annotated(f) == [{"stage": "dense", "op": "dense", "pattern": "reduction"}]
    assert [lp.loop_var.name for lp in loops(f)] == ["dense_i", "dense_j", "dense_r"]
    assert allocs(f) == []
    a, w = rand(3, 5), rand(4, 5)
    np.testing.assert_allclose(run(f, a, w, out_shapes=[(3, 4)])[0], a @ w.T, rtol=1e-5)


def test_reduction_epilogue_uses_a_local_accumulator():
    A, W, D = _dense()
    b = te.placeholder((4,), name="b")
    E = te.compute((3, 4), lambda i, j: D[i, j] + b[j], name="bias")
    F = relu(E, "relu")
    f = te.create_prim_func([A, W, b, F], "dense_bias_relu")
    assert annotated(f) == [{"stage": "dense", "op": "dense", "pattern": "reduction", "epilogue": "relu"}]
    assert allocs(f) == [("dense_acc", "local")]
    stores = [n for n in pre_order(f.body) if isinstance(n, BufferStore)]
    assert [s.buffer.name for s in stores] == ["dense_acc", "dense_acc", "relu"]
    a, w, bias = rand(3, 5), rand(4, 5), rand(4)
    np.testing.assert_allclose(run(f, a, w, bias, out_shapes=[(3, 4)])[0], np.maximum(a @ w.T + bias, 0),
                               rtol=1e-5, atol=1e-6)


def test_no_epilogue_when_the_consumer_reads_other_indices_or_is_shared():
    A, W, D = _dense(3, 5, 3)
    T = te.compute((3, 3), lambda i, j: D[j, i] + 1.0, name="t")  # transposed read: not an epilogue
    f = te.create_prim_func([A, W, T], "tr")
    assert allocs(f) == [("dense", "global.workspace")]
    a, w = rand(3, 5), rand(3, 5)
    np.testing.assert_allclose(run(f, a, w, out_shapes=[(3, 3)])[0], (a @ w.T).T + 1, rtol=1e-5)
    U = te.compute((3, 3), lambda i, j: D[i, j] * 2.0, name="u")
    V = te.compute((3, 3), lambda i, j: D[i, j] * 3.0, name="v")
    g = te.create_prim_func([A, W, U, V], "shared")
    assert allocs(g) == [("dense", "global.workspace")]
    u, v = run(g, a, w, out_shapes=[(3, 3), (3, 3)])
    np.testing.assert_allclose(v, 3 * (a @ w.T), rtol=1e-5)
    # the reduction as an output too: it is stored, the consumer reads the output buffer
    h = te.create_prim_func([A, W, D, U], "both")
    d, u = run(h, a, w, out_shapes=[(3, 3), (3, 3)])
    np.testing.assert_allclose(u, 2 * d, rtol=1e-6)


@pytest.mark.parametrize("reducer, ref", [(te.sum, np.sum), (te.max, np.max), (te.min, np.min), (te.prod, np.prod)])
def test_reducers(reducer, ref):
    A = te.placeholder((3, 4, 5), name="A")
    r1, r2 = te.reduce_axis((0, 3), "r1"), te.reduce_axis((1, 5), "r2")
    B = te.compute((4,), lambda j: reducer(A[r1, j, r2], axis=[r1, r2]), name="red")
    f = te.create_prim_func([A, B], "red")
    x = rand(3, 4, 5)
    np.testing.assert_allclose(run(f, x, out_shapes=[(4,)])[0], ref(x[:, :, 1:], axis=(0, 2)), rtol=1e-5)


def test_integer_max_identity_and_where():
    A = te.placeholder((2, 6), "int32", "A")
    k = te.reduce_axis((0, 6), "k")
    B = te.compute((2,), lambda i: te.max(A[i, k], axis=k, where=tir.eq(k % 2, 0)), name="m")
    f = te.create_prim_func([A, B], "m")
    x = RNG.integers(-100, 100, (2, 6)).astype("int32")
    np.testing.assert_array_equal(run(f, x, out_shapes=[(2,)], out_dtypes=["int32"])[0], x[:, ::2].max(1))
    empty = te.reduce_axis((0, 0), "e")
    C = te.compute((2,), lambda i: te.max(A[i, empty], axis=empty), name="c")
    g = te.create_prim_func([A, C], "empty")
    np.testing.assert_array_equal(run(g, x, out_shapes=[(2,)], out_dtypes=["int32"])[0], [-2 ** 31] * 2)


def test_argmax_argmin_first_index_wins():
    X = te.placeholder((4, 5), name="X")
    k = te.reduce_axis((0, 5), "k")
    idx, val = te.compute((4,), lambda i: te.argmax((k, X[i, k]), axis=k), name="amax")
    k2 = te.reduce_axis((0, 5), "k")
    idx2, _ = te.compute((4,), lambda i: te.argmin((k2, X[i, k2]), axis=k2), name="amin")
    f = te.create_prim_func([X, idx, val, idx2], "arg")
    x = rand(4, 5)
    x[1] = 2.0
    x[2] = [1, 3, 0, 3, 0]
    x[3] = -np.inf
    i, v, j = run(f, x, out_shapes=[(4,), (4,), (4,)], out_dtypes=["int64", "float32", "int64"])
    np.testing.assert_array_equal(i, x.argmax(1))
    np.testing.assert_array_equal(v, x.max(1))
    np.testing.assert_array_equal(j, x.argmin(1))


def test_padding_select_guards_the_loads():
    """conv1d with a zero-padded input stage, inlined into the reduction (select keeps loads in bounds)."""
    X, Wt, b = te.placeholder((2, 7), name="X"), te.placeholder((3, 2, 3), name="W"), te.placeholder((3,), name="b")
    P = te.compute((2, 9), lambda c, x: tir.select(tir.all_(x >= 1, x < 8), X[c, tir.max(x - 1, 0)], 0.0),
                   name="pad")
    P2 = te.compute((2, 9), lambda c, x: tir.select(tir.all_(x >= 1, x < 8), X[c, x - 1], 0.0), name="pad")
    for pad in (P, P2):
        rc, rx = te.reduce_axis((0, 2), "rc"), te.reduce_axis((0, 3), "rx")
        Y = te.compute((3, 7), lambda o, x: te.sum(pad[rc, x + rx] * Wt[o, rc, rx], axis=[rc, rx]), name="conv")
        Z = te.compute((3, 7), lambda o, x: Y[o, x] + b[o], name="bias")
        f = te.create_prim_func([X, Wt, b, Z], "conv1d")
        assert allocs(f) == [("conv_acc", "local")]
        x, w, bias = rand(2, 7), rand(3, 2, 3), rand(3)
        xp = np.pad(x, ((0, 0), (1, 1)))
        want = np.array([[(xp[:, p:p + 3] * w[o]).sum() for p in range(7)] for o in range(3)])
        np.testing.assert_allclose(run(f, x, w, bias, out_shapes=[(3, 7)])[0], want + bias[:, None], rtol=1e-5)


def test_softmax_two_reductions_and_broadcast():
    X = te.placeholder((3, 6), name="X")
    k1, k2 = te.reduce_axis((0, 6), "k"), te.reduce_axis((0, 6), "k")
    M = te.compute((3,), lambda i: te.max(X[i, k1], axis=k1), name="max")
    E = te.compute((3, 6), lambda i, j: tir.exp(X[i, j] - M[i]), name="exp")
    S = te.compute((3,), lambda i: te.sum(E[i, k2], axis=k2), name="sum")
    Y = te.compute((3, 6), lambda i, j: E[i, j] / S[i], name="softmax")
    f = te.create_prim_func([X, Y], "softmax")
    assert [a["stage"] for a in annotated(f)] == ["max", "sum", "softmax"]
    assert allocs(f) == [("max", "global.workspace"), ("sum", "global.workspace")]
    x = rand(3, 6)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(run(f, x, out_shapes=[(3, 6)])[0], e / e.sum(1, keepdims=True), rtol=1e-5)


def test_annotate_sets_op_and_pattern_and_verifies_text_round_trip():
    A, W, D = _dense()
    b = te.placeholder((4,), name="b")
    te.annotate([D], [A, W], "nn.dense", "out_elemwise_fusable")
    E = te.compute((3, 4), lambda i, j: D[i, j] + b[j], name="T_add")
    te.annotate([E], [D, b], "add", "broadcast")
    f = te.create_prim_func([A, W, b, E], "fused_nn_dense_add")
    assert annotated(f) == [{"stage": "dense", "op": "nn.dense", "pattern": "out_elemwise_fusable",
                             "epilogue": "T_add"}]
    tir.assert_structural_equal(tir.parse_prim_func(tir.print_prim_func(f)), f)


def test_long_elementwise_chain_inlines_in_linear_time():
    A = te.placeholder((3,), name="A")
    t = A
    for _ in range(3000):
        t = te.compute((3,), lambda i, _t=t: _t[i] + 1.0, name="inc")
    f = te.create_prim_func([A, t], "chain")
    assert len(loops(f)) == 1
    np.testing.assert_allclose(run(f, np.zeros(3, "float32"), out_shapes=[(3,)])[0], [3000.0] * 3)


def test_big_producer_loaded_twice_is_materialized():
    A = te.placeholder((4,), name="A")
    small = te.compute((4,), lambda i: A[i] + 1.0, name="small")
    sq = te.compute((4,), lambda i: small[i] * small[i], name="sq")  # small stays inlined
    f = te.create_prim_func([A, sq], "f")
    assert allocs(f) == []
    big = A
    for _ in range(20):
        big = te.compute((4,), lambda i, _t=big: tir.tanh(_t[i]) * 0.5, name="big")
    first = te.compute((4,), lambda i: big[i] + 1.0, name="first")  # loads big once: inlined here
    out = te.compute((4,), lambda i: big[i] * big[i] + big[(i + 1) % 4] + first[i], name="out")
    g = te.create_prim_func([A, first, out], "g")
    assert allocs(g) == [("big_19", "global.workspace")]
    x = rand(4)
    b = x.astype("float64")
    for _ in range(20):
        b = np.tanh(b) * 0.5
    f1, o = run(g, x, out_shapes=[(4,), (4,)])
    np.testing.assert_allclose(f1, b + 1, rtol=1e-5)
    np.testing.assert_allclose(o, b * b + np.roll(b, -1) + b + 1, rtol=1e-5)


def test_epilogue_through_unit_dimensions():
    """A broadcast epilogue reads the reduction at index 0 in a dimension of extent 1: still fused."""
    A, W = te.placeholder((1, 5), name="A"), te.placeholder((4, 5), name="W")
    r = te.reduce_axis((0, 5), "r")
    D = te.compute((1, 4), lambda i, j: te.sum(A[i, r] * W[j, r], axis=r), name="dense")
    b = te.placeholder((4,), name="b")
    E = te.compute((1, 4), lambda i, j: D[0, j] + b[j], name="bias")
    f = te.create_prim_func([A, W, b, E], "f")
    assert allocs(f) == [("dense_acc", "local")]
    a, w, bias = rand(1, 5), rand(4, 5), rand(4)
    np.testing.assert_allclose(run(f, a, w, bias, out_shapes=[(1, 4)])[0], a @ w.T + bias, rtol=1e-5)


# ---- run-time checks ---------------------------------------------------------------------------------


def test_a_check_is_a_serial_nest_before_its_stage_and_sees_through_inlined_producers():
    x, raw = te.placeholder((5,), name="x"), te.placeholder((3,), "int32", name="raw")
    idx = te.compute((3,), lambda i: raw[i] - 1, name="idx")  # injective: inlined into its readers
    chk = te.check((3,), lambda i: tir.all_(idx[i] >= 0, idx[i] < 5), 1, "in_range")
    y = te.compute((3,), lambda i: x[tir.min(tir.max(tir.cast("int64", idx[i]), 0), 4)], name="y", checks=[chk])
    f = te.create_prim_func([x, raw, y])
    text = tir.print_prim_func(f)
    assert 'annotations={"op": "y", "pattern": "check", "stage": "y_check0"}' in text
    assert "assert raw[y_check0_i] - 1i32 >= 0i32 and raw[y_check0_i] - 1i32 < 5i32, 1" in text
    assert text.index("assert") < text.index("y[y_i] =")
    out = np.zeros(3, np.float32)
    tir.evaluate(f, np.arange(5, dtype=np.float32), np.array([1, 5, 3], np.int32), out)
    np.testing.assert_array_equal(out, [0, 4, 2])
    with pytest.raises(tir.TIRCheckError):
        tir.evaluate(f, np.arange(5, dtype=np.float32), np.array([1, 6, 3], np.int32), out)


def test_check_refuses_a_non_bool_condition_and_a_bad_status():
    x = te.placeholder((3,), name="x")
    with pytest.raises(te.TEError, match=r"^check 'c': the condition must be a bool TIR expression, got "):
        te.check((3,), lambda i: x[i], 1, "c")
    with pytest.raises(te.TEError, match=r"^check 'c': status must be an int >= 1, got 0$"):
        te.check((3,), lambda i: x[i] > 0.0, 0, "c")
    with pytest.raises(te.TEError, match=r"^compute 'y': checks must be te.check\(...\) results, got 'no'$"):
        te.compute((3,), lambda i: x[i], name="y", checks=["no"])
