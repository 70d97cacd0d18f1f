"""Hardware facts: a :class:`Fact` (a value with its unit and source) and the :class:`Facts` of a target.

A tag (:mod:`plait.target.tag`) states its facts; the facts of the machine plait runs on are measured
(:mod:`plait.target.host`); a target's facts come from its fact options, else from its tag
(:func:`plait.target.tag.resolve_facts`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Fact:
    """A value with its unit and source (and a note when it is an estimate or was not re-checked).

    ``origin`` says where a target's fact came from ("tag cortex-m7f", "target option -flash-kb",
    "measured on this machine", "estimate"); facts registered with a tag leave it empty. ``measure``
    (a tag's facts only) names the fact of the running machine to measure when first needed.
    """

    value: Any  # None when the fact does not apply (e.g. flash on a host) or is not known
    unit: str
    source: str
    note: str = ""
    origin: str = ""
    measure: str = ""

    @classmethod
    def measured(cls, name: str, unit: str) -> "Fact":
        """A tag's fact read from the machine plait runs on (:func:`plait.target.host.measure`)."""
        return cls(None, unit, "measured on the running machine when first needed", measure=name)

    @property
    def text(self) -> str:
        """The value with its unit (``n/a`` for None)."""
        return "n/a" if self.value is None else f"{self.value}{' ' + self.unit if self.unit else ''}"

    @property
    def where(self) -> str:
        """Where it came from, e.g. ``tag cortex-m7f: STM32F746: 1 MB flash (...)``."""
        return f"{self.origin}: {self.source}" if self.origin and self.source else (self.origin or self.source)

    def __str__(self) -> str:
        return f"{self.text}  [{self.where}{'; ' + self.note if self.note else ''}]"


#: the origin of a fact that neither a tag nor a fact option gives
UNKNOWN = "unknown"
#: the facts a tag may leave out (then unknown)
OPTIONAL_FACTS = ("cores", "fma_bits")


@dataclass(frozen=True)
class Facts:
    """The hardware facts of a tag. ``fpu`` is 'none', 'sp' (single precision) or 'dp' (double)."""

    clock_mhz: Fact
    fpu: Fact
    simd_bits: Fact  # widest SIMD register usable for data-parallel arithmetic; 0 = none
    ram_kb: Fact  # memory for activations (and for weights when flash_kb is None)
    flash_kb: Fact  # memory for weights (constants); None: none, weights live in RAM
    power_mw: Fact  # typical active power at clock_mhz
    # CPUs (informational: the executor runs calls one at a time)
    cores: Fact = Fact(None, "", "not stated by the tag", origin=UNKNOWN)
    # the widest vector one FMA pipe takes in one pass (None: simd_bits, full-width pipes)
    fma_bits: Fact = Fact(None, "bits", "not stated by the tag", origin=UNKNOWN)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def items(self) -> list[tuple[str, Fact]]:
        return [(n, getattr(self, n)) for n in self.names()]


__all__ = ["Fact", "Facts", "OPTIONAL_FACTS", "UNKNOWN"]
