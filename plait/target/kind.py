"""Target kinds: the registered form of a :class:`plait.target.backend.Backend` subclass.

    register_backend(MyAccel)        # -> TargetKind("myaccel"); normally done by the plugin loader
    KINDS.get("myaccel")             # the registered kind

This module holds the kind type and its registry; registering a Backend subclass, loading kinds and
finding them by name (``register_backend``, ``get_kind``, ``list_kinds``) are :mod:`plait.target.plugins`.

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

from plait.registry import Registry
from plait.target.backend import hooks_of_backend
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
        """Hook name -> :class:`plait.target.backend.Hook`, for the hook methods the backend overrides."""
        if self._hooks is None:
            self._hooks = hooks_of_backend(self.name, self.backend)
        return self._hooks

    def __repr__(self) -> str:
        return f"TargetKind({self.name!r})"


KINDS: Registry[TargetKind] = Registry("target kind")
