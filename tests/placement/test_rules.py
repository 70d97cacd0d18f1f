import pytest

from plait import relay
from plait.placement.rules import PlacementError, Pin, Rule, on_target, parse_place, pins_for
from plait.relay.expr import Function
from plait.relay.infer import infer_expr
from plait.target import CompositeTarget, Target
from plait.target.testing import register_test_backend
from plait.placement.capability import op_is

CT = CompositeTarget("low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f")


@pytest.mark.parametrize("text,msg", [
    ("", "--place: empty rule list; expected PATTERN=PIECE[,PATTERN=PIECE...]"),
    ("   ", "--place: empty rule list; expected PATTERN=PIECE[,PATTERN=PIECE...]"),
    ("Conv=inference_cpu,,Relu=low_power_cpu",
     "--place: rule 2 of 'Conv=inference_cpu,,Relu=low_power_cpu' is empty"),
    ("Conv", "--place: rule 'Conv' has no '=': expected PATTERN=PIECE or PATTERN=PIECE?"),
    ("a=b=c", "--place: rule 'a=b=c' has more than one '=': expected PATTERN=PIECE"),
    ("=inference_cpu", "--place: rule '=inference_cpu' has an empty pattern"),
    ("Conv=", "--place: rule 'Conv=' names no piece"),
    ("Conv=?", "--place: rule 'Conv=?' names no piece"),
    ("Conv=inference_cp", "--place: rule 'Conv=inference_cp': unknown piece 'inference_cp'; did you mean "
                          "'inference_cpu'? (pieces: low_power_cpu, inference_cpu)"),
    ("Conv=gpu", "--place: rule 'Conv=gpu': unknown piece 'gpu' (pieces: low_power_cpu, inference_cpu)"),
])
def test_malformed_rules(text, msg):
    with pytest.raises(PlacementError) as e:
        parse_place(text, CT)
    assert str(e.value) == msg


def test_parse_ok():
    rules = parse_place(" Conv = inference_cpu , /head/*=low_power_cpu,*=low_power_cpu? ", CT)
    assert rules == (Rule("Conv", "inference_cpu"), Rule("/head/*", "low_power_cpu"),
                     Rule("*", "low_power_cpu", True))
    assert str(rules[2]) == "*=low_power_cpu?"
    assert parse_place("x=anything") == (Rule("x", "anything"),)  # no target: pieces unchecked


def _graph():
    x = relay.var("x", (1, 4, 8, 8))
    c = relay.call("nn.conv2d", x, relay.var("w", (4, 4, 3, 3)), padding=(1, 1, 1, 1),
                   meta={"name": "/block0/Conv", "op_type": "Conv"})
    r = relay.call("nn.relu", c, meta={"name": "/head/Relu", "op_type": "Relu"})
    s = relay.call("sigmoid", r)
    f = Function((x,) + tuple(v for v in (c.args[1],)), s)
    return f, c, r, s


def test_rules_match_node_name_op_type_and_plait_op_first_wins():
    f, c, r, s = _graph()
    pins = pins_for(f, CT, parse_place("Conv=inference_cpu,/head/*=low_power_cpu,*=inference_cpu", CT))
    assert pins[c] == Pin("inference_cpu", False, "--place rule 'Conv=inference_cpu'")
    assert pins[r] == Pin("low_power_cpu", False, "--place rule '/head/*=low_power_cpu'")
    assert pins[s] == Pin("inference_cpu", False, "--place rule '*=inference_cpu'")
    pins = pins_for(f, CT, parse_place("nn.relu=inference_cpu?", CT))
    assert list(pins.values()) == [Pin("inference_cpu", True, "--place rule 'nn.relu=inference_cpu?'")]
    assert pins_for(f, CT, parse_place("conv=inference_cpu", CT)) == {}  # case-sensitive


def test_on_target_and_function_attribute():
    f, c, r, s = _graph()
    c2 = on_target(c, "low_power_cpu")
    assert c2.meta["target"] == "low_power_cpu" and c2.meta["name"] == "/block0/Conv" and c2.op is c.op
    r2 = relay.call("nn.relu", c2)
    f2 = Function(f.params, r2, attrs={"target": "inference_cpu"})
    pins = pins_for(f2, CT, parse_place("*=low_power_cpu", CT))
    assert pins[c2] == Pin("low_power_cpu", False, "on_target('low_power_cpu')")
    assert pins[r2] == Pin("inference_cpu", False, "function attribute target='inference_cpu'")
    with pytest.raises(PlacementError) as e:
        pins_for(Function(f.params, on_target(c, "npu")), CT)
    assert str(e.value) == ("on_target of call '/block0/Conv' (nn.conv2d): unknown piece 'npu' "
                            "(pieces: low_power_cpu, inference_cpu)")
    with pytest.raises(PlacementError) as e:
        pins_for(Function(f.params, c, attrs={"target": "inference"}), CT)
    assert str(e.value) == ("function attribute target: unknown piece 'inference'; did you mean "
                            "'inference_cpu'? (pieces: low_power_cpu, inference_cpu)")
    with pytest.raises(PlacementError, match="expected a call, got Var"):
        on_target(relay.var("x"), "a")


def test_pin_to_incapable_piece_names_call_op_and_piece():
    register_test_backend("test_rules_npu", can_host=False, supports=lambda call, target: op_is("nn.conv2d")(call))
    ct = CompositeTarget("cpu: c; npu: test_rules_npu")
    f, c, r, s = _graph()
    infer_expr(f)
    pins = pins_for(f, ct, parse_place("*=npu?", ct))
    assert pins == {c: Pin("npu", True, "--place rule '*=npu?'")}  # preferences fall back silently
    with pytest.raises(PlacementError) as e:
        pins_for(f, ct, parse_place("/head/*=npu", ct))
    assert str(e.value) == ("call '/head/Relu' (nn.relu) is pinned to piece 'npu' by --place rule "
                            "'/head/*=npu', but that piece cannot run it: the 'supports' hook of target "
                            "kind 'test_rules_npu' says no")
