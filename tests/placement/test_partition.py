"""Device planning and partitioning: device_copy insertion, convex same-piece regions, inlining back."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from plait import relay
from plait.placement.partition import PartitionError, is_region, partition, regions_of
from plait.relay.expr import Call, Constant, Function, GlobalVar, Tuple, TupleGetItem
from plait.relay.infer import infer_type
from plait.relay.interpreter import flatten_value, run
from plait.relay.module import IRModule
from plait.ir.types import TensorType
from plait.relay.visitor import post_order
from plait.target import CompositeTarget

# a and e share the host's memory; m0 and m7 each have their own
CT = CompositeTarget("a: c; m0: c -mcpu=cortex-m0; m7: c -mcpu=cortex-m7f; e: c -opt-level=3")
NAMES = CT.names


@st.composite
def dags(draw):
    n = draw(st.integers(1, 9))
    x = relay.var("x", (2, 8))
    values = [x]
    calls = []
    for k in range(n):
        kind = draw(st.sampled_from(["relu", "add", "addc", "split", "tuple_add"]))
        a = values[draw(st.integers(0, len(values) - 1))]
        b = values[draw(st.integers(0, len(values) - 1))]
        meta = {"name": f"n{k}"}
        if kind == "relu":
            y = relay.call("nn.relu", a, meta=meta)
        elif kind == "add":
            y = relay.call("add", a, b, meta=meta)
        elif kind == "addc":
            y = relay.call("add", a, relay.const(np.full((2, 8), 0.25 * k, np.float32)), meta=meta)
        elif kind == "split":
            s = relay.call("split", a, sections=[3, 5], axis=1, meta=meta)
            calls.append(s)
            y = relay.call("concatenate", TupleGetItem(s, 1), TupleGetItem(s, 0), axis=1,
                           meta={"name": f"n{k}c"})
        else:
            t = Tuple((a, b))
            y = relay.call("subtract", TupleGetItem(t, 0), TupleGetItem(t, 1), meta=meta)
        calls.append(y)
        values.append(y)
    outs = [values[-1]] + [values[draw(st.integers(1, len(values) - 1))] for _ in range(draw(st.integers(0, 2)))]
    body = outs[0] if len(outs) == 1 else Tuple(tuple(outs))
    mod = infer_type(IRModule({"main": Function((x,), body)}))
    pieces = {c: draw(st.sampled_from(NAMES)) for c in calls}
    return mod, pieces


def _op_calls(e):
    return [n for n in post_order(e) if isinstance(n, Call) and not isinstance(n.op, (GlobalVar, Function))]


def _domain(p):
    return next(q.name for q in CT.pieces if CT.shares_memory(q, CT.piece(p)))


@settings(max_examples=80, deadline=None)
@given(dags())
def test_partition_keeps_semantics_pieces_and_copies(case):
    mod, pieces = case
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    want = flatten_value(run(mod, {"x": x}))
    out = partition(mod, pieces, CT)
    got = flatten_value(run(out, {"x": x}))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # every call of a region runs on the region's piece; every original call is in exactly one region
    by_name = {c.meta["name"]: p for c, p in pieces.items()}
    seen = []
    for name in regions_of(out):
        fn = out[name]
        # region boundaries are tensors: what a hook or an external runtime can take
        assert all(isinstance(p.checked_type, TensorType) for p in fn.params)
        rt = fn.body.checked_type
        assert isinstance(rt, TensorType) or all(isinstance(f, TensorType) for f in rt.fields)
        for c in _op_calls(fn.body):
            assert c.op.name != "device_copy"
            assert by_name[c.meta["name"]] == fn.attrs["piece"]
            seen.append(c.meta["name"])
    live = {c.meta["name"] for c in _op_calls(mod.main.body)}
    assert sorted(seen) == sorted(live)
    # copies: only between different memories, never twice the same value to the same memory, and a
    # region reads only values in its own memory
    main = out.main
    copies = [c for c in _op_calls(main.body) if c.op.name == "device_copy"]
    keys = set()
    for c in copies:
        assert _domain(c.attrs["src"]) != _domain(c.attrs["dst"])
        key = (id(c.args[0]), _domain(c.attrs["dst"]))
        assert key not in keys
        keys.add(key)
    # main has only region calls, copies, tuples and projections
    for n in post_order(main.body):
        assert not (isinstance(n, Call) and isinstance(n.op, GlobalVar) and not is_region(out[n.op.name]))


def _chain(ops, names=None):
    x = relay.var("x", (4,))
    y = x
    calls = []
    for k, op in enumerate(ops):
        y = relay.call(op, y, meta={"name": (names or [f"n{i}" for i in range(len(ops))])[k]})
        calls.append(y)
    return infer_type(IRModule({"main": Function((x,), y)})), calls


def test_regions_are_maximal_and_acyclic():
    mod, calls = _chain(["nn.relu", "negative", "abs", "exp"])
    out = partition(mod, {c: "a" for c in calls}, CT)
    assert regions_of(out) == ["a_0"]
    # a, m7, a: merging the two 'a' calls would make a cycle through m7
    out = partition(mod, dict(zip(calls, ["a", "m7", "a", "a"])), CT)
    assert sorted(regions_of(out)) == ["a_0", "a_1", "m7_0"]
    assert [len(_op_calls(out[r].body)) for r in ("a_0", "m7_0", "a_1")] == [1, 1, 2]
    # a and e share memory: no copy, two regions; m7 needs copies in and out
    out = partition(mod, dict(zip(calls, ["a", "e", "m7", "a"])), CT)
    copies = [(c.attrs["src"], c.attrs["dst"]) for c in _op_calls(out.main.body) if c.op.name == "device_copy"]
    assert copies == [("e", "m7"), ("m7", "a")]


def test_parallel_branches_join_one_region():
    x = relay.var("x", (4,))
    b1 = relay.call("nn.relu", x, meta={"name": "b1"})
    b2 = relay.call("negative", x, meta={"name": "b2"})
    y = relay.call("add", b1, b2, meta={"name": "y"})
    mod = infer_type(IRModule({"main": Function((x,), y)}))
    out = partition(mod, {b1: "m7", b2: "m7", y: "a"}, CT)
    assert sorted(regions_of(out)) == ["a_0", "m7_0"]
    assert isinstance(out["m7_0"].body, Tuple) and len(out["m7_0"].body.fields) == 2
    # the input goes to m7 once, the two results come back once each
    copies = [(c.attrs["src"], c.attrs["dst"]) for c in _op_calls(out.main.body) if c.op.name == "device_copy"]
    assert sorted(copies) == [("a", "m7"), ("m7", "a"), ("m7", "a")]


def test_constants_stay_inside_regions_and_one_piece_fast_path():
    x = relay.var("x", (4,))
    y = relay.call("add", x, relay.const(np.ones(4, np.float32)), meta={"name": "y"})
    mod = infer_type(IRModule({"main": Function((x,), y)}))
    out = partition(mod, {}, "c")
    assert regions_of(out) == ["c_0"]
    assert any(isinstance(n, Constant) for n in post_order(out["c_0"].body))
    assert not any(isinstance(n, Constant) for n in post_order(out.main.body))
    assert dict(out["c_0"].attrs) == {"piece": "c", "region": 1, "global_symbol": "c_0"}


def test_errors():
    mod, calls = _chain(["nn.relu", "negative"], ["/r", "/n"])
    with pytest.raises(PartitionError) as e:
        partition(mod, {calls[0]: "a"}, CT)
    assert str(e.value) == "placement across pieces: call negative (node '/n') has no piece"
    x = relay.var("x", (4,))
    v = relay.Var("v", None)
    body = relay.Let(v, relay.call("nn.relu", x), relay.call("negative", v))
    mod = infer_type(IRModule({"main": Function((x,), body)}))
    with pytest.raises(PartitionError) as e:
        partition(mod, {}, CT)
    assert str(e.value) == ("placement across pieces: main contains Let; only operator calls, tuples and constants "
                            "can be placed on several pieces (build for one piece)")


def test_a_claimed_group_stays_in_one_region():
    x = relay.var("x", (4,))
    r = relay.call("nn.relu", x, meta={"name": "r"})
    u = relay.call("multiply", x, x, meta={"name": "u"})
    w = relay.call("sigmoid", r, meta={"name": "w"})
    v = relay.call("add", u, w, meta={"name": "v"})
    mod = infer_type(IRModule({"main": Function((x,), v)}))
    pieces = {r: "m7", u: "m7", w: "a", v: "m7"}
    plain = partition(mod, pieces, CT)
    where = {c.meta["name"]: k for k in regions_of(plain) for c in _op_calls(plain[k].body)}
    assert where["u"] != where["v"]  # greedy grouping alone splits u from v (u joins r's region)
    out = partition(mod, pieces, CT, groups=[{u, v}])
    where = {c.meta["name"]: k for k in regions_of(out) for c in _op_calls(out[k].body)}
    assert where["u"] == where["v"] != where["r"]
    val = np.linspace(-2, 2, 4, dtype=np.float32)
    np.testing.assert_allclose(run(out, {"x": val}), run(mod, {"x": val}), rtol=1e-6)
