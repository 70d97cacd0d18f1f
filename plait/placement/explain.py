"""``plait explain``: why every call of a model goes where it goes, and what the other choices cost.

    from plait.pipeline.explain import explain     # the runner; this module builds the report
    r = explain(mod, "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f", objective="latency",
                place="/fc/*=low_power_cpu")
    print(r.text())            # a table: per call, the cost on every piece, the chosen piece and why; totals
    r.to_json(); r.to_dot(); r.render("placement.svg")

An IRModule is typed and folded (FoldConstant, FoldBatchNorm) as ``plait.build`` does before placing,
so the report describes the calls build places. A Function is placed as it is (typed if it is not).
The numbers are the placement cost model's estimates (:mod:`plait.placement.cost`), each with its
source (measured, hook, schedule, roofline); the choice is :func:`plait.placement.place`'s.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from plait.errors import PlaitError
from plait.placement.cost import CostModel, objective_value, type_bytes
from plait.placement.fit import facts_lines, facts_table, memory_line
from plait.placement.partition import edge_copies
from plait.placement.rules import PlacementError, Rule, parse_place
from plait.relay.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var
from plait.target import CompositeTarget

OBJECTIVES = ("latency", "energy", "weighted")

# piece colours in the drawing (pastel, distinguishable); the i-th piece gets PALETTE[i % len]
PALETTE = ("#a6cee3", "#fdbf6f", "#b2df8a", "#fb9a99", "#cab2d6", "#ffff99", "#8dd3c7", "#bebada", "#fccde5",
           "#d9d9d9")

NO_DOT = "drawing needs graphviz's 'dot' program (apt install graphviz); write a .dot file instead"


class ExplainError(PlaitError):
    """The report cannot be written or drawn."""


def check_objective(objective: Any) -> str:
    """The objective name, or a :class:`PlacementError`."""
    if objective not in OBJECTIVES:
        raise PlacementError(f"unknown objective {str(objective)!r}: expected latency, energy or weighted")
    return objective


def check_weight(weight: Any) -> float:
    """``weight`` as a float in [0, 1], or a :class:`PlacementError`."""
    try:
        w = float(weight)
    except (TypeError, ValueError):
        w = math.nan
    if isinstance(weight, bool) or not (0.0 <= w <= 1.0):
        raise PlacementError(f"weight must be between 0 and 1 (weighted = weight x us + (1 - weight) x mJ), "
                             f"got {weight!r}")
    return w


def rules_of(place: Any, ct: CompositeTarget) -> tuple[Rule, ...]:
    """``--place`` rules from a rule string, parsed rules, or None."""
    if place is None:
        return ()
    if isinstance(place, str):
        return parse_place(place, ct)
    rules = tuple(place)
    for r in rules:
        if not isinstance(r, Rule):
            raise PlacementError(f"place: expected a rule string or Rules, got {type(r).__name__}")
        if r.piece not in ct.names:
            parse_place(str(r), ct)  # raises the unknown-piece message
    return rules


def quiet_solver_banner() -> None:
    """HiGHS prints a banner on the process's stdout (fd 1) the first time a solver is made; make that
    first one now, silenced (:func:`plait.memory.ilp.new_highs`), so that ``--json`` output stays JSON."""
    from plait.memory.ilp import new_highs

    new_highs()


# ---- the report ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallReport:
    """One placed call. ``costs``: piece -> ``{"seconds", "joules", "value", "source", "detail"}`` (value =
    the objective), or ``{"cannot": why}``; ``inputs``: ids of the calls (``n3``) or ``%``-names of the
    function's parameters that it reads; ``region``: the pattern name of the claimed region it runs in."""

    id: str
    name: str
    op: str
    op_type: str
    piece: str
    reason: str
    inputs: tuple[str, ...]
    weight_bytes: int
    out_bytes: int
    costs: dict[str, dict[str, Any]]
    region: str | None = None  # the pattern's name when the call runs in a region its piece claimed

    @property
    def label(self) -> str:
        return self.name or self.op

    def capable(self) -> list[str]:
        return [p for p, c in self.costs.items() if "cannot" not in c]


@dataclass
class Report:
    target: str
    pieces: dict[str, str]  # piece name -> its target string, in composite order
    objective: str
    weight: float
    rules: list[str]
    method: str
    exact: bool
    calls: list[CallReport]
    params: dict[str, str]  # parameter name -> type
    outputs: list[str]  # ids (or %parameter names) of the function's result
    transfers: list[dict[str, Any]]  # {"value": call id, "from", "to", "bytes", "seconds", "joules"}
    memory: dict[str, dict[str, Any]]  # piece -> {"used": bytes of weights, "capacity": bytes or None}
    totals: dict[str, float]  # value, seconds, joules, call_seconds, call_joules, transfer_seconds, transfer_joules
    single_piece: dict[str, dict[str, Any]]  # piece -> totals with every call there, or {"cannot": [ids], ...}
    regions: list[dict[str, Any]] = field(default_factory=list)  # claimed regions: {"name", "piece", "calls": [ids]}
    # copies build makes of the function's inputs (from the host piece) and results (back to it); placement
    # does not charge them: {"value": "%x" or call id, "from", "to", "bytes", "seconds", "joules"}
    edge_copies: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # piece -> fact -> value, where
    assignment: Any = field(default=None, repr=False, compare=False)  # the solver's Assignment (not serialized)

    # ---- data ----

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "pieces": dict(self.pieces), "objective": self.objective, "weight": self.weight,
            "rules": list(self.rules), "method": self.method, "exact": self.exact,
            "calls": [{"id": c.id, "name": c.name, "op": c.op, "op_type": c.op_type, "piece": c.piece,
                       "reason": c.reason, "inputs": list(c.inputs), "weight_bytes": c.weight_bytes,
                       "out_bytes": c.out_bytes, "costs": {p: dict(v) for p, v in c.costs.items()},
                       "region": c.region}
                      for c in self.calls],
            "params": dict(self.params), "outputs": list(self.outputs),
            "transfers": [dict(t) for t in self.transfers], "memory": {p: dict(m) for p, m in self.memory.items()},
            "totals": dict(self.totals), "single_piece": {p: dict(s) for p, s in self.single_piece.items()},
            "regions": [dict(r, calls=list(r["calls"])) for r in self.regions],
            "edge_copies": [dict(t) for t in self.edge_copies],
            "facts": {p: {n: dict(f) for n, f in fs.items()} for p, fs in self.facts.items()},
        }

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Report":
        try:
            calls = [CallReport(c["id"], c["name"], c["op"], c["op_type"], c["piece"], c["reason"],
                                tuple(c["inputs"]), c["weight_bytes"], c["out_bytes"], dict(c["costs"]),
                                c.get("region"))
                     for c in d["calls"]]
            return cls(d["target"], dict(d["pieces"]), d["objective"], d["weight"], list(d["rules"]), d["method"],
                       d["exact"], calls, dict(d["params"]), list(d["outputs"]), list(d["transfers"]),
                       dict(d["memory"]), dict(d["totals"]), dict(d["single_piece"]), list(d.get("regions", [])),
                       list(d.get("edge_copies", [])), dict(d.get("facts", {})))
        except (KeyError, TypeError) as exc:
            raise ExplainError(f"not a placement report: missing or malformed {exc}") from None

    def call(self, key: str) -> CallReport:
        """A call by id (``n3``) or node name (the first with that name)."""
        for c in self.calls:
            if key in (c.id, c.name):
                return c
        raise KeyError(key)

    def per_piece(self) -> dict[str, int]:
        """Number of calls on each piece (every piece listed)."""
        out = {p: 0 for p in self.pieces}
        for c in self.calls:
            out[c.piece] += 1
        return out

    # ---- text ----

    def summary(self) -> str:
        """Two lines: calls per piece, transfers and totals; memory per piece."""
        t = self.totals
        counts = ", ".join(f"{p} {n} call{'s' if n != 1 else ''}" for p, n in self.per_piece().items())
        line1 = (f"placement ({self.objective}, {_method(self.method, self.exact)}): {counts}; "
                 f"{len(self.transfers)} transfer{'s' if len(self.transfers) != 1 else ''}; "
                 f"estimated {fmt_seconds(t['seconds'])}, {fmt_joules(t['joules'])}")
        return f"{line1}\nweights in memory: {memory_line(self.memory)}\n"

    def text(self) -> str:
        """A fixed-width report: one row per call, then transfers, memory, totals and single-piece totals."""
        pieces = list(self.pieces)
        out = [f"placement of {len(self.calls)} calls on {self.target!r}",
               f"objective: {_objective_text(self.objective, self.weight)}; solver: {_method(self.method, self.exact)}"
               + (f"; rules: {','.join(self.rules)}" if self.rules else ""), ""]
        notes: list[str] = []
        head = ["#", "node", "op", *pieces, "piece", "reason"]
        rows = []
        for k, c in enumerate(self.calls):
            cells = []
            for p in pieces:
                cost = c.costs[p]
                if "cannot" in cost:
                    if cost["cannot"] not in notes:
                        notes.append(cost["cannot"])
                    cells.append(f"cannot [{notes.index(cost['cannot']) + 1}]")
                else:
                    mark = "*" if p == c.piece else " "
                    cells.append(f"{mark}{fmt_seconds(cost['seconds'])} {fmt_joules(cost['joules'])} "
                                 f"{cost['source']}")
            rows.append([str(k), c.label, c.op, *cells, c.piece, c.reason])
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        right = {0}
        for r in [head, *rows]:
            out.append("  ".join(x.rjust(w) if i in right else x.ljust(w)
                                 for i, (x, w) in enumerate(zip(r, widths))).rstrip())
        out.append("(* chosen; each cell: estimated time, energy, source of the estimate)")
        for i, n in enumerate(notes, 1):
            out.append(f"[{i}] {n}")
        out.append("")
        for r in self.regions:
            out.append(f"region '{r['name']}' on {r['piece']}: " + ", ".join(
                f"{self.call(i).label} ({i})" for i in r["calls"]))
        if self.transfers:
            out.append(f"transfers ({len(self.transfers)}):")
            for tr in self.transfers:
                out.append(f"  {self.call(tr['value']).label} ({tr['value']}): {tr['from']} -> {tr['to']}, "
                           f"{tr['bytes']} bytes, {fmt_seconds(tr['seconds'])}, {fmt_joules(tr['joules'])}")
        else:
            out.append("transfers: none")
        if self.edge_copies:
            out.append("copies of the inputs and results to and from the host piece (not in the totals):")
            for tr in self.edge_copies:
                what = tr["value"] if tr["value"].startswith("%") else f"{self.call(tr['value']).label} ({tr['value']})"
                out.append(f"  {what}: {tr['from']} -> {tr['to']}, {tr['bytes']} bytes, {fmt_seconds(tr['seconds'])}, "
                           f"{fmt_joules(tr['joules'])}")
        out.append(f"weights in memory: {memory_line(self.memory)}")
        t = self.totals
        out.append(f"chosen: {fmt_seconds(t['seconds'])} (calls {fmt_seconds(t['call_seconds'])} + transfers "
                   f"{fmt_seconds(t['transfer_seconds'])}), {fmt_joules(t['joules'])}; "
                   f"{self.objective} {_fmt_value(t['value'], self.objective)}")
        out.append("everything on one piece:")
        w = max(len(p) for p in pieces)
        for p in pieces:
            s = self.single_piece[p]
            if "cannot" in s:
                out.append(f"  {p.ljust(w)}  {s['message']}")
                continue
            where = self.memory.get(p, {}).get("memory", "RAM")
            fits = "" if s["fits"] else \
                f"; the weights do not fit its {where} ({s['weight_bytes']:,} > {s['capacity']:,} bytes)"
            out.append(f"  {p.ljust(w)}  {fmt_seconds(s['seconds'])}, {fmt_joules(s['joules'])}; {self.objective} "
                       f"{_fmt_value(s['value'], self.objective)}{fits}")
        if self.facts:
            out += [""] + facts_lines(self.facts)
        return "\n".join(out) + "\n"

    # ---- drawing ----

    def to_dot(self) -> str:
        """Graphviz DOT: one box per call coloured by piece, the inputs and outputs, a legend of pieces;
        edges that cross pieces are dashed and labelled with the transfer."""
        colour = {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(self.pieces)}
        crossing = {(t["value"], t["to"]): t for t in self.transfers}
        piece_of = {c.id: c.piece for c in self.calls}
        lines = ["digraph placement {", "  rankdir=TB;",
                 '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
                 '  edge [fontname="Helvetica", fontsize=9];',
                 f"  label={_q(f'{self.objective} placement on {self.target}')}; labelloc=t;",
                 "  subgraph cluster_legend {", '    label="pieces"; style=dashed;']
        for i, (p, tgt) in enumerate(self.pieces.items()):
            lines.append(f"    legend_{i} [label={_q(f'{p}: {tgt}')}, fillcolor={_q(colour[p])}];")
        lines.append("  }")
        for i, (name, ty) in enumerate(self.params.items()):
            lines.append(f"  {_param_id(i)} [shape=ellipse, style=solid, label={_q(f'{name}: {ty}')}];")
        param_ids = {"%" + name: _param_id(i) for i, name in enumerate(self.params)}
        in_region = {i: k for k, r in enumerate(self.regions) for i in r["calls"]}
        edge_attrs = {}  # copies of inputs and results (from / to the host piece), not charged by placement
        for t in self.edge_copies:
            text = f"copy {t['bytes']} B, {fmt_seconds(t['seconds'])}"
            edge_attrs[t["value"], t["to"] if t["value"].startswith("%") else "host"] = \
                f' [style=dashed, color="#7f7f7f", label={_q(text)}]'

        def node(c: CallReport, indent: str) -> str:
            cost = c.costs[c.piece]
            label = f"{c.label}\n{c.op}\n{c.piece}: {fmt_seconds(cost['seconds'])}"
            return (f"{indent}{c.id} [label={_q(label)}, fillcolor={_q(colour[c.piece])}, "
                    f"tooltip={_q(c.reason)}];")

        for k, r in enumerate(self.regions):
            lines.append(f"  subgraph cluster_region_{k} {{")
            title = f"region '{r['name']}' on {r['piece']}"
            lines.append(f"    label={_q(title)}; style=rounded;")
            lines.extend(node(self.call(i), "    ") for i in r["calls"])
            lines.append("  }")
        lines.extend(node(c, "  ") for c in self.calls if c.id not in in_region)
        for c in self.calls:
            for src in c.inputs:
                if src in param_ids:
                    lines.append(f"  {param_ids[src]} -> {c.id}{edge_attrs.get((src, c.piece), '')};")
                    continue
                attrs = ""
                if src in piece_of and piece_of[src] != c.piece:
                    t = crossing.get((src, c.piece))
                    text = "shared memory" if t is None else f"{t['bytes']} B, {fmt_seconds(t['seconds'])}"
                    attrs = f' [style=dashed, color="#d62728", label={_q(text)}]'
                lines.append(f"  {src} -> {c.id}{attrs};")
        for i, src in enumerate(self.outputs):
            lines.append(f"  out_{i} [shape=ellipse, style=solid, label={_q(f'output {i}')}];")
            lines.append(f"  {param_ids.get(src, src)} -> out_{i}{edge_attrs.get((src, 'host'), '')};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def render(self, path: str | os.PathLike) -> Path:
        """Write the drawing: ``.dot`` as text, ``.svg``/``.png``/``.pdf`` through graphviz's ``dot``."""
        out = Path(path)
        fmt = out.suffix.lower().lstrip(".")
        if fmt not in ("dot", "gv", "svg", "png", "pdf"):
            raise ExplainError(f"cannot draw to '{out}': expected a .svg, .png, .pdf or .dot file")
        try:
            if fmt in ("dot", "gv"):
                out.write_text(self.to_dot(), encoding="utf-8")
                return out
            exe = shutil.which("dot")
            if exe is None:
                raise ExplainError(NO_DOT)
            r = subprocess.run([exe, f"-T{fmt}", "-o", str(out)], input=self.to_dot().encode(),
                               capture_output=True, timeout=120)
        except OSError as exc:
            raise ExplainError(f"cannot write '{out}': {exc.strerror or exc}") from None
        if r.returncode != 0:
            raise ExplainError(f"graphviz 'dot' failed drawing '{out}': "
                               f"{r.stderr.decode(errors='replace').strip()}")
        return out


def summarize(a: Any) -> str:
    """Two lines about an Assignment (what ``plait run``/``compile`` print): calls per piece, transfer time,
    estimated totals; the weights in each piece's memory."""
    counts = {p: 0 for p in a.memory}
    for p in a.placed:
        counts[p.piece] = counts.get(p.piece, 0) + 1
    calls = ", ".join(f"{p} {n} call{'s' if n != 1 else ''}" for p, n in counts.items())
    kinds = getattr(a, "weights_in", {})
    memory = {p: {"used": int(u), "capacity": c, "memory": kinds.get(p, "RAM")} for p, (u, c) in a.memory.items()}
    return (f"placement ({a.objective}, {_method(a.method, a.exact)}): {calls}; transfers "
            f"{fmt_seconds(a.transfer_seconds)}; estimated {fmt_seconds(a.seconds)}, {fmt_joules(a.joules)}\n"
            f"weights in memory: {memory_line(memory)}\n")


# ---- formatting ---------------------------------------------------------------------------------------


def fmt_seconds(s: float) -> str:
    return _si(s, "s")


def fmt_joules(j: float) -> str:
    return _si(j, "J")


def _si(x: float, unit: str) -> str:
    if x == 0:
        return f"0 {unit}"
    for scale, prefix in ((1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n")):
        if abs(x) >= scale:
            v = x / scale
            return f"{v:.0f} {prefix}{unit}" if abs(float(f"{v:.3g}")) >= 1000 else f"{v:.3g} {prefix}{unit}"
    return f"{x / 1e-12:.3g} p{unit}"


def _fmt_value(v: float, objective: str) -> str:
    if objective == "latency":
        return fmt_seconds(v)
    if objective == "energy":
        return fmt_joules(v)
    return f"{v:.6g}"


def _objective_text(objective: str, weight: float) -> str:
    if objective == "weighted":
        return f"weighted ({weight:g} x us + {1 - weight:g} x mJ)"
    return objective


def _method(method: str, exact: bool) -> str:
    return f"{method} ({'optimal' if exact else 'not proven optimal'})"


def _q(s: str) -> str:
    """A DOT double-quoted string."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _param_id(i: int) -> str:
    return f"in_{i}"


# ---- building the report ----------------------------------------------------------------------------


def _sources(e: Expr, ids: dict[Call, str]) -> list[str]:
    """Ids of the placed calls (or names of the parameters) whose values ``e`` passes on."""
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        if isinstance(x, Call) and x in ids:
            out.append(ids[x])
        elif isinstance(x, Call):
            stack.extend(reversed(x.args))  # a call that is not placed: look through it
        elif isinstance(x, Tuple):
            stack.extend(reversed(x.fields))
        elif isinstance(x, TupleGetItem):
            stack.append(x.tuple_value)
        elif isinstance(x, Var):
            out.append("%" + x.name_hint)
    return list(dict.fromkeys(out))


def _estimate_dict(e: Any, objective: str, weight: float) -> dict[str, Any]:
    if isinstance(e, str):
        return {"cannot": e}
    return {"seconds": e.seconds, "joules": e.joules, "value": objective_value(e.seconds, e.joules, objective, weight),
            "source": e.source, "detail": e.detail}


def report_of(a: Any, func: Function, ct: CompositeTarget, cost_model: CostModel, weight: float = 0.5,
              rules: Iterable[Rule] = ()) -> Report:
    """The report of an Assignment ``a`` of ``func`` (the solver's answer) priced by ``cost_model``."""
    objective = a.objective
    pieces = {p.name: str(p.target) for p in ct.pieces}
    by_name = {p.name: p for p in ct.pieces}
    ids = {p.call: f"n{k}" for k, p in enumerate(a.placed)}
    calls = []
    for p in a.placed:
        c = p.call
        calls.append(CallReport(
            ids[c], str(c.meta.get("name") or ""), c.op_name, str(c.meta.get("op_type") or ""), p.piece, p.reason,
            tuple(x for arg in c.args for x in _sources(arg, ids)),
            sum(type_bytes(x.checked_type) for x in c.args if isinstance(x, Constant)), type_bytes(c.checked_type),
            {n: _estimate_dict(p.alternatives.get(n, "not considered"), objective, weight) for n in pieces},
            getattr(p, "region", None)))
    consumers: dict[str, set[str]] = {c.id: set() for c in calls}
    for c in calls:
        for src in c.inputs:
            if src in consumers:
                consumers[src].add(c.piece)
    transfers = []
    for c in calls:
        for dst in (n for n in pieces if n in consumers[c.id] and n != c.piece):
            e = cost_model.transfer_cost(c.out_bytes, by_name[c.piece], by_name[dst])
            if e.seconds == 0 and e.joules == 0:
                continue  # the pieces share memory: no copy
            transfers.append({"value": c.id, "from": c.piece, "to": dst, "bytes": c.out_bytes,
                              "seconds": e.seconds, "joules": e.joules})
    call_s = sum(c.costs[c.piece]["seconds"] for c in calls)
    call_j = sum(c.costs[c.piece]["joules"] for c in calls)
    tr_s = sum(t["seconds"] for t in transfers)
    tr_j = sum(t["joules"] for t in transfers)
    totals = {"value": objective_value(call_s + tr_s, call_j + tr_j, objective, weight),
              "seconds": call_s + tr_s, "joules": call_j + tr_j, "call_seconds": call_s, "call_joules": call_j,
              "transfer_seconds": tr_s, "transfer_joules": tr_j}
    kinds = getattr(a, "weights_in", {})
    memory = {n: {"used": int(used), "capacity": cap, "memory": kinds.get(n, "RAM")}
              for n, (used, cap) in a.memory.items()}
    single = {}
    for n in pieces:
        bad = [c for c in calls if "cannot" in c.costs[n]]
        if bad:
            ops = ", ".join(dict.fromkeys(c.op for c in bad))
            single[n] = {"cannot": [c.id for c in bad],
                         "message": f"cannot run {len(bad)} call{'s' if len(bad) != 1 else ''}: {ops}"}
            continue
        s = sum(c.costs[n]["seconds"] for c in calls)
        j = sum(c.costs[n]["joules"] for c in calls)
        wb = sum(c.weight_bytes for c in calls)
        cap = memory.get(n, {}).get("capacity")
        single[n] = {"seconds": s, "joules": j, "value": objective_value(s, j, objective, weight), "weight_bytes": wb,
                     "capacity": cap, "fits": cap is None or wb <= cap}
    regions = [{"name": str(r.name), "piece": str(r.piece), "calls": [ids[c] for c in r.calls if c in ids]}
               for r in getattr(a, "regions", ())]
    params = {v.name_hint: str(v.checked_type if v.has_type else v.type_annotation) for v in func.params}
    outputs = _sources(func.body, ids)
    edge = edge_copies(func, calls, outputs, ct, by_name, cost_model)
    return Report(str(ct), pieces, objective, weight, [str(r) for r in rules], a.method, a.exact, calls, params,
                  outputs, transfers, memory, totals, single, regions, edge, facts_table(ct), a)


__all__ = ["CallReport", "ExplainError", "NO_DOT", "OBJECTIVES", "Report", "check_objective", "check_weight",
           "fmt_joules", "fmt_seconds", "quiet_solver_banner", "report_of", "rules_of",
           "summarize"]
