"""The int8 dot products of the llvm kind (plait/backends/llvm/dot.py): the ``dot_product`` loops of
the integer kernels emitted as vector code, ``vpdpbusd`` where the target CPU has AVX512-VNNI /
AVX-VNNI, ``llvm.vector.partial.reduce.add`` elsewhere, every path the same integers as the scalar
loop:

- rows of every length (whole chunks, tails of 1..63 elements, the loop form of long rows) and every
  pair of 8/16-bit operand types, extreme values included, equal numpy's sums;
- every form of ``qnn.conv2d`` (tests/quant/test_int8_kernels.py's table: odd channel counts, tails)
  and the quantized bench models equal the numpy reference / the c kind bit for bit, on the host CPU and
  with VNNI switched off (``-mattr``) or absent (``-mcpu=x86-64-v3``);
- the IR names the instruction the target has (LLVM is asked: a CPU without it would stop the process
  in instruction selection).
"""

from __future__ import annotations

import platform

import numpy as np
import pytest

pytest.importorskip("llvmlite")

import plait  # noqa: E402
from plait.backends.llvm.backend import build_llvm_funcs, codegen_llvm, cpu_and_features  # noqa: E402
from plait.backends.llvm.backend import missing_host_features  # noqa: E402
from plait.backends.llvm.dot import vnni_bits  # noqa: E402
from plait.executor import GraphModule  # noqa: E402
from plait.relay import IRModule, call, run, var  # noqa: E402
from plait.tir import Buffer, For, PrimFunc, Var, seq  # noqa: E402
from plait.tir.expr import IntImm  # noqa: E402
from plait.tir.op import cast  # noqa: E402
from plait.tir.stmt import BufferStore  # noqa: E402
from plait.tir.expr import BufferLoad  # noqa: E402

from tests.quant.test_int8_kernels import CONVS, _case  # noqa: E402

X86 = platform.machine().lower() in ("x86_64", "amd64")
needs_x86 = pytest.mark.skipif(not X86, reason="x86-64 CPU names and features")
HOST_VNNI = X86 and vnni_bits(*cpu_and_features("llvm")) > 0
NO_VNNI = "llvm -mattr=-avx512vnni,-avxvnni"
AVX2 = "llvm -mcpu=x86-64-v3"
TARGETS = ["llvm", pytest.param(NO_VNNI, marks=needs_x86),
           pytest.param(AVX2, marks=pytest.mark.skipif(not X86 or bool(missing_host_features("x86-64-v3", "")),
                                                        reason="needs an x86-64-v3 (AVX2) machine"))]
LIMITS = {"uint8": (0, 255), "int8": (-128, 127), "int16": (-32768, 32767)}


def _dot_func(n: int, rows: int, da: str, db: str) -> PrimFunc:
    """``out[i] = 7 + sum_k int32(a[i, k]) * int32(b[i, k])``, the reduce loop marked as int_rules marks it."""
    a, b, out = Buffer("a", (rows, n), da), Buffer("b", (rows, n), db), Buffer("out", (rows,), "int32")
    i, k = Var("i"), Var("k")
    zero = IntImm(0, "int64")
    acc = Buffer("acc", (1,), "int32", "local")
    from plait.tir import Allocate
    update = BufferStore(acc, BufferLoad(acc, (zero,)) + cast("int32", BufferLoad(a, (i, k))) *
                         cast("int32", BufferLoad(b, (i, k))), (zero,))
    body = Allocate(acc, seq(BufferStore(acc, IntImm(7, "int32"), (zero,)),
                             For(k, 0, n, "serial", update, {"dot_product": 1}),
                             BufferStore(out, BufferLoad(acc, (zero,)), (i,))))
    return PrimFunc((a, b, out), For(i, 0, rows, "serial", body)).with_attrs(global_symbol="dot")


def _unrolled_dots(n: int, u: int, da: str, db: str) -> PrimFunc:
    """``out[r] += sum_k a[r, k] * b[k]`` for 2u rows, ``u`` rows per step of an unrolled loop (int_rules'
    ``dot_unroll`` of fused short rows): the u dot products' horizontal sums computed together."""
    a, b, out = Buffer("a", (2 * u, n), da), Buffer("b", (n,), db), Buffer("out", (2 * u,), "int32")
    i, j, k = Var("i"), Var("j"), Var("k")
    r = i * u + j
    update = BufferStore(out, BufferLoad(out, (r,)) + cast("int32", BufferLoad(a, (r, k))) *
                         cast("int32", BufferLoad(b, (k,))), (r,))
    dot = For(k, 0, n, "serial", update, {"dot_product": 1})
    return PrimFunc((a, b, out), For(i, 0, 2, "serial", For(j, 0, u, "unrolled", dot))).with_attrs(
        global_symbol=f"dots{u}_{n}")


def _operands(n: int, rows: int, da: str, db: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.integers(*LIMITS[da], (rows, n), endpoint=True).astype(da)
    y = rng.integers(*LIMITS[db], (rows, n), endpoint=True).astype(db)
    x[0], y[0] = LIMITS[da][1], LIMITS[db][0]  # 255 * -128 everywhere: pmaddubsw would saturate
    x[1], y[1] = LIMITS[da][0], LIMITS[db][0]
    return x, y


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("da, db", [("uint8", "int8"), ("int8", "uint8"), ("int8", "int8"), ("uint8", "uint8"),
                                    ("int16", "int16")])
def test_dot_rows_of_every_length_equal_numpy(da, db, target):
    funcs = {n: _dot_func(n, 3, da, db).with_attrs(global_symbol=f"dot{n}")
             for n in (16, 17, 31, 45, 64, 100, 127, 192, 1100, 1153)}
    lib = build_llvm_funcs(list(funcs.values()), target)
    for n in funcs:
        x, y = _operands(n, 3, da, db, n)
        out = np.zeros(3, np.int32)
        lib[f"dot{n}"](x, y, out)
        want = (7 + (x.astype(np.int64) * y.astype(np.int64)).sum(axis=1)).astype(np.int64)
        want = ((want + 2**31) % 2**32 - 2**31).astype(np.int32)  # int32 sums wrap
        np.testing.assert_array_equal(out, want, err_msg=f"n={n}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("da, db", [("uint8", "int8"), ("int8", "int8"), ("int16", "int16")])
def test_unrolled_dot_products_summed_together_equal_numpy(da, db, target):
    shapes = [(n, u) for n in (40, 64, 100) for u in (2, 3, 5, 8, 16)]
    lib = build_llvm_funcs([_unrolled_dots(n, u, da, db) for n, u in shapes], target)
    for n, u in shapes:
        x, y = _operands(n, 2 * u, da, db, u)
        out = np.arange(2 * u, dtype=np.int32) - 3
        want = out + (x.astype(np.int64) * y[0].astype(np.int64)).sum(axis=1).astype(np.int32)
        lib[f"dots{u}_{n}"](x, np.ascontiguousarray(y[0]), out)
        np.testing.assert_array_equal(out, want, err_msg=f"n={n} u={u}")
    text = codegen_llvm([_unrolled_dots(64, 5, da, db)], target)
    assert text.count("shufflevector") >= 6 and "llvm.vector.reduce.add" not in text


def test_the_host_code_uses_vpdpbusd_for_u8_by_s8_only():
    text = codegen_llvm([_dot_func(100, 2, "uint8", "int8")], "llvm")
    if HOST_VNNI:
        assert "@llvm.x86.avx512.vpdpbusd." in text and "partial.reduce" not in text
    else:
        assert "vpdpbusd" not in text and "@llvm.vector.partial.reduce.add" in text
    for da, db in (("int8", "int8"), ("int16", "int16")):
        text = codegen_llvm([_dot_func(100, 2, da, db)], "llvm")
        assert "vpdpbusd" not in text and "@llvm.vector.partial.reduce.add" in text


@needs_x86
@pytest.mark.parametrize("target, want", [
    ("llvm -mcpu=znver4", "@llvm.x86.avx512.vpdpbusd.512"),
    ("llvm -mcpu=icelake-server", "@llvm.x86.avx512.vpdpbusd.512"),
    ("llvm -mcpu=alderlake", "@llvm.x86.avx512.vpdpbusd.256"),             # AVX-VNNI (VEX, 256 bits)
    ("llvm -mcpu=znver4 -mattr=-avx512vnni", "@llvm.vector.partial.reduce.add"),
    ("llvm -mcpu=skylake-avx512", "@llvm.vector.partial.reduce.add"),       # AVX-512 without VNNI
    ("llvm -mcpu=x86-64-v3", "@llvm.vector.partial.reduce.add"),
])
def test_the_ir_names_the_dot_instruction_the_target_cpu_has(target, want):
    text = codegen_llvm([_dot_func(192, 2, "uint8", "int8")], target)
    assert want in text
    assert ("vpdpbusd" in text) == ("vpdpbusd" in want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("k", range(len(CONVS)))
def test_conv2d_forms_on_llvm_equal_the_reference_bit_for_bit(k, target):
    x, w, attrs, _ = _case(k)
    mod = IRModule.from_expr(call("qnn.conv2d", var("x", x.shape, x.dtype.name), var("w", w.shape, w.dtype.name),
                                  **attrs))
    got = GraphModule(plait.build(mod, target=target))(x=x, w=w)[0]
    np.testing.assert_array_equal(got, run(mod, [x, w]))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["ds_cnn", "resnet8"])
def test_quantized_models_on_llvm_equal_the_c_kind_bit_for_bit(name, target):
    from plait.testing.quantized import calibration_feeds, quantized_model

    model = quantized_model(name, "qdq")
    mod = plait.from_onnx(model)
    feed = calibration_feeds(model, 1, seed=3)[0]
    want = GraphModule(plait.build(mod, target="c"))(**feed)
    got = GraphModule(plait.build(mod, target=target))(**feed)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@needs_x86
def test_code_with_vpdpbusd_does_not_run_on_a_cpu_without_vnni(monkeypatch):
    """A -mcpu whose int8 dot products use vpdpbusd needs AVX512-VNNI (AVX-VNNI) on the machine that
    runs it: an AVX-512 machine without it (Skylake-X) would stop on an illegal instruction."""
    from plait.backends.llvm import module

    binding = module.llvm_binding()
    skylake = {f: True for f in ("avx2", "avx512f", "avx512bw", "avx512vl", "avx512dq")}

    class Fake:
        def __getattr__(self, name):
            return getattr(binding, name)

        def get_host_cpu_features(self):
            return skylake

    monkeypatch.setattr(module, "llvm_binding", lambda: Fake())
    assert missing_host_features("znver4", "") == ["avx512vnni"]
    assert missing_host_features("znver4", "-avx512vnni") == []
    assert missing_host_features("alderlake", "") == ["avxvnni"]
    assert missing_host_features("skylake-avx512", "") == []
