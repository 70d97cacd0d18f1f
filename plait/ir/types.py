"""Types shared by every IR: tensor types with (possibly symbolic) shapes, tuples, functions.

A dimension is an ``int`` (static) or a ``str`` (symbolic): either an identifier such as ``"n"``
or ``"?"`` for a dimension nobody can name. Types are small frozen dataclasses, so ``==`` and
``hash`` are structural.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

import numpy as np

from plait.errors import PlaitError

Dim = Union[int, str]
ANY_DIM = "?"

# dtype name -> numpy dtype. Names follow numpy; every entry is a dtype plait can compute in.
DTYPES: dict[str, np.dtype] = {
    name: np.dtype(name)
    for name in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "float32", "float64",
    )
}
FLOAT_DTYPES = frozenset({"float16", "float32", "float64"})
INT_DTYPES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})

_SYM_RE = re.compile(r"^(\?|[A-Za-z_][A-Za-z0-9_]*)$")


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise PlaitError(f"unsupported dtype '{dtype}' (supported: {', '.join(DTYPES)})")
    return dtype


def dtype_of(array: np.ndarray) -> str:
    name = np.asarray(array).dtype.name
    return check_dtype(name)


def is_static(dim: Dim) -> bool:
    return isinstance(dim, int)


class Type:
    """Base class of types."""

    __slots__ = ()


@dataclass(frozen=True)
class TensorType(Type):
    shape: tuple[Dim, ...]
    dtype: str = "float32"

    def __post_init__(self) -> None:
        shape = tuple(_norm_dim(d) for d in self.shape)
        object.__setattr__(self, "shape", shape)
        check_dtype(self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    @property
    def size(self) -> int:
        """Number of elements; raises for symbolic shapes."""
        if not self.is_static:
            raise PlaitError(f"tensor type {self} has a symbolic shape")
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * DTYPES[self.dtype].itemsize

    def __str__(self) -> str:
        return f"Tensor[({', '.join(str(d) for d in self.shape)}{',' if len(self.shape) == 1 else ''}), {self.dtype}]"


@dataclass(frozen=True)
class TupleType(Type):
    fields: tuple[Type, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))

    def __str__(self) -> str:
        return f"({', '.join(str(f) for f in self.fields)}{',' if len(self.fields) == 1 else ''})"


@dataclass(frozen=True)
class FuncType(Type):
    arg_types: tuple[Type, ...]
    ret_type: Type

    def __post_init__(self) -> None:
        object.__setattr__(self, "arg_types", tuple(self.arg_types))

    def __str__(self) -> str:
        return f"fn ({', '.join(str(a) for a in self.arg_types)}) -> {self.ret_type}"


def tuple_fields(t: Type) -> tuple[Type, ...]:
    """One level of flattening: a tuple's fields, or ``(t,)`` for any other type."""
    return t.fields if isinstance(t, TupleType) else (t,)


def tensor_leaves(t: Type) -> list[TensorType] | None:
    """The tensors of ``t`` in order: ``[t]`` for a tensor, the fields of a tuple flattened (nested
    tuples too, depth first); None when some leaf is not a tensor (e.g. a function type)."""
    out: list[TensorType] = []
    stack = [t]
    while stack:
        x = stack.pop()
        if isinstance(x, TensorType):
            out.append(x)
        elif isinstance(x, TupleType):
            stack.extend(reversed(x.fields))
        else:
            return None
    return out


def _norm_dim(d: object) -> Dim:
    if isinstance(d, (bool, np.bool_)):
        raise PlaitError(f"invalid dimension {d!r}")
    if isinstance(d, (int, np.integer)):
        if d < 0:
            raise PlaitError(f"invalid dimension {int(d)}: dimensions are >= 0 (use a name for unknown sizes)")
        return int(d)
    if isinstance(d, str) and _SYM_RE.match(d):
        return d
    raise PlaitError(f"invalid dimension {d!r}: expected an int >= 0 or an identifier")


def tensor_type_of(array: np.ndarray) -> TensorType:
    a = np.asarray(array)
    return TensorType(a.shape, dtype_of(a))
