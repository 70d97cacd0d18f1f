"""ONNX converters: elementwise math, activations, logic, casts, constants and identities."""

from __future__ import annotations

import numpy as np

from plait.frontend.onnx_fold import SYM_BINARY, has_sym, sym_binary, sym_equal, sym_result, sym_values, sym_where
from plait.frontend.onnx_node import NodeContext, SymTensor, Unsupported, onnx_dtype_name, plait_dtype
from plait.errors import FrontendError
from plait.frontend.onnx_registry import converter
from plait.ir.types import DTYPES, FLOAT_DTYPES
from plait.relay.expr import Expr

# ---- binary -----------------------------------------------------------------------------------

_BINARY = {
    "Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide",
    "Equal": "equal", "Less": "less", "LessOrEqual": "less_equal", "Greater": "greater",
    "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor",
    "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor",
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


@converter(*_BINARY, attrs=("broadcast", "axis"))
def binary(cx: NodeContext) -> object:
    if cx.op_type in SYM_BINARY and has_sym(cx):
        return sym_binary(cx)
    if cx.op_type == "Equal" and has_sym(cx):
        return sym_equal(cx)
    return cx.call(_BINARY[cx.op_type], cx.expr(0), legacy_broadcast(cx, cx.expr(1)))


@converter("Mod", attrs=("fmod",))
def mod(cx: NodeContext) -> object:
    return cx.call("mod", cx.expr(0), cx.expr(1), fmod=bool(cx.attr("fmod", 0)))


@converter("BitShift", attrs=("direction",))
def bit_shift(cx: NodeContext) -> object:
    direction = cx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise FrontendError(f"direction '{direction}' is neither LEFT nor RIGHT")
    return cx.call("left_shift" if direction == "LEFT" else "right_shift", cx.expr(0), cx.expr(1))


@converter("Pow", attrs=("broadcast", "axis"))
def pow_(cx: NodeContext) -> object:
    x, y = cx.expr(0), legacy_broadcast(cx, cx.expr(1))
    xt, yt = cx.dtype(0), cx.dtype(1)
    if xt == yt or xt in FLOAT_DTYPES:
        return cx.call("power", x, cx.cast(y, xt))
    if yt in FLOAT_DTYPES:  # integer base, float exponent: compute in the exponent's type
        return cx.cast(cx.call("power", cx.cast(x, yt), y), xt)
    return cx.call("power", x, cx.cast(y, xt))


_VARIADIC = {"Sum": "add", "Max": "maximum", "Min": "minimum", "Mean": "add"}


@converter(*_VARIADIC)
def variadic(cx: NodeContext) -> object:
    args = [cx.expr(i) for i in range(len(cx.inputs)) if cx.has(i)]
    if not args:
        raise Unsupported("needs at least one input")
    acc = args[0]
    for a in args[1:]:
        acc = cx.call(_VARIADIC[cx.op_type], acc, a)
    if cx.op_type == "Mean" and len(args) > 1:
        acc = cx.call("divide", acc, cx.constant(len(args), cx.dtype(0)))
    return acc


@converter("Where")
def where(cx: NodeContext) -> object:
    if has_sym(cx):
        return sym_where(cx)
    return cx.call("where", cx.expr(0), cx.expr(1), cx.expr(2))


@converter("PRelu")
def prelu(cx: NodeContext) -> object:
    x, slope = cx.expr(0), cx.expr(1)
    shape = cx.shape(1)
    if cx.version < 7 and len(shape) == 1 and cx.ndim(0) > 2 and shape[0] != 1 and shape[0] == cx.shape(0)[1]:
        slope = cx.reshape(slope, (shape[0],) + (1,) * (cx.ndim(0) - 2))  # legacy: per channel
    return cx.call("nn.prelu", x, slope)


# ---- unary ------------------------------------------------------------------------------------

_UNARY = {
    "Abs": "abs", "Neg": "negative", "Reciprocal": "reciprocal", "Sqrt": "sqrt", "Exp": "exp", "Log": "log",
    "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
    "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh",
    "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sign": "sign", "Erf": "erf", "IsNaN": "isnan",
    "Not": "logical_not", "BitwiseNot": "bitwise_not", "Relu": "nn.relu", "Sigmoid": "sigmoid",
    "Tanh": "tanh", "Softplus": "nn.softplus", "Softsign": "nn.softsign", "Mish": "nn.mish",
    "HardSwish": "nn.hard_swish",
}


@converter(*_UNARY)
def unary(cx: NodeContext) -> object:
    return cx.call(_UNARY[cx.op_type], cx.expr(0))


# op_type -> (plait op, {onnx attr: plait attr})
_UNARY_ATTRS = {
    "LeakyRelu": ("nn.leaky_relu", {"alpha": "alpha"}),
    "Elu": ("nn.elu", {"alpha": "alpha"}),
    "Selu": ("nn.selu", {"alpha": "alpha", "gamma": "gamma"}),
    "Celu": ("nn.celu", {"alpha": "alpha"}),
    "HardSigmoid": ("nn.hard_sigmoid", {"alpha": "alpha", "beta": "beta"}),
    "ThresholdedRelu": ("nn.thresholded_relu", {"alpha": "alpha"}),
    "IsInf": ("isinf", {"detect_positive": "detect_positive", "detect_negative": "detect_negative"}),
    "Gelu": ("nn.gelu", {"approximate": "approximate"}),
}


def _unary_attrs(cx: NodeContext) -> object:
    op, names = _UNARY_ATTRS[cx.op_type]
    attrs = {names[k]: v for k, v in cx.attrs.items()}
    if attrs.get("approximate", "none") not in ("none", "tanh"):
        raise FrontendError(f"approximate '{attrs['approximate']}' is neither 'none' nor 'tanh'")
    if "detect_positive" in attrs or "detect_negative" in attrs:
        attrs = {k: bool(v) for k, v in attrs.items()}
    return cx.call(op, cx.expr(0), **attrs)


for _op_type, (_, _names) in _UNARY_ATTRS.items():
    converter(_op_type, attrs=_names)(_unary_attrs)


@converter("Swish", attrs=("alpha",))
def swish(cx: NodeContext) -> object:
    alpha = cx.attr("alpha", 1.0)
    x = cx.expr(0)
    if alpha == 1.0:
        return cx.call("nn.silu", x)
    return cx.call("multiply", x, cx.call("sigmoid", cx.call("multiply", x, cx.constant(alpha, cx.dtype(0)))))


@converter("Clip", attrs=("min", "max"))
def clip(cx: NodeContext) -> object:
    x = cx.expr(0)
    dtype = cx.dtype(0)
    if cx.version < 11:
        lo, hi = cx.attr("min", None), cx.attr("max", None)
        return cx.call("clip", x, a_min=lo, a_max=hi)
    bounds = [cx.value(i) if cx.has(i) else None for i in (1, 2)]
    if dtype in FLOAT_DTYPES and all(b is None or isinstance(b, np.ndarray) for b in bounds):
        lo, hi = (None if b is None else float(np.asarray(b).reshape(-1)[0]) for b in bounds)
        return cx.call("clip", x, a_min=lo, a_max=hi)
    if bounds[0] is not None:
        x = cx.call("maximum", x, cx.expr(1))
    if bounds[1] is not None:
        x = cx.call("minimum", x, cx.expr(2))
    return x


# ---- casts, constants, identities ---------------------------------------------------------------


def _cast_to(cx: NodeContext, dtype: str) -> object:
    v = cx.value(0)
    if isinstance(v, SymTensor) and not v.is_static:
        if DTYPES[dtype].kind not in "iu":
            raise Unsupported(f"cast of a symbolic shape to {dtype}")
        return sym_result(sym_values(cx, 0), dtype)
    return cx.cast(cx.expr(0), dtype)


@converter("Cast", attrs=("to", "saturate", "round_mode"))
def cast(cx: NodeContext) -> object:
    return _cast_to(cx, plait_dtype(cx.attr("to")))


@converter("CastLike", attrs=("saturate", "round_mode"))
def cast_like(cx: NodeContext) -> object:
    return _cast_to(cx, cx.dtype(1))


@converter("Identity")
def identity(cx: NodeContext) -> object:
    return cx.value(0)


@converter("Dropout", attrs=("ratio", "is_test", "seed"))
def dropout(cx: NodeContext) -> object:
    if cx.version < 7 and not cx.attr("is_test", 0):
        raise Unsupported("training mode (is_test=0) not supported")
    for i, what in ((1, "ratio"), (2, "training_mode")):
        if cx.has(i) and cx.ndim(i) != 0:
            raise FrontendError(f"{what} must be a scalar, got rank {cx.ndim(i)}")
    if cx.has(2):
        mode = cx.const(2, "training_mode")
        if bool(np.asarray(mode).reshape(-1)[0]):
            raise Unsupported("training mode not supported")
    x = cx.value(0)
    mask = None
    if cx.output_used(1):
        mask = cx.full(cx.static_shape(0, "input with a mask output"), True, "bool")
    return [x, mask]


@converter("Constant", attrs=("value", "value_float", "value_floats", "value_int", "value_ints",
                              "value_string", "value_strings", "sparse_value"))
def constant(cx: NodeContext) -> object:
    if len(cx.attrs) != 1:
        raise FrontendError(f"needs exactly one value attribute, got {len(cx.attrs)}")
    (name, v), = cx.attrs.items()
    if name == "value":
        return cx.attr_array("value")
    if name == "value_float":
        return np.asarray(v, dtype=np.float32)
    if name == "value_floats":
        return np.asarray(v, dtype=np.float32).reshape(-1)
    if name == "value_int":
        return np.asarray(v, dtype=np.int64)
    if name == "value_ints":
        return np.asarray(v, dtype=np.int64).reshape(-1)
    if name == "sparse_value":
        raise Unsupported("sparse constants not supported")
    raise Unsupported(f"dtype '{onnx_dtype_name(8)}' not supported")
