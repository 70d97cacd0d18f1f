"""Validation of an ONNX model before and while it is imported: what the ONNX IR spec forbids and
ONNX Runtime refuses, reported as one :class:`~plait.errors.FrontendError` line naming the culprit.

Checked before conversion, on the protobuf alone:

- the model: ``ir_version`` set and not newer than the installed onnx knows; every ``opset_import``
  valid (version >= 1, not newer than the installed onnx knows for a domain it knows, a domain
  imported once); an empty ``opset_import`` only in IR < 3 models (which mean opset 1);
- each graph (subgraphs too): at least one output (top level); graph inputs, initializers and
  outputs named and listed once; no negative dimension in a graph input, output or value_info
  (a dimension of unknown size is a ``dim_param``), no static tensor of 2**62 bytes or more;
- each node: its domain imported; for an operator with an ONNX schema, the number of inputs and
  outputs the schema allows, required inputs not left empty, every attribute known to the schema,
  typed as it says, given once, the required ones present, and flags (:data:`FLAG_ATTRS`) 0 or 1.

Checked during conversion, when values are known: each input's dtype against the schema's type
constraints (:func:`check_input_types`), ``axis``/``axes`` of operators expanded into their function
body (:func:`check_axis_attrs`), and each graph output's declared dtype (:func:`check_declared_output`).
What needs shapes or constant values (a Conv's ``kernel_shape`` against its weight, an axis against a
rank, a constant index against an axis) is checked by the converters; SSA (a name defined twice),
undefined inputs and cycles by the importer's topological sort.

Deliberately not used, although both exist: ``onnx.checker.check_model`` refuses models ONNX Runtime
runs (nodes not in topological order, graph outputs without a shape) and names nodes its own way;
ONNX's per-node shape inference (``onnx.shape_inference.infer_node_outputs``) is C++ that is not
hardened against invalid nodes: a ``Split`` with ``num_outputs=2`` and 4 outputs aborts the whole
process (onnx 1.23 wheels are built with ``_GLIBCXX_ASSERTIONS``), so it must never see a hostile
model. The checks here are plain Python.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

import onnx
import onnx.defs

from plait.errors import FrontendError
from plait.frontend.onnx_node import ONNX_DTYPES, onnx_dtype_name, short
from plait.ir.types import TensorType

DEFAULT_DOMAINS = ("", "ai.onnx")
#: A static tensor at least this large (bytes) is refused: no machine holds it, and index
#: arithmetic in generated code would overflow int64.
MAX_TENSOR_BYTES = 1 << 62

#: Integer attributes that are flags (0 or 1) in every operator that has them. Runtimes read other
#: values differently (ONNX Runtime takes keepdims=7 as false, transB=7 as true): refused.
FLAG_ATTRS = frozenset({
    "allowzero", "antialias", "broadcast", "ceil_mode", "center_point_box", "count_include_pad", "detect_negative",
    "detect_positive", "exclude_outside", "exclusive", "fmod", "interleaved", "is_causal", "is_test", "keepdims",
    "largest", "layout", "linear_before_reset", "new_axis", "noop_with_empty_axes", "reverse", "saturate",
    "select_last_index", "sorted", "spatial", "storage_order", "training_mode", "transA", "transB", "upper",
})
_SINGLE = onnx.defs.OpSchema.FormalParameterOption.Single
_GRAPH_ATTRS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def domain_key(domain: str) -> str:
    """``""`` for the default ONNX domain (also spelled ``ai.onnx``), else the domain as is."""
    return "" if domain in DEFAULT_DOMAINS else domain


def domain_label(domain: str) -> str:
    return "ai.onnx" if domain == "" else domain


def node_label(node: onnx.NodeProto, index: int) -> str:
    """The name the importer gives a node: its own, or ``<op_type>_<index>``."""
    return node.name or f"{node.op_type}_{index}"


@lru_cache(maxsize=1)
def known_opsets() -> dict[str, int]:
    """The newest opset version the installed onnx knows, per domain (``""`` for ai.onnx)."""
    newest: dict[str, int] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        d = domain_key(s.domain)
        newest[d] = max(newest.get(d, 0), s.since_version)
    newest[""] = max(newest.get("", 0), onnx.defs.onnx_opset_version())
    return newest


# ---- the model ------------------------------------------------------------------------------------


def check_model(model: onnx.ModelProto) -> dict[str, int]:
    """Check ``ir_version`` and ``opset_import``; the opsets in effect (domain -> version)."""
    if not model.HasField("ir_version"):
        raise FrontendError("the model has no ir_version")
    ir = model.ir_version
    if ir < 1:
        raise FrontendError(f"ir_version {ir} is not valid (versions start at 1)")
    if ir > onnx.IR_VERSION:
        raise FrontendError(f"ir_version {ir} is newer than the installed onnx {onnx.__version__} knows "
                            f"(up to {onnx.IR_VERSION})")
    if not model.opset_import:
        if ir >= 3:
            raise FrontendError("the model imports no operator set (opset_import is empty)")
        return {"": 1}  # IR 1 and 2 have no opset_import: their operators are those of opset 1
    return check_opset_imports(model.opset_import, "opset_import")


def check_opset_imports(imports: Iterable[onnx.OperatorSetIdProto], where: str) -> dict[str, int]:
    """Opset imports (a model's or a function's) as domain -> version, validated."""
    opsets: dict[str, int] = {}
    newest = known_opsets()
    for o in imports:
        d, v = domain_key(o.domain), o.version
        label = domain_label(d)
        if v < 1:
            raise FrontendError(f"{where}: domain '{label}' version {v} is not valid (versions start at 1)")
        if d in newest and v > newest[d]:
            raise FrontendError(f"{where}: domain '{label}' version {v} is newer than the installed onnx "
                                f"{onnx.__version__} knows (up to {newest[d]})")
        if d in opsets and opsets[d] != v:
            raise FrontendError(f"{where}: domain '{label}' is imported twice (versions {opsets[d]} and {v})")
        opsets[d] = v
    return opsets


# ---- graphs -----------------------------------------------------------------------------------------


def check_graph(graph: onnx.GraphProto, opsets: dict[str, int], functions: dict[tuple[str, str], onnx.FunctionProto],
                top_level: bool = True, where: str = "") -> None:
    """Check a graph's declarations and every node (and, recursively, their subgraphs)."""
    if top_level and not graph.output:
        raise FrontendError("the graph has no outputs")
    _unique([vi.name for vi in graph.input], f"{where}graph input", "is listed twice")
    _unique([t.name for t in graph.initializer] + [t.values.name for t in graph.sparse_initializer],
            f"{where}initializer", "is defined twice")
    _unique([vi.name for vi in graph.output], f"{where}graph output", "is listed twice")
    for kind, infos in (("graph input", graph.input), ("graph output", graph.output), ("value_info", graph.value_info)):
        for vi in infos:
            check_value_info(vi, f"{where}{kind} '{vi.name}'")
    for t in graph.initializer:
        check_dims(list(t.dims), f"{where}initializer '{t.name}'")
    for index, node in enumerate(graph.node):
        check_node(node, index, opsets, functions, where)


def _unique(names: list[str], kind: str, twice: str) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        if not n:
            raise FrontendError(f"{kind} #{i} has no name")
        if n in seen:
            raise FrontendError(f"{kind} '{n}' {twice}")
        seen.add(n)


def check_declared_output(vi: onnx.ValueInfoProto, computed: TensorType | None) -> None:
    """A graph output's declared element type must be what the graph computes (ONNX Runtime
    refuses the model otherwise; a declared shape is only a hint there, and here)."""
    kind = vi.type.WhichOneof("value")
    if computed is not None and kind not in (None, "tensor_type"):
        raise FrontendError(f"graph output '{vi.name}' is declared a {kind.removesuffix('_type')} but the graph "
                            "computes a tensor")
    if computed is None or kind != "tensor_type" or not vi.type.tensor_type.elem_type:
        return
    declared = vi.type.tensor_type.elem_type
    if ONNX_DTYPES.get(declared) != computed.dtype:
        raise FrontendError(f"graph output '{vi.name}' is declared {onnx_dtype_name(declared)} but the graph "
                            f"computes {computed.dtype}")


def check_dims(dims: list[int], what: str) -> None:
    """Static dimensions: none negative."""
    for k, d in enumerate(dims):
        if d < 0:
            raise FrontendError(f"{what}: dimension {k} is {d} (dimensions must be >= 0)")


def check_value_info(vi: onnx.ValueInfoProto, what: str) -> None:
    """A declared tensor type: dims >= 0 (unknown sizes are dim_params), and not absurdly large."""
    if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
        return
    size = 1
    for k, d in enumerate(vi.type.tensor_type.shape.dim):
        if d.HasField("dim_value"):
            if d.dim_value < 0:
                raise FrontendError(f"{what}: dimension {k} is {d.dim_value} (dimensions must be >= 0; "
                                    "a dimension of unknown size is a dim_param)")
            size *= d.dim_value
    if size * 8 >= MAX_TENSOR_BYTES:
        shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in vi.type.tensor_type.shape.dim]
        raise FrontendError(f"{what}: shape {short(shape)} is absurdly large ({size} elements)")


# ---- nodes ------------------------------------------------------------------------------------------


def check_node(node: onnx.NodeProto, index: int, opsets: dict[str, int],
               functions: dict[tuple[str, str], onnx.FunctionProto], where: str = "") -> None:
    """A node against its domain's import and its operator's schema; its subgraphs recursively."""
    name = node_label(node, index)
    d = domain_key(node.domain)
    if d not in opsets:
        raise FrontendError(f"{where}node '{name}' ({node.op_type}): the model imports no opset for domain "
                            f"'{domain_label(d)}'")
    label = f"{where}node '{name}' ({node.op_type}, opset {opsets[d]})"
    seen: set[str] = set()
    for a in node.attribute:
        if not a.name:
            raise FrontendError(f"{label}: an attribute has no name")
        if a.name in seen:
            raise FrontendError(f"{label}: attribute '{a.name}' is given twice")
        seen.add(a.name)
        if a.type == onnx.AttributeProto.UNDEFINED:
            raise FrontendError(f"{label}: attribute '{a.name}' has no type")
        if a.name in FLAG_ATTRS and a.type == onnx.AttributeProto.INT and a.i not in (0, 1):
            raise FrontendError(f"{label}: attribute '{a.name}' is {a.i}, it must be 0 or 1")
    if (node.domain, node.op_type) not in functions:
        schema = schema_of(node.op_type, opsets[d], d)
        if schema is not None:
            _check_against_schema(node, schema, label)
    for a in node.attribute:
        if a.type in _GRAPH_ATTRS:
            for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                check_graph(g, opsets, functions, top_level=False, where=f"{label}: subgraph '{a.name}': ")


def check_axis_attrs(node: onnx.NodeProto, rank: int) -> None:
    """``axis``/``axes`` attributes of an operator expanded into its ONNX function body (e.g.
    RMSNormalization, MeanVarianceNormalization) must be axes of its first input: the body would
    otherwise clamp or wrap them silently."""
    for a in node.attribute:
        values = [a.i] if a.name == "axis" and a.type == onnx.AttributeProto.INT else (
            list(a.ints) if a.name == "axes" and a.type == onnx.AttributeProto.INTS else [])
        for v in values:
            if not -rank <= v < rank:
                raise FrontendError(f"{a.name} {v} is out of range for rank {rank}")


@lru_cache(maxsize=4096)
def schema_of(op_type: str, version: int, domain: str) -> onnx.defs.OpSchema | None:
    """The ONNX schema of an operator at an opset version (None: none), looked up once."""
    try:
        return onnx.defs.get_schema(op_type, version, domain)
    except Exception:  # no such operator (at this version): the converters report it as unsupported
        return None


def _check_against_schema(node: onnx.NodeProto, schema: onnx.defs.OpSchema, label: str) -> None:
    op = f"{node.op_type}-{schema.since_version}"
    for what, n, lo, hi in (("inputs", len(node.input), schema.min_input, schema.max_input),
                            ("outputs", len(node.output), schema.min_output, schema.max_output)):
        if not lo <= n <= hi:
            want = f"{lo}" if lo == hi else f"at least {lo}" if hi >= 1 << 30 else f"{lo} to {hi}"
            raise FrontendError(f"{label}: has {n} {what[:-1] if n == 1 else what}, {op} takes {want}")
    for i, p in enumerate(schema.inputs):
        if p.option == _SINGLE and i < len(node.input) and not node.input[i]:
            raise FrontendError(f"{label}: input {i} ('{p.name}') is required but empty")
    given = {a.name: a for a in node.attribute}
    for a in node.attribute:
        spec = schema.attributes.get(a.name)
        if spec is None:
            raise FrontendError(f"{label}: '{a.name}' is not an attribute of {op}")
        if int(spec.type) != int(a.type):
            raise FrontendError(f"{label}: attribute '{a.name}' is {_type_name(int(a.type))}, {op} wants "
                                f"{_type_name(int(spec.type))}")
    for n, spec in schema.attributes.items():
        if spec.required and n not in given:
            raise FrontendError(f"{label}: attribute '{n}' is required")


def _type_name(t: int) -> str:
    try:
        return onnx.AttributeProto.AttributeType.Name(t).lower()
    except ValueError:
        return f"#{t}"


# ---- input types (checked during conversion, when the values' dtypes are known) ----------------------

_ONNX_TYPE_OF = {
    "float32": "float", "float64": "double", "float16": "float16", "int8": "int8", "int16": "int16",
    "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
    "uint64": "uint64", "bool": "bool",
}
_PLAIT_OF_ONNX = {f"tensor({v})": k for k, v in _ONNX_TYPE_OF.items()}


@lru_cache(maxsize=None)
def _input_rules(op_type: str, since: int, domain: str) -> tuple[tuple[str, str | None, frozenset[str], bool, bool], ...]:
    """Per formal input: (name, type variable or None, allowed tensor types, variadic, homogeneous)."""
    schema = onnx.defs.get_schema(op_type, since, domain)
    allowed = {c.type_param_str: frozenset(c.allowed_type_strs) for c in schema.type_constraints}
    rules = []
    for p in schema.inputs:
        var = p.type_str if p.type_str in allowed else None
        types = allowed[var] if var is not None else frozenset([p.type_str])
        variadic = p.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
        rules.append((p.name, var, types, variadic, bool(p.is_homogeneous)))
    return tuple(rules)


def check_input_types(node: onnx.NodeProto, schema: onnx.defs.OpSchema, dtypes: list[str | None]) -> None:
    """The inputs' dtypes against the schema's type constraints (a plait dtype per input, None when
    absent or not a tensor); inputs sharing a type variable must agree."""
    rules = _input_rules(node.op_type, schema.since_version, domain_key(schema.domain))
    if not rules:
        return
    op = f"{node.op_type}-{schema.since_version}"
    bound: dict[str, tuple[int, str]] = {}
    for i, dt in enumerate(dtypes):
        if dt is None or dt not in _ONNX_TYPE_OF:
            continue
        name, var, types, variadic, homogeneous = rules[min(i, len(rules) - 1)]
        if i >= len(rules) and not variadic:
            return  # more inputs than the schema has (reported by check_node)
        if f"tensor({_ONNX_TYPE_OF[dt]})" not in types:
            names = sorted(_PLAIT_OF_ONNX.get(t, t) for t in types)
            raise FrontendError(f"input {i} ('{name}') is {dt}, {op} takes {', '.join(names)}")
        if var is not None and (homogeneous or not variadic):
            j, first = bound.setdefault(var, (i, dt))
            if first != dt:
                raise FrontendError(f"input {i} ('{name}') is {dt} but input {j} is {first} "
                                    f"(both are {var} in {op})")
