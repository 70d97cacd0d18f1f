"""External tensor data: read only from the model's own directory, every entry checked (verbatim errors)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from frontend_util import make_model, tensor_info
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import set_external_data

from plait.errors import FrontendError
from plait.frontend.onnx import load_onnx
from plait.limits import MemoryLimitError
from plait.relay import run

W = np.arange(4, dtype=np.float32)


def save_model(directory, location: str, offset: int | None = None, length: int | None = None,
               in_constant: bool = False) -> str:
    """m.onnx in ``directory``: y = x + w, w's data external at ``location``."""
    w = numpy_helper.from_array(W, "w")
    set_external_data(w, location, offset, length)
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    x = tensor_info("x", np.float32, (4,))
    if in_constant:
        nodes = [helper.make_node("Constant", [], ["w"], name="k", value=w), helper.make_node("Add", ["x", "w"], ["y"])]
        model = make_model(nodes, [x], [helper.make_empty_tensor_value_info("y")])
    else:
        model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [x], [helper.make_empty_tensor_value_info("y")])
        model.graph.initializer.append(w)
    path = os.path.join(directory, "m.onnx")
    onnx.save(model, path)
    return path


def load_error(path, kind=FrontendError, **kwargs) -> str:
    with pytest.raises(kind) as e:
        load_onnx(path, **kwargs)
    return str(e.value)


@pytest.mark.parametrize("in_constant", [False, True])
def test_data_next_to_the_model_is_read(tmp_path, in_constant):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "w.bin").write_bytes(b"\xff" * 8 + W.tobytes())
    mod = load_onnx(save_model(tmp_path, "sub/w.bin", offset=8, in_constant=in_constant))
    np.testing.assert_array_equal(run(mod, {"x": np.ones(4, np.float32)}), W + 1)


def test_locations_outside_the_directory_are_refused(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    os.symlink(tmp_path / "secret.bin", model_dir / "link.bin")
    (model_dir / "dir.bin").mkdir()
    for location, reason in [
        ("../secret.bin", "external data location '../secret.bin' is outside the model's directory"),
        (str(tmp_path / "secret.bin"), f"external data location '{tmp_path / 'secret.bin'}' is outside the model's "
                                       "directory"),
        ("link.bin", "external data location 'link.bin' is outside the model's directory"),
        ("missing.bin", "external data file 'missing.bin' does not exist next to the model"),
        ("dir.bin", "external data location 'dir.bin' is not a regular file"),
    ]:
        path = save_model(model_dir, location)
        assert load_error(path) == f"cannot load ONNX model '{path}': initializer 'w': {reason}"


def test_offsets_and_lengths_are_checked(tmp_path):
    (tmp_path / "w.bin").write_bytes(W.tobytes())
    for offset, length, reason in [
        (8, None, "external data file 'w.bin' holds 16 bytes, the tensor needs bytes 8 to 24"),
        (0, 12, "external data length 12 does not match the 16 bytes its dims [4] need"),
        (0, 100, "external data length 100 does not match the 16 bytes its dims [4] need"),
    ]:
        path = save_model(tmp_path, "w.bin", offset, length)
        assert load_error(path) == f"cannot load ONNX model '{path}': initializer 'w': {reason}"
    path = save_model(tmp_path, "w.bin")
    assert load_error(path, MemoryLimitError, memory_limit=8) == (
        f"cannot load ONNX model '{path}': the model's external data needs 16 B (16 bytes), more than the memory "
        "limit of 8 B; raise it with --max-memory or the config key 'memory.limit'")
