"""Targets and composite targets: parsing, canonical printing, round trips, facts."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.target import CompositeTarget, Piece, Target, TargetError

SEED = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"


def roundtrips(t: Target) -> None:
    """str, dict and JSON forms all parse back to an equal Target with the same hash."""
    for back in (Target(str(t)), Target(t.to_dict()), Target.from_json(t.to_json()), Target(t.to_json())):
        assert back == t and hash(back) == hash(t), (str(t), str(back))
        assert str(back) == str(t)


# ---- single targets ---------------------------------------------------------------------------------


def test_string_form_resolves_every_option():
    t = Target("c -mcpu=cortex-m0 -keys=arm_cpu")
    assert t.kind_name == "c" and t.kind.device_type == "cpu"
    assert dict(t.options) == {"mcpu": "cortex-m0", "march": "", "mfpu": "", "mfloat-abi": "",
                               "opt-level": 2, "cc": "", "board": "", "requantize": "", "libm": "", "int8-dot": "", "keys": ("arm_cpu", "cpu"),
                               "ram-kb": None,
                               "flash-kb": None, "clock-mhz": None, "simd-bits": None, "fma-bits": None}
    assert t.keys == ("arm_cpu", "cpu")
    assert str(t) == "c -mcpu=cortex-m0"  # the keys are the matching cortex-m0 tag's anyway
    assert t.to_dict() == {"kind": "c", "mcpu": "cortex-m0"}
    roundtrips(t)
    assert t == Target("c -mcpu=cortex-m0")


@pytest.mark.parametrize("text, canonical", [
    ("c", "c"),
    ("llvm", "llvm"),
    ("c -opt-level=2", "c"),  # a default is not printed
    ("c   -opt-level=3    -mcpu=cortex-m0", "c -mcpu=cortex-m0 -opt-level=3"),  # declaration order
    ("c -keys=cpu", "c"),
    ("c -keys=cpu,arm_cpu", "c -keys=cpu,arm_cpu"),  # order of keys matters: kept
    ("c -keys=arm_cpu,cpu", "c -keys=arm_cpu"),
    ("c -cc='ccache gcc'", "c -cc='ccache gcc'"),
    ("llvm -mcpu=znver3 -mattr=+avx2,-avx512f", "llvm -mcpu=znver3 -mattr=+avx2,-avx512f"),
    ("c -mcpu=cortex-m7f", "c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard"),
    ("c -mcpu=cortex-m4f", "c -mcpu=cortex-m4 -mfpu=fpv4-sp-d16 -mfloat-abi=hard"),
    ("c -mcpu=cortex-m7f -mfpu=fpv5-d16", "c -mcpu=cortex-m7 -mfpu=fpv5-d16 -mfloat-abi=hard"),
    ("cortex-m7f", "cortex-m7f"),
    ("cortex-m7f -opt-level=3", "cortex-m7f -opt-level=3"),
    ("cortex-m7f -mcpu=cortex-m4", "cortex-m7f -mcpu=cortex-m4 -mfpu='' -mfloat-abi=''"),
    ("cortex-m0 -keys=", "cortex-m0 -keys=''"),  # the tag's keys dropped
    ("host", "host"),
    # the tag's -mcpu=cortex-m4f also set -mfpu/-mfloat-abi: overriding -mcpu spells all of them out
    ("cortex-m4f -mcpu=cortex-m7f", "cortex-m4f -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard -keys=arm_cpu"),
    ("cortex-m7f -mcpu=cortex-m7 -mfpu=none", "cortex-m7f -mcpu=cortex-m7 -mfpu=none -keys=arm_cpu"),
    # written out in full, a target takes its matching tag's options: the M55's hard-float ABI and keys
    ("c -mcpu=cortex-m55", "c -mcpu=cortex-m55 -mfloat-abi=hard"),
    ("c -mcpu=cortex-m0 -keys=dsp", "c -mcpu=cortex-m0 -keys=dsp"),
    ("c -mcpu=cortex-m55 -mfloat-abi=softfp", "c -mcpu=cortex-m55 -mfloat-abi=softfp"),  # contradicts: no tag
    # the fact options, on every kind
    ("c -mcpu=cortex-m7f -flash-kb=2048", "c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard -flash-kb=2048"),
    ("cortex-m0 -ram-kb=32 -clock-mhz=48", "cortex-m0 -ram-kb=32 -clock-mhz=48"),
    ("llvm -simd-bits=0 -ram-kb=", "llvm -simd-bits=0"),
])
def test_canonical_strings(text, canonical):
    t = Target(text)
    assert str(t) == canonical
    roundtrips(t)


def test_f_suffix_means_the_core_with_its_fpu():
    spelled = Target("c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard")
    short = Target("c -mcpu=cortex-m7f")
    assert short == spelled and hash(short) == hash(spelled)
    assert short.notes == ("-mcpu=cortex-m7f read as -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard",)
    assert spelled.notes == ()
    assert Target("c -mcpu=cortex-m7") != spelled


def test_tags_are_presets_with_facts():
    t = Target("cortex-m7f")
    assert t.tag == "cortex-m7f" and t.kind_name == "c"
    assert t.spelled_out() == "c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard -keys=arm_cpu"
    assert str(t.untagged()) == "c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard"
    assert t != t.untagged()  # the tag is part of the target
    assert t.untagged().facts == t.facts  # written out, it still matches the tag
    assert t.to_dict() == {"kind": "c", "tag": "cortex-m7f"}
    f = t.facts
    assert (f.clock_mhz.value, f.fpu.value, f.ram_kb.value, f.flash_kb.value) == (216, "sp", 320, 1024)
    assert f.clock_mhz.unit == "MHz" and "STM32F746" in f.clock_mhz.source
    assert f.flash_kb.where == "tag cortex-m7f: STM32F746NG datasheet (DS10916): 1 MB flash (Zephyr " \
                               "stm32f746g_disco.yaml)"
    m0 = Target("cortex-m0").facts
    assert (m0.clock_mhz.value, m0.ram_kb.value, m0.flash_kb.value, m0.fpu.value, m0.simd_bits.value) == \
        (16, 16, 256, "none", 0)
    m55 = Target("cortex-m55").facts
    assert (m55.simd_bits.value, m55.ram_kb.value, m55.flash_kb.value, m55.clock_mhz.value) == (128, 1024, 5632, 400)
    # every fact of every in-tree tag names its source
    from plait.target import list_tags
    for tag in list_tags():
        for name, fact in tag.facts.items():
            assert fact.source.strip(), (tag.name, name)


def test_targets_written_out_get_the_facts_of_the_matching_tag():
    assert Target("c -mcpu=cortex-m0").matched_tag.name == "cortex-m0"
    assert Target("c -mcpu=cortex-m7f -opt-level=3").matched_tag.name == "cortex-m7f"
    assert Target("c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16").matched_tag.name == "cortex-m7f"
    assert Target("c").matched_tag.name == "host-c"
    assert Target("llvm").matched_tag.name == "host-llvm"
    assert Target("llvm -mcpu=x86-64-v3").facts.simd_bits.value == 256
    assert Target("llvm -mcpu=x86-64-v4").matched_tag.name == "x86-64-avx512"
    assert Target("c -mcpu=cortex-m7").facts is None  # no FPU: not the cortex-m7f board
    assert Target("c -mcpu=cortex-m3").facts is None


def test_the_natural_spelling_of_the_m55_is_the_m55_tag():
    """Tags match on the options that define them: c -mcpu=cortex-m55 reads as cortex-m55 does."""
    written, tag = Target("c -mcpu=cortex-m55"), Target("cortex-m55")
    assert written.matched_tag.name == "cortex-m55"
    assert written.facts == tag.facts and written.keys == tag.keys == ("arm_cpu", "cpu")
    assert dict(written.options) == dict(tag.options)
    assert written.backend.compiler_flags(written) == tag.backend.compiler_flags(tag) == \
        ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard", "-O2"]
    assert written != tag and written == Target(str(written))  # the tag's name is part of a target
    # an option the tag sets differently rules it out; one it does not look at does not
    assert Target("c -mcpu=cortex-m55 -mfloat-abi=soft").facts is None
    assert Target("c -mcpu=cortex-m55 -opt-level=3 -keys=dsp").matched_tag.name == "cortex-m55"
    assert Target("c -mfloat-abi=hard").matched_tag.name == "host-c"  # the M55's identity is its -mcpu


def test_fact_options_override_the_tag_on_every_kind():
    t = Target("c -mcpu=cortex-m7f -flash-kb=2048 -ram-kb=512 -clock-mhz=100 -simd-bits=0")
    f = t.facts
    assert (f.flash_kb.value, f.ram_kb.value, f.clock_mhz.value, f.simd_bits.value) == (2048, 512, 100, 0)
    assert (f.flash_kb.where, f.fpu.where.split(":")[0]) == ("target option -flash-kb", "tag cortex-m7f")
    assert t.matched_tag.name == "cortex-m7f"  # fact options do not change which tag matches
    u = Target("c -mcpu=cortex-m3 -ram-kb=64")  # no tag: the facts given, the rest unknown
    assert u.facts.ram_kb.value == 64 and u.facts.clock_mhz.value is None
    assert u.facts.clock_mhz.where == "unknown: no tag matches this target"
    assert Target("llvm -clock-mhz=3000").facts.clock_mhz.value == 3000
    from plait.target import Option, TargetError, TargetKind

    k = TargetKind("test_fact_kind", options=(Option("n", int, 1),))  # a kind declares none of them itself
    assert [o.name for o in k.options] == ["n", "keys", "ram-kb", "flash-kb", "clock-mhz", "simd-bits",
                                          "fma-bits"]
    with pytest.raises(TargetError) as e:
        TargetKind("test_fact_kind2", options=(Option("ram-kb", int, 1),))
    assert str(e.value) == ("target kind 'test_fact_kind2': option 'ram-kb' is one every kind has "
                            "(plait.target.options.FACT_OPTIONS); do not declare it")
    for text, msg in [("c -ram-kb=-1", "target kind 'c': option '-ram-kb' must be >= 0; got -1"),
                      ("c -clock-mhz=0", "target kind 'c': option '-clock-mhz' must be >= 1; got 0"),
                      ("c -flash-kb=lots", "target kind 'c': option '-flash-kb' expects an int, got 'lots'")]:
        with pytest.raises(TargetError) as e:
            Target(text)
        assert str(e.value) == msg


def test_host_facts_are_measured_on_this_machine():
    import os

    f = Target("c").facts
    assert f.simd_bits.origin == "measured on this machine"
    assert f.simd_bits.source.startswith("/proc/cpuinfo flags: ")
    flags = open("/proc/cpuinfo").read().split("\nflags", 1)[1].split("\n", 1)[0].split()
    want = 512 if "avx512f" in flags else 256 if "avx2" in flags or "avx" in flags else 128
    assert f.simd_bits.value == want
    assert f.cores.value == len(os.sched_getaffinity(0))
    assert f.ram_kb.value == (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) // 1024 or \
        f.ram_kb.source.startswith("sysconf physical memory, or the cgroup limit")
    assert f.flash_kb.value is None and f.clock_mhz.value > 0
    assert Target("llvm").facts == f  # one measurement per process
    assert Target("x86-64-avx512").facts.simd_bits.where.startswith("tag x86-64-avx512: x86-64-v4")
    pinned = Target("c -simd-bits=256 -clock-mhz=2445").facts
    assert (pinned.simd_bits.value, pinned.clock_mhz.value) == (256, 2445)


def test_dict_and_json_forms():
    d = {"kind": "c", "mcpu": "cortex-m0", "opt-level": 3, "keys": ["arm_cpu"]}
    t = Target(d)
    assert t == Target("c -mcpu=cortex-m0 -opt-level=3 -keys=arm_cpu")
    assert Target(json.dumps(d)) == t and Target.from_json(json.dumps(d)) == t
    assert Target({"tag": "cortex-m4f", "opt-level": 1}) == Target("cortex-m4f -opt-level=1")
    assert Target({"kind": "c", "tag": "cortex-m4f"}) == Target("cortex-m4f")
    assert Target(t) == t


def test_bool_options_parse_bare_flags():
    from plait.target import Option
    from plait.target.testing import isolated_registry
    from plait.target.testing import register_test_backend

    with isolated_registry():
        register_test_backend("flagged", options=(Option("fast", bool, False, "go fast"),))
        assert Target("flagged -fast").options["fast"] is True
        assert Target("flagged -fast=false") == Target("flagged")
        assert str(Target("flagged -fast=1")) == "flagged -fast=true"
        roundtrips(Target("flagged -fast"))


def test_targets_are_immutable_and_hashable():
    t = Target("c -mcpu=cortex-m0")
    with pytest.raises(AttributeError):
        t.kind_name = "llvm"
    with pytest.raises(TypeError):
        t.options["mcpu"] = "x"
    assert len({t, Target("c -mcpu=cortex-m0"), Target({"kind": "c", "mcpu": "cortex-m0"})}) == 1
    assert t.with_options({"opt-level": 0}) == Target("c -mcpu=cortex-m0 -opt-level=0")
    assert str(t) == "c -mcpu=cortex-m0"


def test_c_kind_gives_the_compiler_and_its_flags():
    m7 = Target("cortex-m7f")
    flags, cc = m7.backend.compiler_flags, m7.backend.compiler
    assert flags(m7) == ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard", "-O2"]
    assert cc(m7) == "arm-none-eabi-gcc"
    assert flags(m7, host_simulation=True) == ["-O2"] and cc(m7, host_simulation=True) == "gcc"
    m0 = Target("cortex-m0 -opt-level=3")
    assert flags(m0) == ["-mcpu=cortex-m0", "-mthumb", "-O3"]
    host = Target("c -cc=clang -opt-level=1")
    assert (cc(host), flags(host)) == ("clang", ["-O1"])
    assert flags(Target("cortex-m55")) == ["-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard", "-O2"]


_C_OPTIONS = {
    "mcpu": st.sampled_from(["", "cortex-m0", "cortex-m4f", "cortex-m7f", "cortex-m7", "cortex-m55", "znver3"]),
    "march": st.sampled_from(["", "armv7e-m"]),
    "mfpu": st.sampled_from(["", "fpv5-d16"]),
    "mfloat-abi": st.sampled_from(["", "softfp", "hard"]),
    "opt-level": st.integers(0, 3),
    "cc": st.sampled_from(["", "gcc", "ccache gcc", "/opt/x y/gcc"]),
    "keys": st.lists(st.sampled_from(["cpu", "arm_cpu", "dsp"]), max_size=3, unique=True),
    "ram-kb": st.one_of(st.none(), st.integers(0, 1 << 20)),
    "flash-kb": st.one_of(st.none(), st.integers(0, 1 << 20)),
    "clock-mhz": st.one_of(st.none(), st.integers(1, 5000)),
    "simd-bits": st.one_of(st.none(), st.sampled_from([0, 128, 256, 512])),
    "fma-bits": st.one_of(st.none(), st.sampled_from([128, 256, 512])),
}


@settings(max_examples=150, deadline=None)
@given(base=st.sampled_from(["c", "cortex-m0", "cortex-m4f", "cortex-m7f", "cortex-m55", "host-c"]),
       options=st.fixed_dictionaries({}, optional=_C_OPTIONS))
def test_any_c_target_roundtrips(base, options):
    t = Target({("kind" if base == "c" else "tag"): base, **options})
    roundtrips(t)


# ---- composite targets ------------------------------------------------------------------------------


def test_the_seed_composite_parses_verbatim():
    c = CompositeTarget(SEED)
    assert c.names == ("low_power_cpu", "inference_cpu")
    assert c["low_power_cpu"] == Target("c -mcpu=cortex-m0")
    assert c["inference_cpu"] == Target("c -mcpu=cortex-m7f")
    assert c.piece("inference_cpu").target.facts.clock_mhz.value == 216
    assert c.host.name == "low_power_cpu"
    assert c.host_reason == "the first piece whose kind can run the executor"
    assert str(c) == ("low_power_cpu: c -mcpu=cortex-m0; "
                      "inference_cpu: c -mcpu=cortex-m7 -mfpu=fpv5-sp-d16 -mfloat-abi=hard")
    for back in (CompositeTarget(str(c)), CompositeTarget(c.to_dict()), CompositeTarget.from_json(c.to_json())):
        assert back == c and hash(back) == hash(c) and str(back) == str(c)


@pytest.mark.parametrize("text, canonical, host", [
    ("c", "c", "c"),
    ("cortex-m7f", "cortex-m7f", "c"),
    ("cpu: c", "cpu: c", "cpu"),
    ("a: cortex-m0;b: host ", "a: cortex-m0; b: host", "a"),
    ("mcu: cortex-m0; host: llvm", "mcu: cortex-m0; host: llvm", "host"),  # the piece called host
    ("a: cortex-m0; b: cortex-m7f; host: b", "a: cortex-m0; b: cortex-m7f; host: b", "b"),  # a reference
    ("host: b; a: c; b: llvm", "a: c; b: llvm; host: b", "b"),
])
def test_composite_forms(text, canonical, host):
    c = CompositeTarget(text)
    assert str(c) == canonical and c.host.name == host
    back = CompositeTarget(str(c))
    assert back == c and back.host.name == host
    assert CompositeTarget(c.to_dict()) == c


def test_plain_target_is_a_composite_with_one_piece():
    c = CompositeTarget(Target("cortex-m0"))
    assert len(c) == 1 and c.pieces == (Piece("c", Target("cortex-m0")),)
    assert c == CompositeTarget("cortex-m0") == CompositeTarget({"tag": "cortex-m0"})
    assert c.to_dict() == {"kind": "c", "tag": "cortex-m0"}
    assert c.host.target == Target("cortex-m0")


def test_composite_dict_and_json_forms():
    d = {"pieces": {"low_power_cpu": "c -mcpu=cortex-m0", "inference_cpu": {"kind": "c", "mcpu": "cortex-m7f"}},
         "host": "inference_cpu"}
    c = CompositeTarget(d)
    assert c == CompositeTarget(SEED + "; host: inference_cpu")
    assert c.host.name == "inference_cpu"
    assert CompositeTarget(json.dumps(d)) == c
    listed = {"pieces": [{"name": "low_power_cpu", "target": "c -mcpu=cortex-m0"},
                         {"name": "inference_cpu", "target": "cortex-m7f"}]}
    assert CompositeTarget(listed).names == ("low_power_cpu", "inference_cpu")


def test_placement_travels_in_the_piece_attribute_and_resolves_through_the_composite():
    from plait.ir.attrs import Attrs
    from plait.relay import Function, var
    from plait.target import PIECE_ATTR, piece_of, with_piece

    ct = CompositeTarget("a: c; b: c -mcpu=cortex-m7f")
    x = var("x", (2,))
    f = Function((x,), x, None, Attrs({"global_symbol": "f"}))
    assert PIECE_ATTR == "piece" and piece_of(f) is None
    assert ct.placed_on(f) is ct.host and ct.placed_on(f, ct.piece("b")) is ct.piece("b")
    g = with_piece(f, ct.piece("b"))
    assert piece_of(g) == "b" and g.attrs["global_symbol"] == "f" and piece_of(f) is None
    assert ct.placed_on(g) == Piece("b", Target("c -mcpu=cortex-m7f"))
    assert piece_of(with_piece(f, "a")) == "a"
    assert piece_of(Function((x,), x, None, Attrs({"piece": 3}))) is None  # not a piece name
    with pytest.raises(TargetError) as e:
        ct.placed_on(with_piece(f, "zz"))
    assert str(e.value) == (f"'f' is placed on piece 'zz', which composite target '{ct}' does not have "
                            "(its pieces: a, b)")
