"""The shared relay_to_tir helper (plait.lowering.hook_lowering): finding the piece's region functions,
backend PrimFuncs vs default lowering, naming, deduplication, attrs, rewriting, errors."""

from __future__ import annotations

import numpy as np
import pytest

from plait import tir
from plait.backends.c.backend import build_c
from plait.lowering.hook_lowering import HookLoweringError, call_buffers, lower_regions, region_functions
from plait.op import get_op
from plait.relay import run
from plait.relay.expr import Call, Constant, Function, GlobalVar, Tuple, Var
from plait.relay.visitor import post_order
from plait.target import CompositeTarget, Target, run_relay_to_tir
from plait.target.testing import isolated_registry, register_test_backend
from plait.tir import Buffer, For, PrimFunc, Var as TVar

from tests.backends.region_eval import partitioned, prim_funcs, run_region, tensor

T = tensor((4, 6))


def _flat_relu(x: Buffer, y: Buffer):
    """y = max(x, 0) as a loop nest (what a backend's hand-written PrimFunc would hold)."""
    idx = [TVar(f"i{k}") for k in range(len(x.shape))]
    store = y.store(tuple(idx), tir.max(x[tuple(idx)], tir.const(0.0, "float32")))
    for v, d in reversed(list(zip(idx, x.shape))):
        store = For(v, 0, d, "serial", store)
    return store


def only_relu(call):
    if call.op_name != "nn.relu":
        return None
    (x,), (y,) = call_buffers(call)
    return PrimFunc((x, y), _flat_relu(x, y), {"global_symbol": "my relu!"})


@pytest.fixture
def kind():
    """A kind 'hk' whose relay_to_tir hook lowers relu itself and leaves the rest to default lowering."""
    with isolated_registry():
        register_test_backend("hk", can_host=False,
                              relay_to_tir=lambda mod, target: lower_regions(mod, target, only_relu))
        yield CompositeTarget("host: c; acc: hk").piece("acc")


def body(ps):
    x, y = ps
    r1 = Call(get_op("nn.relu"), (x,), meta={"name": "r1"})
    r2 = Call(get_op("nn.relu"), (y,), meta={"name": "r2"})  # same types as r1: lowered once
    s = Call(get_op("add"), (r1, r2), meta={"name": "s"})
    c = Constant(np.full((4, 6), 0.5, np.float32))
    m = Call(get_op("multiply"), (s, c), meta={"name": "m"})
    return Tuple((m, r1))


def test_regions_are_lowered_named_deduplicated_and_rewritten(kind, tmp_path):
    other = Function((Var("z", T),), Var("z", T), None, {"piece": "host", "region": 1, "global_symbol": "host_0"})
    taken = Function((Var("w", T),), Var("w", T))  # a global already called acc_add: the new name avoids it
    mod = partitioned(body, [T, T], "acc", extra={"host_0": other, "acc_add": taken})
    assert region_functions(mod, "acc") == ["acc_0"] and region_functions(mod, "host") == ["host_0"]
    out = run_relay_to_tir(kind, mod)

    pfs = prim_funcs(out)
    # relu by the backend (its own name, made C-safe, prefixed by the piece); add and multiply by default
    assert sorted(pfs) == ["acc_add_1", "acc_multiply", "acc_my_relu_"]
    for name, pf in pfs.items():
        assert pf.attrs["global_symbol"] == name and pf.attrs["piece"] == "acc"
        assert pf.attrs["num_inputs"] == 2 if name != "acc_my_relu_" else pf.attrs["num_inputs"] == 1
    assert out["host_0"] is other and out["acc_add"] is taken  # other pieces' functions untouched

    region = out["acc_0"]
    assert dict(region.attrs) == {"piece": "acc", "region": 1, "global_symbol": "acc_0"}
    calls = [n for n in post_order(region.body) if isinstance(n, Call)]
    assert all(isinstance(c.op, GlobalVar) for c in calls)
    assert sorted(c.op.name for c in calls) == ["acc_add_1", "acc_multiply", "acc_my_relu_", "acc_my_relu_"]
    assert any(isinstance(a, Constant) for c in calls for a in c.args)  # constants stay arguments
    assert region.body.checked_type == mod["acc_0"].body.checked_type

    lib = build_c(list(pfs.values()), "c", cache_dir=str(tmp_path))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(2)]
    got = run_region(out, "acc_0", lib, xs)
    want = run(mod, {"m0": xs[0], "m1": xs[1]})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_structurally_identical_prim_funcs_are_kept_once(tmp_path):
    # negative and relu get the same hand-written PrimFunc: one function, both calls use it
    def lower(call):
        (x,), (y,) = call_buffers(call)
        return PrimFunc((x, y), _flat_relu(x, y), {"global_symbol": "same"})

    with isolated_registry():
        register_test_backend("hk2", can_host=False,
                              relay_to_tir=lambda mod, target: lower_regions(mod, target, lower, prefix="k"))
        piece = CompositeTarget("host: c; hk2: hk2").piece("hk2")
        mod = partitioned(lambda ps: Call(get_op("negative"), (Call(get_op("nn.relu"), (ps[0],)),)), [T], "hk2")
        out = run_relay_to_tir(piece, mod)
    assert sorted(prim_funcs(out)) == ["k_same"]
    assert [n.op.name for n in post_order(out["hk2_0"].body) if isinstance(n, Call)] == ["k_same", "k_same"]


def test_per_region_variant_replaces_the_region_by_one_prim_func():
    def lower_region(fn):
        x = Buffer("x", (4, 6))
        y = Buffer("y", (4, 6))
        return PrimFunc((x, y), _flat_relu(x, y))

    with isolated_registry():
        register_test_backend("hk3", can_host=False,
                              relay_to_tir=lambda mod, target: lower_regions(mod, target, lower_region=lower_region))
        piece = CompositeTarget("host: c; hk3: hk3").piece("hk3")
        mod = partitioned(lambda ps: Call(get_op("nn.relu"), (ps[0],)), [T], "hk3")
        out = run_relay_to_tir(piece, mod)
    pf = out["hk3_0"]
    assert isinstance(pf, PrimFunc)
    assert dict(pf.attrs) == {"global_symbol": "hk3_0", "piece": "hk3", "num_inputs": 1}


def test_a_failing_backend_is_reported_with_the_call_region_and_piece():
    def boom(call):
        raise ValueError("no kernel for this shape")

    with isolated_registry():
        register_test_backend("hk4", can_host=False,
                              relay_to_tir=lambda mod, target: lower_regions(mod, target, boom))
        piece = CompositeTarget("host: c; hk4: hk4").piece("hk4")
        mod = partitioned(lambda ps: Call(get_op("nn.relu"), (ps[0],), meta={"name": "/act/Relu"}), [T], "hk4")
        with pytest.raises(HookLoweringError) as e:
            run_relay_to_tir(piece, mod)
    assert str(e.value) == ("lowering call '/act/Relu' (operator 'nn.relu') in region function 'hk4_0' "
                            "(piece 'hk4') failed: ValueError: no kernel for this shape")


def test_a_prim_func_of_the_wrong_type_is_rejected():
    def wrong(call):
        x, y = Buffer("x", (4, 6)), Buffer("y", (6, 4))
        i, j = TVar("i"), TVar("j")
        return PrimFunc((x, y), For(i, 0, 4, "serial", For(j, 0, 6, "serial", y.store((j, i), x[i, j]))))

    with isolated_registry():
        register_test_backend("hk5", can_host=False,
                              relay_to_tir=lambda mod, target: lower_regions(mod, target, wrong))
        piece = CompositeTarget("host: c; hk5: hk5").piece("hk5")
        mod = partitioned(lambda ps: Call(get_op("nn.relu"), (ps[0],)), [T], "hk5")
        with pytest.raises(HookLoweringError, match=r"the PrimFunc's type fn \(Tensor\[\(4, 6\), float32\]\) -> "
                                                    r"Tensor\[\(6, 4\), float32\] is not the call's"):
            run_relay_to_tir(piece, mod)


def test_an_invalid_prim_func_is_rejected():
    def bad(call):  # raw constructors: float + int32 slips through, the verifier catches it
        (x,), (y,) = call_buffers(call)
        i = TVar("i")
        return PrimFunc((x, y), For(i, 0, 4, "serial", y.store((i, 0), tir.Add(x[i, 0], tir.IntImm(1, "int32")))))

    with isolated_registry():
        register_test_backend("hk6", can_host=False,
                              relay_to_tir=lambda mod, target: lower_regions(mod, target, bad))
        piece = CompositeTarget("host: c; hk6: hk6").piece("hk6")
        mod = partitioned(lambda ps: Call(get_op("nn.relu"), (ps[0],)), [T], "hk6")
        with pytest.raises(HookLoweringError, match="invalid PrimFunc"):
            run_relay_to_tir(piece, mod)


def test_without_a_piece_name_the_target_names_it():
    mod = partitioned(lambda ps: Call(get_op("nn.relu"), (ps[0],)), [T], "c")
    with pytest.raises(HookLoweringError, match="expected the hook's target"):
        lower_regions(mod, "c", only_relu)
    out = lower_regions(mod, Target("c"), only_relu)  # a plain target counts as a piece named after its kind
    assert sorted(prim_funcs(out)) == ["c_my_relu_"]


def test_a_prim_func_with_scalar_params_is_rejected():
    def scalar(call):
        (x,), (y,) = call_buffers(call)
        return PrimFunc((x, TVar("alpha", "float32"), y), _flat_relu(x, y))

    with isolated_registry():
        register_test_backend("hk7", can_host=False,
                              relay_to_tir=lambda mod, target: lower_regions(mod, target, scalar))
        piece = CompositeTarget("host: c; hk7: hk7").piece("hk7")
        mod = partitioned(lambda ps: Call(get_op("nn.relu"), (ps[0],)), [T], "hk7")
        with pytest.raises(HookLoweringError) as e:
            run_relay_to_tir(piece, mod)
    assert str(e.value) == ("lowering call (operator 'nn.relu') in region function 'hk7_0' (piece 'hk7'): the "
                            "PrimFunc's parameters must be buffers of static shape: 1 input(s) in argument order, "
                            "then the output(s)")


def test_tuple_results_and_projections_by_default_lowering(kind, tmp_path):
    from plait.relay.expr import TupleGetItem

    def split_body(ps):
        parts = Call(get_op("split"), (ps[0],), {"sections": (2, 4), "axis": 1})
        a = Call(get_op("nn.relu"), (TupleGetItem(parts, 0),))
        return Tuple((a, TupleGetItem(parts, 1)))

    mod = partitioned(split_body, [T], "acc")
    out = run_relay_to_tir(kind, mod)
    pfs = prim_funcs(out)
    assert sorted(pfs) == ["acc_my_relu_", "acc_split"]
    assert pfs["acc_split"].relay_type.ret_type == out["acc_0"].body.fields[1].tuple_value.checked_type
    lib = build_c(list(pfs.values()), "c", cache_dir=str(tmp_path))
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    got = run_region(out, "acc_0", lib, [x])
    want = run(mod, {"m0": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
