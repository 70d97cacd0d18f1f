"""The fast integer kernels (plait/op/qnn_nn.py computes, plait/schedule/int_rules.py): every form
of ``qnn.conv2d`` (packed rows, packed windows, channels-last depthwise, the direct loop nest)
compiled to C equals the numpy reference bit for bit, alone and with its bias and requantization
fused; the dot-product loops reach the C compiler as signed sums (what gcc needs to use dot-product
instructions), and on Cortex-M7 gcc turns them into DSP multiply-accumulates. Schedules depend on
the SIMD width, so the host facts are pinned in the target; nothing here depends on the host's ISA."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

import plait
from plait.backends.c.backend import codegen_c
from plait.executor import GraphModule
from plait.ir.attrs import Attrs
from plait.lowering.lower import lower_function
from plait.op import get_op
from plait.op.qnn_nn import packed_conv
from plait.relay import IRModule, call, infer_type, run, var
from plait.relay.expr import Function
from plait.tir.expr import Add, BufferLoad, IntImm, Var
from plait.tir.int_bounds import IntBounds
from plait.tir.op import cast
from plait.tir.stmt import Allocate, Buffer, BufferStore, For, PrimFunc, seq

HOST = "c -simd-bits=512 -clock-mhz=2445"


def _ints(shape, dtype, seed):
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


# (x shape, x dtype, w shape, w dtype, attrs, the form packed_conv picks)
CONVS = [
    # window rows of 3 x 16 channels: the input packed channels-last, u8 x s8 with the zero-point correction
    # (stride 1: the rows of each output row stacked, tests/quant/test_int8_dot_products.py)
    ((1, 16, 7, 9), "int8", (5, 16, 3, 3), "int8", dict(padding=(1, 1, 1, 1), input_zero_point=-7), "stacked"),
    # uint8 data, stride 2, uneven padding, 33 output channels
    ((2, 12, 10, 11), "uint8", (33, 12, 3, 3), "int8",
     dict(strides=(2, 2), padding=(0, 1, 2, 1), input_zero_point=131), "rows"),
    # a weight zero point: both packed as int16 minus their zero points
    ((1, 16, 6, 5), "int8", (4, 16, 3, 3), "int8",
     dict(padding=(1, 1, 1, 1), input_zero_point=3, kernel_zero_point=-2), "rows"),
    ((1, 16, 6, 5), "uint8", (4, 16, 3, 3), "uint8",
     dict(padding=(1, 0, 1, 0), input_zero_point=128, kernel_zero_point=120), "rows"),
    # dilated rows: channels alone are the contiguous run
    ((1, 40, 9, 9), "int8", (3, 40, 3, 3), "int8", dict(dilation=(2, 2), padding=(2, 2, 2, 2),
                                                        input_zero_point=5), "rows"),
    # 1x1 over 64 channels, uint8 data with zero point 0 (no correction)
    ((1, 64, 5, 5), "uint8", (7, 64, 1, 1), "int8", dict(input_zero_point=0), "rows"),
    # one input channel, a 10x4 kernel (ds_cnn's first layer): each output's whole window packed
    ((1, 1, 49, 10), "int8", (8, 1, 10, 4), "int8",
     dict(strides=(2, 2), padding=(4, 1, 5, 1), input_zero_point=-7), "window"),
    ((1, 4, 9, 7), "uint8", (6, 4, 3, 3), "int8", dict(padding=(1, 1, 1, 1), input_zero_point=17), "window"),
    # depthwise, 24 channels (not a multiple of the vector), stride 2, nonzero zero points
    ((1, 24, 9, 7), "int8", (24, 1, 3, 3), "int8",
     dict(groups=24, strides=(2, 2), padding=(1, 1, 1, 1), input_zero_point=5, kernel_zero_point=-3), None),
    ((2, 16, 5, 6), "uint8", (16, 1, 3, 3), "int8", dict(groups=16, padding=(1, 1, 1, 1), input_zero_point=99), None),
    # depthwise of stride 1 with padded rows at most 5/4 of the output's: over whole padded planes
    ((1, 8, 5, 40), "int8", (8, 1, 3, 3), "int8",
     dict(groups=8, padding=(1, 1, 1, 1), input_zero_point=-128, kernel_zero_point=2), None),
    ((1, 9, 6, 30), "uint8", (9, 1, 3, 3), "uint8",
     dict(groups=9, dilation=(2, 2), padding=(2, 2, 2, 2), input_zero_point=200, kernel_zero_point=3), None),
    ((2, 12, 7, 11), "int8", (12, 1, 3, 2), "int8", dict(groups=12, padding=(0, 0, 2, 1), input_zero_point=4), None),
    # strided depthwise with output rows of 16 columns or more: over the S x S phases of the padded planes
    ((1, 8, 34, 36), "int8", (8, 1, 3, 3), "int8",
     dict(groups=8, strides=(2, 2), padding=(1, 1, 1, 1), input_zero_point=-128, kernel_zero_point=1), None),
    ((1, 6, 33, 35), "uint8", (6, 1, 3, 3), "uint8",
     dict(groups=6, strides=(2, 2), padding=(1, 0, 1, 1), input_zero_point=140, kernel_zero_point=120), None),
    ((2, 4, 20, 52), "int8", (4, 1, 4, 3), "int8", dict(groups=4, strides=(3, 3), padding=(1, 1, 2, 1),
                                                        input_zero_point=6), None),
    # depthwise with output rows of 32 columns or more: the direct nest (vectors along the rows)
    ((1, 16, 9, 66), "uint8", (16, 1, 3, 3), "int8",
     dict(groups=16, strides=(1, 2), padding=(1, 1, 1, 1), input_zero_point=77), None),
    # 1x1 over a few channels (mobilenet's expansions): the direct nest as one output channel x a
    # block of pixels (int_rules' pixel rows): 144 pixels in one block, 288 in two
    ((1, 8, 12, 12), "int8", (24, 8, 1, 1), "int8", dict(input_zero_point=-128), None),
    ((2, 5, 16, 18), "uint8", (6, 5, 1, 1), "uint8", dict(input_zero_point=3, kernel_zero_point=130), None),
    # strided 1x1: the pixels are not contiguous, the float rules' tile
    ((1, 6, 9, 9), "int8", (4, 6, 1, 1), "int8", dict(strides=(2, 2), input_zero_point=1), None),
    # 3 channels, 3 x 3 (mobilenet's stem): 27 taps packed as 3 window rows of 16 (48, zero weights past 9)
    ((1, 3, 8, 8), "int8", (4, 3, 3, 3), "int8", dict(padding=(1, 1, 1, 1), input_zero_point=9), "window"),
    # the direct loop nest: a window too small to pack (18 taps)
    ((1, 2, 8, 8), "int8", (4, 2, 3, 3), "int8", dict(padding=(1, 1, 1, 1), input_zero_point=9), None),
    # grouped (not depthwise): the direct nest with a row accumulator that gcc 12 once put, misaligned,
    # in the red zone (a segfault; host builds pass -mno-red-zone)
    ((1, 16, 7, 7), "uint8", (16, 4, 3, 3), "int8", dict(groups=4, padding=(1, 1, 1, 1), input_zero_point=0), None),
    ((1, 8, 11, 11), "uint8", (8, 4, 3, 3), "int8", dict(groups=2, padding=(1, 1, 1, 1), input_zero_point=7), None),
]


def _case(k):
    xs, xd, ws, wd, attrs, form = CONVS[k]
    return _ints(xs, xd, k), _ints(ws, wd, 100 + k), attrs, form


def _build(expr, feeds):
    mod = IRModule.from_expr(expr)
    return GraphModule(plait.build(mod, target=HOST))(**feeds)[0], run(mod, list(feeds.values()))


@pytest.mark.parametrize("k", range(len(CONVS)))
def test_conv2d_forms_equal_the_reference_bit_for_bit(k):
    x, w, attrs, form = _case(k)
    assert packed_conv(x.shape, w.shape, get_op("qnn.conv2d").make_attrs(attrs)) == form
    got, want = _build(call("qnn.conv2d", var("x", x.shape, x.dtype.name), var("w", w.shape, w.dtype.name), **attrs),
                       {"x": x, "w": w})
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("k", [0, 1, 6, 8, 10, 11, 13, 14, 15, 17, 18, 20])
def test_conv2d_with_bias_and_requantization_fused_equals_the_reference(k):
    x, w, attrs, _ = _case(k)
    o = w.shape[0]
    bias = np.random.default_rng(k).integers(-3000, 3000, o).astype(np.int32)
    scale = (np.random.default_rng(k + 1).uniform(0.5, 2.0, o) / (w.size / o * 64)).astype(np.float32)
    acc = call("qnn.conv2d", var("x", x.shape, x.dtype.name), var("w", w.shape, w.dtype.name), **attrs)
    biased = call("add", acc, call("reshape", var("b", (o,), "int32"), newshape=(o, 1, 1)))
    out = call("qnn.requantize", biased, var("s", (o,), "float32"), zero_point=-3, axis=1)
    got, want = _build(out, {"x": x, "w": w, "b": bias, "s": scale})
    assert got.dtype == np.int8 and len(np.unique(got)) > 10  # not all saturated
    np.testing.assert_array_equal(got, want)


def _conv_c(target: str) -> str:
    """The C of a pointwise convolution like ds_cnn's (64 channels, 25 x 5) for ``target``, into 40
    channels (64 take the "outer" form's kernel on a host with 512-bit vectors, test_int8_outer.py)."""
    x, w = var("x", (1, 64, 25, 5), "int8"), var("w", (40, 64, 1, 1), "int8")
    fn = Function((x, w), call("qnn.conv2d", x, w, input_zero_point=-128), None,
                  Attrs({"Primitive": 1, "name": "qconv"}))
    fn = infer_type(IRModule.from_expr(fn))["main"]
    return codegen_c([lower_function(fn, "qconv", target)], target).source


def test_the_dot_loop_reaches_the_c_compiler_as_a_signed_sum():
    """gcc recognizes ``acc += (int32_t)u8 * (int32_t)s8`` as a dot product only in signed arithmetic:
    the accumulator's bound (IntBounds) lets the C emitter drop the unsigned wrap-around."""
    src = _conv_c(HOST)
    updates = [ln.strip() for ln in src.splitlines() if "_wpack[" in ln and re.match(r"\s*(\w+)\[.*\] = \1\[", ln)]
    assert len(updates) == 1, src
    assert "uint32_t" not in updates[0]
    assert re.search(r"\(int32_t\)T_qnn_conv2d_pack\[.*\* \(int32_t\)T_qnn_conv2d_wpack", updates[0])


def _lowered_c(fn_expr, params, target: str = HOST) -> str:
    fn = Function(params, fn_expr, None, Attrs({"Primitive": 1, "name": "qconv"}))
    fn = infer_type(IRModule.from_expr(fn))["main"]
    return codegen_c([lower_function(fn, "qconv", target)], target).source


@pytest.mark.parametrize("shape, block", [((1, 8, 48, 48), 256), ((1, 8, 12, 12), 144), ((1, 8, 17, 19), None)])
def test_a_short_1x1_convolution_sums_a_block_of_pixels_per_output_channel(shape, block):
    """A 1x1 convolution over 8 channels: the pixel loops fused, blocks of pixels (a divisor of
    their count of at least two 16-lane vectors, at most 256) summed in one local accumulator row
    and stored by one vector loop; 17 x 19 pixels have no such divisor: the float rules' tile."""
    x, w = var("x", shape, "int8"), var("w", (16, 8, 1, 1), "int8")
    src = _lowered_c(call("qnn.conv2d", x, w, input_zero_point=-128), (x, w))
    if block is None:
        assert "_fused" not in src
        return
    assert re.findall(r"int32_t T_qnn_conv2d_\w+\[(\d+)\];", src) == [str(block)], src
    assert src.count("#pragma omp simd") == 3  # init, sums, store
    # on a machine without SIMD (a Cortex-M0) the loop nest is left to the usual rules
    assert "_fused" not in _lowered_c(call("qnn.conv2d", x, w, input_zero_point=-128), (x, w), "c -mcpu=cortex-m0")


@pytest.mark.parametrize("width, strides, form", [(5, (1, 1), "nhwc"), (24, (1, 1), "planes"),
                                                   (31, (1, 2), "nhwc"), (66, (1, 2), None)])
def test_the_depthwise_form_follows_the_rows(width, strides, form):
    """Channels-last for short rows, whole padded planes for stride 1 when the padded rows are at
    most 5/4 of the output's, the direct nest for output rows of 32 columns or more."""
    x, w = var("x", (1, 16, 6, width), "int8"), var("w", (16, 1, 3, 3), "int8")
    src = _lowered_c(call("qnn.conv2d", x, w, groups=16, strides=strides, padding=(1, 1, 1, 1),
                          input_zero_point=-128), (x, w))
    assert [f for f in ("nhwc", "planes") if f"T_qnn_conv2d_{f}" in src] == ([form] if form else [])


def test_accumulator_bounds_need_every_store_to_be_an_init_or_a_bounded_update():
    acc, x = Buffer("acc", (1,), "int32", "local"), Buffer("x", (64,), "int8")
    k = Var("k", "int64")
    zero = IntImm(0, "int64")
    load = BufferLoad(acc, (zero,))

    def bound(update_value):
        body = Allocate(acc, seq(BufferStore(acc, IntImm(7, "int32"), (zero,)),
                                 For(k, 0, 64, "serial", BufferStore(acc, update_value, (zero,)))))
        return IntBounds(PrimFunc((x,), body)).accumulators.get(acc)

    product = cast("int32", BufferLoad(x, (k,))) * cast("int32", BufferLoad(x, (k,)))
    assert bound(Add(load, product)) == (7 - 64 * 128 * 127, 7 + 64 * 128 * 128)
    assert bound(Add(load, load)) is None  # the update reads the accumulator twice: no bound
    assert bound(Add(load, BufferLoad(Buffer("y", (64,), "int32"), (k,)))) is None  # unbounded terms


needs_arm_gcc = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")


def _arm_asm(src: str, cpu: str, tmp_path) -> str:
    path = tmp_path / f"qconv_{cpu}.c"
    path.write_text(src, encoding="utf-8")
    out = subprocess.run(["arm-none-eabi-gcc", "-O3", f"-mcpu={cpu}", "-mthumb", "-std=c99", "-fno-math-errno",
                          "-S", "-o", "-", str(path)], capture_output=True, text=True, check=True)
    return out.stdout


@needs_arm_gcc
def test_cortex_m7_uses_dsp_multiply_accumulates(tmp_path):
    """The dot loop compiled for a Cortex-M7 (DSP extension) is a call of an SMLAD kernel (two 16-bit
    multiply-accumulates per instruction: plait/schedule/dsp_dot.py); a Cortex-M0 has none and still builds."""
    src = _conv_c("c -mcpu=cortex-m7f")
    m7 = _arm_asm(src, "cortex-m7", tmp_path)
    assert re.search(r"^\s+smlad\b", m7, re.M | re.I), "no SMLAD for cortex-m7"
    m0 = _arm_asm(_conv_c("c -mcpu=cortex-m0"), "cortex-m0", tmp_path)
    assert not re.search(r"^\s+smla", m0, re.M | re.I) and re.search(r"^\s+muls\b", m0, re.M)


def test_a_clamped_float_converts_with_a_plain_c_cast():
    """A requantization ends in ``(int)nearbyint(min(max(v, lo), hi))``: with literal bounds second
    (C's min/max give the literal for a NaN first operand) every value is finite and in range, so
    the C emitter casts directly instead of calling the saturating helper; anything else keeps it."""
    from plait.backends.c.emit import clamped_within
    from plait.tir.expr import Call, FloatImm, Max, Min, Select

    v = cast("float32", BufferLoad(Buffer("a", (4,), "int32"), (IntImm(0, "int64"),))) * FloatImm(0.01, "float32")
    lo, hi = FloatImm(-128.0, "float32"), FloatImm(127.0, "float32")
    rounded = Call("float32", "nearbyint", (Min(Max(v, lo), hi),))
    assert clamped_within(rounded, "int32") and clamped_within(rounded, "int8")
    assert clamped_within(Select(v > lo, Max(Min(v, hi), lo), FloatImm(0.0, "float32")), "int8")
    assert not clamped_within(v, "int32")                        # unclamped
    assert not clamped_within(Min(Max(v, lo), hi), "uint8")      # -128 is not a uint8
    assert not clamped_within(Min(Max(lo, v), hi), "int32")      # literal first: a NaN passes max
    x, w, s = var("x", (1, 16, 6, 6), "int8"), var("w", (4, 16, 3, 3), "int8"), var("s", (4,), "float32")
    fn = Function((x, w, s), call("qnn.requantize", call("qnn.conv2d", x, w, input_zero_point=-7), s, axis=1),
                  None, Attrs({"Primitive": 1, "name": "qconv"}))
    src = codegen_c([lower_function(infer_type(IRModule.from_expr(fn))["main"], "qconv", HOST)], HOST).source
    assert "(int32_t)nearbyintf(" in src and "plait_c_f32_to_int32(" not in src
