"""Each stage of a PrimFunc as a PrimFunc of its own, and the scheduled stages spliced back.

The default rules schedule one stage at a time, and every primitive verifies its result and looks
loops up by name: applied to the whole function, scheduling a function of n stages costs O(n) per
primitive, O(n^2) in all (a chain of 3000 fused Relus took minutes). :func:`isolate` gives each
stage root its own small PrimFunc, in which the rule runs: the buffers the stage uses become its
parameters (the function's parameters) or are allocated around it (the function's allocations,
outermost first), variables bound outside it become scalar parameters. :func:`splice` puts the
scheduled stages back in one rewrite of the function. Both are linear in the size of the function.

A rule sees only its stage, which is all a stage rule may change; names it makes (``<loop>_0``,
``<buffer>_pad``...) derive from the stage's own loop names, which are unique in the function
(TE names loops ``<stage>_<axis>``). :func:`clashing_names` lets the caller check that.
"""

from __future__ import annotations

from dataclasses import dataclass

from plait.tir.expr import Var
from plait.tir.functor import binders, pre_order
from plait.tir.stmt import Allocate, Buffer, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt
from plait.schedule.analysis import replace


@dataclass(frozen=True)
class IsolatedStage:
    """A stage root loop of a function and the PrimFunc holding only that stage."""

    root: For
    func: PrimFunc
    wrappers: tuple[Buffer, ...]  # the buffers allocated around the root in ``func``, outermost first

    def scheduled_root(self, out: PrimFunc) -> Stmt | None:
        """What replaces ``root`` after a rule turned ``func`` into ``out``: the body inside the same
        allocations; None if the rule changed the parameters or those allocations (it may change
        only the stage)."""
        if len(out.params) != len(self.func.params) or any(a is not b for a, b in zip(out.params, self.func.params)):
            return None
        body = out.body
        for b in self.wrappers:
            if not isinstance(body, Allocate) or body.buffer is not b:
                return None
            body = body.body
        return body


def _children(s: Stmt) -> tuple[Stmt, ...]:
    if isinstance(s, SeqStmt):
        return s.stmts
    if isinstance(s, (LetStmt, Allocate)):
        return (s.body,)
    if isinstance(s, IfThenElse):
        return (s.then_case,) if s.else_case is None else (s.then_case, s.else_case)
    return ()


def roots_and_allocations(func: PrimFunc) -> tuple[list[For], dict[Buffer, int]]:
    """Every loop with no loop above it (a stage root), in program order, and the position in
    program order of every allocation outside the roots (ancestors come first). One pass."""
    roots: list[For] = []
    allocated: dict[Buffer, int] = {}
    stack: list[Stmt] = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, For):
            roots.append(s)
            continue
        if isinstance(s, Allocate):
            allocated.setdefault(s.buffer, len(allocated))
        stack.extend(reversed(_children(s)))
    return roots, allocated


def isolate(func: PrimFunc) -> list[IsolatedStage]:
    """A PrimFunc per stage root of ``func`` (see the module docstring), in program order."""
    params = {p: k for k, p in enumerate(func.params)}
    attrs = {"global_symbol": func.name} if func.name else {}
    roots, allocated = roots_and_allocations(func)
    out = []
    for root in roots:
        used: dict[Buffer, None] = {}
        inner: set[Buffer] = set()
        bound: set[Var] = set()
        free: dict[Var, None] = {}
        for n in pre_order(root, unique=True):
            bound.update(binders(n))
            if isinstance(n, Allocate):
                inner.add(n.buffer)
            b = getattr(n, "buffer", None)
            if isinstance(b, Buffer):
                used.setdefault(b, None)
            elif isinstance(n, Var):
                free.setdefault(n, None)
        outer = [b for b in used if b not in inner]
        for b in outer:
            for d in b.shape:
                for n in pre_order(d, unique=True):
                    if isinstance(n, Var):
                        free.setdefault(n, None)
        wrappers = tuple(sorted((b for b in outer if b in allocated and b not in params), key=allocated.__getitem__))
        buf_params = sorted((b for b in outer if b in params), key=params.__getitem__)
        scalars = [v for v in free if v not in bound]
        body: Stmt = root
        for b in reversed(wrappers):
            body = Allocate(b, body)
        out.append(IsolatedStage(root, PrimFunc((*scalars, *buf_params), body, attrs), wrappers))
    return out


def splice(func: PrimFunc, scheduled: dict[For, Stmt]) -> PrimFunc:
    """``func`` with each stage root of ``scheduled`` replaced (one rewrite of the function)."""
    return replace(func, scheduled) if scheduled else func


def loop_names(root: Stmt) -> list[str]:
    """The loop variable names of the loops in ``root`` (statements only: linear in their number)."""
    out: list[str] = []
    stack: list[Stmt] = [root]
    while stack:
        s = stack.pop()
        if isinstance(s, For):
            out.append(s.loop_var.name)
            stack.append(s.body)
        else:
            stack.extend(reversed(_children(s)))
    return out


def clashing_names(stages: list[IsolatedStage], scheduled: dict[For, Stmt]) -> list[str]:
    """Loop names a stage's schedule made that another stage has (before or after scheduling): where
    scheduling the stages one after the other in the whole function could have refused a primitive
    (``check_new_names``) that the isolated stage allowed. Sorted; empty when isolation is exact."""
    owner: dict[str, int] = {}
    for k, st in enumerate(stages):
        for name in loop_names(st.root):
            owner.setdefault(name, k)
    made: dict[str, int] = {}
    clash: set[str] = set()
    for k, st in enumerate(stages):
        new = scheduled.get(st.root)
        if new is None:
            continue
        own = set(loop_names(st.root))
        for name in loop_names(new):
            if name in own:
                continue
            if owner.get(name, k) != k or made.setdefault(name, k) != k:
                clash.add(name)
    return sorted(clash)


__all__ = ["IsolatedStage", "clashing_names", "isolate", "loop_names", "roots_and_allocations", "splice"]
