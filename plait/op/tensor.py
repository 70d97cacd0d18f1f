"""Elementwise and broadcasting math operators (ONNX semantics)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from plait.op._common import (
    Attrs, OpPattern, RelError, TensorType, Type, as_tensor, broadcast_shapes, defop,
    elementwise_cost, same_dtype,
)


def binary_rel(out_dtype: str | None = None) -> Callable[[tuple[Type, ...], Attrs], Type]:
    """Broadcasting binary relation; both inputs share a dtype; result dtype = it or ``out_dtype``."""

    def rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
        a, b = (as_tensor(t, f"argument {i}") for i, t in enumerate(args))
        dt = same_dtype((a, b))
        return TensorType(broadcast_shapes(a.shape, b.shape), out_dtype or dt)

    return rel


def unary_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    return as_tensor(args[0])


def float_unary_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    t = as_tensor(args[0])
    if not t.dtype.startswith("float"):
        raise RelError(f"expected a floating-point tensor, got {t}")
    return t


def defbinary(name: str, fn: Callable, flops: float = 1.0, out_dtype: str | None = None, doc: str = "") -> None:
    def ref(args: list, attrs: Attrs) -> np.ndarray:
        a, b = args
        out = fn(a, b)
        return np.asarray(out, dtype=out_dtype or a.dtype)

    defop(name, rel=binary_rel(out_dtype), ref=ref, cost=elementwise_cost(flops),
          pattern=OpPattern.BROADCAST, num_inputs=2, doc=doc)


def defunary(name: str, fn: Callable, flops: float = 1.0, floats_only: bool = False, doc: str = "",
             attrs=(), ) -> None:
    def ref(args: list, attrs: Attrs) -> np.ndarray:
        (x,) = args
        return np.asarray(fn(x, attrs), dtype=x.dtype)

    defop(name, rel=float_unary_rel if floats_only else unary_rel, ref=ref,
          cost=elementwise_cost(flops), pattern=OpPattern.ELEMWISE, num_inputs=1, attrs=attrs, doc=doc)


defbinary("add", np.add, doc="a + b, broadcasting")
defunary("nn.relu", lambda x, a: np.maximum(x, np.zeros((), x.dtype)), doc="max(x, 0)")
