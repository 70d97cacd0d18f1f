"""Target tags: named presets (``cortex-m7f``) that also carry the hardware facts the cost model uses.

Every fact records its value, unit and source (a datasheet, a TRM, a board file), and a note when the
number is an estimate or was not re-checked; a host tag's facts are *measured* on the running machine
when first needed (``Fact.measured``, see :mod:`plait.target.host`).

**Matching.** A tag is defined by its options. A Target written out in full (``c -mcpu=cortex-m55``)
matches the tag whose ``match`` options (the kind's ``identity`` options, e.g. ``-mcpu -march -mfpu``
for ``c``) all equal its own, and whose other options (``implied``, e.g. the M55's
``-mfloat-abi=hard``) it leaves unset or sets to the same value. Keys and the fact options
(``-ram-kb``, ...) are never compared. The target then takes the tag's options beneath its own (so its
keys and implied options too) and the tag's facts: ``c -mcpu=cortex-m55`` is read as ``cortex-m55``
is. When several tags match, the one with more ``match`` options, then more agreeing implied options,
wins; ties go to the first name in sorted order.

``target.facts`` (:func:`resolve_facts`): each fact from a fact option given in the target string,
else from the tag (measured when the tag says so), each labelled with where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from plait.registry import Registry
from plait.target.errors import TargetError
from plait.target.facts import OPTIONAL_FACTS, UNKNOWN, Fact, Facts
from plait.target.kind import COMMON_OPTIONS, KINDS, TargetKind


@dataclass(frozen=True, eq=False)
class Tag:
    name: str
    kind: str
    options: tuple[tuple[str, Any], ...]  # as given (checked), before the kind's normalization
    resolved: tuple[tuple[str, Any], ...]  # every option of the kind, normalized
    facts: Facts
    doc: str
    match: tuple[str, ...]  # options that identify the tag when a target is written out in full
    implied: tuple[str, ...] = ()  # the tag's other options: a matching target leaves them unset or agrees

    def __repr__(self) -> str:
        return f"Tag({self.name!r})"


TAGS: Registry[Tag] = Registry("target tag")


@dataclass(frozen=True)
class TagDef:
    """A tag as a backend declares it (``Backend.tags``); registered with its kind
    (:func:`plait.target.plugins.register_backend`)."""

    name: str
    options: Mapping[str, Any]
    facts: Any  # Facts or a mapping name -> Fact
    doc: str = ""
    match: tuple[str, ...] | None = None


def add_tag(name: str, k: TargetKind, options: Mapping[str, Any], facts: Facts | Mapping[str, Fact],
            doc: str = "", match: tuple[str, ...] | None = None) -> Tag:
    """Register a tag of the kind ``k`` (:func:`plait.target.plugins.register_tag` finds the kind by name
    and checks that no kind has the tag's name). ``match`` (the options identifying it, for targets
    written out in full) defaults to the kind's ``identity`` options, or, for a kind without them, to
    the options that differ from the kind's defaults (``keys`` and the fact options aside)."""
    where = f"target tag '{name}'"
    checked = {o: k.option(o).check(v, where) for o, v in options.items()}
    resolved, _ = k.resolve(checked, {})
    try:
        k.validate(dict(resolved))
    except TargetError as exc:
        raise TargetError(f"{where}: {exc}") from None
    facts = _make_facts(name, facts)
    defaults = dict(k.resolve({}, {})[0])
    differ = tuple(o for o, v in resolved if o not in COMMON_OPTIONS and v != defaults[o])
    if match is None:
        match = k.identity or differ
    for o in match:
        k.option(o)
    implied = tuple(o for o in differ if o not in match)
    tag = Tag(name, k.name, tuple(checked.items()), resolved, facts, doc, tuple(match), implied)
    return TAGS.register(name, tag)


def _make_facts(tag: str, facts: Facts | Mapping[str, Fact]) -> Facts:
    if not isinstance(facts, Facts):
        names = Facts.names()
        unknown = sorted(set(facts) - set(names))
        if unknown:
            raise TargetError(f"target tag '{tag}': unknown facts: {', '.join(unknown)}; "
                              f"valid facts: {', '.join(names)}")
        missing = [n for n in names if n not in facts and n not in OPTIONAL_FACTS]
        if missing:
            raise TargetError(f"target tag '{tag}': missing facts: {', '.join(missing)}")
        facts = Facts(**facts)
    for n, f in facts.items():
        if not isinstance(f, Fact):
            raise TargetError(f"target tag '{tag}': fact '{n}' must be a Fact(value, unit, source), got {f!r}")
        if not f.source.strip():
            raise TargetError(f"target tag '{tag}': fact '{n}' has no source")
        if f.measure:
            from plait.target.host import MEASURABLE

            if f.measure not in MEASURABLE:
                raise TargetError(f"target tag '{tag}': fact '{n}' is measured as '{f.measure}', which plait cannot "
                                  f"measure (it measures: {', '.join(MEASURABLE)})")
    return facts


def tag_matches(tag: Tag, options: Mapping[str, Any]) -> bool:
    """Does a target with these resolved ``options`` (of the tag's kind) match ``tag``? Its ``match``
    options must be equal; each ``implied`` option unset (the kind's default) or equal."""
    if not tag.match:
        return False
    resolved = dict(tag.resolved)
    if any(options.get(o) != resolved[o] for o in tag.match):
        return False
    defaults = {o.name: o.default for o in KINDS.get(tag.kind).options}
    return all(options.get(o) in (resolved[o], defaults[o]) for o in tag.implied)


def match_tag(kind: str, options: Mapping[str, Any]) -> Tag | None:
    """The tag of ``kind`` that a target with these resolved ``options`` matches (see the module
    docstring): the most ``match`` options, then the most agreeing implied options, then the first name."""
    best: tuple[int, int] | None = None
    found: Tag | None = None
    for _, tag in TAGS.items():  # sorted by name: ties keep the first
        if tag.kind != kind or not tag_matches(tag, options):
            continue
        resolved = dict(tag.resolved)
        rank = (len(tag.match), sum(options.get(o) == resolved[o] for o in tag.implied))
        if best is None or rank > best:
            best, found = rank, tag
    return found


def resolve_facts(tag: Tag | None, options: Mapping[str, Any]) -> Facts | None:
    """A target's facts: each from its fact option (``-ram-kb=``, ...) when given, else from ``tag``
    (measured on this machine when the tag says so), each with its ``origin``. None when there is no
    tag and no fact option; facts neither gives are unknown (value None)."""
    from plait.target.options import FACT_OPTION_NAMES

    given = {fact: (opt, options[opt]) for opt, fact in FACT_OPTION_NAMES.items() if options.get(opt) is not None}
    if tag is None and not given:
        return None
    out: dict[str, Fact] = {}
    for name in Facts.names():
        f = getattr(tag.facts, name) if tag is not None else None
        if name in given:
            opt, value = given[name]
            unit = f.unit if f is not None else _UNITS.get(name, "")
            out[name] = Fact(value, unit, "", origin=f"target option -{opt}")
        elif f is None:
            out[name] = Fact(None, _UNITS.get(name, ""), "no tag matches this target", origin=UNKNOWN)
        elif f.measure:
            from plait.target.host import measure

            out[name] = _replace(measure(f.measure), unit=f.unit)
        elif f.origin == UNKNOWN:
            out[name] = f
        else:
            out[name] = _replace(f, origin=f"tag {tag.name}")  # type: ignore[union-attr]
    return Facts(**out)


_UNITS = {"clock_mhz": "MHz", "simd_bits": "bits", "fma_bits": "bits", "ram_kb": "KiB", "flash_kb": "KiB", "power_mw": "mW"}


def _replace(f: Fact, **changes: Any) -> Fact:
    from dataclasses import replace

    return replace(f, **changes)
