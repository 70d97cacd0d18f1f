"""ONNX converters: the elementwise ONNX operators that are not 1:1 mappings of one operator (BitShift,
Pow, the variadic Sum/Max/Min/Mean, PRelu, Swish, Clip), casts, constants and identities.

The 1:1 ones (Add, Relu, HardSigmoid, ...) are declared by the operators (``Op.onnx``).
"""

from __future__ import annotations

import numpy as np

from plait.frontend.onnx_fold import sym_result, sym_values
from plait.frontend.onnx_node import NodeContext, SymTensor, Unsupported, onnx_dtype_name, plait_dtype
from plait.errors import FrontendError
from plait.frontend.onnx_registry import Converter, converters, legacy_broadcast
from plait.ir.types import DTYPES, FLOAT_DTYPES

# ---- binary -----------------------------------------------------------------------------------


def bit_shift(cx: NodeContext) -> object:
    direction = cx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise FrontendError(f"direction '{direction}' is neither LEFT nor RIGHT")
    return cx.call("left_shift" if direction == "LEFT" else "right_shift", cx.expr(0), cx.expr(1))


def pow_(cx: NodeContext) -> object:
    x, y = cx.expr(0), legacy_broadcast(cx, cx.expr(1))
    xt, yt = cx.dtype(0), cx.dtype(1)
    if xt == yt or xt in FLOAT_DTYPES:
        return cx.call("power", x, cx.cast(y, xt))
    if yt in FLOAT_DTYPES:  # integer base, float exponent: compute in the exponent's type
        return cx.cast(cx.call("power", cx.cast(x, yt), y), xt)
    return cx.call("power", x, cx.cast(y, xt))


_VARIADIC = {"Sum": "add", "Max": "maximum", "Min": "minimum", "Mean": "add"}


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


def prelu(cx: NodeContext) -> object:
    x, slope = cx.expr(0), cx.expr(1)
    shape = cx.shape(1)
    if cx.version < 7 and len(shape) == 1 and cx.ndim(0) > 2 and shape[0] != 1 and shape[0] == cx.shape(0)[1]:
        slope = cx.reshape(slope, (shape[0],) + (1,) * (cx.ndim(0) - 2))  # legacy: per channel
    return cx.call("nn.prelu", x, slope)


# ---- unary ------------------------------------------------------------------------------------


def swish(cx: NodeContext) -> object:
    alpha = cx.attr("alpha", 1.0)
    x = cx.expr(0)
    if alpha == 1.0:
        return cx.call("nn.silu", x)
    return cx.call("multiply", x, cx.call("sigmoid", cx.call("multiply", x, cx.constant(alpha, cx.dtype(0)))))


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


def cast(cx: NodeContext) -> object:
    return _cast_to(cx, plait_dtype(cx.attr("to")))


def cast_like(cx: NodeContext) -> object:
    return _cast_to(cx, cx.dtype(1))


def identity(cx: NodeContext) -> object:
    return cx.value(0)


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


CONVERTERS: list[Converter] = [
    *converters(["BitShift"], bit_shift, attrs=("direction",), ops=("left_shift", "right_shift")),
    *converters(["Pow"], pow_, attrs=("broadcast", "axis"), ops=("power", "reshape", "cast")),
    *converters(_VARIADIC, variadic, ops=lambda t: (_VARIADIC[t],) + (("divide",) if t == "Mean" else ())),
    *converters(["PRelu"], prelu, ops=("nn.prelu", "reshape")),
    *converters(["Swish"], swish, attrs=("alpha",), ops=("multiply", "nn.silu", "sigmoid")),
    *converters(["Clip"], clip, attrs=("min", "max"), ops=("clip", "maximum", "minimum", "min", "max")),
    *converters(["Cast"], cast, attrs=("to", "saturate", "round_mode"), ops=("cast",)),
    *converters(["CastLike"], cast_like, attrs=("saturate", "round_mode"), ops=("cast",)),
    *converters(["Identity"], identity, ops=()),
    *converters(["Dropout"], dropout, attrs=("ratio", "is_test", "seed"), ops=("broadcast_to",)),
    *converters(["Constant"], constant, attrs=("value", "value_float", "value_floats", "value_int", "value_ints",
                                               "value_string", "value_strings", "sparse_value")),
]
