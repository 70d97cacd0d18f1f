"""ONNX import: inputs and types (symbolic dims), names and meta, folding, errors (verbatim)."""

from __future__ import annotations

import numpy as np
import pytest
from frontend_util import make_model, tensor_info
from onnx import TensorProto, helper

import plait
from plait.errors import FrontendError, UnsupportedError
from plait.frontend import onnx_registry
from plait.frontend.onnx import from_onnx, load_onnx
from plait.ir import TensorType
from plait.ir.types import TupleType
from plait.relay import Call, Constant, Var, post_order, run
from plait.testing import onnx_models


def calls(mod):
    return [n for n in post_order(mod.main.body) if isinstance(n, Call)]


def op_names(mod):
    return [c.op_name for c in calls(mod)]


# ---- inputs, outputs, types -------------------------------------------------------------------


def test_inputs_keep_onnx_names_and_symbolic_dims():
    a = helper.make_tensor_value_info("input:0", TensorProto.FLOAT, ["batch size", 3])
    b = helper.make_tensor_value_info("x.1", TensorProto.FLOAT, [None, "N"])
    c = helper.make_tensor_value_info("2d", TensorProto.INT64, ["2d", "batch-size"])
    w = helper.make_tensor_value_info("w", TensorProto.FLOAT, [3])
    nodes = [helper.make_node("Add", ["input:0", "w"], ["y"], name="add"),
             helper.make_node("Relu", ["x.1"], ["z"], name="relu"),
             helper.make_node("Neg", ["2d"], ["n"], name="neg")]
    outs = [helper.make_empty_tensor_value_info(o) for o in ("y", "z", "n")]
    # "w" is both a graph input and an initializer (old exporters): it is a constant
    model = make_model(nodes, [a, w, b, c], outs, {"w": np.ones(3, np.float32)})
    mod = from_onnx(model)
    params = mod.main.params
    assert [p.name_hint for p in params] == ["input:0", "x.1", "2d"]
    assert [p.checked_type for p in params] == [
        TensorType(("batch_size", 3), "float32"), TensorType(("?", "N"), "float32"),
        TensorType(("_2d", "batch_size_2"), "int64")]
    assert mod.attrs["input_names"] == ("input:0", "x.1", "2d")
    assert mod.attrs["output_names"] == ("y", "z", "n")
    assert mod.main.ret_type == TupleType((TensorType(("batch_size", 3)), TensorType(("?", "N")),
                                           TensorType(("_2d", "batch_size_2"), "int64")))
    add = next(c for c in calls(mod) if c.op_name == "add")
    assert isinstance(add.args[1], Constant)
    np.testing.assert_array_equal(add.args[1].data, np.ones(3, np.float32))


def test_single_output_is_not_a_tuple_and_lazy_exports():
    mod = plait.from_onnx(onnx_models.mlp(sizes=(4, 8, 2)))
    assert mod.main.ret_type == TensorType((1, 2))
    assert plait.load_onnx is load_onnx


def test_shape_overrides_fix_dims():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [x], [helper.make_empty_tensor_value_info("y")])
    mod = from_onnx(model, shape_overrides={"x": (2, 4)})
    assert mod.main.params[0].checked_type == TensorType((2, 4))
    with pytest.raises(FrontendError) as e:
        from_onnx(model, shape_overrides={"z": (2, 4)})
    assert str(e.value) == "shape_overrides: unknown input 'z' (inputs are: x)"


# ---- names ----------------------------------------------------------------------------------


def test_every_call_carries_node_name_and_op_type():
    x = tensor_info("x", np.float32, (2, 4))
    nodes = [helper.make_node("Gemm", ["x", "w", "c"], ["g"], name="fc", alpha=2.0, beta=0.5),
             helper.make_node("Relu", ["g"], ["r"]),  # no name: Relu_1
             helper.make_node("Softmax", ["r"], ["y"], name="")]
    model = make_model(nodes, [x], [helper.make_empty_tensor_value_info("y")],
                       {"w": np.ones((4, 3), np.float32), "c": np.ones(3, np.float32)})
    mod = from_onnx(model)
    metas = [(c.op_name, c.meta["name"], c.meta["op_type"]) for c in calls(mod)]
    assert metas == [("nn.dense", "fc", "Gemm"), ("multiply", "fc", "Gemm"), ("add", "fc", "Gemm"),
                     ("nn.relu", "Relu_1", "Relu"), ("nn.softmax", "Softmax_2", "Softmax")]


def test_identity_and_dropout_vanish():
    x = tensor_info("x", np.float32, (2, 3))
    nodes = [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Dropout", ["a"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]
    mod = from_onnx(make_model(nodes, [x], [helper.make_empty_tensor_value_info("y")]))
    assert op_names(mod) == ["nn.relu"]
    assert isinstance(calls(mod)[0].args[0], Var)


# ---- folding --------------------------------------------------------------------------------


def test_shape_subgraph_on_static_shapes_folds():
    x = tensor_info("x", np.float32, (2, 3, 4))
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Shape", ["r"], ["s"]),  # of a computed tensor: still static
             helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
             helper.make_node("Concat", ["b1", "rest"], ["target"], axis=0),
             helper.make_node("Cast", ["target"], ["t32"], to=TensorProto.INT32),
             helper.make_node("Cast", ["t32"], ["t64"], to=TensorProto.INT64),
             helper.make_node("Reshape", ["r", "t64"], ["y"], name="reshape")]
    inits = {"i0": np.array(0, np.int64), "ax": np.array([0], np.int64), "rest": np.array([-1], np.int64)}
    mod = from_onnx(make_model(nodes, [x], [helper.make_empty_tensor_value_info("y")], inits))
    assert op_names(mod) == ["nn.relu", "reshape"]
    assert calls(mod)[1].attrs["newshape"] == (2, -1)
    assert mod.main.ret_type == TensorType((2, 12))


def test_constant_nodes_fold_with_the_operator_references():
    x = tensor_info("x", np.float32, (3,))
    nodes = [helper.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0, 4.0]),
             helper.make_node("Sqrt", ["c"], ["s"]),
             helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
             helper.make_node("Add", ["s", "r"], ["k"]),
             helper.make_node("Mul", ["x", "k"], ["y"], name="mul")]
    inits = {"start": np.array(0.0, np.float32), "limit": np.array(3.0, np.float32),
             "delta": np.array(1.0, np.float32)}
    mod = from_onnx(make_model(nodes, [x], [helper.make_empty_tensor_value_info("y")], inits))
    (mul,) = calls(mod)
    np.testing.assert_allclose(mul.args[1].data, [1.0, np.sqrt(2) + 1, 4.0], rtol=1e-6)


def test_symbolic_shape_feeds_reshape_and_expand():
    x = tensor_info("x", np.float32, ("batch", 6))
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "z", "one"], ["b"]),
             helper.make_node("Concat", ["b", "hw"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
             helper.make_node("Unsqueeze", ["r", "one"], ["r4"]),
             helper.make_node("Concat", ["b", "full"], ["big"], axis=0),
             helper.make_node("Expand", ["r4", "big"], ["y"], name="expand")]
    inits = {"z": np.array([0], np.int64), "one": np.array([1], np.int64), "hw": np.array([2, 3], np.int64),
             "full": np.array([4, 2, 3], np.int64)}
    mod = from_onnx(make_model(nodes, [x], [helper.make_empty_tensor_value_info("y")], inits))
    reshape = next(c for c in calls(mod) if c.op_name == "reshape")
    assert reshape.attrs["newshape"] == (0, 2, 3)
    expand = next(c for c in calls(mod) if c.op_name == "broadcast_to")
    assert expand.attrs["shape"] == (1, 4, 2, 3)
    assert mod.main.ret_type == TensorType(("batch", 4, 2, 3))
    xv = np.arange(30, dtype=np.float32).reshape(5, 6)
    np.testing.assert_array_equal(run(mod, {"x": xv}), np.broadcast_to(xv.reshape(5, 1, 2, 3), (5, 4, 2, 3)))


def test_symbolic_shape_used_as_data_is_unsupported():
    x = tensor_info("x", np.float32, ("batch", 6))
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Cast", ["s"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Relu", ["f"], ["y"], name="relu")]
    with pytest.raises(UnsupportedError) as e:
        from_onnx(make_model(nodes, [x], [helper.make_empty_tensor_value_info("y")]))
    assert str(e.value) == (
        "model uses 1 unsupported node(s):\n  node 'Cast_1' (Cast, opset 18): cast of a symbolic shape to float32")


def test_transformer_symbolic_batch_matches_static():
    mod = from_onnx(onnx_models.transformer_encoder(batch="batch"))
    static = from_onnx(onnx_models.transformer_encoder(batch=2))
    x = np.random.default_rng(0).standard_normal((2, 32, 64)).astype(np.float32)
    np.testing.assert_allclose(run(mod, {"x": x}), run(static, {"x": x}), rtol=0, atol=1e-6)
    assert "concatenate" not in op_names(mod) and "take" not in op_names(mod)


# ---- functions ------------------------------------------------------------------------------


def test_operator_without_converter_expands_its_function_body():
    x = tensor_info("x", np.float32, (2, 3, 4))
    model = make_model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"], name="mvn", axes=[0, 2])],
                       [x], [helper.make_empty_tensor_value_info("y")])
    mod = from_onnx(model)
    assert {(c.meta["name"], c.meta["op_type"]) for c in calls(mod)} == {("mvn", "MeanVarianceNormalization")}
    xv = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    mean = xv.mean(axis=(0, 2), keepdims=True)
    std = np.sqrt(((xv - mean) ** 2).mean(axis=(0, 2), keepdims=True))
    np.testing.assert_allclose(run(mod, {"x": xv}), (xv - mean) / (std + 1e-9), rtol=1e-5, atol=1e-6)


def test_model_local_function_is_inlined():
    fn = helper.make_function("custom", "AddTwice", ["a", "b"], ["c"],
                              [helper.make_node("Add", ["a", "b"], ["t"]), helper.make_node("Add", ["t", "b"], ["c"])],
                              [helper.make_opsetid("", 18)])
    x = tensor_info("x", np.float32, (3,))
    node = helper.make_node("AddTwice", ["x", "x"], ["y"], name="twice", domain="custom")
    graph = helper.make_graph([node], "g", [x], [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("custom", 1)],
                              functions=[fn])
    mod = from_onnx(model)
    assert op_names(mod) == ["add", "add"]
    assert all(c.meta["name"] == "twice" and c.meta["op_type"] == "AddTwice" for c in calls(mod))
    np.testing.assert_array_equal(run(mod, {"x": np.array([1, 2, 3], np.float32)}), [3, 6, 9])


# ---- errors ---------------------------------------------------------------------------------


def test_unsupported_nodes_are_all_listed():
    x = tensor_info("x", np.float32, (1, 2, 4, 4))
    m = tensor_info("m", np.float32, (3, 3))
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="ok"),
             helper.make_node("Resize", ["r", "", "scales"], ["z"], name="n2", mode="foo"),
             helper.make_node("Det", ["z"], ["d"], name="n3"),  # after an unsupported node: still listed
             helper.make_node("Relu", ["d"], ["e"], name="fine"),  # may be fine: not listed
             helper.make_node("Einsum", ["m"], ["f"], name="n4", equation="ii->i"),
             helper.make_node("RandomNormalLike", ["x"], ["g"], name="")]
    inits = {"scales": np.array([1, 1, 2, 2], np.float32)}
    outs = [helper.make_empty_tensor_value_info(n) for n in ("e", "f", "g")]
    with pytest.raises(UnsupportedError) as e:
        from_onnx(make_model(nodes, [x, m], outs, inits, opset=17))
    assert str(e.value) == (
        "model uses 4 unsupported node(s):\n"
        "  node 'n2' (Resize, opset 17): mode 'foo' not supported\n"
        "  node 'n3' (Det, opset 17): operator not supported\n"
        "  node 'n4' (Einsum, opset 17): equation 'ii->i': repeated subscripts (diagonals) not supported\n"
        "  node 'RandomNormalLike_5' (RandomNormalLike, opset 17): operator not supported")
    assert e.value.nodes[0] == ("n2", "Resize", 17, "mode 'foo' not supported")
    assert isinstance(e.value, FrontendError)


def test_attribute_inputs_must_be_constants():
    x, s = tensor_info("x", np.float32, (2, 3)), tensor_info("s", np.int64, (2,))
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], name="r")]
    with pytest.raises(UnsupportedError) as e:
        from_onnx(make_model(nodes, [x, s], [helper.make_empty_tensor_value_info("y")]))
    assert str(e.value) == ("model uses 1 unsupported node(s):\n"
                            "  node 'r' (Reshape, opset 18): input 'shape' must be a constant (it is computed at run time)")
    assert e.value.needs_constant == ["s"]


def test_unsupported_dtypes_attributes_and_domains():
    x = helper.make_tensor_value_info("x", TensorProto.BFLOAT16, (2,))
    y = tensor_info("y", np.float32, (2,))
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Cast", ["y"], ["b"], name="c8", to=TensorProto.FLOAT8E4M3FN),
             helper.make_node("FusedGemm", ["y"], ["d"], name="ms", domain="com.microsoft")]
    outs = [helper.make_empty_tensor_value_info(n) for n in "abd"]
    model = make_model(nodes, [x, y], outs, check=False)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(UnsupportedError) as e:
        from_onnx(model)
    assert str(e.value) == (
        "model uses 3 unsupported node(s):\n"
        "  input 'x': dtype 'bfloat16' not supported\n"
        "  node 'c8' (Cast, opset 18): dtype 'float8e4m3fn' not supported\n"
        "  node 'ms' (FusedGemm, opset 1): operator domain 'com.microsoft' not supported")


def test_undefined_input_names_the_node():
    x = tensor_info("x", np.float32, (2,))
    nodes = [helper.make_node("Add", ["x", "nope"], ["y"], name="add1")]
    with pytest.raises(FrontendError) as e:
        from_onnx(make_model(nodes, [x], [helper.make_empty_tensor_value_info("y")], check=False))
    assert str(e.value) == "node 'add1' (Add): input 'nope' is not defined by any graph input, initializer or node"


def test_undefined_output_and_cycles():
    x = tensor_info("x", np.float32, (2,))
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [x], [helper.make_empty_tensor_value_info("z")],
                       check=False)
    with pytest.raises(FrontendError) as e:
        from_onnx(model)
    assert str(e.value) == "graph output 'z' is not defined by any node, input or initializer"
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"], name="second")]
    with pytest.raises(FrontendError) as e:
        from_onnx(make_model(nodes, [x], [helper.make_empty_tensor_value_info("b")], check=False))
    assert str(e.value) == "node 'first' (Add): the graph has a cycle"


def test_nodes_out_of_order_are_sorted():
    x = tensor_info("x", np.float32, (2,))
    nodes = [helper.make_node("Neg", ["a"], ["y"], name="second"), helper.make_node("Relu", ["x"], ["a"], name="first")]
    mod = from_onnx(make_model(nodes, [x], [helper.make_empty_tensor_value_info("y")], check=False))
    assert op_names(mod) == ["nn.relu", "negative"]


def test_converter_failure_is_wrapped(monkeypatch):
    def boom(cx):
        raise ZeroDivisionError("boom")

    conv = onnx_registry.CONVERTERS["Relu"]
    monkeypatch.setitem(onnx_registry.CONVERTERS, "Relu", onnx_registry.Converter("Relu", boom, conv.attrs))
    x = tensor_info("x", np.float32, (2,))
    with pytest.raises(FrontendError) as e:
        from_onnx(make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [x],
                             [helper.make_empty_tensor_value_info("y")]))
    assert str(e.value) == "node 'r' (Relu, opset 18): internal error while converting: ZeroDivisionError: boom"


def test_corrupt_initializer_names_it():
    t = helper.make_tensor("w", TensorProto.FLOAT, [4], b"\x00" * 16, raw=True)
    t.raw_data = b"\x00" * 7
    x = tensor_info("x", np.float32, (4,))
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [x], [helper.make_empty_tensor_value_info("y")])
    model.graph.initializer.append(t)
    with pytest.raises(FrontendError) as e:
        from_onnx(model)
    assert str(e.value) == "initializer 'w': raw_data holds 7 bytes, dims [4] of float32 need 16"


def test_not_a_model():
    with pytest.raises(FrontendError) as e:
        from_onnx(b"bytes")
    assert str(e.value) == "from_onnx expects an onnx.ModelProto, got bytes"


@pytest.fixture
def model_bytes():
    return onnx_models.mlp(sizes=(4, 8, 2)).SerializeToString()


@pytest.mark.parametrize("kind, reason", [
    ("garbage", "not a valid ONNX protobuf file (truncated, or not ONNX)"),
    ("truncated", "not a valid ONNX protobuf file (truncated, or not ONNX)"),
    ("empty", "the file is empty"),
    ("missing", "No such file or directory"),
    ("directory", "Is a directory"),
])
def test_malformed_files(tmp_path, model_bytes, kind, reason):
    path = tmp_path / "m.onnx"
    if kind == "garbage":
        path.write_bytes(b"\x08\x07not a protobuf at all\xff\xff")
    elif kind == "truncated":
        path.write_bytes(model_bytes[:len(model_bytes) // 2])
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "directory":
        path.mkdir()
    with pytest.raises(FrontendError) as e:
        load_onnx(path)
    assert str(e.value) == f"cannot load ONNX model '{path}': {reason}"


def test_load_onnx_reads_a_file(tmp_path, model_bytes):
    path = tmp_path / "m.onnx"
    path.write_bytes(model_bytes)
    mod = load_onnx(str(path))
    assert mod.main.ret_type == TensorType((1, 2))


def test_torch_style_expand_of_a_symbolic_shape():
    # Expand(x, Where(Equal(shape, -1), ones, shape)), as torch exports x.expand(-1, 4, 3)
    x = tensor_info("x", np.float32, ("n", 1, 3))
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["n0"], axis=0),
             helper.make_node("Unsqueeze", ["n0", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "rest"], ["want"], axis=0),
             helper.make_node("Equal", ["want", "minus"], ["eq"]),
             helper.make_node("Where", ["eq", "ones", "want"], ["target"]),
             helper.make_node("Expand", ["x", "target"], ["y"], name="expand")]
    inits = {"i0": np.array(0, np.int64), "ax": np.array([0], np.int64), "rest": np.array([4, 3], np.int64),
             "minus": np.array([-1, -1, -1], np.int64), "ones": np.ones(3, np.int64)}
    mod = from_onnx(make_model(nodes, [x], [helper.make_empty_tensor_value_info("y")], inits))
    assert op_names(mod) == ["broadcast_to"]
    assert calls(mod)[0].attrs["shape"] == (1, 4, 3)
    assert mod.main.ret_type == TensorType(("n", 4, 3))
