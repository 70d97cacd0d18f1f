"""``shape_overrides`` (of :func:`plait.frontend.onnx.from_onnx`) checked against a model's declared input
shapes: an override fixes symbolic or unknown dims; it keeps the declared rank and every static dim."""

from __future__ import annotations

from typing import Any, Sequence

from plait.errors import FrontendError


class ShapeOverrideError(FrontendError):
    """An override that does not fit the model. ``detail`` is the message without the ``shape_overrides:``
    prefix, so that the command line can say ``--input-shapes:`` instead."""

    def __init__(self, detail: str):
        super().__init__(f"shape_overrides: {detail}")
        self.detail = detail


def _text(shape: Sequence[Any]) -> str:
    return f"({', '.join(str(d) for d in shape)}{',' if len(shape) == 1 else ''})"


def check_override(name: str, declared: Sequence[Any] | None, override: Any) -> tuple:
    """The override of input ``name`` as a shape tuple; ``declared`` is the model's shape (ints for static
    dims, names or ``"?"`` for the others), None when the model gives no rank. Raises ShapeOverrideError
    for a dim that is not a non-negative int or a name, a different rank, or a static dim changed."""
    if isinstance(override, (str, bytes)) or not hasattr(override, "__iter__"):
        raise ShapeOverrideError(f"input '{name}': expected a sequence of dims, got {override!r}")
    shape = tuple(override)
    for k, d in enumerate(shape):
        ok = (isinstance(d, int) and not isinstance(d, bool) and d >= 0) or (isinstance(d, str) and d != "")
        if not ok:
            raise ShapeOverrideError(f"input '{name}' dim {k}: expected a non-negative int or a name, got {d!r}")
    if declared is None:
        return shape
    if len(shape) != len(declared):
        raise ShapeOverrideError(f"input '{name}' has {len(declared)} dims {_text(declared)}; got {len(shape)} "
                                 f"{_text(shape)}")
    for k, (want, got) in enumerate(zip(declared, shape)):
        if isinstance(want, int) and want != got:
            raise ShapeOverrideError(f"input '{name}' dim {k} is {want} in the model, not {got} (the model "
                                     f"declares {_text(declared)}; only its symbolic dims can be set)")
    return shape


__all__ = ["ShapeOverrideError", "check_override"]
