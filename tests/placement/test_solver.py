import numpy as np
import pytest

from plait import relay
from plait.errors import PlaitError
from plait.frontend.onnx import from_onnx
from plait.placement.capability import op_is
from plait.placement.cost import CostModel, Estimate
from plait.placement.rules import PlacementError, on_target, parse_place
from plait.placement.solver import place
from plait.relay.expr import Function
from plait.relay.infer import infer_expr, infer_type
from plait.target import CompositeTarget
from plait.target.testing import register_test_backend
from plait.testing.onnx_models import ds_cnn

SEED = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"
CT = CompositeTarget(SEED)


@pytest.fixture(scope="module")
def ds():
    return infer_type(from_onnx(ds_cnn()))["main"]


def test_ds_cnn_float_convs_go_to_m7f_by_latency(ds):
    a = place(ds, CT, "latency")
    assert a.method == "ilp" and a.exact
    convs = [p for p in a if p.call.op_name == "nn.conv2d"]
    assert len(convs) == 9
    for p in convs:
        assert p.piece == "inference_cpu" and p.reason == "cheapest"
        m0, m7 = p.alternatives["low_power_cpu"], p.alternatives["inference_cpu"]
        assert m0.seconds > 20 * m7.seconds and m7 is p.estimate
    # the weights live in flash: the M7F's 1 MiB, the M0's 256 KiB (datasheet values)
    assert a.memory["inference_cpu"][1] == 1024 * 1024 and a.memory["low_power_cpu"] == (0, 256 * 1024)
    assert a.weights_in == {"low_power_cpu": "flash", "inference_cpu": "flash"}
    assert a.seconds == pytest.approx(sum(p.estimate.seconds for p in a))  # no transfers
    assert a.total == pytest.approx(a.seconds)
    assert [p.piece for p in place(ds, CT, "latency")] == [p.piece for p in a]  # deterministic


def test_ds_cnn_pins_rules_and_memory(ds):
    rules = parse_place("/fc/*=low_power_cpu,/pool/*=low_power_cpu?", CT)
    a = place(ds, CT, "latency", rules)
    by_name = {(p.call.meta.get("name"), p.call.op_name): p for p in a}
    assert by_name["/fc/Gemm", "nn.dense"].piece == "low_power_cpu"
    assert by_name["/fc/Gemm", "nn.dense"].reason == "pinned by --place rule '/fc/*=low_power_cpu'"
    pool = by_name["/pool/GlobalAveragePool", "nn.global_avg_pool2d"]
    assert (pool.piece, pool.reason) == ("low_power_cpu", "preferred by --place rule '/pool/*=low_power_cpu?'")
    assert a.transfer_seconds > 0 and a.memory["low_power_cpu"][0] == 12 * 64 * 4 + 12 * 4
    # an M0 with 16 KiB of flash: the pointwise conv's weights (64x64x4 = 16 KiB) just fit, not with the
    # depthwise conv (2304)
    small = CompositeTarget("low_power_cpu: c -mcpu=cortex-m0 -flash-kb=16; inference_cpu: c -mcpu=cortex-m7f")
    a = place(ds, small, "latency", parse_place("/block0/pw/Conv=low_power_cpu", small))
    assert a.memory["low_power_cpu"] == (16384, 16384)
    with pytest.raises(PlacementError) as e:
        place(ds, small, "latency", parse_place("/block0/*=low_power_cpu", small))
    assert str(e.value) == ("piece 'low_power_cpu' (c -mcpu=cortex-m0 -flash-kb=16): the weights of the 2 calls "
                            "pinned to it need 18,688 bytes of flash, more than its 16,384 bytes")


def _chain(n=3):
    x = relay.var("x", (1, 256))
    y, calls = x, []
    for k in range(n):
        y = relay.call("nn.relu", y, meta={"name": f"r{k}"})
        calls.append(y)
    f = Function((x,), y)
    infer_expr(f)
    return f, calls


class FixedCosts(CostModel):
    """Hand-set costs: table[(call name, piece)] seconds."""

    def __init__(self, table, **kw):
        super().__init__(**kw)
        self.table = table

    def call_cost(self, call, piece):
        s = self.table[call.meta["name"], piece.name]
        return Estimate(s, s, "test")


def test_hand_made_chain_transfers_and_reasons():
    f, calls = _chain()
    ct = CompositeTarget("a: c; b: c")
    table = {("r0", "a"): 1.0, ("r0", "b"): 9.0, ("r1", "a"): 2.0, ("r1", "b"): 1.9, ("r2", "a"): 1.0,
             ("r2", "b"): 9.0}
    a = place(f, ct, "latency", cost_model=FixedCosts(table, link_bytes_per_s=1e6, switch_s=0.1))
    assert [p.piece for p in a] == ["a", "a", "a"]
    assert a[calls[1]].reason == "transfers ('b' is cheaper alone, moving data costs more)"
    assert a.total == pytest.approx(4.0)
    cheap = FixedCosts(table, link_bytes_per_s=1e12, switch_s=0.0)
    a = place(f, ct, "latency", cost_model=cheap)
    assert [p.piece for p in a] == ["a", "b", "a"] and a[calls[1]].reason == "cheapest"
    assert a.transfer_seconds == pytest.approx(2 * 1024 / 1e12)
    g = place(f, ct, "latency", cost_model=cheap, exact=False)
    assert (g.method, g.exact) == ("greedy", False) and [p.piece for p in g] == ["a", "b", "a"]


def test_on_target_pin_wins_over_cost():
    f, calls = _chain(2)
    r1 = on_target(relay.call("nn.relu", calls[0], meta={"name": "r1"}), "b")
    f2 = Function(f.params, r1)
    infer_expr(f2)
    table = {("r0", "a"): 1.0, ("r0", "b"): 9.0, ("r1", "a"): 1.0, ("r1", "b"): 9.0}
    a = place(f2, CompositeTarget("a: c; b: c"), "latency", cost_model=FixedCosts(table))
    assert [p.piece for p in a] == ["a", "b"] and a[r1].reason == "pinned by on_target('b')"


def test_call_no_piece_can_run_is_named():
    register_test_backend("test_solver_npu", can_host=False, supports=lambda call, target: op_is("nn.conv2d")(call))
    f, calls = _chain(1)
    with pytest.raises(PlacementError) as e:
        place(f, CompositeTarget("npu: test_solver_npu"))
    assert str(e.value) == ("no piece can run call 'r0' (nn.relu): npu: the 'supports' hook of target kind "
                            "'test_solver_npu' says no")
    a = place(f, CompositeTarget("cpu: c; npu: test_solver_npu"))
    assert a[calls[0]].reason == "only capable"
    assert a[calls[0]].alternatives["npu"] == "the 'supports' hook of target kind 'test_solver_npu' says no"


def test_memory_capacity_respected_and_infeasible_message():
    x = relay.var("x", (1, 1024))
    w = relay.const(np.zeros((1024, 1024), np.float32))  # 4 MiB of weights
    d = relay.call("nn.dense", x, w, meta={"name": "fc"})
    f = Function((x,), d)
    infer_expr(f)
    with pytest.raises(PlacementError) as e:
        place(f, CT)
    assert str(e.value) == ("call 'fc' (nn.dense): its weights need 4,194,304 bytes, more than any piece that can "
                            "run it holds ('low_power_cpu' 262,144 bytes of flash, 'inference_cpu' 1,048,576 bytes "
                            "of flash)")
    # two 200 KiB layers on parts with 320 and 192 KiB of flash: each fits the M7 alone, not both; the
    # cheaper-per-call M7 takes one
    x = relay.var("x", (1, 256))
    w1 = relay.const(np.zeros((200, 256), np.float32))
    w2 = relay.const(np.zeros((200, 200), np.float32))
    d1 = relay.call("nn.dense", x, w1, meta={"name": "fc1"})
    d2 = relay.call("nn.dense", d1, w2, meta={"name": "fc2"})
    f = Function((x,), d2)
    infer_expr(f)
    ct = CompositeTarget("m7: c -mcpu=cortex-m7f -flash-kb=320; m4: c -mcpu=cortex-m4f -flash-kb=192")
    a = place(f, ct)
    assert sorted(p.piece for p in a) == ["m4", "m7"]
    assert all(used <= cap for used, cap in a.memory.values())
    assert any(p.reason.startswith("memory ('m7' is cheaper but full)") for p in a)
    with pytest.raises(PlacementError) as e:
        place(f, CompositeTarget("m7: c -mcpu=cortex-m7f -flash-kb=320"))
    assert str(e.value) == ("piece 'm7' (c -mcpu=cortex-m7f -flash-kb=320): the weights of the 2 calls that cannot "
                            "go to another piece need 364,800 bytes of flash, more than its 327,680 bytes")
    with pytest.raises(PlacementError) as e:  # pinned: only the pinned piece is considered
        place(f, ct, rules=parse_place("fc1=m4", ct))
    assert str(e.value) == ("piece 'm4' (c -mcpu=cortex-m4f -flash-kb=192): the weights of call 'fc1' (nn.dense) "
                            "need 204,800 bytes of flash, more than its 196,608 bytes")
    with pytest.raises(PlacementError) as e:
        place(f, ct, rules=parse_place("*=m7", ct))
    assert str(e.value) == ("piece 'm7' (c -mcpu=cortex-m7f -flash-kb=320): the weights of the 2 calls pinned to it "
                            "need 364,800 bytes of flash, more than its 327,680 bytes")
    # the solver's own infeasibility: every call fits somewhere alone, the pieces cannot hold them together
    three = [relay.call("nn.dense", x, relay.const(np.zeros((100, 256), np.float32)), meta={"name": f"d{k}"})
             for k in range(3)]
    g = Function((x,), relay.call("concatenate", *three, axis=1))
    infer_expr(g)
    two = CompositeTarget("p: c -mcpu=cortex-m7f -flash-kb=150; q: c -mcpu=cortex-m4f -flash-kb=150")
    with pytest.raises(PlacementError) as e:
        place(g, two)
    assert str(e.value) == ("cannot place the 4 calls within the pieces' memory: their weights need 307,200 bytes; "
                            "capacities p: 153,600 bytes of flash, q: 153,600 bytes of flash")


def test_unknown_objective():
    f, _ = _chain(1)
    with pytest.raises(PlaitError, match="unknown objective 'fast': expected latency, energy or weighted"):
        place(f, CT, "fast")
