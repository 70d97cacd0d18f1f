"""The declared ONNX mapping of an operator: the data ONNX import and export both derive from.

An operator lists its mappings in ``Op.onnx``. A 1:1 mapping is pure data::

    OnnxMap("HardSigmoid", attrs={"alpha": "alpha", "beta": "beta"})

The importer turns an ONNX ``HardSigmoid`` node into one call of the operator (ONNX attribute
``alpha`` becomes the operator attribute ``alpha``; an attribute the node omits takes the
operator's default), and the exporter turns a call into one ``HardSigmoid`` node carrying the
attributes back. An entry of ``attrs`` may be ``(plait_attr, fn)`` instead: ``fn`` converts the ONNX
value on import (e.g. ``bool``); the exporter writes the plait value (a bool as an int).

- ``since``: the first ONNX operator-set version of ``op_type`` the mapping covers; the exporter
  needs at least this opset (``"Mish needs ONNX opset >= 18"``).
- ``inputs``: the node's inputs in the order of the call's arguments (None: the same order).
- ``legacy_broadcast``: the node may carry the opset < 7 ``broadcast``/``axis`` attributes
  (binary elementwise ops); the importer aligns the second input as they say.
- ``convert``: None imports 1:1; a function ``convert(cx)`` (cx: the frontend's NodeContext)
  returning the node's output value(s) when the import needs code; False when an ONNX-side
  converter of the frontend imports ``op_type`` (a composition such as Conv with its bias); the
  mapping then serves export and ``plait ops``.
- ``export``: None exports 1:1 (the reverse of the mapping); a function ``export(ex)`` (ex: the
  exporter's ExportContext) returning the ONNX value name(s) when the export needs code; False
  when this mapping is not used for export (the exporter takes the operator's first exporting one).
- ``onnx_attrs``: further ONNX attributes a ``convert`` function reads (accepted on import).

This module holds data only: it imports nothing from the frontend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Union

AttrMap = Mapping[str, Union[str, "tuple[str, Callable[[Any], Any]]"]]


@dataclass(frozen=True)
class OnnxMap:
    """One ONNX operator type mapped onto the operator that declares it (see the module docstring)."""

    op_type: str
    attrs: AttrMap = field(default_factory=dict)
    since: int = 1
    inputs: tuple[int, ...] | None = None
    legacy_broadcast: bool = False
    convert: Callable[[Any], Any] | bool | None = None
    export: Callable[[Any], Any] | bool | None = None
    onnx_attrs: tuple[str, ...] = ()

    @property
    def accepted_attrs(self) -> frozenset[str]:
        """The ONNX attribute names an imported node may carry."""
        legacy = ("broadcast", "axis") if self.legacy_broadcast else ()
        return frozenset(self.attrs) | frozenset(self.onnx_attrs) | frozenset(legacy)

    def plait_attr(self, onnx_attr: str) -> tuple[str, Callable[[Any], Any] | None]:
        """(the plait attribute name, the import conversion or None) of ONNX attribute ``onnx_attr``."""
        v = self.attrs[onnx_attr]
        return (v, None) if isinstance(v, str) else v

    @property
    def imports(self) -> bool:
        """Whether the importer builds this mapping's converter (else a frontend converter imports it)."""
        return self.convert is not False

    @property
    def exports(self) -> bool:
        """Whether the exporter may use this mapping."""
        return self.export is not False
