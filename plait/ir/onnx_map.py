"""The declared ONNX mapping of an operator: data the ONNX importer and exporter both derive from.

An operator lists its mappings in ``Op.onnx``. A 1:1 mapping is pure data::

    OnnxMap("HardSigmoid", attrs={"alpha": "alpha", "beta": "beta"})

imports an ONNX ``HardSigmoid`` node as one call of the operator (ONNX attribute ``alpha`` becomes
the operator attribute ``alpha``; an attribute the node omits takes the operator's default) and
exports a call as one ``HardSigmoid`` node carrying the attributes back. An entry of ``attrs`` may
instead be ``(plait_attr, fn)``: ``fn`` converts the ONNX value on import (e.g. ``bool``), and
the exporter writes the plait value (a bool as an int). ``since``/``until`` bound the ONNX
operator-set versions the mapping covers (the importer refuses a node outside them; the exporter
needs ``since``). ``inputs`` reorders the node's inputs into the call's arguments (``None``: same order).

An operator whose mapping needs code gives ``convert(cx)`` (cx: the frontend's NodeContext; it
returns the value of the node's outputs) and/or ``export(ex)`` (ex: the exporter's ExportContext;
it returns the ONNX value name(s)). ``export=False`` declares an import-only mapping (the
exporter uses another mapping of the same operator, or none). This module holds data only: it
imports nothing from the frontend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

AttrMap = Mapping[str, "str | tuple[str, Callable[[Any], Any]]"]


@dataclass(frozen=True)
class OnnxMap:
    """One ONNX operator type mapped onto the operator that declares it (see the module docstring)."""

    op_type: str
    attrs: AttrMap = field(default_factory=dict)
    since: int = 1
    until: int | None = None
    inputs: tuple[int, ...] | None = None
    convert: Callable[[Any], Any] | None = None
    export: Callable[[Any], Any] | bool | None = None
    onnx_attrs: tuple[str, ...] = ()  # further ONNX attributes ``convert`` reads (not mapped 1:1)

    @property
    def accepted_attrs(self) -> frozenset[str]:
        """The ONNX attribute names an imported node may carry."""
        return frozenset(self.attrs) | frozenset(self.onnx_attrs)

    def plait_attr(self, onnx_attr: str) -> tuple[str, Callable[[Any], Any] | None]:
        """(the plait attribute name, the import conversion or None) of ``onnx_attr``."""
        v = self.attrs[onnx_attr]
        return (v, None) if isinstance(v, str) else v

    @property
    def exports(self) -> bool:
        """Whether the exporter uses this mapping (a 1:1 mapping or an ``export`` function)."""
        if self.export is False:
            return False
        return self.export is not None or self.convert is None
