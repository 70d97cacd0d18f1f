"""Binding a run's inputs, given positionally and by name, to a model's input names (AotModule and
QemuModule share it; messages are raised as the caller's error class)."""

from __future__ import annotations

from typing import Any, Sequence


def bind_inputs(names: Sequence[str], args: tuple, inputs: dict[str, Any], error: type[Exception]) -> dict[str, Any]:
    """``{name: value}`` for every input of ``names``: ``args`` in order, then ``inputs`` by name. Raises
    ``error`` for too many positional inputs, an input given twice, an unknown name, or a missing one."""
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
    return given


__all__ = ["bind_inputs"]
