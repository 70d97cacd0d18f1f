"""What the default rules know about one stage of a PrimFunc (a loop nest made by ``te.create_prim_func``).

A stage starts at a loop annotated with ``stage`` (or, for hand-written functions, any top-level
loop). Its *spatial* loops are the perfect nest under the root; the *leaf* is the body of the last
one. A reduction stage has one *update* store in the leaf (``acc[i] = F(acc[i], ...)``) under its
*reduce* loops; its *output* store is the epilogue's store if there is one, else the update.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from plait.tir.expr import BufferLoad, PrimExpr, Select, Var
from plait.tir.functor import pre_order
from plait.tir.stmt import Allocate, Buffer, BufferStore, For, PrimFunc, Stmt
from plait.schedule.analysis import _linear, chain, const_int, flat_linear, linear, same_indices, walk
from plait.schedule.isolate import roots_and_allocations


@dataclass
class Stage:
    root: For
    spatial: list[For]
    leaf: Stmt
    stores: list[BufferStore]
    update: BufferStore | None = None
    reduce: list[For] = field(default_factory=list)
    output: BufferStore | None = None

    @property
    def name(self) -> str:
        return str(self.root.annotations.get("stage", self.root.loop_var.name))

    @property
    def op(self) -> str:
        return str(self.root.annotations.get("op", ""))

    @property
    def is_reduction(self) -> bool:
        return self.update is not None

    def extent(self, loop: For) -> int | None:
        return const_int(loop.extent)

    def loads(self) -> list[BufferLoad]:
        """Loads of the update's value (reduction) or of every store (other stages), accumulator aside."""
        if self.update is not None:
            acc = self.update.buffer
            return [n for n in pre_order(self.update.value) if isinstance(n, BufferLoad) and n.buffer is not acc]
        return [n for s in self.stores for n in pre_order(s.value) if isinstance(n, BufferLoad)]


def stage_roots(func: PrimFunc) -> list[str]:
    """Names of the loops that start a stage: the loops not nested in another loop, in program order
    (TE annotates them with ``stage``). Linear in the size of the function."""
    return [lp.loop_var.name for lp in roots_and_allocations(func)[0]]


def analyze(func: PrimFunc, root: For) -> Stage:
    spatial = chain(root)
    leaf = spatial[-1].body
    stores = [s for s, _ in walk(leaf) if isinstance(s, BufferStore)]
    st = Stage(root, spatial, leaf, stores)
    updates = [s for s in stores if _is_update(s)]
    if len(updates) == 1:
        u = updates[0]
        st.update = u
        st.reduce = [p for s, parents in walk(leaf) if s is u for p in parents if isinstance(p, For)]
        others = [s for s in stores if s is not u and s.buffer is not u.buffer]
        st.output = others[-1] if others else u
    elif len(stores) >= 1 and not updates:
        st.output = stores[-1]
    return st


def _is_update(s: BufferStore) -> bool:
    return any(isinstance(n, BufferLoad) and n.buffer is s.buffer and same_indices(n.indices, s.indices)
               for n in pre_order(s.value))


def coefficient(comp: PrimExpr, v: Var) -> int | None:
    """The coefficient of ``v`` in ``comp`` (0 if absent), or None if ``comp`` is not affine in it
    (terms ``x // c`` and ``x % c`` of other variables are constants for ``v``: a deinterleaved
    input's ``z + rx // 2``)."""
    if not any(n is v for n in pre_order(comp)):
        return 0
    atoms: dict = {}
    form = _linear(comp, atoms)
    if form is None or any(n is v for a in atoms.values() for n in pre_order(a)):
        return None
    return form[0].get(v, 0)


def contiguous(indices: tuple[PrimExpr, ...], v: Var, max_stride: int = 1,
               shape: tuple[int, ...] | None = None) -> bool | None:
    """True if the row-major offset of the access moves by 1..max_stride elements per step of ``v``
    (``v`` only in the last index, or a fused loop's ``v / n, v % n`` over the last dimensions when
    ``shape`` is given); None if ``v`` does not appear at all; False otherwise."""
    if not uses(indices, v):
        return None
    if shape is not None:
        flat = flat_linear(indices, shape)
        if flat is not None:
            return 1 <= flat[0].get(v, 0) <= max_stride
    coefs = [coefficient(i, v) for i in indices]
    if all(c == 0 for c in coefs):
        return None
    if any(c is None for c in coefs) or any(c for c in coefs[:-1]):
        return False
    return bool(indices) and 1 <= coefs[-1] <= max_stride  # type: ignore[operator]


def uses(indices: tuple[PrimExpr, ...], v: Var) -> bool:
    return any(n is v for i in indices for n in pre_order(i))


def buffers_with_guards(st: Stage) -> list[Buffer]:
    """Buffers the stage reads through ``select(cond, buf[...], c)`` (candidates for pad_input)."""
    out: list[Buffer] = []
    for s in st.stores:
        for n in pre_order(s.value):
            if isinstance(n, Select) and isinstance(n.true_value, BufferLoad) and n.true_value.buffer not in out:
                out.append(n.true_value.buffer)
    return out


def allocated_in(st: Stage) -> list[Buffer]:
    return [s.buffer for s, _ in walk(st.root) if isinstance(s, Allocate)]
