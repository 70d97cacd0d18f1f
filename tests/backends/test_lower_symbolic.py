"""Lowering with symbolic extents: size variables as trailing int64 parameters, shapes from the shape
functions (plait.lowering.shape_func), the bench models with a symbolic batch compiled once and run
with N = 1, 3 and 8 by the VM executor against ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait import relay, tir
from plait.driver import lowered_module
from plait.pipeline.codegen import CodegenPieces
from plait.errors import PlaitError
from plait.frontend import from_onnx
from plait.ir.transform import PassContext
from plait.lowering.cache import LoweringCache
from plait.lowering.lower import LowerToTIR
from plait.lowering.shape_func import (
    ShapeError, output_shapes, prepare_call, scalar_args, size_var_values, size_vars, workspace_bytes,
    workspace_shapes,
)
from plait.memory.workspace import LiftWorkspaces
from plait.relay import IRModule, call, var
from plait.relay.passes import FuseOps
from plait.target import CompositeTarget
from plait.executor.vm.machine import VirtualMachine
from plait.testing.dynamic_models import DYNAMIC_MODELS, with_symbolic_batch
from plait.testing.onnx_models import mlp
from plait.tir.stmt import PrimFunc
from plait.testing.ort_reference import reference_session


def _lowered(mod: IRModule) -> PrimFunc:
    out = LiftWorkspaces()(LowerToTIR("c")(FuseOps()(relay.infer_type(mod))))
    funcs = [f for _, f in out.items() if isinstance(f, PrimFunc)]
    assert len(funcs) == 1
    return funcs[0]


def test_a_symbolic_dim_is_a_trailing_size_variable():
    x = var("x", ("n", 2))
    f = _lowered(IRModule.from_expr(call("exp", x)))
    assert [getattr(p, "name", None) for p in f.params] == ["p0", "T_exp", "n"] and size_vars(f) == [f.params[2]]
    assert str(f.relay_type) == "fn (Tensor[(n, 2), float32]) -> Tensor[(n, 2), float32]"
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert size_var_values(f, [a.shape]) == {"n": 3} and scalar_args(f, {"n": 3}) == [3]
    assert output_shapes(f, [a.shape]) == [(3, 2)]
    args, outs = prepare_call(f, [a])
    tir.evaluate(f, *args)
    np.testing.assert_allclose(outs[0], np.exp(a), rtol=1e-6)


def test_an_unknown_dim_gets_a_fresh_name_and_a_reshape_gives_an_expression():
    x = var("x", ("?", 4, 3))
    f = _lowered(IRModule.from_expr(call("exp", call("reshape", x, newshape=[-1, 3]))))
    assert [v.name for v in size_vars(f)] == ["p0_d0"]
    assert str(f.relay_type) == "fn (Tensor[(p0_d0, 4, 3), float32]) -> Tensor[(?, 3), float32]"
    a = np.linspace(-1, 1, 5 * 12, dtype=np.float32).reshape(5, 4, 3)
    assert output_shapes(f, [a.shape]) == [(20, 3)]
    args, outs = prepare_call(f, [a])
    tir.evaluate(f, *args)
    np.testing.assert_allclose(outs[0], np.exp(a.reshape(-1, 3)), rtol=1e-6)


def test_symbolic_workspaces_become_parameters_the_caller_sizes():
    x = var("x", ("N", 5))
    f = _lowered(IRModule.from_expr(call("nn.softmax", x, axis=-1)))
    assert [getattr(p, "name", None) for p in f.params] == ["p0", "T_nn_softmax", "T_nn_softmax_max",
                                                           "T_nn_softmax_sum", "N"]
    assert f.attrs["dynamic_workspaces"] == 2 and f.attrs["workspace_param"] == 2
    assert workspace_shapes(f, {"N": 7}) == [((7,), "float32"), ((7,), "float32")]
    assert workspace_bytes(f, {"N": 7}) == 56
    a = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
    args, outs = prepare_call(f, [a])
    tir.evaluate(f, *args)
    e = np.exp(a - a.max(-1, keepdims=True))
    np.testing.assert_allclose(outs[0], e / e.sum(-1, keepdims=True), rtol=1e-5)


def test_shape_errors_name_the_input_and_the_dim():
    a, b = var("a", ("N", 3)), var("b", ("N", 3))
    f = _lowered(IRModule.from_expr(call("add", a, b)))
    with pytest.raises(ShapeError) as e:
        size_var_values(f, [(2, 3), (4, 3)])
    assert str(e.value) == ("PrimFunc 'fused_add': input 1 ('p1') has 4 in dim 0, but input 0 ('p0') dim 0 gave "
                            "'N' = 2")
    with pytest.raises(ShapeError) as e:
        size_var_values(f, [(2, 3), (2, 5)])
    assert str(e.value) == "PrimFunc 'fused_add': input 1 ('p1') has 5 in dim 1, expected 3 (shape (N, 3))"
    with pytest.raises(ShapeError) as e:
        size_var_values(f, [(2, 3, 1), (2, 3)])
    assert str(e.value) == "PrimFunc 'fused_add': input 0 ('p0') has shape (2, 3, 1), expected rank 2 (N, 3)"
    with pytest.raises(ShapeError) as e:
        scalar_args(f, {})
    assert str(e.value) == "PrimFunc 'fused_add': no value for size variable 'N'"
    g = tir.PrimFunc((tir.Buffer("x", (3,)), tir.Buffer("y", (tir.Var("m"),)), tir.Var("m")), tir.Evaluate(0),
                     {"global_symbol": "g", "num_inputs": 1})
    with pytest.raises(ShapeError) as e:
        output_shapes(g, [(3,)])
    assert str(e.value) == ("PrimFunc 'g': size variable 'm' is not a dimension of any input, so the inputs' "
                            "shapes cannot bind it")


def test_with_symbolic_batch_marks_inputs_outputs_and_batch_reshapes():
    m = with_symbolic_batch(mlp())
    dims = [v.type.tensor_type.shape.dim[0].dim_param for v in (*m.graph.input, *m.graph.output)]
    assert dims == ["N", "N"]
    main = from_onnx(m).main
    assert str(relay.infer_type(IRModule({"main": main})).main.checked_type) == \
        "fn (Tensor[(N, 256), float32]) -> Tensor[(N, 10), float32]"


# ---- the bench models, compiled once, run with N = 1, 3, 8 -----------------------------------------------

def _compile(model, target: str):
    mod = from_onnx(model)
    ct = CompositeTarget(target)
    ctx = PassContext(opt_level=2)
    with LoweringCache().active():
        lowered = lowered_module(mod, ct, ctx)
        built = ctx.run(CodegenPieces(ct), lowered)
    return lowered.mod, built.lib


def _check_batches(model, target: str, batches=(1, 3, 8), rtol=1e-4, atol=1e-5) -> IRModule:
    """Compile ``model`` once for the VM executor and run it with each batch size against ONNX Runtime;
    returns the lowered module."""
    exe = plait.build(from_onnx(model), target, executor="vm")
    vm = VirtualMachine(exe)
    sess = reference_session(model)
    (inp,) = sess.get_inputs()
    for n in batches:
        x = np.random.default_rng(n).standard_normal([n, *inp.shape[1:]]).astype(np.float32)
        got = vm(**{inp.name: x})
        want = sess.run(None, {inp.name: x})
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return exe.ir


@pytest.mark.parametrize("name", sorted(DYNAMIC_MODELS))
def test_bench_models_with_a_symbolic_batch_match_onnxruntime(name):
    mod = _check_batches(DYNAMIC_MODELS[name](), "c")
    funcs = [f for _, f in mod.items() if isinstance(f, PrimFunc)]
    assert funcs and all([v.name for v in size_vars(f)] == ["N"] for f in funcs)
    assert str(mod.main.checked_type).startswith("fn (Tensor[(N, ")


def test_static_inner_loops_keep_their_schedule():
    mod, _ = _compile(DYNAMIC_MODELS["ds_cnn"](), "c")
    conv = mod["fused_nn_conv2d_add_nn_relu_1"]
    loops = {n.loop_var.name: (str(n.extent), n.kind) for n in tir.pre_order(conv.body) if isinstance(n, tir.For)}
    assert loops["T_nn_conv2d_n"] == ("N", "serial")  # the symbolic batch loop, outermost, left alone
    assert loops["p0_pad_3"] == ("7", "vectorized") and loops["p0_copy_3"] == ("5", "vectorized")  # padded input
    assert [p.name for p in conv.params[4:]] == ["p0_pad", "N"] and conv.attrs["dynamic_workspaces"] == 1
    assert workspace_shapes(conv, {"N": 3}) == [((3, 64, 27, 7), "float32")]


@pytest.mark.parametrize("name", ["mlp", "transformer_encoder"])
def test_llvm_target_runs_a_symbolic_batch(name):
    pytest.importorskip("llvmlite")  # the llvm kind's optional dependency (as in test_llvm.py)
    _check_batches(DYNAMIC_MODELS[name](), "llvm")


# ---- import: Resize over (H, W) of an input with a symbolic batch ------------------------------------------

def _resize_model(mode: str, opset: int = 17, sizes: bool = False, batch_scale: float = 1.0):
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.array([], np.float32), "roi")]
    if sizes:  # opset 18: sizes of the given axes only
        inits.append(numpy_helper.from_array(np.array([16, 12], np.int64), "sizes"))
        node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["r"], name="/Resize", mode=mode, axes=[2, 3])
    else:
        inits.append(numpy_helper.from_array(np.array([batch_scale, 1, 2, 2], np.float32), "scales"))
        node = helper.make_node("Resize", ["x", "roi", "scales"], ["r"], name="/Resize", mode=mode)
    g = helper.make_graph([node, helper.make_node("Relu", ["r"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 16, 12])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("mode, opset, sizes", [("linear", 17, False), ("nearest", 17, False), ("cubic", 18, True)])
def test_resize_of_a_symbolic_batch_imports_lowers_and_matches_onnxruntime(mode, opset, sizes):
    model = _resize_model(mode, opset, sizes)
    assert str(relay.infer_type(from_onnx(model)).main.checked_type) == \
        "fn (Tensor[(N, 3, 8, 6), float32]) -> Tensor[(N, 3, 16, 12), float32]"
    _check_batches(model, "c", batches=(1, 3))


def test_resizing_the_symbolic_axis_is_still_refused():
    with pytest.raises(PlaitError) as e:
        from_onnx(_resize_model("nearest", batch_scale=2.0))
    assert str(e.value) == ("model uses 1 unsupported node(s):\n  node '/Resize' (Resize, opset 17): input with a "
                            "scale other than 1 on a symbolic axis must have a static shape, got "
                            "Tensor[(N, 3, 8, 6), float32]")


def _unet_like():
    """A tiny U-Net step with a symbolic batch: Conv (SAME), MaxPool, ConvTranspose (output_shape),
    skip Concat, Resize, Conv."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="/down/Conv", auto_pad="SAME_UPPER", kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"], name="/down/Relu"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="/down/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("ConvTranspose", ["p1", "w2"], ["u1"], name="/up/ConvTranspose", kernel_shape=[3, 3],
                         strides=[2, 2], output_shape=[8, 8]),
        helper.make_node("Concat", ["u1", "x"], ["cat"], name="/up/Concat", axis=1),
        helper.make_node("Resize", ["cat", "", "scales"], ["big"], name="/Resize", mode="linear"),
        helper.make_node("Conv", ["big", "w3"], ["y"], name="/head/Conv", kernel_shape=[1, 1]),
    ]
    inits = [w("w1", 4, 3, 3, 3), w("w2", 4, 2, 3, 3), w("w3", 1, 5, 1, 1),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    g = helper.make_graph(nodes, "unet_like", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1, 16, 16])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_a_unet_like_model_with_a_symbolic_batch_imports_and_matches_onnxruntime():
    model = _unet_like()
    assert str(relay.infer_type(from_onnx(model)).main.checked_type) == \
        "fn (Tensor[(N, 3, 8, 8), float32]) -> Tensor[(N, 1, 16, 16), float32]"
    _check_batches(model, "c", batches=(1, 3, 8))


# ---- data-dependent output shapes: NonZero -------------------------------------------------------------

def _nonzero_inputs(n: int, dtype: str) -> np.ndarray:
    x = np.random.default_rng(n).standard_normal((n, 3, 4))
    x[np.abs(x) < 0.7] = 0
    if dtype == "float32":
        x[0, 0, 0] = np.nan  # numpy counts NaN as non-zero
    return x.astype(dtype)


@pytest.mark.parametrize("dtype, backend", [("float32", "c"), ("int32", "c"), ("bool", "c"), ("float32", "llvm")])
def test_nonzero_compiled_writes_compactly_and_trims(dtype, backend):
    from plait.backends.c.backend import build_c, c_function_names
    from plait.op.data_dependent import nonzero_func
    from plait.lowering.shape_func import trim_outputs

    f = nonzero_func(("N", 3, 4), dtype)
    assert f.attrs["data_dependent"] == (0, 1, 3)
    assert str(f.relay_type) == f"fn (Tensor[(N, 3, 4), {dtype}]) -> Tensor[(3, ?), int64]"
    assert output_shapes(f, [(5, 3, 4)]) == [(3, 60), (1,)]
    if backend == "llvm":
        pytest.importorskip("llvmlite")
        from plait.backends.llvm.backend import build_llvm_funcs

        fn = build_llvm_funcs([f])["nonzero"]
    else:
        fn = build_c([f])[c_function_names([f])[0]]
    for n in (1, 3, 8, 0):
        x = _nonzero_inputs(n, dtype) if n else np.zeros((2, 3, 4), dtype)
        args, outs = prepare_call(f, [x])
        fn(*args)
        (got,) = trim_outputs(f, outs)
        want = np.array(np.nonzero(x), dtype=np.int64).reshape(3, -1)
        assert got.shape == want.shape and np.array_equal(got, want)
        assert int(outs[1][0]) == want.shape[1]


def test_trim_outputs_checks_the_count():
    from plait.op.data_dependent import nonzero_func
    from plait.lowering.shape_func import trim_outputs

    f = nonzero_func((4,), "float32")
    assert trim_outputs(f, [np.arange(4, dtype=np.int64), np.array([2])])[0].tolist() == [[0, 1]]
    with pytest.raises(ShapeError) as e:
        trim_outputs(f, [np.zeros((1, 4), np.int64), np.array([5])])
    assert str(e.value) == "PrimFunc 'nonzero': data-dependent count 5 does not fit output 0 of 4 elements"
    with pytest.raises(PlaitError) as e:
        nonzero_func((), "float32")
    assert str(e.value) == "nonzero: NonZero of a scalar (rank 0) is not supported"
