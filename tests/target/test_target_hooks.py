"""The hook registry: registration by decorator, signature checks, and running hooks for a piece."""

from dataclasses import dataclass
from typing import ClassVar

import pytest

from plait.errors import PlaitError, RegistryError
from plait.ir.transform import Pass, PassContext, Timing
from plait.relay import Function, IRModule, var
from plait.target import (
    CompositeTarget, HookError, Option, Target, call_cost, call_supports, current_piece, get_kind, hooks_of,
    register_hook, register_kind, run_relay_to_runtime, run_relay_to_tir, run_tir_to_runtime,
)
from plait.target.testing import isolated_registry


@pytest.fixture
def hk():
    """A fresh kind 'hk' (and everything registered in the test) forgotten afterwards."""
    with isolated_registry():
        register_kind("hk", device_type="npu", options=(Option("lanes", int, 4, "vector lanes"),),
                      doc="hook test kind")
        yield CompositeTarget("host: c; accel: hk -lanes=8")


def module() -> IRModule:
    x = var("x", (2,))
    return IRModule({"main": Function((x,), x)})


def message(exc_type, fn, *args) -> str:
    with pytest.raises(exc_type) as e:
        fn(*args)
    assert isinstance(e.value, PlaitError)
    return str(e.value)


def test_hooks_register_by_decorator_and_are_listed(hk):
    @register_hook("hk", "relay_to_runtime")
    def compile_it(func, target):
        return ("module", target.options["lanes"])

    @register_hook("hk", "supports")
    def supports(call):
        return call == "nn.dense"

    assert compile_it(None, Target("hk")) == ("module", 4)  # the decorator returns the function
    assert list(hooks_of("hk")) == ["relay_to_runtime", "supports"]
    assert get_kind("hk").hook("relay_to_runtime") is compile_it
    assert get_kind("hk").hook("tir_to_runtime") is None
    accel = hk.piece("accel")
    assert run_relay_to_runtime(accel, "fn") == ("module", 8)
    assert call_supports(accel, "nn.dense") is True and call_supports(accel, "nn.conv2d") is False
    assert call_supports(hk.piece("host"), "nn.dense") is None  # c declares no capability hook
    assert call_cost(accel, "nn.dense") is None


def test_hook_signatures_are_checked_when_registered(hk):
    def build(mod):
        return mod

    def lower(mod, target):
        return mod

    def s(call, target, extra):
        return True

    def f(mod, target, *, opt):
        return mod

    pre = "hook '{}' of target kind 'hk' must be "
    tir = pre.format("tir_to_runtime") + "(mod: IRModule, target: Target) -> runtime module; got "
    assert message(HookError, register_hook, "hk", "tir_to_runtime", build) == tir + "build(mod)"
    assert message(HookError, register_hook, "hk", "tir_to_runtime", f) == tir + "f(mod, target, *, opt)"
    assert message(HookError, register_hook, "hk", "relay_to_tir", lower) == \
        pre.format("relay_to_tir") + "a Pass or (mod: IRModule) -> IRModule; got lower(mod, target)"
    assert message(HookError, register_hook, "hk", "supports", s) == \
        pre.format("supports") + "(call) -> bool or (call, target) -> bool (or -> (bool, reason)); got s(call, target, extra)"
    assert message(HookError, register_hook, "hk", "relay_to_runtime", 3) == \
        pre.format("relay_to_runtime") + "(func: Function, target: Target) -> runtime module; " \
                                          "got 3 (int), which is not callable"
    assert hooks_of("hk") == {}  # nothing was registered by the failed attempts


def test_signatures_that_fit(hk):
    class Builder:
        def __call__(self, mod, target, verbose=False):
            return "built"

    register_hook("hk", "tir_to_runtime", Builder())
    register_hook("hk", "relay_to_runtime", lambda *args: args)
    register_hook("hk", "cost", lambda call, target=None, scale=2.0: 1e-3 * scale)
    accel = CompositeTarget("accel: hk").piece("accel")
    assert run_tir_to_runtime(accel, module()) == "built"
    assert run_relay_to_runtime(accel, "fn") == ("fn", accel.target)
    assert call_cost(accel, "nn.dense") == 2e-3  # called as (call, target): the largest arity it accepts


def test_registry_errors(hk):
    register_hook("hk", "supports", lambda call: True)
    assert message(RegistryError, register_hook, "hk", "supports", lambda call: False) == \
        "hook 'supports' of target kind 'hk' is already registered"
    assert message(RegistryError, register_hook, "hk", "relay_to_tirr", lambda mod: mod) == \
        "unknown hook 'relay_to_tirr'; did you mean 'relay_to_tir' or 'relay_to_runtime'?"
    assert message(RegistryError, register_hook, "hkk", "supports", lambda call: True) == \
        "unknown target kind 'hkk'; did you mean 'hk'?"


def test_relay_to_tir_runs_as_a_pass_with_the_piece_current(hk):
    seen = {}

    @register_hook("hk", "relay_to_tir")
    def lower(mod):
        seen["target"], seen["piece"] = Target.current(), current_piece()
        return mod.with_attrs(lowered_for=current_piece().name)

    timing = Timing()
    out = run_relay_to_tir(hk.piece("accel"), module(), PassContext(instruments=[timing]))
    assert out.attrs["lowered_for"] == "accel"
    assert seen["target"] == Target("hk -lanes=8") and seen["piece"] == hk.piece("accel")
    assert [name for name, _ in timing.times] == ["hk.relay_to_tir"]
    assert Target.current() is None  # left again afterwards


def test_relay_to_tir_may_be_a_pass_instance(hk):
    @dataclass(frozen=True)
    class Tag(Pass):
        name: ClassVar[str] = "tag_lanes"
        suffix: str = "!"

        def run(self, mod, ctx):
            return mod.with_attrs(lanes=f"{Target.current().options['lanes']}{self.suffix}")

    register_hook("hk", "relay_to_tir", Tag())
    assert run_relay_to_tir(hk.piece("accel"), module()).attrs["lanes"] == "8!"


def test_failing_hooks_name_the_hook_the_kind_and_the_piece(hk):
    def boom(mod, target):
        raise ValueError("no codegen for this")

    register_hook("hk", "tir_to_runtime", boom)
    register_hook("hk", "relay_to_tir", lambda mod: [mod])
    register_hook("hk", "supports", lambda call: "yes")
    register_hook("hk", "cost", lambda call: -1)
    register_hook("hk", "relay_to_runtime", lambda func, target: (_ for _ in ()).throw(PlaitError("unsupported")))
    accel = hk.piece("accel")
    assert message(HookError, run_tir_to_runtime, accel, module()) == \
        "hook 'tir_to_runtime' of target kind 'hk' on piece 'accel' failed: ValueError: no codegen for this"
    assert message(HookError, run_relay_to_tir, accel, module()) == \
        "hook 'relay_to_tir' of target kind 'hk' on piece 'accel' returned list; expected an IRModule"
    assert message(HookError, call_supports, accel, "nn.dense") == \
        "hook 'supports' of target kind 'hk' on piece 'accel' returned 'yes' (str); expected a bool or (bool, reason)"
    assert message(HookError, call_cost, accel, "nn.dense") == \
        "hook 'cost' of target kind 'hk' on piece 'accel' returned -1; expected a number of seconds >= 0 or None"
    assert message(PlaitError, run_relay_to_runtime, accel, "fn") == "unsupported"  # plait errors pass through
    assert message(HookError, run_relay_to_runtime, Target("c"), "fn") == \
        "target kind 'c' (piece 'c') has no 'relay_to_runtime' hook"
    assert Target.current() is None


def test_supports_may_give_its_reason():
    from plait import relay
    from plait.placement.capability import piece_supports
    from plait.target import call_supports
    from plait.target.hooks import supports_answer

    with isolated_registry():
        register_kind("why", doc="test kind: says why")
        register_hook("why", "supports", lambda call: (call.op_name == "nn.relu", "only relu, sorry"))
        t = Target("why")
        r = relay.call("nn.relu", relay.var("x", (2,)))
        n = relay.call("negative", relay.var("x", (2,)))
        assert call_supports(t, r) is True and call_supports(t, n) is False
        assert supports_answer(t, n) == (False, "only relu, sorry")
        assert piece_supports(t, n).reason == "the 'supports' hook of target kind 'why' says no: only relu, sorry"
