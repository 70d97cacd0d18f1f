"""Summaries of fuzz results: a table per category and failures grouped by cause, each group with an
example case and the one-line command that reproduces it."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from .case import CATEGORIES, FAILURE_KINDS, CaseResult, Leg

REPRO = "python3 -m tests.fuzz.run --case {id}"


def kind_of(r: CaseResult) -> str:
    """The generator kind of a case, from its description ``[kind] ...``."""
    m = re.match(r"\[([^\]]+)\]", r.description)
    return m.group(1) if m else "?"


def table(results: list[CaseResult]) -> str:
    """cases, passed-equal, plait-error, failures, then failing cases by kind, per category."""
    kinds = [k for k in FAILURE_KINDS if any(r.outcome == k for r in results)]
    head = ["category", "cases", "equal", "plait-error", "failures", *kinds]
    rows = []
    for cat in (*CATEGORIES, "total"):
        rs = [r for r in results if cat == "total" or r.id.startswith(cat + ":")]
        if not rs:
            continue
        n = Counter(r.outcome for r in rs)
        fails = sum(1 for r in rs if r.failures)
        rows.append([cat, len(rs), n["equal"], n["error"], fails, *(n[k] for k in kinds)])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    lines = ["  ".join(str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(row, widths)))
             for row in (head, *rows)]
    return "\n".join(lines)


def cause(leg: Leg) -> str:
    """What a failing leg says, without its particulars: the exception and where, the signal, ..."""
    d = leg.detail
    if leg.outcome == "traceback":
        m = re.search(r"([A-Z]\w+): .* at (\S+?):\d+ \(([^)]+)\)", d)
        if m:
            return f"{m.group(1)} at {m.group(2)} ({m.group(3)})"
        m = re.search(r"(\w+(Error|Exception|Interrupt))", d)
        return m.group(1) if m else d[:60]
    if leg.outcome in ("signal", "crash"):
        return d.split(";")[0]
    if leg.outcome == "differs":
        if leg.name == "ort":
            return "the interpreter differs from ONNX Runtime"
        for what in ("second run", "dtype", "shape", "outputs", "no readable outputs", "values differ"):
            if what in d:
                return f"{what} ({'compiled' if leg.name not in ('cli-interp', 'sub-interp') else 'interpreter'})"
    if leg.outcome == "unchecked":
        m = re.search(r"refuses: (\w+): ([\w ]+?)[:']", d)
        return f"a result where the interpreter refuses ({m.group(1)}: {m.group(2)})" if m else d[:80]
    if leg.outcome == "accepted":
        return "a result for an invalid model: " + re.split(r"invalid(?: model)?: ", d)[-1][:60]
    if leg.outcome == "bad-stderr":
        return "the error spans several lines" if "spans" in d else "stderr is not one 'plait: error:' line"
    return leg.outcome


def groups(results: list[CaseResult]) -> dict[tuple[str, str, str], list[CaseResult]]:
    """Failing cases grouped by (outcome, category, cause) of their first failing leg."""
    out: dict[tuple[str, str, str], list[CaseResult]] = defaultdict(list)
    for r in results:
        if r.failures:
            leg = r.failures[0]
            out[(leg.outcome, r.id.split(":")[0], cause(leg))].append(r)
    return dict(sorted(out.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def failure_report(results: list[CaseResult], limit: int = 60) -> str:
    """Each failure group: count, outcome, category, cause, the kinds and legs involved, an example and
    the command that reproduces it."""
    lines = []
    all_groups = groups(results)
    for (outcome, category, why), items in list(all_groups.items())[:limit]:
        kinds = Counter(kind_of(r) for r in items)
        legs = sorted({leg.name for r in items for leg in r.failures})
        r = items[0]
        lines.append(f"{len(items):5d} x {outcome:11s} {category:9s} {why}")
        lines.append(f"        kinds: {', '.join(f'{k} {n}' for k, n in kinds.most_common())}; legs: {', '.join(legs)}")
        lines.append(f"        e.g. {r.id}: {r.description[:110]}")
        lines.append(f"        {r.failures[0].name}: {r.failures[0].detail[:300]}")
        lines.append(f"        repro: {REPRO.format(id=r.id)}")
    if len(all_groups) > limit:
        lines.append(f"... and {len(all_groups) - limit} more groups")
    return "\n".join(lines)
