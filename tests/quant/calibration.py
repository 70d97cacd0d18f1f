"""Calibration data for onnxruntime.quantization.quantize_static in the tests: fixed-seed normal inputs."""

from __future__ import annotations

import numpy as np
from onnxruntime import quantization


class Calibration(quantization.CalibrationDataReader):
    """``n`` feeds of the input ``name`` of ``shape`` from the seed ``seed``."""

    def __init__(self, shape: tuple[int, ...], n: int = 16, seed: int = 1, name: str = "x"):
        r = np.random.default_rng(seed)
        self.data = iter([{name: r.standard_normal(shape).astype(np.float32)} for _ in range(n)])

    def get_next(self):
        return next(self.data, None)
