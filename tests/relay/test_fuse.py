"""FuseOps: group structure on the reference models, pattern rules, convexity, numerics unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from plait import relay
from plait.frontend import from_onnx
from plait.ir.op import OpPattern
from plait.relay import Call, Constant, Function, IRModule, TupleGetItem, call, var
from plait.relay.passes import FuseOps, find_groups, fusion_pattern
from plait.testing import onnx_models

RNG = np.random.default_rng(0)


def fused_calls(mod: IRModule) -> list[Call]:
    return [n for n in relay.post_order(mod.main.body) if isinstance(n, Call) and isinstance(n.op, Function)]


def names(mod: IRModule) -> list[str]:
    return [c.op.attrs["name"] for c in fused_calls(mod)]


def unfused_op_calls(mod: IRModule) -> list[Call]:
    """Operator calls of main outside Primitive functions."""
    body = mod.main.body
    return [n for n in relay.post_order(body, enter=lambda e: not isinstance(e, Function))
            if isinstance(n, Call) and not isinstance(n.op, Function)]


def inputs_for(mod: IRModule) -> dict[str, np.ndarray]:
    return {p.name_hint: RNG.standard_normal([d for d in p.checked_type.shape]).astype(p.checked_type.dtype)
            for p in relay.infer_type(mod).main.params}


def assert_same_results(mod: IRModule, fused: IRModule) -> None:
    x = inputs_for(mod)
    want, got = relay.flatten_value(relay.run(mod, x)), relay.flatten_value(relay.run(fused, x))
    assert len(want) == len(got)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def check_groups(body) -> None:
    """Single output, convex, at most one anchor, every op call of the dataflow in a group."""
    groups = find_groups(body)
    nodes = list(relay.post_order(body))
    users: dict = {}
    for n in nodes:
        for c in relay.children(n):
            users.setdefault(c, set()).add(n)
    for g in {id(g): g for g in groups.values()}.values():
        members = set(g.members)
        anchors = [m for m in members if fusion_pattern(m) in (OpPattern.OUT_ELEMWISE_FUSABLE, OpPattern.REDUCTION)]
        assert len(anchors) <= 1
        for m in members:
            if m is not g.root:
                assert users[m] <= members, "a non-root member is used outside its group"
        # convexity: nothing outside the group is both reachable from it and reaching it
        down, stack = set(), [u for m in members for u in users.get(m, ()) if u not in members]
        while stack:
            n = stack.pop()
            if n not in down:
                down.add(n)
                stack.extend(users.get(n, ()))
        up, stack = set(), [a for m in members for a in relay.children(m) if a not in members]
        while stack:
            n = stack.pop()
            if n not in up:
                up.add(n)
                stack.extend(relay.children(n))
        assert not (down & up), "group is not convex"


# ---- reference models -----------------------------------------------------------------------------------

MODELS = {
    "mlp": lambda: onnx_models.mlp((8, 16, 4)),
    "ds_cnn": lambda: onnx_models.ds_cnn(channels=4, blocks=1),
    "resnet_block": lambda: onnx_models.resnet_block(channels=4, size=6),
    "transformer_encoder": lambda: onnx_models.transformer_encoder(d_model=8, heads=2, d_ff=16, seq=4),
}

EXPECTED = {
    "mlp": ["fused_nn_dense_add_nn_relu", "fused_nn_dense_add", "fused_nn_softmax"],
    "ds_cnn": ["fused_nn_conv2d_add_nn_batch_norm_nn_relu", "fused_nn_conv2d_nn_batch_norm_nn_relu",
               "fused_nn_conv2d_nn_batch_norm_nn_relu", "fused_nn_global_avg_pool2d", "fused_flatten",
               "fused_nn_dense_add"],
    "resnet_block": ["fused_nn_conv2d_nn_batch_norm_nn_relu", "fused_nn_conv2d_nn_batch_norm_add_nn_relu"],
    "transformer_encoder": [
        "fused_nn_matmul", "fused_add_reshape_transpose", "fused_nn_matmul", "fused_add_reshape_transpose_transpose",
        "fused_nn_matmul_divide", "fused_nn_softmax", "fused_nn_matmul", "fused_add_reshape_transpose",
        "fused_nn_matmul", "fused_transpose_reshape", "fused_nn_matmul_add_add", "fused_nn_layer_norm",
        "fused_nn_matmul_add_divide_erf_add_multiply_multiply", "fused_nn_matmul_add_add", "fused_nn_layer_norm"],
}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_reference_models(model):
    mod = from_onnx(MODELS[model]())
    fused = FuseOps()(mod)
    assert names(fused) == EXPECTED[model]
    # main calls only Primitive functions; each function is typed and keeps its calls' meta
    for c in fused_calls(fused):
        fn = c.op
        inner = [n for n in relay.post_order(fn.body) if isinstance(n, Call)]
        assert fn.attrs["Primitive"] == 1
        anchors = [n.op.name for n in inner if n.op.pattern in (OpPattern.OUT_ELEMWISE_FUSABLE, OpPattern.REDUCTION)]
        assert fn.attrs["anchor"] == (anchors[0] if anchors else inner[0].op.name)
        assert all(n.meta.get("name") for n in inner)
        assert fn.checked_type.ret_type == c.checked_type
    assert unfused_op_calls(fused) == []
    check_groups(relay.infer_type(mod).main.body)
    assert_same_results(mod, fused)


def test_resnet_block_group_contents():
    mod = from_onnx(MODELS["resnet_block"]())
    fused = FuseOps()(mod)
    second = fused_calls(fused)[1]
    fn = second.op
    assert fn.attrs == {"Primitive": 1, "anchor": "nn.conv2d", "name": "fused_nn_conv2d_nn_batch_norm_add_nn_relu"}
    # params: the first group's result, the conv weight, 4 batch-norm vectors, the block input x
    assert [str(p.checked_type) for p in fn.params] == [
        "Tensor[(1, 4, 6, 6), float32]", "Tensor[(4, 4, 3, 3), float32]"] + ["Tensor[(4,), float32]"] * 4 + [
        "Tensor[(1, 4, 6, 6), float32]"]
    assert second.args[-1] is fused.main.params[0]
    assert isinstance(second.args[0], Call) and second.args[0].op.attrs["name"] == "fused_nn_conv2d_nn_batch_norm_nn_relu"
    assert [n.meta["name"] for n in relay.post_order(fn.body) if isinstance(n, Call)] == [
        "/conv2/Conv", "BatchNormalization_12", "/add/Add", "/relu2/Relu"]


# ---- rules ---------------------------------------------------------------------------------------------

def _mod(body) -> IRModule:
    return relay.infer_type(IRModule.from_expr(body))


def _fuse(body) -> IRModule:
    return FuseOps()(_mod(body))


def test_diamond_of_elementwise_ops_is_one_group():
    x = var("x", (2, 3))
    r = call("nn.relu", x)
    body = call("add", call("exp", r), call("negative", r))
    fused = _fuse(body)
    assert names(fused) == ["fused_nn_relu_exp_negative_add"]
    assert fused_calls(fused)[0].op.attrs["anchor"] == "nn.relu"
    assert_same_results(_mod(body), fused)


def test_value_used_by_two_groups_is_a_group_output():
    x, w = var("x", (2, 4)), var("w", (3, 4))
    r = call("nn.relu", x)
    body = relay.Tuple((call("nn.dense", r, w), call("exp", r)))
    fused = _fuse(body)
    assert names(fused) == ["fused_nn_relu", "fused_nn_dense", "fused_exp"]
    assert_same_results(_mod(body), fused)


def test_anchor_takes_epilogue_only_with_its_shape():
    x, w, b = var("x", (2, 4)), var("w", (3, 4)), var("b", (2, 3))
    d = call("nn.dense", x, w)
    same = call("nn.relu", call("add", d, b))
    assert names(_fuse(same)) == ["fused_nn_dense_add_nn_relu"]
    wider = call("add", d, var("c", (5, 2, 3)))  # broadcasting the anchor's output to a bigger shape
    assert names(_fuse(wider)) == ["fused_nn_dense", "fused_add"]
    injective = call("transpose", call("add", d, b))  # an injective op after the anchor
    assert names(_fuse(injective)) == ["fused_nn_dense", "fused_add_transpose"]
    producer = call("nn.dense", call("nn.relu", x), w)  # conv/dense do not absorb producers
    assert names(_fuse(producer)) == ["fused_nn_relu", "fused_nn_dense"]


def test_reduction_absorbs_injective_producers_and_takes_an_epilogue():
    x = var("x", (2, 3, 4))
    s = call("sum", call("exp", call("transpose", x, axes=(0, 2, 1))), axis=(2,), keepdims=True)
    body = call("multiply", s, relay.const(np.float32(0.5)))
    fused = _fuse(body)
    assert names(fused) == ["fused_transpose_exp_sum_multiply"]
    fn = fused_calls(fused)[0].op
    assert fn.attrs["anchor"] == "sum" and len(fn.params) == 1  # the scalar constant is inlined
    assert_same_results(_mod(body), fused)
    # two reductions never share a group
    two = call("max", call("sum", x, axis=(2,)), axis=(1,))
    assert names(_fuse(two)) == ["fused_sum", "fused_max"]


def test_opaque_tuple_and_non_scalar_constants():
    x = var("x", (2, 6))
    parts = call("split", call("nn.relu", x), sections=(3, 3), axis=1)
    sm = call("nn.softmax", call("exp", TupleGetItem(parts, 0)))
    c = relay.const(RNG.standard_normal((2, 3)).astype("float32"))
    body = call("add", call("nn.relu", sm), c)
    fused = _fuse(body)
    assert names(fused) == ["fused_nn_relu_split", "fused_exp", "fused_nn_softmax", "fused_nn_relu_add"]
    last = fused_calls(fused)[-1]
    assert len(last.op.params) == 2 and last.args[1] is c
    assert_same_results(_mod(body), fused)


def test_device_copy_is_not_outlined_and_meta_is_kept():
    x = var("x", (2, 2))
    a = call("nn.relu", x, meta={"name": "r"})
    body = call("exp", call("device_copy", a, src="a", dst="b"), meta={"name": "e"})
    fused = _fuse(body)
    assert names(fused) == ["fused_nn_relu", "fused_exp"]
    assert fused.main.body.args[0].op.name == "device_copy"
    assert fused_calls(fused)[1].op.body.meta == {"name": "e"}


def test_calls_fuse_only_with_the_same_fusion_key():
    x = var("x", (2, 3))

    def chain(k0, k1, k2):
        a = call("nn.relu", x, meta={"fusion": k0} if k0 is not None else None)
        b = call("exp", a, meta={"fusion": k1} if k1 is not None else None)
        return call("negative", b, meta={"fusion": k2} if k2 is not None else None)

    assert names(_fuse(chain(None, None, None))) == ["fused_nn_relu_exp_negative"]
    assert names(_fuse(chain(0, 0, 0))) == ["fused_nn_relu_exp_negative"]
    fused = _fuse(chain(0, 1, 1))  # partitioning stamps the groups placement priced: FuseOps keeps them
    assert names(fused) == ["fused_nn_relu", "fused_exp_negative"]
    assert_same_results(_mod(chain(0, 1, 1)), fused)
    body = chain(None, None, None)
    relay.infer_type(IRModule.from_expr(body))
    groups = find_groups(body, key=lambda c: c.op.name == "nn.relu")  # a key function instead of the meta
    assert sorted(len(g.members) for g in set(groups.values())) == [1, 2]


def test_long_chain_is_cut_into_groups_of_max_ops():
    x = var("x", (4,))
    e = x
    for _ in range(20000):
        e = call("negative", e)
    mod = _mod(e)
    fused = FuseOps()(mod)
    sizes = [sum(isinstance(n, Call) for n in relay.post_order(fc.op.body)) for fc in fused_calls(fused)]
    assert sizes == [20000 - 78 * 256] + [256] * 78  # grown from the output: the remainder comes first
    v = RNG.standard_normal(4).astype("float32")
    np.testing.assert_array_equal(relay.run(fused, {"x": v}), v)
    (fc,) = fused_calls(FuseOps(max_ops=20000)(mod))  # one group, built without recursion
    assert fc.op.attrs["anchor"] == "negative" and len(fc.op.attrs["name"]) == len("fused_") + 20000 * 9 - 1


# ---- random DAGs -------------------------------------------------------------------------------------------

_UNARY = ["nn.relu", "exp", "negative", "transpose", "nn.softmax", "sum_keep", "nn.dense"]


@st.composite
def dags(draw):
    n_in = draw(st.integers(1, 3))
    vals = [var(f"x{k}", (3, 3)) for k in range(n_in)]
    w = relay.const(RNG.standard_normal((3, 3)).astype("float32"))
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(_UNARY + ["add", "add", "multiply"]))
        a = draw(st.sampled_from(vals))
        if kind in ("add", "multiply"):
            vals.append(call(kind, a, draw(st.sampled_from(vals))))
        elif kind == "sum_keep":
            vals.append(call("add", call("sum", a, axis=(1,), keepdims=True), a))
        elif kind == "nn.dense":
            vals.append(call("nn.dense", a, w))
        else:
            vals.append(call(kind, a))
    outs = draw(st.lists(st.sampled_from(vals[n_in:]), min_size=1, max_size=3))
    return outs[0] if len(outs) == 1 else relay.Tuple(tuple(outs))


@settings(max_examples=60, deadline=None)
@given(dags())
def test_random_dags_groups_are_convex_and_results_unchanged(body):
    mod = _mod(body)
    check_groups(mod.main.body)
    fused = FuseOps()(mod)
    assert unfused_op_calls(fused) == []
    assert_same_results(mod, fused)


def test_if_branches_and_loop_bodies_are_fused_each_on_their_own():
    from plait.relay import If, Loop, Tuple

    x, c = var("x", (2, 3)), var("c", (), "bool")
    y = call("exp", x)  # used outside and inside the branches: stays one group of main
    branch = call("nn.relu", call("add", y, x))
    i, k, s = var("i", (), "int64"), var("k", (), "bool"), var("s", (2, 3))
    body = Function((i, k, s), Tuple((k, call("tanh", call("multiply", s, y)))))
    lp = Loop(const_int(3), None, (x,), body, 0)
    mod = IRModule({"main": Function((x, c), Tuple((If(c, branch, call("negative", y)), TupleGetItem(lp, 0), y)))})
    fused = FuseOps()(mod)
    everything = [n for n in relay.post_order(fused.main.body) if isinstance(n, Call) and isinstance(n.op, Function)]
    assert sorted(n.op.attrs["name"] for n in everything) == ["fused_add_nn_relu", "fused_exp", "fused_multiply_tanh",
                                                             "fused_negative"]
    (exp,) = [n for n in everything if n.op.attrs["name"] == "fused_exp"]
    inner = [n for n in everything if n is not exp]
    assert all(exp in n.args for n in inner)  # the outer value is a parameter of each inner group
    assert_same_results(mod, fused)


def const_int(v: int):
    from plait.relay import const

    return const(v, "int64")
