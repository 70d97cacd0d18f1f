"""Target: a kind plus option values. Immutable, hashable, printed in a canonical form that parses back.

    Target("c -mcpu=cortex-m0 -keys=arm_cpu")       # the string form
    Target("cortex-m7f")                            # a tag (a named preset with hardware facts)
    Target("cortex-m7f -opt-level=3")               # a tag with options overridden
    Target({"kind": "c", "mcpu": "cortex-m0"})      # a dict (or its JSON text)

``with target:`` makes it the current target (a context variable, so threads and tasks each see
their own); ``Target.current()`` returns it.
"""

from __future__ import annotations

import json
import shlex
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from plait.errors import RegistryError
from plait.registry import Registry
from plait.target.errors import TargetError
from plait.target.kind import KINDS, TargetKind, get_kind
from plait.target.tag import TAGS, Facts, Tag, get_tag, match_tag

# the stack of (target, piece name or None) entered with ``with``; a context variable, not a global
_CURRENT: ContextVar[tuple[tuple["Target", str | None], ...]] = ContextVar("plait_current_target", default=())


@dataclass
class Resolution:
    """How a target was understood: kind, tag, what was given, and the resolved options."""

    kind: TargetKind
    tag: Tag | None
    given: dict[str, Any]
    options: tuple[tuple[str, Any], ...] = ()
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        base = dict(self.tag.options) if self.tag else {}
        self.options, self.notes = self.kind.resolve(base, self.given)


def lookup(word: str) -> tuple[TargetKind, Tag | None]:
    """The kind or tag a target string starts with."""
    from plait.target import plugins

    if word not in KINDS and word not in TAGS:
        plugins.load_plugins()
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
    return Resolution(kind, tag, given)


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
    return Resolution(kind, tag, given)


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

    __slots__ = ("_kind", "_options", "_tag", "_notes", "_hash")

    def __init__(self, spec: "str | Mapping[str, Any] | Target"):
        if isinstance(spec, Target):
            r_kind, r_options, r_tag, r_notes = spec._kind, spec._options, spec._tag, spec._notes
        else:
            r = resolve(spec)
            r_kind, r_options, r_tag, r_notes = r.kind, r.options, r.tag, tuple(r.notes)
        object.__setattr__(self, "_kind", r_kind)
        object.__setattr__(self, "_options", r_options)
        object.__setattr__(self, "_tag", r_tag)
        object.__setattr__(self, "_notes", r_notes)
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
        return self._tag or match_tag(self.kind_name, dict(self._options))

    @property
    def facts(self) -> Facts | None:
        tag = self.matched_tag
        return tag.facts if tag else None

    @property
    def device(self) -> str:
        """The device this target's code runs on (the kind's ``device`` attribute, else ``host``).
        Pieces of a composite target on the same device share memory."""
        fn = self._kind.attrs.get("device")
        return "host" if fn is None else str(fn(self))

    def attr(self, name: str) -> Any:
        """A kind attribute, e.g. ``target.attr("compiler_flags")(target)``."""
        return self._kind.attr(name)

    def untagged(self) -> "Target":
        """The same options without the tag: its ``str()`` spells every option out."""
        t = object.__new__(Target)
        for slot, value in (("_kind", self._kind), ("_options", self._options), ("_tag", None),
                            ("_notes", self._notes), ("_hash", hash((self.kind_name, self._options, None)))):
            object.__setattr__(t, slot, value)
        return t

    def with_options(self, options: Mapping[str, Any]) -> "Target":
        """A new Target with some options replaced (values in Python form)."""
        d = self.to_dict()
        d.update(options)
        return Target(d)

    # ---- printing -------------------------------------------------------------------------------

    def _changed(self) -> list[tuple[str, Any]]:
        """The options to print after the tag or kind name: the fewest that parse back to this target.

        Usually those that differ from the tag's (or the kind's defaults); when the kind's normalizer
        ties options together (``-mcpu=cortex-m7f`` sets ``-mfpu``), every option the tag sets too.
        """
        opts = dict(self._options)
        tag_raw = dict(self._tag.options) if self._tag else {}
        defaults = dict(self._kind.resolve({}, {})[0])
        base = dict(self._tag.resolved) if self._tag else defaults
        for names in ([n for n in opts if opts[n] != base[n]],
                      [n for n in opts if opts[n] != defaults[n] or n in tag_raw],
                      list(opts)):
            printed = {n: self._short(n, opts[n]) for n in names}
            try:
                if self._kind.resolve(tag_raw, printed)[0] == self._options:
                    return list(printed.items())
            except TargetError:
                pass
        raise TargetError(f"target kind '{self.kind_name}': its normalizer does not give the same options "
                          f"when applied twice, so {opts} cannot be printed")

    def _short(self, name: str, value: Any) -> Any:
        if name != "keys":
            return value
        return next(value[:i] for i in range(len(value) + 1) if self._kind.resolve_keys(value[:i]) == value)

    def __str__(self) -> str:
        parts = [self.tag or self.kind_name]
        for name, value in self._changed():
            text = self._kind.option(name).format(value)
            parts.append(f"-{name}={shlex.quote(text)}")
        return " ".join(parts)

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

    # ---- the current target ---------------------------------------------------------------------

    def __enter__(self) -> "Target":
        _push(self, None)
        return self

    def __exit__(self, *exc: Any) -> None:
        _pop()

    @staticmethod
    def current(allow_none: bool = True) -> "Target | None":
        """The innermost target entered with ``with`` in this context (thread, task), or None."""
        stack = _CURRENT.get()
        if stack:
            return stack[-1][0]
        if not allow_none:
            raise TargetError("no current target: enter one with 'with target:'")
        return None


def _push(target: Target, piece: str | None) -> None:
    _CURRENT.set(_CURRENT.get() + ((target, piece),))


def _pop() -> None:
    _CURRENT.set(_CURRENT.get()[:-1])


def current_entry() -> tuple[Target, str | None] | None:
    stack = _CURRENT.get()
    return stack[-1] if stack else None
