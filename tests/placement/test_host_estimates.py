"""Automatic placement on ``host: c; blas: blas`` for the calls where the two pieces are close (measured with
bench/calibrate.py; docs/placement.md, "Host estimates"): the decisions and the explain report's reasons,
sources and details, exactly. Every fact the estimates read is pinned (an AVX-512 host at 2445 MHz, for
both pieces), so nothing here depends on the machine the tests run on."""

import pytest

from plait.frontend.onnx import from_onnx
from plait.placement.explain import explain
from plait.testing import onnx_models

TARGET = "host: c -simd-bits=512 -clock-mhz=2445; blas: blas -simd-bits=512 -clock-mhz=2445"
PRODUCTS = ("nn.conv2d", "nn.dense", "nn.matmul")
HOOK = "the 'cost' hook of target kind 'blas'"


def _products(name: str) -> dict[str, tuple[str, str]]:
    """name -> (piece, reason) of every product call of the bench model ``name``."""
    r = explain(from_onnx(getattr(onnx_models, name)()), TARGET)
    return {c.name: (c.piece, c.reason) for c in r.calls if c.op in PRODUCTS}


def test_ds_cnn_pointwise_convolutions_go_to_blas_with_exact_reasons():
    # measured: the pointwise convolution (64 x 125 pixels, rows of 25: one 16-lane vector and a remainder
    # of 9, i.e. 16 + 8 + 1) takes 13 us on c; OpenBLAS's sgemm 10 us, plus 2 us for the bias and relu
    r = explain(from_onnx(onnx_models.ds_cnn()), TARGET)
    pw = next(c for c in r.calls if c.name == "/block0/pw/Conv")
    assert (pw.piece, pw.reason) == ("blas", "cheapest")
    host, blas = pw.costs["host"], pw.costs["blas"]
    assert (host["source"], blas["source"]) == ("schedule", "hook")
    # on c the convolution is fused with its bias and relu: it costs the fused function less those two alone
    assert host["detail"] == ("the whole group less its other calls here (4.445e-06 s); fused group "
                              "'fused_nn_conv2d_add_nn_relu' of 3 calls: 3.554e+04 cycles (14.54 us at 2445 MHz), "
                              "1048000 flops, 80640 bytes")
    assert host["seconds"] == pytest.approx(10.09e-6, rel=1e-3)
    assert blas["detail"] == HOOK
    assert blas["seconds"] == pytest.approx(10.03e-6, rel=1e-3)
    dw = next(c for c in r.calls if c.name == "/block0/dw/Conv")  # depthwise: blas cannot run it
    assert (dw.piece, dw.reason) == ("host", "only capable")
    assert dw.costs["blas"] == {"cannot": "the 'supports' hook of target kind 'blas' says no"}
    assert {n: p for n, (p, _) in _products("ds_cnn").items()} == {
        "/conv0/Conv": "blas", **{f"/block{k}/{s}/Conv": "blas" if s == "pw" else "host"
                                  for k in range(4) for s in ("dw", "pw")}, "/fc/Gemm": "host"}


def test_mlp_matrix_vector_products_stream_from_l2_and_go_to_blas():
    # the 1x256 @ 256x512 and 1x512 @ 512x512 products stream their matrices (512 KiB, 1 MiB) through L2:
    # measured 8.8 and 14 us on c, 7.5 and 13 us on OpenBLAS's sgemv; the last one (10 x 256) is tiny
    assert _products("mlp") == {"/fc0/Gemm": ("blas", "cheapest"), "/fc1/Gemm": ("blas", "cheapest"),
                                "/fc2/Gemm": ("host", "cheapest")}


def test_resnet_block_convolutions_go_to_blas_and_the_transformer_stays_on_c():
    # measured: the 3x3 64-channel convolutions at 56x56 take 2.8 ms on c, 2.3 ms + 0.25 ms of im2col on blas
    assert _products("resnet_block") == {"/conv1/Conv": ("blas", "cheapest"), "/conv2/Conv": ("blas", "cheapest")}
    # the encoder's products are small (16 x 64 and up): c's schedules beat a cblas call on each
    assert {p for p, _ in _products("transformer_encoder").values()} == {"host"}


def test_mobilenet_v2_only_its_6x6_project_convolutions_go_to_blas():
    # at 6x6 the fused rows of 36 pixels are 18-wide tiles: a 16-lane vector and 2 single elements, so c runs
    # at about half its speed on full vectors; at 12x12 and above c's schedules win. The expand and head
    # convolutions at 6x6 stay on c: their bias and Clip cost next to nothing fused there, and a function
    # of their own after a blas call
    on_blas = sorted(n for n, (p, _) in _products("mobilenet_v2").items() if p == "blas")
    assert on_blas == ["/block3_0/project/Conv", "/block3_1/project/Conv"]
