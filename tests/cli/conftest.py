"""Models for the CLI tests, generated in code."""

import onnx
import pytest
from onnx import TensorProto, helper

from plait.testing import onnx_models


#: What `plait run` says on stderr when it makes up the one input 'x' (e.g. of mlp_path) at random.
RANDOM_X = "plait: note: random input for x (seed 0; give it with --inputs, or --fill zeros|ones)\n"


def small_model(nodes, inputs, outputs, opset=17) -> onnx.ModelProto:
    """A model of ``nodes`` with float32 ``inputs`` / ``outputs`` given as (name, shape)."""
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs]
    vo = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs]
    return helper.make_model(helper.make_graph(nodes, "g", vi, vo), opset_imports=[helper.make_opsetid("", opset)])


def save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope="session")
def mlp_path(tmp_path_factory):
    """One input 'x' float32[1, 8], one output 'y' float32[1, 4]."""
    return save(onnx_models.mlp(sizes=(8, 16, 4)), tmp_path_factory.mktemp("m") / "mlp.onnx")


@pytest.fixture(scope="session")
def add_path(tmp_path_factory):
    """Two inputs 'a', 'b' float32[2, 3]; output 'file' (a name np.savez(f, **d) cannot take)."""
    m = small_model([helper.make_node("Add", ["a", "b"], ["file"], name="add")], [("a", [2, 3]), ("b", [2, 3])],
                    [("file", [2, 3])])
    return save(m, tmp_path_factory.mktemp("m") / "add.onnx")


@pytest.fixture(scope="session")
def big_input_path(tmp_path_factory):
    """An input of float32[2^20, 2^20]: 4 TiB."""
    n = 1 << 20
    m = small_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [n, n])], [("y", [n, n])])
    return save(m, tmp_path_factory.mktemp("m") / "big_input.onnx")


@pytest.fixture(scope="session")
def many_outputs_path(tmp_path_factory):
    """300 outputs of float32[1, 64]: `plait run` prints them in many writes, far more than a pipe holds."""
    nodes = [helper.make_node("Relu", ["x"], [f"y{i}"], name=f"relu_{i}") for i in range(300)]
    m = small_model(nodes, [("x", [1, 64])], [(f"y{i}", [1, 64]) for i in range(300)])
    return save(m, tmp_path_factory.mktemp("m") / "many_outputs.onnx")
