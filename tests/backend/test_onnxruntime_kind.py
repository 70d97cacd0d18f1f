"""The onnxruntime target kind: relay_to_runtime (export + session in an OrtModule), supports (ORT's
own answer, cached), options, errors."""

from __future__ import annotations

import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import plait.backend  # noqa: F401  (registers the kind's hooks)
from plait.backend import onnxruntime as ortk
from plait.errors import PlaitError
from plait.frontend.onnx import from_onnx
from plait.frontend.onnx_export import ExportError
from plait.relay import call, const, var
from plait.relay.expr import Function, Tuple, TupleGetItem
from plait.runtime.module import RuntimeError_
from plait.runtime.ort_module import OrtModule
from plait.target import Piece, Target, call_supports, get_kind, hooks_of, run_relay_to_runtime
from plait.testing import onnx_models

F32 = np.float32


def _region(func: Function, symbol: str = "ort_0") -> Function:
    return Function(func.params, func.body, func.ret_type, {"global_symbol": symbol, "target": "ort", "region": 1})


def _ort_run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


# ---- the kind -----------------------------------------------------------------------------------


def test_kind_options_and_hooks():
    kind = get_kind("onnxruntime")
    assert kind.can_host is False and kind.device_type == "cpu"
    assert list(hooks_of("onnxruntime")) == ["relay_to_runtime", "supports"]
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
    x = var("x", (2,))
    f = Function((x,), call("mod", x, x, meta={"name": "bad_mod"}))
    with pytest.raises(ExportError, match=r"call 'bad_mod' \(mod\): mod of floating-point values with fmod=false"):
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
    assert ortk.explain_support(call("mod", xf, xf), t) == (
        False, "no ONNX export: call of 'mod': mod of floating-point values with fmod=false (ONNX Mod needs fmod=1 for "
               "floats)")
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
