"""Target: a kind plus option values. Immutable, hashable, printed in a canonical form that parses back.

    Target("c -mcpu=cortex-m0 -keys=arm_cpu")       # the string form
    Target("cortex-m7f")                            # a tag (a named preset with hardware facts)
    Target("cortex-m7f -opt-level=3")               # a tag with options overridden
    Target({"kind": "c", "mcpu": "cortex-m0"})      # a dict (or its JSON text)

There is no "current target": every function that needs one takes it as an argument.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from plait.errors import RegistryError
from plait.registry import Registry
from plait.target.errors import TargetError
from plait.target.kind import COMMON_OPTIONS, KINDS, TargetKind
from plait.target.plugins import get_kind, get_tag, load_kind, load_plugins
from plait.target.tag import TAGS, Facts, Tag, match_tag, resolve_facts, tag_matches



@dataclass
class Resolution:
    """How a target was understood: kind, tag (named), the tag it matched (written out in full: see
    :mod:`plait.target.tag`), what was given, and the resolved options."""

    kind: TargetKind
    tag: Tag | None
    given: dict[str, Any]
    options: tuple[tuple[str, Any], ...] = ()
    notes: list[str] = field(default_factory=list)
    matched: Tag | None = None

    def __post_init__(self) -> None:
        if self.tag is not None:
            self.options, self.notes = self.kind.resolve(dict(self.tag.options), self.given)
            self.matched = self.tag
            return
        self.options, self.notes = self.kind.resolve({}, self.given)
        tag = match_tag(self.kind.name, dict(self.options))
        if tag is not None:  # the tag's options beneath the given ones: its keys, its implied options
            options, notes = self.kind.resolve(dict(tag.resolved), self.given)
            if tag_matches(tag, dict(options)):
                self.options, self.notes, self.matched = options, notes, tag

    def validate(self, where: str) -> "Resolution":
        """Run the kind's validator (e.g. ``-mcpu`` against the compiler's CPUs); ``where`` names the target."""
        try:
            self.kind.validate(dict(self.options))
        except TargetError as exc:
            raise TargetError(f"{where}: {exc}") from None
        return self


def lookup(word: str) -> tuple[TargetKind, Tag | None]:
    """The kind or tag a target string starts with."""
    if word not in KINDS and word not in TAGS and not load_kind(word):
        load_plugins()
    if word in KINDS:
        return KINDS.get(word), None
    if word in TAGS:
        tag = TAGS.get(word)
        return get_kind(tag.kind), tag
    names: Registry[None] = Registry("target kind or tag")
    for n in list(KINDS) + list(TAGS):
        names.register(n, None)
    raise RegistryError(names.unknown_message(word))


def resolve_text(text: str) -> Resolution:
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise TargetError(f"target '{text}': {exc}") from None
    if not tokens:
        raise TargetError("empty target string")
    head = tokens[0]
    if head.startswith("-"):
        raise TargetError(f"target '{text}' starts with the option '{head}'; a target starts with a kind "
                          "or a tag, e.g. 'c -mcpu=cortex-m0'")
    kind, tag = lookup(head)
    where = f"target kind '{kind.name}'"
    given: dict[str, Any] = {}
    for tok in tokens[1:]:
        if not tok.startswith("-") or tok == "-":
            raise TargetError(f"target '{text}': expected an option like -name=value after '{head}', got '{tok}'")
        name, eq, value = tok[1:].partition("=")
        opt = kind.option(name)
        if name in given:
            raise TargetError(f"target '{text}': option '-{name}' is given twice")
        given[name] = opt.parse(value if eq else None, where)
    return Resolution(kind, tag, given).validate(f"target '{text}'")


def resolve_dict(d: Mapping[str, Any]) -> Resolution:
    rest = dict(d)
    kind_name, tag_name = rest.pop("kind", None), rest.pop("tag", None)
    tag = None
    if tag_name is not None:
        tag = get_tag(tag_name)
        if kind_name is not None and kind_name != tag.kind:
            raise TargetError(f"target {dict(d)!r}: tag '{tag_name}' is of kind '{tag.kind}', not '{kind_name}'")
        kind = get_kind(tag.kind)
    elif kind_name is not None:
        kind = get_kind(kind_name)
    else:
        raise TargetError(f"target {dict(d)!r} needs a 'kind' or a 'tag' key")
    where = f"target kind '{kind.name}'"
    given = {name: kind.option(name).check(value, where) for name, value in rest.items()}
    return Resolution(kind, tag, given).validate(f"target {dict(d)!r}")


def resolve(spec: Any) -> Resolution:
    if isinstance(spec, str):
        if spec.lstrip().startswith("{"):
            return resolve_dict(_load_json(spec, "target"))
        return resolve_text(spec)
    if isinstance(spec, Mapping):
        return resolve_dict(spec)
    raise TargetError(f"cannot make a Target from {type(spec).__name__}: expected a target string, a dict "
                      "or a Target")


def _load_json(text: str, what: str) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in items:
            if k in out:
                raise TargetError(f"{what} JSON: duplicate key '{k}'")
            out[k] = v
        return out

    try:
        return json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise TargetError(f"{what} JSON: {exc}") from None


class Target:
    """A kind plus option values. Immutable and hashable; ``str()`` is canonical and parses back."""

    __slots__ = ("_kind", "_options", "_tag", "_notes", "_hash", "_matched", "_facts", "_str")

    def __init__(self, spec: "str | Mapping[str, Any] | Target"):
        if isinstance(spec, Target):
            r_kind, r_options, r_tag, r_notes, r_matched = (spec._kind, spec._options, spec._tag, spec._notes,
                                                            spec._matched)
        else:
            r = resolve(spec)
            r_kind, r_options, r_tag, r_notes, r_matched = r.kind, r.options, r.tag, tuple(r.notes), r.matched
        object.__setattr__(self, "_kind", r_kind)
        object.__setattr__(self, "_options", r_options)
        object.__setattr__(self, "_tag", r_tag)
        object.__setattr__(self, "_notes", r_notes)
        object.__setattr__(self, "_matched", r_matched)
        object.__setattr__(self, "_facts", None)
        object.__setattr__(self, "_str", None)
        object.__setattr__(self, "_hash", hash((r_kind.name, r_options, r_tag.name if r_tag else None)))

    @classmethod
    def from_json(cls, text: str) -> "Target":
        return cls(_load_json(text, "target"))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Target is immutable")

    # ---- what it is -----------------------------------------------------------------------------

    @property
    def kind(self) -> TargetKind:
        return self._kind

    @property
    def kind_name(self) -> str:
        return self._kind.name

    @property
    def options(self) -> Mapping[str, Any]:
        """Every option of the kind, resolved (defaults, tag, given; normalized). Lists are tuples."""
        return MappingProxyType(dict(self._options))

    @property
    def keys(self) -> tuple[str, ...]:
        return dict(self._options)["keys"]

    @property
    def tag(self) -> str | None:
        return self._tag.name if self._tag else None

    @property
    def notes(self) -> tuple[str, ...]:
        """What the kind's normalizer changed (e.g. '-mcpu=cortex-m7f read as ...')."""
        return self._notes

    @property
    def matched_tag(self) -> Tag | None:
        """The tag giving this target's facts: its own, or the one its options match."""
        return self._tag or self._matched

    @property
    def facts(self) -> Facts | None:
        """The hardware facts: the fact options given (``-ram-kb=``, ...), else the matched tag's
        (measured on this machine for a host tag), each with its origin; None when neither exists."""
        if self._facts is None:
            object.__setattr__(self, "_facts", (resolve_facts(self.matched_tag, dict(self._options)),))
        return self._facts[0]

    @property
    def device(self) -> str:
        """The device this target's code runs on (its backend's ``device(target)``: ``host`` by default).
        Pieces of a composite target on the same device share memory."""
        return str(self._kind.backend.device(self))

    @property
    def backend(self) -> Any:
        """The kind's :class:`plait.target.backend.Backend` (e.g. ``target.backend.compiler(target)``)."""
        return self._kind.backend

    def untagged(self) -> "Target":
        """The same options written out with the kind's name instead of the tag's (it still matches the
        tag, so it keeps the facts); :meth:`spelled_out` prints every option."""
        t = object.__new__(Target)
        for slot, value in (("_kind", self._kind), ("_options", self._options), ("_tag", None),
                            ("_notes", self._notes), ("_matched", match_tag(self.kind_name, dict(self._options))),
                            ("_facts", None), ("_str", None), ("_hash", hash((self.kind_name, self._options, None)))):
            object.__setattr__(t, slot, value)
        return t

    def spelled_out(self) -> str:
        """The kind's name and every option that differs from the kind's defaults (tag or no tag)."""
        defaults = dict(self._kind.resolve({}, {})[0])
        parts = [self.kind_name]
        for name, value in self._options:
            if value != defaults[name]:
                parts.append(f"-{name}={shlex.quote(self._kind.option(name).format(self._short(name, value)))}")
        return " ".join(parts)

    def with_options(self, options: Mapping[str, Any]) -> "Target":
        """A new Target with some options replaced (values in Python form)."""
        d = self.to_dict()
        d.update(options)
        return Target(d)

    # ---- printing -------------------------------------------------------------------------------

    def _changed(self) -> list[tuple[str, Any]]:
        """The options to print after the tag or kind name: the fewest that parse back to this target.

        With a tag: those that differ from the tag's; when the kind's normalizer ties options together
        (``-mcpu=cortex-m7f`` sets ``-mfpu``), every option the tag sets too. Written out in full: those
        that differ from the kind's defaults, leaving out keys and fact options that the matched tag
        gives anyway (``c -mcpu=cortex-m0``, not ``... -keys=arm_cpu``).
        """
        opts = dict(self._options)
        defaults = dict(self._kind.resolve({}, {})[0])
        if self._tag is not None:
            tag_raw = dict(self._tag.options)
            base = dict(self._tag.resolved)
            candidates = [[n for n in opts if opts[n] != base[n]],
                          [n for n in opts if opts[n] != defaults[n] or n in tag_raw], list(opts)]
        else:
            tag_opts = dict(self._matched.resolved) if self._matched is not None else {}
            inherited = {n for n in COMMON_OPTIONS if n in tag_opts and opts[n] == tag_opts[n]}
            candidates = [[n for n in opts if opts[n] != defaults[n] and n not in inherited],
                          [n for n in opts if opts[n] != defaults[n]], list(opts)]
        for names in candidates:
            printed = {n: self._short(n, opts[n]) for n in names}
            if self._parses_back(printed):
                return list(printed.items())
        raise TargetError(f"target kind '{self.kind_name}': its normalizer does not give the same options "
                          f"when applied twice, so {opts} cannot be printed")

    def _parses_back(self, printed: dict[str, Any]) -> bool:
        """Do these options, written after the tag or kind name, give this target again?"""
        try:
            r = Resolution(self._kind, self._tag, printed)
        except TargetError:
            return False
        return r.options == self._options and r.matched is self.matched_tag

    def _short(self, name: str, value: Any) -> Any:
        if name != "keys":
            return value
        return next(value[:i] for i in range(len(value) + 1) if self._kind.resolve_keys(value[:i]) == value)

    def __str__(self) -> str:
        s = self._str  # immutable: printed (and checked to parse back) once
        if s is None:
            parts = [self.tag or self.kind_name]
            for name, value in self._changed():
                text = self._kind.option(name).format(value)
                parts.append(f"-{name}={shlex.quote(text)}")
            s = " ".join(parts)
            object.__setattr__(self, "_str", s)
        return s

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind_name}
        if self._tag:
            d["tag"] = self._tag.name
        for name, value in self._changed():
            d[name] = list(value) if isinstance(value, tuple) else value
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return NotImplemented
        return (self._kind is other._kind and self._options == other._options
                and self._tag is other._tag)

    def __hash__(self) -> int:
        return self._hash
