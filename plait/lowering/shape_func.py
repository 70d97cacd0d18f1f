"""Shape functions: what a caller (the VM) evaluates before it calls a PrimFunc with symbolic extents.

**Parameters of a lowered PrimFunc** ``f`` (:class:`plait.lowering.lower.LowerToTIR`, then
:class:`plait.memory.workspace.LiftWorkspaces`), in this order:

1. the input buffers (``f.attrs["num_inputs"]`` of them), in argument order;
2. the output buffers (tuples flattened);
3. from ``f.attrs["workspace_param"]`` (when present): the static workspace arena(s), sized
   ``f.attrs["workspace_bytes"]`` bytes (an int: pass views of one byte array,
   :func:`plait.memory.workspace.workspace_arrays`), then ``f.attrs["dynamic_workspaces"]`` (default 0)
   symbolic workspace buffers, each allocated by the caller with its own shape
   (:func:`workspace_shapes`);
4. the **size variables**: one int64 scalar per symbolic dimension (a dim ``"N"`` of the Relay type is
   the variable ``N``; an unknown dim ``"?"`` of parameter ``k`` at position ``j`` is ``p<k>_d<j>``),
   in order of first appearance in the buffer shapes. :func:`size_vars` lists them. A function
   with static shapes has none.

Buffer shapes are ints or int64 expressions of the size variables (an output of a reshape over a
symbolic batch may be ``N * 4``). The C and LLVM code generators take buffers as pointers and the
size variables as ``int64_t`` by value, so through :mod:`plait.runtime`::

    values = size_var_values(f, [x.shape for x in inputs])       # {"N": 3}
    outs = [np.empty(s, d) for s, d in zip(output_shapes(f, [x.shape for x in inputs]), output_dtypes(f))]
    ws = [np.empty(s, d) for s, d in workspace_shapes(f, values)]   # + the static arena, if any
    lib[f.attrs["global_symbol"]](*inputs, *outs, *arena_views, *ws, *scalar_args(f, values))
    outs = trim_outputs(f, outs)                                   # data-dependent outputs (NonZero)

:func:`prepare_call` does exactly that (``args, outs = prepare_call(f, inputs)``). The bytes a call
needs besides its outputs: ``f.attrs.get("workspace_bytes", 0)`` (static) plus
:func:`workspace_bytes` (the symbolic workspaces).

**Data-dependent output shapes** (NonZero, :func:`plait.op.data_dependent.nonzero_func`): the
PrimFunc's attribute ``data_dependent`` is a triple ``(i, j, r)``: output ``i`` is an upper bound
buffer of shape ``(r, numel)``, written compactly with a row stride of ``count`` (element ``[a, b]`` at flat position
``a * count + b``), and output ``j`` is an int64 buffer of shape ``(1,)`` holding ``count``.
:func:`trim_outputs` replaces output ``i`` by the ``(r, count)`` view of its first ``r * count``
elements and drops output ``j``: what remains are the Relay-level results.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plait.errors import PlaitError
from plait.ir.types import DTYPES
from plait.tir.expr import IntImm, PrimExpr, Var
from plait.tir.functor import free_vars
from plait.tir.interpreter import evaluate_expr
from plait.tir.stmt import Buffer, PrimFunc


class ShapeError(PlaitError):
    """The inputs of a call do not fit the PrimFunc's shapes (rank, a static dim, two bindings of one size
    variable) or a size variable cannot be bound from them."""


def _name(func: PrimFunc) -> str:
    return func.name or "<anonymous>"


def _num_inputs(func: PrimFunc) -> int:
    n = func.attrs.get("num_inputs")
    if not isinstance(n, int) or isinstance(n, bool):
        raise ShapeError(f"PrimFunc '{_name(func)}' has no num_inputs attribute: not a lowered function")
    return n


def size_vars(func: PrimFunc) -> list[Var]:
    """The trailing int64 scalar parameters of ``func`` (its size variables), in parameter order."""
    k = len(func.params)
    while k and isinstance(func.params[k - 1], Var):
        k -= 1
    return list(func.params[k:])


def _buffers(func: PrimFunc) -> list[Buffer]:
    return [p for p in func.params if isinstance(p, Buffer)]


def _outputs(func: PrimFunc) -> list[Buffer]:
    bufs = _buffers(func)
    ws = func.attrs.get("workspace_param")
    end = ws if isinstance(ws, int) and not isinstance(ws, bool) else len(bufs)
    return bufs[_num_inputs(func):end]


def _dims(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def size_var_values(func: PrimFunc, input_shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    """The value of each size variable of ``func`` (by name), bound from the first input dimension that is
    exactly that variable. Raises a :class:`ShapeError` naming the input and the dimension when an input
    has the wrong rank or a static dim differs, when two inputs disagree on a variable, or when a
    variable cannot be bound from the inputs."""
    name = _name(func)
    inputs = _buffers(func)[:_num_inputs(func)]
    if len(input_shapes) != len(inputs):
        raise ShapeError(f"PrimFunc '{name}': expected {len(inputs)} input shapes, got {len(input_shapes)}")
    values: dict[str, int] = {}
    where: dict[str, str] = {}
    for k, (buf, shape) in enumerate(zip(inputs, input_shapes)):
        shape = tuple(int(d) for d in shape)
        what = f"PrimFunc '{name}': input {k} ('{buf.name}')"
        if len(shape) != len(buf.shape):
            raise ShapeError(f"{what} has shape {_dims(shape)}, expected rank {len(buf.shape)} "
                             f"{_dims(buf.shape)}")
        for j, (d, got) in enumerate(zip(buf.shape, shape)):
            if isinstance(d, IntImm) and d.value != got:
                raise ShapeError(f"{what} has {got} in dim {j}, expected {d.value} (shape {_dims(buf.shape)})")
            if isinstance(d, Var):
                if d.name in values and values[d.name] != got:
                    raise ShapeError(f"{what} has {got} in dim {j}, but {where[d.name]} gave '{d.name}' = "
                                     f"{values[d.name]}")
                if d.name not in values:
                    values[d.name], where[d.name] = got, f"input {k} ('{buf.name}') dim {j}"
    for v in size_vars(func):
        if v.name not in values:
            raise ShapeError(f"PrimFunc '{name}': size variable '{v.name}' is not a dimension of any input, so the "
                             "inputs' shapes cannot bind it")
    env = {v: values[v.name] for v in size_vars(func)}
    for k, (buf, shape) in enumerate(zip(inputs, input_shapes)):  # dims that are expressions of variables
        for j, (d, got) in enumerate(zip(buf.shape, shape)):
            if not isinstance(d, (IntImm, Var)) and _eval(d, env) != int(got):
                raise ShapeError(f"PrimFunc '{name}': input {k} ('{buf.name}') has {int(got)} in dim {j}, "
                                 f"expected {d} = {_eval(d, env)}")
    return values


def _eval(e: PrimExpr, env: dict[Var, int]) -> int:
    if isinstance(e, IntImm):
        return e.value
    return int(evaluate_expr(e, {v: env[v] for v in free_vars(e)}))


def _env(func: PrimFunc, values: dict[str, int]) -> dict[Var, int]:
    missing = [v.name for v in size_vars(func) if v.name not in values]
    if missing:
        raise ShapeError(f"PrimFunc '{_name(func)}': no value for size variable '{missing[0]}'")
    return {v: int(values[v.name]) for v in size_vars(func)}


def _shape(buf: Buffer, env: dict[Var, int], func: PrimFunc | None = None) -> tuple[int, ...]:
    """``buf``'s shape for the size variables' values; a negative dim (a window longer than its padded axis, a
    transposed convolution of an empty axis) is refused naming ``func``, the buffer and the variables."""
    shape = tuple(_eval(d, env) for d in buf.shape)
    if func is not None and any(d < 0 for d in shape):
        vals = ", ".join(f"{v.name} = {n}" for v, n in env.items())
        raise ShapeError(f"PrimFunc '{_name(func)}': buffer '{buf.name}' {_dims(buf.shape)} would have the shape "
                         f"{_dims(shape)} for {vals}: the inputs' run-time shapes do not fit the operator")
    return shape


def output_shapes(func: PrimFunc, input_shapes: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """The shapes of the output buffers of ``func`` for inputs of ``input_shapes`` (upper bounds for a
    data-dependent output: see :func:`trim_outputs`)."""
    env = _env(func, size_var_values(func, input_shapes))
    return [_shape(b, env, func) for b in _outputs(func)]


def output_dtypes(func: PrimFunc) -> list[str]:
    """The dtypes of the output buffers of ``func``."""
    return [b.dtype for b in _outputs(func)]


def scalar_args(func: PrimFunc, values: dict[str, int]) -> list[int]:
    """The trailing int64 arguments of a call of ``func`` (its size variables' values, in order)."""
    return list(_env(func, values).values())


def _dynamic_workspaces(func: PrimFunc) -> list[Buffer]:
    n = int(func.attrs.get("dynamic_workspaces", 0))
    bufs = _buffers(func)
    return bufs[len(bufs) - n:] if n else []


def workspace_shapes(func: PrimFunc, values: dict[str, int]) -> list[tuple[tuple[int, ...], str]]:
    """(shape, dtype) of each symbolic workspace parameter of ``func`` (attrs ``dynamic_workspaces``),
    for the size variables' ``values``."""
    env = _env(func, values)
    return [(_shape(b, env, func), b.dtype) for b in _dynamic_workspaces(func)]


def workspace_bytes(func: PrimFunc, values: dict[str, int]) -> int:
    """The bytes of the symbolic workspaces of ``func`` for ``values`` (the static arena is
    ``attrs["workspace_bytes"]``)."""
    return sum(int(np.prod(s, dtype=np.int64)) * DTYPES[d].itemsize for s, d in workspace_shapes(func, values))


def prepare_call(func: PrimFunc, inputs: Sequence[np.ndarray]) -> tuple[list[Any], list[np.ndarray]]:
    """``(args, outputs)`` for calling the compiled ``func`` on ``inputs`` (numpy arrays): the full
    argument list (inputs, new outputs, a new static arena, new symbolic workspaces, the size
    variables' values) and the output arrays it fills (pass them to :func:`trim_outputs` after the call)."""
    shapes = [np.shape(x) for x in inputs]
    values = size_var_values(func, shapes)
    env = _env(func, values)
    outs = [np.zeros(_shape(b, env, func), b.dtype) for b in _outputs(func)]
    bufs = _buffers(func)
    ws = func.attrs.get("workspace_param")
    arenas: list[np.ndarray] = []
    if isinstance(ws, int) and not isinstance(ws, bool):
        nbytes = int(func.attrs.get("workspace_bytes", 0))
        arena = np.zeros(nbytes, np.uint8)
        arenas = [arena.view(DTYPES[b.dtype]) for b in bufs[ws:len(bufs) - len(_dynamic_workspaces(func))]]
    dyn = [np.zeros(s, d) for s, d in workspace_shapes(func, values)]
    return [*inputs, *outs, *arenas, *dyn, *scalar_args(func, values)], outs


def trim_outputs(func: PrimFunc, outputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The Relay-level results of a call of ``func`` from the output buffers it filled: unchanged, unless
    ``func`` has a data-dependent output (attrs ``data_dependent``, see the module docstring)."""
    dd = func.attrs.get("data_dependent")
    outs = list(outputs)
    if not dd:
        return outs
    i, j, rows = (int(v) for v in dd)
    if not (0 <= i < len(outs) and 0 <= j < len(outs)):
        raise ShapeError(f"PrimFunc '{_name(func)}': data_dependent names output {i} and count {j}, but there "
                         f"are {len(outs)} outputs")
    count = int(np.asarray(outs[j]).reshape(-1)[0])
    flat = np.asarray(outs[i]).reshape(-1)
    if count < 0 or rows * count > flat.size:
        raise ShapeError(f"PrimFunc '{_name(func)}': data-dependent count {count} does not fit output {i} of "
                         f"{flat.size} elements")
    outs[i] = flat[:rows * count].reshape(rows, count)
    del outs[j]
    return outs


__all__ = ["ShapeError", "output_dtypes", "output_shapes", "prepare_call", "scalar_args", "size_var_values",
           "size_vars", "trim_outputs", "workspace_bytes", "workspace_shapes"]
