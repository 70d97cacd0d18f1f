"""Target kinds: the registered form of a :class:`plait.target.backend.Backend` subclass.

    register_backend(MyAccel)        # -> TargetKind("myaccel"); normally done by the plugin loader

Every kind gets a ``keys`` option (a list; the kind's default keys are appended to what is given) and
the fact options (``-ram-kb``, ``-flash-kb``, ``-clock-mhz``, ``-simd-bits``: :data:`FACT_OPTIONS`).
A kind may ``normalize`` resolved options (e.g. ``c`` reads ``-mcpu=cortex-m7f`` as the core plus its
FPU); it returns the new options and notes saying what it changed, shown by ``plait targets --explain``.
A kind may ``validate`` them when a target is parsed (e.g. ``c`` checks ``-mcpu`` against the CPUs its
compiler knows). ``identity`` names the options that say which processor a target is for: a tag of the
kind matches a target written out in full when these options are equal (see :mod:`plait.target.tag`).
Its hooks are the methods the Backend subclass overrides (:attr:`TargetKind.hooks`).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from plait.errors import RegistryError
from plait.registry import Registry
from plait.target.errors import TargetError
from plait.target.options import FACT_OPTIONS, Option

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
    identity: tuple[str, ...] = ()  # options naming the processor; tags match on them (see tag.py)
    origin: str = "plait"  # "plait" for in-tree kinds, "entry point 'NAME' (VALUE)" for plugins
    backend: Any = None  # the Backend instance

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
        self._hooks: dict[str, Any] | None = None
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
        merged, notes = self.normalize(dict(merged))
        for name, value in merged.items():  # a normalizer must not produce ill-typed values
            self.option(name).check(value, f"target kind '{self.name}' (normalized)")
        return tuple((o.name, merged[o.name]) for o in self.options), list(notes)

    def resolve_keys(self, keys: Iterable[str]) -> tuple[str, ...]:
        keys = tuple(keys)
        return keys + tuple(k for k in self.default_keys if k not in keys)

    # ---- the backend's methods ------------------------------------------------------------------

    def normalize(self, opts: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        return self.backend.normalize(opts)

    def validate(self, opts: dict[str, Any]) -> None:
        self.backend.validate(opts)

    @property
    def hooks(self) -> dict[str, Any]:
        """Hook name -> :class:`plait.target.hooks.Hook`, for the hook methods the backend overrides."""
        if self._hooks is None:
            from plait.target.hooks import hooks_of_backend

            self._hooks = hooks_of_backend(self.name, self.backend)
        return self._hooks

    def __repr__(self) -> str:
        return f"TargetKind({self.name!r})"


KINDS: Registry[TargetKind] = Registry("target kind")


def register_backend(cls: Any) -> TargetKind:
    """Register a :class:`plait.target.backend.Backend` subclass as a kind, with its tags.
    Duplicates (a kind, or a tag of the same name) raise; hook signatures are checked."""
    from plait.target import plugins
    from plait.target.backend import Backend, options_of
    from plait.target.tag import TAGS, register_tag

    if not (isinstance(cls, type) and issubclass(cls, Backend)) or cls is Backend:
        raise TargetError(f"register_backend: expected a subclass of plait.target.Backend, got {cls!r}")
    name = cls.name
    if not isinstance(name, str) or not name:
        raise TargetError(f"backend class {cls.__name__} has no 'name'")
    backend = cls()
    kind = TargetKind(name, device_type=cls.device_type,
                      options=options_of(cls.Options) if cls.Options is not None else (),
                      default_keys=cls.default_keys, can_host=cls.can_host, doc=cls.summary(),
                      identity=cls.identity, backend=backend)
    kind.hooks  # checks the hook methods' signatures before anything is registered
    if kind.name in TAGS:
        raise RegistryError(f"target kind '{kind.name}' clashes with the target tag of the same name")
    origin = plugins.loading_origin()
    if origin is not None:
        kind.origin = origin
    KINDS.register(kind.name, kind)
    for tag in cls.tags:
        register_tag(tag.name, kind.name, tag.options, tag.facts, tag.doc, tag.match)
    return kind


def get_kind(name: str) -> TargetKind:
    """The kind called ``name``, loaded from the backend manifest when first asked for (only it);
    an unknown name loads every ``plait.backends`` plugin, then raises."""
    from plait.target import plugins

    if name not in KINDS and not plugins.load_kind(name):
        plugins.load_plugins()
    return KINDS.get(name)


def list_kinds() -> list[TargetKind]:
    """Every registered kind (plugins included), sorted by name."""
    from plait.target import plugins

    plugins.load_plugins()
    return [k for _, k in KINDS.items()]
