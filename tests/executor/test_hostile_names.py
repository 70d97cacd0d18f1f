"""Names from a model never reach generated C unsanitized: quotes, comment terminators, newlines,
trigraphs and C keywords in node, tensor and graph names still compile and give the right numbers."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import plait
from plait.executor.graph.module import GraphModule
from plait.testing.ort_reference import reference_run

HOSTILE = ['in"put */ x', "int", "return", "main", 'a\nb */ /* "c"', "??/ trigraph", "x;}{ exit(1);", "2nd"]


def hostile_model():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w */ int")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "return")
    nodes = [
        helper.make_node("Conv", [HOSTILE[0], "w */ int", "return"], ["conv out\n*/"], name=HOSTILE[1],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv out\n*/"], ["main"], name=HOSTILE[4]),
        helper.make_node("Sigmoid", ["main"], ["sig"], name=HOSTILE[5]),
        helper.make_node("Add", ["sig", "main"], ['y"'], name=HOSTILE[6]),
        helper.make_node("ReduceMean", ['y"'], ["mean"], name=HOSTILE[7], axes=[2, 3], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, 'graph */ "name"',
        [helper.make_tensor_value_info(HOSTILE[0], TensorProto.FLOAT, [1, 3, 6, 6])],
        [helper.make_tensor_value_info("mean", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info('y"', TensorProto.FLOAT, [1, 4, 6, 6])],
        [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def test_hostile_names_compile_and_match_ort(tmp_path):
    model = hostile_model()
    mod = plait.from_onnx(model)
    art = plait.build(mod, target="c", config={"cc.cache_dir": str(tmp_path)})
    gm = GraphModule(art)
    x = np.random.default_rng(1).standard_normal((1, 3, 6, 6)).astype(np.float32)
    got = gm(**{HOSTILE[0]: x})
    expected = reference_run(model, {HOSTILE[0]: x})
    assert len(got) == 2
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=0, atol=1e-5)
    from plait.backends.c.backend import codegen_c
    from plait.tir import PrimFunc

    funcs = [f for f in art.ir.values() if isinstance(f, PrimFunc)]
    src = codegen_c(funcs, "c").full_source()
    assert len(funcs) >= 2 and "int32_t " in src
    for bad in ("*/ /*", "exit(1)", "??/"):
        assert bad not in src
