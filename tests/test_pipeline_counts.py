"""The forward-only pipeline: how much a build infers and lowers (issue 11's acceptance), the
lowering cache and incremental type inference."""

from collections import Counter

import numpy as np
import pytest

import plait
from plait.pipeline.stages import Built, Lowered, Partitioned
from plait.executor import GraphModule
from plait.frontend.onnx import from_onnx
from plait.ir.transform import PassContext
from plait.lowering import cache as cache_mod
from plait.lowering import function as function_mod
from plait.lowering.cache import LoweringCache, lower_cached, lowering_key
from plait.pipeline.stages import Imported, Placed, Priced
from plait.relay import IRModule
from plait.relay.analysis import structural_hash
from plait.relay.expr import Call, Var
from plait.relay.infer import INFER_STATS, infer_type
from plait.relay.visitor import post_order
from plait.lowering.lower import single_call_function
from plait.ir.types import TensorType
from plait.testing import onnx_models
from plait.testing.ort_reference import reference_session

TARGET = "host: c -simd-bits=512 -clock-mhz=2445; blas: blas -simd-bits=512 -clock-mhz=2445"  # host facts pinned: placement does not depend on this machine


def _lowerings(monkeypatch):
    """Every lowering the lowering cache does (its calls of lower_function) as (structural key, target string)."""
    seen = []
    real = cache_mod.lower_function

    def counted(fn, name, target, *args, **kwargs):
        seen.append((structural_hash(lowering_key(fn)), str(target)))
        return real(fn, name, target, *args, **kwargs)

    monkeypatch.setattr(cache_mod, "lower_function", counted)
    return seen


def _computes(monkeypatch):
    """Every TE compute built for an operator call (the work of lowering it, inside lower_function), as
    (operator, call-site name), with the pass running when it was built."""
    built = []
    real = function_mod._lower_call
    running = ["import"]

    class Stage:
        def before(self, p, _):
            running.append(p.name)

    def counted(call, args, where):
        built.append(((call.op.name, call.meta.get("name")), running[-1]))
        return real(call, args, where)

    monkeypatch.setattr(function_mod, "_lower_call", counted)
    return built, Stage()


def _check_built_once(model, built, ctx_calls):
    """Each call of the imported model had its TE compute built while placement priced it (a fused group
    counts for each of its calls): once, or twice for the calls of a group placement priced in parts (a
    call blas could run, its neighbours only c) and whole (what lowering makes when the parts share the
    host); default lowering found every function it makes in the build's cache."""
    assert len(set(ctx_calls)) == len(ctx_calls)  # (operator, name) identifies a call of these models
    priced = Counter(key for key, stage in built if stage == "price")
    again = Counter(key for key, stage in built if stage != "price")
    assert set(priced) <= set(ctx_calls)  # (one site per structure)
    assert max(priced.values()) <= 2, [k for k, v in priced.items() if v > 2]
    assert not again, again


def _calls_of(model):
    from plait.ir.transform import PassContext
    from plait.pipeline import import_stage

    main = import_stage(from_onnx(model), PassContext()).mod["main"]
    return [(n.op.name, n.meta.get("name")) for n in post_order(main.body) if isinstance(n, Call)]


def test_ds_cnn_build_infers_at_most_four_module_equivalents_and_lowers_each_call_once(tmp_path, monkeypatch):
    model = onnx_models.ds_cnn()
    x = np.random.default_rng(3).standard_normal((1, 1, 49, 10)).astype(np.float32)
    sess = reference_session(model)
    (want,) = sess.run(None, {sess.get_inputs()[0].name: x})
    calls = _calls_of(model)
    mod = from_onnx(model)
    size = sum(1 for _ in post_order(mod["main"]))
    seen = _lowerings(monkeypatch)
    built, stage = _computes(monkeypatch)
    nodes0, calls0 = INFER_STATS.nodes, INFER_STATS.calls
    art = plait.build(mod, TARGET, config={"cc.cache_dir": str(tmp_path)}, instruments=[stage])
    typed = INFER_STATS.nodes - nodes0
    # type inference does at most the work of 4 whole-module runs: only the nodes a pass made are typed
    assert typed <= 4 * size, (typed, size, INFER_STATS.calls - calls0)
    # the conv + bias + relu groups on the host were priced as the fused functions lowering makes of
    # them (not call by call); a group priced in parts (blas could run its conv) was priced whole as well:
    # what lowering makes when its parts all stay on the host; no (structure, target) is lowered twice
    _check_built_once(model, built, calls)
    assert len(seen) == len(set(seen))
    assert len(built) > len(seen)  # some lowered functions hold more than one call
    # flatten is a view, priced at nothing and never lowered: a view node of the graph
    assert [n["op"] for n in art.graph["nodes"]].count("view") == 1
    # every call on the host since c runs DS-CNN's convolutions faster (issue 16: the stem over copied
    # windows, rows of 125 in whole vectors); the groups blas could run a part of were priced in parts:
    # 4 depthwise conv + bias + relu; the 5 other convolutions apart from their bias + relu
    assert {p for p in art.placement.pieces().values()} == {"host"}
    assert sorted(len(g) for g in art.placement.fused) == [2] * 5 + [3] * 4
    assert LoweringCache.current() is None
    (got,) = GraphModule(art)(**{sess.get_inputs()[0].name: x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["mlp", "resnet_block"])
def test_bundled_models_lower_each_call_once(name, tmp_path, monkeypatch):
    model = getattr(onnx_models, name)()
    sess = reference_session(model)
    feeds = {i.name: np.random.default_rng(5).standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
             .astype(np.float32) for i in model.graph.input}
    want = sess.run(None, feeds)
    built, stage = _computes(monkeypatch)
    art = plait.build(from_onnx(model), TARGET, config={"cc.cache_dir": str(tmp_path)}, instruments=[stage])
    _check_built_once(model, built, _calls_of(model))
    assert any(len(g) > 1 for g in art.placement.fused)
    got = GraphModule(art)(**feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


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
    assert b.body is a.body and c.body is not a.body
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
    from plait.driver import lowered_module, _composite
    from plait.pipeline.codegen import CodegenPieces

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
    assert (kinds["price"], kinds["place"], kinds["partition"], kinds["lower"], kinds["codegen_pieces"]) == (
        Priced.__name__, Placed.__name__, Partitioned.__name__, Lowered.__name__, Built.__name__)
    assert [n for n, _ in seen[:4]] == ["infer_type", "qdq_to_integer", "fold_constant", "fold_batch_norm"]
    assert set(built.modules) <= {"host", "blas"} and built.lib is not None
    assert Imported.__name__ == "Imported"


def test_a_pin_splits_a_fusion_group_and_each_part_is_lowered_once(tmp_path, monkeypatch):
    """On two c pieces every dense + bias + relu is one group; pinning /fc0/Relu to b splits its group
    (the dense and bias may go anywhere, the ReLU only to b): the parts are fused, priced and lowered once."""
    model = onnx_models.mlp()
    x = np.random.default_rng(1).standard_normal((1, 256)).astype(np.float32)
    sess = reference_session(model)
    (want,) = sess.run(None, {sess.get_inputs()[0].name: x})
    built, stage = _computes(monkeypatch)
    art = plait.build(from_onnx(model), "a: c; b: c", place="/fc0/Relu=b", config={"cc.cache_dir": str(tmp_path)},
                      instruments=[stage])
    _check_built_once(model, built, _calls_of(model))
    groups = [[(c.op.name, c.meta["name"]) for c in g] for g in art.placement.fused]
    assert groups == [[("nn.dense", "/fc0/Gemm"), ("add", "/fc0/Gemm")],
                      [("nn.dense", "/fc1/Gemm"), ("add", "/fc1/Gemm"), ("nn.relu", "/fc1/Relu")],
                      [("nn.dense", "/fc2/Gemm"), ("add", "/fc2/Gemm")]]
    where = {(p.call.op.name, p.call.meta["name"]): p.piece for p in art.placement}
    assert where[("nn.relu", "/fc0/Relu")] == "b"
    assert where[("nn.dense", "/fc0/Gemm")] == where[("add", "/fc0/Gemm")]
    (got,) = GraphModule(art)(**{sess.get_inputs()[0].name: x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


M7 = "c -mcpu=cortex-m7f -board=mps2-an500"  # (memory facts: the fit check runs)


@pytest.mark.parametrize("executor, target", [(e, t) for e in ("graph", "aot", "vm") for t in ("c", M7)]
                         + [(e, f"a: {M7}; b: {M7}") for e in ("graph", "aot")])
def test_one_memory_plan_per_build(executor, target, tmp_path, monkeypatch):
    """Every build plans its memory once (issue 28): the executor's plan (Executor.plan), which the fit check
    of a target with memory facts reads and the executor's codegen receives in lowered.plan; the artifact's
    pools are that plan's."""
    from plait.memory.plan import MemoryPlan

    plans = []
    real = MemoryPlan.apply

    def counted(self, graph):
        plans.append(self)
        return real(self, graph)

    monkeypatch.setattr(MemoryPlan, "apply", counted)
    mod = from_onnx(onnx_models.ds_cnn(channels=8, blocks=1))
    art = plait.build(mod, target, executor=executor, place="*=b" if ";" in target else None,
                      config={"cc.cache_dir": str(tmp_path), "c.cross_check": False, "c.host_simulation": True})
    assert len(plans) == 1, f"{len(plans)} memory plans"
    pools = {p["name"]: p["bytes"] for p in plans[0].pools}
    if executor == "aot":
        assert {p["name"]: p["bytes"] for p in art.memory["pools"]} == pools
    elif executor == "graph":
        assert {p["name"]: p["bytes"] for p in art.graph["pools"]} == pools
    else:
        assert {p["name"]: p["bytes"] for p in art.pools} == pools


def _fused_functions(art_calls):
    """An instrument collecting, after each ``fuse_ops`` pass of default lowering, the (operator, call-site
    name) sets of the Primitive functions FuseOps made (calls legalization added, without a name, apart)."""
    from plait.relay.expr import Function

    class AfterFuse:
        def before(self, p, _):
            pass

        def after(self, p, mod):
            if p.name != "fuse_ops":
                return
            for f in mod.relay_functions().values():
                for n in post_order(f.body):
                    if isinstance(n, Call) and isinstance(n.op, Function) and n.op.attrs.get("Primitive"):
                        art_calls.append(frozenset((c.op.name, c.meta["name"]) for c in post_order(n.op.body)
                                                   if isinstance(c, Call) and c.meta.get("name")))

    return AfterFuse()


@pytest.mark.parametrize("name, target, place", [
    ("ds_cnn", TARGET, None), ("resnet_block", TARGET, None), ("mlp", "a: c; b: c", "/fc0/Relu=b"),
    ("mlp", "a: c; b: c", None)])
def test_lowering_fuses_exactly_the_groups_placement_decided(name, target, place, tmp_path):
    """Fusion groups are decided once (issue 28): placement's Assignment.fusion. Default lowering's FuseOps
    makes one function of each of them and of each other call alone, never one joining calls of two units
    (partitioning stamps the groups on the calls); the priced units are parts of those groups."""
    model = getattr(onnx_models, name)()
    made: list = []
    art = plait.build(from_onnx(model), target, place=place, config={"cc.cache_dir": str(tmp_path)},
                      instruments=[_fused_functions(made)])
    a = art.placement

    def key(calls):
        return frozenset((c.op.name, c.meta.get("name")) for c in calls)

    grouped = {c for g in a.fusion for c in g}
    units = {key(g) for g in a.fusion} | {key((p.call,)) for p in a.placed if p.call not in grouped}
    default = {p.name for p in plait.target.CompositeTarget(target).pieces if p.target.kind_name == "c"}
    assert a.fusion and made and all(m in units for m in made if m), [m for m in made if m not in units]
    on_default = {key(g) for g in a.fusion if a[g[0]].piece in default}
    assert on_default <= set(made)  # every decided group on a default-lowered piece is one function
    assert all(any(set(g) <= set(u) for u in a.fusion) for g in a.fused)  # the priced units: parts of them
