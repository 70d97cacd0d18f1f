"""The converter table: ONNX ``op_type`` -> the function building plait calls for one node.

One table, built explicitly on first use by :func:`load_converters` from two sources:

- the operators' declared ONNX mappings (``Op.onnx``, :class:`plait.ir.onnx_map.OnnxMap`): a 1:1
  mapping becomes :func:`mapped_converter` (one call of the operator), a mapping with code calls
  its ``convert(cx)``;
- the ONNX-side converters of the frontend (compositions of several plait operators, shape-only
  and control-flow operators): each module of :data:`MODULES` lists its :class:`Converter` entries
  in ``CONVERTERS``.

An ONNX ``op_type`` has exactly one entry (a duplicate is a bug and raises); operators of another
domain (the ``com.microsoft`` ones ONNX Runtime's quantizer writes) are keyed ``domain.op_type``. A converter names the
attributes it understands; a node carrying any other attribute is reported as unsupported without
calling it. Converters dispatch on ``cx.version`` (the version of the ONNX operator schema in
effect for the model's opset).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Iterable

from plait.frontend.onnx_fold import SYM_BINARY, has_sym, sym_binary, sym_equal, sym_where
from plait.frontend.onnx_node import NodeContext
from plait.ir.onnx_map import OnnxMap
from plait.ir.op import Op
from plait.relay.expr import Expr

ConvertFn = Callable[[NodeContext], object]

# the frontend's converter modules (the manifest of ONNX-side converters)
MODULES: tuple[str, ...] = (
    "plait.frontend.onnx_ops", "plait.frontend.onnx_ops_image", "plait.frontend.onnx_ops_index",
    "plait.frontend.onnx_ops_loop", "plait.frontend.onnx_ops_misc", "plait.frontend.onnx_ops_nn",
    "plait.frontend.onnx_ops_quant", "plait.frontend.onnx_ops_quant_ms", "plait.frontend.onnx_ops_rnn", "plait.frontend.onnx_ops_shape",
)


@dataclass(frozen=True)
class Converter:
    """How one ONNX ``op_type`` is imported. ``ops`` are the plait operators it builds (the main one
    first; the others for some attributes, types or shapes), shown by ``plait ops``."""

    op_type: str
    fn: ConvertFn
    attrs: frozenset[str] = frozenset()
    min_version: int = 1
    ops: tuple[str, ...] = ()
    domain: str = ""  # "" is ONNX's default domain; else e.g. "com.microsoft"

    @property
    def key(self) -> str:
        return converter_key(self.domain, self.op_type)


def converter_key(domain: str, op_type: str) -> str:
    """The converter table's key: ``op_type`` in the default domain, else ``domain.op_type``
    (``com.microsoft.QGemm``)."""
    return f"{domain}.{op_type}" if domain else op_type


def converters(op_types: Iterable[str], fn: ConvertFn, attrs: Iterable[str] = (), min_version: int = 1,
               ops: Callable[[str], tuple[str, ...]] | tuple[str, ...] = (), domain: str = "") -> list[Converter]:
    """One :class:`Converter` per ONNX type of ``op_types`` sharing ``fn`` (``ops`` may be a function
    of the type), in ``domain`` (default: ONNX's)."""
    return [Converter(t, fn, frozenset(attrs), min_version, ops(t) if callable(ops) else tuple(ops), domain)
            for t in op_types]


# symbolic-shape evaluation of a mapped node whose inputs are shape values (onnx_fold)
_SYMBOLIC: dict[str, ConvertFn] = {
    **{t: sym_binary for t in SYM_BINARY}, "Equal": sym_equal, "Where": sym_where,
}


def legacy_broadcast(cx: NodeContext, b: Expr) -> Expr:
    """Opsets < 7: ``broadcast=1`` with ``axis`` aligns b with a starting at ``axis``."""
    if not cx.attr("broadcast", 0) or "axis" not in cx.attrs:
        return b
    nd_a, nd_b = cx.ndim(0), cx.ndim(1)
    axis = cx.axis(cx.attr("axis"), nd_a)
    trailing = nd_a - axis - nd_b
    if trailing <= 0:
        return b
    return cx.reshape(b, tuple(cx.static_shape(1, "input B")) + (1,) * trailing)


def mapped_converter(op: Op, m: OnnxMap) -> ConvertFn:
    """The converter of a declared mapping: its ``convert``, or one call of ``op`` (1:1)."""
    if callable(m.convert):
        return m.convert

    def convert(cx: NodeContext) -> object:
        sym = _SYMBOLIC.get(cx.op_type)
        if sym is not None and has_sym(cx):
            return sym(cx)
        n = op.num_inputs if isinstance(op.num_inputs, int) else len(cx.inputs)
        args = [cx.expr(i) for i in (m.inputs if m.inputs is not None else range(n))]
        if m.legacy_broadcast:
            args[1] = legacy_broadcast(cx, args[1])
        attrs = {}
        for name, value in cx.attrs.items():
            if name in m.attrs:
                key, fn = m.plait_attr(name)
                attrs[key] = fn(value) if fn is not None else value
        return cx.call(op.name, *args, **attrs)

    return convert


CONVERTERS: dict[str, Converter] = {}


def load_converters() -> dict[str, Converter]:
    """The converter table (built on the first call)."""
    if CONVERTERS:
        return CONVERTERS
    from plait.op import all_ops

    table: list[Converter] = []
    for op in all_ops():
        for m in op.onnx:
            if m.imports:
                table.append(Converter(m.op_type, mapped_converter(op, m), m.accepted_attrs, m.since, (op.name,)))
    for module in MODULES:
        table.extend(importlib.import_module(module).CONVERTERS)
    built: dict[str, Converter] = {}
    for c in table:
        assert c.key not in built, f"two converters for ONNX {c.key}"
        built[c.key] = c
    CONVERTERS.update(built)
    return CONVERTERS


def declared_ops(op_type: str) -> tuple[str, ...]:
    """The plait operators ONNX ``op_type`` (``domain.op_type`` outside the default domain) imports to
    (declared by its converter), main one first."""
    return load_converters()[op_type].ops
