"""The VM executor (static shapes): bit-identical to the Graph executor on every bundled model, close to
ONNX Runtime, a composite target with copies between pieces, the text dump, the refusals."""

import numpy as np
import pytest

import plait
from plait import relay
from plait.errors import PlaitError
from plait.executor import GraphModule, VirtualMachine, VMExecutable
from plait.executor.vm.codegen import vm_codegen
from plait.executor.vm.shapes import output_shapes
from plait.frontend.onnx import from_onnx
from plait.relay.module import IRModule
from plait.testing import onnx_models
from plait.testing.ort_reference import reference_session

from tests.executor.test_models import feeds_for


@pytest.fixture(scope="module")
def cc_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


@pytest.mark.parametrize("name", sorted(onnx_models.MODELS))
def test_vm_equals_graph_executor_and_ort(name, cc_cache):
    model = onnx_models.MODELS[name]()
    mod = from_onnx(model)
    exe = plait.build(mod, target="c", executor="vm", config={"cc.cache_dir": cc_cache})
    assert isinstance(exe, VMExecutable)
    gm = GraphModule(plait.build(from_onnx(model), target="c", config={"cc.cache_dir": cc_cache}))
    vm = VirtualMachine(exe)
    assert vm.output_names == [o.name for o in model.graph.output] == gm.output_names
    sess = reference_session(model)
    for seed in (0, 1):
        feeds = feeds_for(model, seed)
        got = vm(**feeds)
        want = gm(**feeds)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.array_equal(g, w)
        for g, r in zip(got, sess.run(None, feeds)):
            np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4)


def test_text_dump_of_a_small_mlp(cc_cache):
    exe = plait.build(from_onnx(onnx_models.mlp(sizes=(8, 6, 4))), target="c", executor="vm",
                      config={"cc.cache_dir": cc_cache})
    assert exe.text() == """\
# vm: 17 instructions, 9 registers, 4 constants
pool 0 workspace_c bytes 160 align 16
input %0 x: float32[1, 8]
const %1 p0: float32[6, 8]
const %2 p1: float32[6]
alloc_storage s3 pool 0 offset 0 bytes 24
alloc_tensor %3 s3: float32[1, 6]
const %4 p2: float32[4, 6]
const %5 p3: float32[4]
alloc_storage s6 pool 0 offset 128 bytes 16
alloc_tensor %6 s6: float32[1, 4]
alloc_storage s7 pool 0 offset 144 bytes 16
alloc_tensor %7 s7: float32[1, 4]
alloc_storage s8 pool 0 offset 0 bytes 128
alloc_tensor %8 s8: float32[32]
call %3 = fused_nn_dense_add_nn_relu(%0, %1, %2)  # fused_nn_dense_add_nn_relu @c
call %6 = fused_nn_dense_add(%3, %4, %5)  # fused_nn_dense_add @c
call %7 = fused_nn_softmax(%6) ws %8  # fused_nn_softmax @c
ret %7
"""
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    (y,) = VirtualMachine(exe)(x)
    from plait.relay.interpreter import run
    want = run(from_onnx(onnx_models.mlp(sizes=(8, 6, 4))), {"x": x})
    np.testing.assert_allclose(y, np.asarray(want), rtol=1e-5, atol=1e-6)


def test_composite_target_with_copies_runs(cc_cache):
    model = onnx_models.ds_cnn()
    kw = dict(target="host: c; acc: c -mcpu=cortex-m7f", place="Conv=acc",
              config={"c.host_simulation": True, "cc.cache_dir": cc_cache})
    exe = plait.build(from_onnx(model), executor="vm", **kw)
    ops = [i.op for i in exe.instructions]
    assert "copy" in ops
    assert any(line.startswith("copy ") and "host->acc" in line for line in exe.text().splitlines())
    gm = GraphModule(plait.build(from_onnx(model), **kw))
    feeds = feeds_for(model, 0)
    for g, w in zip(VirtualMachine(exe)(**feeds), gm(**feeds)):
        assert np.array_equal(g, w)


def test_symbolic_dims_are_checked_between_inputs_and_bad_inputs_are_refused(cc_cache):
    x, y = relay.var("x", ("n", 3)), relay.var("y", ("n", 5))
    exe = vm_codegen(IRModule({"main": relay.Function((x, y), relay.Tuple((y, x)))}), lib=None)
    vm = VirtualMachine(exe)
    a, b = np.ones((2, 3), np.float32), np.full((2, 5), 2, np.float32)
    got = vm(a, b)
    assert np.array_equal(got[0], b) and np.array_equal(got[1], a)
    with pytest.raises(PlaitError) as e:
        vm(a, np.zeros((4, 5), np.float32))
    assert str(e.value) == "input 'y': dimension 0 (n) is 4, but input 'x' has n = 2"
    with pytest.raises(PlaitError) as e:
        vm(a, np.zeros((2, 6), np.float32))
    assert str(e.value) == "input 'y': dimension 1 is 6, expected 5 (expected shape (n, 5), got (2, 6))"
    with pytest.raises(PlaitError) as e:
        vm(a, np.zeros((2, 5, 1), np.float32))
    assert str(e.value) == "input 'y': expected 2 dimensions (n, 5), got 3 (2, 5, 1)"
    exe = plait.build(from_onnx(onnx_models.mlp(sizes=(8, 6, 4))), target="c", executor="vm",
                      config={"cc.cache_dir": cc_cache})
    vm = VirtualMachine(exe)
    with pytest.raises(PlaitError) as e:
        vm(x=np.zeros((2, 8), np.float32))
    assert str(e.value) == "input 'x': dimension 0 is 2, expected 1 (expected shape (1, 8), got (2, 8))"
    with pytest.raises(PlaitError) as e:
        vm(y=np.zeros((1, 8), np.float32))
    assert str(e.value) == "the model has no input 'y' (inputs: x)"
    with pytest.raises(PlaitError) as e:
        VirtualMachine("exe")
    assert str(e.value) == "VirtualMachine needs a VMExecutable (from plait.build(..., executor='vm')), got str"


def test_a_symbolic_result_without_size_variables_is_refused():
    from plait.tir.expr import Var, const
    from plait.tir.stmt import Buffer, Evaluate, PrimFunc

    n = Var("n", "int64")
    f = PrimFunc((Buffer("a", (4,), "float32"), Buffer("b", (n, 4), "float32")), Evaluate(const(0, "int32")),
                 {"global_symbol": "f", "num_inputs": 1})
    with pytest.raises(PlaitError) as e:
        output_shapes(f, [(4,)])
    assert str(e.value) == ("the VM executor: function 'f' returns Tensor[(n, 4), float32] but takes no size "
                            "variables to compute that shape from")
    g = PrimFunc((*f.params, n), f.body, f.attrs)  # n a size variable, bound from no input: the shape functions say so
    with pytest.raises(PlaitError) as e:
        output_shapes(g, [(4,)])
    assert str(e.value) == ("PrimFunc 'f': size variable 'n' is not a dimension of any input, so the inputs' shapes "
                            "cannot bind it")
