"""Shared test helpers: run one ONNX node with ONNX Runtime, and run one plait op call.

``run_onnx_node("Mod", [a, b], {"fmod": 1})`` builds a one-node ONNX model with ``onnx.helper``
(every input is a graph input, so nothing is constant-folded away) and runs it on ONNX Runtime's
CPU provider, single-threaded (deterministic, and fast to start).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx.helper as oh
import onnxruntime as ort

from plait.testing.ort_reference import reference_session

__all__ = ["run_onnx_node", "run_plait_op", "assert_close"]


def _session_options() -> ort.SessionOptions:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3  # errors only
    return so


def run_onnx_node(
    op_type: str,
    inputs: Sequence[np.ndarray | None],
    attrs: dict[str, Any] | None = None,
    n_outputs: int = 1,
    opset: int = 18,
    output_dtypes: Sequence[Any] | None = None,
    domain: str = "",
) -> list[np.ndarray]:
    """Run ``op_type`` on ``inputs`` with ONNX Runtime; return its ``n_outputs`` outputs.

    ``None`` in ``inputs`` leaves that (optional) input out (an empty input name).
    ``output_dtypes`` (numpy dtypes, one per output) declare the outputs' element types; by
    default they are left undeclared and ONNX Runtime infers them.
    """
    attrs = dict(attrs or {})
    in_names: list[str] = []
    graph_inputs = []
    feeds: dict[str, np.ndarray] = {}
    for i, a in enumerate(inputs):
        if a is None:
            in_names.append("")
            continue
        a = np.asarray(a)
        name = f"in{i}"
        in_names.append(name)
        elem = oh.np_dtype_to_tensor_dtype(a.dtype)
        graph_inputs.append(oh.make_tensor_value_info(name, elem, list(a.shape)))
        feeds[name] = a
    out_names = [f"out{i}" for i in range(n_outputs)]
    if output_dtypes is None:
        graph_outputs = [oh.make_empty_tensor_value_info(n) for n in out_names]
    else:
        assert len(output_dtypes) == n_outputs, "one output dtype per output"
        graph_outputs = [
            oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(np.dtype(dt)), None)
            for n, dt in zip(out_names, output_dtypes)
        ]
    node = oh.make_node(op_type, in_names, out_names, domain=domain, **attrs)
    graph = oh.make_graph([node], f"{op_type}_test", graph_inputs, graph_outputs)
    opsets = [oh.make_opsetid("", opset)]
    if domain:
        opsets.append(oh.make_opsetid(domain, 1))
    model = oh.make_model(graph, opset_imports=opsets)
    model.ir_version = min(model.ir_version, 10)  # an IR version every recent ORT accepts
    sess = reference_session(model.SerializeToString(), _session_options)  # exact int8 sums on every x86-64
    return [np.asarray(o) for o in sess.run(out_names, feeds)]


def run_plait_op(op_name: str, inputs: Sequence[np.ndarray], **attrs: Any):
    """Type-check and evaluate one plait op call on ``inputs`` through the reference interpreter.

    The interpreter checks that the reference's dtype and shape match the type relation.
    """
    from plait.relay import IRModule, call, run, var

    params = [var(f"x{i}", np.shape(a), np.asarray(a).dtype.name) for i, a in enumerate(inputs)]
    mod = IRModule.from_expr(call(op_name, *params, **attrs))
    return run(mod, [np.asarray(a) for a in inputs])


def assert_close(actual: np.ndarray, expected: np.ndarray, rtol: float | None = None,
                 atol: float | None = None) -> None:
    """Same dtype and shape, values within a dtype-dependent tolerance (exact for ints and bools)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if actual.dtype.kind == "f":
        default = {2: 2e-3, 4: 1e-5, 8: 1e-12}[actual.dtype.itemsize]
        rtol = default if rtol is None else rtol
        atol = default if atol is None else atol
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)
