"""Run-time shapes for the VM: the ONE place where the shape of a tensor allocated at run time is decided.

- A lowered function whose buffers are all static: :func:`output_shapes` gives its outputs' shapes (its
  Relay type's).
- A lowered PrimFunc with **symbolic extents** (size variables as trailing int64 parameters, symbolic
  workspaces) or a **data-dependent** output (``nonzero``): :func:`needs_run_time_shapes` says so, and
  :func:`shaped_call` evaluates its shape functions (:mod:`plait.lowering.shape_func`) on the actual
  inputs when the call runs: it binds the size variables from the inputs' shapes, allocates the outputs
  and symbolic workspaces, and after the call :func:`plait.lowering.shape_func.trim_outputs` gives the
  data-dependent results their length.
- :func:`scan_shape` is the shape of a loop's scan output.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from plait.executor.errors import VMCodegenError
from plait.ir.types import DTYPES, TensorType, tensor_leaves


def needs_run_time_shapes(func: Any) -> bool:
    """Is ``func`` a PrimFunc whose buffers' shapes are known only when it is called (size variables,
    symbolic workspaces, a data-dependent output)?"""
    from plait.tir.expr import Var
    from plait.tir.stmt import PrimFunc

    if not isinstance(func, PrimFunc):
        return False
    return (any(isinstance(p, Var) for p in func.params) or bool(func.attrs.get("data_dependent"))
            or bool(func.attrs.get("dynamic_workspaces")))


def output_shapes(func: Any, input_shapes: Sequence[tuple[int, ...]] | None = None) -> list[tuple[int, ...]]:
    """The shape of every output (tuple results flattened) of the lowered function ``func`` (a PrimFunc
    with a ``relay_type``): its static result types, or, for a function with run-time shapes, its shape
    functions evaluated on ``input_shapes``."""
    name = getattr(func, "attrs", {}).get("global_symbol") or getattr(func, "name", "?")
    if needs_run_time_shapes(func):
        from plait.lowering.shape_func import output_shapes as evaluate

        if input_shapes is None:
            raise VMCodegenError(f"the VM executor: function '{name}' has run-time shapes: give its input shapes")
        return evaluate(func, input_shapes)
    ft = getattr(func, "relay_type", None)
    leaves = tensor_leaves(ft.ret_type) if ft is not None else None
    if leaves is None:
        raise VMCodegenError(f"the VM executor: function '{name}' has no tensor results")
    if any(not t.is_static for t in leaves):
        raise VMCodegenError(f"the VM executor: function '{name}' returns {', '.join(map(str, leaves))} but takes "
                             "no size variables to compute that shape from")
    return [tuple(int(d) for d in t.shape) for t in leaves]


def shaped_call(func: Any, fn: Callable, raw: bool, inputs: Sequence[np.ndarray], arenas: Sequence[np.ndarray],
                alloc: Callable[[tuple[int, ...], np.dtype], np.ndarray]) -> tuple[Any, list[np.ndarray]]:
    """Call the compiled ``fn`` of a PrimFunc with run-time shapes on ``inputs`` (contiguous arrays) and its
    static workspace ``arenas``; outputs and symbolic workspaces come from ``alloc(shape, dtype)``. Returns
    (the status, the Relay-level results: data-dependent outputs trimmed)."""
    import ctypes

    from plait.lowering.shape_func import (
        output_dtypes, scalar_args, size_var_values, trim_outputs, workspace_shapes,
    )
    from plait.lowering.shape_func import output_shapes as evaluate

    shapes = [a.shape for a in inputs]
    values = size_var_values(func, shapes)
    outs = [alloc(s, DTYPES[d]) for s, d in zip(evaluate(func, shapes), output_dtypes(func))]
    dyn = [alloc(s, DTYPES[d]) for s, d in workspace_shapes(func, values)]
    bufs = (*inputs, *outs, *arenas, *dyn)
    scalars = scalar_args(func, values)
    if raw:
        status = fn(*(ctypes.c_void_p(b.ctypes.data) for b in bufs), *scalars)
    else:
        status = fn(*bufs, *scalars)
    return status, trim_outputs(func, outs) if not status else outs


def view_shape(out: Sequence[Any], src: Sequence[Any], actual: tuple[int, ...], what: str) -> tuple[int, ...]:
    """The shape of a view (a reshape) made at run time: ``out`` is its type's shape (ints, names of symbolic
    dims, ``"?"``), ``src`` its source's type shape and ``actual`` the source's shape now. Named dims take
    their value from the source's dims of the same name; one dim left unknown is what the element count
    leaves for it."""
    env = {d: n for d, n in zip(src, actual) if isinstance(d, str) and d != "?"}
    dims: list[int | None] = [d if isinstance(d, int) else env.get(d) for d in out]
    unknown = [k for k, d in enumerate(dims) if d is None]
    total = int(np.prod(actual, dtype=np.int64))
    if len(unknown) == 1:
        rest = int(np.prod([d for d in dims if d is not None], dtype=np.int64))
        dims[unknown[0]] = total // rest if rest else 0
    elif unknown:
        raise VMCodegenError(f"the VM executor: {what}: the shape {tuple(out)} has several dims not known from "
                             f"its source's {tuple(src)}")
    if int(np.prod(dims, dtype=np.int64)) != total:
        raise VMCodegenError(f"the VM executor: {what}: {total} elements of shape {actual} do not fit the shape "
                             f"{tuple(dims)}")
    return tuple(int(d) for d in dims)  # type: ignore[arg-type]


def static_shape(t: TensorType, what: str) -> tuple[int, ...]:
    """The shape of a value the VM allocates at run time whose type is static (else a clear error)."""
    if not t.is_static:
        raise VMCodegenError(f"the VM executor: {what} has the type {t}; its shape is not known before it runs")
    return tuple(int(d) for d in t.shape)


def scan_shape(element_shape: Sequence[int], iterations: int) -> tuple[int, ...]:
    """The shape of a loop's scan output: the elements of ``iterations`` iterations stacked on axis 0."""
    return (int(iterations), *(int(d) for d in element_shape))


__all__ = ["needs_run_time_shapes", "output_shapes", "scan_shape", "shaped_call", "static_shape", "view_shape"]
