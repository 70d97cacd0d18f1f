"""ONNX frontend: ``from_onnx(model) -> IRModule`` and ``load_onnx(path) -> IRModule``.

Graph inputs that are not initializers become the parameters of ``@main`` (named exactly as in
ONNX; symbolic dims keep their ``dim_param`` name, sanitized to an identifier; unnamed unknown
dims are ``"?"``); initializers become constants. Nodes are converted in topological order by the
converters of :mod:`plait.frontend.onnx_registry`; a node whose inputs are all constants is
evaluated at import time with the operators' numpy references (:mod:`plait.frontend.onnx_fold`).
Every call carries ``meta`` ``name`` (the node's name, or ``<op_type>_<index>``) and ``op_type``.

Unsupported operators, attributes and dtypes are collected over the whole graph and reported in
one :class:`~plait.errors.UnsupportedError`; any other problem is a
:class:`~plait.errors.FrontendError` naming the node.
"""

from __future__ import annotations

import os
import re
from collections import ChainMap
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
import onnx.defs
from google.protobuf.message import DecodeError

from plait.errors import FrontendError, PlaitError, UnsupportedError
from plait.frontend import onnx_check, onnx_fold
from plait.frontend.onnx_budget import ImportBudget, type_bytes
from plait.frontend.onnx_check import domain_key, node_label
from plait.frontend.onnx_external import load_external_data
from plait.frontend.onnx_node import (
    NodeContext, SymTensor, Unsupported, parse_attribute, plait_dtype, tensor_to_array,
)
from plait.frontend.onnx_registry import converter_key, load_converters
from plait.frontend.shape_overrides import ShapeOverrideError, check_override
from plait.ir.attrs import Attrs
from plait.limits import MemoryLimitError
from plait.ir.types import ANY_DIM, DTYPES, TensorType
from plait.relay.expr import Constant, Expr, Function, Tuple, Var
from plait.relay.infer import infer_expr, infer_type
from plait.relay.module import IRModule

__all__ = ["from_onnx", "load_onnx"]

_POISON = object()  # the value of an output of an unsupported node
_MAX_FUNCTION_DEPTH = 8


def load_onnx(path: str | os.PathLike, shape_overrides: Mapping[str, Sequence[Any]] | None = None, *,
              memory_limit: int | str | None = None) -> IRModule:
    """Read an ONNX file and import it. External data is read from files in the model's own
    directory only (:mod:`plait.frontend.onnx_external`); ``memory_limit`` (bytes or a size string,
    default :func:`plait.limits.default_limit`) bounds what reading and import-time folding allocate."""
    p = os.fspath(path)
    try:
        size = os.path.getsize(p)
        if size == 0:
            raise FrontendError(f"cannot load ONNX model '{p}': the file is empty")
        model = onnx.load(p, load_external_data=False)
        if not model.HasField("graph"):
            raise FrontendError(f"cannot load ONNX model '{p}': the file holds no graph")
        load_external_data(model, os.path.dirname(os.path.abspath(p)), memory_limit)
    except MemoryLimitError as exc:
        raise MemoryLimitError(f"cannot load ONNX model '{p}': {exc}") from None
    except FrontendError as exc:
        if str(exc).startswith("cannot load ONNX model"):
            raise
        raise FrontendError(f"cannot load ONNX model '{p}': {exc}") from None
    except OSError as exc:
        raise FrontendError(f"cannot load ONNX model '{p}': {exc.strerror or exc}") from None
    except DecodeError:
        raise FrontendError(f"cannot load ONNX model '{p}': not a valid ONNX protobuf file "
                            f"(truncated, or not ONNX)") from None
    except Exception as exc:  # anything else onnx.load may raise on a damaged file
        raise FrontendError(f"cannot load ONNX model '{p}': {_reason(exc)}") from None
    return from_onnx(model, shape_overrides, memory_limit=memory_limit)


def from_onnx(model: onnx.ModelProto, shape_overrides: Mapping[str, Sequence[Any]] | None = None, *,
              memory_limit: int | str | None = None) -> IRModule:
    """Import an ONNX model. ``shape_overrides`` maps graph input names to shapes (ints or names)
    that replace the declared ones (e.g. to fix a symbolic batch size). ``memory_limit`` bounds the
    constants import-time folding materializes (larger results are left to run time)."""
    if not isinstance(model, onnx.ModelProto):
        raise FrontendError(f"from_onnx expects an onnx.ModelProto, got {type(model).__name__}")
    try:
        return _Importer(model, dict(shape_overrides or {}), memory_limit).run()
    except PlaitError:
        raise
    except RecursionError:
        raise FrontendError("cannot import the ONNX model: it nests too deeply") from None
    except Exception as exc:  # a malformed model the checks above did not anticipate
        raise FrontendError(f"cannot import the ONNX model: {type(exc).__name__}: {_reason(exc)}") from exc


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class _DimNames:
    """dim_param -> identifier; distinct dim_params never share an identifier."""

    def __init__(self) -> None:
        self.by_param: dict[str, str] = {}
        self.used: set[str] = set()

    def get(self, param: str) -> str:
        if param in self.by_param:
            return self.by_param[param]
        name = re.sub(r"[^A-Za-z0-9_]", "_", param)
        if not re.match(r"[A-Za-z_]", name):
            name = "_" + name
        base, k = name, 2
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        self.by_param[param] = name
        return name


class _Importer:
    def __init__(self, model: onnx.ModelProto, shape_overrides: dict[str, Sequence[Any]],
                 memory_limit: int | str | None = None):
        self.model = model
        self.budget = ImportBudget(memory_limit)
        self.graph = model.graph
        self.shape_overrides = shape_overrides
        self.opsets = onnx_check.check_model(model)
        self.functions = {(f.domain, f.name): f for f in model.functions}
        self.converters = load_converters()
        self.unsupported: list[tuple[str, str, int, str]] = []
        self.needs_constant: list[str] = []  # ONNX names of run-time values that must be constants
        self.dims = _DimNames()
        self._constants: dict[int, tuple[np.ndarray, Constant]] = {}

    # ---- entry ----------------------------------------------------------------------------
    def run(self) -> IRModule:
        g = self.graph
        for f in self.model.functions:
            onnx_check.check_opset_imports(f.opset_import, f"function '{f.name}' (domain '{f.domain}')")
        onnx_check.check_graph(g, self.opsets, self.functions)
        env: dict[str, Any] = {}
        init_names = {t.name for t in g.initializer}
        for t in g.initializer:
            env[t.name] = self._initializer(t)
        for t in g.sparse_initializer:
            self._report(t.values.name, "initializer", "sparse initializers not supported")
            env[t.values.name] = _POISON
        params: list[Var] = []
        input_names: list[str] = []
        for vi in g.input:
            if vi.name in init_names:
                continue
            input_names.append(vi.name)
            var = self._graph_input(vi)
            env[vi.name] = var if var is not None else _POISON
            if var is not None:
                params.append(var)
        unknown = sorted(set(self.shape_overrides) - set(input_names))
        if unknown:
            raise ShapeOverrideError(f"unknown input '{unknown[0]}' (inputs are: {', '.join(input_names)})")
        self.convert_nodes(list(g.node), env, self.opsets, meta=None, depth=0)
        outputs: list[Expr] = []
        for vi in g.output:
            if vi.name not in env:
                raise FrontendError(f"graph output '{vi.name}' is not defined by any node, input or initializer")
            v = env[vi.name]
            if v is _POISON:
                continue
            if isinstance(v, SymTensor) and not v.is_static:
                self._report(vi.name, "output", "a value computed from a symbolic shape is a graph output")
                continue
            onnx_check.check_declared_output(vi, _type_of(v))
            outputs.append(self._as_expr(v))
        if self.unsupported:
            err = _unsupported_error(self.unsupported)
            err.needs_constant = sorted(set(self.needs_constant))  # type: ignore[attr-defined]
            raise err
        body: Expr = outputs[0] if len(outputs) == 1 else Tuple(tuple(outputs))
        attrs = {"input_names": tuple(input_names), "output_names": tuple(vi.name for vi in g.output)}
        try:
            ret_type = infer_expr(body)
            mod = IRModule({"main": Function(tuple(params), body, ret_type)}, attrs)
            return infer_type(mod)
        except PlaitError as exc:
            raise FrontendError(f"the imported module does not type-check: {exc}") from None

    # ---- inputs and constants ---------------------------------------------------------------
    def _report(self, name: str, op_type: str, reason: str, opset: int | None = None) -> None:
        self.unsupported.append((name, op_type, self.opsets.get("", 0) if opset is None else opset, reason))

    def _initializer(self, t: onnx.TensorProto) -> Any:
        try:
            return tensor_to_array(t, f"initializer '{t.name}'")
        except Unsupported as exc:
            self._report(t.name, "initializer", exc.reason)
            return _POISON
        except FrontendError:
            raise
        except Exception as exc:
            raise FrontendError(f"initializer '{t.name}': cannot read its data: {_reason(exc)}") from None

    def _graph_input(self, vi: onnx.ValueInfoProto) -> Var | None:
        tp = vi.type
        if not tp.HasField("tensor_type"):
            kind = tp.WhichOneof("value") or "unknown"
            self._report(vi.name, "input", f"input type '{kind.replace('_type', '')}' not supported")
            return None
        tt = tp.tensor_type
        try:
            dtype = plait_dtype(tt.elem_type)
        except Unsupported as exc:
            self._report(vi.name, "input", exc.reason)
            return None
        declared = tuple(self._dim(d) for d in tt.shape.dim) if tt.HasField("shape") else None
        if vi.name in self.shape_overrides:
            shape = check_override(vi.name, declared, self.shape_overrides[vi.name])
        elif declared is not None:
            shape = declared
        else:
            raise FrontendError(f"graph input '{vi.name}' has no shape (unknown rank): "
                                f"give it with shape_overrides")
        try:
            return Var(vi.name, TensorType(shape, dtype))
        except PlaitError as exc:
            raise FrontendError(f"graph input '{vi.name}': {exc}") from None

    def _dim(self, d: onnx.TensorShapeProto.Dimension) -> int | str:
        if d.HasField("dim_value") and d.dim_value >= 0:
            return int(d.dim_value)
        if d.HasField("dim_param") and d.dim_param:
            return self.dims.get(d.dim_param)
        return ANY_DIM

    def constant(self, array: np.ndarray) -> Constant:
        """One shared ``Constant`` per array object."""
        hit = self._constants.get(id(array))
        if hit is None:
            hit = (array, Constant(array))
            self._constants[id(array)] = hit
        return hit[1]

    def _as_expr(self, v: Any) -> Expr:
        if isinstance(v, Expr):
            return v
        if isinstance(v, SymTensor):
            v = v.to_array()
        return self.constant(v)

    # ---- nodes ----------------------------------------------------------------------------
    def convert_nodes(self, nodes: list[onnx.NodeProto], env: dict[str, Any], opsets: dict[str, int],
                      meta: Attrs | None, depth: int, inside: str | None = None) -> None:
        """Convert ``nodes`` (any order; sorted topologically here), binding outputs in ``env``.

        At the top level (``inside`` None) unsupported nodes are collected. Inside a function body
        or a subgraph (``inside`` names which) the first unsupported node raises
        :class:`Unsupported` for the node that owns them. ``meta`` is the meta of the node whose
        function body this is (its calls carry it), else None (calls carry their own node's).
        """
        for index, node in _topological(nodes, env):
            self.budget.tick()
            name = node_label(node, index)
            domain = domain_key(node.domain)
            opset = opsets.get(domain, 0)
            inputs = [env[i] if i else None for i in node.input]
            if any(v is _POISON for v in inputs):
                if inside is not None:  # an outer value the subgraph uses comes from an unsupported node
                    raise Unsupported(f"its {inside} uses the output of an unsupported node")
                # cannot convert without its inputs, but still report what is known to be unsupported
                reason = self._static_reason(node, domain, opset)
                if reason is not None and inside is None:
                    self.unsupported.append((name, node.op_type, opset, reason))
                for o in node.output:
                    if o:
                        env[o] = _POISON
                continue
            node_meta = meta if meta is not None else Attrs(name=name, op_type=node.op_type)
            try:
                outs = self.convert_node(node, domain, opsets, inputs, node_meta, depth, env)
            except Unsupported as exc:
                if inside is not None:
                    raise Unsupported(f"its {inside} uses {node.op_type}: {exc.reason}") from None
                self.unsupported.append((name, node.op_type, opset, exc.reason))
                outs = [_POISON] * len(node.output)
            except MemoryLimitError as exc:
                if inside is not None:
                    raise
                raise MemoryLimitError(f"node '{name}' ({node.op_type}, opset {opset}): {exc}") from None
            except PlaitError as exc:
                where = f"node '{name}' ({node.op_type}, opset {opset})"
                if inside is not None:  # the node owning this body/subgraph adds its own name
                    raise FrontendError(f"in its {inside}, {where}: {exc}") from None
                raise FrontendError(f"{where}: {exc}") from None
            except MemoryError as exc:  # an allocation the budget did not foresee
                raise MemoryLimitError(f"node '{name}' ({node.op_type}, opset {opset}): out of memory: "
                                       f"{_reason(exc)}") from None
            except Exception as exc:  # a converter bug: never a bare traceback
                if inside is not None:
                    raise
                raise FrontendError(f"node '{name}' ({node.op_type}, opset {opset}): internal error while "
                                    f"converting: {type(exc).__name__}: {_reason(exc)}") from exc
            for o, v in zip(node.output, outs):
                if o:
                    env[o] = v

    def _static_reason(self, node: onnx.NodeProto, domain: str, opset: int) -> str | None:
        """Why a node is unsupported, judged without its inputs (None if it may be fine)."""
        conv = self.converters.get(converter_key(domain, node.op_type))
        if domain != "" and conv is None:
            return None if (node.domain, node.op_type) in self.functions else f"operator domain '{domain}' not supported"
        if conv is None:
            schema = _schema(node.op_type, opset, domain)
            expandable = schema is not None and (schema.has_function or schema.has_context_dependent_function)
            return None if expandable else "operator not supported"
        extra = sorted({a.name for a in node.attribute} - conv.attrs)
        return f"attribute '{extra[0]}' not supported" if extra else None

    def convert_node(self, node: onnx.NodeProto, domain: str, opsets: dict[str, int], inputs: list[Any],
                     meta: Attrs, depth: int, env: dict[str, Any]) -> list[Any]:
        opset = opsets.get(domain, 0)
        local = self.functions.get((node.domain, node.op_type))
        conv = self.converters.get(converter_key(domain, node.op_type))
        schema = _schema(node.op_type, opset, domain) if local is None else None
        if schema is not None:
            onnx_check.check_input_types(node, schema, [_dtype_of(v) for v in inputs])
        if conv is None or (schema is not None and schema.since_version < conv.min_version):
            if local is None and (schema is None or not (schema.has_function or schema.has_context_dependent_function)):
                if domain != "":
                    raise Unsupported(f"operator domain '{domain}' not supported")
                if conv is not None:
                    raise Unsupported(f"operator version {schema.since_version} not supported")
                raise Unsupported("operator not supported")
            if depth >= _MAX_FUNCTION_DEPTH:
                raise Unsupported("function bodies nest too deeply")
            from plait.frontend.onnx_func import function_body

            fn, fn_opsets = function_body(node, local, schema, opset, inputs, opsets)
            return self.expand_function(node, fn, fn_opsets, schema, inputs, meta, depth)
        try:
            outs = self._convert_direct(conv, node, schema, opsets, inputs, meta, depth, env)
        except Unsupported as first:
            # the converter cannot (this attribute, this extra output...): the operator's
            # function body may; if not, the converter's reason is the one to report
            if schema is None or not (schema.has_function or schema.has_context_dependent_function):
                raise
            if depth >= _MAX_FUNCTION_DEPTH:
                raise
            from plait.frontend.onnx_func import function_body

            saved = len(self.needs_constant)
            try:
                fn, fn_opsets = function_body(node, None, schema, opset, inputs, opsets)
                outs = self.expand_function(node, fn, fn_opsets, schema, inputs, meta, depth)
            except Unsupported:
                del self.needs_constant[saved:]
                raise first from None
        _check_output_sizes(outs)
        if all(v is None or isinstance(v, np.ndarray) for v in inputs) and not _has_subgraph(node):
            outs = onnx_fold.fold_outputs(outs, self.budget)
        # a constant result (e.g. CastLike of a constant) is a constant value for later nodes
        return [o.data if isinstance(o, Constant) else o for o in outs]

    def _convert_direct(self, conv: Any, node: onnx.NodeProto, schema: Any, opsets: dict[str, int],
                        inputs: list[Any], meta: Attrs, depth: int, env: dict[str, Any]) -> list[Any]:
        extra = sorted({a.name for a in node.attribute} - conv.attrs)
        if extra:
            raise Unsupported(f"attribute '{extra[0]}' not supported")
        attrs = {a.name: parse_attribute(a) for a in node.attribute}
        opset = opsets.get("", 0)
        version = schema.since_version if schema is not None else opset

        def subgraph(g: onnx.GraphProto, bound: list[Any] | None = None) -> list[Any]:
            return self.convert_subgraph(g, env, opsets, depth, bound)

        cx = NodeContext(node, inputs, attrs, version, opset, meta, self.constant, self.needs_constant, subgraph,
                         budget=self.budget)
        result = conv.fn(cx)
        outs = list(result) if isinstance(result, (list, tuple)) else [result]
        for i, o in enumerate(node.output):
            if o and (i >= len(outs) or outs[i] is None):
                raise Unsupported(f"output {i} ('{o}') not supported")
        n_out = len(node.output)
        return (outs + [None] * n_out)[:n_out]

    def convert_subgraph(self, g: onnx.GraphProto, outer: dict[str, Any], opsets: dict[str, int],
                         depth: int, inputs: list[Any] | None = None) -> list[Any]:
        """The output values of a subgraph (an If branch, a loop body) that sees the names of the
        scope around it; ``inputs`` are bound to the subgraph's inputs."""
        if len(g.input) != len(inputs or []):
            raise Unsupported(f"subgraph expects {len(g.input)} inputs, got {len(inputs or [])}")
        if depth >= _MAX_FUNCTION_DEPTH:
            raise Unsupported("subgraphs nest too deeply")
        inner: Any = ChainMap({}, outer)  # sees the outer scope, binds its own names
        for vi, v in zip(g.input, inputs or []):
            inner[vi.name] = v
        for t in g.initializer:
            inner[t.name] = tensor_to_array(t, f"subgraph initializer '{t.name}'")
        self.convert_nodes(list(g.node), inner, opsets, None, depth + 1, inside="subgraph")
        outs = []
        for o in g.output:
            if o.name not in inner:
                raise Unsupported(f"subgraph output '{o.name}' is not defined")
            if inner[o.name] is _POISON:
                raise Unsupported(f"subgraph output '{o.name}' comes from an unsupported node")
            outs.append(inner[o.name])
        return outs

    def expand_function(self, node: onnx.NodeProto, fn: onnx.FunctionProto, fn_opsets: dict[str, int],
                        schema: Any, inputs: list[Any], meta: Attrs, depth: int) -> list[Any]:
        from plait.frontend.onnx_func import instantiate

        if schema is not None and inputs and inputs[0] is not None:
            t = _type_of(inputs[0])
            if t is not None:
                onnx_check.check_axis_attrs(node, t.ndim)
        nodes, in_names, out_names = instantiate(node, fn, schema)
        inner: dict[str, Any] = {}
        for formal, v in zip(in_names, inputs):
            if formal and v is not None:
                inner[formal] = v
        self.convert_nodes(nodes, inner, fn_opsets, meta, depth + 1, inside="function body")
        outs = []
        for i, o in enumerate(out_names):
            used = i < len(node.output) and node.output[i] != ""
            if used and o not in inner:
                raise Unsupported(f"its function body does not define output '{o}'")
            outs.append(inner.get(o) if used else None)
        return outs


def _type_of(v: Any) -> TensorType | None:
    """The tensor type of a value (None: absent, or not a tensor)."""
    if isinstance(v, np.ndarray):
        return TensorType(v.shape, v.dtype.name) if v.dtype.name in DTYPES else None
    if isinstance(v, SymTensor):
        return TensorType(v.values.shape, v.dtype)
    t = v.checked_type if isinstance(v, Expr) and v.has_type else None
    return t if isinstance(t, TensorType) else None


def _dtype_of(v: Any) -> str | None:
    """The dtype of an input value (None: absent, or not a tensor)."""
    t = _type_of(v)
    return None if t is None else t.dtype


def _check_output_sizes(outs: list[Any]) -> None:
    """No value may be too large to address (a model asking for 2**62 bytes is broken, not big)."""
    for i, o in enumerate(outs):
        if isinstance(o, Expr) and o.has_type:
            n = type_bytes(o.checked_type)
            if n is not None and n >= onnx_check.MAX_TENSOR_BYTES:
                raise FrontendError(f"output {i} would be {o.checked_type}: absurdly large (2**62 bytes or more)")


def _schema(op_type: str, opset: int, domain: str) -> Any:
    return onnx_check.schema_of(op_type, opset, domain)


def _topological(nodes: list[onnx.NodeProto], env: dict[str, Any]) -> list[tuple[int, onnx.NodeProto]]:
    """Nodes in a valid evaluation order (the given order when it is one); checks every input exists."""
    producer: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if o:
                if o in producer or o in env:
                    raise FrontendError(f"node '{node_label(n, i)}' ({n.op_type}): output '{o}' is already defined")
                producer[o] = i
    deps: list[list[int]] = []
    for i, n in enumerate(nodes):
        d = []
        for inp in n.input:
            if not inp or inp in env:
                continue
            if inp not in producer:
                raise FrontendError(f"node '{n.name or f'{n.op_type}_{i}'}' ({n.op_type}): input '{inp}' is not "
                                    f"defined by any graph input, initializer or node")
            d.append(producer[inp])
        # outer-scope names used by subgraphs: order after their producers (unknown ones are
        # reported by the node's converter)
        d.extend(producer[s] for s in _subgraph_inputs(n) if s in producer)
        deps.append(d)
    order: list[tuple[int, onnx.NodeProto]] = []
    state = [0] * len(nodes)  # 0 new, 1 on stack, 2 done
    for start in range(len(nodes)):
        if state[start]:
            continue
        stack = [(start, 0)]
        while stack:
            i, k = stack.pop()
            if k == 0:
                if state[i] == 2:
                    continue
                state[i] = 1
            if k < len(deps[i]):
                stack.append((i, k + 1))
                j = deps[i][k]
                if state[j] == 1:
                    n = nodes[j]
                    raise FrontendError(f"node '{node_label(n, j)}' ({n.op_type}): the graph has a cycle")
                if state[j] == 0:
                    stack.append((j, 0))
                continue
            state[i] = 2
            order.append((i, nodes[i]))
    return order


def _has_subgraph(node: onnx.NodeProto) -> bool:
    """Does the node carry subgraphs (which may use values that are not its inputs)?"""
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def _subgraph_inputs(node: onnx.NodeProto) -> list[str]:
    """Outer-scope names used inside a node's subgraph attributes (If/Loop/Scan bodies)."""
    names: list[str] = []
    for a in node.attribute:
        for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
            local = {i.name for i in g.input} | {t.name for t in g.initializer}
            for n in g.node:
                local.update(n.output)
            for n in g.node:
                names.extend(i for i in list(n.input) + _subgraph_inputs(n) if i and i not in local)
            names.extend(o.name for o in g.output if o.name not in local)
    return names


def _unsupported_error(items: list[tuple[str, str, int, str]]) -> UnsupportedError:
    lines = []
    for name, op_type, opset, reason in items:
        if op_type in ("input", "initializer", "output"):
            lines.append(f"  {op_type} '{name}': {reason}")
        else:
            lines.append(f"  node '{name}' ({op_type}, opset {opset}): {reason}")
    msg = f"model uses {len(items)} unsupported node(s):\n" + "\n".join(lines)
    return UnsupportedError(msg, items)

