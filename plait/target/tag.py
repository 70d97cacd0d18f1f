"""Target tags: named presets (``cortex-m7f``) that also carry the hardware facts the cost model uses.

Every fact records its value, unit and source (a datasheet, a TRM, a board file, a measurement), and
a note when the number is an estimate or was not re-checked. A Target made from a tag reaches the
tag's facts through ``target.facts``; a Target written out in full (``c -mcpu=cortex-m0``) gets the
facts of the tag whose identifying options it matches.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from plait.errors import RegistryError
from plait.registry import Registry
from plait.target.errors import TargetError


@dataclass(frozen=True)
class Fact:
    value: Any  # None when the fact does not apply (e.g. flash on a host)
    unit: str
    source: str
    note: str = ""

    def __str__(self) -> str:
        value = "n/a" if self.value is None else f"{self.value}{' ' + self.unit if self.unit else ''}"
        return f"{value}  [{self.source}{'; ' + self.note if self.note else ''}]"


@dataclass(frozen=True)
class Facts:
    """The hardware facts of a tag. ``fpu`` is 'none', 'sp' (single precision) or 'dp' (double)."""

    clock_mhz: Fact
    fpu: Fact
    simd_bits: Fact  # widest SIMD register usable for data-parallel arithmetic; 0 = none
    ram_kb: Fact
    flash_kb: Fact
    power_mw: Fact  # typical active power at clock_mhz

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def items(self) -> list[tuple[str, Fact]]:
        return [(n, getattr(self, n)) for n in self.names()]


@dataclass(frozen=True, eq=False)
class Tag:
    name: str
    kind: str
    options: tuple[tuple[str, Any], ...]  # as given (checked), before the kind's normalization
    resolved: tuple[tuple[str, Any], ...]  # every option of the kind, normalized
    facts: Facts
    doc: str
    match: tuple[str, ...]  # options that identify the tag when a target is written out in full

    def __repr__(self) -> str:
        return f"Tag({self.name!r})"


TAGS: Registry[Tag] = Registry("target tag")


def register_tag(name: str, kind: str, options: Mapping[str, Any], facts: Facts | Mapping[str, Fact],
                 doc: str = "", match: tuple[str, ...] | None = None) -> Tag:
    """Register a tag. ``match`` (the options identifying it, for targets written out in full)
    defaults to the options that differ from the kind's defaults, ``keys`` aside."""
    from plait.target.kind import KINDS, get_kind

    if name in KINDS:
        raise RegistryError(f"target tag '{name}' clashes with the target kind of the same name")
    k = get_kind(kind)
    where = f"target tag '{name}'"
    checked = {o: k.option(o).check(v, where) for o, v in options.items()}
    resolved, _ = k.resolve(checked, {})
    facts = _make_facts(name, facts)
    if match is None:  # the options that differ from the kind's defaults, after normalization
        defaults = dict(k.resolve({}, {})[0])
        match = tuple(o for o, v in resolved if o != "keys" and v != defaults[o])
    for o in match:
        k.option(o)
    tag = Tag(name, k.name, tuple(checked.items()), resolved, facts, doc, match)
    return TAGS.register(name, tag)


def _make_facts(tag: str, facts: Facts | Mapping[str, Fact]) -> Facts:
    if not isinstance(facts, Facts):
        names = Facts.names()
        unknown = sorted(set(facts) - set(names))
        if unknown:
            raise TargetError(f"target tag '{tag}': unknown facts: {', '.join(unknown)}; "
                              f"valid facts: {', '.join(names)}")
        missing = [n for n in names if n not in facts]
        if missing:
            raise TargetError(f"target tag '{tag}': missing facts: {', '.join(missing)}")
        facts = Facts(**facts)
    for n, f in facts.items():
        if not isinstance(f, Fact):
            raise TargetError(f"target tag '{tag}': fact '{n}' must be a Fact(value, unit, source), got {f!r}")
        if not f.source.strip():
            raise TargetError(f"target tag '{tag}': fact '{n}' has no source")
    return facts


def get_tag(name: str) -> Tag:
    from plait.target import plugins

    if name not in TAGS:
        plugins.load_plugins()
    return TAGS.get(name)


def list_tags() -> list[Tag]:
    from plait.target import plugins

    plugins.load_plugins()
    return [t for _, t in TAGS.items()]


def match_tag(kind: str, options: Mapping[str, Any]) -> Tag | None:
    """The tag of ``kind`` whose identifying options all equal ``options``; the most specific wins,
    ties go to the first name in sorted order."""
    best: Tag | None = None
    for _, tag in TAGS.items():
        if tag.kind != kind or not tag.match:
            continue
        resolved = dict(tag.resolved)
        if all(options.get(o) == resolved[o] for o in tag.match):
            if best is None or len(tag.match) > len(best.match):
                best = tag
    return best
