"""Bit-exactness of a Cortex-M piece (issue 13, item 6; issue 27): its C is built with -ffp-contract=off
everywhere and calls plait's own float32 math routines (-libm=plait, the default on Cortex-M pieces:
plait/backends/c/libm/), so the graph executor's host simulation, the AOT host runner and the emulated core
(QEMU) give identical float32 results on every model, with transcendental functions too, on the Cortex-M0
(soft float), M4F, M7F and M55 (docs/embedded.md, Bit-exactness)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from onnx import TensorProto, helper

import plait
from plait.executor import GraphModule
from plait.executor.aot.module import AotModule
from plait.executor.aot.qemu import QemuModule
from plait.frontend.onnx import from_onnx
from plait.testing import onnx_models
from plait.testing.libm_cases import special_values

HAVE = shutil.which("qemu-system-arm") is not None and shutil.which("arm-none-eabi-gcc") is not None
pytestmark = pytest.mark.skipif(not HAVE, reason="needs qemu-system-arm and arm-none-eabi-gcc")
TARGETS = ("c -mcpu=cortex-m7f", "c -mcpu=cortex-m0 -ram-kb=256", "c -mcpu=cortex-m4f", "c -mcpu=cortex-m55")
BOARD = {"c -mcpu=cortex-m0 -ram-kb=256": " -board=mps2-an385"}  # the microbit's 16 KiB are too small
#: every ONNX operator whose float32 lowering calls a transcendental routine (Pow: x ** y, y a second input)
OPS = ("Exp", "Log", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Erf", "Gelu", "Softplus", "Mish", "Elu", "Selu",
       "Celu", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Sqrt", "Pow")
SHAPE = [4, 256]


def ulp_distance(a: np.ndarray, b: np.ndarray) -> int:
    """The largest number of float32 values between corresponding elements (0: bit-identical)."""
    def ordered(v: np.ndarray) -> np.ndarray:
        i = np.ascontiguousarray(v, np.float32).view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return int(np.abs(ordered(a) - ordered(b)).max())


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit, except that any NaN equals any NaN (a NaN's payload is not specified)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    nan = np.isnan(a)
    return bool(np.array_equal(nan, np.isnan(b)) and np.array_equal(a.view(np.int32)[~nan], b.view(np.int32)[~nan]))


def transcendental_model():
    """Each op of OPS on x[4, 256] (Pow: x ** y): one output per op."""
    nodes = []
    for op in OPS:
        attrs = {"axis": -1} if op in ("Softmax", "LogSoftmax") else {}
        nodes.append(helper.make_node(op, ["x", "y"] if op == "Pow" else ["x"], [op.lower()], **attrs))
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ("x", "y")]
    info = [helper.make_tensor_value_info(op.lower(), TensorProto.FLOAT, SHAPE) for op in OPS]
    graph = helper.make_graph(nodes, "transcendental", ins, info)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def transcendental_inputs() -> dict[str, np.ndarray]:
    """Row 0: the special values (zeros, subnormals, extremes, infinities, NaNs, domain edges) and random
    bit patterns; rows 1-3: normal samples of scale 0.1, 4 and 20. ``y`` (Pow's exponent) the same, shuffled."""
    rng = np.random.default_rng(0)
    special = special_values()[:SHAPE[1]]
    bits = rng.integers(0, 2**32, SHAPE[1] - special.size, dtype=np.uint64).astype(np.uint32).view(np.float32)
    normal = (rng.standard_normal((3, SHAPE[1])) * np.array([[0.1], [4.0], [20.0]])).astype(np.float32)
    x = np.concatenate([np.concatenate([special, bits])[None], normal])
    return {"x": x, "y": rng.permuted(x, axis=1)}


def runs(model, target: str, cache: str, **inputs: np.ndarray) -> tuple[list, list, list]:
    """(graph executor host simulation, AOT host runner, QEMU) outputs of ``model`` on ``target``."""
    config = {"cc.cache_dir": cache, "c.host_simulation": True}
    graph = GraphModule(plait.build(from_onnx(model), target=target, config=config))
    art = plait.build(from_onnx(model), target=target + BOARD.get(target, ""), executor="aot",
                      config={**config, "aot.name": "m"})
    qemu = QemuModule(art, timeout_s=120)
    assert "-ffp-contract=off" in art.metadata["sources"][0]["host_flags"]
    assert "-ffp-contract=off" in art.metadata["sources"][0]["flags"]
    return graph(**inputs), AotModule(art)(**inputs), qemu(**inputs)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


def test_ulp_distance():
    one = np.float32(1)
    assert ulp_distance(np.array([one]), np.array([np.nextafter(one, np.float32(2))])) == 1
    assert ulp_distance(np.array([np.float32(-0.0)]), np.array([np.float32(0.0)])) == 0
    tiny = np.nextafter(np.float32(0), np.float32(1))
    assert ulp_distance(np.array([-tiny]), np.array([tiny])) == 2


@pytest.mark.parametrize("target", TARGETS)
def test_ds_cnn_host_simulation_aot_host_and_qemu_are_bit_identical(target, cache):
    x = np.random.default_rng(5).standard_normal((1, 1, 49, 10)).astype(np.float32)
    (g,), (a,), (q,) = runs(onnx_models.ds_cnn(), target, cache, input=x)
    assert g.dtype == np.float32 and g.shape == (1, 12)
    assert np.array_equal(g, q) and np.array_equal(g, a)


@pytest.mark.parametrize("target", TARGETS)
def test_transcendental_functions_are_bit_identical_on_host_simulation_and_the_core(target, cache):
    graph, aot, qemu = runs(transcendental_model(), target, cache, **transcendental_inputs())
    got = {op: ulp_distance(np.nan_to_num(g), np.nan_to_num(q)) for op, g, q in zip(OPS, graph, qemu)
           if not same_bits(g, q)}
    assert not got, f"ulps apart between host simulation and QEMU on {target}: {got}"
    assert all(same_bits(g, a) for g, a in zip(graph, aot))
    assert all(np.isfinite(g[1:]).all() for op, g in zip(OPS, graph) if op not in ("Log", "Asin", "Acos", "Acosh",
                                                                                  "Atanh", "Sqrt", "Pow"))
