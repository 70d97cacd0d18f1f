"""split_phases (plait.schedule.layout) and the strided-convolution step of the cpu rules that uses it."""

from __future__ import annotations

import pytest

from plait import tir
from plait.schedule import Schedule, default_schedule
from plait.schedule.layout import split_phases
from tests.schedule import fixtures as fx
from tests.schedule.test_loops import err, kinds, same
from tests.schedule.test_reduction import allocs
from tests.schedule.test_rules import HOST, close, lower


def test_split_phases_deinterleaves_the_padded_input_of_a_strided_conv():
    f = fx.conv2d(c=2, h=7, w=9, o=2, k=3, pad=1, stride=2)
    s = Schedule(f)
    s.pad_input("data")
    assert allocs(s.func)["data_pad"] == ((1, 2, 9, 11), "global.workspace")
    assert s.split_phases("data_pad", 2) == "data_pad_ph"
    assert allocs(s.func)["data_pad_ph"] == ((1, 2, 9, 2, 6), "global.workspace")  # 11 columns: phases of 6 and 5
    text = tir.print_prim_func(tir.simplify(s.func))
    # column 2 * ow + kw is now (kw % 2, ow + kw // 2): contiguous in ow
    assert "data_pad_ph[conv_n, conv_ic, conv_oh * 2 + conv_kh, truncmod(conv_kw, 2), conv_ow + truncdiv(conv_kw, 2)]" in text
    # the copy writes each phase with a loop of its own: columns 1..9 of 11 -> phase 1 q 0..4, phase 0 q 1..4
    k = kinds(s.func)
    assert "data_copy_3" not in k and k["data_copy_3_p0"] == ("serial", 4) and k["data_copy_3_p1"] == ("serial", 5)
    assert "data_pad_ph[data_copy_0, data_copy_1, data_copy_2 + 1, 1, data_copy_3_p1] = " \
        "data[data_copy_0, data_copy_1, data_copy_2, data_copy_3_p1 * 2]" in text
    same(f, s.func)


def test_split_phases_stride_3_and_a_constant_column():
    f = fx.conv2d(c=1, h=8, w=10, o=1, k=2, pad=2, stride=3)
    s = Schedule(f)
    s.pad_input("data")
    s.split_phases("data_pad", 3)
    same(f, s.func)


def test_split_phases_errors():
    f = fx.conv2d(c=1, h=5, w=5, o=1, pad=1, stride=2)
    g = Schedule(f)
    g.pad_input("data")
    assert err(split_phases, g.func, "data_pad", 1) == "split_phases('data_pad', 1): expected a stride >= 2"
    assert err(split_phases, g.func, "data", 2) == \
        "split_phases('data', 2): expected one allocated buffer called 'data', found 0"


@pytest.mark.parametrize("target,lanes", [(HOST, 8), ("x86-64-avx512", 16)])
def test_strided_conv_reads_a_deinterleaved_input_and_vectorizes_along_the_row(target, lanes):
    f = lower("nn.conv2d", [(1, 4, 32, 32), (8, 4, 3, 3)], strides=(2, 2), padding=(1, 1, 1, 1))
    g = default_schedule(f, target)
    assert allocs(g)["in0_pad_ph"] == ((1, 4, 33, 2, 17), "global.workspace")  # the last pad row and column are never read
    vec = [n for n, (kind, _) in kinds(g).items() if kind == "vectorized" and n.startswith("T_nn_conv2d_z")]
    assert vec and all(kinds(g)[n][1] in (lanes, 16) for n in vec)
    close(f, g, rtol=0, atol=0)  # the same sums in the same order


def test_the_deinterleave_is_a_knob():
    from plait.schedule import knobs

    f = lower("nn.conv2d", [(1, 4, 16, 16), (8, 4, 3, 3)], strides=(2, 2), padding=(1, 1, 1, 1))
    with knobs.using({}) as space:
        g = default_schedule(f, HOST)
    assert space.knobs["T_nn_conv2d_n.deinterleave"].choices == (False, True) and "in0_pad_ph" in allocs(g)
    with knobs.using({"T_nn_conv2d_n.deinterleave": False}):
        g = default_schedule(f, HOST)
    assert "in0_pad_ph" not in allocs(g) and "in0_pad" in allocs(g)
    close(f, g, rtol=0, atol=0)
