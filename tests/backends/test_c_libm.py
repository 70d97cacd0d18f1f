"""plait's float32 math routines (plait/backends/c/libm/) against numpy's float64 functions, and the c
kind's ``-libm`` option.

Each routine runs over 10^6 inputs (a third random bit patterns, the rest dense samples of the ranges
where it changes branch, plus every special value: zeros, subnormal and normal extremes, infinities,
NaNs, overflow and underflow thresholds, domain edges; pairs for pow and atan2) in one C loop called
through ctypes. The bound is the ulp distance from the float64 result rounded to float32 (2, pow 4,
fma 0: exact); special values must be exact (NaN for NaN, the sign of a zero or an infinity). The
exhaustive sweeps over all 2^32 inputs per unary function are ``long`` (minutes each)."""

from __future__ import annotations

import ctypes
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import plait
from plait.backends.c import libm
from plait.backends.c.backend import codegen_c, libm_mode
from plait.target import Target
from plait.target.errors import TargetError
from plait.testing import libm_cases as L

N = 10**6


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


@pytest.fixture(scope="module")
def lib(cache):
    return L.host_library(L.NAMES, flags=("-O2", "-ffp-contract=off"), cache_dir=cache)


def _args(name: str, n: int = N) -> tuple[np.ndarray, ...]:
    if name in L.UNARY:
        return (L.inputs(name, n),)
    return L.pair_inputs(name, n)


def _exact_where(args: tuple[np.ndarray, ...], want: np.ndarray) -> np.ndarray:
    """Results that must be exact: zeros, infinities and NaNs, and every result of a special argument."""
    mask = ~np.isfinite(want) | (want == 0)
    for a in args:
        mask |= ~np.isfinite(a) | (a == 0)
    return mask


@pytest.mark.parametrize("name", L.UNARY + L.BINARY)
def test_routine_is_within_its_ulp_bound_and_exact_on_special_values(name, lib):
    args = _args(name)
    assert args[0].size >= N
    got = lib.run(name, *args)
    want = L.reference(name, *args)
    d = L.ulp_distance(got, want)
    worst = int(np.argmax(d))
    assert d[worst] <= L.BOUND[name], (f"{name}{tuple(float(a[worst]) for a in args)} = {got[worst]!r}, "
                                       f"want {want[worst]!r}: {d[worst]} ulp")
    special = _exact_where(args, want)
    bad = special & (d != 0)
    assert not bad.any(), [(tuple(float(a[i]) for a in args), got[i], want[i]) for i in np.flatnonzero(bad)[:5]]
    signs = special & ~np.isnan(want) & (np.signbit(got) != np.signbit(want))
    assert not signs.any()


def test_special_values_cover_the_edges():
    s = L.special_values()
    assert np.isnan(s).any() and np.isposinf(s).any() and np.isneginf(s).any()
    bits = set(s.view(np.uint32).tolist())
    assert {0x00000000, 0x80000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF} <= bits


def test_fma_is_exact(lib):
    rng = np.random.default_rng(3)
    n = N // 4

    def bits():
        return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)

    a2, b2 = (rng.uniform(-4, 4, n).astype(np.float32) for _ in range(2))
    near = (-(a2.astype(np.float64) * b2) * (1 + rng.uniform(-1e-6, 1e-6, n))).astype(np.float32)  # cancellation
    tiny = (rng.uniform(-1, 1, n) * 2.0 ** rng.integers(-60, 10, n)).astype(np.float32)  # sticky bits
    sub = (rng.uniform(-1, 1, n) * 2.0 ** -130).astype(np.float32)  # subnormal results
    a = np.concatenate([bits(), a2, a2, sub * 2**60])
    b = np.concatenate([bits(), b2, b2, np.full(n, 2.0**-60, np.float32)])
    c = np.concatenate([bits(), near, tiny, sub])
    got, want = lib.run("fma", a, b, c), lib.run("plait_r_fma", a, b, c)
    d = L.ulp_distance(got, want)
    assert d.max() == 0, (a[np.argmax(d)], b[np.argmax(d)], c[np.argmax(d)])
    ok = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


def _cpu_has_fma() -> bool:
    try:
        return " fma " in Path("/proc/cpuinfo").read_text().replace("\n", " ")
    except OSError:
        return False


def test_routines_give_the_same_bits_at_O0_and_O3_native_with_contraction(cache):
    """The routines' own ``optimize("fp-contract=off")``: a host piece with -libm=plait is built with
    -O3 -march=native -ffp-contract=fast and must still compute the Cortex-M pieces' bits."""
    slow = L.host_library(L.NAMES, flags=("-O0",), cache_dir=cache)
    fast = L.host_library(L.NAMES, flags=("-O3", "-march=native", "-ffp-contract=fast"), cache_dir=cache)
    rng = np.random.default_rng(5)
    for name in L.NAMES:
        if name == "fma":
            args = tuple(rng.integers(0, 2**32, 10**5, dtype=np.uint64).astype(np.uint32).view(np.float32)
                         for _ in range(3))
        else:
            args = _args(name, 10**5)
        assert np.array_equal(slow.run(name, *args).view(np.uint32), fast.run(name, *args).view(np.uint32)), name


@pytest.mark.skipif(not _cpu_has_fma(), reason="the control needs a CPU with FMA (contraction changes nothing without)")
def test_without_the_attribute_contraction_changes_the_bits(cache):
    """The control of the test above: the same C without ``optimize("fp-contract=off")`` differs."""
    from plait.runtime.cc import compile_source

    src = L.routines_source(L.UNARY).replace('__attribute__((optimize("fp-contract=off")))', "")
    path = compile_source(src, name="plait_libm_contracted", flags=["-std=c99", "-fno-math-errno", "-O3",
                                                                    "-march=native", "-ffp-contract=fast"],
                          cache_dir=cache, link_flags=("-lm",))
    contracted = L.HostLibrary(ctypes.CDLL(str(path)))
    slow = L.host_library(L.NAMES, flags=("-O0",), cache_dir=cache)
    x = L.inputs("tan", 10**5)
    assert not np.array_equal(slow.run("tan", x).view(np.uint32), contracted.run("tan", x).view(np.uint32))


# ---- the -libm option and the generated C -----------------------------------------------------------

def _c_of(target: str) -> str:
    import onnx
    from onnx import TensorProto, helper

    from plait.frontend.onnx import from_onnx

    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 8]) for n in ("x", "y")]
    nodes = [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Erf", ["t"], ["e"]),
             helper.make_node("Pow", ["e", "x"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", io[:1], io[1:]), opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    art = plait.build(from_onnx(model), target, executor="aot", config={"aot.name": "m"})
    return "".join(v for k, v in sorted(art.files.items()) if k.endswith(".c"))


@pytest.mark.parametrize("target, mode", [("c -mcpu=cortex-m7f", "plait"), ("c -mcpu=cortex-m0", "plait"),
                                          ("c", "system"), ("c -libm=plait", "plait"),
                                          ("c -mcpu=cortex-m55 -libm=system", "system")])
def test_generated_c_calls_plaits_routines_on_cortex_m_and_libm_on_the_host(target, mode):
    assert libm_mode(Target(target)) == mode
    src = _c_of(target)
    ours = all(f"plait_c_{f}f(" in src for f in ("tanh", "erf", "pow"))
    theirs = [f for f in ("tanhf(", "erff(", "powf(") if re.search(r"(?<![A-Za-z0-9_])" + re.escape(f), src)]
    if mode == "plait":
        assert ours and not theirs
        assert "static inline __attribute__((optimize(\"fp-contract=off\")))" in src
        assert "plait_c_sinf" not in src  # only the routines the module uses
    else:
        assert not ours and theirs == ["tanhf(", "erff(", "powf("]
    assert _c_of(target) == src  # deterministic


def test_bad_libm_value_is_the_standard_option_error():
    with pytest.raises(TargetError) as e:
        Target("c -mcpu=cortex-m7f -libm=newlib")
    assert str(e.value) == "target kind 'c': option '-libm' must be one of '', 'plait', 'system'; got 'newlib'"


def test_routine_table_covers_the_inexact_float_intrinsics():
    from plait.tir.intrin import INTRINSICS

    exact = {"sqrt", "fabs", "floor", "ceil", "trunc", "round", "nearbyint", "fmod", "copysign", "rsqrt",
             "isnan", "isinf", "isfinite"}
    assert set(libm.ROUTINE_OF) == {n for n in INTRINSICS if n not in exact}
    assert set(L.NAMES) == set(libm.ROUTINE_OF)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_every_intrinsic_with_plaits_routines_matches_the_system_libm(dtype, cache):
    """TIR's intrinsics (every arity; float16 through the float32 routine) emitted with -libm=plait run
    on the host and agree with libm's within the routines' bounds; without a target, libm is called."""
    from plait import tir
    from plait.backends.c.backend import build_c, c_function_names

    from .test_c_semantics import UNARY_DOMAIN, elementwise

    rng = np.random.default_rng(7)
    names, n = list(tir.INTRINSICS), 256
    outs, inputs = [], []
    for k, name in enumerate(names):
        intr = tir.get_intrinsic(name)
        lo, hi = UNARY_DOMAIN.get(name, (-3.0, 3.0))
        inputs.append(rng.uniform(lo, hi, n).astype(dtype))
        fn = (lambda i, *x, k=k, name=name, a=intr.arity: tir.call_intrin(name, *([x[k], x[-1], x[k]][:a])))
        outs.append((intr.result_dtype(dtype), fn))
    inputs.append(rng.uniform(0.5, 2.0, n).astype(dtype))
    f = elementwise(f"libm_{dtype}", [dtype] * (len(names) + 1), outs, n)
    assert "plait_c_expf" not in codegen_c([f]).source and "expf(" in codegen_c([f]).source
    assert "plait_c_expf(" in codegen_c([f], "c -libm=plait").source
    results = []
    for target in ("c", "c -libm=plait"):
        lib = build_c([f], target, cache_dir=cache)
        args = [*(x.copy() for x in inputs), *(np.zeros(n, b.dtype) for b in f.params[len(inputs):])]
        lib[c_function_names([f])[0]](*args)
        results.append(args[len(inputs):])
    tol = 4 if dtype == "float32" else 1
    for name, mine, system in zip(names, *results):
        if mine.dtype == np.bool_:
            assert np.array_equal(mine, system), name
        else:
            if dtype == "float32":
                d = L.ulp_distance(mine, system)
            else:  # float16 steps; NaN equal to NaN (plait's NaN is positive, x86's negative)
                d = np.abs(mine.view(np.int16).astype(np.int64) - system.view(np.int16).astype(np.int64))
                d = np.where(np.isnan(mine) & np.isnan(system), 0, d)
            assert d.max() <= tol, name


# ---- long: every float32 input -------------------------------------------------------------------

@pytest.mark.long
@pytest.mark.parametrize("name", L.UNARY)
def test_exhaustive_sweep(name, lib):
    d, worst = lib.sweep(name)
    assert d <= L.BOUND[name], f"{name}({worst!r}): {d} ulp"


@pytest.mark.long
def test_fitted_constants_are_reproducible():
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "bench" / "libm_fit.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
