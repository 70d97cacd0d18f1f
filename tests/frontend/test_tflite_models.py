"""The MLPerf Tiny architectures as TFLite models (built in code: plait.testing.tflite_models), int8 and
float32, on every executor: int8 equal to TensorFlow Lite Micro's interpreter bit for bit, float within
1e-5 of LiteRT (its reference kernels). The reference files themselves (../shared/models/mlperf_tiny) are
checked by bench/mlperf_tiny.py."""

from __future__ import annotations

import numpy as np
import pytest

import plait
from plait.executor.aot.module import AotModule
from plait.executor.graph.module import GraphModule
from plait.frontend.tflite import from_tflite
from plait.testing import tflite_models as tm
from plait.testing.tflite_reference import litert, ramp_inputs, tflm

pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
pytest.importorskip("ai_edge_litert.interpreter")

SMALL = {"mobilenet_v1": {"size": 32}}  # the 96x96 reference is bench/mlperf_tiny.py's


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cc"))


def inputs(mod, n: int) -> list[np.ndarray]:
    t = mod["main"].params[0].checked_type
    return ramp_inputs(t.shape, t.dtype, n)


def close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1e-5 * float(np.abs(want).max()) + 1e-6
    assert float(np.abs(got - want).max()) <= tol


@pytest.mark.parametrize("name", sorted(tm.MODELS))
def test_int8_equals_tflite_micro_on_every_executor(name, cache):
    buf = tm.MODELS[name](quant=True, **SMALL.get(name, {}))
    mod = from_tflite(buf)
    xs = inputs(mod, 4)
    want = tflm(buf, xs)
    assert max(len(np.unique(w)) for w in want) > 1  # not saturated
    if name != "mobilenet_v1":  # (its two classes come out the same for every input at 32 x 32)
        assert len({w.tobytes() for w in want}) > 1
    config = {"cc.cache_dir": cache}
    graph = GraphModule(plait.build(mod, "c", config=config))
    for x, w in zip(xs, want):
        (got,) = graph(x)
        np.testing.assert_array_equal(got, w)
    (got,) = AotModule(plait.build(mod, "c", executor="aot", config=config))(xs[0])
    np.testing.assert_array_equal(got, want[0])
    (got,) = plait.executor.VirtualMachine(plait.build(mod, "c", executor="vm", config=config))(xs[1])
    np.testing.assert_array_equal(got, want[1])


@pytest.mark.parametrize("name", sorted(tm.MODELS))
def test_float_within_tolerance_of_litert(name, cache):
    buf = tm.MODELS[name](quant=False, **SMALL.get(name, {}))
    mod = from_tflite(buf)
    xs = inputs(mod, 3)
    want = litert(buf, xs)
    graph = GraphModule(plait.build(mod, "c", config={"cc.cache_dir": cache}))
    for x, w in zip(xs, want):
        (got,) = graph(x)
        close(got, w)


def test_int8_model_is_nhwc_and_uses_tflite_arithmetic():
    mod = from_tflite(tm.ds_cnn(quant=True))
    ops = [c.op.name for c in plait.relay.visitor.post_order(mod["main"].body) if hasattr(c, "op")]
    assert "qnn.fixed_softmax" in ops and "qnn.avg_pool2d" in ops and "qnn.softmax" not in ops
    (main,) = [mod["main"]]
    assert main.params[0].checked_type.shape == (1, 49, 10, 1) and main.params[0].checked_type.dtype == "int8"
    assert mod.attrs["frontend"] == "tflite"
    requant = [c for c in plait.relay.visitor.post_order(main.body) if getattr(c, "op", None) is not None
               and c.op.name == "qnn.requantize"]
    assert requant and all(c.attrs["mode"] == "fixed" for c in requant)
    meta = {c.meta["op_type"] for c in plait.relay.visitor.post_order(main.body) if hasattr(c, "meta") and "op_type" in c.meta}
    assert meta == {"CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"}


def test_the_float_autoencoder_does_not_fit_a_cortex_m7f():
    """ad01_fp32's weights (1.06 MB of float32) are more than the M7F's 1 MiB of flash."""
    mod = from_tflite(tm.autoencoder(quant=False))
    with pytest.raises(plait.PlaitError) as exc:
        plait.build(mod, "c -mcpu=cortex-m7f", executor="aot")
    assert str(exc.value) == ("piece 'c' (c -mcpu=cortex-m7f): the weights need 1,063,456 bytes of flash, more than "
                              "its 1,048,576 bytes")
