"""Float convolutions with short output rows computed over their copied windows (im2col:
plait/op/nn/conv.py ``_windowed``): which convolutions take the form, its loop structure on the host,
and its numbers compiled by gcc vs the numpy reference; with them, pointwise convolutions whose fused
rows are tiled in whole vectors with the last tile shifted back (loops.split_overlapping)."""

from __future__ import annotations

import numpy as np
import pytest

from plait import tir
from plait.backends.c.backend import build_c
from plait.op import get_op
from plait.op._compute import compute_facts
from plait.op.nn.conv import _wide_rows, _windowed
from plait.schedule.rules import default_schedule
from tests.schedule.test_rules import AVX512, HOST, allocs, loop_kinds, lower

# (data shape, weight shape, attrs): strides, padding, dilation, batch 2, channels not multiples of 16
CASES = [
    ((1, 1, 49, 10), (64, 1, 10, 4), dict(strides=(2, 2), padding=(4, 1, 5, 1))),  # DS-CNN's stem
    ((2, 3, 11, 9), (17, 3, 3, 3), dict(strides=(2, 2), padding=(1, 1, 1, 1))),
    ((1, 5, 9, 7), (20, 5, 3, 2), dict(strides=(1, 2), padding=(0, 1, 2, 0), dilation=(2, 1))),
    ((1, 2, 6, 6), (16, 2, 4, 3), {}),  # no padding: the copy reads the input itself
]

WIDE = [  # depthwise, stride 1, short rows: computed over the padded width, then cropped
    ((1, 64, 25, 5), (64, 1, 3, 3), dict(padding=(1, 1, 1, 1), groups=64)),  # DS-CNN's
    ((2, 17, 9, 6), (17, 1, 3, 2), dict(padding=(0, 1, 2, 0), groups=17)),
    ((1, 5, 11, 7), (5, 1, 3, 3), dict(padding=(2, 2, 2, 2), dilation=(2, 2), groups=5)),
    ((1, 3, 6, 6), (3, 1, 3, 3), dict(groups=3)),  # no padding: reads past the last row into the extra one
]

OVERLAPPED = [  # fused rows of 125 and 2 x 91 pixels: whole vectors, the last tile shifted back
    ((1, 20, 25, 5), (24, 20, 1, 1), {}),
    ((2, 7, 13, 7), (10, 7, 1, 1), {}),
]


def _names(f: tir.PrimFunc) -> list[str]:
    return [n.loop_var.name for n in tir.functor.pre_order(f.body) if isinstance(n, tir.For)]


@pytest.mark.parametrize("dshape,wshape,attrs", CASES)
def test_the_cases_take_the_window_form(dshape, wshape, attrs):
    f = lower("nn.conv2d", [dshape, wshape], **attrs)
    assert "T_nn_conv2d_window_t" in _names(f) and "T_nn_conv2d_rt" in _names(f)


@pytest.mark.parametrize("target", [HOST, AVX512])
def test_windowed_convs_compiled_match_numpy(target):
    op = get_op("nn.conv2d")
    funcs, args = [], []
    rng = np.random.default_rng(0)
    for k, (dshape, wshape, attrs) in enumerate(CASES + WIDE + OVERLAPPED):
        f = default_schedule(lower("nn.conv2d", [dshape, wshape], **attrs), target)
        funcs.append(f.with_attrs(global_symbol=f"window_{k}"))
        args.append((rng.uniform(-3, 3, dshape).astype("float32"), rng.uniform(-3, 3, wshape).astype("float32"),
                     attrs))
    lib = build_c(funcs, target)
    for k, (x, w, attrs) in enumerate(args):
        want = op.ref([x, w], op.make_attrs(attrs))
        arrays = [x, w, np.zeros(want.shape, "float32")]
        lib[f"window_{k}"](*arrays)
        np.testing.assert_allclose(arrays[2], want, rtol=1e-5, atol=1e-4)
    for f in (funcs[0], funcs[len(CASES)], funcs[-2]):  # rows of 125, 175, 125: overlapping tiles of vectors
        assert any(isinstance(n, tir.Min) for n in tir.functor.pre_order(f.body))


def test_the_product_is_tiled_over_the_fused_rows_in_whole_vectors():
    # DS-CNN's stem: 64 outputs x 40 window elements x 125 pixels, one reduce loop (gcc kept the tile of
    # nested (ry, rx) loops in memory: 20 us vs 9 us), the 25 x 5 pixels fused into one vectorized row
    f = lower("nn.conv2d", [(1, 1, 49, 10), (64, 1, 10, 4)], strides=(2, 2), padding=(4, 1, 5, 1))
    g = default_schedule(f, AVX512)
    k = loop_kinds(g)
    c = "T_nn_conv2d_"
    assert k[c + "rt"] == ("serial", 40) and c + "ry" not in k
    assert k[c + "y_" + c + "z_fused_1"][0] == "vectorized" and k[c + "oc_1"] == ("serial", 8)
    assert allocs(g)[c + "window"] == ((1, 40, 25, 5), "global.workspace")


@pytest.mark.parametrize("dshape,wshape,attrs", WIDE)
def test_the_depthwise_cases_take_the_wide_form(dshape, wshape, attrs):
    f = lower("nn.conv2d", [dshape, wshape], **attrs)
    wide = [b for b in allocs(f) if b.endswith("_wide")]
    assert wide and "T_nn_conv2d_wide_q" in _names(f)


@pytest.mark.parametrize("dshape,wshape,out,groups,strides,facts,want", [
    ((1, 64, 27, 7), (64, 1, 3, 3), (1, 64, 25, 5), 64, (1, 1), {}, True),
    ((1, 64, 27, 7), (64, 1, 3, 3), (1, 64, 25, 5), 64, (1, 1), {"simd_bits": 0}, False),  # a microcontroller
    ((1, 64, 27, 7), (64, 1, 3, 3), (1, 64, 13, 3), 64, (2, 2), {}, False),  # strided: rows would not line up
    ((1, 16, 10, 10), (16, 1, 3, 3), (1, 16, 8, 8), 16, (1, 1), {}, False),  # rows of 8
    ((1, 8, 7, 7), (16, 1, 3, 3), (1, 16, 5, 5), 8, (1, 1), {}, False),  # two outputs per channel
    ((1, 8, 7, 7), (8, 2, 3, 3), (1, 8, 5, 5), 4, (1, 1), {}, False),  # grouped, not depthwise
    ((1, 8, 7, 7), (8, 1, 1, 1), (1, 8, 7, 7), 8, (1, 1), {}, False),  # 1x1
])
def test_which_depthwise_convolutions_take_the_wide_form(dshape, wshape, out, groups, strides, facts, want):
    with compute_facts(**facts):
        assert _wide_rows(dshape, wshape, out, groups, strides) is want


@pytest.mark.parametrize("dshape,wshape,out,groups,facts,want", [
    ((1, 1, 49, 10), (64, 1, 10, 4), (1, 64, 25, 5), 1, {}, True),
    ((1, 1, 49, 10), (64, 1, 10, 4), (1, 64, 25, 5), 1, {"simd_bits": 0}, False),  # a microcontroller: no copy
    ((1, 64, 27, 7), (64, 1, 3, 3), (1, 64, 25, 5), 64, {}, False),  # depthwise
    ((1, 64, 25, 5), (64, 64, 1, 1), (1, 64, 25, 5), 1, {}, False),  # 1x1: already a product
    ((1, 16, 10, 10), (32, 16, 3, 3), (1, 32, 8, 8), 1, {}, False),  # rows of 8: whole vectors on AVX2
    ((1, 1, 49, 10), (8, 1, 10, 4), (1, 8, 25, 5), 1, {}, False),  # 8 outputs: the copy would cost as much
    ((1, 1, 12, 12), (16, 1, 2, 2), (1, 16, 6, 6), 1, {}, False),  # 4 products per output
    ((1, 256, 9, 9), (64, 256, 3, 3), (1, 64, 7, 7), 1, {}, False),  # a copy of 441 KiB
])
def test_which_convolutions_take_the_window_form(dshape, wshape, out, groups, facts, want):
    with compute_facts(**facts):
        assert _windowed(dshape, wshape, out, groups) is want


def test_the_wide_depthwise_is_tiled_in_whole_vectors_with_its_taps_unrolled():
    # DS-CNN's depthwise 3x3: 175 wide outputs per channel in 11 vectors of 16 (the last shifted back),
    # one chain of 9 FMAs per vector, unrolled (6.3 -> 5.6 us)
    f = lower("nn.conv2d", [(1, 64, 25, 5), (64, 1, 3, 3)], padding=(1, 1, 1, 1), groups=64)
    g = default_schedule(f, AVX512)
    k = loop_kinds(g)
    c = "T_nn_conv2d_wide_"
    assert k[c + "q_0"] == ("serial", 11) and k[c + "q_1"] == ("vectorized", 16)
    assert k[c + "ry"] == ("unrolled", 3) and k[c + "rx"] == ("unrolled", 3)
    assert allocs(g)["T_nn_conv2d_wide"] == ((1, 64, 175), "global.workspace")



def test_the_window_copy_bound_counts_the_input_dtype_bytes():
    """MAX_WINDOW_BYTES bounds the copy in bytes of the input's dtype: a copy of float32 elements just
    under it is taken, the same number of float64 elements (twice the bytes) is not."""
    from plait.op.nn.conv import MAX_WINDOW_BYTES

    k, ow = 16, 4  # 1 channel, 4x4 kernel: 16 taps copied per output, rows of 4 pixels, 16 output channels
    oh = MAX_WINDOW_BYTES // (4 * k * ow)
    dshape, wshape, out = (1, 1, oh + 3, ow + 3), (16, 1, 4, 4), (1, 16, oh, ow)
    with compute_facts():
        assert _windowed(dshape, wshape, out, 1, 4) is True
        assert _windowed(dshape, wshape, out, 1, 8) is False
