"""The ``"outer"`` form of int8 1x1 convolutions (plait/op/_qnn_forms.py ``OUTER_LANES``): weights packed
as [O/16, C/4, 16, 4], the sums computed by the C kernel ``plait_q8_outer``
(plait/backends/c/kernels.py) called from the schedule (plait/schedule/int_rules.py). Compiled
results equal the numpy reference bit for bit (odd pixel counts, batches, several channel counts,
uint8/int8 data, zero points, bias and requantization fused), and the kernel itself gives the same
sums with and without its AVX-512 VNNI body."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import plait
from plait.backends.c.backend import codegen_c
from plait.executor import GraphModule
from plait.op import get_op
from plait.op._compute import compute_facts
from plait.op.qnn_nn import packed_conv
from plait.lowering.lower import lower_function
from plait.relay import IRModule, call, infer_type, run, var
from plait.relay.expr import Function

from .kernel_lib import X86_GCC, kernel_library

HOST = "c -simd-bits=512 -clock-mhz=2445 -int8-dot=vnni"  # (the form on any machine: without VNNI its plain C body)


def _ints(shape, dtype, seed):
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


# (x shape, x dtype, output channels, input zero point)
CASES = [
    ((1, 64, 25, 5), "int8", 64, -128),  # ds_cnn's pointwise convolutions
    ((2, 36, 7, 3), "uint8", 32, 131),  # 21 pixels (4-pixel blocks and a tail of 1), a batch of 2
    ((1, 128, 3, 3), "uint8", 48, 0),  # no zero-point correction
    ((1, 32, 1, 3), "int8", 16, 5),  # fewer pixels than a block
]


def _conv(k):
    xs, xd, o, zx = CASES[k]
    return _ints(xs, xd, k), _ints((o, xs[1], 1, 1), "int8", 50 + k), dict(input_zero_point=zx)


def _build(expr, feeds):
    mod = IRModule.from_expr(expr)
    return GraphModule(plait.build(mod, target=HOST))(**feeds)[0], run(mod, list(feeds.values()))


def test_outer_form_is_picked_for_1x1_convolutions_compiled_as_c_with_512_bit_vectors():
    attrs = get_op("qnn.conv2d").make_attrs
    with compute_facts(compiled_as_c=True, simd_bits=512, vnni=True):
        assert packed_conv((1, 64, 25, 5), (64, 64, 1, 1), attrs({})) == "outer"
        assert packed_conv((1, 64, 25, 5), (24, 64, 1, 1), attrs({})) == "rows"  # O % 16
        assert packed_conv((1, 66, 25, 5), (64, 66, 1, 1), attrs({})) == "rows"  # C % 4
        assert packed_conv((1, 64, 25, 5), (64, 64, 1, 1), attrs(dict(strides=(2, 2)))) == "rows"
        assert packed_conv((1, 64, 25, 5), (64, 64, 1, 1), attrs(dict(padding=(1, 1, 1, 1)))) == "rows"
        assert packed_conv((1, 64, 25, 5), (64, 64, 1, 1), attrs(dict(kernel_zero_point=3))) == "rows"
    with compute_facts(compiled_as_c=False, simd_bits=512, vnni=False):  # (LLVM)
        assert packed_conv((1, 64, 25, 5), (64, 64, 1, 1), attrs({})) == "rows"
    with compute_facts(compiled_as_c=True, simd_bits=256, vnni=False):
        assert packed_conv((1, 64, 25, 5), (64, 64, 1, 1), attrs({})) == "rows"
    with compute_facts(compiled_as_c=True, simd_bits=512, vnni=False):  # AVX-512 without VNNI (Skylake-X)
        assert packed_conv((1, 64, 25, 5), (64, 64, 1, 1), attrs({})) == "rows"


def test_the_vnni_fact_follows_the_int8_dot_option_then_the_machine():
    from plait.lowering.function import _facts
    from plait.target import Target
    from plait.target.host import cpu_has

    assert _facts(Target("c -simd-bits=512 -int8-dot=vnni"))["vnni"] is True
    assert _facts(Target("c -simd-bits=512 -int8-dot=none"))["vnni"] is False
    assert _facts(Target("c -simd-bits=512"))["vnni"] is cpu_has("avx512_vnni")
    assert _facts(Target("c -mcpu=cortex-m4f -int8-dot=vnni"))["vnni"] is False  # a microcontroller
    assert _facts(Target("llvm"))["vnni"] is False


def test_int8_dot_none_keeps_ds_cnn_like_layers_on_the_rows_form():
    target = "c -simd-bits=512 -clock-mhz=2445 -int8-dot=none"  # (AVX-512 without VNNI: the plain body is slower)
    x, w = var("x", (1, 64, 25, 5), "int8"), var("w", (64, 64, 1, 1), "int8")
    fn = infer_type(IRModule.from_expr(Function((x, w), call("qnn.conv2d", x, w, input_zero_point=-128))))["main"]
    assert "plait_q8_outer" not in codegen_c([lower_function(fn, "qconv", target)], target).source
    xs, ws = _ints((1, 64, 25, 5), "int8", 7), _ints((64, 64, 1, 1), "int8", 8)
    mod = IRModule.from_expr(call("qnn.conv2d", var("x", xs.shape, "int8"), var("w", ws.shape, "int8"),
                                  input_zero_point=-128))
    got = GraphModule(plait.build(mod, target=target))(x=xs, w=ws)[0]
    np.testing.assert_array_equal(got, run(mod, [xs, ws]))


@pytest.mark.parametrize("k", range(len(CASES)))
def test_outer_conv_equals_the_reference_bit_for_bit(k):
    x, w, attrs = _conv(k)
    got, want = _build(call("qnn.conv2d", var("x", x.shape, x.dtype.name), var("w", w.shape, "int8"), **attrs),
                       {"x": x, "w": w})
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("k", [0, 1])
def test_outer_conv_with_bias_and_requantization_fused_equals_the_reference(k):
    x, w, attrs = _conv(k)
    o = w.shape[0]
    bias = np.random.default_rng(k).integers(-3000, 3000, o).astype(np.int32)
    scale = (np.random.default_rng(k + 1).uniform(0.5, 2.0, o) / (w.size / o * 64)).astype(np.float32)
    acc = call("qnn.conv2d", var("x", x.shape, x.dtype.name), var("w", w.shape, "int8"), **attrs)
    biased = call("add", acc, call("reshape", var("b", (o,), "int32"), newshape=(o, 1, 1)))
    out = call("qnn.requantize", biased, var("s", (o,), "float32"), zero_point=-3, axis=1)
    got, want = _build(out, {"x": x, "w": w, "b": bias, "s": scale})
    assert got.dtype == np.int8 and len(np.unique(got)) > 10
    np.testing.assert_array_equal(got, want)


def test_outer_conv_calls_the_kernel_in_the_generated_c():
    x, w = var("x", (1, 64, 25, 5), "int8"), var("w", (64, 64, 1, 1), "int8")
    fn = infer_type(IRModule.from_expr(Function((x, w), call("qnn.conv2d", x, w, input_zero_point=-128))))["main"]
    src = codegen_c([lower_function(fn, "qconv", HOST)], HOST).source
    assert "static void plait_q8_outer(" in src and "plait_q8_outer(&" in src
    assert "extern void plait_q8_outer" not in src


@X86_GCC
@pytest.mark.parametrize("flags", [["-mavx512f", "-mavx512vnni"], ["-march=native", "-mno-avx512vnni"], ["-march=x86-64"]],
                         ids=["vnni", "no-vnni", "baseline"])
def test_outer_kernel_bodies_give_the_same_sums(tmp_path, flags):
    lib = kernel_library(tmp_path, "plait_q8_outer",
                         "void run(const void* x, const void* w, void* s, int32_t n, int32_t p, int32_t c, int32_t o)"
                         " { plait_q8_outer(x, w, s, n, p, c, o); }\n", flags)
    lib.run.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int32] * 4
    for n, p, c, o in [(1, 125, 64, 64), (2, 21, 36, 32), (1, 3, 128, 48)]:
        x = _ints((n, p, c), "uint8", p)
        w = _ints((o, c), "int8", c)
        packed = np.ascontiguousarray(w.reshape(o // 16, 16, c // 4, 4).transpose(0, 2, 1, 3))
        s = np.zeros((n, o, p), np.int32)
        lib.run(x.ctypes.data, packed.ctypes.data, s.ctypes.data, n, p, c, o)
        want = np.einsum("npc,oc->nop", x.astype(np.int64), w.astype(np.int64)).astype(np.int32)
        np.testing.assert_array_equal(s, want)
