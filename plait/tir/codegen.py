"""What the code generators of PrimFuncs share (the C emitter, :mod:`plait.backends.c.emit`, and the
LLVM emitter, :mod:`plait.backends.llvm.emit`): the per-function facts both need (written buffers,
integer bounds), their errors, the statement dispatch, and the row-major offset of a buffer access
with fused-loop index pairs recognized. Each emitter supplies the text of its own language.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Generic, TypeVar

from plait.errors import PlaitError
from plait.tir.equal import structural_equal
from plait.tir.expr import Add, AddressOf, Call, Cast, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Sub, TruncDiv, TruncMod, Var
from plait.tir.functor import pre_order
from plait.tir.int_bounds import IntBounds
from plait.tir.kernels import written_args
from plait.tir.stmt import Buffer, BufferStore, PrimFunc, Stmt

V = TypeVar("V")  # an emitted value: C text, an LLVM register...


def fused_pair(a: PrimExpr, b: PrimExpr, inner: PrimExpr) -> PrimExpr | None:
    """``x`` when two adjacent indices are ``(x / n, x % n)`` (trunc or floor, ``n > 0`` the inner
    dimension's size, ``x`` plain integer arithmetic, min and max included: an overlapping split's
    ``min(o * 16, 109) + i``): ``(x / n) * n + x % n == x`` for every ``x``."""
    pairs = ((TruncDiv, TruncMod), (FloorDiv, FloorMod))
    if (type(a), type(b)) not in pairs or not isinstance(a.b, IntImm) or not isinstance(b.b, IntImm):
        return None
    if not (isinstance(inner, IntImm) and a.b.value == b.b.value == inner.value > 0):
        return None
    if not structural_equal(a.a, b.a) or any(not isinstance(n, (Var, IntImm, Add, Sub, Mul, Min, Max, Cast))
                                            for n in pre_order(a.a)):
        return None
    return a.a


def static_size(buf: Buffer) -> int | None:
    """The element count of a buffer with a static shape (at least 1), else None."""
    static = buf.static_shape
    if static is None:
        return None
    size = 1
    for n in static:
        size *= n
    return max(size, 1)


def has_extern_call(e: PrimExpr) -> bool:
    """Does evaluating ``e`` call an extern function or a kernel (so an ``Evaluate`` of it must be emitted)?"""
    return any(isinstance(n, Call) and n.kind != "intrin" for n in pre_order(e))


def static_index_terms(dims: tuple[PrimExpr, ...], nodes: tuple[PrimExpr, ...], vals: list[V],
                       fused: Callable[[PrimExpr], V]) -> tuple[list[tuple[PrimExpr, V, int]], int] | None:
    """The row-major offset of ``buf[nodes]`` (``vals``: the indices' emitted values) when every
    dimension but the first is a constant: ``(terms, constant)`` with one ``(index, value, stride)``
    per non-constant index, constant indices folded into ``constant``, and a fused loop's
    ``(x / n, x % n)`` pair taken as ``x * stride(inner)`` (linear for the vectorizers; ``fused(x)``
    emits ``x``). None when a dimension after the first is not a constant."""
    if not all(isinstance(d, IntImm) for d in dims[1:]):
        return None
    strides, s = [], 1
    for d in reversed(dims):
        strides.append(s)
        s *= d.value if isinstance(d, IntImm) else 1
    strides.reverse()
    terms: list[tuple[PrimExpr, V, int]] = []
    const, k = 0, 0
    while k < len(nodes):
        node, v, stride = nodes[k], vals[k], strides[k]
        k += 1
        if k < len(nodes) and (x := fused_pair(node, nodes[k], dims[k])) is not None:
            node, v, stride = x, fused(x), strides[k]
            k += 1
        if isinstance(node, IntImm):
            const += node.value * stride
            continue
        terms.append((node, v, stride))
    return terms, const


def written_buffers(func: PrimFunc) -> set[Buffer]:
    """The buffers ``func`` may write: those it stores to and those whose address it takes, except an
    address passed to a kernel at a position it only reads (:func:`plait.tir.kernels.written_args`: such a
    parameter stays ``const``)."""
    out: set[Buffer] = set()
    stack: list[Any] = [func.body]
    seen: set[int] = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, (BufferStore, AddressOf)):
            out.add(n.buffer)
        writes = written_args(n) if isinstance(n, Call) else None
        if writes is not None:  # (the indices of the addresses it only reads are still walked)
            for k, a in enumerate(n.args):
                stack.extend(a.indices if isinstance(a, AddressOf) and k not in writes else (a,))
            continue
        stack.extend(n._children())
    return out


class FunctionEmitterBase(Generic[V]):
    """One PrimFunc -> one function of the target language. Subclasses set ``language`` (for
    messages) and ``error`` (the exception class), implement ``function()`` and one ``stmt_<kind>``
    method per statement kind (``stmt_seq``, ``stmt_buffer_store``, ``stmt_for``...), called by
    :meth:`dispatch`."""

    language: ClassVar[str] = "?"
    error: ClassVar[type[PlaitError]] = PlaitError

    def __init__(self, func: PrimFunc, where: str):
        self.func, self.where = func, where
        self.written = written_buffers(func)
        self.int_bounds = IntBounds(func)

    def fail(self, msg: str) -> PlaitError:
        """The error to raise for TIR this emitter cannot express (naming the function)."""
        return self.error(f"{self.language} codegen of {self.where}: {msg}")

    def check_scalar_param(self, p: Var) -> None:
        """Scalar parameters are passed by value: float16 and handle ones cannot be."""
        if p.dtype in ("float16", "handle"):
            raise self.fail(f"scalar parameter '{p.name}' has dtype {p.dtype}, which the {self.language} backend "
                            "cannot pass (use a buffer)")

    def dispatch(self, s: Stmt, *args: Any) -> Any:
        """Emit statement ``s`` with its ``stmt_<kind>`` method."""
        method = getattr(self, "stmt_" + s._kind, None)
        if method is None:
            raise self.fail(f"cannot emit {type(s).__name__}")  # pragma: no cover - verify rejects it first
        return method(s, *args)


__all__ = ["FunctionEmitterBase", "fused_pair", "has_extern_call", "static_index_terms", "static_size"]
