"""The integer kernels of small-channel models (ds_cnn, mobilenet_v2; plait/op/qnn_nn.py and
plait/schedule/int_rules.py): the packed window of a few-channel stem padded to a multiple of 16
taps and gathered from a padded copy, the 1x1 convolution packed pixel by pixel, output planes with
short rows summed as one block (one vector epilogue, unrolled sums), and the requantization of a
channels-last depthwise convolution vectorized along the channels. Each compiled form equals the
numpy reference bit for bit (uint8 and int8, zero points, strides, dilation, odd sizes, padding);
the schedules are checked in the generated C with the host facts pinned in the target (nothing here
depends on the host's ISA)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import plait
from plait.backends.c.backend import codegen_c
from plait.executor import GraphModule
from plait.ir.attrs import Attrs
from plait.lowering.lower import lower_function
from plait.op import get_op
from plait.op.qnn_nn import WINDOW_ALIGN, packed_conv, window_layout
from plait.relay import IRModule, call, infer_type, run, var
from plait.relay.expr import Function

HOST = "c -simd-bits=512 -clock-mhz=2445"


def _ints(shape, dtype, seed):
    lo, hi = (-128, 128) if dtype == "int8" else (0, 256)
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


# (x shape, x dtype, w shape, w dtype, attrs, the form packed_conv picks)
CONVS = [
    # windows of 35 taps (padded to 48), uint8 data, stride (1, 2), wide padding
    ((1, 1, 13, 9), "uint8", (5, 1, 5, 7), "int8",
     dict(strides=(1, 2), padding=(2, 3, 2, 3), input_zero_point=200), "window"),
    # a weight zero point: the window packed as int16 minus the zero points, 36 taps padded to 48
    ((2, 1, 11, 8), "int8", (3, 1, 6, 6), "int8",
     dict(strides=(2, 1), padding=(1, 1, 2, 0), input_zero_point=-5, kernel_zero_point=3), "window"),
    # two channels, dilated columns (the gather's column arithmetic of a dilated window)
    ((1, 2, 12, 14), "uint8", (4, 2, 3, 6), "int8",
     dict(dilation=(1, 2), padding=(1, 2, 1, 2), input_zero_point=9), "window"),
    # 3 channels, 3 x 3, stride 2 (mobilenet's stem): 27 taps as 3 window rows of 16 (no division by 9)
    ((1, 3, 13, 11), "int8", (5, 3, 3, 3), "int8", dict(strides=(2, 2), padding=(1, 1, 1, 1), input_zero_point=-3),
     "window"),
    ((1, 3, 9, 9), "uint8", (4, 3, 3, 3), "uint8",
     dict(strides=(2, 1), padding=(0, 1, 1, 0), input_zero_point=100, kernel_zero_point=128), "window"),
    # 5 rows of 5 taps: rows of 8, 40 taps padded to 48 (the last 8 zero weights too)
    ((1, 1, 12, 12), "int8", (3, 1, 5, 5), "int8", dict(padding=(2, 2, 2, 2), input_zero_point=4), "window"),
    # a window of exactly 32 taps: no padding
    ((1, 2, 9, 9), "int8", (6, 2, 4, 4), "int8", dict(strides=(2, 2), input_zero_point=0), "window"),
    # 1x1 over 32 channels, strided and padded: pixels packed one by one
    ((1, 32, 7, 9), "int8", (10, 32, 1, 1), "int8", dict(strides=(2, 2), padding=(1, 0, 1, 1), input_zero_point=-3),
     "rows"),
    # 1x1 over 40 channels on 5 x 3 planes (rows shorter than a block: summed as one block of 15)
    ((2, 40, 5, 3), "uint8", (9, 40, 1, 1), "int8", dict(input_zero_point=77), "rows"),
    ((1, 48, 5, 5), "uint8", (7, 48, 1, 1), "uint8", dict(input_zero_point=3, kernel_zero_point=140), "rows"),
    # depthwise channels-last (short rows), odd channel count, stride 2: requantized along the channels
    ((1, 19, 9, 7), "uint8", (19, 1, 3, 3), "int8",
     dict(groups=19, strides=(2, 2), padding=(1, 1, 1, 1), input_zero_point=130, kernel_zero_point=-1), None),
]


def _case(k):
    xs, xd, ws, wd, attrs, form = CONVS[k]
    return _ints(xs, xd, 10 + k), _ints(ws, wd, 200 + k), attrs, form


def _build(expr, feeds):
    mod = IRModule.from_expr(expr)
    return GraphModule(plait.build(mod, target=HOST))(**feeds)[0], run(mod, list(feeds.values()))


def _requantized(x, w, attrs):
    o = w.shape[0]
    acc = call("qnn.conv2d", var("x", x.shape, x.dtype.name), var("w", w.shape, w.dtype.name), **attrs)
    biased = call("add", acc, call("reshape", var("b", (o,), "int32"), newshape=(o, 1, 1)))
    return call("qnn.requantize", biased, var("s", (o,), "float32"), zero_point=5, axis=1)


@pytest.mark.parametrize("k", range(len(CONVS)))
def test_small_forms_equal_the_reference_alone_and_requantized(k):
    x, w, attrs, form = _case(k)
    assert packed_conv(x.shape, w.shape, get_op("qnn.conv2d").make_attrs(attrs)) == form
    got, want = _build(call("qnn.conv2d", var("x", x.shape, x.dtype.name), var("w", w.shape, w.dtype.name), **attrs),
                       {"x": x, "w": w})
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    o = w.shape[0]
    bias = np.random.default_rng(k).integers(-3000, 3000, o).astype(np.int32)
    scale = (np.random.default_rng(k + 1).uniform(0.5, 2.0, o) / (w.size / o * 64)).astype(np.float32)
    got, want = _build(_requantized(x, w, attrs), {"x": x, "w": w, "b": bias, "s": scale})
    assert got.dtype == np.int8 and len(np.unique(got)) > 10  # not all saturated
    np.testing.assert_array_equal(got, want)


def _source(expr, params, target: str = HOST) -> str:
    fn = Function(params, expr, None, Attrs({"Primitive": 1, "name": "qconv"}))
    fn = infer_type(IRModule.from_expr(fn))["main"]
    return codegen_c([lower_function(fn, "qconv", target)], target).source


def _ds_cnn_layer(shape, wshape, attrs):
    """One of ds_cnn's layers with its bias and requantization, as C for the pinned host."""
    x, w = var("x", shape, "int8"), var("w", wshape, "int8")
    b, s = var("b", (wshape[0],), "int32"), var("s", (wshape[0],), "float32")
    acc = call("qnn.conv2d", x, w, **attrs)
    out = call("qnn.requantize", call("add", acc, call("reshape", b, newshape=(wshape[0], 1, 1))), s, axis=1)
    return _source(out, (x, w, b, s))


def test_the_stem_window_is_padded_and_gathered_without_divisions():
    """ds_cnn's first layer (1 channel, 10 x 4 kernel, stride 2): 40 taps padded with zero weights to
    48 (a multiple of WINDOW_ALIGN: gcc's dot loop then has no scalar tail), the windows gathered
    from a padded copy of the input by loops whose indices need no division, the 25 x 5 outputs of
    a channel summed as one block (unrolled) and requantized by one vector loop."""
    src = _ds_cnn_layer((1, 1, 49, 10), (64, 1, 10, 4), dict(strides=(2, 2), padding=(4, 1, 5, 1),
                                                             input_zero_point=-7))
    assert WINDOW_ALIGN == 16
    body = src[src.index("int32_t qconv("):]
    assert not re.search(r"plait_c_floor(div|mod)_i64\(| / | % ", body), body
    assert re.search(r"T_qnn_conv2d_dot_rk < 48;", src), src
    assert "int32_t T_qnn_conv2d_dot_acc[125];" in src and "#pragma GCC unroll 5" in src, src
    assert re.search(r"#pragma omp simd\n\s*for \(int64_t \w+_epi = 0; \w+_epi < 125;", src), src


def test_a_three_channel_stem_window_has_rows_of_16_and_no_division():
    """mobilenet's stem (3 channels, 3 x 3, stride 2): 27 taps (24 or more are packed as windows), 9
    per window row, do not fill 32 in whole rows: each row padded to 16 (48 taps, window_layout), so
    that the gather splits the window index by 16, not 9."""
    assert window_layout(3, 9) == (16, 48) and window_layout(10, 4) == (4, 48) and window_layout(2, 16) == (16, 32)
    src = _ds_cnn_layer((1, 3, 96, 96), (16, 3, 3, 3), dict(strides=(2, 2), padding=(1, 1, 1, 1),
                                                             input_zero_point=-3))
    body = src[src.index("/* stage T_qnn_conv2d_pack */"):src.index("/* stage T_qnn_conv2d_wpack */")]
    assert not re.search(r"plait_c_floor(div|mod)_i64\(| / | % ", body), body
    assert re.search(r"T_qnn_conv2d_dot_rk < 48;", src) and "_t_1 < 9 ?" in body, src
    # LLVM forms no vpdpbusd from the dot loops (lowering's compiled_as_c fact): the direct nest there
    x, w = var("x", (1, 3, 96, 96), "int8"), var("w", (16, 3, 3, 3), "int8")
    llvm = _source(call("qnn.conv2d", x, w, strides=(2, 2), padding=(1, 1, 1, 1), input_zero_point=-3), (x, w),
                   "llvm -simd-bits=512")
    assert "T_qnn_conv2d_dot" not in llvm and "T_qnn_conv2d_pack" not in llvm, llvm


def test_a_pointwise_plane_with_short_rows_is_one_block():
    """A pointwise convolution like ds_cnn's (64 channels on 25 x 5, into 40: 64 take the "outer"
    form, test_int8_outer.py) in the rows form: the packed pixels read at ``pixel * 64 + channel``
    (no division by the row length), the plane's 125 outputs one block; without an epilogue (the
    int32 sums are the output) the rows stay blocks of their own."""
    attrs = dict(input_zero_point=-128)
    src = _ds_cnn_layer((1, 64, 25, 5), (40, 64, 1, 1), attrs)
    assert "int32_t T_qnn_conv2d_acc[125];" in src and " / 5" not in src and " % 5" not in src, src
    x, w = var("x", (1, 64, 25, 5), "int8"), var("w", (40, 64, 1, 1), "int8")
    alone = _source(call("qnn.conv2d", x, w, **attrs), (x, w))
    assert re.findall(r"int32_t T_qnn_conv2d_\w+\[(\d+)\];", alone) == ["5"], alone


def test_a_channels_last_depthwise_is_requantized_along_the_channels():
    """ds_cnn's depthwise convolution (64 channels, 25 x 5, channels-last sums): the requantization
    loop runs innermost along the channels, vectorized (reading the sums contiguously, storing the
    NCHW output strided); on a Cortex-M0 the depthwise convolution is the direct nest."""
    attrs = dict(groups=64, padding=(1, 1, 1, 1), input_zero_point=-128)
    src = _ds_cnn_layer((1, 64, 25, 5), (64, 1, 3, 3), attrs)
    requant = src[src.index("/* stage T_qnn_requantize */"):]
    assert re.search(r"#pragma omp simd\n\s*for \(int64_t T_qnn_requantize_ax1 = 0; T_qnn_requantize_ax1 < 64;",
                     requant), requant
    x, w = var("x", (1, 64, 25, 5), "int8"), var("w", (64, 1, 3, 3), "int8")
    m0 = _source(call("qnn.conv2d", x, w, **attrs), (x, w), "c -mcpu=cortex-m0")
    assert "nhwc" not in m0 and "omp simd" not in m0


def test_a_strided_depthwise_is_summed_over_the_phases_of_its_planes():
    """mobilenet's stride-2 depthwise convolution (48 channels, 48 x 48 -> 24 x 24): the padded
    planes copied with their rows grouped by phase, each of the 2 x 2 phases packed as one strided
    run (no division in either copy), the sums at every column of a phase's rows (25 for 24), copied
    out without the extra column and requantized as one run of 576 per channel (rows of 24 would
    leave gcc a scalar tail per row); its 12 x 12 outputs of 12 columns (shorter than a vector of
    int8) stay channels-last."""
    src = _ds_cnn_layer((1, 48, 48, 48), (48, 1, 3, 3), dict(groups=48, strides=(2, 2), padding=(1, 1, 1, 1),
                                                             input_zero_point=-128))
    copies = src[src.index("/* stage T_qnn_conv2d_pad */"):src.index("/* stage T_qnn_conv2d_wpack */")]
    assert not re.search(r"plait_c_floor(div|mod)_i64\(| / | % ", copies), copies
    assert re.search(r"T_qnn_conv2d_pack_f < 650;", copies) and "T_qnn_conv2d_pack_f * 2 + T_qnn_conv2d_pack_px" in copies
    assert "T_qnn_conv2d_planes" in src and "T_qnn_conv2d_compact_y * 25 + T_qnn_conv2d_compact_z" in src, src
    assert re.search(r"#pragma omp simd\n\s*for \(int64_t T_qnn_requantize_ax2_T_qnn_requantize_ax3_fused = 0; "
                     r"\w+ < 576;", src), src
    small = _ds_cnn_layer((1, 96, 24, 24), (96, 1, 3, 3), dict(groups=96, strides=(2, 2), padding=(1, 1, 1, 1),
                                                               input_zero_point=-128))
    assert "planes" not in small and "T_qnn_conv2d_nhwc" in small


def test_the_average_pool_of_a_requantized_plane_is_one_fused_sum():
    """ds_cnn's average pool (int32 sums of a requantized 25 x 5 plane per channel): the two reduce
    loops fused into one run of 125 summed in a local scalar (gcc vectorizes it as one reduction),
    equal to the reference."""
    shape = (1, 16, 25, 5)
    x, b, s = var("x", shape, "int32"), var("b", (16,), "int32"), var("s", (16,), "float32")
    q = call("qnn.requantize", call("add", x, call("reshape", b, newshape=(16, 1, 1))), s, axis=1)
    out = call("sum", call("cast", q, dtype="int32"), axis=(2, 3), keepdims=True)
    src = _source(out, (x, b, s))
    assert re.search(r"T_sum_k2_T_sum_k3_fused < 125;", src) and "int32_t T_sum_local[1];" in src, src
    rng = np.random.default_rng(3)
    feeds = {"x": rng.integers(-40000, 40000, shape).astype(np.int32), "b": rng.integers(-99, 99, 16).astype(np.int32),
             "s": rng.uniform(0.001, 0.01, 16).astype(np.float32)}
    got, want = _build(out, feeds)
    np.testing.assert_array_equal(got, want)


def test_the_transposing_pack_of_an_unpadded_1x1_convolution_is_tiled():
    """mobilenet's projection (96 -> 16 channels on 24 x 24): the NCHW input copied channels-last in
    unrolled tiles of 8 pixels x 4 channels (gcc transposes a tile in registers), with no bounds
    check (no padding); a padded pack keeps its element-by-element loop (the checks would branch)."""
    src = _ds_cnn_layer((1, 96, 24, 24), (16, 96, 1, 1), dict(input_zero_point=-128))
    pack = src[src.index("/* stage T_qnn_conv2d_pack */"):src.index("/* stage T_qnn_conv2d_wpack */")]
    assert "#pragma GCC unroll 8" in pack and "#pragma GCC unroll 4" in pack and "?" not in pack, pack
    assert re.search(r"T_qnn_conv2d_pack_xx_1 < 8;\s*\+\+T_qnn_conv2d_pack_xx_1\) \{\s*#pragma GCC unroll 4\s*"
                     r"for \(int64_t T_qnn_conv2d_pack_ch_1 = 0; T_qnn_conv2d_pack_ch_1 < 4;", pack), pack
    padded = _ds_cnn_layer((1, 96, 24, 24), (16, 96, 1, 1), dict(input_zero_point=-128, padding=(1, 1, 1, 1)))
    pack = padded[padded.index("/* stage T_qnn_conv2d_pack */"):padded.index("/* stage T_qnn_conv2d_wpack */")]
    assert "unroll" not in pack and "?" in pack, pack
