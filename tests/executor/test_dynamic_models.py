"""Every bundled model, float32 and int8, with a symbolic batch: compiled once by the VM executor for target "c"
and run at batch 1, 3 and 8, equal to the Graph executor built for that static batch; the same for the unet
with a Slice on its batch-symbolic output (the '/Slice' that once failed to lower: "invalid dimension Var(N)"),
and the unet with symbolic H and W run at 32, 64 and 96.

How the two builds are compared: int8 models bit for bit (integer arithmetic, and the float requantization of
each build is the same code). float32 models with a symbolic batch bit for bit too: the batch loop is the
outermost loop of every function and left alone, the loops inside keep the schedule the static build gives
them (tests/backends/test_lower_symbolic.py::test_static_inner_loops_keep_their_schedule), so both builds
run the same float operations in the same order. The float32 unet with symbolic H and W does not get the
same schedule (its static build splits and vectorizes the W loops of its convolutions, pads into a workspace:
the C compiler then contracts other multiply-adds into FMAs), so it is within 1e-6 of the static build, each
element or, where a sum cancels to about 0, of the output's largest magnitude.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import plait
from plait.executor import GraphModule
from plait.executor.vm.machine import VirtualMachine
from plait.frontend.onnx import from_onnx
from plait.testing.dynamic_models import with_static_dims, with_symbolic_dims
from plait.testing.onnx_models import MODELS, unet
from plait.testing.quantized import quantize, quantized_model

BATCHES = (1, 3, 8)
SIZES = (32, 64, 96)
# long: the int8 builds of the largest models (each 9-17 s from a cold compile cache, quantization included);
# the default run keeps every model in float32, the smaller ones in int8, and an int8 convolutional block with
# symbolic H and W
LONG_INT8 = ("mobilenet_v2", "resnet8", "unet", "unet_sliced")
CASES = [pytest.param(name, kind, marks=pytest.mark.long) if kind == "int8" and name in LONG_INT8 else (name, kind)
         for name in [*sorted(MODELS), "unet_sliced"] for kind in ("float32", "int8")]


def unet_sliced() -> onnx.ModelProto:
    """The bundled unet, its output cropped by one pixel on each side (``y[:, :, 1:-1, 1:-1]``, a Slice as a
    PyTorch export writes it)."""
    m = unet()
    g = m.graph
    out = g.output[0]
    g.node[-1].output[0] = "uncropped"
    g.initializer.extend([numpy_helper.from_array(np.array(v, np.int64), k)
                          for k, v in (("crop_starts", [1, 1]), ("crop_ends", [-1, -1]), ("crop_axes", [2, 3]))])
    g.node.append(helper.make_node("Slice", ["uncropped", "crop_starts", "crop_ends", "crop_axes"], [out.name],
                                   name="/Slice"))
    for d in out.type.tensor_type.shape.dim[2:]:
        d.dim_value -= 2
    onnx.checker.check_model(m)
    return m


@lru_cache(maxsize=None)
def _model_bytes(name: str, kind: str) -> bytes:
    if name == "unet_sliced":
        m = unet_sliced()
        return (quantize(m) if kind == "int8" else m).SerializeToString()
    return (quantized_model(name) if kind == "int8" else MODELS[name]()).SerializeToString()


def _model(name: str, kind: str) -> onnx.ModelProto:
    """The bundled model ``name`` (or the sliced unet), float32 or quantized to int8 (once per process)."""
    return onnx.ModelProto.FromString(_model_bytes(name, kind))


def close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-6) -> None:
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * float(np.max(np.abs(want), initial=0)))


def _run(dyn: onnx.ModelProto, shapes: list[dict[str, int]], exact: bool) -> None:
    """Compile ``dyn`` once for the VM; at each binding of its symbolic dims, run it on seeded inputs and
    compare with the Graph executor built for those static dims."""
    vm = VirtualMachine(plait.build(from_onnx(dyn), "c", executor="vm"))
    (inp,) = [i for i in dyn.graph.input if i.name not in {t.name for t in dyn.graph.initializer}]
    dims = inp.type.tensor_type.shape.dim
    for k, values in enumerate(shapes):
        shape = [d.dim_value if d.HasField("dim_value") else values[d.dim_param] for d in dims]
        x = np.random.default_rng(k).standard_normal(shape).astype(np.float32)
        got = vm(**{inp.name: x})
        want = GraphModule(plait.build(from_onnx(with_static_dims(dyn, values)), "c"))(**{inp.name: x})
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):
            if exact:
                np.testing.assert_array_equal(g, w)
            else:
                close(g, w)


@pytest.mark.parametrize("name, kind", CASES)
def test_a_symbolic_batch_runs_at_1_3_and_8_as_the_static_builds(name, kind):
    dyn = with_symbolic_dims(_model(name, kind), {0: "N"})
    _run(dyn, [{"N": n} for n in BATCHES], exact=True)


@pytest.mark.parametrize("kind", ["float32", pytest.param("int8", marks=pytest.mark.long)])
def test_the_unet_with_symbolic_h_and_w_runs_at_32_64_and_96(kind):
    dyn = with_symbolic_dims(_model("unet", kind), {2: "H", 3: "W"})
    _run(dyn, [{"H": s, "W": s} for s in SIZES], exact=kind == "int8")


def test_an_int8_residual_block_with_symbolic_h_and_w_runs_as_the_static_builds():
    """The default run's int8 representative of symbolic spatial dims (the int8 unet's is long): convolutions,
    their requantization and the residual add over H x W of 16 x 19, 32 x 24 and 17 x 9."""
    dyn = with_symbolic_dims(_model("resnet_block", "int8"), {2: "H", 3: "W"})
    _run(dyn, [{"H": 16, "W": 19}, {"H": 32, "W": 24}, {"H": 17, "W": 9}], exact=True)


def test_with_symbolic_dims_rewrites_what_an_exporter_would():
    """The int8 transformer's Reshape targets (ONNX Runtime's preprocessing folded its Shape subgraph and
    fused MatMul + Add into Reshape, Gemm, Reshape) hard-code the batch in their leading dim: they become -1."""
    before = {n.name: n for n in _model("transformer_encoder", "int8").graph.node if n.op_type == "Reshape"}
    m = with_symbolic_dims(_model("transformer_encoder", "int8"), {0: "N"})
    inits = {t.name: numpy_helper.to_array(t).tolist() for t in m.graph.initializer}
    targets = {n.name: inits[n.input[1]] for n in m.graph.node if n.op_type == "Reshape"}
    assert len(targets) == len(before) and targets["gemm_input_reshape"] == [-1, 64]
    assert targets["gemm_output_reshape_new_reshape"] == [-1, 32, 4, 16]
    assert [d.dim_param or d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim] == ["N", 32, 64]
    hw = with_symbolic_dims(_model("mobilenet_v2", "float32"), {2: "H", 3: "W"})
    assert [d.dim_param or d.dim_value for d in hw.graph.input[0].type.tensor_type.shape.dim] == [1, 3, "H", "W"]
    assert [d.dim_param or d.dim_value for d in hw.graph.output[0].type.tensor_type.shape.dim] == [1, 2]
    static = with_static_dims(hw, {"H": 64, "W": 48})
    assert [d.dim_value for d in static.graph.input[0].type.tensor_type.shape.dim] == [1, 3, 64, 48]
