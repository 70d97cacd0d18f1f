"""Models with a symbolic batch dimension, and a small runner of lowered modules with symbolic shapes.

:func:`with_symbolic_batch` turns an ONNX model whose inputs have batch 1 (the bench models of
:mod:`plait.testing.onnx_models`) into one whose graph inputs and outputs have the symbolic batch
dimension ``"N"`` (dim 0); ``Reshape`` shape constants that hard-code the batch (a leading 1 where the
input's dim 0 is the batch) become 0 (copy the input's dim). ``DYNAMIC_MODELS`` maps the bench models'
names to their symbolic versions.

:func:`run_lowered` runs a lowered module (``main`` calling PrimFuncs, directly or through region
functions) on numpy inputs of any batch, calling each compiled PrimFunc through
:mod:`plait.runtime` with the arguments :func:`plait.lowering.shape_func.prepare_call` makes: a
stand-in for the VM in tests.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx

from plait.errors import PlaitError
from plait.ir.op import Op
from plait.lowering.shape_func import prepare_call, trim_outputs
from plait.relay.expr import Call, Constant, Expr, Function, GlobalVar, Tuple, TupleGetItem, Var
from plait.relay.module import IRModule
from plait.relay.visitor import post_order
from plait.testing.onnx_models import MODELS
from plait.tir.stmt import PrimFunc

BATCH = "N"


def _batch_reshapes(graph: onnx.GraphProto) -> None:
    """Reshape shape initializers starting with the batch (1) -> 0 (copy dim 0 of the data)."""
    inits = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2 or node.input[1] not in inits:
            continue
        t = inits[node.input[1]]
        shape = onnx.numpy_helper.to_array(t)
        if shape.ndim == 1 and shape.size > 1 and shape[0] == 1:
            fixed = shape.copy()
            fixed[0] = 0
            t.CopyFrom(onnx.numpy_helper.from_array(fixed, t.name))


def with_symbolic_batch(model: onnx.ModelProto, name: str = BATCH) -> onnx.ModelProto:
    """A copy of ``model`` whose graph inputs and outputs have the symbolic dim ``name`` as dim 0 (each
    must have batch 1 there) and whose batch-1 Reshape constants copy the batch instead."""
    out = onnx.ModelProto.FromString(model.SerializeToString())
    inits = {t.name for t in out.graph.initializer}
    for v in [*(i for i in out.graph.input if i.name not in inits), *out.graph.output]:
        dims = v.type.tensor_type.shape.dim
        if not dims or (dims[0].HasField("dim_value") and dims[0].dim_value != 1):
            raise PlaitError(f"with_symbolic_batch: '{v.name}' has no batch dimension 1 to make symbolic")
        dims[0].ClearField("dim_value")
        dims[0].dim_param = name
    _batch_reshapes(out.graph)
    del out.graph.value_info[:]  # intermediate shapes with the old batch
    return out


DYNAMIC_MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    k: (lambda f=f: with_symbolic_batch(f())) for k, f in MODELS.items()}


def run_lowered(mod: IRModule, lib: Any, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of the lowered ``mod``'s ``main`` on ``inputs`` (by name): PrimFunc calls go to
    ``lib[global_symbol]`` (a :mod:`plait.runtime` module) with shapes from the shape functions; views
    (reshape...) run their numpy reference."""
    main = mod["main"]
    env: dict[Expr, Any] = {}
    for p in main.params:
        if p.name_hint not in inputs:
            raise PlaitError(f"run_lowered: no value for input '{p.name_hint}'")
        env[p] = np.ascontiguousarray(inputs[p.name_hint])
    out = _eval(mod, lib, main, env)
    return list(out) if isinstance(out, tuple) else [out]


def _eval(mod: IRModule, lib: Any, fn: Function, env: dict[Expr, Any]) -> Any:
    for node in post_order(fn.body, enter=lambda n: not isinstance(n, Function)):
        if node in env:
            continue
        if isinstance(node, Constant):
            env[node] = node.data
        elif isinstance(node, Tuple):
            env[node] = tuple(env[f] for f in node.fields)
        elif isinstance(node, TupleGetItem):
            env[node] = env[node.tuple_value][node.index]
        elif isinstance(node, Call):
            env[node] = _call(mod, lib, node, [env[a] for a in node.args])
        elif not isinstance(node, (Var, GlobalVar, Function)):
            raise PlaitError(f"run_lowered: unsupported {type(node).__name__}")
    return env[fn.body]


def _call(mod: IRModule, lib: Any, call: Call, args: Sequence[Any]) -> Any:
    if isinstance(call.op, Op):
        return np.ascontiguousarray(call.op.ref(list(args), call.attrs))
    if not isinstance(call.op, GlobalVar):
        raise PlaitError(f"run_lowered: unsupported callee {call.op!r}")
    callee = mod[call.op.name]
    if isinstance(callee, Function):
        return _eval(mod, lib, callee, dict(zip(callee.params, args)))
    assert isinstance(callee, PrimFunc)
    arrays = [np.ascontiguousarray(a) for a in args]
    call_args, outs = prepare_call(callee, arrays)
    lib[callee.attrs["global_symbol"]](*call_args)
    res = trim_outputs(callee, outs)
    return res[0] if len(res) == 1 and not callee.attrs.get("tuple_output") else tuple(res)


__all__ = ["BATCH", "DYNAMIC_MODELS", "run_lowered", "with_symbolic_batch"]
