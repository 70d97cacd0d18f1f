"""The onnxruntime target kind: relay_to_runtime (export + session in an OrtModule), supports (ORT's
own answer, cached), options, errors."""

from __future__ import annotations

import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from plait.backends.onnxruntime import backend as ortk
from plait.errors import PlaitError
from plait.frontend.onnx import from_onnx
from plait.frontend.onnx_export import ExportError
from plait.relay import call, const, var
from plait.relay.expr import Function, Tuple, TupleGetItem
from plait.runtime.module import RuntimeError_
from plait.backends.onnxruntime.module import OrtModule
from plait.target import Piece, Target, call_supports, get_kind, hooks_of, run_relay_to_runtime
from plait.testing import onnx_models
from plait.testing.ort_reference import reference_run

HOST = "host: c -simd-bits=256 -clock-mhz=2445"  # host facts pinned: placements do not depend on the machine

F32 = np.float32


def _region(func: Function, symbol: str = "ort_0") -> Function:
    return Function(func.params, func.body, func.ret_type, {"global_symbol": symbol, "piece": "ort", "region": 1})


def _ort_run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return reference_run(model, feeds)


# ---- the kind -----------------------------------------------------------------------------------


def test_kind_options_and_hooks():
    kind = get_kind("onnxruntime")
    assert kind.can_host is False and kind.device_type == "cpu"
    assert set(hooks_of("onnxruntime")) == {"relay_to_runtime", "supports", "cost"}
    t = Target("onnxruntime -threads=2 -opt-level=1")
    assert (t.options["threads"], t.options["opt-level"], t.options["opset"]) == (2, 1, 20)
    with pytest.raises(PlaitError, match="expected one of|choices|must be one of"):
        Target("onnxruntime -opt-level=7")


# ---- relay_to_runtime ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mlp", "ds_cnn", "resnet_block", "transformer_encoder"])
def test_reference_models_run_in_an_ort_module(name):
    model = onnx_models.MODELS[name]()
    mod = from_onnx(model)
    lib = run_relay_to_runtime(Piece("ort", Target("onnxruntime")), _region(mod["main"], f"ort_{name}"))
    assert isinstance(lib, OrtModule) and lib.function_names() == [f"ort_{name}"]
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(F32)
             for i in model.graph.input}
    want = _ort_run(model, feeds)
    outs = [np.empty_like(w) for w in want]
    status = lib[f"ort_{name}"](*feeds.values(), *outs)
    assert status == 0
    for o, w in zip(outs, want):
        np.testing.assert_allclose(o, w, rtol=1e-5, atol=1e-5)
    # the ONNX model is kept on the module
    kept = onnx.load_from_string(lib.onnx_model)
    assert kept.graph.name == f"ort_{name}"


def test_outputs_written_in_place_and_binding_follows_new_data(tmp_path):
    x = var("x", (2, 3))
    y = var("y", (3,))
    parts = call("split", call("add", x, y), sections=(1, 1), axis=0)
    body = Tuple((TupleGetItem(parts, 1), call("nn.relu", x), call("sum", y, axis=None, keepdims=False)))
    lib = run_relay_to_runtime(Target("onnxruntime"), _region(Function((x, y), body), "f"))
    xv = np.arange(6, dtype=F32).reshape(2, 3) - 3
    yv = np.array([1, 2, 3], F32)
    o1, o2, o3 = np.zeros((1, 3), F32), np.zeros((2, 3), F32), np.zeros((), F32)
    f = lib["f"]
    f(xv, yv, o1, o2, o3)
    np.testing.assert_array_equal(o1, (xv + yv)[1:])
    np.testing.assert_array_equal(o2, np.maximum(xv, 0))
    assert o3 == 6
    xv += 10  # the same buffers again, new data: the cached binding reads it
    f(xv, yv, o1, o2, o3)
    np.testing.assert_array_equal(o2, np.maximum(xv, 0))
    # arrays that are not C-contiguous take the copying path
    xt = np.asfortranarray(xv)
    o2f = np.zeros((2, 3), F32)
    f(xt, yv, o1, o2f, o3)
    np.testing.assert_array_equal(o2f, np.maximum(xv, 0))
    with pytest.raises(RuntimeError_, match=r"function 'f' takes 5 arrays \(2 inputs, then 3 outputs\), got 2"):
        f(xv, yv)
    p = lib.save(tmp_path / "f.onnx")
    assert onnx.load(str(p)).graph.name == "f"


def test_session_options_follow_the_target():
    x = var("x", (4,))
    lib = run_relay_to_runtime(Target("onnxruntime -threads=2 -opt-level=0"), _region(Function((x,), call("exp", x))))
    so = lib.session.get_session_options()
    assert so.intra_op_num_threads == 2
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert lib.session.get_providers() == ["CPUExecutionProvider"]
    with pytest.raises(PlaitError, match=r"-threads must be >= 1, got 0"):
        run_relay_to_runtime(Target("onnxruntime -threads=0"), _region(Function((x,), call("exp", x))))


def test_relay_to_runtime_errors():
    x, img = var("x", (2,)), var("img", (1, 4, 2, 2))
    f = Function((img,), call("space_to_depth", img, block_size=2, mode="CRD", meta={"name": "s2d"}))
    with pytest.raises(ExportError, match=r"call 's2d' \(space_to_depth\): space_to_depth mode 'CRD'"):
        run_relay_to_runtime(Target("onnxruntime"), _region(f))
    with pytest.raises(PlaitError, match="the function has no 'global_symbol' attribute"):
        run_relay_to_runtime(Target("onnxruntime"), Function((x,), call("exp", x)))


def test_missing_onnxruntime_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime -> ImportError
    x = var("x", (2,))
    with pytest.raises(PlaitError, match=r"^target kind 'onnxruntime' needs onnxruntime: pip install onnxruntime$"):
        run_relay_to_runtime(Target("onnxruntime"), _region(Function((x,), call("exp", x))))


# ---- supports -----------------------------------------------------------------------------------


def test_supports_is_onnxruntimes_answer():
    t = Target("onnxruntime")
    img, w = var("img", (1, 4, 8, 8)), var("w", (8, 4, 3, 3))
    assert call_supports(t, call("nn.conv2d", img, w, padding=(1, 1, 1, 1))) is True
    # ONNX allows Max on int16, ONNX Runtime's CPU provider has no kernel for it
    a16 = var("a", (3,), "int16")
    ok, why = ortk.explain_support(call("maximum", a16, a16), t)
    assert not ok and why.startswith("onnxruntime: ") and "Could not find an implementation for Max" in why
    assert call_supports(t, call("maximum", a16, a16)) is False
    a32 = var("b", (3,), "int32")
    assert call_supports(t, call("maximum", a32, a32)) is True
    # no ONNX form at all
    xf = var("x", (3,))
    img = var("img2", (1, 4, 2, 2))
    assert ortk.explain_support(call("space_to_depth", img, block_size=2, mode="CRD"), t) == (
        False, "no ONNX export: call of 'space_to_depth': space_to_depth mode 'CRD' (ONNX SpaceToDepth is DCR only)")
    i16 = var("i16", (3,), "int16")  # exported through uint16 and a Where: ORT has no int16 Where
    ok, why = ortk.explain_support(call("right_shift", i16, i16), t)
    assert not ok and "Could not find an implementation for Where" in why
    assert call_supports(t, call("left_shift", i16, i16)) is True
    assert call_supports(t, call("nn.gelu", xf)) is True
    assert call_supports(Target("onnxruntime -opset=18"), call("nn.gelu", xf)) is False


def test_supports_answers_are_cached_per_signature():
    t = Target("onnxruntime")
    x = var("x", (5, 7))
    c1 = call("nn.softmax", x, axis=1, meta={"name": "first"})
    c2 = call("nn.softmax", call("exp", x), axis=1, meta={"name": "second"})  # same op, attrs and types
    ortk._CACHE.clear()
    assert call_supports(t, c1) and call_supports(t, c2)
    assert len([k for k in ortk._CACHE if k[0] == "nn.softmax"]) == 1
    call_supports(t, call("nn.softmax", x, axis=0))
    assert len([k for k in ortk._CACHE if k[0] == "nn.softmax"]) == 2


def test_supports_every_call_of_the_reference_models():
    from plait.relay.expr import Call
    from plait.relay.visitor import post_order

    t = Target("onnxruntime")
    for name in ("mlp", "ds_cnn", "resnet_block", "transformer_encoder"):
        main = from_onnx(onnx_models.MODELS[name]())["main"]
        calls = [e for e in post_order(main.body) if isinstance(e, Call)]
        assert all(call_supports(t, c) for c in calls), name
    assert call_supports(t, call("add", const(np.ones(2, F32)), const(np.ones(2, F32)))) is True


# ---- through plait.build ------------------------------------------------------------------------


def _feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(F32)
            for i in model.graph.input}


def _build_and_compare(name: str, place: str | None, ort_target: str = "onnxruntime") -> object:
    import plait
    from plait.executor import GraphModule

    model = onnx_models.MODELS[name]()
    art = plait.build(from_onnx(model), f"{HOST}; ort: {ort_target}", place=place)
    feeds = _feeds(model)
    want = _ort_run(model, feeds)
    got = GraphModule(art)(**feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    return art


def _funcs(art) -> list[str]:
    return [n["func"] for n in art.graph["nodes"] if n["op"] == "call"]


@pytest.mark.parametrize("name", ["mlp", "ds_cnn", "resnet_block", "transformer_encoder"])
def test_build_everything_on_ort(name):
    art = _build_and_compare(name, "*=ort")
    assert _funcs(art) == ["ort_0"]  # the whole model is one region, one session
    assert {p.piece for p in art.placement} == {"ort"}
    (ort_mod,) = [m for m in art.lib.walk() if isinstance(m, OrtModule)]
    assert ort_mod.function_names() == ["ort_0"]
    nodes = onnx.load_from_string(ort_mod.onnx_model).graph.node
    # one node per call, but a constant bias add joins its Conv / Gemm
    from plait.relay.expr import Call, Constant

    def bias_add(c) -> bool:
        a, b = c.args[0], c.args[-1]
        return (c.op_name == "add" and isinstance(b, Constant) and isinstance(a, Call)
                and (a.op_name, a.checked_type.ndim) in (("nn.conv2d", 4), ("nn.dense", 2)))

    bias_adds = sum(bias_add(p.call) for p in art.placement)
    assert len(nodes) == len(art.placement) - bias_adds


def test_build_mixed_placements():
    art = _build_and_compare("ds_cnn", "Conv=ort")  # every convolution on ORT, the rest compiled C
    funcs = _funcs(art)
    ort_funcs = [f for f in funcs if f.startswith("ort_")]
    assert len(ort_funcs) == 9 and len(funcs) > len(ort_funcs)
    convs = [p for p in art.placement if p.call.op_name == "nn.conv2d"]
    assert convs and all(p.piece == "ort" for p in convs)
    assert all(p.piece == "host" for p in art.placement if p.call.op_name != "nn.conv2d")
    art = _build_and_compare("mlp", "/fc0/*=ort")
    assert _funcs(art)[0] == "ort_0" and all(not f.startswith("ort_") for f in _funcs(art)[1:])
    art = _build_and_compare("transformer_encoder", "MatMul=ort")
    assert sum(f.startswith("ort_") for f in _funcs(art)) >= 2


def test_build_with_session_options():
    art = _build_and_compare("ds_cnn", "*=ort", "onnxruntime -threads=2 -opt-level=0 -opset=17")
    (m,) = [m for m in art.lib.walk() if isinstance(m, OrtModule)]
    assert (m.threads, m.opt_level) == (2, 0)
    assert onnx.load_from_string(m.onnx_model).opset_import[0].version == 17


def test_build_by_cost_without_rules():
    _build_and_compare("resnet_block", None)


def test_build_respects_what_ort_cannot_run():
    import plait
    from plait.executor import GraphModule
    from plait.frontend import Builder
    from plait.placement.rules import PlacementError

    b = Builder("m")
    x = b.input("x", (2, 3))
    a = b.cast(x, dtype="int16", name="c1")
    m = b.maximum(a, b.cast(b.nn.relu(x), dtype="int16", name="c2"), name="mx")  # ORT: no int16 Max kernel
    mod = b.finish(b.cast(m, dtype="float32", name="c3"))
    art = plait.build(mod, HOST + "; ort: onnxruntime", place="*=ort?")
    pieces = {p.call.meta["name"]: p.piece for p in art.placement}
    assert pieces == {"c1": "ort", "relu_0": "ort", "c2": "ort", "mx": "host", "c3": "ort"}
    xv = np.array([[1.5, -2, 3], [4, -5, 6]], F32)
    (y,) = GraphModule(art)(x=xv)
    np.testing.assert_array_equal(y, np.maximum(xv.astype(np.int16), np.maximum(xv, 0).astype(np.int16)).astype(F32))
    with pytest.raises(PlacementError, match=r"call 'mx' \(maximum\) is pinned to piece 'ort' by --place rule "
                                             r"'\*=ort', but that piece cannot run it"):
        plait.build(mod, HOST + "; ort: onnxruntime", place="*=ort")


def test_uint8_int8_products_go_to_ort_only_where_its_sums_are_exact():
    """ONNX Runtime's u8 x s8 MatMulInteger saturates pairs of products in 16 bits on x86-64 without VNNI unless
    the int8 operand is a constant weight it prepacks (with the exact-sums option every session sets): those
    products stay off the kind; a constant full-range weight runs there and equals the exact sums."""
    import plait
    from plait.executor import GraphModule
    from plait.relay import IRModule

    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (3, 64)).astype(np.uint8)
    b = rng.integers(-128, 128, (64, 5)).astype(np.int8)
    want = a.astype(np.int64) @ b.astype(np.int64)  # far from 16 bits: |pairs| reach 2 * 255 * 128
    t = Target("onnxruntime")
    av, bv = var("a", (3, 64), "uint8"), var("b", (64, 5), "int8")
    ok, why = ortk.explain_support(call("qnn.matmul", av, bv), t)
    assert not ok and why == ("a uint8 x int8 product whose int8 operand is not a constant weight (or -opt-level=0): "
                              "ONNX Runtime adds its pairs of products in 16 bits, saturating, on x86-64 without VNNI")
    assert ortk.explain_support(call("qnn.matmul", av, var("c", (64, 5), "uint8")), t) == (
        True, "")  # u8 x u8: exact kernels
    dense = call("qnn.dense", av, const(np.ascontiguousarray(b.T)), input_zero_point=0)
    assert ortk.explain_support(dense, t) == (True, "")
    assert ortk.explain_support(dense, Target("onnxruntime -opt-level=0"))[0] is False
    art = plait.build(IRModule.from_expr(Function((av,), dense)), HOST + "; ort: onnxruntime", place="*=ort")
    assert [p.piece for p in art.placement] == ["ort"]
    (y,) = GraphModule(art)(a=a)
    np.testing.assert_array_equal(y, want)


def test_plait_run_on_ort_from_the_command_line(tmp_path, capsys):
    from plait.cli import main

    model = onnx_models.MODELS["ds_cnn"]()
    path = tmp_path / "ds_cnn.onnx"
    onnx.save(model, str(path))
    feeds = _feeds(model, seed=3)
    np.savez(tmp_path / "in.npz", **feeds)
    assert main(["run", str(path), "--target", HOST + "; ort: onnxruntime", "--place", "Conv=ort",
                 "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz")]) == 0
    assert "ort 9 calls" in capsys.readouterr().out
    (want,) = _ort_run(model, feeds)
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_allclose(out[model.graph.output[0].name], want, rtol=1e-5, atol=1e-5)


# ---- cost ---------------------------------------------------------------------------------------


def test_cost_is_measured_only_when_asked():
    from plait.target import call_cost

    img, w = var("img", (1, 32, 28, 28)), var("w", (32, 32, 3, 3))
    conv = call("nn.conv2d", img, w, padding=(1, 1, 1, 1))
    relu = call("nn.relu", var("x", (8,)))
    assert call_cost(Target("onnxruntime"), conv) is None  # default: the cost model's own estimate
    t = Target("onnxruntime -measure-cost")
    c_conv, c_relu = call_cost(t, conv), call_cost(t, relu)
    assert c_conv is not None and c_relu is not None
    assert c_conv > c_relu > 0 and c_conv < 1.0  # (a session call included: ~10 us even for the relu)
    assert call_cost(t, conv) == c_conv  # cached per signature
    i16 = var("i16", (3,), "int16")
    assert call_cost(t, call("right_shift", i16, i16)) is None  # ORT cannot run it: no estimate
    assert call_cost(t, call("take", var("d", (1, 3)), var("i", (2,), "int64"))) is None  # probe index out of range


def test_build_with_measured_costs_matches_ort():
    import plait
    from plait.executor import GraphModule

    model = onnx_models.MODELS["resnet_block"]()
    art = plait.build(from_onnx(model), HOST + "; ort: onnxruntime -measure-cost")
    ort_estimates = [p.alternatives["ort"] if p.piece != "ort" else p.estimate for p in art.placement]
    assert all(e.source == "hook" and e.seconds > 0 for e in ort_estimates)  # every call timed on ORT
    feeds = _feeds(model)
    (want,), (got,) = _ort_run(model, feeds), GraphModule(art)(**feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_import_plait_stays_light():
    import subprocess

    code = ("import sys, plait, plait.backends, plait.frontend.onnx_export; "
            "print('onnxruntime' in sys.modules, 'onnx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_conformance_model_folders_build_with_an_ort_piece():
    """The conformance model folders through plait.build("host: c; ort: onnxruntime", place="*=ort?")
    and the graph executor (all 2024 cases: ``python tests/frontend/onnx_export_roundtrip.py --build``,
    1600 passed, 0 failed, 1 not built (If across pieces), 423 not imported)."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "frontend"))
    from onnx_export_roundtrip import roundtrip  # (puts tests/conformance on sys.path)
    from onnx_conformance import data_dir_cases

    results = [(c.name, *roundtrip(c, build=True)) for c in data_dir_cases()]
    assert [r for r in results if r[1] == "failed"] == []
    assert sum(r[1] == "passed" for r in results) >= 100
