"""Building C: flags per target, the compile cache, compile errors, the c kind's build attribute,
Cortex-M cross builds (object attributes) and host simulation."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from plait import tir
from plait.backends.c import backend as cbackend
from plait.backends.c.backend import (BASE_FLAGS, CONTRACT_FAST, CONTRACT_OFF, X86_HOST_FLAGS, build_c, codegen_c,
                                     compiler_and_flags, host_flags, host_is_x86_64, vector_math_available)
from plait.errors import PlaitError
from plait.ir.transform import PassContext
from plait.relay.module import IRModule
from plait.runtime import CrossModule, CSourceModule, DSOModule
from plait.runtime import cc as ccmod
from plait.runtime.cc import CompileError
from plait.target import Target, run_tir_to_runtime
from plait.tir import Buffer, PrimFunc
from tir.fixtures import FIXTURES

from .conftest import needs_arm, run_c, run_ref

KERNELS = ("matmul", "conv2d", "softmax_workspace", "all_dtypes", "lets_and_selects", "symbolic", "zero_dim")


@pytest.mark.parametrize("target,cc,flags", [
    ("c", "gcc", ["-O3", "-march=native"]),
    ("c -opt-level=1", "gcc", ["-O1", "-march=native"]),
    ("c -opt-level=0", "gcc", ["-O0", "-march=native"]),
    ("c -march=haswell", "gcc", ["-O3", "-march=haswell"]),
    ("c -cc=clang", "clang", ["-O3", "-march=native"]),
    ("c -mcpu=cortex-m0", "arm-none-eabi-gcc", ["-mcpu=cortex-m0", "-mthumb", "-O2", "-ffunction-sections",
                                                "-fdata-sections"]),
    ("c -mcpu=cortex-m7f", "arm-none-eabi-gcc", ["-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-sp-d16",
                                                 "-mfloat-abi=hard", "-O2", "-ffunction-sections", "-fdata-sections"]),
])
def test_compiler_and_flags(target, cc, flags):
    got_cc, got_flags, cross = compiler_and_flags(Target(target))
    arm = cc.startswith("arm")
    host_extra = [*X86, *VM] if not arm else []
    contract = CONTRACT_OFF if arm else CONTRACT_FAST  # a Cortex-M piece's C is never contracted (bit-exactness)
    assert (got_cc, got_flags, cross) == (cc, [*BASE_FLAGS, contract, *flags, *host_extra], arm)


VM = ["-DPLAIT_VECTOR_MATH"] if vector_math_available() else []  # glibc's libmvec, host builds only
X86 = list(X86_HOST_FLAGS) if host_is_x86_64() else []  # gcc 12's misaligned red-zone arrays (backend.py)


def test_host_simulation_flags_are_the_host_build_without_contraction_or_vector_math():
    # a simulated Cortex-M piece rounds like its core: no FMA, scalar libm (no libmvec)
    assert compiler_and_flags(Target("c -mcpu=cortex-m7f"), host_simulation=True) == \
        ("gcc", [*BASE_FLAGS, CONTRACT_OFF, "-O3", "-march=native", *X86], False)
    assert BASE_FLAGS == ("-std=c99", "-fno-math-errno", "-fopenmp-simd")
    assert (CONTRACT_FAST, CONTRACT_OFF) == ("-ffp-contract=fast", "-ffp-contract=off")
    # a C source module compiles with the host flags of its target unless told otherwise
    assert codegen_c([FIXTURES["matmul"]()], Target("c -mcpu=cortex-m0")).compile_flags == \
        (*BASE_FLAGS, CONTRACT_OFF, "-O3", "-march=native", *X86)
    assert host_flags("c") == [*BASE_FLAGS, CONTRACT_FAST, "-O3", "-march=native", *X86, *VM]


def test_the_c_kind_builds_through_its_tir_to_runtime_hook(cache_dir):
    t = Target("c")
    assert list(t.kind.hooks) == ["tir_to_runtime"]
    funcs = {"mm": FIXTURES["matmul"](), "prod": FIXTURES["zero_dim"]()}
    nameless = FIXTURES["zero_dim"]().with_attrs(global_symbol=None)
    mod = IRModule({**funcs, "anon": PrimFunc(nameless.params, nameless.body, {})})
    lib = run_tir_to_runtime(t, mod, PassContext(config={"cc.cache_dir": str(cache_dir)}))
    assert isinstance(lib, DSOModule)
    assert lib.function_names() == ["anon", "matmul", "prod"]
    assert str(lib.path).startswith(str(cache_dir))
    a, b, c = np.ones((4, 5), np.float32), np.ones((5, 6), np.float32), np.zeros((4, 6), np.float32)
    lib["matmul"](a, b, c)
    np.testing.assert_array_equal(c, np.full((4, 6), 5.0, np.float32))


def test_compile_cache_reuses_the_library(cache_dir, monkeypatch):
    f = FIXTURES["matmul"]()
    first = build_c([f], cache_dir=cache_dir)

    def no_compiler(*args, **kwargs):
        raise AssertionError("the compiler ran although the library is cached")

    monkeypatch.setattr(ccmod.subprocess, "run", no_compiler)
    again = build_c([FIXTURES["matmul"]()], cache_dir=cache_dir)
    assert again.path == first.path


def test_native_cpu_is_part_of_the_cache_key(monkeypatch):
    key = ccmod._key("int x;", "gcc", ["-march=native"], "so")
    monkeypatch.setattr(ccmod, "native_flags", lambda cc: "cc1 -march=some-other-cpu")
    assert ccmod._key("int x;", "gcc", ["-march=native"], "so") != key
    assert ccmod._key("int x;", "gcc", ["-O2"], "so") == ccmod._key("int x;", "gcc", ["-O2"], "so")


def test_compile_errors_name_the_primfunc(cache_dir):
    X, Y = Buffer("X", (2,)), Buffer("Y", (2,))
    i = tir.Var("i")
    bad = tir.call_extern("float32", "sqrtf", X[i], X[i])  # the header's sqrtf takes one argument
    funcs = [FIXTURES["matmul"](), PrimFunc((X, Y), tir.For(i, 0, 2, "serial", Y.store(i, bad)),
                                            {"global_symbol": "bad \"kernel\""})]
    with pytest.raises(CompileError) as e:
        build_c(funcs, cache_dir=cache_dir)
    msg = str(e.value)
    assert msg.startswith("the C code of PrimFunc 'bad \"kernel\"' (C function 'bad__kernel_') does not compile "
                          "for target 'c': compiling 'module' with gcc failed:\n")
    assert "too many arguments to function" in msg and "matmul" not in msg


def test_manifest_survives_trigraphs_in_the_module_name(cache_dir):
    src = CSourceModule('#include <stdint.h>\nint32_t f(void) { return 0; }\n', {"f": ()}, name='odd??/"name"??=')
    lib = src.compile(flags=["-std=c99", "-O1"], cache_dir=cache_dir)
    assert lib.name == 'odd??/"name"??=' and lib.signatures == {"f": ()}


def test_host_simulation_of_a_cortex_m_target_runs(cache_dir):
    funcs = [FIXTURES[k]() for k in ("conv2d", "softmax_workspace")]
    rng = np.random.default_rng(1)
    args = [[rng.standard_normal((1, 2, 5, 5)).astype(np.float32), rng.standard_normal((3, 2, 3, 3)).astype(np.float32),
             np.zeros((1, 3, 3, 3), np.float32)], [rng.standard_normal(8).astype(np.float32), np.zeros(8, np.float32)]]
    got = run_c(funcs, args, cache_dir, target="c -mcpu=cortex-m7f", host_simulation=True)
    for f, a, g in zip(funcs, args, got):
        np.testing.assert_allclose(g[-1], run_ref(f, a)[-1], rtol=1e-5, atol=1e-6)
    ctx = PassContext(config={"cc.cache_dir": str(cache_dir), "c.host_simulation": True, "c.cross_check": False})
    lib = run_tir_to_runtime(Target("c -mcpu=cortex-m0"), IRModule({"conv2d": funcs[0]}), ctx)
    assert isinstance(lib, DSOModule) and getattr(lib, "cross_module", None) is None


def _readelf(path) -> str:
    return subprocess.run(["arm-none-eabi-readelf", "-A", str(path)], capture_output=True, text=True,
                          check=True).stdout


@needs_arm
def test_cortex_m0_builds_a_soft_float_thumb1_object(cache_dir):
    obj = build_c([FIXTURES[k]() for k in KERNELS], "c -mcpu=cortex-m0", cache_dir=cache_dir)
    assert isinstance(obj, CrossModule) and obj.object_path.suffix == ".o"
    assert obj.compiler == "arm-none-eabi-gcc" and "-mcpu=cortex-m0" in obj.flags and "-mthumb" in obj.flags
    attrs = _readelf(obj.object_path)
    assert 'Tag_CPU_name: "6S-M"' in attrs and "Tag_THUMB_ISA_use: Thumb-1" in attrs
    assert "Tag_FP_arch" not in attrs and "Tag_ABI_VFP_args" not in attrs


@needs_arm
def test_cortex_m7f_builds_a_hard_float_object(cache_dir):
    obj = build_c([FIXTURES[k]() for k in KERNELS], "c -mcpu=cortex-m7f", cache_dir=cache_dir)
    attrs = _readelf(obj.object_path)
    assert "Tag_CPU_arch: v7E-M" in attrs and "Tag_FP_arch: FPv5/FP-D16 for ARMv8" in attrs
    assert "Tag_ABI_VFP_args: VFP registers" in attrs and "Tag_ABI_HardFP_use: SP only" in attrs
    nm = subprocess.run(["arm-none-eabi-nm", str(obj.object_path)], capture_output=True, text=True).stdout
    assert {"matmul", "conv2d", "softmax", "plait_manifest"} <= {ln.split()[-1] for ln in nm.splitlines() if ln}
    with pytest.raises(PlaitError) as e:
        obj["matmul"]
    assert str(e.value) == ("function 'matmul' was compiled by arm-none-eabi-gcc for target 'c -mcpu=cortex-m7 "
                            "-mfpu=fpv5-sp-d16 -mfloat-abi=hard' and cannot run in this process; build with "
                            "host_simulation=True to run it on the host")
    # the same source, compiled for the host, runs (host simulation from the cross module)
    sim = obj.compile(cache_dir=cache_dir)
    x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    sim["softmax"](x, y)
    np.testing.assert_allclose(y, np.exp(x) / np.exp(x).sum(), rtol=1e-6)


@needs_arm
def test_cross_compile_errors_name_the_primfunc(cache_dir):
    X = Buffer("X", (1,))
    f = PrimFunc((X,), X.store(0, tir.call_extern("float32", "expf", X[0], X[0])), {"global_symbol": "two_args"})
    with pytest.raises(CompileError) as e:
        build_c([f], "c -mcpu=cortex-m4f", cache_dir=cache_dir)
    assert str(e.value).startswith("the C code of PrimFunc 'two_args' does not compile for target 'c -mcpu=cortex-m4 "
                                   "-mfpu=fpv4-sp-d16 -mfloat-abi=hard': compiling 'module' with arm-none-eabi-gcc "
                                   "failed:\n")


def test_build_rejects_non_primfuncs():
    with pytest.raises(cbackend.CodegenError) as e:
        codegen_c([FIXTURES["matmul"](), "nope"])
    assert str(e.value) == "codegen_c expects PrimFuncs, got str at position 1"
