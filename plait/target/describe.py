"""Text for ``plait targets``: the registered kinds, tags and hooks, and how a target string is read."""

from __future__ import annotations

from typing import Any

from plait.target.composite import CompositeTarget, Piece
from plait.target.hooks import HOOKS, hooks_of
from plait.target.facts import Facts
from plait.target.kind import TargetKind
from plait.target.options import FACT_OPTION_NAMES, FACT_OPTIONS, Option
from plait.target.plugins import list_kinds, list_tags
from plait.target.target import Target, resolve


def _value(opt: Option, value: Any) -> str:
    text = opt.format(value)
    return text if text else ("none" if opt.type is list else "''")


def _hooks_line(kind: TargetKind) -> str:
    names = list(hooks_of(kind.name))
    return ", ".join(names) if names else "none (the default pipeline)"


def _option_lines(options: list[Option], indent: str = "    ") -> list[str]:
    width = max(len(f"-{o.name}=<{o.type_name}>") for o in options)
    dwidth = max(len(_value(o, o.default)) for o in options)
    lines = []
    for o in options:
        choices = f" (one of {', '.join(_value(o, c) for c in o.choices)})" if o.choices else ""
        default = "unset" if o.nullable and o.default is None else _value(o, o.default)
        lines.append(f"{indent}{f'-{o.name}=<{o.type_name}>':{width}}  default {default:{dwidth}}  "
                     f"{o.doc}{choices}".rstrip())
    return lines


def describe_kind(kind: TargetKind) -> list[str]:
    """The kind's own options and keys (the fact options every kind has are listed once, apart)."""
    host = "can host" if kind.can_host else "cannot host"
    lines = [f"{kind.name}  [device {kind.device_type}, {host}]  {kind.doc}".rstrip()]
    if kind.origin != "plait":
        lines.append(f"  from: {kind.origin}")
    lines.append("  options:")
    lines += _option_lines([o for o in kind.options if o.name not in FACT_OPTION_NAMES])
    lines.append(f"  hooks: {_hooks_line(kind)}")
    return lines


def describe_facts(facts: Facts, indent: str = "    ") -> list[str]:
    """One line per fact: name, value, where it came from (and the note)."""
    lines = []
    for name, f in facts.items():
        lines.append(f"{indent}{name:10s} {f.text:12s} {f.where}{'  (' + f.note + ')' if f.note else ''}")
    return lines


def summarize_facts(f: Facts) -> str:
    def v(fact: Any, unit: str = "") -> str:
        return "n/a" if fact.value is None else f"{fact.value}{unit}"

    return (f"{v(f.clock_mhz, ' MHz')}, FPU {v(f.fpu)}, SIMD {v(f.simd_bits, ' bits')}, "
            f"RAM {v(f.ram_kb, ' KiB')}, flash {v(f.flash_kb, ' KiB')}, ~{v(f.power_mw, ' mW')}")


def describe_registry() -> str:
    kinds, tags = list_kinds(), list_tags()
    lines = [f"target kinds ({len(kinds)}):", ""]
    for k in kinds:
        lines += describe_kind(k) + [""]
    lines.append(f"target tags ({len(tags)}):")
    width = max((len(t.name) for t in tags), default=0)
    for t in tags:
        target = Target(t.name)
        lines.append(f"  {t.name:{width}}  = {target.spelled_out()}")
        if t.doc:
            lines.append(f"  {'':{width}}    {t.doc}")
        measured = " (measured on this machine)" if any(f.measure for _, f in t.facts.items()) else ""
        lines.append(f"  {'':{width}}    {summarize_facts(target.facts)}{measured}")  # type: ignore[arg-type]
    lines += ["", "options of every kind (they override the tag's or the measured facts):"]
    lines += _option_lines(list(FACT_OPTIONS), "  ")
    lines += ["", "hooks (per kind, see docs/targets.md):"]
    for name, spec in HOOKS.items():
        lines.append(f"  {name:16s} {spec.signature}: {spec.doc}")
    return "\n".join(lines) + "\n"


# ---- plait targets --explain ----------------------------------------------------------------------


def _provenance(piece: Piece) -> dict[str, str]:
    """For each option: where its value came from (given, the tag, the default; normalized?)."""
    r = resolve(piece.written if piece.written is not None else str(piece.target))
    tag_opts = dict(r.tag.options) if r.tag else {}
    lent: dict[str, Any] = {}  # options a matched tag gives that the target alone would not have
    if r.tag is None and r.matched is not None:
        alone = dict(r.kind.resolve({}, r.given)[0])
        lent = {n: v for n, v in r.options if v != alone[n]}
    out = {}
    for name, value in r.options:
        opt = r.kind.option(name)
        if name in lent:
            out[name] = f"tag '{r.matched.name}' (matched)"  # type: ignore[union-attr]
            continue
        if name in r.given:
            raw, src = r.given[name], "given"
        elif name in tag_opts:
            raw, src = tag_opts[name], f"tag '{r.tag.name}'"  # type: ignore[union-attr]
        else:
            raw, src = opt.default, "default"
        if name == "keys" and src != "default":
            raw = r.kind.resolve_keys(raw)
        if raw != value:
            src = "normalized" if src == "default" else f"{src} as {_value(opt, raw)}, normalized"
        out[name] = src
    return out


def explain_piece(piece: Piece, composite: CompositeTarget) -> list[str]:
    t = piece.target
    written = piece.written if isinstance(piece.written, str) else str(t)
    lines = [f"piece '{piece.name}'{' (host)' if composite._host is piece else ''}: {written}"]
    lines.append(f"  canonical: {t}")
    if t.tag:
        lines.append(f"  spelled out: {t.spelled_out()}")
    lines.append(f"  kind: {t.kind_name} [device {t.kind.device_type}] {t.kind.doc}".rstrip())
    for note in t.notes:
        lines.append(f"  note: {note}")
    lines.append("  options:")
    prov = _provenance(piece)
    shown = {n: v for n, v in t.options.items() if not (n in FACT_OPTION_NAMES and v is None)}
    width = max(len(n) for n in shown)  # unset fact options are left out: the facts say where each comes from
    for name, value in shown.items():
        lines.append(f"    {name:{width}} = {_value(t.kind.option(name), value):20s} {prov[name]}")
    lines.append(f"  hooks: {_hooks_line(t.kind)}")
    lines += _facts_lines(t)
    return lines


def _facts_lines(t: Target) -> list[str]:
    tag, facts = t.matched_tag, t.facts
    if facts is None:
        return ["  facts: none (no tag matches these options and no fact option is given; the cost model "
                "has no hardware facts and the memory is not checked)"]
    if tag is None:
        head = "  facts: from the target's options only (no tag matches)"
    elif t.tag:
        head = f"  facts: from tag '{tag.name}'"
    else:
        resolved = dict(tag.resolved)
        shown = [f"{o}={_value(t.kind.option(o), resolved[o])}" for o in tag.match]
        head = f"  facts: from tag '{tag.name}', whose options match: {', '.join(shown)}"
    return [head] + describe_facts(facts)


def explain(spec: str) -> str:
    c = CompositeTarget(spec)
    lines = [f"target: {spec.strip()}", f"canonical: {c}"]
    if c._host is None:
        lines.append(f"host: none ({c.host_reason}); compiling needs one")
    else:
        lines.append(f"host: {c._host.name} ({c.host_reason})")
    lines.append(f"pieces: {len(c)}")
    for p in c.pieces:
        lines += [""] + explain_piece(p, c)
    return "\n".join(lines) + "\n"
