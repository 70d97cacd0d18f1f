"""ONNX import validation: invalid models are refused with one clear line naming the culprit (verbatim)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from frontend_util import make_model, one_node, tensor_info
from onnx import TensorProto, helper, numpy_helper

from plait.errors import FrontendError, UnsupportedError
from plait.frontend import onnx_budget
from plait.frontend.onnx import from_onnx
from plait.limits import MemoryLimitError
from plait.relay import Call, Constant, post_order, run

F32 = np.float32


def out(name: str = "y") -> onnx.ValueInfoProto:
    return helper.make_empty_tensor_value_info(name)


def relu_model(**kwargs) -> onnx.ModelProto:
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [tensor_info("x", F32, (2, 3))], [out()],
                      **kwargs)


def error(model: onnx.ModelProto, kind: type = FrontendError, **kwargs) -> str:
    with pytest.raises(kind) as e:
        from_onnx(model, **kwargs)
    assert type(e.value) is kind
    return str(e.value)


def node_error(op_type: str, inputs: dict, attrs: dict | None = None, constants=(), n_outputs: int = 1,
               opset: int = 18) -> str:
    model, _ = one_node(op_type, inputs, attrs, n_outputs=n_outputs, opset=opset, constants=constants)
    return error(model)


def f32(*shape):
    return np.arange(int(np.prod(shape)), dtype=F32).reshape(shape)


def i64(*values):
    return np.array(values, np.int64)


# ---- the model: versions and opsets -----------------------------------------------------------------


def test_ir_version_and_opsets():
    m = relu_model()
    m.ClearField("ir_version")
    assert error(m) == "the model has no ir_version"
    m = relu_model()
    m.ir_version = 999
    assert error(m) == f"ir_version 999 is newer than the installed onnx {onnx.__version__} knows " \
                       f"(up to {onnx.IR_VERSION})"
    newest = onnx.defs.onnx_opset_version()
    assert error(relu_model(opset=999)) == (
        f"opset_import: domain 'ai.onnx' version 999 is newer than the installed onnx {onnx.__version__} knows "
        f"(up to {newest})")
    assert error(relu_model(opset=0)) == "opset_import: domain 'ai.onnx' version 0 is not valid (versions start at 1)"
    m = relu_model()
    m.opset_import.append(helper.make_opsetid("ai.onnx", 17))
    assert error(m) == "opset_import: domain 'ai.onnx' is imported twice (versions 18 and 17)"
    m = relu_model()
    del m.opset_import[:]
    assert error(m) == "the model imports no operator set (opset_import is empty)"
    m = relu_model()
    m.graph.node[0].domain = "com.example"
    assert error(m) == "node 'r' (Relu): the model imports no opset for domain 'com.example'"


def test_known_custom_domains_are_not_judged_but_unsupported():
    m = relu_model()
    m.graph.node[0].domain = "com.example"
    m.opset_import.append(helper.make_opsetid("com.example", 1234))
    assert error(m, UnsupportedError) == ("model uses 1 unsupported node(s):\n"
                                          "  node 'r' (Relu, opset 1234): operator domain 'com.example' not supported")


# ---- the graph: outputs, names, dims ---------------------------------------------------------------------


def test_a_graph_without_outputs_is_refused_a_passthrough_is_not():
    x = tensor_info("x", F32, (2, 3))
    assert error(make_model([], [x], [])) == "the graph has no outputs"
    # an output that is an input or an initializer is legitimate (ONNX's checker and ORT accept it)
    mod = from_onnx(make_model([], [x], [tensor_info("x", F32, (2, 3))]))
    v = f32(2, 3)
    np.testing.assert_array_equal(run(mod, {"x": v}), v)
    mod = from_onnx(make_model([], [], [out("w")], {"w": f32(2)}))
    np.testing.assert_array_equal(run(mod, {}), [0, 1])


def test_names_are_unique_and_not_empty():
    x = tensor_info("x", F32, (2, 3))
    node = helper.make_node("Relu", ["x"], ["y"], name="r")
    assert error(make_model([node], [x], [out(), out()])) == "graph output 'y' is listed twice"
    assert error(make_model([node], [x, x], [out()])) == "graph input 'x' is listed twice"
    m = make_model([helper.make_node("Add", ["x", "c"], ["y"])], [x], [out()], {"c": f32(3)})
    m.graph.initializer.append(numpy_helper.from_array(f32(3), "c"))
    assert error(m) == "initializer 'c' is defined twice"
    assert error(make_model([node], [x], [out("")])) == "graph output #0 has no name"


def test_a_value_is_defined_once():
    x = tensor_info("x", F32, (2,))
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")]
    assert error(make_model(nodes, [x], [out()])) == "node 'b' (Neg): output 'y' is already defined"
    nodes = [helper.make_node("Relu", ["x"], ["x"], name="a")]
    assert error(make_model(nodes, [x], [out("x")])) == "node 'a' (Relu): output 'x' is already defined"


def test_negative_and_absurd_dims():
    assert error(make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor_info("x", F32, (2, -3))], [out()])) == (
        "graph input 'x': dimension 1 is -3 (dimensions must be >= 0; a dimension of unknown size is a dim_param)")
    m = relu_model()
    m.graph.output[0].CopyFrom(tensor_info("y", F32, (-1, 3)))
    assert error(m) == ("graph output 'y': dimension 0 is -1 (dimensions must be >= 0; a dimension of unknown size "
                        "is a dim_param)")
    m = relu_model()
    m.graph.value_info.append(tensor_info("y", F32, (2, -5)))
    assert error(m) == ("value_info 'y': dimension 1 is -5 (dimensions must be >= 0; a dimension of unknown size "
                        "is a dim_param)")
    huge = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor_info("x", F32, (1 << 40, 1 << 40))], [out()])
    assert error(huge) == f"graph input 'x': shape [{1 << 40}, {1 << 40}] is absurdly large ({1 << 80} elements)"
    # a symbolic dim is fine
    from_onnx(make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor_info("x", F32, ("n", 3))], [out()]))


def test_initializer_dims_and_data_length():
    x = tensor_info("x", F32, (2, 3))
    add = [helper.make_node("Add", ["x", "c"], ["y"])]

    def with_tensor(dims, raw=None, floats=None):
        t = TensorProto(name="c", data_type=TensorProto.FLOAT, dims=dims)
        if raw is not None:
            t.raw_data = raw
        if floats is not None:
            t.float_data.extend(floats)
        m = make_model(add, [x], [out()])
        m.graph.initializer.append(t)
        return m

    assert error(with_tensor([2, -4])) == "initializer 'c': dimension 1 is -4 (dimensions must be >= 0)"
    assert error(with_tensor([2, 3], raw=b"\0" * 8)) == "initializer 'c': raw_data holds 8 bytes, dims [2, 3] of " \
                                                        "float32 need 24"
    assert error(with_tensor([2, 3], floats=[1.0, 2.0])) == "initializer 'c': float_data holds 2 values, dims [2, 3] " \
                                                            "need 6"
    assert error(with_tensor([1 << 31, 1 << 31])) == (f"initializer 'c': dims [{1 << 31}, {1 << 31}] are absurdly "
                                                      f"large ({1 << 62} elements)")
    t = numpy_helper.from_array(f32(2, 3), "c")
    onnx.external_data_helper.set_external_data(t, "c.bin")
    t.data_location = TensorProto.EXTERNAL
    t.ClearField("raw_data")
    m = make_model(add, [x], [out()])
    m.graph.initializer.append(t)
    assert error(m) == ("initializer 'c': its data is in the external file 'c.bin', which was not read (import the "
                        "model with plait.load_onnx(path) to read the files next to it)")


# ---- nodes against their schema ------------------------------------------------------------------------


def test_inputs_outputs_and_attributes_against_the_schema():
    x = f32(2, 3)
    assert node_error("Relu", {"a": x, "b": x}) == "node 'the_relu' (Relu, opset 18): has 2 inputs, Relu-14 takes 1"
    assert node_error("Gather", {"a": x, "i": i64(0)}, n_outputs=2) == (
        "node 'the_gather' (Gather, opset 18): has 2 outputs, Gather-13 takes 1")
    assert node_error("Concat", {}, {"axis": 0}) == (
        "node 'the_concat' (Concat, opset 18): has 0 inputs, Concat-13 takes at least 1")
    assert node_error("Relu", {"x": x}, {"bogus": 1}) == (
        "node 'the_relu' (Relu, opset 18): 'bogus' is not an attribute of Relu-14")
    assert node_error("Softmax", {"x": x}, {"axis": 1.5}) == (
        "node 'the_softmax' (Softmax, opset 18): attribute 'axis' is float, Softmax-13 wants int")
    assert node_error("Cast", {"x": x}) == "node 'the_cast' (Cast, opset 18): attribute 'to' is required"
    assert node_error("Add", {"a": x, "b": None, "c": x}) == (
        "node 'the_add' (Add, opset 18): has 3 inputs, Add-14 takes 2")
    model, _ = one_node("Conv", {"x": f32(1, 1, 3, 3), "w": f32(1, 1, 1, 1)})
    model.graph.node[0].input[1] = ""
    assert error(model) == "node 'the_conv' (Conv, opset 18): input 1 ('W') is required but empty"
    model, _ = one_node("Softmax", {"x": x})
    model.graph.node[0].attribute.append(onnx.AttributeProto(name="axis", i=1))
    assert error(model) == "node 'the_softmax' (Softmax, opset 18): attribute 'axis' has no type"
    assert node_error("ReduceSum", {"x": x}, {"keepdims": 7}) == (
        "node 'the_reducesum' (ReduceSum, opset 18): attribute 'keepdims' is 7, it must be 0 or 1")


def test_input_dtypes_against_the_type_constraints():
    x = f32(2, 1)
    assert node_error("Squeeze", {"x": x, "axes": np.array([1.0], F32)}, constants=("axes",)) == (
        "node 'the_squeeze' (Squeeze, opset 18): input 1 ('axes') is float32, Squeeze-13 takes int64")
    assert node_error("Add", {"a": x, "b": i64(1)}) == (
        "node 'the_add' (Add, opset 18): input 1 ('B') is int64 but input 0 is float32 (both are T in Add-14)")


def test_subgraph_nodes_are_checked_and_named():
    branch = helper.make_graph([helper.make_node("Relu", ["x", "x"], ["t"], name="inner")], "b", [], [out("t")])
    node = helper.make_node("If", ["c"], ["y"], name="cond", then_branch=branch, else_branch=branch)
    m = make_model([node], [tensor_info("c", bool, ()), tensor_info("x", F32, (2,))], [out()])
    assert error(m) == ("node 'cond' (If, opset 18): subgraph 'else_branch': node 'inner' (Relu, opset 18): has 2 inputs, "
                        "Relu-14 takes 1")


def test_declared_output_dtype_must_match():
    m = relu_model()
    m.graph.output[0].CopyFrom(tensor_info("y", np.int64, (2, 3)))
    assert error(m) == "graph output 'y' is declared int64 but the graph computes float32"


# ---- attributes and constants against shapes (converters) --------------------------------------------------


def test_conv_attributes_against_the_weight():
    x, w = f32(1, 3, 8, 8), f32(4, 3, 3, 3)
    conv = "node 'the_conv' (Conv, opset 18): "

    def conv_error(attrs, weight=w, data=x, bias=None):
        return node_error("Conv", {"x": data, "w": weight, "b": bias}, attrs, constants=("w", "b"))

    assert conv_error({"kernel_shape": [5, 5]}) == conv + "kernel_shape [5, 5] does not match the weight's spatial " \
                                                          "shape [3, 3]"
    assert conv_error({"group": 2}) == conv + "the input has 3 channels, the weight 3 per group x 2 groups"
    assert conv_error({"group": 3}, weight=f32(4, 1, 3, 3)) == conv + "the weight's 4 output channels do not " \
                                                                      "divide into 3 groups"
    assert conv_error({"strides": [0, 1]}) == conv + "attribute 'strides' [0, 1] must have values >= 1"
    assert conv_error({"dilations": [1]}) == conv + "attribute 'dilations' has 1 values, expected 2"
    assert conv_error({"pads": [-1, 0, 0, 0]}) == conv + "attribute 'pads' [-1, 0, 0, 0] must have values >= 0"
    assert conv_error({"auto_pad": "SAME"}) == conv + "auto_pad 'SAME' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID"
    assert conv_error({"auto_pad": "VALID", "pads": [0, 0, 0, 0]}) == conv + "both auto_pad 'VALID' and pads are given"
    assert conv_error({}, bias=f32(3)) == conv + "the bias has shape [3], expected [4]"
    assert conv_error({}, weight=f32(4, 3, 3)) == conv + "the weight has rank 3, expected 4 (as the input)"
    assert conv_error({}, data=f32(1, 3, 2, 2)) == conv + "spatial axis 2 of size 2 (padded 2) is smaller than the " \
                                                          "dilated kernel (3)"
    assert node_error("ConvTranspose", {"x": x, "w": f32(2, 4, 3, 3)}, constants=("w",)) == (
        "node 'the_convtranspose' (ConvTranspose, opset 18): the input has 3 channels, the weight 2")


def test_pooling_attributes():
    x = f32(1, 1, 4, 4)
    assert node_error("MaxPool", {"x": x}, {"kernel_shape": [2, 2], "pads": [2, 2, 2, 2]}) == (
        "node 'the_maxpool' (MaxPool, opset 18): pads [2, 2, 2, 2] must be smaller than kernel_shape [2, 2]")
    assert node_error("AveragePool", {"x": x}, {"kernel_shape": [2]}) == (
        "node 'the_averagepool' (AveragePool, opset 18): kernel_shape has 1 values, the input 2 spatial axes")
    assert node_error("MaxPool", {"x": x}, {"kernel_shape": [0, 2]}) == (
        "node 'the_maxpool' (MaxPool, opset 18): attribute 'kernel_shape' [0, 2] must have values >= 1")
    assert node_error("GlobalAveragePool", {"x": f32(2, 3)}) == (
        "node 'the_globalaveragepool' (GlobalAveragePool, opset 18): the input has rank 2, expected at least 3 "
        "(N, C, spatial axes)")


def test_reshape_targets():
    def reshape_error(shape, allowzero=0):
        return node_error("Reshape", {"x": f32(2, 3), "s": i64(*shape)}, {"allowzero": allowzero}, constants=("s",))

    assert reshape_error([-1, -1]) == "node 'the_reshape' (Reshape, opset 18): shape [-1, -1] has more than one -1"
    assert reshape_error([4, -1]) == "node 'the_reshape' (Reshape, opset 18): cannot reshape 6 elements into shape (4, -1)"
    assert reshape_error([5]) == "node 'the_reshape' (Reshape, opset 18): cannot reshape 6 elements into shape (5,)"
    assert reshape_error([-2, 3]) == "node 'the_reshape' (Reshape, opset 18): shape [-2, 3] has a dimension < -1"
    assert reshape_error([0, -1], allowzero=1) == (
        "node 'the_reshape' (Reshape, opset 18): shape [0, -1] has both 0 and -1 with allowzero=1")


@pytest.mark.parametrize("op_type, inputs, attrs, constants, message", [
    ("Softmax", {"x": f32(2, 3)}, {"axis": 9}, (), "axis 9 is out of range for rank 2"),
    ("Gather", {"x": f32(2, 3), "i": i64(0)}, {"axis": -3}, ("i",), "axis -3 is out of range for rank 2"),
    ("Concat", {"a": f32(2, 3), "b": f32(2, 3)}, {"axis": 2}, (), "axis 2 is out of range for rank 2"),
    ("Flatten", {"x": f32(2, 3)}, {"axis": -3}, (), "axis -3 is out of range for rank 2 (Flatten takes [-2, 2])"),
    ("ArgMax", {"x": f32(2, 3)}, {"axis": 2}, (), "axis 2 is out of range for rank 2"),
    ("CumSum", {"x": f32(2, 3), "a": i64(5)}, {}, ("a",), "axis 5 is out of range for rank 2"),
    ("LayerNormalization", {"x": f32(2, 3), "s": f32(3)}, {"axis": 4}, ("s",), "axis 4 is out of range for rank 2"),
    ("RMSNormalization", {"x": f32(2, 3), "s": f32(3)}, {"axis": 2}, ("s",), "axis 2 is out of range for rank 2"),
    ("Squeeze", {"x": f32(2, 3), "a": i64(1)}, {}, ("a",), "axis 1 has size 3, not 1: it cannot be squeezed"),
    ("Unsqueeze", {"x": f32(2, 3), "a": i64(0, -4)}, {}, ("a",), "axes [0, -4] repeat an axis"),
    ("Transpose", {"x": f32(2, 3)}, {"perm": [0, 0]}, (), "perm [0, 0] is not a permutation of the 2 axes"),
    ("Split", {"x": f32(2, 3), "s": i64(1, 1)}, {"axis": 1}, ("s",), "split [1, 1] does not cut axis 1 of size 3"),
    ("Slice", {"x": f32(2, 3), "b": i64(0), "e": i64(2), "a": i64(1), "st": i64(0)}, {}, ("b", "e", "a", "st"),
     "steps [0] has a 0"),
    ("Tile", {"x": f32(2, 3), "r": i64(1, -1)}, {}, ("r",), "repeats [1, -1] must be 2 values >= 0 (one per axis)"),
    ("Expand", {"x": f32(2, 3), "s": i64(-1, 3)}, {}, ("s",), "shape [-1, 3] has a negative dimension"),
    ("ConstantOfShape", {"s": i64(-2)}, {}, ("s",), "shape [-2] has a negative dimension"),
    ("Range", {"a": np.array(0, np.int64), "b": np.array(5, np.int64), "d": np.array(0, np.int64)}, {},
     ("a", "b", "d"), "delta is 0"),
    ("OneHot", {"i": i64(1, 2), "d": np.array(0, np.int64), "v": np.array([0, 1], F32)}, {}, ("d", "v"),
     "depth is 0, it must be >= 1"),
    ("TopK", {"x": f32(2, 3), "k": i64(4)}, {}, ("k",), "k=4 is out of range for a dimension of 3"),
    ("Pad", {"x": f32(2, 3), "p": i64(1, 1)}, {}, ("p",), "pads has 2 values, expected 4 (2 per axis)"),
    ("DepthToSpace", {"x": f32(1, 3, 2, 2)}, {"blocksize": 2}, (),
     "blocksize 2: the depth 3 must be a multiple of blocksize * blocksize"),
    ("LRN", {"x": f32(1, 2, 2, 2)}, {"size": 0}, (), "size is 0, it must be >= 1"),
    ("Resize", {"x": f32(1, 1, 2, 2), "roi": None, "s": np.array([1, 1, 0, 2], F32)}, {}, ("s",),
     "scales [1.0, 1.0, 0.0, 2.0] must be finite and > 0"),
    ("ReverseSequence", {"x": f32(2, 3), "l": i64(3, 1, 1)}, {"batch_axis": 1, "time_axis": 0}, ("l",),
     "sequence_lens [3, 1, 1] must hold 3 lengths in [0, 2]"),
    ("Mod", {"a": f32(2), "b": f32(2)}, {"fmod": 2}, (), None),
    ("BitShift", {"a": np.array([1], np.uint8), "b": np.array([1], np.uint8)}, {"direction": "UP"}, (),
     "direction 'UP' is neither LEFT nor RIGHT"),
    ("Einsum", {"a": f32(2, 3)}, {"equation": "i1->i"}, (), "equation 'i1->i': subscripts must be letters (and '...')"),
])
def test_attribute_and_constant_ranges(op_type, inputs, attrs, constants, message):
    n_outputs = 2 if op_type in ("Split", "TopK") else 1
    got = node_error(op_type, inputs, attrs, constants=constants, n_outputs=n_outputs,
                     opset=23 if op_type == "RMSNormalization" else 18)
    opset = 23 if op_type == "RMSNormalization" else 18
    prefix = f"node 'the_{op_type.lower()}' ({op_type}, opset {opset}): "
    if message is None:  # a flag attribute checked against the schema before conversion
        message = "attribute 'fmod' is 2, it must be 0 or 1"
    assert got == prefix + message


# ---- constant indices out of range: the interpreter's error, at import ---------------------------------------


@pytest.mark.parametrize("op_type, data, index, attrs, message", [
    ("Gather", f32(2, 3), i64(7), {"axis": 1}, "take: index 7 is out of range for axis 1 of size 3"),
    ("Gather", f32(2, 3), i64(-4), {"axis": 1}, "take: index -4 is out of range for axis 1 of size 3"),
    ("GatherElements", f32(2, 3), np.array([[0], [3]], np.int64), {"axis": 1},
     "gather_elements: index 3 is out of range for axis 1 of size 3"),
    ("GatherND", f32(2, 3), np.array([[1, 5]], np.int64), {}, "gather_nd: index 5 is out of range for axis 1 of size 3"),
    ("ScatterElements", f32(2, 3), np.array([[5]], np.int64), {"axis": 1},
     "index 5 is out of range for axis 1 of size 3"),
    ("ScatterND", f32(2, 3), np.array([[2]], np.int64), {}, "index 2 is out of range for axis 0 of size 2"),
])
def test_constant_indices_out_of_range(op_type, data, index, attrs, message):
    inputs = {"x": data, "i": index}
    if op_type.startswith("Scatter"):
        inputs["u"] = np.ones(index.shape if op_type == "ScatterElements" else index.shape[:-1] + data.shape[1:], F32)
    assert node_error(op_type, inputs, attrs, constants=("i",)) == (
        f"node 'the_{op_type.lower()}' ({op_type}, opset 18): {message}")


def test_gather_of_constant_data_and_index_fails_with_the_interpreters_message():
    assert node_error("Gather", {"x": f32(3), "i": i64(3)}, constants=("x", "i")) == (
        "node 'the_gather' (Gather, opset 18): take: index 3 is out of range for axis 0 of size 3")


# ---- sizes: nothing absurd is materialized at import ----------------------------------------------------------


def test_huge_constants_stay_computations():
    big = i64(1 << 20, 1 << 20)
    model = make_model([helper.make_node("Expand", ["c", "s"], ["y"])], [], [out()], {"c": np.ones(1, F32), "s": big})
    mod = from_onnx(model)  # 4 TiB: not folded, left to run time (where the executor's limit applies)
    assert [n.op_name for n in post_order(mod.main.body) if isinstance(n, Call)] == ["broadcast_to"]
    model = make_model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [out()], {"s": i64(256, 1024)})
    assert isinstance(from_onnx(model).main.body, Constant)  # 1 MiB: folded
    lazy = from_onnx(model, memory_limit="512KiB").main.body  # over the limit: a computation
    assert isinstance(lazy, Call) and lazy.op_name == "broadcast_to"
    np.testing.assert_array_equal(run(from_onnx(model, memory_limit="512KiB"), {}), np.zeros((256, 1024), F32))


def test_absurd_sizes_are_refused():
    model = make_model([helper.make_node("Range", ["a", "b", "d"], ["y"], name="r")], [], [out()],
                       {"a": np.array(0, np.int64), "b": np.array(1 << 40, np.int64), "d": np.array(1, np.int64)})
    assert error(model, MemoryLimitError, memory_limit="1GiB") == (
        "node 'r' (Range, opset 18): Range output (1099511627776 elements) needs 8.0 TiB (8796093022208 bytes), "
        "more than the memory limit of 1.0 GiB; raise it with --max-memory or the config key 'memory.limit'")
    s = i64(1 << 40, 1 << 40, 1 << 40)
    model = make_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="k")], [], [out()], {"s": s})
    assert error(model) == (f"node 'k' (ConstantOfShape, opset 18): output 0 would be Tensor[({1 << 40}, {1 << 40}, "
                            f"{1 << 40}), float32]: absurdly large (2**62 bytes or more)")


def test_unrolling_is_bounded(monkeypatch):
    monkeypatch.setattr(onnx_budget, "MAX_WORK", 50)
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Neg", ["v"], ["v_out"])],
                             "body", [tensor_info("i", np.int64, ()), tensor_info("c", bool, ()),
                                      tensor_info("v", F32, (2,))],
                             [out("c_out"), out("v_out")])
    loop = helper.make_node("Loop", ["m", "", "x"], ["y"], name="loop", body=body)
    model = make_model([loop], [tensor_info("x", F32, (2,))], [out()], {"m": np.array(100, np.int64)})
    assert error(model) == ("node 'loop' (Loop, opset 18): the model expands into more than 50 nodes and calls (loops, "
                            "recurrences and function bodies are unrolled at import)")


def test_long_lists_are_abbreviated_in_messages():
    assert node_error("Tile", {"x": f32(2, 3), "r": np.ones(100000, np.int64)}, constants=("r",)) == (
        "node 'the_tile' (Tile, opset 18): repeats [1, 1, 1, 1, 1, 1, 1, 1, ... (100000 values)] must be 2 values >= 0 "
        "(one per axis)")


def test_declared_output_kind_and_scalar_inputs():
    m = relu_model()
    m.graph.output[0].CopyFrom(helper.make_tensor_sequence_value_info("y", TensorProto.FLOAT, None))
    assert error(m) == "graph output 'y' is declared a sequence but the graph computes a tensor"
    assert node_error("Dropout", {"x": f32(2), "r": np.array([0.5], F32)}, constants=("r",)) == (
        "node 'the_dropout' (Dropout, opset 18): ratio must be a scalar, got rank 1")
