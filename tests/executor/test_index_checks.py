"""Gather, GatherElements and GatherND with indices that arrive at run time: in range (negative ones
too) the compiled model matches ONNX Runtime; out of range, it stops with the same kind of clean
error the reference interpreter and ONNX Runtime give, on every target that compiles code."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import plait
from plait.errors import PlaitError
from plait.executor import GraphModule
from plait import tir
from plait.frontend.onnx import from_onnx
from plait.ir import status
from plait.relay import run as relay_run
from plait.testing.ort_reference import reference_run

STOPPED = f"stopped: {status.MESSAGES[status.INDEX_OUT_OF_RANGE]} (status 1)"


def _model(op: str, data_shape, idx_shape, out_shape, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, ["data", "idx"], ["y"], name="/gather", **attrs)
    relu = helper.make_node("Relu", ["y"], ["out"], name="/relu")  # a consumer the gather fuses into
    graph = helper.make_graph(
        [node, relu], "g",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, data_shape),
         helper.make_tensor_value_info("idx", TensorProto.INT64, idx_shape)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


CASES = {
    "Gather": (_model("Gather", [4, 5], [2, 3], [4, 2, 3], axis=1),
               np.array([[0, -1, 4], [-5, 2, 3]]), np.array([[0, 5, 1], [1, 1, 1]])),
    "GatherElements": (_model("GatherElements", [3, 4], [2, 4], [2, 4], axis=0),
                       np.array([[0, -1, 2, -3], [2, 1, 0, -2]]), np.array([[0, 1, 2, -4], [0, 0, 0, 0]])),
    "GatherND": (_model("GatherND", [3, 4], [2, 2], [2]),
                 np.array([[2, -4], [-3, 3]]), np.array([[2, 3], [0, 4]])),
}


def _ort(model, feeds):
    return reference_run(model, feeds)


@pytest.fixture(scope="module")
def cc_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize("op", sorted(CASES))
def test_compiled_gathers_check_their_indices(op, target, cc_cache):
    model, good, bad = CASES[op]
    data = np.random.default_rng(3).standard_normal([d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
                                                    ).astype(np.float32)
    gm = GraphModule(plait.build(from_onnx(model), target=target, config={"cc.cache_dir": cc_cache}))
    (got,) = gm(data=data, idx=good)
    np.testing.assert_array_equal(got, _ort(model, {"data": data, "idx": good})[0])
    with pytest.raises(PlaitError) as e:
        gm(data=data, idx=bad)
    func = next(n["func"] for n in gm.artifact.graph["nodes"] if n["op"] == "call")
    assert str(e.value) == f"graph node '{func}': runtime function '{func}' {STOPPED}"
    with pytest.raises(Exception):  # ONNX Runtime refuses these indices too
        _ort(model, {"data": data, "idx": bad})
    (again,) = gm(data=data, idx=good)  # the module is still usable
    np.testing.assert_array_equal(again, got)


def test_the_interpreter_refuses_the_same_indices():
    model, _, bad = CASES["Gather"]
    mod = from_onnx(model)
    with pytest.raises(PlaitError) as e:
        relay_run(mod, {"data": np.zeros((4, 5), np.float32), "idx": bad})
    assert str(e.value) == "take: index 5 is out of range for axis 1 of size 5"


def test_the_check_runs_in_its_own_serial_loop_before_the_gather(cc_cache):
    model, _, _ = CASES["Gather"]
    art = plait.build(from_onnx(model), target="c", config={"cc.cache_dir": cc_cache})
    (func,) = [art.ir[n] for n in art.ir if isinstance(art.ir[n], tir.PrimFunc)]
    text = tir.print_prim_func(func)
    lines = text.splitlines()
    first_loop = next(k for k, line in enumerate(lines) if " in " in line)
    assert lines[first_loop].endswith('in serial(0, 2, annotations={"op": "take", "pattern": "check", '
                                      '"stage": "T_take_check0"}):'), text  # over the indices, serial
    assert lines[first_loop + 2].strip().startswith("assert p1[") and lines[first_loop + 2].endswith(" < 5, 1")
    assert text.index("assert ") < text.index("T_nn_relu[")  # before anything is read with the indices
