"""Hooks: the methods a Backend subclass overrides, signature checks, and running hooks for a piece."""

import pytest

from plait.errors import PlaitError, RegistryError
from plait.target.errors import TargetError
from plait.ir.transform import PassContext, Timing
from plait.relay import Function, IRModule, var
from plait.target import (
    Backend, CompositeTarget, HookError, Option, Target, call_cost, call_supports, get_kind, hooks_of,
    register_backend, run_relay_to_runtime, run_relay_to_tir, run_tir_to_runtime,
)
from plait.target.testing import isolated_registry, make_backend, register_test_backend

HK_OPTIONS = (Option("lanes", int, 4, "vector lanes"),)


@pytest.fixture
def hk():
    """A composite target with a piece of kind 'hk' (declared by each test), forgotten afterwards."""
    with isolated_registry():
        yield lambda **hooks: (register_test_backend("hk", options=HK_OPTIONS, device_type="npu", doc="hook test kind",
                                                     **hooks), CompositeTarget("host: c; accel: hk -lanes=8"))[1]


def module() -> IRModule:
    x = var("x", (2,))
    return IRModule({"main": Function((x,), x)})


def message(exc_type, fn, *args, **kwargs) -> str:
    with pytest.raises(exc_type) as e:
        fn(*args, **kwargs)
    assert isinstance(e.value, PlaitError)
    return str(e.value)


def test_hooks_are_the_overridden_methods_and_are_listed(hk):
    ct = hk(relay_to_runtime=lambda func, target: ("module", target.options["lanes"]),
            supports=lambda call, target: call == "nn.dense")
    assert list(hooks_of("hk")) == ["relay_to_runtime", "supports"]
    assert list(hooks_of("c")) == ["tir_to_runtime"]
    accel = ct.piece("accel")
    assert run_relay_to_runtime(accel, "fn") == ("module", 8)
    assert call_supports(accel, "nn.dense") is True and call_supports(accel, "nn.conv2d") is False
    assert call_supports(ct.piece("host"), "nn.dense") is None  # c declares no capability hook
    assert call_cost(accel, "nn.dense") is None


def test_hook_signatures_are_checked_when_registered():
    def build(mod):
        return mod

    def f(mod, target, *, opt):
        return mod

    def s(call, target, extra):
        return True

    pre = "hook '{}' of target kind 'hk' must be "
    tir = pre.format("tir_to_runtime") + "(mod: IRModule, target: Target) -> runtime module or (mod, target, ctx) " \
                                         "-> runtime module; got "
    with isolated_registry():
        assert message(HookError, register_test_backend, "hk", tir_to_runtime=build) == tir + "build(mod)"
        assert message(HookError, register_test_backend, "hk", tir_to_runtime=f) == tir + "f(mod, target, *, opt)"
        assert message(HookError, register_test_backend, "hk", relay_to_tir=build) == \
            pre.format("relay_to_tir") + "(mod: IRModule, target: Target) -> IRModule or (mod, target, ctx) -> " \
                                         "IRModule; got build(mod)"
        assert message(HookError, register_test_backend, "hk", supports=s) == \
            pre.format("supports") + "(call, target) -> bool (or -> (bool, reason)); got s(call, target, extra)"
        assert message(HookError, register_test_backend, "hk", relay_to_runtime=3) == \
            pre.format("relay_to_runtime") + "(func: Function, target: Target) -> runtime module; " \
                                              "got 3 (int), which is not callable"
        assert "hk" not in [k.name for k in __import__("plait.target", fromlist=["list_kinds"]).list_kinds()]


def test_signatures_that_fit():
    class Builder:
        def __call__(self, mod, target, verbose=False):
            return "built"

    with isolated_registry():
        register_test_backend("hk", tir_to_runtime=Builder(), relay_to_runtime=lambda *args: args,
                              cost=lambda call, target, scale=2.0: 1e-3 * scale)
        accel = CompositeTarget("accel: hk").piece("accel")
        assert run_tir_to_runtime(accel, module()) == "built"
        assert run_relay_to_runtime(accel, "fn") == ("fn", accel.target)
        assert call_cost(accel, "nn.dense") == 2e-3


def test_registry_errors():
    with isolated_registry():
        register_test_backend("hk")
        assert message(RegistryError, register_test_backend, "hk") == "target kind 'hk' is already registered"
        assert message(RegistryError, get_kind, "hkk") == "unknown target kind 'hkk'; did you mean 'hk'?"
        assert message(TargetError, register_backend, object) == \
            "register_backend: expected a subclass of plait.target.Backend, got <class 'object'>"


def test_relay_to_tir_gets_the_target_and_the_piece_name_explicitly(hk):
    seen = {}

    def lower(mod, target):
        seen["target"], seen["piece"] = target, mod.attrs["piece"]
        return mod.with_attrs(lowered_for=mod.attrs["piece"])

    ct = hk(relay_to_tir=lower)
    timing = Timing()
    out = run_relay_to_tir(ct.piece("accel"), module(), PassContext(instruments=[timing]))
    assert out.attrs["lowered_for"] == "accel" and "piece" not in out.attrs
    assert seen == {"target": Target("hk -lanes=8"), "piece": "accel"}
    assert [name for name, _ in timing.times] == ["hk.relay_to_tir"]


def test_hooks_may_take_the_pass_context(hk):
    ct = hk(relay_to_tir=lambda mod, target, ctx: mod.with_attrs(level=ctx.opt_level),
            tir_to_runtime=lambda mod, target, ctx: ctx.config["where"])
    accel = ct.piece("accel")
    assert run_relay_to_tir(accel, module(), PassContext(opt_level=3)).attrs["level"] == 3
    assert run_tir_to_runtime(accel, module(), PassContext(config={"where": "here"})) == "here"


def test_failing_hooks_name_the_hook_the_kind_and_the_piece(hk):
    def boom(mod, target):
        raise ValueError("no codegen for this")

    def unsupported(func, target):
        raise PlaitError("unsupported")

    ct = hk(tir_to_runtime=boom, relay_to_tir=lambda mod, target: [mod], supports=lambda call, target: "yes",
            cost=lambda call, target: -1, relay_to_runtime=unsupported)
    accel = ct.piece("accel")
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


def test_a_hook_method_raising_names_hook_kind_and_piece():
    class Broken(Backend):
        name = "broken"

        def supports(self, call, target):
            raise KeyError("lanes")

    with isolated_registry():
        register_backend(Broken)
        piece = CompositeTarget("host: c; npu: broken").piece("npu")
        assert message(HookError, call_supports, piece, "nn.dense") == \
            "hook 'supports' of target kind 'broken' on piece 'npu' failed: KeyError: 'lanes'"


def test_supports_may_give_its_reason():
    from plait import relay
    from plait.placement.capability import piece_supports
    from plait.target.hooks import supports_answer

    with isolated_registry():
        register_test_backend("why", doc="test kind: says why",
                              supports=lambda call, target: (call.op_name == "nn.relu", "only relu, sorry"))
        t = Target("why")
        r = relay.call("nn.relu", relay.var("x", (2,)))
        n = relay.call("negative", relay.var("x", (2,)))
        assert call_supports(t, r) is True and call_supports(t, n) is False
        assert supports_answer(t, n) == (False, "only relu, sorry")
        assert piece_supports(t, n).reason == "the 'supports' hook of target kind 'why' says no: only relu, sorry"


def test_the_kind_is_a_typed_class():
    c = get_kind("c").backend
    t = Target("cortex-m7f")
    opts = c.options(t)
    assert (opts.mcpu, opts.mfpu, opts.mfloat_abi, opts.opt_level) == ("cortex-m7", "fpv5-sp-d16", "hard", 2)
    assert c.device(t) == t.device == "cortex-m7" and c.schedule_rules(t) == "microcontroller"
    assert get_kind("llvm").backend.schedule_rules(Target("llvm")) == "cpu"  # the base class's default
    assert [o.doc for o in get_kind("c").options][:1] == \
        ["CPU passed as -mcpu (cortex-m0, cortex-m4f, cortex-m7f, cortex-m55, ...); empty: the compiler's default"]
    assert make_backend("plain").summary() == ""
