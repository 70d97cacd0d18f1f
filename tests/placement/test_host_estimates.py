"""Automatic placement on ``host: c; blas: blas`` for the calls where the two pieces are close (measured with
bench/calibrate.py and bench/blas_speed.py --calls; docs/placement.md, "Host estimates"): the decisions and
the explain report's reasons, sources and details, exactly. Every fact the estimates read is pinned, so
nothing here depends on the machine the tests run on: mostly the machine measured (AMD EPYC Zen 4: AVX-512
run as two 256-bit FMA passes, 3.7 GHz effective), and a host with full-width AVX-512 FMA pipes."""

import pytest

from plait.frontend.onnx import from_onnx
from plait.pipeline.explain import explain
from plait.testing import onnx_models

ZEN4 = "host: c -simd-bits=512 -fma-bits=256 -clock-mhz=3700; blas: blas -simd-bits=512 -fma-bits=256 -clock-mhz=3700"
FULL = "host: c -simd-bits=512 -clock-mhz=3000; blas: blas -simd-bits=512 -clock-mhz=3000"
PRODUCTS = ("nn.conv2d", "nn.dense", "nn.matmul")
HOOK = "the 'cost' hook of target kind 'blas'"


def _products(name: str, target: str = ZEN4) -> dict[str, tuple[str, str]]:
    """name -> (piece, reason) of every product call of the bench model ``name``."""
    r = explain(from_onnx(getattr(onnx_models, name)()), target)
    return {c.name: (c.piece, c.reason) for c in r.calls if c.op in PRODUCTS}


def test_ds_cnn_convolutions_stay_on_c_with_exact_reasons():
    # measured: the pointwise convolution (64 x 125 pixels: 8 whole 16-lane vectors, the last shifted
    # back, each in two 256-bit passes) takes 9.4 us on c with its bias and relu; OpenBLAS's sgemm 10 us,
    # plus 2 us for the bias and relu. The stem (im2col, the same tiles) 6.9 us on c
    r = explain(from_onnx(onnx_models.ds_cnn()), ZEN4)
    pw = next(c for c in r.calls if c.name == "/block0/pw/Conv")
    assert (pw.piece, pw.reason) == ("host", "cheapest")
    host, blas = pw.costs["host"], pw.costs["blas"]
    assert (host["source"], blas["source"]) == ("schedule", "hook")
    # on c the convolution is fused with its bias and relu: it costs the fused function less those two alone
    assert host["detail"] == ("the whole group less its other calls here (2.937e-06 s); fused group "
                              "'fused_nn_conv2d_add_nn_relu' of 3 calls: 3.893e+04 cycles (10.52 us at 3700 MHz), "
                              "1073152 flops, 80640 bytes")
    assert host["seconds"] == pytest.approx(7.585e-6, rel=1e-3)
    assert blas["detail"] == HOOK
    assert blas["seconds"] == pytest.approx(9.45e-6, rel=1e-3)
    dw = next(c for c in r.calls if c.name == "/block0/dw/Conv")  # depthwise: blas cannot run it
    assert (dw.piece, dw.reason) == ("host", "only capable")
    assert dw.costs["blas"] == {"cannot": "the 'supports' hook of target kind 'blas' says no"}
    assert {n: p for n, (p, _) in _products("ds_cnn").items()} == {
        "/conv0/Conv": "host", **{f"/block{k}/{s}/Conv": "host" for k in range(4) for s in ("dw", "pw")},
        "/fc/Gemm": "host"}


def test_mlp_large_matrix_vector_products_go_to_blas():
    # the 1x256 @ 256x512 and 1x512 @ 512x512 products stream their matrices (512 KiB, 1 MiB) from the
    # next cache level: measured alone 6.1 and 13.4 us on c (about 21 bytes per cycle at 3.7 GHz), 5.4 and
    # 11.9 us on OpenBLAS's sgemv; in the model, each on blas saves 1.5 us (its bias and relu then a function
    # of their own). Estimated 7.2 and 14.3 us against 6.0 and 11.8; the 1x512 @ 512x10 one stays on c
    assert _products("mlp") == {"/fc0/Gemm": ("blas", "cheapest"), "/fc1/Gemm": ("blas", "cheapest"),
                                "/fc2/Gemm": ("host", "cheapest")}


def test_resnet_block_convolutions_stay_on_c_unless_its_fma_pipes_are_full_width():
    # measured on the Zen 4: the 3x3 64-channel convolutions at 56x56 take 2.4 ms on c, 3.0 ms on blas
    # (sgemm and im2col); estimated 1.98 ms (loads, 7.3e6 cycles at 3.7 GHz) against 2.36 ms
    assert _products("resnet_block") == {"/conv1/Conv": ("host", "cheapest"), "/conv2/Conv": ("host", "cheapest")}
    r = explain(from_onnx(onnx_models.resnet_block()), ZEN4)
    conv = next(c for c in r.calls if c.name == "/conv1/Conv")
    assert conv.costs["host"]["detail"] == (
        "the whole group less its other calls here (2.171e-05 s); fused group 'fused_nn_conv2d_add_nn_relu' of 3 "
        "calls: 7.407e+06 cycles (2002 us at 3700 MHz), 231813120 flops, 3475712 bytes")
    assert conv.costs["blas"]["seconds"] == pytest.approx(2.355e-3, rel=1e-3)
    # with two full-width 512-bit FMA pipes OpenBLAS's sgemm runs twice as fast per cycle; c's schedule is
    # bound by its loads, not its FMAs
    assert _products("resnet_block", FULL) == {"/conv1/Conv": ("blas", "cheapest"), "/conv2/Conv": ("blas", "cheapest")}


def test_resnet8_3x3_convolutions_and_the_transformer_stay_on_c():
    # measured: every 3x3 convolution of ResNet-8 runs faster on c (e.g. 64 channels at 8x8: 42 us on c,
    # 53 on blas); the 1x1 shortcuts are a tie (3.5 and 3.3 us)
    on_blas = sorted(n for n, (p, _) in _products("resnet8").items() if p == "blas")
    assert on_blas == ["/stage1/shortcut/Conv", "/stage2/shortcut/Conv"]
    # the encoder's products are small (32 x 64 and up): c's schedules beat a cblas call on the attention
    # ones; the feed-forward ones (32 x 64 x 256) are a tie (10.9 and 9.4 us on c, 10.4 and 9.4 on blas) that
    # the bias fused on c settles (a blas call leaves it a function of its own)
    assert {p for p, _ in _products("transformer_encoder").values()} == {"host"}


def test_mobilenet_v2_only_its_6x6_project_convolutions_go_to_blas():
    # at 6x6 the fused rows of 36 pixels are 18-wide tiles: a 16-lane vector and 2 single elements, so c runs
    # at about 60% of blas (5.6 against 3.5 us); at 12x12 the two are a tie, at 24x24 and above c's schedules
    # win. The expand and head convolutions at 6x6 stay on c: their bias and Clip cost next to nothing fused
    # there, and a function of their own after a blas call
    on_blas = sorted(n for n, (p, _) in _products("mobilenet_v2").items() if p == "blas")
    assert on_blas == ["/block3_0/project/Conv", "/block3_1/project/Conv"]
