"""A test-only out-of-tree backend: the target kind 'fakeaccel', declared through the plait.backends entry point.

It uses only plait's public target API, as a real plugin package would.
"""

from dataclasses import dataclass

from plait.target import Backend, Fact, TagDef, option


@dataclass(frozen=True)
class FakeOptions:
    macs: int = option(128, "multiply-accumulate units")


class FakeAccel(Backend):
    """a pretend accelerator (test plugin)"""

    name = "fakeaccel"
    Options = FakeOptions
    device_type = "npu"
    can_host = False
    default_keys = ("npu",)
    tags = (TagDef("fakeaccel-256", {"macs": 256}, doc="the big one", facts={
        "clock_mhz": Fact(100, "MHz", "test fixture"),
        "fpu": Fact("none", "", "test fixture"),
        "simd_bits": Fact(0, "bits", "test fixture"),
        "ram_kb": Fact(64, "KiB", "test fixture"),
        "flash_kb": Fact(None, "KiB", "test fixture"),
        "power_mw": Fact(5, "mW", "test fixture"),
    }),)

    def relay_to_runtime(self, func, target):
        return ("fakeaccel-module", target.options["macs"])

    def supports(self, call, target):
        return call == "nn.dense"
