"""Negative tests: every malformed target, option, composite or registration fails with this exact message."""

import shutil

import pytest

from plait.errors import PlaitError, RegistryError
from plait.target import (
    CompositeTarget, Fact, Option, Target, TargetError, get_kind, register_backend, register_tag,
)
from dataclasses import dataclass

from plait.target import option
from plait.target.testing import isolated_registry, make_backend, register_test_backend

C_OPTIONS = "-board, -cc, -clock-mhz, -flash-kb, -fma-bits, -int8-dot, -keys, -libm, -march, -mcpu, -mfloat-abi, -mfpu, -opt-level, -ram-kb, -requantize, -simd-bits"


def message(exc_type, fn, *args, **kwargs) -> str:
    with pytest.raises(exc_type) as e:
        fn(*args, **kwargs)
    assert isinstance(e.value, PlaitError)
    return str(e.value)


# ---- kinds and tags ---------------------------------------------------------------------------------


def test_unknown_kind_says_did_you_mean():
    assert message(RegistryError, Target, "cc -mcpu=cortex-m0") == \
        "unknown target kind or tag 'cc'; did you mean 'c'?"
    assert message(RegistryError, Target, "lvm") == "unknown target kind or tag 'lvm'; did you mean 'llvm'?"
    assert message(RegistryError, Target, "cortex-m7") == \
        "unknown target kind or tag 'cortex-m7'; did you mean 'cortex-m7f' or 'cortex-m0' or 'cortex-m55'?"
    assert message(RegistryError, Target, {"kind": "lvm"}) == "unknown target kind 'lvm'; did you mean 'llvm'?"
    assert message(RegistryError, Target, {"tag": "cortex-m4"}) == \
        "unknown target tag 'cortex-m4'; did you mean 'cortex-m4f' or 'cortex-m0' or 'cortex-m7f'?"
    assert message(RegistryError, Target, "zzz") == "unknown target kind or tag 'zzz'"


def test_unknown_option_lists_the_valid_ones():
    assert message(TargetError, Target, "c -mcpuu=cortex-m0") == \
        f"target kind 'c' has no option '-mcpuu' (did you mean '-mcpu'?); valid options: {C_OPTIONS}"
    assert message(TargetError, Target, "llvm -xyz=1") == \
        "target kind 'llvm' has no option '-xyz'; valid options: -clock-mhz, -flash-kb, -fma-bits, -keys, -mattr, -mcpu, " \
        "-ram-kb, -simd-bits"
    assert message(TargetError, Target, {"kind": "c", "cpu": "cortex-m0"}) == \
        f"target kind 'c' has no option '-cpu' (did you mean '-mcpu'?); valid options: {C_OPTIONS}"
    assert message(TargetError, Target, "cortex-m0 -opt=3") == \
        f"target kind 'c' has no option '-opt'; valid options: {C_OPTIONS}"


def test_bad_option_values():
    assert message(TargetError, Target, "c -opt-level=fast") == \
        "target kind 'c': option '-opt-level' expects an int, got 'fast'"
    assert message(TargetError, Target, "c -opt-level=5") == \
        "target kind 'c': option '-opt-level' must be one of 0, 1, 2, 3; got 5"
    assert message(TargetError, Target, {"kind": "c", "opt-level": "2"}) == \
        "target kind 'c': option '-opt-level' expects an int, got '2' (str)"
    assert message(TargetError, Target, {"kind": "c", "opt-level": True}) == \
        "target kind 'c': option '-opt-level' expects an int, got True (bool)"
    assert message(TargetError, Target, {"kind": "c", "mcpu": 7}) == \
        "target kind 'c': option '-mcpu' expects a str, got 7 (int)"
    assert message(TargetError, Target, {"kind": "c", "keys": "arm_cpu"}) == \
        "target kind 'c': option '-keys' expects a list of strings, got 'arm_cpu' (str)"
    assert message(TargetError, Target, "c -keys=arm_cpu,,cpu") == \
        "target kind 'c': option '-keys': list item '' must be non-empty and contain no ',' or spaces"
    assert message(TargetError, Target, "c -mfloat-abi=hardd") == \
        "target kind 'c': option '-mfloat-abi' must be one of '', 'soft', 'softfp', 'hard'; got 'hardd'"
    assert message(TargetError, Target, "c -mcpu") == \
        "target kind 'c': option '-mcpu' needs a value: write -mcpu=<str>"
    with isolated_registry():
        register_test_backend("flagged", options=(Option("fast", bool, False, "go fast"),))
        assert message(TargetError, Target, "flagged -fast=maybe") == \
            "target kind 'flagged': option '-fast' expects true or false, got 'maybe'"


def test_malformed_target_strings():
    assert message(TargetError, Target, "") == "empty target string"
    assert message(TargetError, Target, "   ") == "empty target string"
    assert message(TargetError, Target, "-mcpu=cortex-m0") == \
        "target '-mcpu=cortex-m0' starts with the option '-mcpu=cortex-m0'; a target starts with a kind or a tag, " \
        "e.g. 'c -mcpu=cortex-m0'"
    assert message(TargetError, Target, "c mcpu=cortex-m0") == \
        "target 'c mcpu=cortex-m0': expected an option like -name=value after 'c', got 'mcpu=cortex-m0'"
    assert message(TargetError, Target, "c -mcpu=a -mcpu=b") == \
        "target 'c -mcpu=a -mcpu=b': option '-mcpu' is given twice"
    assert message(TargetError, Target, "c -cc='gcc") == "target 'c -cc='gcc': No closing quotation"
    assert message(TargetError, Target, 3) == \
        "cannot make a Target from int: expected a target string, a dict or a Target"
    assert message(TargetError, Target, {"mcpu": "cortex-m0"}) == \
        "target {'mcpu': 'cortex-m0'} needs a 'kind' or a 'tag' key"
    assert message(TargetError, Target, {"kind": "llvm", "tag": "cortex-m0"}) == \
        "target {'kind': 'llvm', 'tag': 'cortex-m0'}: tag 'cortex-m0' is of kind 'c', not 'llvm'"
    assert message(TargetError, Target, '{"kind": "c", "kind": "llvm"}') == "target JSON: duplicate key 'kind'"
    assert message(TargetError, Target, '{"kind": "c",}') == \
        "target JSON: Expecting property name enclosed in double quotes: line 1 column 14 (char 13)"


def test_f_suffix_conflicts():
    assert message(TargetError, Target, "c -mcpu=cortex-m7f -mfpu=none") == \
        "-mcpu=cortex-m7f means cortex-m7 with its single-precision FPU (-mfpu=fpv5-sp-d16); " \
        "it conflicts with -mfpu=none"
    assert message(TargetError, Target, "cortex-m4f -mfloat-abi=soft") == \
        "-mcpu=cortex-m4f means cortex-m4 with its single-precision FPU (-mfpu=fpv4-sp-d16); " \
        "it conflicts with -mfloat-abi=soft"


def test_kind_and_tag_registration_errors():
    assert message(RegistryError, register_backend, make_backend("c")) == "target kind 'c' is already registered"
    assert message(RegistryError, register_backend, make_backend("cortex-m0")) == \
        "target kind 'cortex-m0' clashes with the target tag of the same name"
    assert message(TargetError, register_backend, make_backend("Bad Name")) == \
        "target kind name 'Bad Name' must start with a lowercase letter and use lowercase letters, digits, " \
        "'_', '.' or '-'"
    @dataclass(frozen=True)
    class Twice:
        a: str = option("", "one")
        b: str = option("", "the same option again", name="a")

    assert message(TargetError, register_backend, make_backend("twice", Options=Twice)) == \
        "target kind 'twice': option 'a' is declared twice"
    assert message(TargetError, register_backend, make_backend("floaty", Options=dataclass(
        type("F", (), {"__annotations__": {"x": float}, "x": option(1.0, "no floats")})))) == \
        "option field 'x' of F: type must be str, int, bool or tuple[str, ...], got <class 'float'>"
    assert message(TargetError, Option, "n", float) == \
        "option 'n': type must be str, int, bool or list, got <class 'float'>"
    facts = {n: Fact(1, "", "test") for n in ("clock_mhz", "fpu", "simd_bits", "ram_kb", "flash_kb", "power_mw")}
    with isolated_registry():
        assert message(RegistryError, register_tag, "c", "c", {}, facts) == \
            "target tag 'c' clashes with the target kind of the same name"
        assert message(RegistryError, register_tag, "cortex-m0", "c", {}, facts) == \
            "target tag 'cortex-m0' is already registered"
        assert message(TargetError, register_tag, "t1", "c", {}, {**facts, "power_mw": Fact(1, "mW", " ")}) == \
            "target tag 't1': fact 'power_mw' has no source"
        assert message(TargetError, register_tag, "t2", "c", {}, {k: v for k, v in facts.items() if k != "fpu"}) \
            == "target tag 't2': missing facts: fpu"
        assert message(TargetError, register_tag, "t3", "c", {}, {**facts, "mips": Fact(1, "", "x")}) == \
            "target tag 't3': unknown facts: mips; valid facts: clock_mhz, fpu, simd_bits, ram_kb, flash_kb, power_mw, " \
            "cores, fma_bits"
        assert message(TargetError, register_tag, "t4", "c", {"opt-level": 9}, facts) == \
            "target tag 't4': option '-opt-level' must be one of 0, 1, 2, 3; got 9"


# ---- composite targets ------------------------------------------------------------------------------


def test_duplicate_piece_name():
    assert message(TargetError, CompositeTarget, "cpu: c; cpu: llvm") == \
        "composite target: duplicate piece name 'cpu'"
    assert message(TargetError, CompositeTarget, '{"pieces": {"cpu": "c", "cpu": "llvm"}}') == \
        "composite target JSON: duplicate key 'cpu'"
    assert message(TargetError, CompositeTarget, {"pieces": [{"name": "a", "target": "c"},
                                                             {"name": "a", "target": "llvm"}]}) == \
        "composite target: duplicate piece name 'a'"


def test_empty_piece():
    assert message(TargetError, CompositeTarget, "a: c;; b: llvm") == "composite target: piece 2 is empty"
    assert message(TargetError, CompositeTarget, "a: c; b: llvm;") == "composite target: piece 3 is empty"
    assert message(TargetError, CompositeTarget, "a: ; b: llvm") == "composite target: piece 'a' is empty"
    assert message(TargetError, CompositeTarget, {"pieces": {"a": " "}}) == "composite target: piece 'a' is empty"
    assert message(TargetError, CompositeTarget, {"pieces": {}}) == "composite target dict: 'pieces' is empty"
    assert message(TargetError, CompositeTarget, "") == "empty target string"


def test_malformed_composites():
    assert message(TargetError, CompositeTarget, "a: c; llvm") == \
        "composite target: piece 2 ('llvm') has no name; write 'name: target'"
    assert message(TargetError, CompositeTarget, "low-power: c") == \
        "composite target: piece name 'low-power' must be an identifier (letters, digits and '_', not starting " \
        "with a digit)"
    assert message(RegistryError, CompositeTarget, "a: c; b: cc") == \
        "composite target: piece 'b': unknown target kind or tag 'cc'; did you mean 'c'?"
    assert message(TargetError, CompositeTarget, "a: c -opt-level=x") == \
        "composite target: piece 'a': target kind 'c': option '-opt-level' expects an int, got 'x'"
    assert message(TargetError, CompositeTarget, {"pieces": {"a": "c"}, "host": "b"}) == \
        "composite target dict: 'host' names the piece 'b', which does not exist; pieces: a"
    assert message(TargetError, CompositeTarget, {"targets": {}}) == \
        "composite target dict: expected keys 'pieces' and optionally 'host', 'transfer', got 'targets'"
    assert message(RegistryError, CompositeTarget("a: c").piece, "b") == "unknown piece 'b'"


def test_missing_host_where_one_is_required():
    with isolated_registry():
        register_test_backend("npu_only", device_type="npu", can_host=False, doc="cannot run an executor")
        c = CompositeTarget("a: npu_only; b: npu_only")  # fine for placement experiments...
        assert c.host_reason == "no piece's kind can run the executor"
        assert message(TargetError, lambda: c.host) == \
            "composite target 'a: npu_only; b: npu_only' has no host: no piece's kind can run the executor; " \
            "add a piece that can, e.g. 'host: c'"
        assert message(TargetError, CompositeTarget, "a: npu_only", require_host=True) == \
            "composite target 'a: npu_only' has no host: no piece's kind can run the executor; " \
            "add a piece that can, e.g. 'host: c'"
        assert message(TargetError, CompositeTarget, "host: npu_only; b: c") == \
            "composite target: the host piece 'host' (the piece called 'host') cannot run the executor: " \
            "target kind 'npu_only' cannot host"
        assert message(TargetError, CompositeTarget, "a: npu_only; b: c; host: a") == \
            "composite target: the host piece 'a' (named by the entry 'host: a') cannot run the executor: " \
            "target kind 'npu_only' cannot host"
        assert CompositeTarget("a: npu_only; b: c").host.name == "b"


# ---- -mcpu is checked when the target is parsed --------------------------------------------------

needs_arm_gcc = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None,
                                   reason="arm-none-eabi-gcc is not installed (.ci/run installs it)")
TRANSLATES = "; plait also translates cortex-m4f, cortex-m7f, cortex-m33f (the core with its FPU)"


def test_a_typo_in_mcpu_is_a_target_error_with_did_you_mean():
    assert message(TargetError, Target, "c -mcpu=cortx-m0") == (
        "target 'c -mcpu=cortx-m0': -mcpu=cortx-m0 is not a CPU that gcc accepts (did you mean 'cortex-m0' or "
        f"'cortex-m7' or 'cortex-m4'?){TRANSLATES}")
    assert message(TargetError, Target, {"kind": "c", "mcpu": "cortx-m0"}) == (
        "target {'kind': 'c', 'mcpu': 'cortx-m0'}: -mcpu=cortx-m0 is not a CPU that gcc accepts (did you mean "
        f"'cortex-m0' or 'cortex-m7' or 'cortex-m4'?){TRANSLATES}")
    assert message(TargetError, CompositeTarget, "a: c; b: c -mcpu=cortx-m0").startswith(
        "composite target: piece 'b': target 'c -mcpu=cortx-m0': -mcpu=cortx-m0 is not a CPU that gcc accepts")
    # a compiler that cannot be asked: plait's own list
    assert message(TargetError, Target, "c -mcpu=cortx-m0 -cc=/nonexistent/cc") == (
        "target 'c -mcpu=cortx-m0 -cc=/nonexistent/cc': -mcpu=cortx-m0 is not a CPU plait knows (did you mean "
        f"'cortex-m0' or 'cortex-m7' or 'cortex-m4'?) (/nonexistent/cc could not be asked){TRANSLATES}")
    assert message(TargetError, Target, "llvm -mcpu=znver0").startswith(
        "target 'llvm -mcpu=znver0': -mcpu=znver0 is not a CPU that LLVM accepts (did you mean 'znver")
    # what plait translates, and what the compilers know, is accepted
    for ok in ("c -mcpu=cortex-m7f", "c -mcpu=cortex-m4f", "c -mcpu=cortex-m33", "c -mcpu=skylake",
               "c -mcpu=native", "llvm -mcpu=x86-64-v3", "llvm -mcpu=znver3"):
        Target(ok)


@needs_arm_gcc
def test_a_cortex_m_name_is_asked_of_the_cross_compiler_once():
    from plait.target.cpus import compiler_cpus

    compiler_cpus.cache_clear()
    Target("c -mcpu=cortex-m0plus")  # in plait's own list: nothing runs
    assert compiler_cpus.cache_info().misses == 0
    assert message(TargetError, Target, "c -mcpu=cortex-m52") == (
        "target 'c -mcpu=cortex-m52': -mcpu=cortex-m52 is not a CPU that arm-none-eabi-gcc accepts (did you mean "
        f"'cortex-r52' or 'cortex-m55' or 'cortex-m23'?){TRANSLATES}")
    Target("c -mcpu=cortex-m1.small-multiply")
    assert compiler_cpus.cache_info().misses == 1  # asked once per process


def test_check_cpu_without_any_compiler():
    from plait.target.cpus import check_cpu

    check_cpu("a1", frozenset({"a1"}), [("cc", lambda: 1 / 0)])  # plait's list first: the compiler is not asked
    check_cpu("b2", frozenset(), [("cc", lambda: frozenset({"b2"}))])
    with pytest.raises(TargetError) as e:
        check_cpu("core3", frozenset({"a1"}), [("cc", lambda: None)], suggestions=["core2"])
    assert str(e.value) == "-mcpu=core3 is not a CPU plait knows (did you mean 'core2'?) (cc could not be asked)"
