"""The C of a 32-bit piece (Cortex-M: word_bits 32) has int32 loops and index arithmetic (plait/tir/narrow.py,
run by the c kind's codegen); a host piece's C is what it was."""

from __future__ import annotations

import re

import numpy as np
import pytest

import plait
from plait import tir
from plait.backends.c.backend import codegen_c, target_prim_funcs
from plait.relay import IRModule, call, const, var
from plait.runtime.cc import compile_source
from plait.tir import Buffer, For, PrimFunc, Var
from tir.fixtures import FIXTURES

from .conftest import HAVE_ARM, assert_same, run_c, run_ref
from .test_c_fixtures import args_for

M0 = "c -mcpu=cortex-m0"
LOOPS = re.compile(r"for \((int\d+_t) ")


def test_host_c_is_unchanged():
    funcs = [FIXTURES[k]() for k in FIXTURES]
    src = codegen_c(funcs, "c").source
    assert src.split("\n", 1)[1] == codegen_c(funcs).source.split("\n", 1)[1]  # (the first line names the target)
    loops = [n.loop_var.dtype for f in funcs for n in tir.post_order(f.body) if isinstance(n, For)]
    assert [t[:-2] for t in LOOPS.findall(src)] == loops and "int64" in loops


@pytest.mark.parametrize("target,narrow", [(M0, True), ("c -mcpu=cortex-m4f", True), ("c -mcpu=cortex-m55", True),
                                           ("c", False), (None, False)])
def test_the_tir_the_c_comes_from(target, narrow):
    funcs = [FIXTURES["conv2d"](), FIXTURES["symbolic"]()]
    got = target_prim_funcs(funcs, target)
    if not narrow:
        assert all(g is f for g, f in zip(got, funcs))  # a host piece: the same PrimFuncs
        return
    loops = {n.loop_var.name: n.loop_var.dtype for g in got for n in tir.post_order(g.body) if isinstance(n, For)}
    assert {loops[v] for v in ("b", "oc", "y", "x", "ic", "ry", "rx")} == {"int32"}
    assert "int64" in {d for v, d in loops.items() if v not in ("b", "oc", "y", "x", "ic", "ry", "rx")}  # symbolic


def test_cortex_m_loops_are_int32():
    src = codegen_c([FIXTURES["conv2d"](), FIXTURES["matmul"]()], M0).source
    assert set(LOOPS.findall(src)) == {"int32_t"}
    assert "int64_t" not in src


@pytest.mark.parametrize("name", [k for k in FIXTURES if k != "extern_gemm"])
def test_narrowed_fixtures_match_the_interpreter(name, cache_dir):
    f = FIXTURES[name]()
    args = args_for(f)
    (got,) = run_c([f], [args], cache_dir, target=M0, host_simulation=True)
    assert_same(got, run_ref(f, args), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not HAVE_ARM, reason="needs arm-none-eabi-gcc")
def test_narrowed_c_is_warning_free_for_cortex_m(cache_dir):
    src = codegen_c([FIXTURES[k]() for k in FIXTURES], M0)
    compile_source(src.full_source(), name="narrow_warnings", cc="arm-none-eabi-gcc", shared=False,
                   cache_dir=cache_dir, flags=["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror",
                                               "-fopenmp-simd", "-mcpu=cortex-m0", "-mthumb", "-O2"])


def test_a_flat_offset_past_2_31_is_int64():
    B = Buffer("B", (2**31 - 1, 4), "int8")
    j, k = Var("j"), Var("k")
    f = PrimFunc((B,), For(j, 0, 2**31 - 1, "serial", For(k, 0, 4, "serial", B.store((j, k), tir.const(1, "int8")))),
                 {"global_symbol": "g", "num_inputs": 0})
    src = codegen_c([f], M0).source
    assert "for (int32_t j = 0; j < 2147483647; ++j) {" in src
    assert "B[(int64_t)j * 4 + (int64_t)k] = 1;" in src


def test_cortex_m4f_int8_conv_has_no_int64_loops():
    rng = np.random.default_rng(5)
    x = var("x", (1, 16, 10, 6), "int8")
    w = const(rng.integers(-128, 128, (8, 16, 3, 3)).astype(np.int8))
    e = call("qnn.requantize", call("qnn.conv2d", x, w, padding=(1, 1, 1, 1), input_zero_point=-3),
             const(np.float32(0.002)), zero_point=4, out_dtype="int8")
    src = plait.build(IRModule.from_expr(e), target="c -mcpu=cortex-m4f").lib.source  # type: ignore[attr-defined]
    assert "plait_dot" in src  # (the SMLAD kernels)
    assert LOOPS.findall(src) and set(LOOPS.findall(src)) == {"int32_t"}
