"""The forward-only pipeline: how much a build infers and lowers (issue 11's acceptance), the
lowering cache and incremental type inference."""

import numpy as np
import onnxruntime as ort
import pytest

import plait
from plait.driver import Built, Lowered, Partitioned
from plait.executor import GraphModule
from plait.frontend.onnx import from_onnx
from plait.ir.transform import PassContext
from plait.lowering import lower as lower_mod
from plait.lowering.cache import LoweringCache, lower_cached, lowering_key
from plait.placement.stages import Imported, Placed
from plait.relay import IRModule
from plait.relay.analysis import structural_hash
from plait.relay.expr import Call, Var
from plait.relay.infer import INFER_STATS, infer_type
from plait.relay.visitor import post_order
from plait.lowering.lower import single_call_function
from plait.ir.types import TensorType
from plait.testing import onnx_models

TARGET = "host: c; blas: blas"


def _lowerings(monkeypatch):
    """Every call of lower_function as (structural key, target string)."""
    seen = []
    real = lower_mod.lower_function

    def counted(fn, name, target, *args, **kwargs):
        seen.append((structural_hash(lowering_key(fn)), str(target)))
        return real(fn, name, target, *args, **kwargs)

    monkeypatch.setattr(lower_mod, "lower_function", counted)
    return seen


def test_ds_cnn_build_infers_at_most_four_module_equivalents_and_lowers_nothing_twice(tmp_path, monkeypatch):
    model = onnx_models.ds_cnn()
    x = np.random.default_rng(3).standard_normal((1, 1, 49, 10)).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {sess.get_inputs()[0].name: x})
    mod = from_onnx(model)
    size = sum(1 for _ in post_order(mod["main"]))
    seen = _lowerings(monkeypatch)
    hits = []
    real_lower = LoweringCache.lower

    def spy(self, *args, **kwargs):
        out = real_lower(self, *args, **kwargs)
        hits.append(self.stats.hits)
        return out

    monkeypatch.setattr(LoweringCache, "lower", spy)
    nodes0, calls0 = INFER_STATS.nodes, INFER_STATS.calls
    art = plait.build(mod, TARGET, config={"cc.cache_dir": str(tmp_path)})
    typed = INFER_STATS.nodes - nodes0
    # type inference does at most the work of 4 whole-module runs: only the nodes a pass made are typed
    assert typed <= 4 * size, (typed, size, INFER_STATS.calls - calls0)
    # every function (structure, target) is lowered once: placement prices calls through the build's cache
    # and default lowering reuses that TIR (global_avg_pool2d stays a single-call group on c; flatten is a
    # view, priced at nothing and never lowered: a view node of the graph)
    assert seen and len(seen) == len(set(seen))
    assert hits[-1] >= 1
    assert [n["op"] for n in art.graph["nodes"]].count("view") == 1
    assert {p for p in art.placement.pieces().values()} == {"host", "blas"}
    assert LoweringCache.current() is None
    (got,) = GraphModule(art)(**{sess.get_inputs()[0].name: x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _call(shape=(2, 3)):
    return plait.relay.call("nn.relu", Var("x", TensorType(shape, "float32")))


def test_lowering_cache_lowers_a_structure_once_per_target_and_renames(monkeypatch):
    seen = _lowerings(monkeypatch)
    f1 = single_call_function(infer_call(_call()))
    f2 = single_call_function(infer_call(_call()))  # another function, same structure (fresh vars)
    cache = LoweringCache()
    with cache.active():
        assert LoweringCache.current() is cache
        a = lower_cached(f1, "first", "c")
        b = lower_cached(f2, "second", "c")
        c = lower_cached(f1, "third", "c -opt-level=3")
        d = lower_cached(single_call_function(infer_call(_call((4,)))), "fourth", "c")
    assert (a.name, b.name, c.name, d.name) == ("first", "second", "third", "fourth")
    assert b.body is a.body and c.attrs["target"] != a.attrs["target"]
    assert (cache.stats.lowered, cache.stats.hits, len(cache)) == (3, 1, 3)
    assert len(seen) == 3
    assert LoweringCache.current() is None
    lower_cached(f1, "again", "c")  # no active cache: lowered every time
    assert len(seen) == 4


def infer_call(call):
    from plait.relay.infer import infer_expr

    infer_expr(call)
    return call


def test_type_inference_is_incremental():
    call = _call()
    mod = IRModule({"main": plait.relay.Function((call.args[0],), call)})
    n0, r0 = INFER_STATS.nodes, INFER_STATS.runs
    infer_type(mod)
    assert (INFER_STATS.nodes - n0, INFER_STATS.runs - r0) == (2, 1)  # relu, the function (x is annotated)
    infer_type(mod)  # already typed: nothing to do
    assert (INFER_STATS.nodes - n0, INFER_STATS.runs - r0) == (2, 1)
    outer = plait.relay.call("nn.relu", call)  # a pass made one new node over the typed ones
    infer_type(IRModule({"main": plait.relay.Function((call.args[0],), outer)}))
    assert INFER_STATS.nodes - n0 == 4  # the new call and its function only
    assert outer.checked_type == TensorType((2, 3), "float32")


def test_build_stages_go_forward(tmp_path):
    from plait.driver import CodegenPieces, lowered_module, _composite

    ct = _composite(TARGET)
    seen = []

    class Record:
        def after(self, p, out):
            seen.append((p.name, type(out).__name__))

    ctx = PassContext(config={"cc.cache_dir": str(tmp_path)}, instruments=[Record()])
    with LoweringCache().active():
        lowered = lowered_module(from_onnx(onnx_models.mlp()), ct, ctx)
        built = ctx.run(CodegenPieces(ct), lowered)
    assert isinstance(lowered, Lowered) and isinstance(built, Built) and built.lowered is lowered
    kinds = dict(seen)
    assert (kinds["place"], kinds["partition"], kinds["lower"], kinds["codegen_pieces"]) == (
        Placed.__name__, Partitioned.__name__, Lowered.__name__, Built.__name__)
    assert [n for n, _ in seen[:3]] == ["infer_type", "fold_constant", "fold_batch_norm"]
    assert set(built.modules) <= {"host", "blas"} and built.lib is not None
    assert Imported.__name__ == "Imported"
