"""Expansion of ONNX functions: model-local functions, and ONNX operators defined by a function
body in their schema (e.g. ``Shrink``, ``MeanVarianceNormalization``, ``Attention``) when plait
has no direct converter for them. The body's nodes are converted like any others, in a scope of
their own, and their calls carry the meta (name, op_type) of the node being expanded.
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import helper

from plait.frontend.onnx_node import ONNX_OF_DTYPE, SymTensor, Unsupported, value_type


def _pick(versions: list[int], opset: int) -> int:
    below = [v for v in versions if v <= opset]
    return max(below) if below else min(versions)


def _type_proto(v: Any) -> onnx.TypeProto:
    if v is None:
        return onnx.TypeProto()
    t = value_type(v if not isinstance(v, SymTensor) else v)
    dims = [d if isinstance(d, int) else (None if d == "?" else d) for d in t.shape]
    return helper.make_tensor_type_proto(ONNX_OF_DTYPE[t.dtype], dims)


def function_body(node: onnx.NodeProto, local: onnx.FunctionProto | None, schema: Any, opset: int,
                  inputs: list[Any], outer_opsets: dict[str, int]) -> tuple[onnx.FunctionProto, dict[str, int]]:
    """The function to expand ``node`` into and the opsets its body is written against (its own
    imports, else those of the graph around it)."""
    if local is not None:
        fn, version = local, opset
    elif any(a.name not in schema.attributes for a in node.attribute):
        unknown = sorted(a.name for a in node.attribute if a.name not in schema.attributes)
        raise Unsupported(f"attribute '{unknown[0]}' not supported")
    elif schema.has_function:
        version = _pick(list(schema.function_opset_versions) or [schema.since_version], opset)
        fn = onnx.FunctionProto()
        fn.ParseFromString(schema.get_function_with_opset_version(version))
        if not fn.node:
            fn = schema.function_body
    else:
        version = _pick(list(schema.context_dependent_function_opset_versions) or [schema.since_version], opset)
        types = [_type_proto(v).SerializeToString() for v in inputs]
        try:
            data = schema.get_context_dependent_function_with_opset_version(
                version, node.SerializeToString(), types)
        except Exception as exc:
            raise Unsupported(f"cannot build its function body: {str(exc).splitlines()[0] if str(exc) else exc}") from None
        fn = onnx.FunctionProto()
        fn.ParseFromString(data)
    if not fn.node and not fn.output:
        raise Unsupported("operator not supported")
    opsets = dict(outer_opsets)
    opsets.update({("" if o.domain == "ai.onnx" else o.domain): o.version for o in fn.opset_import})
    return fn, opsets


def instantiate(node: onnx.NodeProto, fn: onnx.FunctionProto, schema: Any = None
                ) -> tuple[list[onnx.NodeProto], list[str], list[str]]:
    """``fn``'s nodes with attribute references resolved from ``node``; formal inputs a missing
    optional input is bound to are replaced by ''."""
    bound = {f for f, a in zip(fn.input, node.input) if a}
    given = {a.name: a for a in node.attribute}
    defaults = {a.name: a for a in fn.attribute_proto}
    out: list[onnx.NodeProto] = []
    for n in fn.node:
        m = onnx.NodeProto()
        m.CopyFrom(n)
        del m.input[:]
        m.input.extend(i if i in bound or i not in fn.input else "" for i in n.input)
        del m.attribute[:]
        for a in n.attribute:
            if not a.ref_attr_name:
                m.attribute.append(a)
                continue
            src = given.get(a.ref_attr_name) or defaults.get(a.ref_attr_name) or _schema_default(schema, a.ref_attr_name)
            if src is None:
                continue
            b = onnx.AttributeProto()
            b.CopyFrom(src)
            b.name = a.name
            m.attribute.append(b)
        out.append(m)
    return out, list(fn.input), list(fn.output)


def _schema_default(schema: Any, name: str) -> onnx.AttributeProto | None:
    if schema is None or name not in schema.attributes:
        return None
    d = schema.attributes[name].default_value
    return d if d.type != onnx.AttributeProto.UNDEFINED else None
