"""``--input-shapes`` and ``--opt-level`` (run, compile, explain): what the model is built with.

Grammar of ``--input-shapes`` (one or more entries separated by spaces; the flag may be repeated)::

    SHAPES := ENTRY (" " ENTRY)*
    ENTRY  := NAME ":" DIMS          NAME: the model's input name (no spaces; it may hold ':')
    DIMS   := D ("," D)* | "[" [D ("," D)*] "]"        D: a positive integer

e.g. ``"x:1,3,224,224 y:1,10"`` or tvmc's ``"x:[1,3,224,224] y:[1,10]"`` (spaces after the commas and
inside the brackets are allowed). They become the ``shape_overrides`` of :func:`plait.frontend.onnx.load_onnx`,
which checks them against the model.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from plait.cli.common import UsageError
from plait.errors import PlaitError

#: The opt level of the pass pipeline when --opt-level is not given (plait.build's default).
DEFAULT_OPT_LEVEL = 2
_EXAMPLE = 'e.g. "x:1,3,224,224 y:1,10"'


def parse_input_shapes(values: Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    """The --input-shapes values (one per use of the flag) as name -> shape; bad syntax is a UsageError."""
    shapes: dict[str, tuple[int, ...]] = {}
    for value in values or ():
        # spaces inside [...] and after a comma belong to the entry, not between entries
        text = re.sub(r"\[[^\]]*\]", lambda m: re.sub(r"\s+", "", m.group()), value)
        entries = re.sub(r",\s+", ",", text).split()
        if not entries:
            raise UsageError(f"--input-shapes: no shapes given; expected NAME:DIMS ..., {_EXAMPLE}")
        for entry in entries:
            name, shape = _entry(entry)
            if name in shapes:
                raise UsageError(f"--input-shapes: input '{name}' is given twice")
            shapes[name] = shape
    return shapes


def _entry(entry: str) -> tuple[str, tuple[int, ...]]:
    name, colon, dims = entry.rpartition(":")
    if not colon:
        raise UsageError(f"--input-shapes: '{entry}' is not NAME:DIMS, {_EXAMPLE}")
    if not name:
        raise UsageError(f"--input-shapes: '{entry}' has no input name before ':'")
    inner = dims[1:-1] if dims.startswith("[") and dims.endswith("]") else dims
    if inner == "" and dims == "[]":
        return name, ()  # a scalar input
    parts = inner.split(",")
    if not all(re.fullmatch(r"[+-]?\d+", p) for p in parts):
        raise UsageError(f"--input-shapes: input '{name}': '{dims}' is not a list of integers separated by "
                         "commas, e.g. 1,3,224,224 or [1,3,224,224]")
    shape = tuple(int(p) for p in parts)
    bad = next((k for k, d in enumerate(shape) if d <= 0), None)
    if bad is not None:
        raise UsageError(f"--input-shapes: input '{name}' dim {bad} is {shape[bad]}; dims must be positive")
    return name, shape


def format_shapes(shapes: Mapping[str, Sequence[Any]]) -> str:
    """``shapes`` as an --input-shapes value."""
    return " ".join(f"{n}:{','.join(str(d) for d in s)}" if s else f"{n}:[]" for n, s in shapes.items())


def parse_opt_level(text: str | None) -> int:
    """The --opt-level value: 0, 1, 2 or 3 (default 2); anything else is a UsageError."""
    if text is None:
        return DEFAULT_OPT_LEVEL
    if text.strip() not in ("0", "1", "2", "3"):
        raise UsageError(f"--opt-level: expected 0, 1, 2 or 3, got '{text}'")
    return int(text)


def load_with_shapes(path: str, shapes: Mapping[str, tuple[int, ...]], signature: str | None = None):
    """Load the model at ``path`` (TFLite, ONNX or Relay text) with ``shapes`` as its shape overrides
    (``signature``: a TFLite model's signature)."""
    from plait.cli.common import load_any, load_model
    from plait.frontend.shape_overrides import ShapeOverrideError

    if not shapes:
        return load_any(path, signature)
    if path.endswith(".relay"):
        raise UsageError(f"--input-shapes: not supported for a Relay text file ('{path}'): write the shapes in the "
                         "types of its @main parameters")
    try:
        return load_model(path, shapes, signature)
    except ShapeOverrideError as exc:
        raise PlaitError(f"--input-shapes: {exc.detail}") from None


def check_static(mod: Any, path: str, missing: Sequence[str] | None = None, executor: str = "graph") -> None:
    """Before a build for ``executor`` (``missing`` None), or before making random inputs for the inputs named
    in ``missing``: a PlaitError naming the first input with a symbolic dim and the --input-shapes that fix it
    (and, before a build, ``--executor vm``, which takes symbolic dims: nothing to check for it)."""
    from plait.executor import executors, get_executor
    from plait.relay.io import symbolic_dim_error

    if missing is None and get_executor(executor).capabilities.symbolic_shapes:
        return
    takes = " or ".join(f"--executor {e.name}" for e in executors() if e.capabilities.symbolic_shapes)
    relay = path.endswith(".relay")

    def how(examples: Mapping[str, tuple]) -> str:
        what = "them" if missing is None else "the shape"
        if relay:
            return f"write {what} in the types of the @main parameters of '{path}'"
        return f'{"give them" if missing is None else "the shape"} with --input-shapes "{format_shapes(examples)}"'

    if missing is None:
        msg = symbolic_dim_error(mod, lambda ex: f"{how(ex)}, or use {takes}",
                                 need=f"the {executor} executor needs static shapes")
    else:
        msg = symbolic_dim_error(mod, lambda ex: f"give the input in --inputs, or {how(ex)}", names=missing,
                                 need="random inputs need static shapes")
    if msg is not None:
        raise PlaitError(msg)


__all__ = ["DEFAULT_OPT_LEVEL", "check_static", "format_shapes", "load_with_shapes", "parse_input_shapes",
           "parse_opt_level"]
