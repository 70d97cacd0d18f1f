"""Model inputs and outputs by name: what the CLI and tests use to feed and read a module."""

from __future__ import annotations

from typing import Any, Collection, Mapping

import numpy as np

from plait.errors import PlaitError
from plait.ir.types import DTYPES, TensorType
from plait.limits import check_bytes
from plait.relay.module import IRModule


def input_names(mod: IRModule, func: str = "main") -> list[str]:
    return [p.name_hint for p in mod[func].params]


def output_names(mod: IRModule, count: int) -> list[str]:
    """The model's output names (module attr ``output_names``), else ``output_0``, ``output_1``..."""
    names = mod.attrs.get("output_names")
    if names and len(names) == count:
        return list(names)
    return [f"output_{i}" for i in range(count)]


#: What ``make_inputs`` puts in the inputs not given (``plait run --fill``).
FILLS = ("random", "zeros", "ones")


def random_input(t: TensorType, rng: np.random.Generator, name: str, dims: Mapping[str, int] | None = None,
                 memory_limit: int | str | None = None, fill: str = "random") -> np.ndarray:
    """An array of type ``t``: random (floats standard normal, integers in [0, 10), bools 0/1) or, with
    ``fill`` "zeros" or "ones", constant; its byte count is checked against ``memory_limit`` (None: the
    default of :mod:`plait.limits`) before anything is allocated."""
    if fill not in FILLS:
        raise PlaitError(f"unknown fill '{fill}' (expected {', '.join(FILLS)})")
    shape = []
    for d in t.shape:
        if isinstance(d, int):
            shape.append(d)
        elif dims and d in dims:
            shape.append(dims[d])
        else:
            raise PlaitError(f"input '{name}' has symbolic dimension '{d}': give the input explicitly")
    if any(d < 0 for d in shape):
        raise PlaitError(f"input '{name}' has a negative dimension in its shape {shape}")
    dt = DTYPES[t.dtype]
    nbytes = dt.itemsize
    for d in shape:
        nbytes *= d
    what = f"random input '{name}'" if fill == "random" else f"input '{name}' filled with {fill}"
    check_bytes(nbytes, f"{what} ({t.dtype}{shape})", memory_limit)
    if fill == "zeros":
        return np.zeros(shape, dt)
    if fill == "ones":
        return np.ones(shape, dt)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(dt)
    return rng.integers(0, 10, shape).astype(dt)


def make_inputs(mod: IRModule, given: Mapping[str, Any], seed: int = 0, func: str = "main",
                memory_limit: int | str | None = None, fill: str = "random") -> dict[str, np.ndarray]:
    """``given`` inputs by name, the rest made by ``fill`` (see :func:`random_input`; random ones from a
    fixed seed, per input, in parameter order); each made input is checked against ``memory_limit``
    before it is made."""
    types = {p.name_hint: p.type_annotation for p in mod[func].params}
    return fill_inputs(types, given, seed, memory_limit, fill)


def fill_inputs(types: Mapping[str, Any], given: Mapping[str, Any], seed: int = 0,
                memory_limit: int | str | None = None, fill: str = "random") -> dict[str, np.ndarray]:
    """:func:`make_inputs` for inputs known by name and type (in order), e.g. an exported artifact's."""
    names = list(types)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise PlaitError(f"unknown input '{unknown[0]}' (inputs are: {', '.join(names)})")
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name, t in types.items():
        if name in given:
            out[name] = np.asarray(given[name])
        elif isinstance(t, TensorType):
            out[name] = random_input(t, rng, name, memory_limit=memory_limit, fill=fill)
        else:
            raise PlaitError(f"input '{name}' of type {t} must be given explicitly")
    return out


def symbolic_inputs(mod: IRModule, func: str = "main") -> dict[str, tuple]:
    """The inputs of ``func`` whose shape has a symbolic (a name) or unknown (``"?"``) dim: name -> shape,
    in parameter order."""
    out: dict[str, tuple] = {}
    for p in mod[func].params:
        t = p.type_annotation if p.type_annotation is not None else getattr(p, "checked_type", None)
        if isinstance(t, TensorType) and not t.is_static:
            out[p.name_hint] = tuple(t.shape)
    return out


def symbolic_dim_error(mod: IRModule, how: Any, names: Collection[str] | None = None,
                       need: str = "the graph executor needs static shapes") -> str | None:
    """The error for a module that an executor cannot run (or given random inputs: ``need``) because an input (of
    ``names``, default all) has a symbolic dim, naming the first such input and dim; None when they are all
    static. ``how(examples)`` ends the message with how to give the shapes, from ``examples`` (name -> the
    shape with every symbolic dim set to 1)."""
    sym = {n: s for n, s in symbolic_inputs(mod).items() if names is None or n in names}
    if not sym:
        return None
    name, shape = next(iter(sym.items()))
    k, dim = next((k, d) for k, d in enumerate(shape) if not isinstance(d, int))
    what = "an unknown dimension" if dim == "?" else f"a symbolic dimension '{dim}'"
    examples = {n: tuple(d if isinstance(d, int) else 1 for d in s) for n, s in sym.items()}
    return f"input '{name}' has {what} (dim {k}); {need}: {how(examples)}"
