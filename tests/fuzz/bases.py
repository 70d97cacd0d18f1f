"""Small valid ONNX models the fuzz generators start from, and valid inputs for them.

Each base is tiny (a few hundred bytes of weights) so that compiling it with the ``c`` target takes
well under a second, and covers one family of operators the hostile cases then break:

    mlp       Gemm (transB) + Relu + Gemm + Softmax           float32
    conv      Conv + Relu + MaxPool + Flatten + Gemm          float32
    intops    Gather / Reshape / Concat / Cast / Div / Add    int64 indices, int32 and float32 data
    shapes    Shape / Gather / Unsqueeze / Concat / Reshape / Transpose / Slice

Weights come from a seeded numpy generator: the same seed gives the same model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


@dataclass
class Base:
    """A base model and how to make valid inputs for it."""

    name: str
    model: onnx.ModelProto
    inputs: Callable[[np.random.Generator], dict[str, np.ndarray]]


def finish(nodes: list, name: str, inputs: list, outputs: list, inits: list, opset: int = OPSET) -> onnx.ModelProto:
    """A checked model of ``nodes`` (the helper every base and most mutations use)."""
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="plait.fuzz")
    model.ir_version = 8
    return model


def _w(rng: np.random.Generator, shape: tuple[int, ...], name: str) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)


def _vi(name: str, dtype: int, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _normal(name: str, shape: tuple[int, ...]) -> Callable[[np.random.Generator], dict[str, np.ndarray]]:
    return lambda rng: {name: rng.standard_normal(shape).astype(np.float32)}


def mlp(seed: int = 0, n_in: int = 8, hidden: int = 6, n_out: int = 4) -> Base:
    """x[1, n_in] -> Gemm -> Relu -> Gemm -> Softmax -> y[1, n_out]."""
    rng = np.random.default_rng(seed)
    inits = [_w(rng, (hidden, n_in), "fc0.w"), _w(rng, (hidden,), "fc0.b"),
             _w(rng, (n_out, hidden), "fc1.w"), _w(rng, (n_out,), "fc1.b")]
    nodes = [helper.make_node("Gemm", ["x", "fc0.w", "fc0.b"], ["h0"], name="/fc0/Gemm", transB=1),
             helper.make_node("Relu", ["h0"], ["h1"], name="/fc0/Relu"),
             helper.make_node("Gemm", ["h1", "fc1.w", "fc1.b"], ["h2"], name="/fc1/Gemm", transB=1),
             helper.make_node("Softmax", ["h2"], ["y"], name="/softmax", axis=-1)]
    model = finish(nodes, "mlp", [_vi("x", TensorProto.FLOAT, [1, n_in])], [_vi("y", TensorProto.FLOAT, [1, n_out])],
                   inits)
    return Base("mlp", model, _normal("x", (1, n_in)))


def conv(seed: int = 0) -> Base:
    """x[1, 2, 6, 6] -> Conv 3x3 (3 channels, pads 1) -> Relu -> MaxPool 2x2 -> Flatten -> Gemm -> y[1, 5]."""
    rng = np.random.default_rng(seed)
    inits = [_w(rng, (3, 2, 3, 3), "conv.w"), _w(rng, (3,), "conv.b"), _w(rng, (5, 27), "fc.w"), _w(rng, (5,), "fc.b")]
    nodes = [helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["c"], name="/conv/Conv", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], strides=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="/conv/Relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="/pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], name="/flatten", axis=1),
             helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["y"], name="/fc/Gemm", transB=1)]
    model = finish(nodes, "conv", [_vi("x", TensorProto.FLOAT, [1, 2, 6, 6])], [_vi("y", TensorProto.FLOAT, [1, 5])],
                   inits)
    return Base("conv", model, _normal("x", (1, 2, 6, 6)))


def _intops_inputs(rng: np.random.Generator) -> dict[str, np.ndarray]:
    nonzero = rng.integers(1, 9, (2, 3)) * rng.choice([-1, 1], (2, 3))
    return {"idx": rng.integers(0, 5, (4,)).astype(np.int64), "a": nonzero.astype(np.int32),
            "f": (rng.integers(1, 9, (2, 3)) + 0.25).astype(np.float32)}


def intops(seed: int = 0) -> Base:
    """Integer arithmetic: Gather rows of a table, Reshape, Concat with a float->int Cast, Div, Add, Cast back."""
    rng = np.random.default_rng(seed)
    table = numpy_helper.from_array(rng.integers(-50, 50, (5, 3)).astype(np.int32), "table")
    shape = numpy_helper.from_array(np.array([2, 6], np.int64), "shape")
    nodes = [helper.make_node("Gather", ["table", "idx"], ["g"], name="/gather", axis=0),
             helper.make_node("Reshape", ["g", "shape"], ["r"], name="/reshape"),
             helper.make_node("Cast", ["f"], ["fi"], name="/cast_in", to=TensorProto.INT32),
             helper.make_node("Concat", ["a", "fi"], ["c"], name="/concat", axis=1),
             helper.make_node("Div", ["r", "c"], ["q"], name="/div"),
             helper.make_node("Add", ["q", "r"], ["s"], name="/add"),
             helper.make_node("Cast", ["s"], ["y"], name="/cast_out", to=TensorProto.FLOAT)]
    model = finish(nodes, "intops",
                   [_vi("idx", TensorProto.INT64, [4]), _vi("a", TensorProto.INT32, [2, 3]),
                    _vi("f", TensorProto.FLOAT, [2, 3])],
                   [_vi("q", TensorProto.INT32, [2, 6]), _vi("y", TensorProto.FLOAT, [2, 6])], [table, shape])
    return Base("intops", model, _intops_inputs)


def shapes(seed: int = 0) -> Base:
    """Shape arithmetic: Reshape x[2, 3, 4] to [dim0, -1] computed by Shape/Gather/Unsqueeze/Concat, then
    Transpose and a strided Slice."""
    consts = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
              numpy_helper.from_array(np.array([0], np.int64), "axes0"),
              numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
              numpy_helper.from_array(np.array([1], np.int64), "starts"),
              numpy_helper.from_array(np.array([10], np.int64), "ends"),
              numpy_helper.from_array(np.array([2], np.int64), "steps")]
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="/shape"),
             helper.make_node("Gather", ["s", "zero"], ["d0"], name="/dim0", axis=0),
             helper.make_node("Unsqueeze", ["d0", "axes0"], ["d0v"], name="/unsqueeze"),
             helper.make_node("Concat", ["d0v", "minus1"], ["ns"], name="/newshape", axis=0),
             helper.make_node("Reshape", ["x", "ns"], ["r"], name="/reshape"),
             helper.make_node("Transpose", ["r"], ["t"], name="/transpose", perm=[1, 0]),
             helper.make_node("Slice", ["t", "starts", "ends", "axes0", "steps"], ["y"], name="/slice")]
    model = finish(nodes, "shapes", [_vi("x", TensorProto.FLOAT, [2, 3, 4])], [_vi("y", TensorProto.FLOAT, [5, 2])],
                   consts)
    return Base("shapes", model, _normal("x", (2, 3, 4)))


BASES: dict[str, Callable[[int], Base]] = {"mlp": mlp, "conv": conv, "intops": intops, "shapes": shapes}
