"""The TIR fixtures compiled to C and run against the TIR interpreter; shape of the generated C."""

from __future__ import annotations

import re

import numpy as np
import pytest

from plait import tir
from plait.backends.c.backend import build_c, c_function_names, codegen_c
from plait.runtime import CSourceModule
from plait.runtime.cc import compile_source
from tir.fixtures import ALL_DTYPES, FIXTURES

from .conftest import HAVE_ARM, assert_same, run_c, run_ref

RNG = np.random.default_rng(7)

SGEMM_C = """
void plait_sgemm(int32_t m, int32_t n, int32_t k, void* a, void* b, void* c) {
  const float* A = a; const float* B = b; float* C = c;
  for (int32_t i = 0; i < m; ++i)
    for (int32_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (int32_t r = 0; r < k; ++r) s += A[i * k + r] * B[r * n + j];
      C[i * n + j] = s;
    }
}
"""


def _sgemm(m, n, k, a, b, c):
    c[: m * n] = (a[: m * k].reshape(m, k) @ b[: k * n].reshape(k, n)).reshape(-1)


def args_for(func):
    """Random inputs for a fixture's buffers (scalar params: 3)."""
    env, out = {}, []
    for p in func.params:
        if isinstance(p, tir.Var):
            env[p] = 3
            out.append(3)
            continue
        shape = tuple(int(tir.evaluate_expr(d, env)) for d in p.shape)
        if p.dtype == "float32":
            a = (RNG.standard_normal(shape) * 4).astype(np.float32)
        elif p.dtype == "bool":
            a = RNG.random(shape) < 0.5
        else:
            a = RNG.integers(-9, 10, shape).astype(p.dtype) if p.dtype[0] != "u" else \
                RNG.integers(0, 10, shape).astype(p.dtype)
        out.append(np.asarray(a, p.dtype))
    return out


@pytest.mark.parametrize("name", [k for k in FIXTURES if k != "extern_gemm"])
def test_fixture_matches_interpreter(name, cache_dir):
    f = FIXTURES[name]()
    args = args_for(f)
    want = run_ref(f, args)
    (got,) = run_c([f], [args], cache_dir)
    assert_same(got, want, rtol=1e-5, atol=1e-5)


def test_all_fixtures_in_one_library(cache_dir):
    funcs = [FIXTURES[k]() for k in FIXTURES if k != "extern_gemm"]
    args = [args_for(f) for f in funcs]
    for f, a, got in zip(funcs, args, run_c(funcs, args, cache_dir)):
        assert_same(got, run_ref(f, a), rtol=1e-5, atol=1e-5)


def test_extern_call_links_with_a_c_implementation(cache_dir):
    f = FIXTURES["extern_gemm"]()
    src = codegen_c([f])
    assert "extern void plait_sgemm(int32_t, int32_t, int32_t, void*, void*, void*);" in src.source
    assert "plait_sgemm(2, 3, 4, &A[0], &B[0], &C[0]);" in src.source
    lib = CSourceModule(src.source + SGEMM_C, src.signatures, compile_flags=src.compile_flags).compile(
        cache_dir=cache_dir)
    args = args_for(f)
    want = run_ref(f, args, externs={"plait_sgemm": _sgemm})
    got = [a.copy() for a in args]
    lib["gemm_bias"](*got)
    assert_same(got, want, rtol=1e-5, atol=1e-5)


def test_generated_c_is_deterministic(cache_dir):
    texts = [codegen_c([FIXTURES[k]() for k in FIXTURES], "c").source for _ in range(2)]
    assert texts[0] == texts[1]
    paths = [build_c([FIXTURES["matmul"]()], cache_dir=cache_dir).path for _ in range(2)]
    assert paths[0] == paths[1]


@pytest.mark.parametrize("cc,flags", [("gcc", ["-O2"])] + ([("arm-none-eabi-gcc", [
    "-mcpu=cortex-m7", "-mthumb", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard", "-O2"])] if HAVE_ARM else []))
def test_generated_c_is_warning_free(cc, flags, cache_dir):
    src = codegen_c([FIXTURES[k]() for k in FIXTURES])
    compile_source(src.full_source(), name="warnings", cc=cc, shared=False, cache_dir=cache_dir,
                   flags=["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fopenmp-simd", *flags])


def test_only_the_four_headers_are_included():
    src = codegen_c([FIXTURES[k]() for k in FIXTURES]).source
    assert re.findall(r"#include <([^>]+)>", src) == ["math.h", "stdbool.h", "stddef.h", "stdint.h"]


def test_signatures_const_and_restrict():
    src = codegen_c([FIXTURES["matmul"](), FIXTURES["symbolic"](), FIXTURES["extern_gemm"]()])
    assert "int32_t matmul(const float* restrict A, const float* restrict B, float* restrict C) {" in src.source
    assert "int32_t symbolic(int64_t n, const float* restrict A, float* restrict B) {" in src.source
    # a buffer passed to an extern call may be written by it: not const
    assert "int32_t gemm_bias(float* restrict A, float* restrict B, const float* restrict bias, " \
           "float* restrict C) {" in src.source
    assert src.signatures == {"matmul": ("ptr", "ptr", "ptr"), "symbolic": ("int64", "ptr", "ptr"),
                              "gemm_bias": ("ptr",) * 4}
    assert src.source.count("return 0;") == 3


def test_loop_kinds_become_pragmas():
    matmul = codegen_c([FIXTURES["matmul"]()]).source
    assert "/* parallel loop, run serially (single thread) */\n  for (int64_t i = 0; i < 4; ++i) {" in matmul
    assert "    #pragma omp simd\n    for (int64_t j = 0; j < 6; ++j) {" in matmul
    assert "C[i * 6 + j] = C[i * 6 + j] + A[i * 5 + k] * B[k * 6 + j];" in matmul
    conv = codegen_c([FIXTURES["conv2d"]()]).source
    assert conv.count("#pragma GCC unroll 3\n") == 2
    lets = codegen_c([FIXTURES["lets_and_selects"]()]).source
    assert "#pragma GCC unroll 6\n  for (int32_t i = 0; i < 6; ++i) {" in lets


def test_workspace_is_a_static_aligned_array_and_local_a_stack_array():
    src = codegen_c([FIXTURES["softmax_workspace"]()]).source
    assert "#define PLAIT_C_ALIGN(n) __attribute__((aligned(n)))" in src
    assert "  static float exps_storage[8] PLAIT_C_ALIGN(64);\n  float* restrict exps = exps_storage;\n" in src
    assert "  float acc[1];\n" in src
    zero = codegen_c([FIXTURES["zero_dim"]()]).source
    assert "  float t[1];\n  t[0] = 1.0f;\n" in zero
    assert "PLAIT_C_ALIGN" not in zero


def test_padding_select_stays_lazy_in_c():
    src = codegen_c([FIXTURES["conv2d"]()]).source
    assert "? data[b * 50 + ic * 25 + (y * 2 + ry - 1) * 5 + x * 2 + rx - 1] : 0.0f)" in src


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_copy_every_dtype(dtype, cache_dir):
    n = 7
    X, Y = tir.Buffer("X", (n,), dtype), tir.Buffer("Y", (n,), dtype)
    i = tir.Var("i")
    f = tir.PrimFunc((X, Y), tir.For(i, 0, n, "serial", Y.store(n - 1 - i, X[i])), {"global_symbol": "copy"})
    x = (np.arange(n) * 37 - 100).astype(dtype) if dtype != "bool" else np.arange(n) % 3 == 0
    (got,) = run_c([f], [[x, np.zeros(n, dtype)]], cache_dir)
    np.testing.assert_array_equal(got[1], x[::-1])


def test_extern_calls_returning_values(cache_dir):
    n = 4
    X, Y, H = tir.Buffer("X", (n,)), tir.Buffer("Y", (n,)), tir.Buffer("H", (n,), "float16")
    i = tir.Var("i")
    body = tir.For(i, 0, n, "serial", tir.seq(
        Y.store(i, tir.call_extern("float32", "my_scale", X[i], tir.const(3, "int32"))),
        H.store(i, tir.call_extern("float16", "my_third", X[i]))))
    f = tir.PrimFunc((X, Y, H), body, {"global_symbol": "ext"})
    src = codegen_c([f])
    assert "extern float my_scale(float, int32_t);\nextern float my_third(float);\n" in src.source
    impl = "float my_scale(float x, int32_t k) { return x * (float)k; }\nfloat my_third(float x) { return x / 3.0f; }\n"
    lib = CSourceModule(src.source + impl, src.signatures, compile_flags=src.compile_flags).compile(cache_dir=cache_dir)
    x = np.array([1.0, -2.0, 0.1, 7.0], np.float32)
    y, h = np.zeros(n, np.float32), np.zeros(n, np.float16)
    lib["ext"](x, y, h)
    np.testing.assert_array_equal(y, x * np.float32(3))
    np.testing.assert_array_equal(h, (x / np.float32(3)).astype(np.float16))  # rounded once to float16
