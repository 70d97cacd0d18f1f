"""Placement: assign every operator call of a function to a piece of a composite target.

    a = place(mod["main"], CompositeTarget("low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"),
              objective="latency", rules=parse_place("Gemm=low_power_cpu", ct))
    a[call].piece, a[call].reason, a[call].alternatives, a.total, a.method

Minimizes the objective (``latency``, ``energy`` or ``weighted``, see :func:`cost.objective_value`)
of the calls' costs plus the transfers on edges whose ends are on different pieces (one copy per
value and destination piece), subject to capability, pins (``on_target``, ``target`` function attribute,
``--place`` rules; preferences act as pins where the piece can run the call) and each piece's memory:
the bytes of the constant weights of the calls placed on a piece must fit where its weights live
(:func:`plait.placement.fit.piece_memory`: its flash, or its RAM when it has no flash).
The sum of calls is the objective: it is the latency of a sequential executor, not of pieces running
in parallel. Values entering from the function's parameters and leaving as its result are not charged.

Fusion groups: calls default lowering would fuse (FuseOps' grouping, limited to calls that may go to the
same pieces: their pin, else the pieces capable of them, and the same claimed region) are priced on pieces lowered by default as the
one function lowering makes of them (:meth:`CostModel.fused_cost`, each call an equal share), on a piece
whose kind has patterns by its ``cost`` hook called with the group as a PatternRegion (named after the
group's function; a number prices it whole, as for claimed regions), and placed as one unit;
``Assignment.fused`` lists them. Once placed, :func:`lowering_groups` decides the groups lowering makes
(``Assignment.fusion``: these units, joined where parts priced apart share a piece); partitioning stamps
them on the calls, so that lowering makes exactly those functions (found in the build's lowering cache).

Regions: the pieces' ``patterns`` hooks claim regions of calls (:func:`regions.claim_regions`). All calls
of a claimed region go to one piece: a piece claiming it (which may run them together even when it would
not run them one by one; cost: the kind's ``cost`` hook on the PatternRegion, else the sum of the calls), or a
piece able to run each of them alone (cost: the sum). Pins apply to the region's calls; when they ask for
different pieces, or for a piece that cannot run the whole region, the region is not claimed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator, Sequence

from plait.placement.capability import Answer, claimed, piece_supports
from plait.placement.cost import CostModel, Estimate, objective_value, type_bytes
from plait.placement.fit import FitError, fit_message, piece_memory
from plait.placement.regions import PatternRegion, claim_regions
from plait.placement.problem import TIME_LIMIT_S, Problem, solve
from plait.placement.rules import Pin, PlacementError, Rule, call_name, check_rules_match, pins_for
from plait.relay.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem
from plait.relay.visitor import post_order
from plait.target import CompositeTarget
from plait.target.composite import Piece


@dataclass(frozen=True)
class CallPlacement:
    """One call's placement: ``piece``, its ``estimate`` there, ``alternatives`` (piece -> Estimate, or the
    reason it cannot run the call) and ``reason``: 'pinned by ...', 'only capable', 'cheapest',
    'transfers' (cheaper elsewhere alone, but moving data costs more) or 'memory' (a cheaper piece is full)."""

    call: Call
    piece: str
    estimate: Estimate
    alternatives: dict[str, "Estimate | str"]
    reason: str
    region: str | None = None  # the pattern name, when the call runs in a region claimed by its piece


@dataclass(frozen=True)
class Assignment:
    placed: tuple[CallPlacement, ...]  # in topological order
    objective: str
    total: float  # objective value of calls + transfers
    seconds: float
    joules: float
    transfer_seconds: float
    method: str  # 'ilp' (optimal) or 'greedy' (fallback, not proven optimal)
    exact: bool
    memory: dict[str, tuple[int, int | None]]  # piece -> (weight bytes placed, capacity or None)
    regions: tuple[PatternRegion, ...] = ()  # claimed regions placed on a piece claiming them (PatternRegion.piece, .name)
    weights_in: dict[str, str] = dataclasses.field(default_factory=dict)  # piece -> "flash" or "RAM"
    fused: tuple[tuple[Call, ...], ...] = ()  # fusion groups of 2+ calls priced as one unit (each on one piece)
    # the fusion groups of 2+ calls default lowering makes of the placed calls (lowering_groups), in topological
    # order: decided here once; partitioning stamps them on the calls and FuseOps fuses within them only
    fusion: tuple[tuple[Call, ...], ...] = ()

    def region_of(self, call: Call) -> PatternRegion | None:
        """The claimed region ``call`` runs in, or None."""
        for r in self.regions:
            if call in r:
                return r
        return None

    def __getitem__(self, call: Call) -> CallPlacement:
        for p in self.placed:
            if p.call is call:
                return p
        raise KeyError(call)

    def __iter__(self) -> Iterator[CallPlacement]:
        return iter(self.placed)

    def units(self) -> list[tuple[Call, ...]]:
        """The units that run (fusion groups, single calls; no views), in execution order: what the
        lowered graph's call nodes call."""
        group_of = {c: g for g in (self.fusion or self.fused) for c in g}
        out, seen = [], set()
        for p in self.placed:
            if getattr(p.call.op, "view", False):
                continue
            g = group_of.get(p.call, (p.call,))
            if id(g) not in seen:
                seen.add(id(g))
                out.append(g)
        return out

    def __len__(self) -> int:
        return len(self.placed)

    def pieces(self) -> dict[Call, str]:
        return {p.call: p.piece for p in self.placed}


def _calls(func: Function) -> list[Call]:
    return [n for n in post_order(func.body) if isinstance(n, Call) and not isinstance(n.op, Expr)]


def _producers(e: Expr) -> list[Call]:
    """The operator calls whose values ``e`` passes on (through tuples and projections)."""
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Call):
            out.append(x)
        elif isinstance(x, Tuple):
            stack.extend(reversed(x.fields))
        elif isinstance(x, TupleGetItem):
            stack.append(x.tuple_value)
    return out


def _capacity(piece: Piece) -> int | None:
    """Bytes of weights the piece holds (its flash, or its RAM without flash); None: not checked."""
    return piece_memory(piece.target).weights_bytes


def check_weights(func: Function, piece: Piece) -> None:
    """Every constant of ``func`` on one piece (what ``plait.build`` does for a single-piece target):
    the weights must fit where the piece keeps them."""
    mem = piece_memory(piece.target)
    if mem.weights_bytes is None:
        return
    need = sum(type_bytes(c.checked_type) for c in _constants(func))
    if need > mem.weights_bytes:
        raise FitError(fit_message(piece, "the weights", mem.weights_in, need, mem.weights_bytes))


def _constants(func: Function) -> list[Constant]:
    return [n for n in post_order(func.body) if isinstance(n, Constant)]


def place(func: Function, target: CompositeTarget | str, objective: str = "latency", rules: tuple[Rule, ...] = (),
          cost_model: CostModel | None = None, weight: float = 0.5, time_limit: float = TIME_LIMIT_S,
          exact: bool = True) -> Assignment:
    """Place every operator call of the typed function ``func`` on a piece of ``target``: :func:`price`,
    then :func:`solve_priced`."""
    return solve_priced(price(func, target, objective, rules, cost_model, weight), time_limit, exact)


@dataclass(frozen=True)
class Pricing:
    """The placement problem of a function, priced (:func:`price`): ``problem`` in numbers, and what the
    Assignment reports (per call: ``est``imates and ``support`` per piece, ``transfers``, ``pins``)."""

    problem: Problem
    calls: list[Call]
    names: list[str]
    est: list[list[Estimate | None]]
    support: list[list[Answer]]
    transfers: list[list[list[Estimate]]]
    pins: dict[Call, Pin]
    objective: str
    regions: list[PatternRegion]
    index: dict[Call, int]
    kinds: list[str]  # where each piece keeps its weights ("flash" or "RAM")
    fused: tuple[tuple[Call, ...], ...]
    body: Expr | None = None  # the priced function's body (lowering_groups groups its calls once placed)
    default_lowered: tuple[str, ...] = ()  # the pieces lowered by default lowering (FuseOps), not by a hook


def solve_priced(p: Pricing, time_limit: float = TIME_LIMIT_S, exact: bool = True) -> Assignment:
    """The optimal (or greedy, see :func:`problem.solve`) Assignment of a priced placement problem."""
    assign, method = solve(p.problem, time_limit, exact)
    if assign is None:
        raise FitError(_infeasible_message(p.problem, p.calls, p.names, p.kinds))
    a = _assignment(p.problem, assign, method, p.calls, p.names, p.est, p.support, p.transfers, p.pins, p.objective,
                    p.regions, p.index)
    a = dataclasses.replace(a, weights_in=dict(zip(p.names, p.kinds)), fused=p.fused)
    if p.body is None:
        return a
    return dataclasses.replace(a, fusion=lowering_groups(p.body, a, p.default_lowered, p.regions))


def lowering_groups(body: Expr, a: Assignment, default_lowered: Sequence[str],
                    regions: Sequence[PatternRegion] = ()) -> tuple[tuple[Call, ...], ...]:
    """The fusion groups (2+ calls, topological order) default lowering makes of ``body``'s calls as ``a``
    places them: FuseOps' grouping (:func:`plait.relay.passes.fuse_ops.find_groups`) of the calls that share a
    piece lowered by default (``default_lowered``; a hook lowers its own calls as it sees fit) and a claimed
    region. Placement priced these units (a group whole, or in parts where its calls may
    go to different pieces, and whole again where the parts share one: :func:`_price_split_groups`); this is
    the one place the groups are decided: :func:`plait.placement.partition.partition` stamps each on its calls
    (``meta["fusion"]``) and FuseOps in default lowering fuses within a stamp only."""
    from plait.relay.passes.fuse_ops import find_groups

    index = {p.call: k for k, p in enumerate(a.placed)}
    piece = {p.call: p.piece for p in a.placed}
    region = {c: k for k, r in enumerate(regions) for c in r.calls}

    def key(c: Call) -> object:
        p = piece.get(c)
        return (region.get(c), p) if p in default_lowered else ("alone", id(c))

    out, seen = [], set()
    for g in find_groups(body, key=key).values():
        if id(g) in seen or len(g.members) < 2 or any(c not in index for c in g.members):
            continue
        seen.add(id(g))
        out.append(tuple(sorted(g.members, key=index.__getitem__)))
    return tuple(sorted(out, key=lambda g: index[g[0]]))


def price(func: Function, target: CompositeTarget | str, objective: str = "latency", rules: tuple[Rule, ...] = (),
          cost_model: CostModel | None = None, weight: float = 0.5) -> Pricing:
    """Every operator call of the typed function ``func`` priced on every piece of ``target`` that may run
    it (capability, pins, claimed regions, fusion groups; the memory checks that need no solver)."""
    ct = target if isinstance(target, CompositeTarget) else CompositeTarget(target)
    objective_value(0.0, 0.0, objective, weight)  # validates the objective name
    cm = CostModel.for_target(ct) if cost_model is None else cost_model
    pieces = list(ct.pieces)
    names = [p.name for p in pieces]
    check_rules_match(func, tuple(rules))
    calls = _calls(func)
    index = {c: k for k, c in enumerate(calls)}
    alone = [[piece_supports(p, c) for p in pieces] for c in calls]
    regions = claim_regions(func, pieces)
    while True:  # regions whose pins disagree are dropped; capability only shrinks, so this ends
        with claimed(_claims(regions, pieces)):
            pins: dict[Call, Pin] = pins_for(func, ct, rules)
            support = [[piece_supports(p, c) for p in pieces] for c in calls]
        kept = [r for r in regions if _pins_agree(r, pins, _region_pieces(r, alone, index, names))]
        if len(kept) == len(regions):
            break
        regions = kept
    member = {c: r for r in regions for c in r.calls}
    allowed_r = {id(r): _region_pieces(r, alone, index, names) for r in regions}
    for c, row in zip(calls, support):
        if not any(a.ok for a in row):
            why = "; ".join(f"{p.name}: {a.reason}" for p, a in zip(pieces, row))
            raise PlacementError(f"no piece can run {call_name(c)}: {why}")
    ok_at = [[support[u][q].ok if member.get(c) is None else names[q] in allowed_r[id(member[c])]
              for q in range(len(pieces))] for u, c in enumerate(calls)]
    fused = _fusion_groups(func, index, names, ok_at, pins, member)
    default = [not (p.target.kind.hooks.get("relay_to_tir") or p.target.kind.hooks.get("relay_to_runtime"))
               for p in pieces]  # lowered by default lowering, which fuses
    est: list[list[Estimate | None]] = [[None] * len(pieces) for _ in calls]
    units = []  # fusion groups priced as one function somewhere: placed as one unit
    for fn, g, inputs in fused:
        n = len(g)
        for q, p in enumerate(pieces):
            e = None
            if not ok_at[index[g[0]]][q]:
                pass
            elif default[q]:
                e = cm.fused_cost(fn, list(g), p)
            elif p.target.kind.hooks.get("patterns") and g[0] not in member:  # it may price regions whole
                e = cm.region_cost(PatternRegion(str(fn.attrs.get("name")), g, inputs, g[-1]), p)
            if e is not None:
                share = Estimate(e.seconds / n, e.joules / n, e.source,
                                 f"1/{n} of fused group '{fn.attrs.get('name')}' ({e.seconds:.4g} s): {e.detail}")
                for c in g:
                    est[index[c]][q] = share
        if any(est[index[g[0]]][q] is not None for q in range(len(pieces))):
            units.append(g)
    for u, c in enumerate(calls):
        r = member.get(c)
        for q, p in enumerate(pieces):
            ok = ok_at[u][q]
            if r is not None and not ok and support[u][q].ok:
                support[u][q] = Answer(False, _split_reason(r, p, alone, index, q))
            if ok and est[u][q] is None:
                est[u][q] = cm.call_cost(c, p)
            elif not ok:
                est[u][q] = None
    _price_split_groups(func, cm, pieces, calls, index, ok_at, pins, member, default, est)
    for r in regions:  # a claimer's cost hook may price the region as a whole
        for pn, pattern in r.claims:
            q = names.index(pn)
            got = cm.region_cost(dataclasses.replace(r, name=pattern, piece=pn), pieces[q])
            if got is None:
                continue
            for c in r.calls:
                est[index[c]][q] = got if c is r.output else Estimate(
                    0.0, 0.0, "region", f"in region '{pattern}': charged to its output call")
    cost = [[None if e is None else e.value(objective, weight) for e in row] for row in est]
    consumers: list[set[int]] = [set() for _ in calls]
    for c in calls:
        for a in c.args:
            for u in _producers(a):
                if u in index:
                    consumers[index[u]].add(index[c])
    outputs, transfers = [], []
    for k, c in enumerate(calls):
        nbytes = type_bytes(c.checked_type)
        tr_est = [[cm.transfer_cost(nbytes, a, b) for b in pieces] for a in pieces]
        transfers.append(tr_est)
        outputs.append((tuple(sorted(consumers[k])), [[t.value(objective, weight) for t in row] for row in tr_est]))
    weights = [sum(type_bytes(a.checked_type) for a in c.args if isinstance(a, Constant)) for c in calls]
    capacity = [_capacity(p) for p in pieces]
    pinned = [names.index(pins[c].piece) if c in pins else None for c in calls]
    groups = [tuple(index[c] for c in r.calls) for r in regions]
    groups += [tuple(index[c] for c in g) for g in units if g[0] not in member]  # (inside a region: a subset)
    pr = Problem(cost, outputs, weights, capacity, pinned, groups)
    kinds = [piece_memory(p.target).weights_in for p in pieces]
    _check_memory(pr, calls, pieces, kinds)
    return Pricing(pr, calls, names, est, support, transfers, pins, objective, regions, index, kinds,
                   tuple(g for _, g, _ in fused), func.body, tuple(n for n, d in zip(names, default) if d))


def _fusion_groups(func: Function, index: dict[Call, int], names: list[str], ok_at: list[list[bool]],
                   pins: dict[Call, Pin], member: dict[Call, PatternRegion]) -> list[tuple[Function, tuple[Call, ...], tuple[Expr, ...]]]:
    """The groups default lowering fuses when their calls share a piece (FuseOps' grouping), limited to calls
    that may go to the same pieces (their pin, else the pieces capable of them; and the same claimed region):
    each group is then placed
    as one unit, priced as the one function lowering makes of it. Each: (its typed Primitive function,
    its calls in topological order, the last one its output, the non-constant values entering it)."""
    from plait.relay.infer import infer_expr
    from plait.relay.passes.fuse_ops import find_groups, group_function

    def key(c: Call) -> object:  # the claimed region and the pieces the call may go to
        r, pin = member.get(c), pins.get(c)
        may = (pin.piece,) if pin is not None else tuple(n for n, ok in zip(names, ok_at[index[c]]) if ok)
        return (id(r) if r is not None else None, may)

    out, seen = [], set()
    for g in find_groups(func.body, key=key).values():
        if id(g) in seen or len(g.members) < 2:
            continue
        seen.add(id(g))
        fn, inputs = group_function(g)
        infer_expr(fn)
        out.append((fn, tuple(sorted(g.members, key=index.__getitem__)),
                    tuple(x for x in inputs if not isinstance(x, Constant))))
    return sorted(out, key=lambda x: index[x[1][0]])


def _price_split_groups(func: Function, cm: CostModel, pieces: list[Piece], calls: list[Call],
                        index: dict[Call, int], ok_at: list[list[bool]], pins: dict[Call, Pin],
                        member: dict[Call, PatternRegion], default: list[bool],
                        est: list[list[Estimate | None]]) -> None:
    """A group default lowering fuses whole when all its calls share a piece, but that placement splits
    because one part may also go to another piece (a convolution blas can run, its bias and Clip only c):
    on each piece lowered by default that can run the whole group, that movable part is charged what the
    whole fused function costs less what the rest costs there as priced (``est``, updated in place). All
    on that piece, the calls then cost the fused function; the part elsewhere, the rest costs its own
    function(s): what lowering makes either way. Only groups with exactly one movable part (a set of
    calls that may go to the same pieces) are repriced."""
    from plait.relay.infer import infer_expr
    from plait.relay.passes.fuse_ops import find_groups, group_function

    names = [p.name for p in pieces]

    def may(c: Call) -> tuple[str, ...]:
        pin = pins.get(c)
        return (pin.piece,) if pin is not None else tuple(n for n, ok in zip(names, ok_at[index[c]]) if ok)

    def key(c: Call) -> object:  # as _fusion_groups, without the pieces the calls may go to
        r, pin = member.get(c), pins.get(c)
        return (id(r) if r is not None else None, pin.piece if pin is not None else None)

    seen: set[int] = set()
    for g in find_groups(func.body, key=key).values():
        if id(g) in seen or len(g.members) < 2 or any(c not in index for c in g.members):
            continue
        seen.add(id(g))
        parts: dict[tuple[str, ...], list[Call]] = {}
        for c in sorted(g.members, key=index.__getitem__):
            parts.setdefault(may(c), []).append(c)
        if len(parts) < 2:
            continue  # not split: priced whole already
        shared = set.intersection(*(set(m) for m in parts))
        movable = [m for m in parts if set(m) != shared]
        if len(movable) != 1:
            continue
        moving = parts[movable[0]]
        fn = None
        for q, p in enumerate(pieces):
            if names[q] not in shared or not default[q]:
                continue
            rest = [est[index[c]][q] for c in g.members if c not in moving]
            if any(e is None for e in rest):
                continue
            if fn is None:
                fn, _ = group_function(g)
                infer_expr(fn)
            whole = cm.fused_cost(fn, sorted(g.members, key=index.__getitem__), p)
            if whole is None:
                continue
            s = max(0.0, whole.seconds - sum(e.seconds for e in rest))  # type: ignore[union-attr]
            j = max(0.0, whole.joules - sum(e.joules for e in rest))  # type: ignore[union-attr]
            for c in moving:
                est[index[c]][q] = Estimate(
                    s / len(moving), j / len(moving), whole.source,
                    f"{'' if len(moving) == 1 else f'1/{len(moving)} of '}the whole group less its other calls here "
                    f"({whole.seconds - s:.4g} s); {whole.detail}")


def _claims(regions: list[PatternRegion], pieces: list[Piece]) -> dict[Call, dict[str, str]]:
    kinds = {p.name: p.target.kind_name for p in pieces}
    out: dict[Call, dict[str, str]] = {}
    for r in regions:
        for pn, pattern in r.claims:
            why = f"pattern '{pattern}' of target kind '{kinds[pn]}' claims it in a region of {len(r.calls)} calls"
            for c in r.calls:
                out.setdefault(c, {})[pn] = why
    return out


def _region_pieces(r: PatternRegion, alone: list, index: dict[Call, int], names: list[str]) -> list[str]:
    """Where the region may go: a piece claiming it, or one able to run each of its calls alone."""
    claimers = {pn for pn, _ in r.claims}
    return [n for q, n in enumerate(names) if n in claimers or all(alone[index[c]][q].ok for c in r.calls)]


def _pins_agree(r: PatternRegion, pins: dict[Call, Pin], allowed: list[str]) -> bool:
    wanted = {pins[c].piece for c in r.calls if c in pins}
    return len(wanted) <= 1 and wanted <= set(allowed)


def _split_reason(r: PatternRegion, piece: Piece, alone: list, index: dict[Call, int], q: int) -> str:
    bad = next(c for c in r.calls if not alone[index[c]][q].ok)
    return (f"its region '{r.name}' runs on one piece, and '{piece.name}' cannot run {call_name(bad)}: "
            f"{alone[index[bad]][q].reason}")


def _fmt_cap(names: list[str], pr: Problem, kinds: list[str]) -> str:
    return ", ".join(f"{n}: {'unlimited' if c is None else f'{c:,} bytes of {k}'}"
                     for n, c, k in zip(names, pr.capacity, kinds))


def _check_memory(pr: Problem, calls: list[Call], pieces: list[Piece], kinds: list[str]) -> None:
    """Before solving: a call whose weights fit no piece it may go to; the calls that can go to only
    one piece (pinned, only capable, or too big elsewhere) together too big for it."""
    only: dict[int, list[int]] = {}
    for u, c in enumerate(calls):
        fits = [p for p in pr.allowed(u) if pr.capacity[p] is None or pr.weights[u] <= pr.capacity[p]]
        allowed = pr.allowed(u)
        if not fits and len(allowed) == 1:
            p = allowed[0]
            raise FitError(fit_message(pieces[p], f"the weights of {call_name(c)}", kinds[p], pr.weights[u],
                                       pr.capacity[p]))  # type: ignore[arg-type]
        if not fits:
            where = ", ".join(f"'{pieces[p].name}' {pr.capacity[p]:,} bytes of {kinds[p]}" for p in allowed)
            raise FitError(f"{call_name(c)}: its weights need {pr.weights[u]:,} bytes, more than any piece that can "
                           f"run it holds ({where})")
        if len(fits) == 1 and pr.weights[u]:
            only.setdefault(fits[0], []).append(u)
    for p, units in sorted(only.items()):
        need, cap = sum(pr.weights[u] for u in units), pr.capacity[p]
        if cap is not None and need > cap:
            pinned = all(pr.pinned[u] == p for u in units)
            what = (f"the weights of the {len(units)} calls pinned to it" if pinned else
                    f"the weights of the {len(units)} calls that cannot go to another piece")
            raise FitError(fit_message(pieces[p], what, kinds[p], need, cap))


def _infeasible_message(pr: Problem, calls: list[Call], names: list[str], kinds: list[str]) -> str:
    total = sum(pr.weights)
    return (f"cannot place the {len(calls)} calls within the pieces' memory: their weights need {total:,} bytes; "
            f"capacities {_fmt_cap(names, pr, kinds)}")


def _unit_reason(pr: Problem, unit: tuple[int, ...], p: int, used: list[int], names: list[str]) -> str:
    """Why the calls of ``unit`` (one call, or a region) went to piece ``p``: only capable, cheapest,
    transfers or memory."""
    allowed = pr.allowed(unit[0])
    if len(allowed) == 1:
        return "only capable"
    value = {q: sum(pr.cost[v][q] for v in unit) for q in allowed}
    best = min(allowed, key=lambda q: (value[q], q))
    if value[best] >= value[p]:
        return "cheapest"
    cap = pr.capacity[best]
    full = cap is not None and used[best] + sum(pr.weights[v] for v in unit) > cap
    return f"memory ('{names[best]}' is cheaper but full)" if full else \
        f"transfers ('{names[best]}' is cheaper alone, moving data costs more)"


def _assignment(pr: Problem, assign: list[int], method: str, calls: list[Call], names: list[str],
                est: list[list[Estimate | None]], support: list, transfers: list, pins: dict[Call, Pin],
                objective: str, regions: list[PatternRegion], index: dict[Call, int]) -> Assignment:
    used = [0] * len(names)
    for u, p in enumerate(assign):
        used[p] += pr.weights[u]
    member = {c: r for r in regions for c in r.calls}
    placed_regions = []
    for r in regions:
        pn = names[assign[index[r.output]]]
        pattern = dict(r.claims).get(pn)
        if pattern is not None:
            placed_regions.append(dataclasses.replace(r, name=pattern, piece=pn))
    in_claimed = {c: r for r in placed_regions for c in r.calls}
    placed = []
    for u, c in enumerate(calls):
        p = assign[u]
        alts: dict[str, Estimate | str] = {}
        for q, n in enumerate(names):
            e = est[u][q]
            alts[n] = e if e is not None else support[u][q].reason
        r = member.get(c)
        pin = pins.get(c)
        if pin is None and r is not None:
            pin = next((pins[x] for x in r.calls if x in pins), None)
        if pin is not None:
            reason = f"preferred by {pin.source}" if pin.prefer else f"pinned by {pin.source}"
        else:
            reason = _unit_reason(pr, pr.group(u), p, used, names)
        if r is not None:
            reason = (f"region '{in_claimed[c].name}': " if c in in_claimed
                      else f"with region '{r.name}' (run call by call): ") + reason
        placed.append(CallPlacement(c, names[p], est[u][p], alts, reason, in_claimed[c].name if c in in_claimed else None))
    seconds = sum(est[u][p].seconds for u, p in enumerate(assign))
    joules = sum(est[u][p].joules for u, p in enumerate(assign))
    t_s = 0.0
    for u, (consumers, _) in enumerate(pr.outputs):
        for b in sorted({assign[v] for v in consumers} - {assign[u]}):
            t = transfers[u][assign[u]][b]
            t_s += t.seconds
            joules += t.joules
    memory = {n: (used[q], pr.capacity[q]) for q, n in enumerate(names)}
    return Assignment(tuple(placed), objective, pr.objective(assign), seconds + t_s, joules, t_s, method,
                      method == "ilp", memory, tuple(placed_regions))
