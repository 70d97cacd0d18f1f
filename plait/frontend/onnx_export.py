"""Export a typed Relay function back to ONNX: the inverse of :mod:`plait.frontend.onnx`.

    model = to_onnx(func, name="blob", opset=20)       # an onnx.ModelProto
    ok, reason = exportable(call)                       # can this one call be exported?

The function's body may hold operator calls, tuples, tuple items and constants (no control flow,
no calls of functions). Parameters become graph inputs (a tuple-typed parameter one input per
leaf, named ``<param>_<i>``), constants become initializers, and the leaves of the result become
the graph outputs, in order (a leaf that is a parameter, a constant or an earlier output is
routed through an ``Identity`` so that every output is a distinct node output). Symbolic
dimensions become ``dim_param`` (``"?"``: an unnamed unknown dimension).

Each plait operator is exported through its declared ONNX mapping (``Op.onnx``, the same data
the importer reads; :func:`export_map`): a 1:1 mapping becomes one node of its ONNX type with the
attributes mapped back, a mapping with an ``export`` function calls it with an
:class:`ExportContext` (one ONNX node or a few). The attributes plait folded out of ONNX tensor
inputs (Reshape's shape, Slice's starts, Pad's pads, Resize's sizes, the axes of
Squeeze/Unsqueeze/ReduceX, ...) are emitted as ``int64`` initializers again. Node names come from
``Call.meta["name"]`` when present (else the operator name), made unique; intermediate values are
named after their node. A call that cannot be expressed in ONNX at the requested opset raises
:class:`ExportError` naming the call and the reason; :func:`exportable` answers the same question
for one call without raising.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from plait.errors import FrontendError
from plait.ir.onnx_map import OnnxMap
from plait.ir.op import Op
from plait.ir.types import DTYPES, TensorType, TupleType, Type
from plait.relay.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var

DEFAULT_OPSET = 20
MIN_OPSET = 13


class ExportError(FrontendError):
    """A Relay function cannot be exported to ONNX (an unsupported operator, attribute or construct)."""


class NotExportable(Exception):
    """Raised by an exporter: this call cannot be expressed in ONNX (the message is the reason)."""


# ---- names ----------------------------------------------------------------------------------------

_BAD = re.compile(r"[^A-Za-z0-9_./:\-]")


def sanitize(name: str) -> str:
    """A name safe for ONNX tools: letters, digits and ``_ . / : -`` only; never empty."""
    out = _BAD.sub("_", str(name))
    return out or "_"


class _Names:
    """Unique names within one graph: one for values and initializers, another for nodes (ONNX keeps them
    apart, so an output may take the name of a node, e.g. of a TFLite model's tensor)."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def fresh(self, hint: str) -> str:
        base = sanitize(hint)
        name, k = base, 1
        while name in self.used:
            name = f"{base}_{k}"
            k += 1
        self.used.add(name)
        return name


# ---- the graph under construction -----------------------------------------------------------------


@dataclass
class _Graph:
    opset: int
    names: _Names = field(default_factory=_Names)
    node_names: _Names = field(default_factory=_Names)
    nodes: list = field(default_factory=list)
    inits: list = field(default_factory=list)
    init_names: set = field(default_factory=set)
    producer: dict = field(default_factory=dict)  # value name -> the NodeProto computing it


class ExportContext:
    """What an exporter sees: the call, its argument and result types, and node/initializer makers.

    ``ins`` are the ONNX value names of the arguments (in order). Exporters return the name of
    the result (or a list of names for a tuple-valued operator such as ``split``).
    """

    def __init__(self, graph: _Graph, call: Call, ins: Sequence[str], base: str):
        self.g = graph
        self.call = call
        self.ins = list(ins)
        self.base = base  # node name of the call
        self.attrs = call.attrs
        self._first = True

    @property
    def opset(self) -> int:
        return self.g.opset

    def need_opset(self, v: int, what: str) -> None:
        if self.g.opset < v:
            raise NotExportable(f"{what} needs ONNX opset >= {v} (exporting opset {self.g.opset})")

    def arg_type(self, i: int) -> TensorType:
        t = self.call.args[i].checked_type
        if not isinstance(t, TensorType):
            raise NotExportable(f"argument {i} is a {t}, not a tensor")
        return t

    @property
    def out_type(self) -> Type:
        return self.call.checked_type

    def out_dtype(self) -> str:
        t = self.out_type
        assert isinstance(t, TensorType)
        return t.dtype

    def node(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs: Any) -> Any:
        """Add a node; returns its output name (or the list of names when ``n_out`` > 1)."""
        import onnx.helper as oh

        if self._first:
            name = self.base
            self._first = False
        else:
            name = self.g.node_names.fresh(f"{self.base}/{op_type}")
        outs = [self.g.names.fresh(f"{name}_out{i}" if n_out > 1 else f"{name}_out") for i in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = oh.make_node(op_type, list(inputs), outs, name=name, **attrs)
        self.g.nodes.append(node)
        for o in outs:
            self.g.producer[o] = node
        return outs if n_out > 1 else outs[0]

    def fail(self, reason: str) -> NotExportable:
        """The exception an export function raises when the call cannot be expressed in ONNX."""
        return NotExportable(reason)

    def elem_type(self, dtype: str) -> int:
        """The ONNX element type (``TensorProto`` code) of a plait dtype."""
        return _elem_type(dtype)

    def const_value(self, i: int) -> np.ndarray | None:
        """The value of argument ``i`` when it is a constant, else None."""
        a = self.call.args[i]
        return a.data if isinstance(a, Constant) else None

    def const(self, value: Any, dtype: str | np.dtype | None = None, hint: str = "const") -> str:
        return _add_init(self.g, np.asarray(value, dtype=dtype), f"{self.base}/{hint}")

    def ints(self, values: Sequence[int], hint: str) -> str:
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1), hint=hint)


def _add_init(g: _Graph, array: np.ndarray, hint: str) -> str:
    from onnx import numpy_helper

    name = g.names.fresh(hint)
    array = np.asarray(array)
    if not array.flags.c_contiguous:  # (np.ascontiguousarray would turn a 0-d array into 1-d)
        array = array.copy(order="C")
    g.inits.append(numpy_helper.from_array(array, name))
    g.init_names.add(name)
    return name


# ---- driving --------------------------------------------------------------------------------------

_BIAS_NODES = {"Conv": 1, "ConvTranspose": 1, "Gemm": 1}  # op type -> the axis a bias runs along


def _fuse_bias(g: _Graph, add: Call, values: dict[int, Any], uses: dict[int, int]) -> str | None:
    """``add(conv(x, w), b)`` with a constant per-channel ``b`` (and ``add(dense(x, w), b)`` on 2-D
    data) become the node's bias input, as exporters write them (and as ONNX Runtime fuses best).
    Returns the value of the fused node, or None when the pattern does not apply."""
    if not (isinstance(add.op, Op) and add.op.name == "add"):
        return None
    for k in (0, 1):
        c, b = add.args[k], add.args[1 - k]
        if not (isinstance(c, Call) and isinstance(b, Constant)) or uses.get(id(c), 0) != 1:
            continue
        name = values.get(id(c))
        node = g.producer.get(name) if isinstance(name, str) else None
        if node is None or node.op_type not in _BIAS_NODES or len(node.input) != 2:
            continue
        ct = c.checked_type
        if not (isinstance(ct, TensorType) and add.checked_type == ct and b.data.dtype == DTYPES[ct.dtype]):
            continue
        n = ct.shape[_BIAS_NODES[node.op_type]]
        ok = ((n,) + (1,) * (ct.ndim - 2), (1, n) + (1,) * (ct.ndim - 2)) if node.op_type != "Gemm" else ((n,), (1, n))
        if not isinstance(n, int) or b.data.shape not in ok:
            continue
        node.input.append(_add_init(g, b.data.reshape(n), f"{node.name}/bias"))
        return name
    return None


def _elem_type(dtype: str) -> int:
    import onnx.helper as oh

    return oh.np_dtype_to_tensor_dtype(DTYPES[dtype])


def _leaves(t: Type) -> list[TensorType]:
    if isinstance(t, TensorType):
        return [t]
    if isinstance(t, TupleType):
        return [x for f in t.fields for x in _leaves(f)]
    raise NotExportable(f"a value of type {t} is not a tensor or a tuple of tensors")


def _value_info(name: str, t: TensorType) -> Any:
    import onnx.helper as oh

    shape = [None if d == "?" else d for d in t.shape]
    return oh.make_tensor_value_info(name, _elem_type(t.dtype), shape)


def _describe(call: Call) -> str:
    name = call.meta.get("name") if call.meta else None
    return f"call '{name}' ({call.op_name})" if name else f"call of '{call.op_name}'"


def _ensure_typed(expr: Expr) -> None:
    if not expr.has_type:
        from plait.relay.infer import infer_expr

        infer_expr(expr)


def export_map(op: Op) -> OnnxMap | None:
    """The mapping ``op`` is exported through: its first declared ONNX mapping that exports."""
    return next((m for m in op.onnx if m.exports), None)


def _onnx_attr(v: Any) -> Any:
    return int(v) if isinstance(v, bool) else v


def _convert_call(g: _Graph, call: Call, ins: list[str]) -> Any:
    if not isinstance(call.op, Op):
        raise NotExportable(f"'{call.op_name}' is not an operator call")
    m = export_map(call.op)
    if m is None:
        raise NotExportable(f"operator '{call.op.name}' has no ONNX export")
    for e in (*call.args, call):
        for t in _leaves(e.checked_type):
            if t.dtype not in DTYPES:  # pragma: no cover - every plait dtype has an ONNX type
                raise NotExportable(f"dtype '{t.dtype}' has no ONNX type")
    hint = call.meta.get("name") if call.meta else None
    base = g.node_names.fresh(hint or call.op.name)
    cx = ExportContext(g, call, ins, base)
    if m.since > 1:
        cx.need_opset(m.since, m.op_type)
    if callable(m.export):
        return m.export(cx)
    return cx.node(m.op_type, cx.ins, **{k: _onnx_attr(cx.attrs[m.plait_attr(k)[0]]) for k in m.attrs})


def call_function(call: Call) -> Function:
    """A function of one call of ``call``'s operator and attributes, each argument a parameter of
    the argument's type (what :func:`exportable` and capability probes export)."""
    _ensure_typed(call)
    params = tuple(Var(f"in{i}", a.checked_type) for i, a in enumerate(call.args))
    return Function(params, Call(call.op, params, call.attrs, call.meta))


def exportable(call: Call, opset: int = DEFAULT_OPSET) -> tuple[bool, str]:
    """(True, "") if ``call`` (a typed operator call) can be exported to ONNX at ``opset`` (the
    exported node(s) type-check in ONNX's own shape inference), else (False, the reason)."""
    if not isinstance(call, Call) or not isinstance(call.op, Op):
        return False, "not an operator call"
    try:
        to_onnx(call_function(call), name="call", opset=opset)
    except NotExportable as exc:
        return False, str(exc)
    except FrontendError as exc:
        return False, str(exc).removeprefix("to_onnx: ")
    return True, ""


def to_onnx(func: Function, name: str = "plait", opset: int = DEFAULT_OPSET,
            output_names: Sequence[str] | None = None, check: bool = True) -> Any:
    """Export ``func`` (a Relay function of operator calls, tuples, tuple items and constants) to an
    ``onnx.ModelProto`` with the default-domain ``opset``. ``output_names`` name the graph outputs
    (one per leaf of the result); by default they are the names of the values. With ``check``, the
    model goes through ONNX's strict type and shape inference (a dtype an ONNX operator does not
    accept, e.g. ``Celu`` on float16, raises :class:`ExportError` naming the node)."""
    import onnx
    import onnx.helper as oh

    if not isinstance(func, Function):
        raise ExportError(f"to_onnx expects a Relay Function, got {type(func).__name__}")
    if not MIN_OPSET <= opset <= onnx.defs.onnx_opset_version():
        raise ExportError(f"to_onnx: opset {opset} not supported (use {MIN_OPSET} to {onnx.defs.onnx_opset_version()})")
    _ensure_typed(func.body)
    g = _Graph(opset)
    values: dict[int, Any] = {}  # id(expr) -> name, or a tuple (nested) of names
    inputs = []
    for p in func.params:
        t = p.checked_type if p.has_type else p.type_annotation
        if t is None:
            raise ExportError(f"to_onnx: parameter '{p.name_hint}' has no type")
        try:
            _leaves(t)
        except NotExportable as exc:
            raise ExportError(f"to_onnx: parameter '{p.name_hint}': {exc}") from None

        def bind(tt: Type, hint: str) -> Any:
            if isinstance(tt, TensorType):
                n = g.names.fresh(hint)
                inputs.append(_value_info(n, tt))
                return n
            return tuple(bind(f, f"{hint}_{i}") for i, f in enumerate(tt.fields))  # type: ignore[union-attr]

        values[id(p)] = bind(t, p.name_hint)
    from plait.relay.visitor import children, post_order

    order = list(post_order(func.body, enter=lambda x: not isinstance(x, Function)))
    uses: dict[int, int] = {id(func.body): 1}
    for e in order:
        if not isinstance(e, Function):
            for c in children(e):
                uses[id(c)] = uses.get(id(c), 0) + 1
    for e in order:
        if id(e) in values:
            continue
        if isinstance(e, Var):
            raise ExportError(f"to_onnx: variable '{e.name_hint}' is not a parameter of the function")
        if isinstance(e, Constant):
            values[id(e)] = _add_init(g, e.data, "const")
        elif isinstance(e, Tuple):
            values[id(e)] = tuple(values[id(f)] for f in e.fields)
        elif isinstance(e, TupleGetItem):
            tv = values[id(e.tuple_value)]
            values[id(e)] = tv[e.index]
        elif isinstance(e, Call):
            ins = []
            for i, a in enumerate(e.args):
                v = values[id(a)]
                if not isinstance(v, str):
                    raise ExportError(f"to_onnx: {_describe(e)}: argument {i} is a tuple")
                ins.append(v)
            fused = _fuse_bias(g, e, values, uses)
            if fused is not None:
                values[id(e)] = fused
                continue
            try:
                out = _convert_call(g, e, ins)
            except NotExportable as exc:
                raise ExportError(f"to_onnx: {_describe(e)}: {exc}") from None
            values[id(e)] = tuple(out) if isinstance(out, list) else out
        else:
            raise ExportError(f"to_onnx: cannot export a {type(e).__name__} expression (only operator calls, "
                              "tuples, tuple items and constants)")
    result = values[id(func.body)]
    leaves_t = _leaves(func.body.checked_type)

    def flat(v: Any) -> list[str]:
        return [v] if isinstance(v, str) else [x for f in v for x in flat(f)]

    out_vals = flat(result)
    if output_names is not None and len(output_names) != len(out_vals):
        raise ExportError(f"to_onnx: {len(output_names)} output names for {len(out_vals)} outputs")
    input_names = {vi.name for vi in inputs}
    outputs, used = [], set()
    for i, (v, t) in enumerate(zip(out_vals, leaves_t)):
        want = None if output_names is None else str(output_names[i])
        if want is not None and want in g.names.used and want != v:
            raise ExportError(f"to_onnx: output name '{want}' is already the name of another value")
        if v in input_names or v in g.init_names or v in used or (want is not None and want != v):
            n = want if want is not None else g.names.fresh(f"output_{i}")
            g.names.used.add(n)
            g.nodes.append(oh.make_node("Identity", [v], [n], name=g.node_names.fresh(f"output_{i}/Identity")))
            v = n
        used.add(v)
        outputs.append(_value_info(v, t))
    needed = {i for n in g.nodes for i in n.input} | {o.name for o in outputs}
    inits = [t for t in g.inits if t.name in needed]  # a constant folded into a bias is dropped
    graph = oh.make_graph(g.nodes, sanitize(name), inputs, outputs, inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], producer_name="plait")
    model.ir_version = min(model.ir_version, oh.find_min_ir_version_for([oh.make_opsetid("", opset)]))
    if check:
        try:
            onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        except onnx.shape_inference.InferenceError as exc:
            msg = " ".join(str(exc).split())
            raise ExportError(f"to_onnx: the exported model does not type-check in ONNX: {msg}") from None
    return model


__all__ = [
    "DEFAULT_OPSET", "ExportContext", "ExportError", "call_function", "export_map", "exportable", "sanitize", "to_onnx",
]
