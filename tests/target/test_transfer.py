"""The composite target's transfer settings and which pieces share memory."""

import pytest

from plait.errors import PlaitError
from plait.placement.cost import CostModel
from plait.target import CompositeTarget, Target, TargetError, Transfer

SEED = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"


def message(fn, *args):
    with pytest.raises(PlaitError) as info:
        fn(*args)
    return str(info.value)


def test_devices():
    assert Target("c").device == "host"
    assert Target("c -mcpu=cortex-m0").device == "cortex-m0"
    assert Target("c -mcpu=cortex-m7f").device == "cortex-m7"
    assert Target("llvm").device == "host"


def test_defaults_and_sharing():
    ct = CompositeTarget(SEED)
    assert ct.transfer == Transfer() and ct.transfer.bandwidth == 100e6 and ct.transfer.switch == 10e-6
    assert not ct.shares_memory("low_power_cpu", "inference_cpu")
    assert ct.shares_memory("low_power_cpu", "low_power_cpu")
    assert CompositeTarget("host: c; fast: c -opt-level=3").shares_memory("host", "fast")
    assert CompositeTarget(SEED + "; transfer: -shared-memory=yes").shares_memory("low_power_cpu", "inference_cpu")
    assert not CompositeTarget("a: c; b: c; transfer: -shared-memory=no").shares_memory("a", "b")


@pytest.mark.parametrize("text,bandwidth,switch", [
    ("-bandwidth=50MB/s -switch=20us", 50e6, 20e-6),
    ("-bandwidth=1.5GB/s", 1.5e9, 10e-6),
    ("-bandwidth=2e5 -switch=0", 2e5, 0.0),
    ("-switch=1ms -bandwidth=10kb/s", 1e4, 1e-3),
])
def test_units_and_round_trip(text, bandwidth, switch):
    ct = CompositeTarget(f"{SEED}; transfer: {text}")
    assert ct.transfer.bandwidth == pytest.approx(bandwidth) and ct.transfer.switch == pytest.approx(switch)
    assert CompositeTarget(str(ct)) == ct
    assert CompositeTarget(ct.to_json()) == ct
    assert "transfer:" in str(ct)


def test_dict_form():
    ct = CompositeTarget({"pieces": {"a": "c", "b": "c -mcpu=cortex-m0"},
                          "transfer": {"bandwidth": "1MB/s", "switch": 0.001, "shared_memory": "no"}})
    assert (ct.transfer.bandwidth, ct.transfer.switch, ct.transfer.shared_memory) == (1e6, 1e-3, "no")
    assert CompositeTarget(ct.to_dict()) == ct


def test_default_not_printed():
    assert str(CompositeTarget(SEED + "; transfer: -bandwidth=100MB/s")) == str(CompositeTarget(SEED))


def test_errors():
    assert message(CompositeTarget, "a: c; transfer: -bandwidth=fast") == (
        "composite target: transfer bandwidth 'fast' is not understood; expected a number with an optional unit "
        "(B/s, KB/s, MB/s, GB/s), e.g. 100MB/s")
    assert message(CompositeTarget, "a: c; transfer: -switch=3 parsecs") == (
        "composite target: transfer option 'parsecs' must be written -name=value (options: -bandwidth, -switch, "
        "-shared-memory)")
    assert message(CompositeTarget, "a: c; transfer: -bw=1") == (
        "composite target: unknown transfer option '-bw'; options: -bandwidth, -switch, -shared-memory")
    assert message(CompositeTarget, "a: c; transfer: -shared-memory=maybe") == (
        "composite target: transfer -shared-memory must be one of auto, yes, no; got 'maybe'")
    assert message(CompositeTarget, "a: c; transfer: -bandwidth=0") == "composite target: transfer bandwidth must be > 0"
    assert message(CompositeTarget, "a: c; transfer: -switch=1s; transfer: -switch=2s") == (
        "composite target: the 'transfer' entry is given twice")
    assert message(CompositeTarget, "transfer: -switch=1s") == "composite target: no pieces (only settings)"
    with pytest.raises(TargetError):
        CompositeTarget({"pieces": {"a": "c"}, "transfer": 5})


def test_cost_model_reads_the_transfer_settings():
    ct = CompositeTarget(SEED + "; transfer: -bandwidth=1MB/s -switch=1ms")
    cm = CostModel.for_target(ct)
    a, b = ct.pieces
    est = cm.transfer_cost(1000, a, b)
    assert est.seconds == pytest.approx(1000 / 1e6 + 1e-3)
    shared = CompositeTarget("host: c; other: c -opt-level=3")
    est = CostModel.for_target(shared).transfer_cost(10**6, *shared.pieces)
    assert est.seconds == 0.0 and est.detail == "shared memory (device 'host')"
