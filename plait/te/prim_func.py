"""``create_prim_func``: TE stages -> one TIR PrimFunc (destination passing).

Stages are emitted as loop nests in topological order (producers first, ties in the order the
outputs and each stage's inputs are listed):

- injective stages (a non-reduction compute with one output that is not an output of the
  function, and no ``attrs={"inline": False}``) are inlined into their consumers: their loads
  are replaced by their bodies, with the stage's axes substituted by the load's indices;
- other non-output stages are stored in ``global.workspace`` buffers (allocated around the body);
- a reduction whose only consumer is a stage with the same iteration space that reads it exactly
  at its own indices (the "epilogue": bias add, relu, requantization...) is emitted as one nest: a
  ``local`` accumulator per spatial point, the reduce loops, then the epilogue's store. Other
  reductions accumulate in their own buffer (``R[i] = init; for k: R[i] = combine(R[i], x)``);
- a stage's checks (``compute(..., checks=...)``: a condition on its inputs that must hold at
  every index, such as an index in range) become one serial nest each, emitted where the stage
  would be (inlined or not), whose body is an ``AssertStmt``; the nest is annotated
  ``{"stage": "<stage>_check<k>", "op", "pattern": "check"}``;
- each nest's outermost loop is annotated ``{"stage", "op", "pattern"}`` (+ ``"epilogue"``,
  ``"tag"`` when there is one); loop variables are named ``<stage>_<axis>``. A 0-d stage gets a
  loop of extent 1 to carry them.

Params: the input buffers, then the output buffers, then (only if some dimension is symbolic) the
size variables. Attributes: ``global_symbol`` (``name``) and ``num_inputs``.
"""

from __future__ import annotations

from typing import Any, Sequence

from plait.ir.attrs import Attrs
from plait.te.tensor import (
    ComputeOp, PlaceholderOp, Reduce, TEError, Tensor, _stages, axis_range, compute, stage_name,
)
from plait.tir.equal import structural_equal
from plait.tir.expr import BufferLoad, IntImm, PrimExpr, Var
from plait.tir.functor import StmtExprMutator, free_vars, pre_order, substitute
from plait.tir.stmt import Allocate, AssertStmt, Buffer, BufferStore, For, IfThenElse, LetStmt, PrimFunc, Stmt, seq
from plait.tir.verify import verify


class _Resolve(StmtExprMutator):
    """Inline the loads of inlined stages; point loads of materialized tensors at their buffers.

    Every resolved body is written over the canonical axes ``canon[0..ndim)``, so a load at exactly
    those indices (an elementwise chain) is replaced by the producer's body without copying it.
    """

    def __init__(self, canon: list[Var], inlined: dict[Buffer, PrimExpr], buffers: dict[Buffer, Buffer]):
        super().__init__()
        self.canon, self.inlined, self.buffers = canon, inlined, buffers

    def rewrite_buffer(self, buffer: Buffer) -> Buffer:
        return self.buffers.get(buffer, buffer)

    def rewrite_buffer_load(self, pre: BufferLoad, post: PrimExpr) -> PrimExpr:
        body = self.inlined.get(pre.buffer)
        if body is None:
            return post
        assert isinstance(post, BufferLoad)
        idx = post.indices
        if all(a is b for a, b in zip(idx, self.canon)):
            return body
        return substitute(body, dict(zip(self.canon, idx)))


def _bigger_than(e: PrimExpr, limit: int) -> bool:
    for k, _ in enumerate(pre_order(e)):
        if k >= limit:
            return True
    return False


class _Loads(StmtExprMutator):
    """Replace every load of ``buffer`` by ``value``."""

    def __init__(self, buffer: Buffer, value: PrimExpr):
        super().__init__()
        self.target, self.value = buffer, value

    def rewrite_buffer_load(self, pre: BufferLoad, post: PrimExpr) -> PrimExpr:
        return self.value if pre.buffer is self.target else post


_INLINE_REPEAT_LIMIT = 32
"""An inlined stage loaded more than once by one consumer is materialized if its body has more nodes."""


def _same_dim(a: Any, b: Any) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a is b or structural_equal(a, b)


class _Builder:
    def __init__(self, inputs: list[Tensor], outputs: list[Tensor], name: str, inline: bool):
        self.inputs, self.outputs, self.name, self.inline = inputs, outputs, name, inline
        self.ops = _stages(outputs, {t.op for t in inputs})
        self.out_set = set(outputs)
        self.stage_names: dict[ComputeOp, str] = {}
        used: set[str] = {stage_name(t.name) for t in inputs}
        next_suffix: dict[str, int] = {}
        input_ops = {t.op for t in inputs}
        for op in self.ops:
            if isinstance(op, PlaceholderOp):
                if op not in input_ops:
                    raise TEError(f"create_prim_func '{name}': tensor '{op.name}' is used but is not one of the "
                                  "inputs")
                continue
            base = stage_name(op.name)
            s, k = base, next_suffix.get(base, 0)
            while s in used:
                k += 1
                s = f"{base}_{k}"
            next_suffix[base] = k
            used.add(s)
            self.stage_names[op] = s  # type: ignore[index]

    # -- which stages are inlined, where materialized tensors live ----------------------------------
    def inlinable(self, op: ComputeOp) -> bool:
        return (self.inline and not op.is_reduction and len(op.outputs) == 1 and op.outputs[0] not in self.out_set
                and op.attrs.get("inline", True) is not False)

    def plan(self) -> None:
        self.buffers: dict[Buffer, Buffer] = {}  # tensor buffer -> buffer in the PrimFunc
        self.workspace: list[Buffer] = []
        self.inlined: dict[Buffer, PrimExpr] = {}  # inlined tensor buffer -> body over the canonical axes
        self.resolved: dict[ComputeOp, tuple[PrimExpr, ...]] = {}  # sources (+ condition), canonical axes
        self.resolved_checks: dict[ComputeOp, list[tuple[Any, PrimExpr]]] = {}
        rank = max((len(a) for op in self.ops if isinstance(op, ComputeOp)
                    for a in (op.axis, *(c.axis for c in op.checks))), default=0)
        self.canon = [Var(f"ax{d}", "int64") for d in range(rank)]
        resolver = _Resolve(self.canon, self.inlined, self.buffers)
        for op in self.ops:
            if not isinstance(op, ComputeOp):
                continue
            exprs = op.body.source + ((op.body.condition,) if op.body.condition is not None else ()) \
                if isinstance(op.body, Reduce) else op.body
            to_canon = dict(zip(op.axis, self.canon))
            exprs = tuple(substitute(e, to_canon) for e in exprs)
            self.uninline_repeated(exprs, resolver)
            res = tuple(resolver.visit(e) for e in exprs)
            self.resolved[op] = res
            self.resolved_checks[op] = [(c, resolver.visit(substitute(c.cond, dict(zip(c.axis, self.canon)))))
                                        for c in op.checks]
            if self.inlinable(op):
                self.inlined[op.outputs[0].buffer] = res[0]
            else:
                self.materialize(op)

    def materialize(self, op: ComputeOp) -> None:
        for t in op.outputs:
            if t in self.out_set:
                continue
            s = self.stage_names[op]
            b = Buffer(s if len(op.outputs) == 1 else f"{s}_v{t.value_index}", t.shape, t.dtype, "global.workspace")
            self.buffers[t.buffer] = b
            self.workspace.append(b)

    def uninline_repeated(self, exprs: tuple[PrimExpr, ...], resolver: _Resolve) -> None:
        """Materialize inlined producers that ``exprs`` load more than once and that are big: inlining
        them would copy their code at every load (and exponentially so along chains)."""
        count: dict[Buffer, int] = {}
        for e in exprs:
            for n in pre_order(e):
                if isinstance(n, BufferLoad) and n.buffer in self.inlined:
                    count[n.buffer] = count.get(n.buffer, 0) + 1
        for buf, c in count.items():
            if c > 1 and _bigger_than(self.inlined[buf], _INLINE_REPEAT_LIMIT):
                del self.inlined[buf]
                op = next(o for o in self.ops if isinstance(o, ComputeOp) and o.outputs[0].buffer is buf)
                self.materialize(op)
                resolver.memo.clear()
                resolver.buffer_memo.clear()

    def materialized(self) -> list[ComputeOp]:
        return [op for op in self.ops if isinstance(op, ComputeOp) and op.outputs[0].buffer not in self.inlined]

    def find_epilogues(self) -> dict[ComputeOp, ComputeOp]:
        """reduction stage -> its epilogue stage."""
        mats = self.materialized()
        readers: dict[Buffer, list[ComputeOp]] = {}
        for op in mats:
            for e in self.resolved[op]:
                for n in pre_order(e):
                    if isinstance(n, BufferLoad):
                        lst = readers.setdefault(n.buffer, [])
                        if not lst or lst[-1] is not op:
                            lst.append(op)
        out: dict[ComputeOp, ComputeOp] = {}
        taken: set[ComputeOp] = set()
        for r in mats:
            if not r.is_reduction or len(r.outputs) != 1 or r.outputs[0] in self.out_set:
                continue
            buf = self.buffers[r.outputs[0].buffer]
            users = readers.get(buf, [])
            if len(users) != 1 or users[0] in taken:
                continue
            e = users[0]
            if e.is_reduction or len(e.shape) != len(r.shape) or not all(map(_same_dim, e.shape, r.shape)):
                continue
            loads = [n for x in self.resolved[e] for n in pre_order(x) if isinstance(n, BufferLoad) and n.buffer is buf]
            if all(self.identity_load(ld, r.shape) for ld in loads):
                out[r] = e
                taken.add(e)
        return out

    def identity_load(self, load: BufferLoad, shape: tuple) -> bool:
        """Does ``load`` read at the canonical axes (index 0 also counts for a dimension of extent 1)?"""
        return len(load.indices) == len(shape) and all(
            i is a or (isinstance(d, int) and d == 1 and isinstance(i, IntImm) and i.value == 0)
            for i, a, d in zip(load.indices, self.canon, shape))

    # -- emission ----------------------------------------------------------------------------------
    def annotations(self, op: ComputeOp, epilogue: ComputeOp | None = None) -> Attrs:
        ann: dict[str, Any] = {"stage": self.stage_names[op], "op": op.op_name or op.tag or op.name,
                               "pattern": op.pattern or ("reduction" if op.is_reduction else "injective")}
        if op.tag:
            ann["tag"] = op.tag
        if epilogue is not None:
            ann["epilogue"] = self.stage_names[epilogue]
        return Attrs(ann)

    def out_buffer(self, t: Tensor) -> Buffer:
        return self.buffers.get(t.buffer, t.buffer)

    def loop_vars(self, op: ComputeOp) -> list[Var]:
        s = self.stage_names[op]
        return [Var(f"{s}_{a.name}", "int64") for a in op.axis]

    def nest(self, op: ComputeOp, lvs: list[Var], body: Stmt, ann: Attrs) -> Stmt:
        extents = list(op.shape)
        if not lvs:
            lvs, extents = [Var(f"{self.stage_names[op]}_ax", "int64")], [1]
        for k in range(len(lvs) - 1, -1, -1):
            body = For(lvs[k], 0, extents[k], "serial", body, ann if k == 0 else Attrs())
        return body

    def emit_checks(self, op: ComputeOp) -> list[Stmt]:
        out: list[Stmt] = []
        s = self.stage_names[op]
        for k, (chk, cond) in enumerate(self.resolved_checks.get(op, ())):
            name = f"{s}_check{k}"
            lvs = [Var(f"{name}_{a.name}", "int64") for a in chk.axis]
            body: Stmt = AssertStmt(substitute(cond, dict(zip(self.canon, lvs))), chk.status)
            extents = list(chk.shape)
            if not lvs:
                lvs, extents = [Var(f"{name}_ax", "int64")], [1]
            ann = Attrs({"stage": name, "op": op.op_name or op.tag or op.name, "pattern": "check"})
            for j in range(len(lvs) - 1, -1, -1):
                body = For(lvs[j], 0, extents[j], "serial", body, ann if j == 0 else Attrs())
            out.append(body)
        return out

    def emit_injective(self, op: ComputeOp) -> Stmt:
        lvs = self.loop_vars(op)
        vmap = dict(zip(self.canon, lvs))
        stores = [BufferStore(self.out_buffer(t), substitute(e, vmap), tuple(lvs))
                  for t, e in zip(op.outputs, self.resolved[op])]
        return self.nest(op, lvs, seq(*stores), self.annotations(op))

    def emit_reduction(self, op: ComputeOp, epilogue: ComputeOp | None) -> Stmt:
        red = op.body
        assert isinstance(red, Reduce)
        s = self.stage_names[op]
        lvs = self.loop_vars(op)
        rvs = [Var(f"{s}_{a.name}", "int64") for a in red.axis]
        vmap: dict[Var, Any] = dict(zip(self.canon, lvs))
        vmap.update(zip(op.axis, lvs))  # reduce-axis ranges may use the compute's own axes
        vmap.update(zip(red.axis, rvs))
        n = len(red.source)
        res = self.resolved[op]
        srcs = tuple(substitute(e, vmap) for e in res[:n])
        cond = substitute(res[n], vmap) if len(res) > n else None
        idx = tuple(lvs)
        if epilogue is None:
            accs = [self.out_buffer(t) for t in op.outputs]
            acc_idx: tuple = idx
        else:
            accs = [Buffer(f"{s}_acc" if n == 1 else f"{s}_acc{k}", (1,), d, "local")
                    for k, d in enumerate(red.dtypes)]
            acc_idx = (IntImm(0, "int64"),)
        cur = tuple(BufferLoad(a, acc_idx) for a in accs)
        new = red.combiner.combine_values(cur, srcs)
        if n == 1:
            update: Stmt = BufferStore(accs[0], new[0], acc_idx)
        else:
            tmps = [Var(f"{s}_v{k}", d) for k, d in enumerate(red.dtypes)]
            update = seq(*(BufferStore(a, t, acc_idx) for a, t in zip(accs, tmps)))
            for t, v in reversed(list(zip(tmps, new))):
                update = LetStmt(t, v, update)
        if cond is not None:
            update = IfThenElse(cond, update)
        for k in range(len(rvs) - 1, -1, -1):
            lo, ext = (substitute(x, vmap) for x in axis_range(red.axis[k]))
            update = For(rvs[k], lo, ext, "serial", update)
        init = [BufferStore(a, v, acc_idx) for a, v in zip(accs, red.combiner.identity_values(red.dtypes))]
        body: Stmt = seq(*init, update)
        if epilogue is not None:
            evmap: dict[Var, Any] = dict(zip(self.canon, lvs))
            value = cur[0]
            stores = []
            for t, e in zip(epilogue.outputs, self.resolved[epilogue]):
                e = _Loads(self.buffers[op.outputs[0].buffer], value).visit(e)
                stores.append(BufferStore(self.out_buffer(t), substitute(e, evmap), idx))
            body = seq(body, *stores)
            for a in reversed(accs):
                body = Allocate(a, body)
        return self.nest(op, lvs, body, self.annotations(op, epilogue))

    def build(self) -> PrimFunc:
        self.plan()
        epi = self.find_epilogues()
        fused_into = {e: r for r, e in epi.items()}
        stmts: list[Stmt] = []
        mats = set(self.materialized())
        for op in self.ops:
            if not isinstance(op, ComputeOp):
                continue
            stmts += self.emit_checks(op)
            if op not in mats:
                continue
            if op in epi:
                continue  # emitted with its epilogue
            if op in fused_into:
                stmts.append(self.emit_reduction(fused_into[op], op))
            elif op.is_reduction:
                stmts.append(self.emit_reduction(op, None))
            else:
                stmts.append(self.emit_injective(op))
        body = seq(*stmts)
        fused_bufs = {self.buffers[r.outputs[0].buffer] for r in epi}
        for b in reversed(self.workspace):
            if b not in fused_bufs:
                body = Allocate(b, body)
        params: list[Any] = [t.buffer for t in self.inputs] + [t.buffer for t in self.outputs]
        sizes: dict[Var, None] = {}
        for p in params:
            for d in p.shape:
                for v in free_vars(d):
                    sizes.setdefault(v, None)
        params += list(sizes)
        return PrimFunc(tuple(params), body, Attrs({"global_symbol": self.name, "num_inputs": len(self.inputs)}))


def create_prim_func(tensors: Sequence[Tensor], name: str = "main", num_inputs: int | None = None,
                     inline: bool = True) -> PrimFunc:
    """A PrimFunc computing the output tensors from the input tensors (see the module docstring).

    ``tensors`` lists the inputs (placeholders) then the outputs; without ``num_inputs`` the
    leading placeholders are the inputs. An output that is an input (or listed twice) is copied.
    ``inline=False`` materializes every stage (for tests and debugging).
    """
    ts = list(tensors)
    for k, t in enumerate(ts):
        if not isinstance(t, Tensor):
            raise TEError(f"create_prim_func '{name}': item {k} is not a te.Tensor: {t!r}")
    if num_inputs is None:
        num_inputs = 0
        while num_inputs < len(ts) and isinstance(ts[num_inputs].op, PlaceholderOp):
            num_inputs += 1
    inputs, outputs = ts[:num_inputs], ts[num_inputs:]
    for t in inputs:
        if not isinstance(t.op, PlaceholderOp):
            raise TEError(f"create_prim_func '{name}': input '{t.name}' is not a placeholder")
    if len(set(inputs)) != len(inputs):
        raise TEError(f"create_prim_func '{name}': an input is listed twice")
    if not outputs:
        raise TEError(f"create_prim_func '{name}': no output tensor")
    seen: set[Tensor] = set(inputs)
    fixed: list[Tensor] = []
    for t in outputs:
        if t in seen or isinstance(t.op, PlaceholderOp):
            t = compute(t.shape, lambda *i, _t=t: _t[i], name=f"{t.name}_copy")  # type: ignore[misc]
        seen.add(t)
        fixed.append(t)
    func = _Builder(inputs, fixed, name, inline).build()
    verify(func, name)
    return func
