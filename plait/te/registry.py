"""The TE compute of each operator: ``register_compute("nn.relu")(fn)`` / ``get_compute("nn.relu")``.

A compute is ``fn(inputs: list[te.Tensor], attrs: plait.ir.Attrs, out_type: plait.ir.Type)
-> te.Tensor | list[te.Tensor]`` (one tensor per field of a tuple result). The standard computes
live in :mod:`plait.te.computes`, loaded on the first :func:`get_compute`.
"""

from __future__ import annotations

from typing import Any, Callable

from plait.registry import Registry

ComputeFn = Callable[[list, Any, Any], Any]

COMPUTES: Registry[ComputeFn] = Registry("TE compute")


def register_compute(op_name: str) -> Callable[[ComputeFn], ComputeFn]:
    """Decorator: register ``fn`` as the TE compute of operator ``op_name`` (duplicates raise)."""

    def deco(fn: ComputeFn) -> ComputeFn:
        COMPUTES.register(op_name, fn)
        return fn

    return deco


def _load_standard() -> None:
    import plait.te.computes  # noqa: F401  (registers the standard computes)


def get_compute(op_name: str) -> ComputeFn:
    """The compute of ``op_name``; raises :class:`plait.errors.RegistryError` if it has none."""
    if op_name not in COMPUTES:
        _load_standard()
    return COMPUTES.get(op_name)


def has_compute(op_name: str) -> bool:
    if op_name not in COMPUTES:
        _load_standard()
    return op_name in COMPUTES
