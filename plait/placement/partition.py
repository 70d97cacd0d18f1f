"""Device planning and partitioning: a placement -> ``device_copy`` calls and region functions.

    mod = partition(mod, {call: piece name, ...}, composite)

1. **Device planning.** Every value lives where it is made: an operator call's result on its piece,
   ``main``'s parameters on the host piece; constants anywhere (each region keeps its own copy).
   Where a call reads a value that lives on a piece with other memory (see
   :meth:`CompositeTarget.shares_memory`), a ``device_copy(x, src=..., dst=...)`` call is inserted,
   one per value and destination memory (redundant copies are never made). ``main``'s results are
   copied back to the host's memory.
2. **Partitioning.** The calls of each piece are grouped into maximal regions, walking the calls in
   topological order: a call joins a region of its piece (first one it reads from, else any other)
   unless that would create a cycle (a path leaving the region and coming back: checked with the
   transitive ancestors of every region and copy), else it opens a new region.
3. **Outlining.** Each region becomes a global Relay function ``<piece>_<k>`` with attrs
   ``target`` (the piece name), ``region`` (1) and ``global_symbol``; its parameters are the values
   entering it (whole call results, main parameters), constants stay inline, its result is the one
   value leaving it or a tuple of them. ``main`` calls the regions in a topological order, with the
   ``device_copy`` calls between them.

A one-piece target takes a fast path: one region holding ``main``'s whole body.
The region functions stay until code generation: lowering turns each into a function calling
PrimFuncs (or a PrimFunc), and the executors read them where ``main`` calls them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from plait.errors import PlaitError
from plait.ir.attrs import Attrs
from plait.ir.op import Op
from plait.op import get_op
from plait.ir.types import TensorType, TupleType
from plait.relay.expr import Call, Constant, Expr, Function, GlobalVar, If, Loop, Tuple, TupleGetItem, Var
from plait.relay.infer import infer_type
from plait.relay.module import IRModule
from plait.relay.visitor import ExprMutator, post_order
from plait.placement.rules import call_name
from plait.placement.solver import _producers as _leaf_calls  # calls whose results a value passes on
from plait.relay.passes.fuse_ops import FUSION_META
from plait.target.composite import PIECE_ATTR, piece_of


class PartitionError(PlaitError):
    """The module cannot be partitioned (an unsupported construct, a call without a piece)."""


@dataclass
class Region:
    name: str
    piece: str
    calls: list[Call] = field(default_factory=list)


def is_region(fn: Any) -> bool:
    return isinstance(fn, Function) and bool(fn.attrs.get("region"))


def regions_of(mod: IRModule, piece: str | None = None) -> list[str]:
    """Names of the region functions of ``mod`` (of ``piece`` only, when given), in module order."""
    return [k for k, f in mod.items() if is_region(f) and (piece is None or piece_of(f) == piece)]


class _Names:
    """``<base>_<k>`` names not in ``used`` (smallest k first); remembers the last k of each base, so
    that n names cost O(n), not O(n^2)."""

    def __init__(self, used: set[str]):
        self.used = used
        self.last: dict[str, int] = {}

    def unique(self, base: str) -> str:
        k = self.last.get(base, 0)
        while f"{base}_{k}" in self.used:
            k += 1
        self.last[base] = k
        self.used.add(f"{base}_{k}")
        return f"{base}_{k}"


def _region_attrs(name: str, piece: str) -> Attrs:
    return Attrs({PIECE_ATTR: piece, "region": 1, "global_symbol": name})


class _Subst(ExprMutator):
    def __init__(self, mapping: Mapping[Var, Expr]):
        super().__init__()
        self.mapping = mapping

    def rewrite_var(self, pre: Var, post: Expr) -> Expr:
        return self.mapping.get(pre, post)

    def rewrite_tuple_getitem(self, pre: TupleGetItem, post: Expr) -> Expr:
        if isinstance(post, TupleGetItem) and isinstance(post.tuple_value, Tuple):
            return post.tuple_value.fields[post.index]
        return post


def substitute(e: Expr, mapping: Mapping[Var, Expr]) -> Expr:
    """``e`` with the variables of ``mapping`` replaced (tuple projections of tuples folded)."""
    return _Subst(mapping).visit(e)


def _single_region(mod: IRModule, piece: str) -> IRModule:
    main = mod.main
    params = tuple(Var(p.name_hint, p.type_annotation) for p in main.params)
    body = substitute(main.body, dict(zip(main.params, params)))
    name = _Names(set(mod)).unique(piece)
    region = Function(params, body, main.ret_type, _region_attrs(name, piece))
    outer = tuple(Var(p.name_hint, p.type_annotation) for p in main.params)
    new_main = Function(outer, Call(GlobalVar(name), outer), main.ret_type, main.attrs)
    return infer_type(mod.with_function(name, region).with_function("main", new_main))


def partition(mod: IRModule, pieces: Mapping[Call, str], composite: Any, groups: Any = (),
              fused: Any = None) -> IRModule:
    """Insert ``device_copy`` calls and outline same-piece regions of ``mod['main']``.

    ``pieces`` maps every operator call of the typed ``main`` to a piece name of ``composite``
    (e.g. ``assignment.pieces()``). ``groups``: collections of calls that must end up in one region
    (claimed regions, ``assignment.regions``: each convex, on one piece, read from outside only
    through its last call); other calls of the piece may join that region. ``fused`` (e.g.
    ``assignment.fusion``, :func:`plait.placement.solver.lowering_groups`): the fusion groups default
    lowering makes, decided by placement; each is kept in one region and stamped on its calls
    (``meta["fusion"]``: ``f<k>`` for group k, ``s<n>`` for a call in no group), so that FuseOps in default
    lowering fuses within a group only and never joins calls placement priced apart. Where placement priced
    a group in parts (a conv that blas can run, its bias and relu that only c can) and the parts landed on
    one piece, the group is whole again: the fused function is lowered again, fusion being worth more than
    the second lowering."""
    from plait.target import CompositeTarget

    ct = CompositeTarget(composite)
    if len(ct) == 1:
        return _single_region(mod, ct.pieces[0].name)
    infer_type(mod)
    host = ct.host.name
    main = mod.main
    if _check_control_flow(main, pieces, host):
        return _single_region(mod, host)
    new_body, piece_of, new_of = _insert_copies(main, pieces, ct, host)
    planned = infer_type(mod.with_function("main", Function(main.params, new_body, main.ret_type, main.attrs)))
    member: dict[Call, tuple[int, str | None]] = {}
    for k, g in enumerate(groups):
        calls = [new_of[c] for c in getattr(g, "calls", g) if c in new_of]
        if len({piece_of[c] for c in calls}) == 1:  # a group split across pieces is no unit
            for c in calls:
                member[c] = (k, getattr(g, "name", None))
    for k, g in enumerate(fused or ()):
        calls = [new_of[c] for c in g if c in new_of]
        if len({piece_of[c] for c in calls}) == 1 and not any(c in member for c in calls):  # (in a claimed
            # region: already one; split across pieces: FuseOps fuses each piece's part)
            for c in calls:
                member[c] = (len(groups) + k, None)
    stamps = _fusion_stamps(planned.main, fused or (), new_of)
    return infer_type(_outline(planned, piece_of, ct, member, stamps))


def _fusion_stamps(main: Function, fused: Any, new_of: Mapping[Call, Call]) -> dict[Call, str]:
    """``meta["fusion"]`` of each operator call of the planned ``main`` (copies apart): its group's, or its
    own for a call in no group (see :func:`partition`)."""
    out: dict[Call, str] = {}
    for k, g in enumerate(fused):
        for c in g:
            if c in new_of:
                out[new_of[c]] = f"f{k}"
    n = 0
    for e in post_order(main.body):
        if isinstance(e, Call) and isinstance(e.op, Op) and not _is_copy(e) and e not in out:
            out[e] = f"s{n}"
            n += 1
    return out


# ---- 1. device planning ----------------------------------------------------------------------------


def _check_control_flow(main: Function, pieces: Mapping[Call, str], host: str) -> bool:
    """Has ``main`` control flow? Its calls (placement pins them to the host piece: ``pins_for``) then form
    one region on ``host``; a call placed elsewhere (by an explicit pin) is a clear refusal."""
    kinds = sorted({type(e).__name__ for e in post_order(main.body) if isinstance(e, (If, Loop))})
    if not kinds:
        return False
    off = [c for c, p in pieces.items() if p != host]
    if off:
        raise PartitionError(f"placement across pieces: main has control flow ({', '.join(kinds)}), so its calls stay "
                             f"on the host piece '{host}', but {call_name(off[0])} is pinned to piece "
                             f"'{pieces[off[0]]}'; calls of a model with control flow are not split across pieces yet")
    return True


def _check_node(e: Expr) -> None:
    if isinstance(e, (Var, Constant, Tuple, TupleGetItem)):
        return
    if isinstance(e, Call) and isinstance(e.op, Op):
        return
    what = type(e).__name__ if not isinstance(e, Call) else f"a call of {e.op_name}"
    raise PartitionError(f"placement across pieces: main contains {what}; only operator calls, tuples and "
                         "constants can be placed on several pieces (build for one piece)")


def _insert_copies(main: Function, pieces: Mapping[Call, str], ct: Any,
                   host: str) -> tuple[Expr, dict[Call, str], dict[Call, Call]]:
    domain = {}
    for p in ct.pieces:  # the first piece sharing memory with p stands for its memory
        domain[p.name] = next(q.name for q in ct.pieces if ct.shares_memory(q, p))
    copy_op = get_op("device_copy")
    new: dict[Expr, Expr] = {}
    piece_of: dict[Call, str] = {}  # new call -> piece
    copies: dict[tuple[Any, str], Expr] = {}

    def home(e: Expr) -> str | None:
        """The piece whose memory holds the (non-tuple-literal) value ``e``; None: a constant."""
        while isinstance(e, TupleGetItem):
            if isinstance(e.tuple_value, Tuple):
                e = e.tuple_value.fields[e.index]
            else:
                e = e.tuple_value
        if isinstance(e, Var):
            return host
        if isinstance(e, Call):
            return piece_of[new[e]]  # type: ignore[index]
        if isinstance(e, Tuple):
            raise PartitionError("internal: home of a tuple literal")
        return None

    def copy_of(ne: Expr, t: Any, src: str, dst: str, key: Any) -> Expr:
        if isinstance(t, TupleType):
            return Tuple(tuple(copy_of(TupleGetItem(ne, i), f, src, dst, (key, i)) for i, f in enumerate(t.fields)))
        k = (key, domain[dst])
        if k not in copies:
            copies[k] = Call(copy_op, (ne,), {"src": src, "dst": dst})
        return copies[k]

    def fix(e: Expr, dst: str) -> Expr:
        """The value ``e`` (original), readable from piece ``dst``'s memory."""
        if isinstance(e, Tuple):
            return Tuple(tuple(fix(f, dst) for f in e.fields))
        src = home(e)
        if src is None or domain[src] == domain[dst]:
            return new[e]
        return copy_of(new[e], e.checked_type, src, dst, e)

    for e in post_order(main.body):
        _check_node(e)
    for e in post_order(main.body):
        if e in new:
            continue
        if isinstance(e, (Var, Constant)):
            new[e] = e
        elif isinstance(e, Tuple):
            new[e] = Tuple(tuple(new[f] for f in e.fields))
        elif isinstance(e, TupleGetItem):
            new[e] = TupleGetItem(new[e.tuple_value], e.index)
        else:
            assert isinstance(e, Call)
            if e not in pieces:
                name = e.meta.get("name")
                raise PartitionError(f"placement across pieces: call {e.op_name}"
                                     f"{f' (node {name!r})' if name else ''} has no piece")
            p = pieces[e]
            c = Call(e.op, tuple(fix(a, p) for a in e.args), e.attrs, e.meta)
            new[e] = c
            piece_of[c] = p
    new_of = {e: c for e, c in new.items() if isinstance(e, Call)}
    return fix(main.body, host), piece_of, new_of


# ---- 2-3. regions and outlining ------------------------------------------------------------------


def _is_copy(c: Call) -> bool:
    return isinstance(c.op, Op) and c.op.name == "device_copy"


def _outline(mod: IRModule, piece_of: Mapping[Call, str], ct: Any,
             groups: Mapping[Call, tuple[int, str | None]] = {}, stamps: Mapping[Call, str] = {}) -> IRModule:
    main = mod.main
    calls = [n for n in post_order(main.body) if isinstance(n, Call)]
    unit_of: dict[Call, int] = {}
    units: list[Region | Call] = []  # a Region, or a device_copy call
    # transitive ancestors of each unit as a bit set (bit u: unit u), and which units are anyone's
    # ancestor: set operations on ints keep this linear-time in practice (one pass per call)
    anc: list[int] = []
    ancestors_of_any = 0
    names = _Names(set(mod))
    by_piece: dict[str, int] = {}  # piece -> bit set of its regions
    position = {c: k for k, c in enumerate(calls)}
    last: dict[int, Call] = {}  # claimed group -> its member that comes last (its output)
    for c, (g, _) in groups.items():
        if c in position and (g not in last or position[c] > position[last[g]]):
            last[g] = c
    pending: dict[int, list[Call]] = {}  # members of a group waiting for the group's last member

    def place(members: list[Call]) -> None:
        nonlocal ancestors_of_any
        inside = set(members)
        for m in members:  # a member of another group read before that group is complete: flush it
            for a in m.args:
                for x in _leaf_calls(a):
                    if x not in unit_of and x not in inside:
                        g = groups[x][0]
                        place(pending.pop(g))
        prods = sorted({unit_of[x] for m in members for a in m.args for x in _leaf_calls(a) if x not in inside})
        upstream = 0  # every unit a producer is or descends from
        for s in prods:
            upstream |= anc[s] | (1 << s)
        c = members[0]
        if _is_copy(c):
            units.append(c)
            anc.append(upstream)
            ancestors_of_any |= upstream
            unit_of[c] = len(units) - 1
            return
        p = piece_of[c]
        mine = by_piece.get(p, 0)
        # a region r of the piece may take the call unless r is an ancestor of a producer (a cycle):
        # first a producer's own region (lowest id first), else the newest such region of the piece
        blocked = 0
        for s in prods:
            blocked |= anc[s]
        chosen = next((r for r in prods if (mine >> r) & 1 and not (blocked >> r) & 1), None)
        if chosen is None:
            free = mine & ~blocked & ~_bits(prods)
            if free:
                chosen = free.bit_length() - 1
        if chosen is None:
            units.append(Region(names.unique(p), p))
            anc.append(0)
            chosen = len(units) - 1
            by_piece[p] = mine | (1 << chosen)
        region = units[chosen]
        assert isinstance(region, Region)
        for m in members:
            region.calls.append(m)
            unit_of[m] = chosen
        grow = 0
        for s in prods:
            if s != chosen:
                grow |= anc[s] | (1 << s)
        if grow & ~anc[chosen]:
            anc[chosen] |= grow
            ancestors_of_any |= grow
            if (ancestors_of_any >> chosen) & 1:  # units below the region see its new ancestors
                for x in range(len(units)):
                    if (anc[x] >> chosen) & 1:
                        anc[x] |= anc[chosen]

    # A claimed group is placed as one call when its last member comes: by then every value entering
    # it is placed (its members only feed each other and the last one), and it is convex, so it can
    # go into one region without a cycle.
    for c in calls:
        g = groups.get(c, (None,))[0]
        if g is None:
            place([c])
        elif c is not last[g]:
            pending.setdefault(g, []).append(c)
        else:
            place([*pending.pop(g, []), c])
    for g in list(pending):
        place(pending.pop(g))
    for u in units:
        if isinstance(u, Region):
            u.calls.sort(key=position.__getitem__)

    # topological order of the units (Kahn, smallest id first: deterministic)
    deps: list[set[int]] = [set() for _ in units]
    for c in calls:
        u = unit_of[c]
        for a in c.args:
            for x in _leaf_calls(a):
                if unit_of[x] != u:
                    deps[u].add(unit_of[x])
    order = _toposort(deps)

    # outputs of each region: its calls read from outside it (other units, main's result)
    outputs: dict[int, list[Call]] = {u: [] for u in range(len(units))}
    out_seen: set[Call] = set()

    def mark(x: Call, reader: int | None) -> None:
        if unit_of[x] != reader and x not in out_seen and not _is_copy(x):
            out_seen.add(x)
            outputs[unit_of[x]].append(x)

    for c in calls:
        for a in c.args:
            for x in _leaf_calls(a):
                mark(x, unit_of[c])
    for x in _leaf_calls(main.body):
        mark(x, None)
    position = {c: k for k, c in enumerate(calls)}
    for u in outputs:
        outputs[u].sort(key=position.__getitem__)

    outer: dict[Expr, Expr] = {p: p for p in main.params}  # original value -> main-level expression

    def in_main(e: Expr) -> Expr:
        if e in outer:
            return outer[e]
        if isinstance(e, Tuple):
            r: Expr = Tuple(tuple(in_main(f) for f in e.fields))
        elif isinstance(e, TupleGetItem):
            r = TupleGetItem(in_main(e.tuple_value), e.index)
        elif isinstance(e, Constant):
            r = e
        else:
            raise PartitionError(f"internal: value {e!r} used in main before it is made")
        outer[e] = r
        return r

    funcs: dict[str, Function] = {}
    for u in order:
        unit = units[u]
        if isinstance(unit, Call):
            outer[unit] = Call(unit.op, tuple(in_main(a) for a in unit.args), unit.attrs, unit.meta)
            continue
        fn, inputs = _region_function(unit, outputs[u], unit_of, u, stamps)
        funcs[unit.name] = fn
        rcall = Call(GlobalVar(unit.name), tuple(in_main(x) for x in inputs))
        outs = outputs[u]
        n = sum(len(_tensor_leaves(x, x.checked_type)) for x in outs)
        items: list[Expr] = [rcall] if n == 1 else [TupleGetItem(rcall, k) for k in range(n)]
        for x in outs:
            outer[x] = _rebuild(x.checked_type, items)
    body = in_main(main.body)
    return mod.with_functions({**funcs, "main": Function(main.params, body, main.ret_type, main.attrs)})


def _bits(ids: list[int]) -> int:
    """The bit set of unit ids."""
    out = 0
    for i in ids:
        out |= 1 << i
    return out


def _toposort(deps: list[set[int]]) -> list[int]:
    import heapq

    users: list[list[int]] = [[] for _ in deps]
    count = [len(d) for d in deps]
    for u, d in enumerate(deps):
        for s in d:
            users[s].append(u)
    ready = [u for u, n in enumerate(count) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for v in users[u]:
            count[v] -= 1
            if count[v] == 0:
                heapq.heappush(ready, v)
    if len(order) != len(deps):
        raise PartitionError("internal: the regions depend on each other in a cycle")
    return order


def _region_function(region: Region, outputs: list[Call], unit_of: Mapping[Call, int],
                     me: int, stamps: Mapping[Call, str] = {}) -> tuple[Function, list[Expr]]:
    inputs: list[Expr] = []
    params: dict[Expr, Var] = {}
    inner: dict[Expr, Expr] = {}

    def param(e: Expr) -> Var:
        if e not in params:
            name = e.name_hint if isinstance(e, Var) else f"p{len(params)}"
            params[e] = Var(name, e.checked_type)
            inputs.append(e)
        return params[e]

    def outside(e: Expr) -> bool:
        while isinstance(e, TupleGetItem):
            e = e.tuple_value
        return isinstance(e, Var) or (isinstance(e, Call) and unit_of.get(e) != me)

    def arg(e: Expr) -> Expr:
        if e in inner:
            return inner[e]
        if isinstance(e, Constant):
            return e
        if isinstance(e, Var) or (isinstance(e, Call) and unit_of.get(e) != me):
            return param(e)
        if isinstance(e, TupleGetItem) and isinstance(e.checked_type, TensorType) and outside(e):
            return param(e)  # one tensor of another region's tuple: the parameter is that tensor
        if isinstance(e, Tuple):
            r: Expr = Tuple(tuple(arg(f) for f in e.fields))
        elif isinstance(e, TupleGetItem):
            r = TupleGetItem(arg(e.tuple_value), e.index)
        else:
            raise PartitionError(f"internal: unexpected {e!r} in region '{region.name}'")
        inner[e] = r
        return r

    for c in region.calls:
        meta = c.meta.with_(**{FUSION_META: stamps[c]}) if c in stamps else c.meta
        inner[c] = Call(c.op, tuple(arg(a) for a in c.args), c.attrs, meta)
    if not outputs:
        raise PartitionError(f"internal: region '{region.name}' has no result")
    leaves = [leaf for x in outputs for leaf in _tensor_leaves(inner[x], x.checked_type)]
    result = leaves[0] if len(leaves) == 1 else Tuple(tuple(leaves))
    fn = Function(tuple(params[x] for x in inputs), result, None, _region_attrs(region.name, region.piece))
    return fn, inputs


def _tensor_leaves(e: Expr, t: Any) -> list[Expr]:
    """The tensors of a (nested) tuple value, as projections of ``e``: region results are flat."""
    if not isinstance(t, TupleType):
        return [e]
    return [leaf for i, f in enumerate(t.fields) for leaf in _tensor_leaves(TupleGetItem(e, i), f)]


def _rebuild(t: Any, items: list[Expr]) -> Expr:
    """A value of type ``t`` from its flat tensors ``items`` (consumed from the front)."""
    if not isinstance(t, TupleType):
        return items.pop(0)
    return Tuple(tuple(_rebuild(f, items) for f in t.fields))


# ---- after lowering ----------------------------------------------------------------------------------


def edge_copies(func: Function, calls: list[Any], outputs: list[str], ct: Any, by_name: dict[str, Any],
                cost_model: Any) -> list[dict[str, Any]]:
    """The copies plait.build makes at the function's edges (for the explain report; ``calls``: its
    CallReports): parameters live on the host piece, results go back to it."""
    from plait.placement.cost import type_bytes

    try:
        host = ct.host.name
    except PlaitError:
        return []
    out = []

    def add(value: str, src: str, dst: str, nbytes: int) -> None:
        if ct.shares_memory(src, dst):
            return
        e = cost_model.transfer_cost(nbytes, by_name[src], by_name[dst])
        out.append({"value": value, "from": src, "to": dst, "bytes": nbytes, "seconds": e.seconds,
                    "joules": e.joules})

    for v in func.params:
        name = "%" + v.name_hint
        nbytes = type_bytes(v.checked_type) if v.has_type else 0
        for dst in dict.fromkeys(c.piece for c in calls if name in c.inputs):
            add(name, host, dst, nbytes)
    by_id = {c.id: c for c in calls}
    for o in dict.fromkeys(outputs):
        if o in by_id:
            add(o, by_id[o].piece, host, by_id[o].out_bytes)
    return out


__all__ = ["PartitionError", "Region", "edge_copies", "is_region", "partition", "regions_of",
           "substitute"]
