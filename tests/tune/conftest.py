"""The model both tuning test files tune: a one-block DS-CNN of 8 channels, and its Relay module."""

import onnx
import pytest

from plait.frontend.onnx import from_onnx
from plait.testing.onnx_models import ds_cnn


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return ds_cnn(channels=8, blocks=1)


@pytest.fixture(scope="module")
def mod(model):
    return from_onnx(model)
