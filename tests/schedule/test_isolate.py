"""Scheduling each stage in a PrimFunc of its own gives what scheduling the stages one after the other
in the whole function gives (the reference), on every fused function of the reference models."""

from __future__ import annotations

import pytest

from plait import tir
from plait.lowering.lower import lower_function
from plait.frontend.onnx import from_onnx
from plait.relay import Call, Function, post_order
from plait.relay.passes import FuseOps
from plait.schedule import RULE_SETS, RuleSet, Schedule, default_schedule, rules_for
from plait.schedule.isolate import isolate, loop_names
from plait.schedule.rules import _schedule_in_place, cpu_machine
from plait.target import Target
from plait.target.testing import register_test_backend
from plait.target.testing import isolated_registry
from plait.testing import onnx_models
from plait.testing.chain_models import relu_chain
from plait.tir import Allocate, Buffer, For, PrimFunc, seq


def fused_functions(mod):
    fused = FuseOps()(mod)
    fns = [n.op for n in post_order(fused.main.body) if isinstance(n, Call) and isinstance(n.op, Function)]
    return [lower_function(fn, f"f{k}", "c", schedule=False) for k, fn in enumerate(fns)]


MODELS = {name: (lambda name=name: from_onnx(onnx_models.MODELS[name]())) for name in onnx_models.MODELS}
MODELS["relu_chain"] = lambda: relu_chain(40)


@pytest.mark.parametrize("target", ["c", "cortex-m7f"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_isolated_stages_are_scheduled_as_in_the_whole_function(model, target):
    rules = rules_for(target)
    m = rules.machine(Target(target))
    for f in fused_functions(MODELS[model]()):
        t1: list[str] = []
        t2: list[str] = []
        got = default_schedule(f, target, t1)
        want = _schedule_in_place(f, rules, m, t2)
        assert tir.structural_equal(got, want) and t1 == t2, f.name


def test_a_stage_function_holds_the_stage_with_its_buffers():
    x, y = Buffer("x", (4,)), Buffer("y", (4,))
    t = Buffer("t", (4,), "float32", "global.workspace")
    i, j = tir.Var("i"), tir.Var("j")
    first = For(i, 0, 4, "serial", t.store((i,), x[i] * 2.0))
    second = For(j, 0, 4, "serial", y.store((j,), t[j] + 1.0))
    f = PrimFunc((x, y), Allocate(t, seq(first, second)), {"global_symbol": "f", "num_inputs": 1})
    a, b = isolate(f)
    assert a.root is first and a.func.params == (x,) and a.wrappers == (t,) and a.func.body.body is first
    assert b.root is second and b.func.params == (y,) and b.wrappers == (t,)
    assert dict(a.func.attrs) == {"global_symbol": "f"}
    tir.verify(a.func)
    tir.verify(b.func)


def test_names_clashing_across_stages_fall_back_to_scheduling_in_place():
    def split_root(func, root, machine):
        sch = Schedule(func)
        sch.split(root, [None, 2])
        return sch.func

    x, y = Buffer("x", (4,)), Buffer("y", (4,))
    a, a0 = tir.Var("a"), tir.Var("a_0")  # splitting loop 'a' makes 'a_0', the next stage's loop
    f = PrimFunc((x, y), seq(For(a, 0, 4, "serial", x.store((a,), 1.0)), For(a0, 0, 4, "serial", y.store((a0,), 2.0))),
                 {"global_symbol": "f"})
    with isolated_registry():
        register_test_backend("toy", schedule_rules=lambda target: "split-rules")
        RULE_SETS.register("split-rules", RuleSet("split-rules", cpu_machine, split_root))
        try:
            trace: list[str] = []
            g = default_schedule(f, "toy", trace)
        finally:
            RULE_SETS._items.pop("split-rules")
    assert trace[0].startswith("a: unscheduled (split('a'): a loop called 'a_0' already exists") and \
        trace[1] == "a_0: split-rules"
    assert loop_names(g.body) == ["a", "a_0_0", "a_0_1"]
