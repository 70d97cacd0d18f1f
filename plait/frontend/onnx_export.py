"""Export a typed Relay function back to ONNX: the inverse of :mod:`plait.frontend.onnx`.

    model = to_onnx(func, name="blob", opset=20)       # an onnx.ModelProto
    ok, reason = exportable(call)                       # can this one call be exported?

The function's body may hold operator calls, tuples, tuple items and constants (no control flow,
no calls of functions). Parameters become graph inputs (a tuple-typed parameter one input per
leaf, named ``<param>_<i>``), constants become initializers, and the leaves of the result become
the graph outputs, in order (a leaf that is a parameter, a constant or an earlier output is
routed through an ``Identity`` so that every output is a distinct node output). Symbolic
dimensions become ``dim_param`` (``"?"``: an unnamed unknown dimension).

Each plait operator maps to one ONNX node or a few (:data:`EXPORTERS`); the attributes plait folded
out of ONNX tensor inputs (Reshape's shape, Slice's starts, Pad's pads, Resize's sizes, the axes of
Squeeze/Unsqueeze/ReduceX, ...) are emitted as ``int64`` initializers again. Node names come from
``Call.meta["name"]`` when present (else the operator name), made unique; intermediate values are
named after their node. A call that cannot be expressed in ONNX at the requested opset raises
:class:`ExportError` naming the call and the reason; :func:`exportable` answers the same question
for one call without raising.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from plait.errors import FrontendError
from plait.ir.op import Op
from plait.ir.types import DTYPES, FLOAT_DTYPES, TensorType, TupleType, Type
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
    """Unique names within one graph (values, initializers and nodes share one namespace)."""

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
            name = self.g.names.fresh(f"{self.base}/{op_type}")
        outs = [self.g.names.fresh(f"{name}_out{i}" if n_out > 1 else f"{name}_out") for i in range(n_out)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = oh.make_node(op_type, list(inputs), outs, name=name, **attrs)
        self.g.nodes.append(node)
        for o in outs:
            self.g.producer[o] = node
        return outs if n_out > 1 else outs[0]

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


# ---- the table ------------------------------------------------------------------------------------

ExportFn = Callable[[ExportContext], Any]
EXPORTERS: dict[str, ExportFn] = {}


def exporter(*ops: str) -> Callable[[ExportFn], ExportFn]:
    def deco(fn: ExportFn) -> ExportFn:
        for op in ops:
            assert op not in EXPORTERS, op
            EXPORTERS[op] = fn
        return fn
    return deco


# elementwise: plait op -> ONNX op type (same inputs, no attributes)
_DIRECT = {
    "add": "Add", "subtract": "Sub", "multiply": "Mul", "divide": "Div", "power": "Pow",
    "maximum": "Max", "minimum": "Min", "equal": "Equal", "less": "Less", "less_equal": "LessOrEqual",
    "greater": "Greater", "greater_equal": "GreaterOrEqual", "logical_and": "And", "logical_or": "Or",
    "logical_xor": "Xor", "where": "Where", "nn.prelu": "PRelu", "nn.matmul": "MatMul",
    "abs": "Abs", "acos": "Acos", "acosh": "Acosh", "asin": "Asin", "asinh": "Asinh", "atan": "Atan",
    "atanh": "Atanh", "ceil": "Ceil", "cos": "Cos", "cosh": "Cosh", "erf": "Erf", "exp": "Exp",
    "floor": "Floor", "log": "Log", "negative": "Neg", "reciprocal": "Reciprocal", "round": "Round",
    "sigmoid": "Sigmoid", "sign": "Sign", "sin": "Sin", "sinh": "Sinh", "sqrt": "Sqrt", "tan": "Tan",
    "tanh": "Tanh", "logical_not": "Not", "isnan": "IsNaN", "nn.relu": "Relu", "nn.softplus": "Softplus",
    "nn.softsign": "Softsign", "nn.hard_swish": "HardSwish", "nn.global_avg_pool2d": "GlobalAveragePool",
    "nn.global_max_pool2d": "GlobalMaxPool", "device_copy": "Identity",
}
_DIRECT_OPSET = {"nn.mish": ("Mish", 18), "bitwise_and": ("BitwiseAnd", 18), "bitwise_or": ("BitwiseOr", 18),
                 "bitwise_xor": ("BitwiseXor", 18), "bitwise_not": ("BitwiseNot", 18)}
# plait attr -> ONNX attr, for ops whose attributes carry over unchanged (bools become ints)
_WITH_ATTRS = {
    "nn.leaky_relu": ("LeakyRelu", {"alpha": "alpha"}),
    "nn.elu": ("Elu", {"alpha": "alpha"}),
    "nn.selu": ("Selu", {"alpha": "alpha", "gamma": "gamma"}),
    "nn.celu": ("Celu", {"alpha": "alpha"}),
    "nn.hard_sigmoid": ("HardSigmoid", {"alpha": "alpha", "beta": "beta"}),
    "nn.thresholded_relu": ("ThresholdedRelu", {"alpha": "alpha"}),
    "isinf": ("IsInf", {"detect_positive": "detect_positive", "detect_negative": "detect_negative"}),
    "argmax": ("ArgMax", {"axis": "axis", "keepdims": "keepdims", "select_last_index": "select_last_index"}),
    "argmin": ("ArgMin", {"axis": "axis", "keepdims": "keepdims", "select_last_index": "select_last_index"}),
    "flatten": ("Flatten", {"axis": "axis"}),
    "concatenate": ("Concat", {"axis": "axis"}),
    "take": ("Gather", {"axis": "axis"}),
    "gather_elements": ("GatherElements", {"axis": "axis"}),
    "gather_nd": ("GatherND", {"batch_dims": "batch_dims"}),
    "nn.lrn": ("LRN", {"size": "size", "alpha": "alpha", "beta": "beta", "bias": "bias"}),
    "nn.instance_norm": ("InstanceNormalization", {"epsilon": "epsilon"}),
    "depth_to_space": ("DepthToSpace", {"block_size": "blocksize", "mode": "mode"}),
}


def _onnx_attr(v: Any) -> Any:
    return int(v) if isinstance(v, bool) else v


def _direct(cx: ExportContext) -> str:
    op = cx.call.op.name  # type: ignore[union-attr]
    if op in _DIRECT_OPSET:
        op_type, v = _DIRECT_OPSET[op]
        cx.need_opset(v, op_type)
    else:
        op_type = _DIRECT[op]
    return cx.node(op_type, cx.ins)


def _with_attrs(cx: ExportContext) -> str:
    op_type, names = _WITH_ATTRS[cx.call.op.name]  # type: ignore[union-attr]
    return cx.node(op_type, cx.ins, **{names[k]: _onnx_attr(cx.attrs[k]) for k in names})


for _op in (*_DIRECT, *_DIRECT_OPSET):
    exporter(_op)(_direct)
for _op in _WITH_ATTRS:
    exporter(_op)(_with_attrs)


@exporter("not_equal")
def _not_equal(cx: ExportContext) -> str:
    return cx.node("Not", [cx.node("Equal", cx.ins)])


@exporter("mod")
def _mod(cx: ExportContext) -> str:
    fmod = bool(cx.attrs["fmod"])
    dtype = cx.arg_type(0).dtype
    if dtype not in FLOAT_DTYPES or fmod:
        return cx.node("Mod", cx.ins, fmod=int(fmod))
    # floats with the divisor's sign (numpy's mod; ONNX Mod takes fmod=1 for floats): r = fmod(a, b),
    # plus b where r is non-zero with the other sign; every result (zero too) has b's sign. The sign
    # is applied by a multiplication: ONNX Runtime's Where turns -0.0 into 0.0.
    a, b = cx.ins
    dt = DTYPES[dtype]
    zero, one, minus_one = (cx.const(v, dt, hint=h) for v, h in ((0.0, "zero"), (1.0, "one"), (-1.0, "minus_one")))
    r = cx.node("Mod", [a, b], fmod=1)
    b_neg = cx.node("Or", [cx.node("Less", [b, zero]), cx.node("Less", [cx.node("Div", [one, b]), zero])])  # -0 too
    differ = cx.node("Xor", [cx.node("Less", [r, zero]), b_neg])
    fix = cx.node("And", [differ, cx.node("Not", [cx.node("Equal", [r, zero])])])
    fixed = cx.node("Where", [fix, cx.node("Add", [r, b]), r])
    return cx.node("Mul", [cx.node("Abs", [fixed]), cx.node("Where", [b_neg, minus_one, one])])


@exporter("left_shift", "right_shift")
def _shift(cx: ExportContext) -> str:
    """BitShift. Signed integers go through the unsigned type of their width (ONNX BitShift is
    unsigned-only; a negative amount becomes one of at least the bit width); a right shift of a
    negative value is ~(~x >> s), arithmetic. Amounts of at least the bit width give 0 in ONNX
    Runtime's BitShift (ONNX leaves them unspecified), which is numpy's answer (-1 for a negative
    value shifted right, through the complement)."""
    dtype = cx.arg_type(0).dtype
    dt = DTYPES[dtype]
    direction = "LEFT" if cx.call.op.name == "left_shift" else "RIGHT"  # type: ignore[union-attr]
    if dt.kind == "u":
        return cx.node("BitShift", cx.ins, direction=direction)
    cx.need_opset(18, f"a shift of {dtype} values (BitwiseNot)")
    x, amount = cx.ins
    udt = f"uint{dt.itemsize * 8}"

    def shift(v: str) -> str:
        u = cx.node("Cast", [v], to=_elem_type(udt))
        return cx.node("Cast", [cx.node("BitShift", [u, s], direction=direction)], to=_elem_type(dtype))

    s = cx.node("Cast", [amount], to=_elem_type(udt))
    if direction == "LEFT":
        return shift(x)
    negative = cx.node("Less", [x, cx.const(0, dt, hint="zero")])
    return cx.node("Where", [negative, cx.node("BitwiseNot", [shift(cx.node("BitwiseNot", [x]))]), shift(x)])


@exporter("rsqrt")
def _rsqrt(cx: ExportContext) -> str:
    return cx.node("Reciprocal", [cx.node("Sqrt", cx.ins)])


@exporter("nn.silu")
def _silu(cx: ExportContext) -> str:
    return cx.node("Mul", [cx.ins[0], cx.node("Sigmoid", cx.ins)])


@exporter("nn.gelu")
def _gelu(cx: ExportContext) -> str:
    cx.need_opset(20, "Gelu")
    return cx.node("Gelu", cx.ins, approximate=cx.attrs["approximate"])


@exporter("clip")
def _clip(cx: ExportContext) -> str:
    dtype = cx.arg_type(0).dtype
    bounds = []
    for k in ("a_min", "a_max"):
        v = cx.attrs[k]
        if v is None:
            bounds.append("")
            continue
        if dtype not in FLOAT_DTYPES:
            if float(v) != int(v):
                raise NotExportable(f"clip of {dtype} values to the non-integer bound {v}")
            info = np.iinfo(DTYPES[dtype])  # a bound beyond the dtype's range clips nothing
            v = min(max(int(v), int(info.min)), int(info.max))
        bounds.append(cx.const(v, DTYPES[dtype], hint=k))
    while bounds and bounds[-1] == "":
        bounds.pop()
    return cx.node("Clip", [cx.ins[0], *bounds])


@exporter("cast")
def _cast(cx: ExportContext) -> str:
    return cx.node("Cast", cx.ins, to=_elem_type(cx.attrs["dtype"]))


# ---- reductions and softmax -----------------------------------------------------------------------

_REDUCE = {
    "sum": ("ReduceSum", 13), "mean": ("ReduceMean", 18), "max": ("ReduceMax", 18), "min": ("ReduceMin", 18),
    "prod": ("ReduceProd", 18), "sum_square": ("ReduceSumSquare", 18), "l1_norm": ("ReduceL1", 18),
    "l2_norm": ("ReduceL2", 18), "log_sum": ("ReduceLogSum", 18), "log_sum_exp": ("ReduceLogSumExp", 18),
}


@exporter(*_REDUCE)
def _reduce(cx: ExportContext) -> str:
    op_type, since = _REDUCE[cx.call.op.name]  # type: ignore[union-attr]
    axes = cx.attrs["axis"]
    keepdims = int(bool(cx.attrs["keepdims"]))
    if axes is not None and len(axes) == 0:  # reduce over no axis: the input itself
        return cx.node("Identity", cx.ins)
    if axes is None:
        return cx.node(op_type, cx.ins, keepdims=keepdims)
    if cx.opset >= since:
        return cx.node(op_type, [cx.ins[0], cx.ints(axes, "axes")], keepdims=keepdims)
    return cx.node(op_type, cx.ins, axes=list(axes), keepdims=keepdims)


@exporter("nn.softmax", "nn.log_softmax")
def _softmax(cx: ExportContext) -> str:
    nd = cx.arg_type(0).ndim
    axis = cx.attrs["axis"]
    if cx.opset < 13 and axis % max(nd, 1) != nd - 1:
        raise NotExportable(f"softmax over axis {axis} of a rank-{nd} tensor needs ONNX opset >= 13")
    return cx.node("Softmax" if cx.call.op.name == "nn.softmax" else "LogSoftmax", cx.ins, axis=axis)  # type: ignore


@exporter("cumsum")
def _cumsum(cx: ExportContext) -> str:
    return cx.node("CumSum", [cx.ins[0], cx.const(cx.attrs["axis"], np.int64, "axis")],
                   exclusive=int(cx.attrs["exclusive"]), reverse=int(cx.attrs["reverse"]))


# ---- neural-network operators ---------------------------------------------------------------------


def _kernel(cx: ExportContext, i: int) -> list[int] | None:
    ks = cx.arg_type(i).shape[2:]
    return [int(k) for k in ks] if all(isinstance(k, int) for k in ks) else None


@exporter("nn.conv2d")
def _conv(cx: ExportContext) -> str:
    a = cx.attrs
    return cx.node("Conv", cx.ins, kernel_shape=_kernel(cx, 1), strides=list(a["strides"]), pads=list(a["padding"]),
                   dilations=list(a["dilation"]), group=a["groups"])


@exporter("nn.conv2d_transpose")
def _conv_transpose(cx: ExportContext) -> str:
    a = cx.attrs
    return cx.node("ConvTranspose", cx.ins, kernel_shape=_kernel(cx, 1), strides=list(a["strides"]),
                   pads=list(a["padding"]), dilations=list(a["dilation"]), group=a["groups"],
                   output_padding=list(a["output_padding"]))


@exporter("nn.dense")
def _dense(cx: ExportContext) -> str:
    data, weight = cx.call.args
    if cx.arg_type(0).ndim == 2:
        return cx.node("Gemm", cx.ins, transB=1)
    if isinstance(weight, Constant):
        wt = cx.const(np.ascontiguousarray(weight.data.T), hint="weight_t")
    else:
        wt = cx.node("Transpose", [cx.ins[1]], perm=[1, 0])
    return cx.node("MatMul", [cx.ins[0], wt])


def _pool_attrs(cx: ExportContext) -> dict[str, Any]:
    a = cx.attrs
    return dict(kernel_shape=list(a["pool_size"]), strides=list(a["strides"]), pads=list(a["padding"]),
                ceil_mode=int(a["ceil_mode"]))


@exporter("nn.max_pool2d")
def _max_pool(cx: ExportContext) -> str:
    return cx.node("MaxPool", cx.ins, dilations=list(cx.attrs["dilation"]), **_pool_attrs(cx))


@exporter("nn.avg_pool2d")
def _avg_pool(cx: ExportContext) -> str:
    dil = list(cx.attrs["dilation"])
    if dil != [1, 1]:
        cx.need_opset(19, "AveragePool with dilations")
    return cx.node("AveragePool", cx.ins, dilations=dil if dil != [1, 1] else None,
                   count_include_pad=int(cx.attrs["count_include_pad"]), **_pool_attrs(cx))


@exporter("nn.batch_norm")
def _batch_norm(cx: ExportContext) -> str:
    nd = cx.arg_type(0).ndim
    if nd < 2 or cx.attrs["axis"] % nd != 1:
        raise NotExportable(f"batch_norm over axis {cx.attrs['axis']} (ONNX BatchNormalization normalizes axis 1)")
    return cx.node("BatchNormalization", cx.ins, epsilon=cx.attrs["epsilon"])


@exporter("nn.layer_norm")
def _layer_norm(cx: ExportContext) -> str:
    cx.need_opset(17, "LayerNormalization")
    return cx.node("LayerNormalization", cx.ins, axis=cx.attrs["axis"], epsilon=cx.attrs["epsilon"])


# ---- shapes and data movement ---------------------------------------------------------------------


@exporter("reshape")
def _reshape(cx: ExportContext) -> str:
    return cx.node("Reshape", [cx.ins[0], cx.ints(cx.attrs["newshape"], "shape")])


@exporter("transpose")
def _transpose(cx: ExportContext) -> str:
    axes = cx.attrs["axes"]
    return cx.node("Transpose", cx.ins, perm=None if axes is None else list(axes))


@exporter("squeeze")
def _squeeze(cx: ExportContext) -> str:
    axes = cx.attrs["axes"]
    if axes is None:
        return cx.node("Squeeze", cx.ins)
    return cx.node("Squeeze", [cx.ins[0], cx.ints(axes, "axes")])


@exporter("expand_dims")
def _unsqueeze(cx: ExportContext) -> str:
    return cx.node("Unsqueeze", [cx.ins[0], cx.ints(cx.attrs["axes"], "axes")])


@exporter("broadcast_to")
def _expand(cx: ExportContext) -> str:
    return cx.node("Expand", [cx.ins[0], cx.ints(cx.attrs["shape"], "shape")])


@exporter("tile")
def _tile(cx: ExportContext) -> str:
    return cx.node("Tile", [cx.ins[0], cx.ints(cx.attrs["reps"], "repeats")])


@exporter("split")
def _split(cx: ExportContext) -> list[str]:
    sections = cx.attrs["sections"]
    outs = cx.node("Split", [cx.ins[0], cx.ints(sections, "split")], n_out=len(sections), axis=cx.attrs["axis"])
    return outs if len(sections) > 1 else [outs]


@exporter("strided_slice")
def _slice(cx: ExportContext) -> str:
    a = cx.attrs
    begin, end, axes, steps = a["begin"], a["end"], a["axes"], a["strides"]
    ins = [cx.ins[0], cx.ints(begin, "starts"), cx.ints(end, "ends")]
    if axes is not None or steps is not None:
        ins.append(cx.ints(axes if axes is not None else range(len(begin)), "axes"))
    if steps is not None:
        ins.append(cx.ints(steps, "steps"))
    return cx.node("Slice", ins)


@exporter("nn.pad")
def _pad(cx: ExportContext) -> str:
    a = cx.attrs
    mode = a["pad_mode"]
    if mode == "wrap":
        cx.need_opset(19, "Pad with mode 'wrap'")
    ins = [cx.ins[0], cx.ints(a["pad_width"], "pads")]
    if mode == "constant" and a["pad_value"] != 0:
        dtype = cx.arg_type(0).dtype
        value = np.asarray(a["pad_value"]).astype(DTYPES[dtype])
        if float(value) != a["pad_value"] and not np.isnan(a["pad_value"]):
            raise NotExportable(f"pad value {a['pad_value']} is not representable in {dtype}")
        ins.append(cx.const(value, hint="constant_value"))
    return cx.node("Pad", ins, mode=mode)


@exporter("image.resize2d")
def _resize(cx: ExportContext) -> str:
    a = cx.attrs
    cx.need_opset(18, "Resize of the two spatial axes (attribute 'axes')")
    ctm = a["coordinate_transformation_mode"]
    roi = ""
    if ctm == "tf_crop_and_resize":
        roi = cx.const(np.asarray(a["roi"] if a["roi"] is not None else (0.0, 0.0, 1.0, 1.0), np.float32), hint="roi")
    if a["scales"] is not None:
        in_hw = cx.arg_type(0).shape[2:]
        if not all(isinstance(d, int) for d in in_hw):
            raise NotExportable("resize with scales needs static input H and W")
        got = [int(np.floor(d * np.float32(s))) for d, s in zip(in_hw, a["scales"])]
        if got != list(a["size"]):
            raise NotExportable(f"scales {list(a['scales'])} give size {got}, not the call's size {list(a['size'])}")
        ins = [cx.ins[0], roi, cx.const(np.asarray(a["scales"], np.float32), hint="scales")]
    else:
        ins = [cx.ins[0], roi, "", cx.ints(a["size"], "sizes")]
    return cx.node("Resize", ins, axes=[2, 3], mode=a["method"], coordinate_transformation_mode=ctm,
                   nearest_mode=a["nearest_mode"], cubic_coeff_a=a["cubic_alpha"],
                   exclude_outside=int(a["exclude_outside"]), extrapolation_value=a["extrapolation_value"])


@exporter("space_to_depth")
def _space_to_depth(cx: ExportContext) -> str:
    if cx.attrs["mode"] != "DCR":
        raise NotExportable(f"space_to_depth mode '{cx.attrs['mode']}' (ONNX SpaceToDepth is DCR only)")
    return cx.node("SpaceToDepth", cx.ins, blocksize=cx.attrs["block_size"])


@exporter("one_hot")
def _one_hot(cx: ExportContext) -> str:
    a = cx.attrs
    values = np.asarray([a["off_value"], a["on_value"]]).astype(DTYPES[a["dtype"]])
    return cx.node("OneHot", [cx.ins[0], cx.const(a["depth"], np.int64, "depth"), cx.const(values, hint="values")],
                   axis=a["axis"])


@exporter("trilu")
def _trilu(cx: ExportContext) -> str:
    return cx.node("Trilu", [cx.ins[0], cx.const(cx.attrs["k"], np.int64, "k")], upper=int(cx.attrs["upper"]))


@exporter("range")
def _range(cx: ExportContext) -> str:
    """No inputs: the value is known, so it becomes an initializer (routed through Identity)."""
    op: Op = cx.call.op  # type: ignore[assignment]
    value = np.asarray(op.ref([], cx.attrs))
    return cx.node("Identity", [cx.const(value, hint="value")])


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


def _convert_call(g: _Graph, call: Call, ins: list[str]) -> Any:
    if not isinstance(call.op, Op):
        raise NotExportable(f"'{call.op_name}' is not an operator call")
    fn = EXPORTERS.get(call.op.name)
    if fn is None:
        raise NotExportable(f"operator '{call.op.name}' has no ONNX export")
    for e in (*call.args, call):
        for t in _leaves(e.checked_type):
            if t.dtype not in DTYPES:  # pragma: no cover - every plait dtype has an ONNX type
                raise NotExportable(f"dtype '{t.dtype}' has no ONNX type")
    hint = call.meta.get("name") if call.meta else None
    base = g.names.fresh(hint or call.op.name)
    return fn(ExportContext(g, call, ins, base))


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
            g.nodes.append(oh.make_node("Identity", [v], [n], name=g.names.fresh(f"output_{i}/Identity")))
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


__all__ = ["DEFAULT_OPSET", "EXPORTERS", "ExportError", "call_function", "exportable", "sanitize", "to_onnx"]
