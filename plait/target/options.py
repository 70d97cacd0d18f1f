"""Typed target options: ``str``, ``int``, ``bool`` and ``list`` (of strings), with defaults and docs.

An option value arrives either as text (``-opt-level=3`` in a target string) or as a value (a dict or
JSON target). Both are checked here, and lists are stored as tuples so that targets stay hashable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plait.target.errors import TargetError

TYPE_NAMES = {str: "str", int: "int", bool: "bool", list: "list"}
_ARTICLE = {"str": "a str", "int": "an int", "bool": "a bool", "list": "a list of strings"}
_TRUE = ("true", "1")
_FALSE = ("false", "0")


@dataclass(frozen=True)
class Option:
    """One option of a target kind. ``default=None`` means the type's empty value ('', 0, False, ()),
    except for a ``nullable`` option, whose default is None: not given (``-name=`` with no value too).
    ``minimum``: the smallest int allowed."""

    name: str
    type: type = str
    default: Any = None
    doc: str = ""
    choices: tuple = ()
    nullable: bool = False
    minimum: int | None = None

    def __post_init__(self) -> None:
        if self.type not in TYPE_NAMES:
            raise TargetError(f"option '{self.name}': type must be str, int, bool or list, got {self.type!r}")
        if not self.name or not all(c.isalnum() or c in "-_" for c in self.name):
            raise TargetError(f"option name '{self.name}' must be letters, digits, '-' or '_'")
        empty = None if self.nullable else {str: "", int: 0, bool: False, list: ()}[self.type]
        default = empty if self.default is None else self.check(self.default, "default")
        object.__setattr__(self, "default", default)
        object.__setattr__(self, "choices", tuple(self.choices))

    @property
    def type_name(self) -> str:
        return TYPE_NAMES[self.type]

    # ---- values ---------------------------------------------------------------------------------

    def parse(self, text: str | None, where: str) -> Any:
        """The value of ``-name=text`` (``text`` is None for a bare ``-name``)."""
        if text is None:
            if self.type is bool:
                return True
            raise TargetError(f"{where}: option '-{self.name}' needs a value: write -{self.name}=<{self.type_name}>")
        if self.nullable and text == "":
            return None
        if self.type is str:
            value: Any = text
        elif self.type is int:
            try:
                value = int(text)
            except ValueError:
                raise TargetError(f"{where}: option '-{self.name}' expects an int, got '{text}'") from None
        elif self.type is bool:
            if text.lower() not in _TRUE + _FALSE:
                raise TargetError(f"{where}: option '-{self.name}' expects true or false, got '{text}'")
            value = text.lower() in _TRUE
        else:
            value = tuple(text.split(",")) if text else ()
        return self.check(value, where)

    def check(self, value: Any, where: str) -> Any:
        """Check a value given in Python or JSON form; return it normalized (lists become tuples)."""
        if value is None and self.nullable:
            return None
        ok = isinstance(value, self.type) and not (self.type is int and isinstance(value, bool))
        if self.type is list:
            ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        if not ok:
            raise TargetError(f"{where}: option '-{self.name}' expects {_ARTICLE[self.type_name]}, "
                              f"got {value!r} ({type(value).__name__})")
        if self.type is list:
            value = tuple(value)
            for item in value:
                if not item or "," in item or any(c.isspace() for c in item):
                    raise TargetError(f"{where}: option '-{self.name}': list item {item!r} must be non-empty "
                                      "and contain no ',' or spaces")
        if self.minimum is not None and value < self.minimum:
            raise TargetError(f"{where}: option '-{self.name}' must be >= {self.minimum}; got {value}")
        if self.choices and value not in self.choices:
            allowed = ", ".join(_show(c) for c in self.choices)
            raise TargetError(f"{where}: option '-{self.name}' must be one of {allowed}; got {_show(value)}")
        return value

    def format(self, value: Any) -> str:
        """The text form of a value, as written after ``-name=`` (the inverse of :meth:`parse`)."""
        if value is None:
            return ""
        if self.type is bool:
            return "true" if value else "false"
        if self.type is list:
            return ",".join(value)
        return str(value)


#: option name -> the fact it sets (plait.target.facts.Facts), for the options every kind has
FACT_OPTION_NAMES = {"ram-kb": "ram_kb", "flash-kb": "flash_kb", "clock-mhz": "clock_mhz", "simd-bits": "simd_bits",
                     "fma-bits": "fma_bits"}

FACT_OPTIONS: tuple[Option, ...] = (
    Option("ram-kb", int, None, "RAM in KiB (activations must fit; weights too without flash); overrides "
                                "the tag's or the measured fact", nullable=True, minimum=0),
    Option("flash-kb", int, None, "flash in KiB (weights must fit); overrides the tag's fact",
           nullable=True, minimum=0),
    Option("clock-mhz", int, None, "clock in MHz (the cost model's cycles -> seconds); overrides the tag's "
                                   "or the measured fact", nullable=True, minimum=1),
    Option("simd-bits", int, None, "widest SIMD register in bits, 0 for none (the cost model's vector lanes); "
                                   "overrides the tag's or the measured fact", nullable=True, minimum=0),
    Option("fma-bits", int, None, "the widest vector one FMA pipe takes in one pass (AMD Zen 4: 256 of its "
                                  "512-bit vectors; the cost model issues wider FMAs in parts); overrides the "
                                  "measured fact", nullable=True, minimum=1),
)


def _show(value: Any) -> str:
    return f"'{value}'" if isinstance(value, str) else str(value)
