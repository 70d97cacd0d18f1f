"""The llvm kind (plait/backends/llvm/backend.py): TIR -> LLVM IR -> JIT in process.

- every operator's TE compute (the shared case table of tests/te), unscheduled and with the default
  schedule of target llvm, compiled into LLVM modules and compared with the numpy references;
- the C backend's semantics tests (tests/backends/test_c_semantics.py: integer division and
  wrap-around, casts, float16, intrinsics, NaN in min/max, lazy select, lets, deep expressions)
  re-run with the LLVM backend in place of the C compiler;
- loops, allocations, extern calls and scalar parameters vs the TIR interpreter;
- the four reference models through ``plait.build(mod, "llvm")`` and the graph executor vs ONNX Runtime;
- errors: what cannot be compiled names the PrimFunc; a missing llvmlite is one clear message.
"""

from __future__ import annotations

import ctypes
import os
import platform
import re
import sys

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import plait  # noqa: E402
from plait import tir  # noqa: E402
from plait.backends.llvm.backend import (  # noqa: E402
    LLVMCodegenError, build_llvm, build_llvm_funcs, codegen_llvm, missing_host_features,
)
from plait.errors import PlaitError  # noqa: E402
from plait.executor import GraphModule  # noqa: E402
from plait.frontend.onnx import from_onnx  # noqa: E402
from plait.backends.llvm.module import LLVMModule  # noqa: E402
from plait.schedule.rules import default_schedule  # noqa: E402
from plait.target import Target, get_hook, get_kind  # noqa: E402
from plait.testing import onnx_models  # noqa: E402
from plait.tir import Allocate, Buffer, Evaluate, For, IfThenElse, LetStmt, PrimFunc, Var, seq  # noqa: E402
from plait.testing.ort_reference import reference_run

from . import test_c_semantics as _sem  # noqa: E402
from .conftest import call_each, run_ref  # noqa: E402
from .edge_programs import assert_outputs_equal, element_programs, interpret, operator_programs  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "te"))
from computes_cases import CASES, case_ids  # noqa: E402
from computes_util import assert_same, lower, reference  # noqa: E402

RNG = np.random.default_rng(11)


def run_llvm(funcs, args_per_func, cache_dir=None, target="llvm", statuses=None, **kwargs):
    """Like conftest.run_c, through the LLVM backend: the argument lists after the calls."""
    return call_each(build_llvm_funcs(funcs, target), [f.name for f in funcs], args_per_func, statuses)


# ---- the C backend's semantics tests, through LLVM --------------------------------------------------

from .test_c_semantics import (  # noqa: E402,F401
    test_casts_between_every_pair_of_dtypes, test_deep_expressions_and_loop_nests, test_division_edge_values,
    test_every_intrinsic, test_fma_rounds_once, test_float16_every_value_loads_stores_and_computes,
    test_float32_to_float16_matches_numpy_on_random_bit_patterns,
    test_float64_to_float16_rounds_once, test_float_literals_are_exact, test_int8_division_on_every_pair_of_values,
    test_int32_index_arithmetic_and_wider_buffers, test_int64_literals_compute_in_64_bits,
    test_integer_arithmetic_wraps_like_tir, test_lets_shared_and_nested,
    test_symbolic_shapes_use_horner_form_and_scalar_params,
    test_loop_bounds_from_memory_are_read_once, test_min_max_follow_tir_with_nan,
    test_select_and_logical_ops_never_evaluate_the_unchosen_load, test_float_to_int_casts_truncate_and_saturate,
    test_int_and_float_to_float_casts_round_to_nearest, test_division_by_zero_and_int_min_by_minus_one,
    test_shifts_by_every_amount, test_multiplications_that_overflow_int_wrap,
)


@pytest.fixture(autouse=True)
def _compile_with_llvm(monkeypatch):
    """The imported semantics tests compile through ``run_c``: make that the LLVM backend."""
    monkeypatch.setattr(_sem, "run_c", run_llvm)


def test_the_semantics_tests_really_use_llvm(monkeypatch):
    calls = []
    monkeypatch.setattr(_sem, "run_c", lambda *a, **k: calls.append(a) or run_llvm(*a, **k))
    test_lets_shared_and_nested(None)
    assert len(calls) == 1


# ---- every operator's compute ------------------------------------------------------------------------

GROUP = 24
_LIBS: dict[int, tuple] = {}


def _library(case: int) -> tuple:
    """(module, result types) of the group of cases holding ``case``: each case unscheduled
    (``case<k>``) and with llvm's default schedule (``sched<k>``), in one LLVM module."""
    g = case // GROUP
    if g not in _LIBS:
        funcs, fields = [], {}
        for k in range(g * GROUP, min((g + 1) * GROUP, len(CASES))):
            op, inputs, attrs = CASES[k]
            func, fs = lower(op, inputs, **attrs)
            funcs.append(func.with_attrs(global_symbol=f"case{k}"))
            funcs.append(default_schedule(func, "llvm").with_attrs(global_symbol=f"sched{k}"))
            fields[k] = fs
        _LIBS[g] = (build_llvm_funcs(funcs, "llvm"), fields)
    return _LIBS[g]


@pytest.mark.parametrize("case", range(len(CASES)), ids=case_ids())
def test_case_llvm(case):
    lib, fields = _library(case)
    op, inputs, attrs = CASES[case]
    want = reference(op, inputs, **attrs)
    for prefix in ("case", "sched"):
        outs = [np.zeros(f.shape, f.dtype) for f in fields[case]]
        lib[f"{prefix}{case}"](*[np.ascontiguousarray(x) for x in inputs], *outs)
        # libm and FMA contraction may differ from numpy by a few ulps; schedules reassociate sums
        assert_same(outs, want, rtol=1e-4, atol=1e-5)


# ---- statements, allocations, extern calls, scalars ---------------------------------------------------


def _check_vs_interpreter(func, args, rtol=0.0, atol=0.0, target="llvm"):
    (got,) = run_llvm([func], [args], target=target)
    want = run_ref(func, args)
    for g, w in zip(got, want):
        if isinstance(w, np.ndarray):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol) if w.dtype.kind == "f" else \
                np.testing.assert_array_equal(g, w)
    return got


def test_loop_kinds_if_else_and_every_allocation_scope():
    n = Var("n")
    X, Y = Buffer("X", (n, 8)), Buffer("Y", (n, 8))
    ws = Buffer("ws", (8,), scope="global.workspace")
    loc = Buffer("loc", (1,), scope="local")
    dyn = Buffer("dyn", (n,), scope="local")
    i, j, k, m, q = Var("i"), Var("j"), Var("k"), Var("m"), Var("q")
    t = Var("t", "float32")
    body = seq(
        For(i, 0, n, "parallel", Allocate(ws, seq(
            For(j, 0, 8, "vectorized", ws.store(j, X[i, j] * 2.0)),
            Allocate(loc, seq(
                loc.store(0, 0.0),
                For(k, 0, 8, "unrolled", loc.store(0, loc[0] + ws[k])),
                For(m, 0, 8, "serial", LetStmt(t, ws[m] - loc[0], IfThenElse(
                    t > 0.0, Y.store((i, m), t), Y.store((i, m), tir.const(-1.0)))))))))),
        Allocate(dyn, seq(
            For(q, 0, n, "unrolled", dyn.store(q, Y[q, 0])),
            For(q2 := Var("q2"), 0, n, "serial", IfThenElse(dyn[q2] > 0.0, Y.store((q2, 7), dyn[q2]))))),
    )
    f = PrimFunc((n, X, Y), body, {"global_symbol": "kinds", "num_inputs": 1})
    x = RNG.standard_normal((5, 8)).astype(np.float32)
    _check_vs_interpreter(f, [5, x, np.zeros((5, 8), np.float32)], rtol=1e-6, atol=1e-6)
    text = codegen_llvm([f])
    assert "internal global [8 x float] zeroinitializer, align 64" in text
    assert "llvm.stacksave" in text and "llvm.loop.parallel_accesses" in text


@pytest.mark.parametrize("simd,extent,widths", [
    (512, 25, ["16", "8"]),  # ds_cnn's fused 25x5 rows: 16 + 8 lanes and a scalar tail
    (512, 57, ["16", "8"]),  # 48 + 8 + 1
    (256, 25, ["8"]),  # 24 + 1
    (512, 7, ["4", "2"]),  # 4 + 2 + 1
    (0, 25, []),  # no SIMD: the loop as it is
])
def test_a_vector_loop_of_a_partial_vector_is_split_into_whole_vectors(simd, extent, widths):
    # a register tile of 4 channels x `extent` columns accumulated over 8 reduce steps (the shape of a
    # pointwise convolution's tile): the vectorized loop becomes loops of whole vectors of halving
    # widths and a scalar tail (LLVM's SLP vectorizer ran the fully unrolled loop 17x slower than gcc)
    X, W, Y = Buffer("X", (8, extent)), Buffer("W", (4, 8)), Buffer("Y", (4, extent))
    acc = Buffer("acc", (4, extent), scope="local")
    o, z, k, o2, z2, o3, z3 = (Var(v) for v in ("o", "z", "k", "o2", "z2", "o3", "z3"))
    body = Allocate(acc, seq(
        For(o, 0, 4, "serial", For(z, 0, extent, "vectorized", acc.store((o, z), 0.0))),
        For(k, 0, 8, "serial", For(o2, 0, 4, "serial", For(z2, 0, extent, "vectorized", acc.store(
            (o2, z2), acc[o2, z2] + X[k, z2] * W[o2, k])))),
        For(o3, 0, 4, "serial", For(z3, 0, extent, "vectorized", Y.store((o3, z3), acc[o3, z3] + 1.0)))))
    f = PrimFunc((X, W, Y), body, {"global_symbol": "tile", "num_inputs": 2})
    x, w = RNG.standard_normal((8, extent)).astype(np.float32), RNG.standard_normal((4, 8)).astype(np.float32)
    target = f"llvm -simd-bits={simd}"
    _check_vs_interpreter(f, [x, w, np.zeros((4, extent), np.float32)], rtol=1e-5, atol=1e-5, target=target)
    text = codegen_llvm([f], target)
    got = re.findall(r'"llvm.loop.vectorize.width", i32 (\d+)', text)
    assert sorted(set(got), key=int, reverse=True) == widths
    assert '"llvm.loop.unroll.full"' not in text  # no longer handed to the SLP vectorizer
    # a loop outside register tiles (a padded copy) stays fully unrolled (fewer loops for LLVM to optimize)
    copy = PrimFunc((X, Y), For(z, 0, extent, "vectorized", Y.store((0, z), X[0, z])), {"global_symbol": "copy"})
    assert ('"llvm.loop.unroll.full"' in codegen_llvm([copy], target)) == (simd > 0)


def test_extern_calls_handles_and_scalar_parameters():
    n = 6
    X, Y = Buffer("X", (n,)), Buffer("Y", (n,))
    F = Buffer("F", (n,), "bool")
    i = Var("i")
    s, flag = Var("s", "float32"), Var("flag", "bool")
    # memset through an address, a libm function called by name, bool and float scalars
    body = seq(
        Evaluate(tir.Call("handle", "memset", (tir.AddressOf(Y, (tir.const(0),)), tir.const(0, "int32"),
                                                  tir.const(n * 4, "uint64")), "extern")),
        For(i, 0, n, "serial", seq(
            Y.store(i, tir.Call("float32", "fmaxf", (X[i] * s, tir.const(0.0)), "extern")),
            F.store(i, tir.logical_and(flag, X[i] > 0.0)))))
    f = PrimFunc((s, flag, X, Y, F), body, {"global_symbol": "ext"})
    x = RNG.standard_normal(n).astype(np.float32)
    y = np.full(n, np.nan, np.float32)
    (got,) = run_llvm([f], [[1.5, True, x, y, np.zeros(n, bool)]])
    np.testing.assert_array_equal(got[3], np.maximum(x * np.float32(1.5), 0))
    np.testing.assert_array_equal(got[4], x > 0)
    (got,) = run_llvm([f], [[1.5, False, x, y, np.ones(n, bool)]])
    assert not got[4].any()


def test_function_names_signatures_raw_and_export(tmp_path):
    X, Y = Buffer("X", (4,)), Buffer("Y", (4,))
    i = Var("i")
    copy = PrimFunc((X, Y), For(i, 0, 4, "serial", Y.store(i, X[i])), {"global_symbol": "expf"})
    odd = PrimFunc((X, Y), For(i, 0, 4, "serial", Y.store(i, tir.exp(X[i]))), {"global_symbol": "fused/op 1"})
    lib = build_llvm_funcs([copy, odd])
    assert isinstance(lib, LLVMModule) and lib.function_names() == ["expf", "fused/op 1"]
    assert lib.signatures == {"expf": ("ptr", "ptr"), "fused/op 1": ("ptr", "ptr")}
    raw = lib.raw("fused/op 1")
    assert raw.restype is ctypes.c_int32 and raw.argtypes == [ctypes.c_void_p, ctypes.c_void_p]
    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    assert raw(x.ctypes.data, y.ctypes.data) == 0
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)
    lib["expf"](x, y)  # a PrimFunc named like the libm function it does not call
    np.testing.assert_array_equal(y, x)
    assert lib.export_library(tmp_path / "m.ll").read_text().startswith("; Generated by plait's LLVM backend")
    assert lib.export_library(tmp_path / "m.o").read_bytes()[:4] == b"\x7fELF"
    with pytest.raises(PlaitError, match=r"function 'expf' takes 2 arguments, got 1"):
        lib["expf"](x)


def _close_to_axpb(y: np.ndarray, x: np.ndarray) -> None:
    """``y`` is ``x * 3 + 1`` in float32, fused (FMA, one rounding) or not: within two ulps of the terms'
    magnitude (a relative bound fails where ``3x`` nearly cancels the 1)."""
    want = x.astype(np.float64) * 3 + 1
    assert np.all(np.abs(y - want) <= 2 * np.spacing(np.float32(3) * np.abs(x) + 1)), np.max(np.abs(y - want))


def test_target_cpu_options_change_the_code_not_the_results():
    A, B = Buffer("A", (64,)), Buffer("B", (64,))
    i = Var("i")
    f = PrimFunc((A, B), For(i, 0, 64, "vectorized", B.store(i, A[i] * 3.0 + 1.0)), {"global_symbol": "axpb"})
    x = RNG.standard_normal(64).astype(np.float32)
    outs = {}
    for t in ("llvm", "llvm -mcpu=x86-64", "llvm -mcpu=x86-64-v3 -mattr=+avx2,+fma"):
        lib = build_llvm_funcs([f], t)
        y = np.zeros(64, np.float32)
        if not lib.not_runnable:  # an AVX2 target on a machine without AVX2 builds but does not run
            lib["axpb"](x, y)
            _close_to_axpb(y, x)
        outs[t] = (y, lib.assembly())
    _close_to_axpb(outs["llvm -mcpu=x86-64"][0], x)
    assert "ymm" not in outs["llvm -mcpu=x86-64"][1]  # SSE2 only
    assert "ymm" in outs["llvm -mcpu=x86-64-v3 -mattr=+avx2,+fma"][1]


@pytest.mark.parametrize("cpu", ["x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "host"])
def test_casts_and_integer_results_are_the_same_for_every_cpu(cpu):
    """The edge programs (casts of NaN, infinities and out-of-range floats, integer operators at their
    edges) compiled for each x86-64 level give the TIR interpreter's results bit for bit: LLVM's
    saturating conversions and the selects around shifts and divisions leave no instruction choice
    that could change a result (docs/tir.md, "Numeric semantics")."""
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86-64 levels")
    target = "llvm" if cpu == "host" else f"llvm -mcpu={cpu}"
    if cpu != "host" and missing_host_features(cpu, ""):
        pytest.skip(f"this CPU cannot run {cpu} code (lacks {', '.join(missing_host_features(cpu, ''))})")
    for programs, exact in ((element_programs(), True), (operator_programs("llvm"), False)):
        outs = run_llvm([p.func for p in programs], [[*p.inputs, *p.outputs()] for p in programs], target=target,
                        statuses=[p.status for p in programs])
        for p, args in zip(programs, outs):
            if p.status:
                continue  # stopped at its index check, as the interpreter does (outputs unspecified)  # lowered operators: float outputs within rounding
            assert_outputs_equal(args[len(p.inputs):], interpret(p), exact, f"{p.name} for {target}")


# ---- the kind, the hook, the models -------------------------------------------------------------------


def test_llvm_kind_has_the_hook_and_the_host_cpu_rules():
    assert list(get_kind("llvm").hooks) == ["tir_to_runtime"]
    assert get_kind("llvm").backend.schedule_rules(Target("llvm")) == "cpu"
    from plait.schedule.rules import machine_for

    assert machine_for("llvm") == machine_for("c")  # same tag facts: the host


def ort_run(model, feeds):
    return reference_run(model, feeds)


@pytest.mark.parametrize("name", sorted(onnx_models.MODELS))
def test_model_builds_for_llvm_and_matches_ort(name):
    model = onnx_models.MODELS[name]()
    art = plait.build(from_onnx(model), target="llvm")
    gm = GraphModule(art)
    rng = np.random.default_rng(5)
    feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input}
    got = gm(**feeds)
    want = ort_run(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-4)
    assert any(isinstance(m, LLVMModule) for m in art.lib.walk())


@pytest.mark.parametrize("target,place", [("host: c; jit: llvm", "*=jit"), ("host: llvm; c: c", "Conv=c"),
                                          ("host: llvm; blas: blas", "*=blas?")])
def test_llvm_as_a_piece_of_composite_targets(target, place):
    if "blas" in target:
        pytest.importorskip("scipy_openblas32")
    model = onnx_models.ds_cnn()
    art = plait.build(from_onnx(model), target=target, place=place)
    rng = np.random.default_rng(2)
    feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input}
    for g, w in zip(GraphModule(art)(**feeds), ort_run(model, feeds)):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-4)
    llvm_piece = "jit" if "jit" in target else "host"
    assert isinstance(art.piece_modules[llvm_piece], LLVMModule)


# ---- errors -------------------------------------------------------------------------------------------


def test_what_llvm_cannot_compile_names_the_primfunc():
    X = Buffer("X", (2,))
    i = Var("i")
    h = Var("h", "float16")
    f = PrimFunc((h, X), For(i, 0, 2, "serial", X.store(i, tir.cast("float32", h))), {"global_symbol": "half_arg"})
    with pytest.raises(LLVMCodegenError, match=r"^LLVM codegen of PrimFunc 'half_arg': scalar parameter 'h' has "
                                               r"dtype float16, which the LLVM backend cannot pass \(use a buffer\)$"):
        build_llvm_funcs([f])
    g = PrimFunc((X,), Evaluate(tir.Call("void", "plait_no_such_function", (X[0],), "extern")),
                 {"global_symbol": "calls_missing"})
    with pytest.raises(LLVMCodegenError, match=r"^LLVM codegen of PrimFunc 'calls_missing': function "
                                               r"'plait_no_such_function' is not found in this process"):
        build_llvm_funcs([g])
    a = PrimFunc((X,), Evaluate(tir.Call("void", "free", (X[0],), "extern")), {"global_symbol": "a"})
    b = PrimFunc((X,), Evaluate(tir.Call("int32", "free", (X[0], X[1]), "extern")), {"global_symbol": "b"})
    with pytest.raises(LLVMCodegenError, match=r"^LLVM codegen of PrimFunc 'b': extern function 'free' is called "
                                               r"as int32\(float32, float32\) here and as void\(float32\) in "
                                               r"PrimFunc 'a'$"):
        codegen_llvm([a, b])
    with pytest.raises(LLVMCodegenError, match=r"two PrimFuncs have the global_symbol 'a'"):
        codegen_llvm([a, a])
    Y = Buffer("Y", (2,), "float64")
    clash = PrimFunc((X, Y), For(i, 0, 2, "serial", seq(X.store(i, tir.exp(X[i])), Y.store(i, tir.Call(
        "float64", "expf", (tir.cast("float64", X[i]),), "extern")))), {"global_symbol": "clash"})
    with pytest.raises(LLVMCodegenError, match=r"^LLVM codegen of PrimFunc 'clash': extern function 'expf' is called "
                                               r"as float64\(float64\), which does not match its use as a math "
                                               r"intrinsic \(float @expf\(float\)\)$"):
        codegen_llvm([clash])
    bad = PrimFunc((X,), X.store(0, tir.Add(tir.const(1, "int32"), tir.const(1.0))), {"global_symbol": "ill"})
    with pytest.raises(PlaitError, match=r"^PrimFunc 'ill': "):  # the TIR verifier runs first
        codegen_llvm([bad])


def test_missing_llvmlite_is_one_clear_error(monkeypatch):
    import plait.backends.llvm.module as lm

    monkeypatch.setitem(sys.modules, "llvmlite.binding", None)  # import fails as if not installed
    monkeypatch.setitem(sys.modules, "llvmlite", None)
    model = onnx_models.mlp(sizes=(4, 3))
    with pytest.raises(PlaitError, match=r"target kind 'llvm' needs llvmlite: pip install 'plait\[llvm\]'"):
        plait.build(from_onnx(model), target="llvm")
    assert lm.LLVMLITE_MISSING == "target kind 'llvm' needs llvmlite: pip install 'plait[llvm]'"
    assert Target("llvm").kind_name == "llvm"  # the kind itself needs nothing


def test_unknown_cpu_or_feature_is_an_error_not_an_abort():
    A, B = Buffer("A", (4,)), Buffer("B", (4,))
    i = Var("i")
    f = PrimFunc((A, B), For(i, 0, 4, "serial", B.store(i, A[i])), {"global_symbol": "cp"})
    from plait.backends.llvm.module import LLVMError, create_target_machine
    from plait.target import TargetError

    with pytest.raises(TargetError, match=r"^target 'llvm -mcpu=nosuchcpu': -mcpu=nosuchcpu is not a CPU that LLVM "
                                          r"accepts"):  # refused when the target is parsed
        build_llvm_funcs([f], "llvm -mcpu=nosuchcpu")
    with pytest.raises(LLVMError, match=r"^LLVM cannot generate code for cpu 'nosuchcpu' with features '': "
                                        r"'nosuchcpu' is not a recognized processor for this target"):
        create_target_machine("nosuchcpu", "")  # and LLVM itself still cannot abort the process
    with pytest.raises(LLVMCodegenError, match=r"'\+bogus' is not a recognized feature"):
        build_llvm_funcs([f], "llvm -mcpu=x86-64 -mattr=+bogus")


def test_vectorized_loops_call_glibc_vector_math_when_present():
    from plait.backends.llvm.backend import vector_math

    X, Y = Buffer("X", (4, 32)), Buffer("Y", (4, 32))
    i, j = Var("i"), Var("j")
    body = For(i, 0, 4, "serial", For(j, 0, 32, "vectorized", Y.store((i, j), tir.exp(X[i, j]) + tir.call_intrin(
        "erf", X[i, j]))))
    f = PrimFunc((X, Y), body, {"global_symbol": "expo"})
    x = RNG.uniform(-5, 5, (4, 32)).astype(np.float32)
    (got,) = run_llvm([f], [[x, np.zeros((4, 32), np.float32)]])
    import math

    want = np.exp(x.astype(np.float64)) + np.vectorize(math.erf)(x.astype(np.float64))
    np.testing.assert_allclose(got[1], want, rtol=2e-6, atol=1e-6)  # libmvec: within a few ulps
    import plait.backends.llvm.backend as llvm_backend

    table = vector_math("llvm")
    if ("exp", "float32") not in table or not llvm_backend.vector_math_enabled:
        pytest.skip("no glibc libmvec in this process (not x86-64 Linux with glibc >= 2.35)")
    ir = build_llvm_funcs([f]).optimized_ir()
    assert "@_ZGV" in ir and "_expf(" in ir and "_erff(" in ir


def test_a_module_calling_an_unknown_symbol_is_an_error_not_a_crash():
    ir = "declare i32 @plait_nowhere(i32)\ndefine i32 @f() {\n  %r = call i32 @plait_nowhere(i32 1)\n  ret i32 %r\n}\n"
    with pytest.raises(PlaitError, match=r"^LLVM module 'module' calls 'plait_nowhere', not found in this process"):
        LLVMModule(ir, {"f": ()})


# ---- the TIR fixtures and random integer expressions, vs the interpreter --------------------------------


@pytest.mark.parametrize("name", ["matmul", "conv2d", "softmax_workspace", "lets_and_selects", "all_dtypes",
                                  "symbolic", "weird_names", "zero_dim", "checked_gather"])
def test_tir_fixtures_match_the_interpreter(name):
    from tir.fixtures import FIXTURES

    f = FIXTURES[name]()
    args = []
    for p in f.params:
        if isinstance(p, Var):
            args.append(3)
            continue
        shape = tuple(3 if not isinstance(d, tir.IntImm) else d.value for d in p.shape)
        a = RNG.uniform(-4, 4, shape) if p.dtype != "bool" else RNG.integers(0, 2, shape)
        args.append(np.array(a, dtype=p.dtype))
    with np.errstate(all="ignore"):
        _check_vs_interpreter(f, args, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "int8"])
def test_random_integer_expressions_match_the_interpreter(dtype):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from tir.test_simplify import int_exprs

    from plait.tir.dtype import int_range

    vs = [Var("x", dtype), Var("y", dtype)]
    lo, hi = int_range(dtype)
    vals = sorted({lo, lo + 1, -7 if lo < 0 else 7, -1 if lo < 0 else 1, 0, 1, 3, 9, hi - 1, hi})
    envs = [(a, b) for a in vals for b in vals]
    n = len(envs)
    X, Y = Buffer("X", (n,), dtype), Buffer("Y", (n,), dtype)

    @settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(st.lists(int_exprs(dtype, vs), min_size=12, max_size=12))
    def check(exprs):
        keep = []
        for e in exprs:  # expressions defined everywhere (no division by zero on any input) and well formed
            try:
                tir.verify(PrimFunc(tuple(vs), Evaluate(e)))
                for a, b in envs:
                    tir.evaluate_expr(e, {vs[0]: a, vs[1]: b})
            except PlaitError:
                continue
            keep.append(tir.copy_with_fresh_vars(e) if keep else e)
        outs = [Buffer(f"O{k}", (n,), e.dtype) for k, e in enumerate(keep)]
        i = Var("i")
        body = For(i, 0, n, "serial", LetStmt(vs[0], X[i], LetStmt(vs[1], Y[i], seq(
            *[o.store(i, e) for o, e in zip(outs, keep)]))))
        f = PrimFunc((X, Y, *outs), body, {"global_symbol": "rand", "num_inputs": 2})
        try:
            tir.verify(f)
        except PlaitError:
            return  # a Let node drawn twice: skip the example
        x = np.array([a for a, _ in envs], dtype)
        y = np.array([b for _, b in envs], dtype)
        _check_vs_interpreter(f, [x, y, *[np.zeros(n, o.dtype) for o in outs]])

    check()


def test_code_for_a_cpu_this_machine_lacks_builds_but_does_not_run():
    """On any machine: code built for a CPU feature the machine lacks compiles (the assembly uses it)
    but refuses to run, instead of stopping the process on an illegal instruction."""
    from plait.backends.llvm.module import llvm_binding

    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86-64 CPU levels")
    host = llvm_binding().get_host_cpu_features()
    lacking = [f for f in ("avx512f", "amx-tile", "avx512fp16", "sha512") if not host.get(f, False)]
    if not lacking:  # no x86-64 CPU sold today has all four
        pytest.skip("this machine has every feature the test knows to build for")
    feature = lacking[0]
    # the tag (llvm -mcpu=x86-64-v4) on a machine without AVX-512; else AVX-512 code plus a feature it lacks
    target = "x86-64-avx512" if feature == "avx512f" else f"llvm -mcpu=x86-64-v4 -mattr=+{feature}"
    A, B = Buffer("A", (64,)), Buffer("B", (64,))
    i = Var("i")
    f = PrimFunc((A, B), For(i, 0, 64, "vectorized", B.store(i, A[i] * 2.0)), {"global_symbol": "twice"})
    lib = build_llvm_funcs([f], target)
    assert lib.cpu == "x86-64-v4" and "zmm" in lib.assembly()
    with pytest.raises(PlaitError, match=rf"^function 'twice' cannot run here: module 'module' was compiled for cpu "
                                         rf"'x86-64-v4' \(target '{re.escape(target)}'\), which needs {feature}"):
        lib["twice"](np.zeros(64, np.float32), np.zeros(64, np.float32))
