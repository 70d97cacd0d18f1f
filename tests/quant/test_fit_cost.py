"""Integer costs per core (plait/schedule/cost.py, machine.py): int8 convolutions priced from each core's
integer facts, never as soft float. Relative costs only (int8 against float on the same core, one
requantization against the other), on ds_cnn's layer shapes; the host's facts are pinned."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from plait.ir.transform import PassContext
from plait.lowering.lower import lower_function
from plait.relay import IRModule, call, const, var
from plait.relay.expr import Call, Expr, Function
from plait.relay.infer import infer_type
from plait.relay.passes import FixedPointRequantize, FuseOps
from plait.relay.visitor import post_order
from plait.schedule import estimate_cost, machine_for
from plait.schedule.machine import ARMV6M_INTEGER, Machine

M0, M7F, M3 = "c -mcpu=cortex-m0", "c -mcpu=cortex-m7f", "c -mcpu=cortex-m3"
HOST = "c -simd-bits=256 -clock-mhz=2445"
SHAPES = {"pointwise": (1, 1), "depthwise": (3, 64)}  # kernel, groups (64 channels, 25x5: ds_cnn's blocks)


def cycles(expr: Expr, target: str, fixed: bool = False, machine: Machine | None = None) -> float:
    """The analytic cycles of ``expr``'s fused groups lowered for ``target`` (``fixed``: after the
    fixed-point pass, as default lowering does on a piece whose requantization is fixed)."""
    mod = infer_type(IRModule.from_expr(expr))
    ctx = PassContext(opt_level=2)
    if fixed:
        mod = FixedPointRequantize().run(mod, ctx)
    mod = FuseOps().run(mod, ctx)
    fns = [n.op for n in post_order(mod.main.body) if isinstance(n, Call) and isinstance(n.op, Function)]
    assert fns
    return sum(estimate_cost(lower_function(f, "f", target), target, machine).cycles for f in fns)


def conv(dtype: str, kernel: int, groups: int, channels: int = 64) -> Expr:
    """conv + bias + relu in float32, or its int8 form: qnn.conv2d + int32 bias + requantize (relu as its clamp)."""
    r = np.random.default_rng(0)
    w = (channels, channels // groups, kernel, kernel)
    pad = (kernel // 2,) * 4
    if dtype == "float32":
        x = var("x", (1, channels, 25, 5), "float32")
        y = call("nn.conv2d", x, const(r.standard_normal(w).astype(np.float32)), padding=pad, groups=groups)
        return call("nn.relu", call("add", y, const(r.standard_normal((channels, 1, 1)).astype(np.float32))))
    x = var("x", (1, channels, 25, 5), "int8")
    acc = call("qnn.conv2d", x, const(r.integers(-127, 128, w).astype(np.int8)), padding=pad, groups=groups,
               input_zero_point=-128)
    acc = call("add", acc, const(r.integers(-999, 999, (channels, 1, 1)).astype(np.int32)))
    return call("qnn.requantize", acc, const(np.full(channels, 0.004, np.float32)), zero_point=-128,
                out_dtype="int8", axis=1, clamp_min=-128)


@pytest.mark.parametrize("shape", SHAPES)
def test_int8_on_the_m0_is_far_below_float(shape):
    # no FPU: float multiply-adds are soft-float calls, int8 ones MULS + ADDS
    f = cycles(conv("float32", *SHAPES[shape]), M0)
    fixed = cycles(conv("int8", *SHAPES[shape]), M0, fixed=True)  # the M0's default requantization
    assert fixed < f / 5
    # the float requantization pays soft float on every output, the fixed one 64-bit integer arithmetic
    assert fixed < cycles(conv("int8", *SHAPES[shape]), M0) < f / 3


@pytest.mark.parametrize("shape", SHAPES)
def test_int8_on_the_m7f_costs_at_most_as_float(shape):
    # an FPU: one float multiply-add per cycle, about what a scalar integer multiply-accumulate costs; the
    # int8 dot products are SMLAD kernels (two MACs per instruction, plait/schedule/dsp_dot.py: the pointwise
    # convolution less than half), the depthwise form's int16 pairs priced as SMLAD too
    f = cycles(conv("float32", *SHAPES[shape]), M7F)
    i8 = cycles(conv("int8", *SHAPES[shape]), M7F)  # float requantization, the M7F's default
    assert (0.3 if shape == "pointwise" else 0.5) * f < i8 < (0.6 if shape == "pointwise" else 1.3) * f
    # with an FPU the float requantization is the cheaper one (fixed: 64-bit arithmetic on a 32-bit core)
    assert i8 < cycles(conv("int8", *SHAPES[shape]), M7F, fixed=True)


def test_smlad_halves_the_narrow_macs_on_dsp_cores():
    m7 = machine_for(M7F)
    assert (m7.narrow_macs, machine_for("c -mcpu=cortex-m4f").narrow_macs, machine_for(M3).narrow_macs) == (2, 2, 1)
    assert {k: getattr(machine_for(M0), k) for k in ARMV6M_INTEGER} == ARMV6M_INTEGER
    assert machine_for(HOST).word_bits == 64
    i8 = conv("int8", 1, 1)
    without = cycles(i8, M7F, machine=replace(m7, narrow_macs=1))
    with_dsp = cycles(i8, M7F)
    macs = 64 * 64 * 25 * 5  # the int8 operands widened, minus a zero point: 16-bit products, SMLAD pairs them
    assert without - with_dsp == pytest.approx(macs * m7.int_mac_cycles / 2)
    # float convolutions and products of full 32-bit values are not paired
    f = conv("float32", 1, 1)
    assert cycles(f, M7F, machine=replace(m7, narrow_macs=1)) == cycles(f, M7F)
    x = var("x", (1, 64), "int32")
    d = call("nn.dense", x, const(np.ones((16, 64), np.int32)))
    assert cycles(d, M7F, machine=replace(m7, narrow_macs=1)) == cycles(d, M7F)


def test_the_integer_work_is_priced():
    # the integer arithmetic of the data costs cycles on every core: a slower multiplier makes the int8
    # convolution dearer; an M0 without a long multiply pays the fixed-point requantization's int64 products
    i8 = conv("int8", 1, 1)
    for target in (M0, M7F, HOST):
        m = machine_for(target)
        assert cycles(i8, target, machine=replace(m, int_mac_cycles=m.int_mac_cycles + 1)) > cycles(i8, target)
    m0 = machine_for(M0)
    cheap = replace(m0, wide_mul_cycles=1.0, wide_op_cycles=1.0)
    assert cycles(i8, M0, fixed=True, machine=cheap) < cycles(i8, M0, fixed=True)
    assert cycles(i8, M0, machine=cheap) == cycles(i8, M0)  # float requantization: no int64


@pytest.mark.parametrize("shape", SHAPES)
def test_host_int8_is_priced_with_integer_simd(shape):
    # pinned host facts (AVX2-wide SIMD): int8 is neither soft-float-like (tens of times float) nor free
    # against float; the depthwise int8 form packs its input channels-last and reads its sums back to
    # NCHW (two more passes over the data than the float convolution), so up to 4x
    f = cycles(conv("float32", *SHAPES[shape]), HOST)
    i8 = cycles(conv("int8", *SHAPES[shape]), HOST)
    assert 0.25 * f < i8 < 4 * f


@pytest.mark.parametrize("target, fixed", [(M0, True), (M0 + " -requantize=float", False),
                                           (M7F, False), (M7F + " -requantize=fixed", True)])
def test_placement_prices_the_requantization_the_piece_runs(target, fixed):
    # the c kind legalizes a piece whose requantization is fixed (Backend.legalize) before placement prices a
    # call on it, as default lowering does before it lowers: the price is of the fixed-point code it runs
    from plait.placement.cost import CostModel
    from plait.target import Target
    from plait.target.composite import Piece

    mod = infer_type(IRModule.from_expr(conv("int8", 1, 1)))
    calls = [n for n in post_order(mod.main.body) if isinstance(n, Call)]  # the group's calls, constants in place
    fused = FuseOps().run(mod, PassContext(opt_level=2))
    (fn,) = [n.op for n in post_order(fused.main.body) if isinstance(n, Call) and isinstance(n.op, Function)]
    clock = machine_for(target).clock_mhz * 1e6
    got = CostModel().fused_cost(fn, calls, Piece("core", Target(target)))
    assert got is not None and got.source == "schedule"
    want = cycles(conv("int8", 1, 1), target, fixed=fixed)
    assert got.seconds * clock == pytest.approx(want, rel=1e-9)
    assert want != cycles(conv("int8", 1, 1), target, fixed=not fixed)


def test_a_requantization_alone_is_priced_as_the_piece_runs_it():
    from plait.placement.cost import CostModel
    from plait.target import Target
    from plait.target.composite import Piece

    acc = var("acc", (1, 64, 25, 5), "int32")
    req = call("qnn.requantize", acc, const(np.full(64, 0.004, np.float32)), zero_point=-128, out_dtype="int8", axis=1)
    (one,) = [n for n in post_order(infer_type(IRModule.from_expr(req)).main.body) if isinstance(n, Call)]
    clock = machine_for(M0).clock_mhz * 1e6
    got = CostModel().call_cost(one, Piece("m0", Target(M0)))
    assert got.source == "schedule"
    assert got.seconds * clock == pytest.approx(cycles(req, M0, fixed=True), rel=1e-9)
    assert cycles(req, M0, fixed=True) < cycles(req, M0) / 2  # soft-float multiplies and rounding on the M0
