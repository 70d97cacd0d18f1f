"""Helpers for frontend tests: build small ONNX models, run them on ONNX Runtime and on plait."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from plait.frontend.onnx import from_onnx
from plait.relay import flatten_value, run
from plait.testing.ort_reference import reference_run


def tensor_info(name: str, dtype: Any, shape: Sequence[Any] | None) -> onnx.ValueInfoProto:
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def make_model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
               initializers: dict[str, np.ndarray] | None = None, opset: int = 18, check: bool = False,
               **kwargs: Any) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **kwargs)
    model.ir_version = min(model.ir_version, 8) if opset < 19 else model.ir_version
    if check:
        onnx.checker.check_model(model)
    return model


def one_node(op_type: str, inputs: dict[str, np.ndarray | None], attrs: dict[str, Any] | None = None,
             n_outputs: int = 1, opset: int = 18, constants: Sequence[str] = ()) -> tuple[onnx.ModelProto, dict]:
    """A model of one node; ``constants`` names inputs that become initializers. Returns (model, feeds)."""
    names, graph_inputs, feeds, inits = [], [], {}, {}
    for name, value in inputs.items():
        if value is None:
            names.append("")
            continue
        names.append(name)
        if name in constants:
            inits[name] = value
        else:
            graph_inputs.append(tensor_info(name, value.dtype, value.shape))
            feeds[name] = value
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, name=f"the_{op_type.lower()}", **(attrs or {}))
    model = make_model([node], graph_inputs, [helper.make_empty_tensor_value_info(o) for o in outs], inits,
                       opset=opset, check=False)
    return model, feeds


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return reference_run(model, feeds)


def plait_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return flatten_value(run(from_onnx(model), feeds))


def assert_matches_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-5,
                       atol: float = 1e-6) -> list[np.ndarray]:
    expected = ort_run(model, feeds)
    got = plait_run(model, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype, e.shape)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return got
