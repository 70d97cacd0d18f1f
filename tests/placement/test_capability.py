import pytest

from plait import relay
from plait.ir.attrs import Attrs
from plait.placement.capability import (
    ANY, NOTHING, attr_eq, attr_in, attr_where, decline_if_dtype, dtype_in, has_static_shape, op_is, piece_supports,
)
from plait.relay.infer import infer_expr
from plait.target import CompositeTarget, Target
from plait.target.testing import register_test_backend


def _conv(dtype="float32", groups=1):
    x = relay.var("x", (1, 4, 8, 8), dtype)
    w = relay.var("w", (4, 4 // groups, 3, 3), dtype)
    c = relay.call("nn.conv2d", x, w, groups=groups)
    infer_expr(c)
    return c


def _relu(dtype="float32"):
    c = relay.call("nn.relu", relay.var("x", (2, 3), dtype))
    infer_expr(c)
    return c


def test_leaf_predicates():
    conv, relu, relu8 = _conv(), _relu(), _relu("int8")
    assert op_is("nn.conv2d")(conv) and not op_is("nn.conv2d")(relu)
    assert op_is("nn.conv*", "nn.relu")(relu)
    assert dtype_in("float32")(conv) and not dtype_in("float32")(relu8)
    assert decline_if_dtype("int8")(conv) and not decline_if_dtype("int8")(relu8)
    assert attr_eq("groups", 1)(conv) and not attr_eq("groups", 4)(conv)
    assert attr_in("groups", [2, 4])(_conv(groups=4)) and not attr_in("groups", [2, 4])(conv)
    assert attr_where("groups", lambda g: g > 1)(_conv(groups=2))
    assert not attr_where("groups", lambda g: g > 1)(relu)  # no such attribute
    assert not attr_eq("groups", 1)(relu)
    assert has_static_shape()(conv)
    assert ANY(conv) and not NOTHING(conv)


def test_combinators_and_repr():
    p = op_is("nn.conv2d") & dtype_in("float32") & ~attr_eq("groups", 1)
    assert repr(p) == "(op_is('nn.conv2d') & dtype_in('float32') & ~attr_eq('groups', 1))"
    assert not p(_conv()) and p(_conv(groups=4)) and not p(_conv("float16", groups=4))
    q = op_is("nn.relu") | (op_is("nn.conv2d") & decline_if_dtype("float16"))
    assert repr(q) == "(op_is('nn.relu') | (op_is('nn.conv2d') & decline_if_dtype('float16')))"
    assert q(_relu("int8")) and q(_conv()) and not q(_conv("float16"))
    r = op_is("nn.relu") & (lambda c: c.meta.get("name") == "a")
    assert repr(r) == "(op_is('nn.relu') & <lambda>)"
    assert not r(_relu())


def test_default_lowering_kind_answers_from_te_computes():
    ans = piece_supports(Target("c"), _conv())
    assert ans.ok and ans.reason == "default lowering: 'nn.conv2d' has a TE compute"
    ct = CompositeTarget("low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f")
    assert all(piece_supports(p, _relu()).ok for p in ct)


def test_supports_hook_is_asked_first():
    register_test_backend("test_place_npu", can_host=False, supports=lambda call, target: (op_is("nn.conv2d") & dtype_in("float16"))(call))
    t = Target("test_place_npu")
    assert piece_supports(t, _conv("float16")).ok
    ans = piece_supports(t, _conv())
    assert not ans.ok and ans.reason == "the 'supports' hook of target kind 'test_place_npu' says no"


def test_external_codegen_kind_without_supports_claims_nothing():
    register_test_backend("test_place_ext", can_host=False, relay_to_runtime=lambda func, target: None)
    ans = piece_supports(Target("test_place_ext"), _relu())
    assert not ans.ok
    assert ans.reason == "target kind 'test_place_ext' has its own code generation and no 'supports' hook"
