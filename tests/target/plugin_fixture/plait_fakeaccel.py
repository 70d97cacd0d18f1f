"""A test-only out-of-tree backend: adds the target kind 'fakeaccel' through the plait.backends entry point.

It uses only plait's public target API, as a real plugin package would.
"""

from plait.target import Fact, Option, register_hook, register_kind, register_tag

register_kind(
    "fakeaccel",
    device_type="npu",
    can_host=False,
    doc="a pretend accelerator (test plugin)",
    options=(Option("macs", int, 128, "multiply-accumulate units"),),
    default_keys=("npu",),
)


@register_hook("fakeaccel", "relay_to_runtime")
def compile_for_fakeaccel(func, target):
    return ("fakeaccel-module", target.options["macs"])


@register_hook("fakeaccel", "supports")
def supports(call):
    return call == "nn.dense"


register_tag(
    "fakeaccel-256", "fakeaccel", {"macs": 256},
    doc="the big one",
    facts={
        "clock_mhz": Fact(100, "MHz", "test fixture"),
        "fpu": Fact("none", "", "test fixture"),
        "simd_bits": Fact(0, "bits", "test fixture"),
        "ram_kb": Fact(64, "KiB", "test fixture"),
        "flash_kb": Fact(None, "KiB", "test fixture"),
        "power_mw": Fact(5, "mW", "test fixture"),
    },
)
