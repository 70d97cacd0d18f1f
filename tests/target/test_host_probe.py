"""The probed host facts (plait.target.host): the effective clock and the FMA pass width, measured once per
machine by a small compiled program, rounded, cached (the first result wins), overridden by target
options. The probe's results are faked here (``run_probe``), so nothing depends on this machine."""

import json

import pytest

from plait.schedule.rules import machine_for
from plait.target import Target
from plait.target import host


@pytest.fixture
def probe(monkeypatch, tmp_path):
    """A fresh cache directory and measurement; ``probe.result`` is what the faked probe returns."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []

    class Probe:
        result: tuple[float, float] | None = (3649.6, 1.02)

        def __call__(self, simd_bits):
            calls.append(simd_bits)
            return self.result

    p = Probe()
    p.calls = calls
    monkeypatch.setattr(host, "run_probe", p)
    simd = lambda: host.Fact(512, "bits", "/proc/cpuinfo flags: avx512f", origin=host.MEASURED)  # noqa: E731
    monkeypatch.setattr(host, "_simd_bits", simd)
    monkeypatch.setitem(host._MEASURES, "simd_bits", simd)
    host.measure.cache_clear()
    yield p
    host.measure.cache_clear()


def test_the_clock_is_the_probed_chain_rounded_to_100_mhz_and_cached(probe, tmp_path):
    clock, fma = host.measure("clock_mhz"), host.measure("fma_bits")
    path = tmp_path / "plait" / "host" / f"probe-{host._machine_key()}.json"
    assert (clock.value, clock.unit, clock.origin) == (3600, "MHz", "measured on this machine")
    assert clock.source == ("a timed chain of dependent adds (1 cycle each), fastest of 15 runs, rounded to 100 MHz; "
                            f"cached in {path}")
    # 1.02 512-bit FMAs per cycle from two pipes: each takes 256 bits at a time (AMD Zen 4)
    assert (fma.value, fma.origin) == (256, "measured on this machine")
    assert fma.source == ("timed independent vector FMAs (two pipes: a width issued at fewer than 1.5 per cycle "
                          f"is split in halves); cached in {path}")
    assert json.loads(path.read_text()) == {"clock_mhz": 3600, "fma_bits": 256, "measured_mhz": 3649.6,
                                            "fma_per_cycle": 1.02, "simd_bits": 512}
    assert probe.calls == [512]
    # another process (a cleared measurement) reads the cached numbers: the probe does not run again
    probe.result = (3751.0, 2.0)
    host.measure.cache_clear()
    assert (host.measure("clock_mhz").value, host.measure("fma_bits").value) == (3600, 256)
    assert probe.calls == [512]


def test_full_width_pipes_keep_the_simd_width_and_the_first_cached_result_wins(probe, tmp_path):
    probe.result = (3751.0, 1.98)
    assert (host.measure("clock_mhz").value, host.measure("fma_bits").value) == (3800, 512)
    path = tmp_path / "plait" / "host" / f"probe-{host._machine_key()}.json"
    path.write_text(json.dumps({"clock_mhz": 2900, "fma_bits": 512}))  # as if another worker wrote first
    host.measure.cache_clear()
    assert host.measure("clock_mhz").value == 2900


def test_without_a_probe_the_clock_comes_from_the_system_and_fma_passes_are_the_simd_width(probe):
    probe.result = None
    clock, fma = host.measure("clock_mhz"), host.measure("fma_bits")
    assert clock.value > 0 and not clock.source.startswith("a timed chain")
    assert (fma.value, fma.origin, fma.source) == (512, "estimate", "the SIMD width")
    assert fma.note == "not probed (no C compiler, or not an x86-64 machine with 256- or 512-bit vectors)"


def test_options_override_the_probed_facts_and_a_stated_simd_width_means_full_width_pipes(probe):
    t = Target("c -clock-mhz=3000 -fma-bits=512")
    assert (t.facts.clock_mhz.value, t.facts.clock_mhz.where) == (3000, "target option -clock-mhz")
    assert (t.facts.fma_bits.value, t.facts.fma_bits.where) == (512, "target option -fma-bits")
    assert machine_for(t).fma_bits == 512
    assert machine_for(Target("c")).fma_bits == 256  # this (faked) machine: SIMD width and FMA passes probed
    assert machine_for(Target("c -simd-bits=512")).fma_bits == 512  # the probe describes the host's SIMD only
    assert machine_for(Target("c -simd-bits=512 -fma-bits=256")).fma_bits == 256
    assert "fma_bits" not in {n for n, f in Target("cortex-m7f").facts.items() if f.value is not None}


def test_the_probe_program_runs_here_or_says_it_cannot():
    got = host.run_probe(256)
    assert got is None or (got[0] > 100 and 0.1 < got[1] < 16)
    assert host.run_probe(64) is None  # no vector width to probe
