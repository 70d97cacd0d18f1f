"""The SMLAD dot-product kernels in the default rules (plait/schedule/dsp_dot.py): only a Cortex-M core with
paired 16-bit MACs gets them; the TIR of a packed convolution's dot stage with one output and two outputs per
call (knob ``dot_pairs``), and of a channels-last depthwise convolution, two channels per call (knob
``channel_pairs``); the cost model prices a call as its kernel's body; a kernel's read-only pointers keep a
parameter const and its output pointer is written. No compiler needed (the kernels' numbers:
tests/embedded/test_dsp_dot.py)."""

from __future__ import annotations

import pytest

from plait.ir.attrs import Attrs
from plait.lowering.lower import lower_function
from plait.relay import IRModule, call, infer_type, var
from plait.relay.expr import Function
from plait.schedule import estimate_cost, knobs, machine_for
from plait.schedule.dsp_dot import kernel_ops, uses_dsp_dot
from plait.tir.codegen import written_buffers
from plait.tir.expr import Call
from plait.tir.functor import pre_order

M4F = "c -mcpu=cortex-m4f"


def _conv(target: str, config: dict | None = None):
    a, b = var("a", (1, 64, 5, 5), "int8"), var("b", (16, 64, 1, 1), "int8")
    fn = Function((a, b), call("qnn.conv2d", a, b, input_zero_point=-3), None, Attrs({"Primitive": 1, "name": "q"}))
    fn = infer_type(IRModule.from_expr(fn))["main"]
    with knobs.using(config):
        return lower_function(fn, "q", target)


def _kernels(func) -> list[Call]:
    return [n for n in pre_order(func.body) if isinstance(n, Call) and n.kind == "kernel"]


@pytest.mark.parametrize("target, dsp", [(M4F, True), ("c -mcpu=cortex-m7", True), ("c -mcpu=cortex-m55", True),
                                         ("c -mcpu=cortex-m3", False), ("c -mcpu=cortex-m0", False),
                                         ("c -simd-bits=256 -clock-mhz=2445", False)])
def test_only_cortex_m_cores_with_paired_macs_get_the_kernels(target, dsp):
    assert uses_dsp_dot(machine_for(target)) == dsp
    assert bool(_kernels(_conv(target))) == dsp


def test_one_and_two_outputs_per_call():
    (one,) = _kernels(_conv(M4F, {"T_qnn_conv2d_dot_i.dot_pairs": False}))
    assert one.name == "dot_u8_s8" and [getattr(x, "value", None) for x in one.args[2:]] == [64, 0, 0]
    func = _conv(M4F)
    (two,) = _kernels(func)
    assert two.name == "dot2_u8_s8" and len(two.args) == 7
    text = str(func)
    assert "T_qnn_conv2d_dot_oc_o in serial(0, 8)" in text  # the 16 output channels in pairs
    assert "T_qnn_conv2d_dot_acc = allocate((2,), int32" in text
    assert "for T_qnn_conv2d_dot_oc_i in unrolled(0, 2)" in text  # the epilogue once per output
    assert "address_of(T_qnn_conv2d_wpack[T_qnn_conv2d_dot_oc_o * 2 + 1, T_qnn_conv2d_dot_ry, 0])" in text
    # the weight parameter stays const; the paired kernel's accumulator is written
    written = {b.name for b in written_buffers(func)}
    assert "p1" not in written and "T_qnn_conv2d_dot_acc" in written


def test_the_cost_model_prices_the_kernels_body():
    m = machine_for(M4F)
    (one,) = _kernels(_conv(M4F, {"T_qnn_conv2d_dot_i.dot_pairs": False}))
    (two,) = _kernels(_conv(M4F))
    # 64 elements: 16 words of each run, 4 widenings per word, 3 instructions of loop per 8; 32 SMLADs
    assert kernel_ops(one, m) == (32, 16 * 4 + 24, 32)
    # paired: 48 loads (+2 of the outputs), 24 widenings per 8 and 5 of loop; 64 SMLADs
    assert kernel_ops(two, m) == (50, 8 * 12 + 40 + 2, 64)
    assert kernel_ops(Call("int32", "memcpy", (), "extern"), m) is None
    single = estimate_cost(_conv(M4F, {"T_qnn_conv2d_dot_i.dot_pairs": False}), M4F).cycles
    paired = estimate_cost(_conv(M4F), M4F).cycles
    loops = estimate_cost(_conv(M4F, {"T_qnn_conv2d_dot_i.dot": False}), M4F).cycles  # the loop (no kernel)
    assert paired < single < loops


def test_a_channels_last_depthwise_convolution_takes_two_channels_per_call():
    a, w = var("a", (1, 64, 25, 5), "int8"), var("w", (64, 1, 3, 3), "int8")
    e = call("qnn.conv2d", a, w, padding=(1, 1, 1, 1), groups=64, input_zero_point=-5)
    fn = infer_type(IRModule.from_expr(Function((a, w), e, None, Attrs({"Primitive": 1, "name": "q"}))))["main"]
    func = lower_function(fn, "q", M4F)
    (dw,) = _kernels(func)
    # kh, kw, then the taps' strides in the packed input (rows of 7 x 64, columns of 64) and the weights
    assert dw.name == "dw2_s16" and [x.value for x in dw.args[3:]] == [3, 3, 448, 64, 192, 64]
    assert "T_qnn_conv2d_nhwc_ch_o in serial(0, 32)" in str(func)
    assert kernel_ops(dw, machine_for(M4F)) == (20, 11, 18)
    with knobs.using({"T_qnn_conv2d_nhwc_i.channel_pairs": False}):
        loops = lower_function(fn, "q", M4F)
    assert not _kernels(loops) and estimate_cost(func, M4F).cycles < estimate_cost(loops, M4F).cycles
    assert not _kernels(lower_function(fn, "q", "c -mcpu=cortex-m3"))
