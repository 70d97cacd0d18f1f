"""estimate_cost: exact flop and byte counts, and the orderings placement relies on."""

from __future__ import annotations

import dataclasses

import pytest

from plait import tir
from plait.schedule.cost import ScheduleCost, estimate_cost
from plait.schedule.rules import default_schedule, machine_for
from plait.target import TargetError
from tests.schedule import fixtures as fx
from tests.schedule.test_rules import lower

HOST = "c -simd-bits=256 -clock-mhz=2445"  # host facts pinned: the same answers on AVX2 and AVX-512 machines


def test_flops_and_bytes_are_exact():
    m, n, k = 6, 16, 5
    c = estimate_cost(fx.matmul(m, n, k), HOST)
    assert c.flops == 2 * m * n * k
    assert c.bytes == 4 * (m * k + k * n + m * n)  # each buffer read or written once
    conv = fx.conv2d(n=1, c=3, h=6, w=7, o=4, k=3, pad=1)
    outs = 4 * 6 * 7
    assert estimate_cost(conv, HOST).flops == 2 * outs * 3 * 9 + 2 * outs  # MACs, then bias add and relu max
    # schedules move work around but do not change it
    assert estimate_cost(default_schedule(conv, HOST), HOST).flops == estimate_cost(conv, HOST).flops
    assert estimate_cost(conv, machine=machine_for(HOST)) == estimate_cost(conv, HOST)  # a machine, no target
    with pytest.raises(TargetError) as exc:
        estimate_cost(conv)
    assert str(exc.value) == ("estimate_cost: no target given (pass a Target, a target string or a Piece, "
                              "or a machine)")


def test_soft_float_microcontroller_is_slower_than_one_with_an_fpu():
    f = lower("nn.conv2d", [(1, 8, 16, 16), (8, 8, 3, 3)], padding=(1, 1, 1, 1))
    m0 = estimate_cost(default_schedule(f, "cortex-m0"), "cortex-m0")
    m7 = estimate_cost(default_schedule(f, "cortex-m7f"), "cortex-m7f")
    assert m0.cycles > 10 * m7.cycles  # ~60 cycles per soft-float operation vs one FMA per cycle
    assert m0.seconds > 100 * m7.seconds  # and 16 MHz vs 216 MHz
    host = estimate_cost(default_schedule(f, HOST), HOST)
    assert host.seconds < m7.seconds / 100


def test_vectorized_host_schedule_is_cheaper_than_scalar():
    for f, gain in ((lower("nn.conv2d", [(1, 16, 16, 16), (16, 16, 3, 3)], padding=(1, 1, 1, 1)), 4),
                    (lower("nn.dense", [(1, 256), (128, 256)]), 4),
                    (lower("nn.softmax", [(8, 256)]), 1.2)):  # exp stays a scalar libm call
        plain = estimate_cost(f, HOST)
        sched = estimate_cost(default_schedule(f, HOST), HOST)
        assert sched.cycles < plain.cycles / gain, (f.name, plain, sched)
        # the same loops without the vector annotations cost more
        serial = tir.simplify(_all_serial(default_schedule(f, HOST)))
        assert estimate_cost(serial, HOST).cycles > sched.cycles


def test_wider_vectors_are_cheaper():
    f = lower("nn.conv2d", [(1, 16, 16, 32), (32, 16, 3, 3)], padding=(1, 1, 1, 1))
    avx2 = estimate_cost(default_schedule(f, HOST), HOST)
    avx512 = estimate_cost(default_schedule(f, "x86-64-avx512"), "x86-64-avx512")
    assert avx512.cycles < avx2.cycles


def test_cost_grows_with_the_problem_and_memory_bounds_big_buffers():
    small = estimate_cost(lower("add", [(64,), (64,)]), HOST)
    big = estimate_cost(lower("add", [(1 << 22,), (1 << 22,)]), HOST)
    assert big.cycles > 1000 * small.cycles
    assert big.memory_cycles == big.bytes / machine_for(HOST).bytes_per_cycle > 0 and small.memory_cycles == 0
    # within the last cache level, data that overflows the first-level cache streams from the next one
    m = dataclasses.replace(machine_for(HOST), cache_bytes=1 << 40)
    mid = estimate_cost(lower("add", [(1 << 22,), (1 << 22,)]), machine=m)
    assert mid.memory_cycles == mid.bytes / m.l2_bytes_per_cycle == big.bytes / 20.0
    assert estimate_cost(lower("add", [(1 << 10,), (1 << 10,)]), machine=m).memory_cycles == 0  # 12 KiB: in L1
    m = dataclasses.replace(m, l1_bytes=0)  # no first-level cache (a microcontroller's SRAM)
    assert estimate_cost(lower("add", [(1 << 22,), (1 << 22,)]), machine=m).memory_cycles == 0


def test_cost_text():
    c = ScheduleCost(2445.0, 64, 10, 2400.0, 0.0, 2445.0)
    assert c.microseconds == 1.0
    assert str(c) == "2445 cycles (1 us at 2445 MHz), 10 flops, 64 bytes"


def _all_serial(f):
    class Serial(tir.StmtExprMutator):
        def rewrite_for(self, pre, post):
            return tir.For(post.loop_var, post.min, post.extent, "serial", post.body, post.annotations)

    return Serial().visit(f)


def test_a_vectorized_remainder_runs_in_narrower_vectors_then_element_by_element():
    from plait.schedule.cost import vector_ops

    # 16 lanes (512-bit floats), narrowest vector 4 (128-bit)
    assert [vector_ops(n, 16, 4) for n in (16, 25, 18, 12, 24, 50, 7, 3)] == [1, 3, 3, 2, 2, 5, 4, 3]
    assert vector_ops(25, 8, 4) == 4  # 256-bit: 8 + 8 + 8 + 1
    assert vector_ops(6, 4, 4) == 3  # 128-bit (NEON, SSE, Helium): 4, then 2 single elements
    assert vector_ops(7, 1, 1) == 7  # no SIMD
    # a tile of 25 floats costs as much as 3 vectors of 16: more than 25 / 16 of one
    f = default_schedule(lower("add", [(25,), (25,)]), "x86-64-avx512")
    g = default_schedule(lower("add", [(32,), (32,)]), "x86-64-avx512")
    assert estimate_cost(f, "x86-64-avx512").compute_cycles > estimate_cost(g, "x86-64-avx512").compute_cycles


def test_a_vector_wider_than_the_fma_pipes_issues_in_passes():
    from plait.schedule.cost import vector_passes

    # 512-bit vectors (16 floats) through 256-bit FMA pipes (8 floats, AMD Zen 4): two passes each; the
    # remainder's 256-bit vector one, its single elements one each
    assert [vector_passes(n, 16, 4, 8) for n in (16, 25, 18, 64)] == [2, 4, 4, 8]
    assert [vector_passes(n, 16, 4, 16) for n in (16, 25, 18, 64)] == [1, 3, 3, 4]  # full-width pipes
    assert vector_passes(25, 8, 4, 8) == 4 and vector_passes(7, 1, 1, 1) == 7


def test_the_fma_pass_width_doubles_an_fma_bound_estimate_and_comes_from_the_target():
    # ResNet-8's 3x3 16-channel convolution at 32x32 is bound by its FMAs: 7.7e4 cycles with full-width
    # 512-bit pipes, 1.5e5 through 256-bit ones (measured on a Zen 4 at 3.7 GHz: 48 us, 1.8e5 cycles)
    f = lower("nn.conv2d", [(1, 16, 32, 32), (16, 16, 3, 3)], padding=(1, 1, 1, 1))
    full, zen4 = "c -simd-bits=512 -clock-mhz=3700", "c -simd-bits=512 -fma-bits=256 -clock-mhz=3700"
    assert (machine_for(full).fma_bits, machine_for(zen4).fma_bits) == (512, 256)
    assert machine_for("c -simd-bits=256 -fma-bits=512").fma_bits == 256  # never wider than the vectors
    a, b = (estimate_cost(default_schedule(f, t), t) for t in (full, zen4))
    assert (str(a), str(b)) == ("7.721e+04 cycles (20.87 us at 3700 MHz), 4718592 flops, 288256 bytes",
                                "1.509e+05 cycles (40.79 us at 3700 MHz), 4718592 flops, 288256 bytes")
