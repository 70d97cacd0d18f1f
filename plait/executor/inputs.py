"""Binding a run's inputs, given positionally and by name, to a model's input names, and checking their
shapes against the model's (static and symbolic) dims (AotModule, QemuModule and VirtualMachine share
it; messages are raised as the caller's error class)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np


def _shape_text(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def check_shapes(shapes: Mapping[str, Sequence[int | str]], given: Mapping[str, Any], error: type[Exception]) -> None:
    """Every input of ``given`` against its model shape in ``shapes`` (an ``int`` dim must be equal; a
    named dim takes the same size in every input; ``"?"`` is anything). Raises ``error`` naming the input
    and the dimension."""
    sizes: dict[str, tuple[int, str]] = {}  # dim name -> (size, the input that set it)
    for name, want in shapes.items():
        if name not in given:
            continue
        got = np.shape(given[name])
        if len(got) != len(want):
            raise error(f"input '{name}': expected {len(want)} dimensions {_shape_text(want)}, got {len(got)} "
                        f"{_shape_text(got)}")
        for k, (w, g) in enumerate(zip(want, got)):
            if isinstance(w, int):
                if w != g:
                    raise error(f"input '{name}': dimension {k} is {g}, expected {w} (expected shape "
                                f"{_shape_text(want)}, got {_shape_text(got)})")
            elif w != "?":
                if w in sizes and sizes[w][0] != g:
                    size, first = sizes[w]
                    raise error(f"input '{name}': dimension {k} ({w}) is {g}, but input '{first}' has {w} = {size}")
                sizes.setdefault(w, (int(g), name))


def bind_inputs(names: Sequence[str], args: tuple, inputs: dict[str, Any], error: type[Exception],
                shapes: Mapping[str, Sequence[int | str]] | None = None) -> dict[str, Any]:
    """``{name: value}`` for every input of ``names``: ``args`` in order, then ``inputs`` by name. Raises
    ``error`` for too many positional inputs, an input given twice, an unknown name, or a missing one;
    with ``shapes`` (the model's shape of each input), for a shape that does not fit
    (:func:`check_shapes`)."""
    if len(args) > len(names):
        raise error(f"expected at most {len(names)} inputs, got {len(args)}")
    given = {names[k]: v for k, v in enumerate(args)}
    for k, v in inputs.items():
        if k in given:
            raise error(f"input '{k}' given twice")
        if k not in names:
            raise error(f"the model has no input {k!r} (inputs: {', '.join(names) or 'none'})")
        given[k] = v
    missing = [n for n in names if n not in given]
    if missing:
        raise error(f"missing input(s): {', '.join(missing)}")
    if shapes is not None:
        check_shapes(shapes, given, error)
    return given


__all__ = ["bind_inputs", "check_shapes"]
