"""LowerToTIR: lowered modules run with the TIR interpreter match the reference interpreter; dedup,
names, attrs, Relay types, errors."""

from __future__ import annotations

import numpy as np
import pytest

from plait import relay, te, tir
from plait.lowering.lower import MAX_NAME, LowerError, LowerToTIR, c_name, lower_function
from plait.frontend import from_onnx
from plait.op import get_op
from plait.ir.types import FuncType, TupleType
from plait.relay import Call, Constant, Function, GlobalVar, IRModule, Tuple, TupleGetItem, Var, call, var
from plait.relay.passes import FuseOps
from plait.target import CompositeTarget, Target
from plait.testing import onnx_models

RNG = np.random.default_rng(0)


def run_lowered(mod: IRModule, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run a lowered ``main`` by calling its PrimFuncs with the TIR interpreter."""
    fn = mod.main
    env: dict = {p: inputs[p.name_hint] for p in fn.params}
    for node in relay.post_order(fn.body):
        if node in env:
            continue
        if isinstance(node, Constant):
            env[node] = node.data
        elif isinstance(node, Tuple):
            env[node] = tuple(env[f] for f in node.fields)
        elif isinstance(node, TupleGetItem):
            env[node] = env[node.tuple_value][node.index]
        elif isinstance(node, Call) and isinstance(node.op, GlobalVar):
            pf = mod[node.op.name]
            assert isinstance(pf, tir.PrimFunc)
            n_in = pf.attrs["num_inputs"]
            outs = [np.zeros(tuple(d.value for d in b.shape), b.dtype) for b in pf.params[n_in:]]
            args = [np.ascontiguousarray(env[a]) for a in node.args]
            tir.evaluate(pf, *args, *outs)
            env[node] = tuple(outs) if isinstance(node.checked_type, TupleType) else outs[0]
        elif isinstance(node, Call) and getattr(node.op, "view", False):  # a view left in main: a reshape
            env[node] = np.reshape(env[node.args[0]], node.checked_type.shape)
        elif isinstance(node, (GlobalVar, Function)):
            continue
        else:
            raise AssertionError(f"unexpected node in lowered main: {node!r}")
    return relay.flatten_value(env[fn.body])


def inputs_for(mod: IRModule) -> dict[str, np.ndarray]:
    out = {}
    for p in relay.infer_type(mod).main.params:
        t = p.checked_type
        out[p.name_hint] = RNG.standard_normal(t.shape).astype(t.dtype)
    return out


def lower(mod: IRModule, target="c") -> IRModule:
    return LowerToTIR(target)(FuseOps()(mod))


def check_numerics(mod: IRModule, rtol=1e-5, atol=1e-6) -> IRModule:
    mod = relay.infer_type(mod)
    lowered = lower(mod)
    x = inputs_for(mod)
    want = relay.flatten_value(relay.run(mod, x))
    got = run_lowered(lowered, x)
    assert len(want) == len(got)
    for a, b in zip(want, got):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)
    return lowered


def prim_funcs(mod: IRModule) -> dict[str, tir.PrimFunc]:
    return {k: v for k, v in mod.items() if isinstance(v, tir.PrimFunc)}


def main_calls(mod: IRModule) -> list[Call]:
    return [n for n in relay.post_order(mod.main.body) if isinstance(n, Call)]


def _mod(body) -> IRModule:
    return relay.infer_type(IRModule.from_expr(body))


def _dense_compute(inputs, attrs, out_type):
    x, w = inputs
    k = te.reduce_axis((0, x.shape[-1]), "k")
    return te.compute(out_type.shape, lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="T_dense")


def _split_compute(inputs, attrs, out_type):
    (x,) = inputs
    outs, start = [], 0
    for k, n in enumerate(attrs["sections"]):
        outs.append(te.compute((x.shape[0], n), lambda i, j, _s=start: x[i, j + _s], name=f"T_split{k}"))
        start += n
    return outs


@pytest.fixture
def fallback_computes(monkeypatch):
    """nn.dense / split: the real computes if registered, else minimal 2-d ones for these tests."""
    for op, fn in (("nn.dense", _dense_compute), ("split", _split_compute)):
        if get_op(op).compute is None:
            monkeypatch.setattr(get_op(op), "compute", fn)


# ---- numerics, structure ----------------------------------------------------------------------------

def test_elementwise_softmax_reduction_and_tuple_output():
    x, y = var("x", (2, 5)), var("y", (5,))
    s = call("nn.softmax", call("nn.relu", call("add", x, y)), axis=1)
    b = call("add", call("nn.relu", call("subtract", x, y)), relay.const(np.float32(1.5)))
    body = Tuple((s, b, call("sum", s, axis=(1,), keepdims=False)))
    lowered = check_numerics(_mod(body))
    assert sorted(prim_funcs(lowered)) == ["fused_add_nn_relu", "fused_nn_softmax", "fused_subtract_nn_relu_add",
                                           "fused_sum"]
    assert all(isinstance(c.op, GlobalVar) or c.op.view for c in main_calls(lowered))  # views stay: aliased
    for name, pf in prim_funcs(lowered).items():
        assert pf.attrs["global_symbol"] == name and pf.attrs["piece"] == "c"
    pf = lowered["fused_add_nn_relu"]
    assert pf.attrs["num_inputs"] == 2
    assert pf.relay_type == FuncType((x.checked_type, y.checked_type), x.checked_type)
    relay.infer_type(lowered)  # the lowered module still type-checks
    assert lowered.main.checked_type.ret_type == _mod(body).main.checked_type.ret_type


def test_split_tuple_result_and_integer_ops(fallback_computes):
    x = var("x", (2, 6), "int32")
    parts = call("split", call("negative", x), sections=(2, 4), axis=1)
    body = Tuple((call("add", TupleGetItem(parts, 0), TupleGetItem(parts, 0)), TupleGetItem(parts, 1)))
    mod = _mod(body)
    lowered = lower(mod)
    pf = lowered["fused_negative_split"]
    assert pf.attrs["num_inputs"] == 1 and len(pf.params) == 3
    v = {"x": RNG.integers(-50, 50, (2, 6)).astype("int32")}
    for a, b in zip(relay.flatten_value(relay.run(mod, v)), run_lowered(lowered, v)):
        np.testing.assert_array_equal(a, b)


def test_dense_epilogue_is_fused_into_one_nest(fallback_computes):
    x, w, b = var("x", (3, 4)), var("w", (5, 4)), var("b", (5,))
    body = call("nn.relu", call("add", call("nn.dense", x, w), b))
    lowered = check_numerics(_mod(body))
    (pf,) = prim_funcs(lowered).values()
    fors = [n for n in tir.pre_order(pf.body) if isinstance(n, tir.For) and "stage" in n.annotations]
    assert len(fors) == 1
    ann = fors[0].annotations
    assert ann["op"] == "nn.dense" and ann["pattern"] == "out_elemwise_fusable" and "epilogue" in ann
    assert [n.buffer.scope for n in tir.pre_order(pf.body) if isinstance(n, tir.Allocate)] == ["local"]


def test_identical_groups_are_lowered_once_and_names_are_unique():
    x = var("x", (2, 3))
    a = call("exp", call("nn.relu", x, meta={"name": "r1"}), meta={"name": "e1"})
    b = call("exp", call("nn.relu", call("nn.softmax", a), meta={"name": "r2"}), meta={"name": "e2"})
    mod = _mod(b)
    lowered = lower(mod)
    assert sorted(prim_funcs(lowered)) == ["fused_nn_relu_exp", "fused_nn_softmax"]
    assert [c.op.name for c in main_calls(lowered)] == ["fused_nn_relu_exp", "fused_nn_softmax", "fused_nn_relu_exp"]
    # same ops, other shapes: another PrimFunc with a numeric suffix
    y = var("y", (4,))
    mod2 = _mod(Tuple((call("exp", x), call("exp", y), call("exp", call("negative", call("exp", y))))))
    low2 = lower(mod2)
    assert sorted(prim_funcs(low2)) == ["fused_exp", "fused_exp_1", "fused_exp_negative_exp"]
    x2 = inputs_for(mod2)
    for a, b in zip(relay.flatten_value(relay.run(mod2, x2)), run_lowered(low2, x2)):
        np.testing.assert_allclose(b, a, rtol=1e-6)


def test_names_are_c_safe_truncated_and_avoid_module_globals():
    assert c_name("fused_nn.conv2d") == "fused_nn_conv2d" and c_name("9x") == "_9x"
    assert c_name("a" * 100) == "a" * MAX_NAME
    x = var("x", (2,))
    e = x
    for _ in range(30):
        e = call("sigmoid", e)
    body = call("add", e, x)
    other = Function((var("z", (2,)),), call("exp", var("z", (2,))))
    mod = relay.infer_type(IRModule({"main": Function((x,), body), "fused_exp": other}))
    lowered = LowerToTIR("c")(FuseOps()(mod))
    names = sorted(prim_funcs(lowered))
    assert len(names) == 2 and all(len(n) <= MAX_NAME for n in names)
    assert "fused_exp_1" in names and isinstance(lowered["fused_exp"], Function)


def test_unfused_calls_are_lowered_alone_and_device_copy_is_kept():
    x = var("x", (2, 2))
    body = call("exp", call("device_copy", call("nn.relu", x), src="a", dst="b"))
    mod = _mod(body)
    lowered = LowerToTIR("c")(mod)  # no FuseOps
    ops = [c.op.name if isinstance(c.op, GlobalVar) else c.op.name for c in main_calls(lowered)]
    assert ops == ["fused_nn_relu", "device_copy", "fused_exp"]


def test_target_is_an_explicit_target_piece_or_string():
    x = var("x", (2,))
    mod = FuseOps()(_mod(call("exp", x)))
    piece = CompositeTarget("m7: c -mcpu=cortex-m7f").pieces[0]
    # placed on the piece, or on the one piece a composite of the target alone has (named after its kind)
    for target, placed in ((Target("c -mcpu=cortex-m7f"), "c"), ("c -mcpu=cortex-m7f", "c"), (piece, "m7")):
        assert LowerToTIR(target)(mod)["fused_exp"].attrs["piece"] == placed
        assert CompositeTarget(target if target is not piece else "m7: c -mcpu=cortex-m7f").placed_on(
            LowerToTIR(target)(mod)["fused_exp"]).target == Target("c -mcpu=cortex-m7f")
    with pytest.raises(LowerError) as exc:
        LowerToTIR()(mod)
    assert str(exc.value) == "LowerToTIR: no target given (pass a Target, a target string or a Piece)"
    with pytest.raises(LowerError) as exc:
        lower_function(Function((x,), call("exp", x)), "f", None)
    assert str(exc.value) == "lower_function: no target given (pass a Target, a target string or a Piece)"


# ---- errors ------------------------------------------------------------------------------------------

def test_missing_compute_names_the_call_and_the_piece(monkeypatch):
    monkeypatch.setattr(get_op("nn.relu"), "compute", None)
    x = var("x", (2,))
    mod = FuseOps()(_mod(call("exp", call("nn.relu", x, meta={"name": "act1"}))))
    piece = CompositeTarget("cpu: c").pieces[0]
    with pytest.raises(LowerError) as exc:
        LowerToTIR(piece)(mod)
    assert str(exc.value) == ("cannot lower call 'act1' (operator 'nn.relu') for piece 'cpu' (target 'c'): "
                              "operator 'nn.relu' has no TE compute")
    with pytest.raises(LowerError, match=r"^cannot lower call 'act1' \(operator 'nn.relu'\) for target 'c': "):
        LowerToTIR("c")(mod)


def test_compute_errors_get_the_call_context(monkeypatch):
    from plait.errors import PlaitError

    def bad(inputs, attrs, out_type):
        raise PlaitError("exp: cannot do this")

    def buggy(inputs, attrs, out_type):
        return inputs[0].shape[7]

    def wrong_shape(inputs, attrs, out_type):
        return te.compute((1,), lambda i: inputs[0][0], name="w")

    x = var("x", (2,))
    mod = FuseOps()(_mod(call("exp", x, meta={"name": "e"})))
    for fn, msg in [(bad, "exp: cannot do this"),
                    (buggy, "the compute of 'exp' failed: IndexError: tuple index out of range"),
                    (wrong_shape, "the compute of 'exp' returned [((1,), 'float32')], expected [((2,), 'float32')]")]:
        monkeypatch.setattr(get_op("exp"), "compute", fn)
        with pytest.raises(LowerError) as exc:
            LowerToTIR("c")(mod)
        assert str(exc.value) == f"cannot lower call 'e' (operator 'exp') for target 'c': {msg}"


# ---- reference models -----------------------------------------------------------------------------------

MODELS = {
    "mlp": lambda: onnx_models.mlp((8, 16, 4)),
    "ds_cnn": lambda: onnx_models.ds_cnn(channels=4, blocks=1),
    "resnet_block": lambda: onnx_models.resnet_block(channels=4, size=6),
    "transformer_encoder": lambda: onnx_models.transformer_encoder(d_model=8, heads=2, d_ff=16, seq=4),
}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_reference_models(model):
    mod = from_onnx(MODELS[model]())
    ops = {n.op.name for n in relay.post_order(mod.main.body) if isinstance(n, Call) and not isinstance(n.op, Var)}
    missing = sorted(o for o in ops if get_op(o).compute is None)
    if missing:
        pytest.skip(f"no TE compute yet for {', '.join(missing)}")
    lowered = check_numerics(mod, rtol=1e-4, atol=1e-5)
    assert all(isinstance(c.op, GlobalVar) or c.op.view for c in main_calls(lowered))  # views stay: aliased


def test_default_schedule_is_applied_unless_disabled(monkeypatch):
    import plait.schedule

    seen = []

    def spy(func, target):
        seen.append((func.attrs["global_symbol"], str(target)))
        return func

    monkeypatch.setattr(plait.schedule, "default_schedule", spy, raising=False)
    mod = FuseOps()(_mod(call("exp", var("x", (2,)))))
    LowerToTIR("c")(mod)
    assert seen == [("fused_exp", "c")]
    LowerToTIR("c", schedule=False)(mod)
    assert len(seen) == 1
