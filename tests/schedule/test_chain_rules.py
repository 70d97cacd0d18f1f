"""Reductions that take no vectors: a block of outputs computed together (plait/schedule/chain_rules.py)."""

from __future__ import annotations

import pytest

from plait.schedule import knobs
from plait.schedule.rules import default_schedule
from tests.schedule.test_rules import AVX512, HOST, allocs, close, loop_kinds, lower


@pytest.mark.parametrize("target", [HOST, AVX512])
@pytest.mark.parametrize("shape,block", [((1, 64, 25, 5), 8), ((2, 6, 5, 5), 6), ((1, 7, 3, 3), 7)])
def test_a_global_pool_sums_a_block_of_channels_at_once(target, shape, block):
    # DS-CNN's global average pool (rows of 125: no multiple of the lanes, channels 125 apart): 8
    # independent sums below the reduce loops instead of one sum after another
    f = lower("nn.global_avg_pool2d", [shape])
    g = default_schedule(f, target)
    k = loop_kinds(g)
    p = "T_nn_global_avg_pool2d_"
    inner = p + ("ax1_1" if block < shape[1] else "ax1")
    assert list(k)[-4:] == [p + "r0", p + "r1", inner, inner + "_epi"] and k[inner] == ("serial", block)
    assert allocs(g)[p + "acc"] == ((block, 1), "local")
    close(f, g, rtol=0, atol=0)  # each sum in the same order: the same bits


def test_the_interleave_knob_keeps_one_sum_at_a_time():
    f = lower("nn.global_avg_pool2d", [(1, 64, 25, 5)])
    with knobs.using({}) as space:
        default_schedule(f, HOST)
    assert space.knobs["T_nn_global_avg_pool2d_ax0.interleave"].choices == (1, 2, 4, 8)
    with knobs.using({"T_nn_global_avg_pool2d_ax0.interleave": 1}):
        g = default_schedule(f, HOST)
    assert loop_kinds(g)["T_nn_global_avg_pool2d_ax1"] == ("serial", 64)
    close(f, g, rtol=0, atol=0)
