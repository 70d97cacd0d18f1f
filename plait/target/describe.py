"""Text for ``plait targets``: the registered kinds, tags and hooks, and how a target string is read."""

from __future__ import annotations

from typing import Any

from plait.target.composite import CompositeTarget, Piece
from plait.target.hooks import HOOKS, hooks_of
from plait.target.kind import TargetKind, list_kinds
from plait.target.options import Option
from plait.target.tag import Facts, list_tags
from plait.target.target import Target, resolve


def _value(opt: Option, value: Any) -> str:
    text = opt.format(value)
    return text if text else ("none" if opt.type is list else "''")


def _hooks_line(kind: TargetKind) -> str:
    names = list(hooks_of(kind.name))
    return ", ".join(names) if names else "none (the default pipeline)"


def describe_kind(kind: TargetKind) -> list[str]:
    host = "can host" if kind.can_host else "cannot host"
    lines = [f"{kind.name}  [device {kind.device_type}, {host}]  {kind.doc}".rstrip()]
    if kind.origin != "plait":
        lines.append(f"  from: {kind.origin}")
    lines.append("  options:")
    width = max(len(f"-{o.name}=<{o.type_name}>") for o in kind.options)
    dwidth = max(len(_value(o, o.default)) for o in kind.options)
    for o in kind.options:
        choices = f" (one of {', '.join(_value(o, c) for c in o.choices)})" if o.choices else ""
        lines.append(f"    {f'-{o.name}=<{o.type_name}>':{width}}  default {_value(o, o.default):{dwidth}}  "
                     f"{o.doc}{choices}".rstrip())
    lines.append(f"  hooks: {_hooks_line(kind)}")
    if kind.attrs:
        lines.append(f"  attributes: {', '.join(sorted(kind.attrs))}")
    return lines


def describe_facts(facts: Facts, indent: str = "    ") -> list[str]:
    lines = []
    for name, f in facts.items():
        value = "n/a" if f.value is None else f"{f.value}{' ' + f.unit if f.unit else ''}"
        lines.append(f"{indent}{name:10s} {value:12s} {f.source}{'  (' + f.note + ')' if f.note else ''}")
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
        expanded = Target(t.name).untagged()
        lines.append(f"  {t.name:{width}}  = {expanded}")
        if t.doc:
            lines.append(f"  {'':{width}}    {t.doc}")
        lines.append(f"  {'':{width}}    {summarize_facts(t.facts)}")
    lines += ["", "hooks (per kind, see docs/targets.md):"]
    for name, spec in HOOKS.items():
        lines.append(f"  {name:16s} {spec.signature}: {spec.doc}")
    return "\n".join(lines) + "\n"


# ---- plait targets --explain ----------------------------------------------------------------------


def _provenance(piece: Piece) -> dict[str, str]:
    """For each option: where its value came from (given, the tag, the default; normalized?)."""
    r = resolve(piece.written if piece.written is not None else str(piece.target))
    tag_opts = dict(r.tag.options) if r.tag else {}
    out = {}
    for name, value in r.options:
        opt = r.kind.option(name)
        if name in r.given:
            raw, src = r.given[name], "given"
        elif name in tag_opts:
            raw, src = tag_opts[name], f"tag '{r.tag.name}'"
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
        lines.append(f"  spelled out: {t.untagged()}")
    lines.append(f"  kind: {t.kind_name} [device {t.kind.device_type}] {t.kind.doc}".rstrip())
    for note in t.notes:
        lines.append(f"  note: {note}")
    lines.append("  options:")
    prov = _provenance(piece)
    width = max(len(n) for n in t.options)
    for name, value in t.options.items():
        lines.append(f"    {name:{width}} = {_value(t.kind.option(name), value):20s} {prov[name]}")
    lines.append(f"  hooks: {_hooks_line(t.kind)}")
    tag = t.matched_tag
    if tag is None:
        lines.append("  facts: none (no tag matches these options; the cost model has no hardware facts)")
    else:
        how = "" if t.tag else f", whose options match: {', '.join(f'{o}={_value(t.kind.option(o), dict(tag.resolved)[o])}' for o in tag.match)}"
        lines.append(f"  facts: from tag '{tag.name}'{how}")
        lines += describe_facts(tag.facts)
    return lines


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
