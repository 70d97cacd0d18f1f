"""Run-time shapes for the VM: the ONE place where the shape of a tensor allocated at run time is decided.

:func:`output_shapes` gives the output shapes of a lowered function for the shapes of its inputs: for
now the static shapes of its Relay type; a function whose results have symbolic dims is refused
(``the VM executor does not run calls with symbolic shapes yet``). Lowered PrimFuncs with symbolic
extents carry their size variables as trailing int64 scalar parameters, in the order of the
``free_vars`` of their buffer shapes (:func:`plait.te.prim_func.build`): binding those from the input
shapes is where this function grows. :func:`scan_shape` is the shape of a loop's scan output.
"""

from __future__ import annotations

from typing import Any, Sequence

from plait.executor.vm_exec import VMCodegenError
from plait.ir.types import TensorType, tensor_leaves


def output_shapes(func: Any, input_shapes: Sequence[tuple[int, ...]] | None = None) -> list[tuple[int, ...]]:
    """The shape of every output (tuple results flattened) of the lowered function ``func`` (a PrimFunc
    with a ``relay_type``) called on inputs of ``input_shapes``. Raises :class:`VMCodegenError` for a
    function whose results have symbolic dims."""
    name = getattr(func, "attrs", {}).get("global_symbol") or getattr(func, "name", "?")
    ft = getattr(func, "relay_type", None)
    leaves = tensor_leaves(ft.ret_type) if ft is not None else None
    if leaves is None:
        raise VMCodegenError(f"the VM executor: function '{name}' has no tensor results")
    if any(not t.is_static for t in leaves):
        raise VMCodegenError(f"the VM executor does not run calls with symbolic shapes yet: function '{name}' "
                             f"returns {', '.join(map(str, leaves))}")
    return [tuple(int(d) for d in t.shape) for t in leaves]


def static_shape(t: TensorType, what: str) -> tuple[int, ...]:
    """The shape of a value the VM allocates at run time whose type is static (else a clear error)."""
    if not t.is_static:
        raise VMCodegenError(f"the VM executor does not run calls with symbolic shapes yet: {what} has the type {t}")
    return tuple(int(d) for d in t.shape)


def scan_shape(element_shape: Sequence[int], iterations: int) -> tuple[int, ...]:
    """The shape of a loop's scan output: the elements of ``iterations`` iterations stacked on axis 0."""
    return (int(iterations), *(int(d) for d in element_shape))


__all__ = ["output_shapes", "scan_shape", "static_shape"]
