"""The blas target kind: capability, lowering to cblas_sgemm / sgemv PrimFuncs (vs numpy), the im2col
workspace, naming and deduplication, options, the cost hook, the missing-library message."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy_openblas32")

from plait import tir  # noqa: E402
from plait.backends.blas import backend as blas  # noqa: E402
from plait.op import get_op  # noqa: E402
from plait.relay import run  # noqa: E402
from plait.relay.expr import Call, Tuple  # noqa: E402
from plait.relay.visitor import post_order  # noqa: E402
from plait.target import CompositeTarget, Target, TargetError, get_kind, run_relay_to_tir  # noqa: E402
from plait.testing.ort_reference import reference_run

from tests.backends.region_eval import partitioned, prim_funcs, run_region, tensor  # noqa: E402

PIECE = CompositeTarget("host: c; blas: blas").piece("blas")


def lower(op, shapes, attrs=None, dtype="float32", piece=PIECE):
    mod = partitioned(lambda ps: Call(get_op(op), ps, attrs or {}, {"name": "/n0"}),
                      [tensor(s, dtype) for s in shapes], piece.name)
    return mod, run_relay_to_tir(piece, mod)


def check(op, shapes, attrs=None, cache_dir=None):
    mod, out = lower(op, shapes, attrs)
    pfs = prim_funcs(out)
    lib = blas.build(_module(pfs), PIECE.target, _Ctx(cache_dir))
    rng = np.random.default_rng(len(shapes[0]))
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    got = run_region(out, "blas_0", lib, xs)
    want = run(mod, {f"m{k}": x for k, x in enumerate(xs)})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return pfs


class _Ctx:
    def __init__(self, cache_dir):
        self.config = {"cc.cache_dir": str(cache_dir)} if cache_dir else {}


def _module(pfs):
    from plait.relay.module import IRModule

    return IRModule(pfs)


def externs(pf):
    return [n.name for n in tir.pre_order(pf.body) if isinstance(n, tir.Call) and n.kind == "extern"]


@pytest.mark.parametrize("x, w", [((4, 8), (5, 8)), ((2, 3, 8), (5, 8)), ((1, 8), (5, 8)), ((8,), (5, 8)),
                                  ((3, 1), (7, 1)), ((6, 8), (1, 8))])
def test_dense(x, w, cache_dir):
    (pf,) = check("nn.dense", [x, w], cache_dir=cache_dir).values()
    lib = blas.openblas()
    gemv = x[0] == 1 or len(x) == 1 or w[0] == 1
    assert externs(pf) == [lib.symbol("openblas_set_num_threads"),
                           lib.symbol("cblas_sgemv" if gemv else "cblas_sgemm")]


@pytest.mark.parametrize("a, b", [
    ((4, 8), (8, 5)), ((3, 4, 8), (8, 5)), ((3, 4, 8), (3, 8, 5)), ((2, 1, 4, 8), (3, 8, 5)),
    ((4, 8), (3, 8, 5)), ((2, 3, 4, 8), (1, 3, 8, 5)), ((8,), (3, 8, 5)), ((2, 4, 8), (8,)), ((8,), (8,)),
    ((1, 8), (8, 5)), ((4, 1), (1, 5)), ((2, 4, 8), (2, 8, 1)),
])
def test_matmul_with_broadcast_batches_and_vectors(a, b, cache_dir):
    check("nn.matmul", [a, b], cache_dir=cache_dir)


def test_a_batched_matmul_loops_over_the_batch_and_a_shared_b_folds_into_one_product():
    _, out = lower("nn.matmul", [(2, 3, 4, 8), (3, 8, 5)])
    (pf,) = prim_funcs(out).values()
    loops = [n for n in tir.pre_order(pf.body) if isinstance(n, tir.For)]
    assert [(lp.loop_var.name, lp.extent.value) for lp in loops] == [("b0", 2), ("b1", 3)]
    mod, out = lower("nn.matmul", [(2, 3, 4, 8), (8, 5)])
    (pf,) = prim_funcs(out).values()
    assert not any(isinstance(n, tir.For) for n in tir.pre_order(pf.body))
    assert blas.plan(_call(mod)) == blas.Plan("nn.matmul", 24, 5, 8, 1)


def _call(mod):
    return next(n for n in post_order(mod["blas_0"].body) if isinstance(n, Call))


CONVS = [
    ((2, 3, 9, 9), (4, 3, 1, 1), {}),  # 1x1 stride 1: one GEMM per image, no workspace
    ((1, 3, 9, 9), (4, 3, 1, 1), {"strides": (2, 2)}),
    ((1, 3, 9, 9), (4, 3, 1, 1), {"padding": (1, 0, 0, 1)}),
    ((1, 3, 7, 6), (5, 3, 3, 3), {"padding": (1, 1, 1, 1)}),
    ((2, 3, 9, 9), (4, 3, 3, 3), {"padding": (1, 2, 0, 1), "strides": (2, 1), "dilation": (1, 2)}),
    ((1, 1, 49, 10), (8, 1, 10, 4), {"padding": (4, 1, 5, 2), "strides": (2, 2)}),  # DS-CNN's first layer
    ((1, 2, 3, 3), (3, 2, 5, 5), {"padding": (2, 2, 2, 2)}),  # kernel larger than the image
    ((1, 2, 5, 5), (3, 2, 2, 2), {"padding": (3, 3, 3, 3), "strides": (3, 3)}),  # rows/cols entirely padding
]


@pytest.mark.parametrize("x, w, attrs", CONVS)
def test_conv2d(x, w, attrs, cache_dir):
    check("nn.conv2d", [x, w], attrs, cache_dir=cache_dir)


def test_conv_im2col_is_a_workspace_and_1x1_needs_none():
    _, out = lower("nn.conv2d", [(1, 3, 7, 6), (5, 3, 3, 3)], {"padding": (1, 1, 1, 1)})
    (pf,) = prim_funcs(out).values()
    allocs = [n.buffer for n in tir.pre_order(pf.body) if isinstance(n, tir.Allocate)]
    assert [(b.scope, b.static_shape) for b in allocs] == [("global.workspace", (3, 3, 3, 7, 6))]
    assert not any(isinstance(n, (tir.IfThenElse, tir.Select)) for n in tir.pre_order(pf.body))  # padding split out
    mod, out = lower("nn.conv2d", [(1, 3, 7, 6), (5, 3, 1, 1)])
    (pf,) = prim_funcs(out).values()
    assert not any(isinstance(n, tir.Allocate) for n in tir.pre_order(pf.body))
    assert blas.plan(_call(mod)) == blas.Plan("nn.conv2d", 5, 42, 3, 1, 0)


def test_names_dedup_and_unsupported_calls_in_a_region(cache_dir):
    def body(ps):
        x, w1, w2 = ps
        h = Call(get_op("nn.dense"), (x, w1))
        h = Call(get_op("nn.relu"), (h,))  # blas cannot: default lowering on the piece's target
        y1 = Call(get_op("nn.dense"), (h, w2))
        y2 = Call(get_op("nn.dense"), (x, w1))  # the same dense again
        return Tuple((y1, y2))

    mod = partitioned(body, [tensor((3, 8)), tensor((8, 8)), tensor((8, 8))], "blas")
    out = run_relay_to_tir(PIECE, mod)
    pfs = prim_funcs(out)
    assert sorted(pfs) == ["blas_nn_relu", "blas_sgemm_dense"]
    assert all(pf.attrs["piece"] == "blas" for pf in pfs.values())
    lib = blas.build(_module(pfs), PIECE.target, _Ctx(cache_dir))
    xs = [np.random.default_rng(k).standard_normal(s).astype(np.float32) for k, s in enumerate([(3, 8), (8, 8), (8, 8)])]
    got = run_region(out, "blas_0", lib, xs)
    want = run(mod, {f"m{k}": x for k, x in enumerate(xs)})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_threads_option():
    piece = CompositeTarget("host: c; blas: blas -threads=0").piece("blas")
    _, out = lower("nn.dense", [(4, 8), (5, 8)], piece=piece)
    (pf,) = prim_funcs(out).values()
    assert externs(pf) == [blas.openblas().symbol("cblas_sgemm")]
    piece = CompositeTarget("host: c; blas: blas -threads=2").piece("blas")
    _, out = lower("nn.dense", [(4, 8), (5, 8)], piece=piece)
    (pf,) = prim_funcs(out).values()
    sets = [n for n in tir.pre_order(pf.body) if isinstance(n, tir.Call) and n.name.endswith("set_num_threads")]
    assert [a.value for a in sets[0].args] == [2]
    with pytest.raises(TargetError, match=r"target kind 'blas': -threads must be >= 0 \(0: OpenBLAS's default\), got -1"):
        CompositeTarget("host: c; blas: blas -threads=-1")


def _typed(op, shapes, attrs=None, dtype="float32"):
    mod = partitioned(lambda ps: Call(get_op(op), ps, attrs or {}), [tensor(s, dtype) for s in shapes], "blas")
    return _call(mod)


def test_supports():
    kind = get_kind("blas")
    sup = kind.backend.supports
    t = PIECE.target
    assert sup(_typed("nn.dense", [(4, 8), (5, 8)]), t)
    assert sup(_typed("nn.matmul", [(2, 4, 8), (8,)]), t)
    assert sup(_typed("nn.conv2d", [(1, 3, 7, 6), (5, 3, 3, 3)]), t)
    assert not sup(_typed("nn.conv2d", [(1, 4, 7, 6), (4, 1, 3, 3)], {"groups": 4}), t)  # depthwise
    assert not sup(_typed("nn.dense", [(4, 8), (5, 8)], dtype="float16"), t)
    assert not sup(_typed("nn.matmul", [(4, 8), (8, 5)], dtype="int32"), t)
    assert not sup(_typed("nn.dense", [(0, 8), (5, 8)]), t)  # empty
    assert not sup(_typed("nn.dense", [("n", 8), (5, 8)]), t)  # symbolic
    assert not sup(_typed("nn.relu", [(4, 8)]), t)
    assert sorted(kind.hooks) == ["cost", "relay_to_tir", "supports", "tir_to_runtime"] and not kind.can_host


def test_int8_products_are_declined_with_the_reason():
    sup = get_kind("blas").backend.supports
    for op, shapes in [("qnn.dense", [(4, 8), (5, 8)]), ("qnn.matmul", [(4, 8), (8, 5)]),
                       ("qnn.conv2d", [(1, 3, 7, 6), (5, 3, 3, 3)])]:
        assert sup(_typed(op, shapes, dtype="int8"), PIECE.target) == (
            False, f"'{op}' is an 8-bit integer product: OpenBLAS's cblas_sgemm computes in float32 only "
                   "(run it on a 'c' piece)")


def test_cost_hook_is_monotone_and_charges_im2col():
    cost = get_kind("blas").backend.cost
    t = PIECE.target
    small = cost(_typed("nn.dense", [(4, 8), (5, 8)]), t)
    big = cost(_typed("nn.dense", [(64, 512), (512, 512)]), t)
    assert 0 < small < big < 1e-3
    assert cost(_typed("nn.relu", [(4, 8)]), t) is None
    direct = cost(_typed("nn.conv2d", [(1, 27, 8, 8), (16, 27, 1, 1)]), t)
    im2col = cost(_typed("nn.conv2d", [(1, 3, 8, 8), (16, 3, 3, 3)], {"padding": (1, 1, 1, 1)}), t)
    assert im2col > direct  # same GEMM (16 x 64 x 27), plus writing the im2col matrix
    batched = cost(_typed("nn.matmul", [(4, 32, 16), (4, 16, 32)]), t)
    assert batched == pytest.approx(4 * cost(_typed("nn.matmul", [(32, 16), (16, 32)]), t))
    # a big GEMM runs near the measured peak of the target's vector-width class, at its clock
    avx2 = Target("blas -simd-bits=256 -clock-mhz=2445")
    assert blas.gemm_seconds(1024, 1024, 1024, avx2) == pytest.approx(2 * 1024**3 / 80e9, rel=0.05)
    zen4 = Target("blas -simd-bits=512 -fma-bits=256 -clock-mhz=3700")  # 512-bit FMAs in two passes
    assert blas.gemm_seconds(1024, 1024, 1024, zen4) == pytest.approx(2 * 1024**3 / 113e9, rel=0.05)
    # full-width AVX-512 FMA pipes (a SIMD width stated without -fma-bits): twice the flops per cycle
    avx512 = Target("blas -simd-bits=512 -clock-mhz=3700")
    assert blas.gemm_seconds(1024, 1024, 1024, avx512) == pytest.approx(2 * 1024**3 / 226e9, rel=0.05)
    assert blas.sgemm_fit(avx512)[0].source.endswith("(scaled to 512-bit FMA passes)")
    # a class without its own fit takes the one below it (or above, under the narrowest), scaled by the
    # FMA pass width
    assert blas.sgemm_fit(Target("blas -simd-bits=1024 -clock-mhz=1000"))[0].flops_per_cycle == pytest.approx(
        4 * blas.SGEMM_FITS[512].flops_per_cycle)
    assert blas.sgemm_fit(Target("blas -simd-bits=128 -clock-mhz=1000"))[0].flops_per_cycle == pytest.approx(
        blas.SGEMM_FITS[256].flops_per_cycle / 2)


def test_without_scipy_openblas32_blas_says_what_to_install(monkeypatch):
    blas.openblas.cache_clear()
    monkeypatch.setitem(sys.modules, "scipy_openblas32", None)
    try:
        call = _typed("nn.dense", [(4, 8), (5, 8)])
        for fn in (lambda: get_kind("blas").backend.supports(call, PIECE.target),
                   lambda: run_relay_to_tir(PIECE, _region_mod()),
                   lambda: blas.build(_module({}), PIECE.target)):
            with pytest.raises(blas.BlasError) as e:
                fn()
            assert str(e.value) == "target kind 'blas' needs scipy-openblas32: pip install 'plait[blas]'"
    finally:
        monkeypatch.undo()
        blas.openblas.cache_clear()
    assert blas.openblas().prefix == "scipy_"


def _region_mod():
    return partitioned(lambda ps: Call(get_op("nn.dense"), ps), [tensor((4, 8)), tensor((5, 8))], "blas")


# ---- through plait.build: the bench models on "host: c; blas: blas" ------------------------------

def _ort(model, feeds):
    return reference_run(model, feeds)


def _feeds(model):
    rng = np.random.default_rng(0)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


def _on_blas(art):
    return sorted(p.call.op_name for p in art.placement.placed if p.piece == "blas")


@pytest.mark.parametrize("name, on_blas", [
    ("mlp", ["nn.dense"] * 3),
    ("ds_cnn", ["nn.conv2d"] * 5 + ["nn.dense"]),  # the first conv and the pointwise ones; not depthwise
    ("resnet_block", ["nn.conv2d"] * 2),
    ("transformer_encoder", ["nn.matmul"] * 8),
])
def test_bench_models_with_every_call_blas_can_run_on_blas_match_onnxruntime(name, on_blas, cache_dir):
    import plait
    from plait.executor import GraphModule
    from plait.frontend.onnx import from_onnx
    from plait.testing.onnx_models import MODELS

    model = MODELS[name]()
    feeds = _feeds(model)
    art = plait.build(from_onnx(model), "host: c; blas: blas", place="*=blas?",
                      config={"cc.cache_dir": str(cache_dir)})
    assert _on_blas(art) == on_blas
    assert sorted(art.piece_modules) == ["blas", "host"]
    got = GraphModule(art)(**feeds)
    for g, w in zip(got, _ort(model, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_the_im2col_workspace_is_in_the_memory_plan_and_the_artifact_reloads(tmp_path, cache_dir):
    import json

    import plait
    from plait.executor import GraphModule
    from plait.frontend.onnx import from_onnx
    from plait.testing.onnx_models import resnet_block

    model = resnet_block(channels=8, size=10)
    art = plait.build(from_onnx(model), "host: c; blas: blas", place="*=blas?",
                      config={"cc.cache_dir": str(cache_dir)})
    graph = json.loads(art.graph_json)
    col_bytes = 8 * 3 * 3 * 10 * 10 * 4  # [C*KH*KW, OH*OW] floats
    calls = [n for n in graph["nodes"] if n.get("op") == "call" and n.get("piece") == "blas"]
    assert len(calls) == 2
    # each convolution's workspace is a storage of its pool, live only during its call
    blas_ws = [graph["storage"][graph["entries"][e]["storage"]] for n in calls for e in n["workspace"]]
    assert [(s["kind"], s["bytes"]) for s in blas_ws] == [("workspace", col_bytes)] * 2
    assert blas_ws[0]["pool"] == blas_ws[1]["pool"] and art.memory["activation_bytes"] >= col_bytes
    assert "28,800 B  piece 'blas'" in art.memory_report()
    feeds = _feeds(model)
    want = _ort(model, feeds)
    got = GraphModule(art)(**feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
    # a fresh process loads the exported artifact: OpenBLAS is found through the library's rpath
    art.export(tmp_path / "art")
    np.savez(tmp_path / "in.npz", **feeds)
    script = ("import sys, numpy as np\n"
              "from plait.executor import GraphArtifact, GraphModule\n"
              "feeds = dict(np.load(sys.argv[1]))\n"
              "assert 'scipy_openblas32' not in sys.modules\n"
              "np.save(sys.argv[3], GraphModule(GraphArtifact.load(sys.argv[2]))(**feeds)[0])\n")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "in.npz"), str(tmp_path / "art"),
                    str(tmp_path / "out.npy")], check=True, env=env)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), want[0], rtol=1e-4, atol=1e-4)


def test_placement_by_cost_puts_on_blas_the_convolutions_it_runs_faster(cache_dir):
    # measured (bench/calibrate.py, docs/placement.md): MobileNetV2's pointwise convolutions at 6x6 (rows of
    # 36 pixels: 2 vectors and a remainder on c) go to OpenBLAS. DS-CNN's convolutions stay on c since issue 16
    # (its stem a product over copied windows, 7 us; its pointwise ones over rows of 125 in whole vectors,
    # 9.4 us against 10 us on OpenBLAS plus 2 us for their bias and relu). The MLP's two large matrix-vector
    # products stream their matrices (512 KiB, 1 MiB) from L2: 6.1 and 13.4 us on c, 5.4 and 11.9 us on
    # OpenBLAS's sgemv (the bias and relu then a function of their own)
    import plait
    from plait.frontend.onnx import from_onnx
    from plait.testing.onnx_models import ds_cnn, mlp, mobilenet_v2

    # the facts of the machine measured pinned (AMD Zen 4: AVX-512 in 256-bit FMA passes, 3.7 GHz effective):
    # the decision must not depend on the machine the tests run on
    target = "host: c -simd-bits=512 -fma-bits=256 -clock-mhz=3700; blas: blas -simd-bits=512 -fma-bits=256 -clock-mhz=3700"
    art = plait.build(from_onnx(mobilenet_v2()), target, config={"cc.cache_dir": str(cache_dir)})
    on_blas = [p for p in art.placement.placed if p.piece == "blas"]
    assert [p.call.args[1].checked_type.shape for p in on_blas] == [(32, 144, 1, 1), (32, 192, 1, 1)]
    assert all(p.estimate.source == "hook" for p in on_blas)
    art = plait.build(from_onnx(ds_cnn()), target, config={"cc.cache_dir": str(cache_dir)})
    assert _on_blas(art) == []
    art = plait.build(from_onnx(mlp()), target, config={"cc.cache_dir": str(cache_dir)})
    assert _on_blas(art) == ["nn.dense"] * 2


def test_random_convolutions_match_numpy(cache_dir):
    rng = np.random.default_rng(7)
    for _ in range(12):
        kh, kw = (int(v) for v in rng.integers(1, 5, 2))
        s = tuple(int(v) for v in rng.integers(1, 4, 2))
        d = tuple(int(v) for v in rng.integers(1, 3, 2))
        pad = tuple(int(v) for v in rng.integers(0, 4, 4))
        h = int(rng.integers(max(1, d[0] * (kh - 1) + 1 - pad[0] - pad[2]), 9))
        w = int(rng.integers(max(1, d[1] * (kw - 1) + 1 - pad[1] - pad[3]), 9))
        c, o, n = (int(v) for v in rng.integers(1, 4, 3))
        check("nn.conv2d", [(n, c, h, w), (o, c, kh, kw)], {"strides": s, "dilation": d, "padding": pad},
              cache_dir=cache_dir)
