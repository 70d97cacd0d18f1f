"""Target kinds: a registered backend with typed options, default keys, attributes and hooks.

    register_kind("c", device_type="cpu", options=[Option("mcpu", str, "", "target CPU")],
                  default_keys=("cpu",), doc="C source")

Every kind gets a ``keys`` option (a list; the kind's default keys are appended to what is given) and
the fact options (``-ram-kb``, ``-flash-kb``, ``-clock-mhz``, ``-simd-bits``: :data:`FACT_OPTIONS`).
A kind may ``normalize`` resolved options (e.g. ``c`` reads ``-mcpu=cortex-m7f`` as the core plus its
FPU); it returns the new options and notes saying what it changed, shown by ``plait targets --explain``.
A kind may ``validate`` them when a target is parsed (e.g. ``c`` checks ``-mcpu`` against the CPUs its
compiler knows). ``identity`` names the options that say which processor a target is for: a tag of the
kind matches a target written out in full when these options are equal (see :mod:`plait.target.tag`).
Hooks are attached with :func:`plait.target.hooks.register_hook`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from plait.errors import RegistryError
from plait.registry import Registry
from plait.target.errors import TargetError
from plait.target.options import FACT_OPTIONS, Option

Normalizer = Callable[[dict[str, Any]], "tuple[dict[str, Any], list[str]]"]
Validator = Callable[[dict[str, Any]], None]  # raises TargetError (the message without the target's text)
#: options every kind has and no tag match looks at
COMMON_OPTIONS = ("keys", *(o.name for o in FACT_OPTIONS))
_NAME = re.compile(r"[a-z][a-z0-9_.\-]*\Z")


@dataclass(eq=False)
class TargetKind:
    """A backend. Compared by identity: there is one object per registered name."""

    name: str
    device_type: str = "cpu"
    options: tuple[Option, ...] = ()
    default_keys: tuple[str, ...] = ()
    can_host: bool = True  # can this kind run the executor (be the host of a composite target)?
    doc: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    normalize: Normalizer | None = None
    validate: Validator | None = None  # checks resolved options when a target is parsed
    identity: tuple[str, ...] = ()  # options naming the processor; tags match on them (see tag.py)
    origin: str = "plait"  # "plait" for in-tree kinds, "entry point 'NAME' (VALUE)" for plugins
    hooks: dict[str, Any] = field(default_factory=dict)  # hook name -> Hook, see hooks.py

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise TargetError(f"target kind name '{self.name}' must start with a lowercase letter and use "
                              "lowercase letters, digits, '_', '.' or '-'")
        opts = list(self.options)
        self.default_keys = tuple(self.default_keys)
        if not any(o.name == "keys" for o in opts):
            opts.append(Option("keys", list, self.default_keys,
                               "dispatch keys, most specific first; the kind's default keys are appended"))
        for o in FACT_OPTIONS:
            if any(getattr(x, "name", None) == o.name for x in opts):
                raise TargetError(f"target kind '{self.name}': option '{o.name}' is one every kind has "
                                  "(plait.target.options.FACT_OPTIONS); do not declare it")
            opts.append(o)
        seen: set[str] = set()
        for o in opts:
            if not isinstance(o, Option):
                raise TargetError(f"target kind '{self.name}': options must be Option objects, got {o!r}")
            if o.name in seen:
                raise TargetError(f"target kind '{self.name}': option '{o.name}' is declared twice")
            seen.add(o.name)
        self.options = tuple(opts)
        self._by_name = {o.name: o for o in self.options}
        self.identity = tuple(self.identity)
        for name in self.identity:
            if name not in self._by_name or name in COMMON_OPTIONS:
                raise TargetError(f"target kind '{self.name}': identity option '{name}' is not one of its own options")

    # ---- options --------------------------------------------------------------------------------

    def option(self, name: str) -> Option:
        """The option called ``name``; unknown names raise, listing the valid ones."""
        try:
            return self._by_name[name]
        except KeyError:
            pass
        msg = f"target kind '{self.name}' has no option '-{name}'"
        close = difflib.get_close_matches(name, list(self._by_name), n=1, cutoff=0.6)
        if close:
            msg += f" (did you mean '-{close[0]}'?)"
        msg += "; valid options: " + ", ".join("-" + n for n in sorted(self._by_name))
        raise TargetError(msg)

    def resolve(self, base: Mapping[str, Any], given: Mapping[str, Any]) -> tuple[tuple[tuple[str, Any], ...], list[str]]:
        """Options (in declaration order) from defaults, then ``base`` (a tag's), then ``given``.

        Values must already be checked (:meth:`Option.check`). Returns the options and the notes of
        the kind's normalizer.
        """
        merged = {o.name: o.default for o in self.options}
        merged.update(base)
        merged.update(given)
        merged["keys"] = self.resolve_keys(merged["keys"]) if ("keys" in base or "keys" in given) else self.default_keys
        notes: list[str] = []
        if self.normalize is not None:
            merged, notes = self.normalize(dict(merged))
            for name, value in merged.items():  # a normalizer must not produce ill-typed values
                self.option(name).check(value, f"target kind '{self.name}' (normalized)")
        return tuple((o.name, merged[o.name]) for o in self.options), list(notes)

    def resolve_keys(self, keys: Iterable[str]) -> tuple[str, ...]:
        keys = tuple(keys)
        return keys + tuple(k for k in self.default_keys if k not in keys)

    # ---- attributes and hooks -------------------------------------------------------------------

    def attr(self, name: str) -> Any:
        """A kind attribute (e.g. ``compiler_flags`` of ``c``); unknown names raise."""
        try:
            return self.attrs[name]
        except KeyError:
            have = ", ".join(sorted(self.attrs)) or "none"
            raise TargetError(f"target kind '{self.name}' has no attribute '{name}' (it has: {have})") from None

    def hook(self, name: str):
        """The function registered for hook ``name``, or None."""
        h = self.hooks.get(name)
        return None if h is None else h.fn

    def __repr__(self) -> str:
        return f"TargetKind({self.name!r})"


KINDS: Registry[TargetKind] = Registry("target kind")


def register_kind(kind: TargetKind | str, **fields: Any) -> TargetKind:
    """Register a kind, given as a :class:`TargetKind` or as its name plus fields. Duplicates raise."""
    from plait.target import plugins
    from plait.target.tag import TAGS

    if isinstance(kind, str):
        kind = TargetKind(kind, **fields)
    elif fields:
        raise TargetError("register_kind: give a TargetKind or a name with fields, not both")
    if kind.name in TAGS:
        raise RegistryError(f"target kind '{kind.name}' clashes with the target tag of the same name")
    origin = plugins.loading_origin()
    if origin is not None and kind.origin == "plait":
        kind.origin = origin
    return KINDS.register(kind.name, kind)


def get_kind(name: str) -> TargetKind:
    """The kind called ``name``. An unknown name loads the ``plait.backends`` plugins, then raises."""
    from plait.target import plugins

    if name not in KINDS:
        plugins.load_plugins()
    return KINDS.get(name)


def list_kinds() -> list[TargetKind]:
    """Every registered kind (plugins included), sorted by name."""
    from plait.target import plugins

    plugins.load_plugins()
    return [k for _, k in KINDS.items()]
