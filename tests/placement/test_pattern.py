"""PatternRegion patterns: matching semantics, malformed patterns, regions (single output, convex, greedy), the
'patterns' hook, and placement with claimed regions (equality of pieces, region cost, pins, brute force)."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from plait import relay
from plait.placement.cost import CostModel, Estimate
from plait.placement.pattern import PatternError, is_constant, is_op, match, optional, wildcard
from plait.placement.regions import PatternRegion, claim_regions, find_regions, is_convex
from plait.placement.rules import PlacementError, parse_place
from plait.placement.solver import place
from plait.relay.expr import Function, Tuple
from plait.relay.infer import infer_expr
from plait.target import KINDS, CompositeTarget
from plait.target.testing import register_test_backend
from plait.target.errors import HookError


def _f(params, body):
    f = Function(tuple(params), body)
    infer_expr(f)
    return f


def _cbr(name="", relu=True, bias=True, groups=1, dtype="float32"):
    """conv2d(x, W) [+ bias] [relu] on a (1, 4, 8, 8) input."""
    x = relay.var("x", (1, 4, 8, 8), dtype)
    w = relay.const(np.ones((4, 4 // groups, 3, 3), dtype))
    y = relay.call("nn.conv2d", x, w, groups=groups, padding=(1, 1, 1, 1), meta={"name": name + "conv"})
    if bias:
        y = relay.call("add", y, relay.const(np.zeros((1, 4, 1, 1), dtype)), meta={"name": name + "bias"})
    if relu:
        y = relay.call("nn.relu", y, meta={"name": name + "relu"})
    return x, y


CONV = is_op("nn.conv2d")(wildcard(), is_constant())
CBR = CONV.optional(lambda x: is_op("add")(x, is_constant())).optional(lambda x: is_op("nn.relu")(x))


def _names(calls):
    return [c.meta["name"] for c in calls]


# ---- matching ---------------------------------------------------------------------------------------


def test_op_wildcard_constant_and_optional_steps():
    for bias, relu, want in [(True, True, ["conv", "bias", "relu"]), (True, False, ["conv", "bias"]),
                             (False, True, ["conv", "relu"]), (False, False, ["conv"])]:
        x, y = _cbr(bias=bias, relu=relu)
        _f([x], y)
        m = match(CBR, y)
        assert _names(m.calls) == want and m.root is y
        assert m[CONV] is m.calls[0]
    x, y = _cbr(relu=False)
    _f([x], y)
    assert match(is_op("nn.relu"), y) is None
    assert match(is_op("nn.conv2d")(is_constant(), wildcard()), y.args[0]) is None  # argument order
    assert match(is_op("add", "nn.relu")(wildcard()), y) is None  # argument count
    assert _names(match(is_op("add"), y).calls) == ["bias"]  # no argument patterns: any arguments
    assert _names(match(is_op("a?d", "nn.*"), y).calls) == ["bias"]  # globs


def test_alternatives_take_the_larger_match_then_the_left_one():
    x, y = _cbr()
    _f([x], y)
    small = is_op("nn.relu")(wildcard())
    big = is_op("nn.relu")(is_op("add")(wildcard(), wildcard()))
    assert _names(match(small | big, y).calls) == ["bias", "relu"]
    left, right = is_op("nn.relu"), is_op("nn.*")
    m = match(left | right, y)
    assert m[left] is y
    with pytest.raises(PatternError, match=r"^is_op\('nn\.\*'\) is not part of this match"):
        m[right]


def test_has_attr_and_has_dtype():
    x, y = _cbr(relu=False, bias=False, groups=4)
    _f([x], y)
    assert match(CONV.has_attr(groups=4), y) is not None
    assert match(CONV.has_attr({"groups": 1}), y) is None
    assert match(CONV.has_attr(padding=[1, 1, 1, 1]), y) is not None  # lists compare as tuples
    assert match(CONV.has_dtype("float16", "float32"), y) is not None
    assert match(CONV.has_dtype("int8"), y) is None
    assert match(is_op("nn.conv2d")(wildcard().has_dtype("int8"), wildcard()), y) is None
    assert match(is_op("nn.*").has_attr(groups=4), y) is not None
    with pytest.raises(PatternError) as e:
        match(is_op("nn.conv2d").has_dtype("float32"), relay.call("nn.conv2d", x, x))  # untyped
    assert str(e.value) == ("is_op('nn.conv2d').has_dtype('float32'): the expression Call(nn.conv2d) has no type; "
                            "run plait.relay.infer_type first")


def test_same_pattern_object_matches_the_same_expression():
    a, b = relay.var("a", (4,)), relay.var("b", (4,))
    same = relay.call("add", a, a)
    diff = relay.call("add", a, b)
    _f([a, b], Tuple((same, diff)))
    v = wildcard()
    p = is_op("add")(v, v)
    assert match(p, same) is not None and match(p, diff) is None
    assert match(p, same)[v] is a


def test_repr_reads_like_the_expression():
    assert repr(CBR) == ("is_op('nn.conv2d')(wildcard(), is_constant()).optional(lambda x: is_op('add')(x, "
                         "is_constant())).optional(lambda x: is_op('nn.relu')(x))")
    assert repr(is_op("nn.relu") | is_op("sigmoid", "tanh").has_dtype("float32")) == \
        "(is_op('nn.relu') | is_op('sigmoid', 'tanh').has_dtype('float32'))"
    assert repr(CONV.has_attr(groups=1)) == "is_op('nn.conv2d')(wildcard(), is_constant()).has_attr(groups=1)"


@pytest.mark.parametrize("build, msg", [
    (lambda: is_op(), "is_op: expected at least one operator name or glob"),
    (lambda: is_op(""), "is_op: empty operator name"),
    (lambda: is_op(3), "is_op: expected operator names or globs (str), got 3 (int)"),
    (lambda: is_op("nn.conv"), "is_op: unknown operator 'nn.conv'; did you mean 'nn.conv2d' or 'qnn.conv2d' or 'nn.lrn'?"),
    (lambda: is_op("nn.foo*"), "is_op: the glob 'nn.foo*' matches no operator"),
    (lambda: is_op("nn.relu")(wildcard(), wildcard()),
     "is_op('nn.relu') applied to 2 arguments: operator 'nn.relu' takes 1"),
    (lambda: is_op("nn.relu", "sigmoid")(), "is_op('nn.relu', 'sigmoid') applied to 0 arguments: no operator it "
     "matches takes 0"),
    (lambda: is_op("nn.relu")(1), "is_op('nn.relu'): argument 1 is 1 (int), not a pattern"),
    (lambda: is_op("nn.relu")(wildcard())(wildcard()), "is_op('nn.relu')(wildcard()) already has argument patterns"),
    (lambda: wildcard()(wildcard()), "wildcard() takes no argument patterns: only is_op(...) is applied to arguments"),
    (lambda: wildcard() | "x", "cannot combine wildcard() with 'x' (str): not a pattern"),
    (lambda: 3 | wildcard(), "cannot combine 3 (int) with wildcard(): not a pattern"),
    (lambda: wildcard().has_attr(groups=1), "wildcard().has_attr: wildcard() can match any expression; attributes "
     "are checked on is_op(...) patterns"),
    (lambda: (is_op("nn.relu") | wildcard()).has_attr(a=1), "(is_op('nn.relu') | wildcard()).has_attr: "
     "(is_op('nn.relu') | wildcard()) can match any expression; attributes are checked on is_op(...) patterns"),
    (lambda: is_op("nn.conv2d").has_attr(), "is_op('nn.conv2d').has_attr: no attribute given"),
    (lambda: is_op("nn.conv2d").has_attr(group=1),
     "is_op('nn.conv2d').has_attr: operator 'nn.conv2d' has no attribute 'group'; did you mean 'groups'?"),
    (lambda: is_op("nn.*pool2d").has_attr(axis=1),
     "is_op('nn.*pool2d').has_attr: no operator matched by is_op('nn.*pool2d') has an attribute 'axis'"),
    (lambda: is_op("nn.conv2d").has_attr(groups=object),
     "is_op('nn.conv2d').has_attr: attribute 'groups': unsupported attribute value <class 'object'> of type type"),
    (lambda: wildcard().has_dtype(), "wildcard().has_dtype: no dtype given"),
    (lambda: wildcard().has_dtype("flaot32"), "wildcard().has_dtype: unknown dtype 'flaot32'; did you mean 'float32'?"),
    (lambda: optional(3, lambda x: x), "optional: expected a pattern, got 3 (int)"),
    (lambda: CONV.optional(is_op("nn.relu")), "is_op('nn.conv2d')(wildcard(), is_constant()).optional: expected a "
     "function of one pattern (lambda x: is_op(...)(x)), got is_op('nn.relu')"),
    (lambda: CONV.optional(lambda x: 3), "is_op('nn.conv2d')(wildcard(), is_constant()).optional: the step "
     "returned 3 (int), not a pattern"),
    (lambda: CONV.optional(lambda x: x), "is_op('nn.conv2d')(wildcard(), is_constant()).optional: the step "
     "returned its argument unchanged"),
    (lambda: CONV.optional(lambda x: is_op("nn.relu")(wildcard())), "is_op('nn.conv2d')(wildcard(), "
     "is_constant()).optional: the step's pattern is_op('nn.relu')(wildcard()) does not use its argument"),
    (lambda: match(3, relay.var("x")), "match: expected a pattern, got 3 (int)"),
    (lambda: match(wildcard(), 3), "match: expected a Relay expression, got 3 (int)"),
    (lambda: find_regions(wildcard(), Function((), relay.const(1.0))),
     "find_regions: pattern wildcard() is not rooted at an operator call (is_op(...))"),
    (lambda: find_regions([("a", is_op("nn.relu")), ("b", is_op("add") | wildcard())], Function((), relay.const(1.0))),
     "find_regions: pattern 'b' ((is_op('add') | wildcard())) is not rooted at an operator call (is_op(...))"),
    (lambda: find_regions([("a", 3)], Function((), relay.const(1.0))),
     "find_regions: item 1 is ('a', 3); expected a (name, pattern) pair"),
    (lambda: find_regions(3, Function((), relay.const(1.0))),
     "find_regions: expected a pattern or a list of (name, pattern) pairs, got 3"),
])
def test_malformed_patterns(build, msg):
    with pytest.raises(PatternError) as e:
        build()
    assert str(e.value) == msg


# ---- regions ----------------------------------------------------------------------------------------


def test_region_inputs_output_and_constants():
    x, y = _cbr()
    f = _f([x], y)
    (r,) = find_regions(CBR, f)
    assert _names(r.calls) == ["conv", "bias", "relu"] and r.output is y and r.inputs == (x,) and r.name is None
    assert y in r and x not in r and len(r) == 3
    a, b = relay.var("a", (4,)), relay.var("b", (4,))
    s = relay.call("add", a, b, meta={"name": "s"})
    m = relay.call("multiply", s, a, meta={"name": "m"})
    (r,) = find_regions([("sm", is_op("multiply")(is_op("add"), wildcard()))], _f([a, b], m))
    assert r.name == "sm" and r.inputs == (a, b) and _names(r.calls) == ["s", "m"]


def test_an_inner_value_used_outside_is_not_a_region():
    x, y = _cbr(relu=False)  # the bias add is also the function's second result
    r = relay.call("nn.relu", y, meta={"name": "relu"})
    f = _f([x], Tuple((r, y)))
    assert [_names(r.calls) for r in find_regions(CBR, f)] == [["conv", "bias"]]  # relu alone is no CBR
    s = relay.call("sigmoid", y, meta={"name": "sig"})  # the add feeds relu and sigmoid
    f = _f([x], Tuple((r, s)))
    assert [_names(r.calls) for r in find_regions(CBR, f)] == [["conv", "bias"]]


def test_convexity():
    # a -> b -> c and a -> c: {a, c} is left through b and re-entered; {a, b, c} and {b, c} are convex
    x = relay.var("x", (4,))
    a = relay.call("nn.relu", x, meta={"name": "a"})
    b = relay.call("sigmoid", a, meta={"name": "b"})
    c = relay.call("add", a, b, meta={"name": "c"})
    f = _f([x], c)
    assert not is_convex([a, c], f)
    assert is_convex([a, b, c], f) and is_convex([b, c], f) and is_convex([a], f) and is_convex([], f)
    # a region never includes a: its value also leaves through b
    regions = find_regions(is_op("add")(is_op("nn.relu"), wildcard()), f)
    assert regions == []
    regions = find_regions(is_op("add")(wildcard(), is_op("sigmoid")(wildcard())), f)
    assert [_names(r.calls) for r in regions] == [["b", "c"]] and regions[0].inputs == (a,)


def test_greedy_largest_first_non_overlapping_deterministic():
    x = relay.var("x", (4,))
    y, calls = x, []
    for k in range(5):
        y = relay.call("nn.relu", y, meta={"name": f"r{k}"})
        calls.append(y)
    f = _f([x], y)
    two = is_op("nn.relu")(is_op("nn.relu"))
    three = is_op("nn.relu")(two)
    # every chain of 3 is a candidate; largest first, then the earliest output: r0-r2, then r3-r4 (a pair)
    got = find_regions([("two", two), ("three", three)], f)
    assert [(r.name, _names(r.calls)) for r in got] == [("three", ["r0", "r1", "r2"]), ("two", ["r3", "r4"])]
    assert [(r.name, _names(r.calls)) for r in find_regions([("two", two), ("three", three)], f)] == \
        [(r.name, _names(r.calls)) for r in got]
    # equal sizes: the earlier pattern wins
    got = find_regions([("a", two), ("b", is_op("nn.relu")(is_op("nn.*")))], f)
    assert [(r.name, _names(r.calls)) for r in got] == [("a", ["r0", "r1"]), ("a", ["r2", "r3"])]


# ---- the 'patterns' hook ----------------------------------------------------------------------------


def test_patterns_hook_signatures_and_errors():
    register_test_backend("pat_npu", can_host=False,
                          patterns=lambda target: [("cbr", CBR)] if "pat_npu" in str(target) else [])
    x, y = _cbr()
    f = _f([x], y)
    (r,) = claim_regions(f, list(CompositeTarget("cpu: c; npu: pat_npu")))
    assert r.claims == (("npu", "cbr"),) and r.name == "cbr"
    for bad, msg in [
        (lambda target: 3, "returned 3 (int); expected a list of (name, Pattern) pairs"),
        (lambda target: [("x", 1)], "returned ('x', 1) as item 1; expected a (name, Pattern) pair"),
        (lambda target: [("x", CONV), ("x", CBR)], "returned two patterns named 'x'"),
        (lambda target: [("w", wildcard())], "returned pattern 'w' (wildcard()), which is not rooted at an operator call "
         "(is_op(...))"),
        (lambda target: [("boom", is_op("nn.nope"))], None),
    ]:
        saved = KINDS.snapshot()
        register_test_backend("pat_bad", can_host=False, patterns=bad)
        ct = CompositeTarget("cpu: c; bad: pat_bad")
        if msg is None:  # a PatternError raised inside the hook is reported as it is
            with pytest.raises(PatternError, match="^is_op: unknown operator 'nn.nope'"):
                claim_regions(f, list(ct))
        else:
            with pytest.raises(HookError) as e:
                claim_regions(f, list(ct))
            assert str(e.value) == "hook 'patterns' of target kind 'pat_bad' on piece 'bad' " + msg
        KINDS.restore(saved)
    with pytest.raises(HookError) as e:
        register_test_backend("pat_two", patterns=lambda a, b: [])
    assert str(e.value) == ("hook 'patterns' of target kind 'pat_two' must be (target) -> list of (name, Pattern); "
                            "got <lambda>(a, b)")


# ---- placement with regions -------------------------------------------------------------------------


def _npu(region_seconds=1e-9, name="npu"):
    """A kind that runs nothing alone, claims conv [+ bias] [+ relu] and prices a region as a whole."""
    register_test_backend(name, can_host=False, supports=lambda call, target: False, patterns=lambda target: [("cbr", CBR)], cost=lambda obj, target: region_seconds if isinstance(obj, PatternRegion) else None)


def _two_layers():
    x, y = _cbr("l1/")
    w = relay.const(np.ones((4, 4, 3, 3), np.float32))
    c2 = relay.call("nn.conv2d", y, w, padding=(1, 1, 1, 1), meta={"name": "l2/conv"})
    s = relay.call("sigmoid", c2, meta={"name": "l2/sig"})
    return _f([x], s)


def test_claimed_region_runs_whole_on_the_claiming_piece():
    _npu()
    f = _two_layers()
    ct = CompositeTarget("cpu: c; npu: npu")
    cm = CostModel(use_schedule=False, link_bytes_per_s=1e12, switch_s=0.0)  # free transfers
    a = place(f, ct, cost_model=cm)
    got = [(p.call.meta["name"], p.piece, p.region) for p in a]
    assert got == [("l1/conv", "npu", "cbr"), ("l1/bias", "npu", "cbr"), ("l1/relu", "npu", "cbr"),
                   ("l2/conv", "npu", "cbr"), ("l2/sig", "cpu", None)]
    assert [(r.name, r.piece, _names(r.calls)) for r in a.regions] == [
        ("cbr", "npu", ["l1/conv", "l1/bias", "l1/relu"]), ("cbr", "npu", ["l2/conv"])]
    p = a[a.regions[0].output]
    assert p.reason == "region 'cbr': cheapest"
    assert (p.estimate.seconds, p.estimate.source) == (1e-9, "hook")
    assert p.estimate.detail == "the 'cost' hook of target kind 'npu' on region 'cbr' (3 calls)"
    inner = a[a.regions[0].calls[0]]
    assert (inner.estimate.seconds, inner.estimate.source) == (0.0, "region")
    assert a.region_of(a.regions[0].calls[1]) is a.regions[0] and a.region_of(f.body) is None
    assert a[f.body].alternatives["npu"] == "the 'supports' hook of target kind 'npu' says no"
    assert a.seconds == pytest.approx(sum(q.estimate.seconds for q in a) + a.transfer_seconds)
    assert a.transfer_seconds == pytest.approx(4 * 8 * 8 * 4 / 1e12)  # l2/conv -> l2/sig
    # the greedy fallback keeps regions whole too
    g = place(f, ct, cost_model=cm, exact=False)
    assert [(q.piece, q.region) for q in g] == [(q.piece, q.region) for q in a]


def test_expensive_region_stays_on_a_piece_running_it_call_by_call():
    _npu(region_seconds=1.0)
    f = _two_layers()
    ct = CompositeTarget("cpu: c; npu: npu")
    a = place(f, ct, cost_model=CostModel(use_schedule=False))
    assert {p.piece for p in a} == {"cpu"} and a.regions == ()
    assert a[f.body.args[0]].reason == "with region 'cbr' (run call by call): cheapest"
    assert a[f.body].reason == "only capable"


def test_region_cost_is_the_sum_without_a_region_estimate():
    _npu(region_seconds=None)
    x, y = _cbr()
    f = _f([x], y)
    cm = CostModel(use_schedule=False)
    ct = CompositeTarget("cpu: c; npu: npu")
    a = place(f, ct, cost_model=cm, rules=parse_place("*=npu", ct))
    assert [p.piece for p in a] == ["npu"] * 3 and [p.estimate.source for p in a] == ["roofline"] * 3
    assert a.total == pytest.approx(sum(cm.call_cost(c, ct.piece("npu")).seconds for c in a.regions[0].calls))
    assert a[y].reason == "region 'cbr': pinned by --place rule '*=npu'"


def test_pins_on_region_calls():
    _npu()
    f = _two_layers()
    ct = CompositeTarget("cpu: c; npu: npu")
    cm = CostModel(use_schedule=False, link_bytes_per_s=1e12, switch_s=0.0)
    # a pin of one call pulls its region along
    a = place(f, ct, rules=parse_place("l1/bias=cpu", ct), cost_model=cm)
    assert [p.piece for p in a][:3] == ["cpu"] * 3 and a.regions == (a.regions[0],) and a.regions[0].piece == "npu"
    assert a[f.body.args[0].args[0].args[0]].reason == "with region 'cbr' (run call by call): pinned by --place " \
        "rule 'l1/bias=cpu'"
    # a pin to the claiming piece of a call it runs only in its region
    a = place(f, ct, rules=parse_place("l1/relu=npu", ct), cost_model=CostModel(use_schedule=False, switch_s=1.0))
    assert [p.piece for p in a] == ["npu"] * 4 + ["cpu"]
    # pins that disagree break the region: relu alone then has no npu
    with pytest.raises(PlacementError) as e:
        place(f, ct, rules=parse_place("l1/relu=npu,l1/conv=cpu", ct), cost_model=cm)
    assert str(e.value) == ("call 'l1/relu' (nn.relu) is pinned to piece 'npu' by --place rule 'l1/relu=npu', but "
                            "that piece cannot run it: the 'supports' hook of target kind 'npu' says no")
    a = place(f, ct, rules=parse_place("l1/relu=cpu,l1/conv=cpu", ct), cost_model=cm)
    assert [p.piece for p in a][:3] == ["cpu"] * 3


def test_region_weights_count_on_one_piece(monkeypatch):
    # the npu holds 600 bytes: the first region's weights (576 + 16) fit, not both regions'
    import plait.placement.solver as solver

    monkeypatch.setattr(solver, "_capacity", lambda piece: 600 if piece.name == "npu" else None)
    _npu()
    f = _two_layers()
    a = place(f, CompositeTarget("cpu: c; npu: npu"), cost_model=CostModel(use_schedule=False, link_bytes_per_s=1e12,
                                                                             switch_s=0.0))
    assert a.memory["npu"] == (4 * 4 * 9 * 4 + 16, 600)
    assert [p.piece for p in a] == ["npu"] * 3 + ["cpu"] * 2
    assert a[f.body.args[0]].reason == "with region 'cbr' (run call by call): memory ('npu' is cheaper but full)"


# ---- property: random DAGs with random claimed regions, the ILP equals brute force --------------------

NAMES = ("a", "b", "n")


class Table(CostModel):
    def __init__(self, costs, link):
        super().__init__(link_bytes_per_s=link, switch_s=1.0)
        self.costs = costs

    def call_cost(self, call, piece):
        s = self.costs[call.meta["name"], piece.name]
        return Estimate(s, s, "test")


PAIR = is_op("nn.relu")(is_op("add")(wildcard(), wildcard()))
AR = is_op("add")(is_op("nn.relu")(wildcard()), wildcard())


@st.composite
def dags(draw):
    x = relay.var("x", (1, 16))
    values, calls, producers = [x], [], []

    def add_call(op, picks):
        y = relay.call(op, *(values[i] for i in picks), meta={"name": f"n{len(calls)}"})
        values.append(y)
        calls.append(y)
        producers.append([i - 1 for i in picks if i > 0])

    size = draw(st.integers(2, 7))
    while len(calls) < size:
        kind = draw(st.sampled_from(["add", "relu", "pair", "ar"]))
        a, b = (draw(st.integers(0, len(values) - 1)) for _ in range(2))
        if kind in ("add", "pair"):
            add_call("add", [a, b])
        if kind in ("relu", "ar"):
            add_call("nn.relu", [a])
        if kind == "pair":
            add_call("nn.relu", [len(values) - 1])  # relu(add(...)): a 'pair' region
        if kind == "ar":
            add_call("add", [len(values) - 1, b])  # add(relu(...), ...): an 'ar' region
    n = len(calls)
    users = {k: [v for v in range(n) if k in producers[v]] for k in range(n)}
    outs = tuple(c for k, c in enumerate(calls) if not users[k] or draw(st.integers(0, 5)) == 0)
    f = Function((x,), Tuple(outs) if len(outs) > 1 else outs[0])
    infer_expr(f)
    costs = {(f"n{k}", p): float(draw(st.integers(0, 20))) for k in range(n) for p in NAMES}
    region_costs = {f"n{k}": draw(st.one_of(st.none(), st.integers(0, 10).map(float))) for k in range(n)}
    pins = {k: draw(st.sampled_from(NAMES[:2])) for k in range(n) if draw(st.integers(0, 5)) == 0}
    link = float(draw(st.sampled_from([16.0, 64.0, 1e9])))
    return f, calls, producers, costs, region_costs, pins, link


def _brute(calls, producers, costs, region_costs, regions, pins, link):
    index = {c: k for k, c in enumerate(calls)}
    groups = []
    for r in regions:  # pins that disagree drop the region
        if len({pins[index[c]] for c in r.calls if index[c] in pins}) <= 1:
            groups.append(r)
    member = {index[c]: r for r in groups for c in r.calls}
    best = None
    choices = []
    for k, c in enumerate(calls):
        if k in pins:
            choices.append([pins[k]])
        elif c.op_name == "nn.relu" and k not in member:
            choices.append(["a", "b"])  # the n kind runs add alone, relu only in a region
        else:
            choices.append(list(NAMES))
    for assign in itertools.product(*choices):
        if any(len({assign[index[c]] for c in r.calls}) > 1 for r in groups):
            continue
        total = 0.0
        for k, p in enumerate(assign):
            r = member.get(k)
            rc = region_costs[r.output.meta["name"]] if r is not None else None
            if r is not None and p == "n" and rc is not None:
                total += rc if calls[k] is r.output else 0.0
            else:
                total += costs[f"n{k}", p]
        for u in range(len(calls)):
            dests = {assign[v] for v in range(len(calls)) if u in producers[v]} - {assign[u]}
            total += len(dests) * (64 / link + 1.0)
        best = total if best is None else min(best, total)
    return best


@settings(max_examples=60, deadline=None)
@given(dags())
def test_place_with_regions_matches_brute_force(case):
    from plait.target.testing import isolated_registry

    f, calls, producers, costs, region_costs, pins, link = case
    with isolated_registry():
        register_test_backend("rnpu", can_host=False, supports=lambda call, target: call.op_name == "add", patterns=lambda target: [("pair", PAIR), ("ar", AR)], cost=lambda obj, target: region_costs[obj.output.meta["name"]]
                      if isinstance(obj, PatternRegion) else None)
        ct = CompositeTarget("a: c; b: c; n: rnpu")
        regions = find_regions([("pair", PAIR), ("ar", AR)], f)
        rules = ",".join(f"n{k}={p}" for k, p in pins.items())
        rules = parse_place(rules, ct) if rules else ()
        a = place(f, ct, "latency", rules, cost_model=Table(costs, link))
        assert a.method == "ilp"
        want = _brute(calls, producers, costs, region_costs, regions, pins, link)
        assert a.total == pytest.approx(want, rel=1e-9, abs=1e-6)
        for k, p in pins.items():
            assert a[calls[k]].piece == p
        for r in regions:
            if len({pins[calls.index(c)] for c in r.calls if calls.index(c) in pins}) <= 1:
                assert len({a[c].piece for c in r.calls}) == 1
        for p in a:
            if p.piece == "n" and p.call.op_name == "nn.relu":
                assert p.region in ("pair", "ar")
        again = place(f, ct, "latency", rules, cost_model=Table(costs, link))
        assert [p.piece for p in again] == [p.piece for p in a]
        g = place(f, ct, "latency", rules, cost_model=Table(costs, link), exact=False)
        assert g.total >= want - 1e-6
        for r in a.regions:
            assert len({g[c].piece for c in r.calls}) == 1
