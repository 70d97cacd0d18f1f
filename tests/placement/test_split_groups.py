"""A group default lowering fuses whole on c (convolution, bias, relu) but that placement splits, because blas
may take the convolution alone: on c the convolution is charged the fused function less what the rest costs
there alone, so that all on c the calls cost the fused function lowering makes, and with the convolution
on blas the rest costs the function of its own lowering then makes. Host facts pinned (the estimates
read them)."""

import pytest

from plait.frontend.onnx import from_onnx
from plait.pipeline.explain import explain
from plait.testing.onnx_models import ds_cnn

HOST = "c -clock-mhz=2445 -simd-bits=256"
COMPOSITE = f"host: {HOST}; blas: blas -clock-mhz=2445 -simd-bits=256"


@pytest.fixture(scope="module")
def reports():
    mod = from_onnx(ds_cnn(channels=8, blocks=1))
    return explain(mod, COMPOSITE), explain(mod, f"host: {HOST}")


def _host(report, names):
    return [c.costs["host"] for c in report.calls if c.name in names]


def test_all_on_c_the_split_group_costs_the_fused_function(reports):
    split, alone = reports
    conv0 = ("/conv0/Conv", "BatchNormalization_7", "/conv0/Relu")
    whole = _host(alone, conv0)  # c alone: one fused group, each call 1/3 of it
    assert [e["detail"].split(":")[0] for e in whole] == ["1/3 of fused group 'fused_nn_conv2d_add_nn_relu' "
                                                          "(3.963e-06 s)"] * 3
    conv, add, relu = _host(split, conv0)
    assert conv["seconds"] + add["seconds"] + relu["seconds"] == pytest.approx(sum(e["seconds"] for e in whole))
    assert conv["source"] == "schedule" and conv["detail"] == (
        "the whole group less its other calls here (5.603e-07 s); fused group 'fused_nn_conv2d_add_nn_relu' of 3 "
        "calls: 9689 cycles (3.963 us at 2445 MHz), 83000 flops, 12840 bytes")
    # the bias and relu: their own fused function (what lowering makes when the convolution is on blas)
    assert add["detail"] == relu["detail"] and add["detail"].startswith("1/2 of fused group 'fused_add_nn_relu' ")
    fc = _host(split, ("/fc/Gemm",))
    assert fc[0]["seconds"] + fc[1]["seconds"] == pytest.approx(sum(e["seconds"] for e in _host(alone, ("/fc/Gemm",))))


def test_a_convolution_whose_fused_function_costs_less_than_its_rest_alone_costs_nothing(reports):
    split, alone = reports
    conv, add, relu = _host(split, ("/block0/pw/Conv", "BatchNormalization_19", "/block0/pw/Relu"))
    assert conv["seconds"] == 0.0 and add["seconds"] + relu["seconds"] > sum(
        e["seconds"] for e in _host(alone, ("/block0/pw/Conv",))) * 3
    assert {c.piece for c in split.calls if c.name.startswith("/block0/pw/")} == {"host"}
