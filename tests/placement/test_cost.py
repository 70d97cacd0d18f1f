import json

import pytest

from plait import relay
from plait.placement.cost import (
    CostDatabase, CostError, CostModel, DEFAULT_SWITCH_S, Estimate, objective_value, signature, type_bytes,
)
from plait.relay.infer import infer_expr
from plait.target import CompositeTarget, Target
from plait.target.testing import register_test_backend

CT = CompositeTarget("low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f")


def _dense():
    c = relay.call("nn.dense", relay.var("x", (1, 64)), relay.var("w", (16, 64)))
    infer_expr(c)
    return c


def test_signature_and_bytes():
    c = _dense()
    assert signature(c) == "nn.dense(Tensor[(1, 64), float32], Tensor[(16, 64), float32])"
    s = relay.call("nn.softmax", relay.var("x", (2, 3)), axis=0)
    infer_expr(s)
    assert signature(s) == "nn.softmax(Tensor[(2, 3), float32]) {axis=0}"
    assert type_bytes(c.checked_type) == 16 * 4


@pytest.mark.parametrize("use_schedule,source", [(True, "schedule"), (False, "roofline")])
def test_soft_float_m0_is_much_slower_than_m7f(use_schedule, source):
    cm = CostModel(use_schedule=use_schedule)
    m0, m7 = (cm.call_cost(_dense(), p) for p in CT)
    assert m0.source == m7.source == source
    assert m0.seconds > 50 * m7.seconds  # 60x soft-float instructions and a 13.5x slower clock
    # energy = latency x power_mw of the tag (13.2 mW and 330 mW)
    assert m0.joules == pytest.approx(m0.seconds * 13.2e-3)
    assert m7.joules == pytest.approx(m7.seconds * 330e-3)


def test_database_overrides_and_is_keyed_by_target(tmp_path):
    c = _dense()
    p = tmp_path / "db.json"
    p.write_text(json.dumps({"entries": [
        {"op": signature(c), "target": str(CT["inference_cpu"]), "seconds": 1e-3, "joules": 2e-4}]}))
    cm = CostModel(CostDatabase.load(p))
    assert cm.call_cost(c, CT.piece("inference_cpu")) == Estimate(1e-3, 2e-4, "measured", "the cost database")
    assert cm.call_cost(c, CT.piece("low_power_cpu")).source == "schedule"


def test_database_extra_fields_and_calibration_round_trip(tmp_path):
    c = _dense()
    m7, m0 = str(CT["inference_cpu"]), str(CT["low_power_cpu"])
    db = CostDatabase()
    db.add("other(op)", m7, 2e-3, instructions=1000.0, source="measured qemu", board="mps2-an500")
    db.set_factor(m0, "nn.dense", 0.5)
    db.set_factor(m0, "*", 3.0)
    db.save(tmp_path / "db.json")
    again = CostDatabase.load(tmp_path / "db.json")
    assert again.to_dict() == db.to_dict() == {
        "entries": [{"op": "other(op)", "target": m7, "seconds": 2e-3, "instructions": 1000.0,
                     "source": "measured qemu", "board": "mps2-an500"}],
        "calibration": [{"target": m0, "op": "*", "factor": 3.0}, {"target": m0, "op": "nn.dense", "factor": 0.5}]}
    plain, cal = CostModel().call_cost(c, CT.piece("low_power_cpu")), CostModel(again).call_cost(c, CT.piece("low_power_cpu"))
    assert cal.seconds == pytest.approx(0.5 * plain.seconds) and cal.joules == pytest.approx(0.5 * plain.joules)
    assert cal.source == plain.source and cal.detail == plain.detail + "; calibrated x0.5 (measured)"
    assert CostModel(again).call_cost(c, CT.piece("inference_cpu")) == CostModel().call_cost(c, CT.piece("inference_cpu"))
    # an entry with instructions says so
    db.add(signature(c), m7, 1e-3, instructions=1234.0, source="measured qemu", board="mps2-an500")
    assert CostModel(db).call_cost(c, CT.piece("inference_cpu")).detail == \
        "measured qemu: 1,234 instructions on mps2-an500"


@pytest.mark.parametrize("data,msg", [
    ([], "cost database: expected an object with a list 'entries'"),
    ({"entries": [], "calibration": [{"target": "c", "op": "*", "factor": 0}]},
     "cost database: calibration 0 needs 'target' and 'op' strings and 'factor' > 0"),
    ({"entries": [{"op": "x", "target": "c"}]},
     "cost database: entry 0 needs 'op' and 'target' strings and 'seconds' >= 0"),
    ({"entries": [{"op": "x", "target": "c", "seconds": -1}]},
     "cost database: entry 0 needs 'op' and 'target' strings and 'seconds' >= 0"),
])
def test_database_errors(data, msg):
    with pytest.raises(CostError) as e:
        CostDatabase.from_dict(data)
    assert str(e.value) == msg


def test_cost_hook_is_used():
    register_test_backend("test_cost_acc", can_host=False, cost=lambda call, target: 5e-6 if call.op_name == "nn.dense" else None)
    e = CostModel().call_cost(_dense(), Target("test_cost_acc"))
    assert (e.seconds, e.source) == (5e-6, "hook")


def test_transfer_and_objectives():
    cm = CostModel(link_bytes_per_s=1e6, switch_s=1e-5)
    a, b = CT
    assert cm.transfer_cost(1000, a, a) == Estimate(0.0, 0.0, "transfer", "same piece")
    t = cm.transfer_cost(1000, a, b)
    assert t.seconds == pytest.approx(1e-3 + 1e-5)
    assert t.joules == pytest.approx(t.seconds * (13.2 + 330) * 1e-3)
    assert CostModel().transfer_cost(0, a, b).seconds == DEFAULT_SWITCH_S
    assert objective_value(2e-6, 3e-3, "latency") == 2e-6
    assert objective_value(2e-6, 3e-3, "energy") == 3e-3
    assert objective_value(2e-6, 3e-3, "weighted", 0.5) == pytest.approx(0.5 * 2 + 0.5 * 3)
    with pytest.raises(CostError, match="unknown objective 'speed': expected latency, energy or weighted"):
        objective_value(1, 1, "speed")


def test_group_cost_and_database_file_errors(tmp_path):
    cm = CostModel(use_schedule=False)
    d, m7 = _dense(), CT.piece("inference_cpu")
    one = cm.call_cost(d, m7)
    g = cm.group_cost([d, d], m7)
    assert (g.seconds, g.joules, g.source) == (2 * one.seconds, 2 * one.joules, "roofline")
    with pytest.raises(CostError, match=r"^cost database '.*missing\.json': \[Errno 2\] No such file"):
        CostDatabase.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(CostError, match=r"^cost database '.*bad\.json': Expecting property name"):
        CostDatabase.load(tmp_path / "bad.json")
