"""Operators: the registered primitives a Relay ``Call`` can apply.

An :class:`Op` declares everything later stages need to know about an operator:

- ``attrs``: the attribute schema (name, kind, default, one-line doc); calls are validated against it;
- ``rel``: the type relation ``(arg_types, attrs) -> result type`` (raises :class:`RelError`);
- ``ref``: the numpy reference implementation ``(args, attrs) -> array | tuple of arrays``;
- ``pattern``: the fusion kind (:class:`OpPattern`);
- ``cost``: FLOPs and bytes moved as a function of the argument and result types;
- ``compute``: the TE compute ``(inputs, attrs, out_type) -> te.Tensor | list`` (None: no default lowering);
- ``prim_func``: instead of a compute, for what TE cannot express (a data-dependent output shape): the
  TIR of one call, ``(arg_types, attrs, name) -> PrimFunc`` (see :mod:`plait.op.data_dependent`);
- ``onnx``: the declared ONNX mappings (:class:`plait.ir.onnx_map.OnnxMap`), read by import and export;
- ``check_constant_args``: an optional check of constant arguments run before folding a call.

The operators themselves are defined, and registered through an explicit manifest, in
:mod:`plait.op` (``plait.op.get_op``); this module only holds the machinery.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from plait.errors import AttrError, TypeInferenceError
from plait.ir.attrs import Attrs, normalize_value
from plait.ir.types import DTYPES, Type
from plait.ir.onnx_map import OnnxMap


class RelError(TypeInferenceError):
    """Raised by a type relation; type inference adds the call and operator to the message."""


class OpPattern(enum.IntEnum):
    """Fusion kind, ordered from most to least fusable (the order matters to fusion)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    OUT_ELEMWISE_FUSABLE = 4
    OPAQUE = 8


REQUIRED = object()

_ATTR_KINDS = ("int", "float", "bool", "str", "ints", "floats", "dtype", "any")


@dataclass(frozen=True)
class AttrSpec:
    """One attribute of an operator. ``kind`` is one of int, float, bool, str, ints, floats, dtype, any.

    ``optional`` allows ``None``; ``choices`` restricts a str attribute.
    """

    name: str
    kind: str
    default: Any = REQUIRED
    doc: str = ""
    optional: bool = False
    choices: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        assert self.kind in _ATTR_KINDS, self.kind

    def check(self, op_name: str, value: Any) -> Any:
        where = f"operator '{op_name}', attribute '{self.name}'"
        value = normalize_value(value, where)
        if value is None:
            if self.optional:
                return None
            raise AttrError(f"{where}: expected {self.kind}, got None")
        k = self.kind
        ok: bool
        if k == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif k == "float":
            if isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            ok = isinstance(value, float)
        elif k == "bool":
            if isinstance(value, int) and value in (0, 1):
                value = bool(value)
            ok = isinstance(value, bool)
        elif k in ("str", "dtype"):
            ok = isinstance(value, str)
        elif k == "ints":
            ok = isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        elif k == "floats":
            if isinstance(value, tuple):
                value = tuple(float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value)
            ok = isinstance(value, tuple) and all(isinstance(v, float) for v in value)
        else:
            ok = True
        if not ok:
            raise AttrError(f"{where}: expected {k}, got {value!r}")
        if k == "dtype" and value not in DTYPES:
            raise AttrError(f"{where}: unsupported dtype '{value}' (supported: {', '.join(DTYPES)})")
        if self.choices is not None and value not in self.choices:
            raise AttrError(f"{where}: expected one of {', '.join(self.choices)}, got {value!r}")
        return value


@dataclass(frozen=True)
class Cost:
    """Work of one call: floating-point (or integer) operations and bytes read and written."""

    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written


@dataclass(eq=False)
class Op:
    """An operator. Compared by identity (there is one object per name, registered by :mod:`plait.op`)."""

    name: str
    rel: Callable[[tuple[Type, ...], Attrs], Type]
    ref: Callable[[list, Attrs], Any]
    cost: Callable[[tuple[Type, ...], Type, Attrs], Cost]
    pattern: OpPattern = OpPattern.OPAQUE
    num_inputs: int | tuple[int, int | None] = 1
    attrs: tuple[AttrSpec, ...] = ()
    doc: str = ""
    compute: Callable[[list, Attrs, Type], Any] | None = None
    onnx: tuple[OnnxMap, ...] = ()
    check_constant_args: Callable[[list, tuple[Type, ...], Attrs], None] | None = None
    prim_func: Callable[[tuple[Type, ...], Attrs, str], Any] | None = None
    view: bool = False
    """The output is the input's bytes under another shape (reshape, flatten...): executors alias
    it instead of computing it (a call of only such operators is not lowered to a PrimFunc)."""

    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs)

    def make_attrs(self, given: Mapping[str, Any] | None = None) -> Attrs:
        """Validate ``given`` against the schema and fill defaults."""
        given = dict(given or {})
        specs = {a.name: a for a in self.attrs}
        unknown = sorted(set(given) - set(specs))
        if unknown:
            valid = ", ".join(self.attr_names) or "none"
            raise AttrError(f"operator '{self.name}': unknown attribute '{unknown[0]}' (valid: {valid})")
        out: dict[str, Any] = {}
        for spec in self.attrs:
            if spec.name in given:
                out[spec.name] = spec.check(self.name, given[spec.name])
            elif spec.default is REQUIRED:
                raise AttrError(f"operator '{self.name}': missing required attribute '{spec.name}'")
            else:
                out[spec.name] = spec.default
        return Attrs(out)

    def check_arity(self, n: int) -> str | None:
        """None if ``n`` arguments are fine, else a description of the expected count."""
        if isinstance(self.num_inputs, int):
            return None if n == self.num_inputs else f"{self.num_inputs}"
        lo, hi = self.num_inputs
        if n < lo or (hi is not None and n > hi):
            return f"{lo} to {hi}" if hi is not None else f"at least {lo}"
        return None

    def __repr__(self) -> str:
        return f"Op({self.name})"
