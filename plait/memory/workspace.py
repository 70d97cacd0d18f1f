"""Workspace lifting: ``global.workspace`` allocations -> slices of a workspace arena parameter.

Scratch memory of a PrimFunc (the materialized intermediate stages of a TE compute, a padded
input, a hook's im2col buffer) is written as ``Allocate(buffer)`` in scope ``global.workspace``.
:func:`lift_workspaces` turns every such allocation whose size is static into a slice of one
extra buffer parameter, the function's **workspace arena**, appended after every other parameter:

    @prim_func(global_symbol="f", num_inputs=1, workspace_bytes=128, workspace_param=2)
    def f(x: Buffer((8,), float32), y: Buffer((8,), float32), workspace: Buffer((32,), float32)):
        for i in serial(0, 8):
            workspace[i] = exp(x[i])          # was: exps = allocate((8,), float32, scope="global.workspace")
        ...

- Each slice starts at a byte offset that is a multiple of 64 (:data:`ALIGN`); ``attrs
  ["workspace_bytes"]`` is the arena's size in bytes (a multiple of 64), ``attrs
  ["workspace_param"]`` the position of the (first) arena parameter. Slices whose buffers are
  never live at the same time share offsets: liveness is measured in the top-level statements of
  the body (a stage's loop nest is one statement), so two stages' buffers overlap exactly when
  some top-level statement between their first and last use touches both.
- Accesses become 1-d accesses of the arena at ``offset + row-major index`` (a ``(x / n, x % n)``
  pair of indices over a dimension of size ``n`` folds back to ``x``).
- TIR has no typed view of raw bytes, so the arena is a typed buffer: one parameter per distinct
  dtype of the lifted buffers, in order of first allocation (almost always exactly one). Every
  arena parameter of a function covers the whole arena (``workspace_bytes / itemsize``
  elements) and the caller passes the **same** memory to each; buffers of different dtypes never
  share bytes. The C code generator declares such arena parameters without ``restrict`` (gcc's
  ``-Wrestrict`` refuses one address passed to two ``restrict`` parameters).
  ``attrs["workspace_param"]`` is the first of them; they are the last buffer parameters.
- An allocation with a symbolic size (a stage over a symbolic batch) becomes a buffer parameter of
  its own, of the same (symbolic) shape, after the arena parameters; ``attrs["dynamic_workspaces"]``
  counts them. The caller allocates each one (its shape evaluated with the size variables bound:
  :func:`plait.lowering.shape_func.workspace_shapes`). Size variables (scalar parameters) stay the
  last parameters: arenas and these buffers are inserted before them. ``local`` allocations are left
  as they are. The Relay type of the function (:attr:`PrimFunc.relay_type`) includes none of them.

:class:`LiftWorkspaces` applies it to every PrimFunc of an IRModule that is not an external
declaration (``attrs["external"]``). Run it after lowering and before code generation; the graph
executor then passes a workspace buffer it plans (:mod:`plait.memory.plan`).
:func:`workspace_arrays` makes the arena arguments for running a lifted function directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from plait.ir.transform import Pass, PassContext
from plait.ir.types import DTYPES
from plait.tir.errors import TIRError
from plait.tir.expr import (
    Add, AddressOf, BufferLoad, Cast, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Sub, TruncDiv, TruncMod, Var,
)
from plait.tir.functor import StmtExprMutator, pre_order
from plait.tir.stmt import Allocate, Buffer, BufferStore, LetStmt, PrimFunc, SeqStmt, Stmt

ALIGN = 64
"""Byte alignment of every slice of a workspace arena (and of the arena's size)."""

WORKSPACE_SCOPE = "global.workspace"


def _round_up(n: int, a: int = ALIGN) -> int:
    return (n + a - 1) // a * a


def _nbytes(b: Buffer) -> int:
    shape = b.static_shape
    assert shape is not None
    return max(int(np.prod(shape, dtype=np.int64)), 1) * DTYPES[b.dtype].itemsize


@dataclass
class Slice:
    """Where one lifted buffer lives in the arena."""

    buffer: Buffer
    offset: int  # bytes, a multiple of ALIGN
    nbytes: int
    first: int  # first and last top-level statement using it
    last: int


def _top_level(body: Stmt) -> list[Stmt]:
    """The statements whose order defines liveness: under the chain of allocations and lets at the
    root, the items of the sequence (or the one statement)."""
    s = body
    while isinstance(s, (Allocate, LetStmt)):
        s = s.body
    return list(s.stmts) if isinstance(s, SeqStmt) else [s]


def plan_slices(func: PrimFunc, share: bool = True) -> tuple[list[Slice], int]:
    """The slices of the liftable allocations of ``func`` and the arena size in bytes."""
    allocs = [n.buffer for n in pre_order(func.body, unique=True)
              if isinstance(n, Allocate) and n.buffer.scope == WORKSPACE_SCOPE and n.buffer.static_shape is not None]
    if not allocs:
        return [], 0
    wanted = set(allocs)
    first: dict[Buffer, int] = {}
    last: dict[Buffer, int] = {}
    for k, stmt in enumerate(_top_level(func.body)):
        for n in pre_order(stmt, unique=True):
            b = n.buffer if isinstance(n, (BufferLoad, BufferStore, AddressOf, Allocate)) else None
            if b in wanted:
                first.setdefault(b, k)
                last[b] = k
    slices = [Slice(b, 0, _nbytes(b), first.get(b, -1), last.get(b, -1)) for b in allocs]
    order = sorted(range(len(slices)), key=lambda i: (-slices[i].nbytes, i))  # biggest first, then program order
    placed: list[Slice] = []
    for i in order:
        s = slices[i]
        conflicts = sorted((p for p in placed if not share or p.buffer.dtype != s.buffer.dtype
                            or not (p.last < s.first or s.last < p.first) or p.first < 0 or s.first < 0),
                           key=lambda p: p.offset)
        offset = 0
        for p in conflicts:  # the lowest aligned offset clear of every conflicting slice
            if offset + s.nbytes <= p.offset:
                break
            offset = max(offset, _round_up(p.offset + p.nbytes))
        s.offset = offset
        placed.append(s)
    total = _round_up(max(s.offset + s.nbytes for s in slices))
    return slices, total


def _fused(a: PrimExpr, b: PrimExpr, n: int) -> PrimExpr | None:
    """``x`` when ``(a, b)`` is ``(x / n, x % n)`` (trunc or floor) of plain integer arithmetic (min and
    max included: an overlapping split's index, plait/schedule/loops.py)."""
    if (type(a), type(b)) not in ((TruncDiv, TruncMod), (FloorDiv, FloorMod)):
        return None
    if not (isinstance(a.b, IntImm) and isinstance(b.b, IntImm) and a.b.value == b.b.value == n > 0):
        return None
    if a.a is not b.a and not _same(a.a, b.a):
        return None
    if any(not isinstance(x, (Var, IntImm, Add, Sub, Mul, Min, Max, Cast)) for x in pre_order(a.a)):
        return None
    return a.a


def _same(x: PrimExpr, y: PrimExpr) -> bool:
    from plait.tir.equal import structural_equal

    return structural_equal(x, y)


def _i64(e: PrimExpr) -> PrimExpr:
    return e if e.dtype == "int64" else Cast("int64", e)


def flat_index(buf: Buffer, indices: tuple[PrimExpr, ...], offset: int) -> PrimExpr:
    """``offset + row-major index of buf[indices]`` as one int64 expression (static shape)."""
    shape = buf.static_shape
    assert shape is not None
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    const, terms = offset, []
    k = 0
    while k < len(indices):
        idx, stride = indices[k], strides[k]
        if k + 1 < len(indices) and (x := _fused(idx, indices[k + 1], shape[k + 1])) is not None:
            idx, stride = x, strides[k + 1]
            k += 1
        k += 1
        if isinstance(idx, IntImm):
            const += idx.value * stride
            continue
        e = _i64(idx)
        terms.append(e if stride == 1 else Mul(e, IntImm(stride, "int64")))
    out: PrimExpr | None = None
    for t in terms:
        out = t if out is None else Add(out, t)
    if out is None:
        return IntImm(const, "int64")
    return Add(out, IntImm(const, "int64")) if const else out


class _Lift(StmtExprMutator):
    def __init__(self, where: dict[Buffer, tuple[Buffer, int]], dynamic: set[Buffer]):
        super().__init__()
        self.where = where  # lifted buffer -> (arena param, element offset)
        self.dynamic = dynamic  # symbolic workspaces: their allocation goes (they become parameters)

    def _access(self, pre: Any, post: Any) -> Any:
        hit = self.where.get(pre.buffer)
        if hit is None:
            return post
        arena, off = hit
        idx = (flat_index(pre.buffer, post.indices, off),)
        if isinstance(post, BufferStore):
            return BufferStore(arena, post.value, idx)
        return type(post)(arena, idx)

    rewrite_buffer_load = _access
    rewrite_address_of = _access
    rewrite_buffer_store = _access

    def rewrite_allocate(self, pre: Allocate, post: Allocate) -> Stmt:
        return post.body if pre.buffer in self.where or pre.buffer in self.dynamic else post


class _Rebind(StmtExprMutator):
    """Accesses of each symbolic workspace buffer -> the parameter buffer replacing it (global scope)."""

    def __init__(self, old: list[Buffer], new: list[Buffer]):
        super().__init__()
        self.map = dict(zip(old, new))

    def rewrite_buffer(self, buffer: Buffer) -> Buffer:
        return self.map.get(buffer, buffer)


def lift_workspaces(func: PrimFunc, share: bool = True) -> PrimFunc:
    """``func`` with its static ``global.workspace`` allocations turned into slices of workspace
    arena parameters and its symbolic ones into buffer parameters of their own (see the module
    docstring). Returns ``func`` itself when it has none."""
    if not isinstance(func, PrimFunc):
        raise TIRError(f"lift_workspaces expects a PrimFunc, got {type(func).__name__}")
    slices, total = plan_slices(func, share)
    dynamic = [n.buffer for n in pre_order(func.body, unique=True)
               if isinstance(n, Allocate) and n.buffer.scope == WORKSPACE_SCOPE and n.buffer.static_shape is None]
    if not slices and not dynamic:
        return func
    name = func.name or "<anonymous>"
    if "workspace_param" in func.attrs:
        raise TIRError(f"lift_workspaces: PrimFunc '{name}' already has a workspace arena (attrs workspace_param) "
                       "and still allocates global.workspace buffers")
    dtypes = list(dict.fromkeys(s.buffer.dtype for s in slices))
    arenas = {d: Buffer("workspace" if len(dtypes) == 1 else f"workspace_{d}", (total // DTYPES[d].itemsize,), d)
              for d in dtypes}
    where = {s.buffer: (arenas[s.buffer.dtype], s.offset // DTYPES[s.buffer.dtype].itemsize) for s in slices}
    body = _Lift(where, set(dynamic)).visit(func.body)
    k = len(func.params)
    while k and isinstance(func.params[k - 1], Var):  # size variables stay the last parameters
        k -= 1
    own = [Buffer(b.name, b.shape, b.dtype) for b in dynamic]  # global scope: the caller allocates them
    params = (*func.params[:k], *arenas.values(), *own, *func.params[k:])
    attrs = dict(func.attrs)
    attrs.update(workspace_bytes=total, workspace_param=k)
    if dynamic:
        attrs["dynamic_workspaces"] = len(dynamic)
    return PrimFunc(params, _Rebind(dynamic, own).visit(body), attrs)


def workspace_params(func: PrimFunc) -> list[Buffer]:
    """The workspace arena parameters of a lifted ``func`` (empty if it has none; not its symbolic
    workspaces)."""
    k = func.attrs.get("workspace_param")
    if not isinstance(k, int) or isinstance(k, bool) or not func.attrs.get("workspace_bytes"):
        return []
    bufs = [p for p in func.params[k:] if isinstance(p, Buffer)]
    return bufs[:len(bufs) - int(func.attrs.get("dynamic_workspaces", 0))]


def workspace_arrays(func: PrimFunc, arena: np.ndarray | None = None) -> list[np.ndarray]:
    """Arguments for the arena parameters of a lifted ``func``: views of one byte array (``arena``,
    at least ``workspace_bytes`` long, or a new one), one per arena parameter."""
    params = workspace_params(func)
    if not params:
        return []
    nbytes = int(func.attrs["workspace_bytes"])
    if arena is None:
        arena = np.zeros(nbytes, np.uint8)
    if arena.dtype != np.uint8 or arena.ndim != 1 or arena.size < nbytes:
        raise TIRError(f"workspace_arrays: the arena must be a 1-d uint8 array of at least {nbytes} bytes")
    return [arena[:nbytes].view(DTYPES[p.dtype]) for p in params]


@dataclass(frozen=True)
class LiftWorkspaces(Pass):
    """:func:`lift_workspaces` on every PrimFunc of the module that is not ``external``."""

    share: bool = True
    name: ClassVar[str] = "lift_workspaces"

    def run(self, mod: Any, ctx: PassContext) -> Any:
        changed = {}
        for key, fn in mod.items():
            if isinstance(fn, PrimFunc) and not fn.attrs.get("external"):
                new = lift_workspaces(fn, self.share)
                if new is not fn:
                    changed[key] = new
        return mod.with_functions(changed) if changed else mod


__all__ = ["ALIGN", "LiftWorkspaces", "Slice", "flat_index", "lift_workspaces", "plan_slices", "workspace_arrays",
           "workspace_params"]
