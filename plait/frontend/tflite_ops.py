"""TFLite converters of the elementwise, quantization and shape operators, and what the network
converters share (padding, fused activations, layouts).

Elementwise operators keep a channels-first value channels-first when every other operand is a
constant (transposed at import) or channels-first too; otherwise they compute in the file's layout.
Quantized ADD, SUB and MUL (int8, uint8, int16) are TensorFlow Lite's integer kernels, built from int32
operators and fixed-point ``qnn.requantize`` (ADD/SUB: each input ``(x - zp) * 2**20`` (int16: ``2**15``)
rescaled by ``scale / (2 * max_scale)``, the sum rescaled by ``2 * max_scale / (2**20 * out_scale)``
(``2**15``); MUL: the product of the offset inputs rescaled by ``s1 * s2 / out_scale``, int16 with zero
points 0); int8 DIV is :mod:`plait.frontend.tflite_ops_qbinary`'s. QUANTIZE rounds half away from
zero (``TfLiteRound``), DEQUANTIZE is ``float(scale * (x - zp))``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plait.frontend import tflite_ops_qbinary, tflite_ops_qelem
from plait.frontend.tflite_context import OpContext, TO_NCHW, Unsupported, Val, registrar
from plait.frontend.tflite_quant import ACTIVATIONS, clamp_attrs, multipliers, per_tensor, requantize, rescale_int
from plait.ir.types import TensorType
from plait.relay.expr import Constant, Expr
from plait.tir.dtype import int_range

CONVERTERS: dict[str, Callable[[OpContext], Any]] = {}


_conv = registrar(CONVERTERS)


# ---- shared -------------------------------------------------------------------------------------


def same_or_valid(cx: OpContext, size: int, k: int, s: int, d: int) -> tuple[int, int]:
    """TFLite's padding (``ComputePaddingHeightWidth``) of one spatial axis: SAME pads
    ``total // 2`` before and the rest after; VALID none."""
    padding = cx.option("Padding", 0)
    eff = (k - 1) * d + 1
    if padding == 1:  # VALID
        if size < eff:
            raise Unsupported(f"a window of {eff} does not fit an input of {size} (VALID padding)")
        return 0, 0
    if padding != 0:
        raise Unsupported(f"unknown padding {padding}")
    out = (size + s - 1) // s
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


def float_activation(cx: OpContext, y: Expr, fused: int) -> Expr:
    name = ACTIVATIONS.get(fused, f"#{fused}")
    if name == "NONE":
        return y
    if name == "RELU":
        return cx.call("nn.relu", y)
    if name == "RELU6":
        return cx.call("clip", y, a_min=0.0, a_max=6.0)
    if name == "RELU_N1_TO_1":
        return cx.call("clip", y, a_min=-1.0, a_max=1.0)
    if name == "TANH":
        return cx.call("tanh", y)
    raise Unsupported(f"fused activation {name} is not supported")


def _rank(e: Expr) -> int:
    t = e.checked_type
    return t.ndim if isinstance(t, TensorType) else -1


def elementwise(cx: OpContext, n: int) -> tuple[list[Expr], bool]:
    """The first ``n`` inputs, all channels-first when the first non-constant one is and the others
    allow it, else all in the file's layout; and whether they are channels-first."""
    vals = [cx.val(i) for i in range(n)]
    variables = [v for v in vals if not isinstance(v.expr, Constant)]
    if variables and variables[0].nchw and all(v.nchw for v in variables):
        out = []
        for v in vals:
            if v.nchw:
                out.append(v.expr)
                continue
            c = v.expr.data
            if c.ndim > 4:
                break
            c = c.reshape((1,) * (4 - c.ndim) + c.shape)
            out.append(Constant(np.ascontiguousarray(np.transpose(c, TO_NCHW))))
        else:
            return out, True
    return [cx.nhwc(v) for v in vals], False


# ---- elementwise ----------------------------------------------------------------------------------


def _float_binary(op: str) -> Callable[[OpContext], Any]:
    def convert(cx: OpContext) -> Any:
        cx.need(2, 2)
        (a, b), nchw = elementwise(cx, 2)
        y = cx.call(op, a, b)
        return Val(float_activation(cx, y, cx.option("FusedActivationFunction", 0)), nchw)
    return convert


_FLOAT_BINARY = {"ADD": "add", "SUB": "subtract", "MUL": "multiply", "DIV": "divide", "MAXIMUM": "maximum",
                 "MINIMUM": "minimum", "SQUARED_DIFFERENCE": "", "POW": "power"}


def _quant_add(cx: OpContext, a: Expr, b: Expr, sign: int) -> Expr:
    """TensorFlow Lite Micro's quantized ADD and SUB (``add_common.cc``, ``sub_common.cc``, multipliers in
    double as its runtime computes them; uint8 as LiteRT's ADD, whose SUB negates the second multiplier
    instead, which may differ at exact ties): int8 and uint8 shift the offset inputs left by 20, int16 by
    15 (the general ``AddGeneralParamScale`` / ``SubElementwise`` path, any zero points, as TensorFlow Lite
    Micro takes them)."""
    x1, x2, y = cx.tensor(0), cx.tensor(1), cx.out()
    if y.dtype not in ("int8", "uint8", "int16"):
        raise Unsupported(f"a {y.type_name} {cx.op.opcode} is not supported yet (int8, uint8 and int16 are)")
    s1, z1 = per_tensor(x1, "input 0")
    s2, z2 = per_tensor(x2, "input 1")
    so, zo = per_tensor(y, "the output")
    twice_max = 2 * max(np.float64(np.float32(s1)), np.float64(np.float32(s2)))
    left = 15 if y.dtype == "int16" else 20
    ra = rescale_int(cx, a, z1, left, float(np.float64(s1) / twice_max))
    rb = rescale_int(cx, b, z2, left, float(np.float64(s2) / twice_max))
    total = cx.call("add" if sign > 0 else "subtract", ra, rb)
    m, s = multipliers(float(twice_max), np.array([1.0]), float((1 << left) * np.float64(so)))
    if int(s[0]) > 0:  # MultiplyByQuantizedMultiplierSmallerThanOneExp cannot shift left
        raise Unsupported(f"a {y.type_name} {cx.op.opcode} whose output scale {so:g} is below 2 * max(input scales) "
                          f"/ 2**{left}: TFLite's rescaling of the sum needs a multiplier below 1")
    return cx.call("qnn.requantize", total, m.reshape(()), s.reshape(()), zero_point=zo, out_dtype=y.dtype,
                   mode="fixed", **clamp_attrs(cx.option("FusedActivationFunction", 0), so, zo, y.dtype))


def _quant_squared_difference(cx: OpContext, a: Expr, b: Expr) -> Expr:
    """TensorFlow Lite Micro's int8 SQUARED_DIFFERENCE: each input ``(x - zp) * 2**7`` rescaled by ``scale /
    (2 * max_scale)``, the difference squared in int32, rescaled by ``(2 * max_scale)**2 / float32(2**14 *
    out_scale)``."""
    x1, x2, y = cx.tensor(0), cx.tensor(1), cx.out()
    (s1, z1), (s2, z2), (so, zo) = (per_tensor(t, w) for t, w in ((x1, "input 0"), (x2, "input 1"), (y, "the output")))
    twice_max = 2 * max(np.float64(np.float32(s1)), np.float64(np.float32(s2)))
    left = 7
    d = cx.call("subtract", rescale_int(cx, a, z1, left, float(np.float64(s1) / twice_max)),
                rescale_int(cx, b, z2, left, float(np.float64(s2) / twice_max)))
    real = twice_max * twice_max / np.float64(np.float32(np.float32(1 << 2 * left) * np.float32(so)))
    m, s = multipliers(float(real), np.array([1.0]), 1.0)
    return requantize(cx, cx.call("multiply", d, d), m, s, zo, y.dtype, 0, so, axis=-1)


def _quant_mul(cx: OpContext, a: Expr, b: Expr) -> Expr:
    x1, x2, y = cx.tensor(0), cx.tensor(1), cx.out()
    s1, z1 = per_tensor(x1, "input 0")
    s2, z2 = per_tensor(x2, "input 1")
    so, zo = per_tensor(y, "the output")

    def offset(e: Expr, z: int) -> Expr:
        v = cx.call("cast", e, dtype="int32")
        return cx.call("subtract", v, np.array(z, np.int32)) if z else v

    m, s = multipliers(s1, np.array([s2]), so)
    if y.dtype == "int16":  # TensorFlow Lite Micro's int16 MUL (mul_common.cc): symmetric, int32 product
        for what, z in (("input 0", z1), ("input 1", z2), ("the output", zo)):
            if z:
                raise Unsupported(f"an int16 MUL needs zero points 0 (TensorFlow Lite Micro's 16x8 MUL is symmetric); "
                                  f"{what} has zero point {z}")
        if int(s[0]) > 0:  # TFLite shifts the int32 product left, wrapping; plait's requantize saturates
            raise Unsupported(f"an int16 MUL whose scale ratio s1 * s2 / so = {s1 * s2 / so:g} is 1 or more is not "
                              "supported (TFLite's int32 product overflows when shifted left)")
    prod = cx.call("multiply", offset(a, z1), offset(b, z2))
    return cx.call("qnn.requantize", prod, m.reshape(()), s.reshape(()), zero_point=zo, out_dtype=y.dtype,
                   mode="fixed", **clamp_attrs(cx.option("FusedActivationFunction", 0), so, zo, y.dtype))


@_conv("ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE")
def _binary(cx: OpContext) -> Any:
    cx.need(2, 2)
    t = cx.tensor(0)
    op = cx.op.opcode
    if t.dtype == "float32":
        (a, b), nchw = elementwise(cx, 2)
        if op == "SQUARED_DIFFERENCE":
            d = cx.call("subtract", a, b)
            return Val(cx.call("multiply", d, d), nchw)
        y = cx.call(_FLOAT_BINARY[op], a, b)
        return Val(float_activation(cx, y, cx.option("FusedActivationFunction", 0)), nchw)
    if op in ("MAXIMUM", "MINIMUM") and t.dtype in ("int8", "uint8", "int16", "int32", "int64") and \
            cx.tensor(1).dtype == t.dtype == cx.out().dtype:  # on the stored values, as TFLite (Micro) does
        (a, b), nchw = elementwise(cx, 2)
        return Val(cx.call(_FLOAT_BINARY[op], a, b), nchw)
    if op == "SQUARED_DIFFERENCE" and t.dtype == "int8" == cx.tensor(1).dtype == cx.out().dtype:
        (a, b), nchw = elementwise(cx, 2)
        return Val(_quant_squared_difference(cx, a, b), nchw)
    if t.dtype in ("int8", "uint8", "int16") and op in ("ADD", "SUB", "MUL") and \
            cx.tensor(1).dtype == cx.out().dtype == t.dtype:
        (a, b), nchw = elementwise(cx, 2)
        if op == "MUL":
            return Val(_quant_mul(cx, a, b), nchw)
        return Val(_quant_add(cx, a, b, 1 if op == "ADD" else -1), nchw)
    if op == "DIV" and t.dtype in ("int8", "uint8", "int16"):
        (a, b), nchw = elementwise(cx, 2)
        return Val(tflite_ops_qbinary.div(cx, a, b), nchw)
    return tflite_ops_qelem.convert(cx)


_FLOAT_UNARY = {"RELU": ("nn.relu", {}), "RELU6": ("clip", {"a_min": 0.0, "a_max": 6.0}),
                "RELU_N1_TO_1": ("clip", {"a_min": -1.0, "a_max": 1.0}),
                "RELU_0_TO_1": ("clip", {"a_min": 0.0, "a_max": 1.0}), "LOGISTIC": ("sigmoid", {}),
                "TANH": ("tanh", {}), "EXP": ("exp", {}), "SQRT": ("sqrt", {}), "RSQRT": ("rsqrt", {}),
                "ABS": ("abs", {}), "NEG": ("negative", {}), "HARD_SWISH": ("nn.hard_swish", {}),
                "ELU": ("nn.elu", {}), "LOG": ("log", {}), "FLOOR": ("floor", {}), "GELU": ("nn.gelu", {}),
                "LEAKY_RELU": ("nn.leaky_relu", {})}


def _unary_attrs(cx: OpContext) -> dict[str, Any]:
    """The attributes an operator's options give its float form (GELU's ``Approximate``, LEAKY_RELU's ``Alpha``)."""
    if cx.op.opcode == "GELU":
        return {"approximate": "tanh" if cx.option("Approximate", False) else "none"}
    if cx.op.opcode == "LEAKY_RELU":
        return {"alpha": float(np.float32(cx.option("Alpha", 0.0)))}
    return {}


@_conv(*_FLOAT_UNARY)
def _unary(cx: OpContext) -> Any:
    cx.need(1, 1)
    if cx.tensor(0).dtype != "float32":
        return tflite_ops_qelem.convert(cx)
    (x,), nchw = elementwise(cx, 1)
    op, attrs = _FLOAT_UNARY[cx.op.opcode]
    return Val(cx.call(op, x, **attrs, **_unary_attrs(cx)), nchw)


@_conv("PRELU")
def _prelu(cx: OpContext) -> Any:
    cx.need(2, 2)
    x, a = cx.tensor(0), cx.tensor(1)
    if x.dtype in ("int8", "uint8", "int16") and a.dtype == x.dtype == cx.out().dtype:
        return _quant_prelu(cx)
    if x.dtype != "float32" or a.dtype != "float32":
        raise Unsupported(f"PRELU of {x.type_name} with a {a.type_name} alpha is not supported")
    (v, alpha), nchw = elementwise(cx, 2)
    return Val(cx.call("nn.prelu", v, alpha), nchw)


def _quant_prelu(cx: OpContext) -> Val:
    """TensorFlow Lite Micro's quantized PRELU: ``x - zi`` rescaled by ``si / so`` where it is >= 0, else
    ``(x - zi) * (alpha - za)`` by ``si * sa / so``; plus ``zo``, clamped (the alpha a constant)."""
    x, a, y = cx.tensor(0), cx.tensor(1), cx.out()
    (si, zi), (sa, za), (so, zo) = (per_tensor(t, w) for t, w in ((x, "the input"), (a, "alpha"), (y, "the output")))
    cx.need_const(1, "alpha")
    (v, alpha), nchw = elementwise(cx, 2)
    d = cx.call("cast", v, dtype="int32")
    if zi:
        d = cx.call("subtract", d, np.array(zi, np.int32))
    slope = Constant(np.ascontiguousarray(alpha.data.astype(np.int32) - np.int32(za)))
    m1, s1 = multipliers(si, np.array([1.0]), so)
    m2, s2 = multipliers(si, np.array([sa]), so)
    positive = cx.call("greater_equal", d, np.array(0, np.int32))
    return Val(cx.call("where", positive, requantize(cx, d, m1, s1, zo, y.dtype, 0, so, axis=-1),
                       requantize(cx, cx.call("multiply", d, slope), m2, s2, zo, y.dtype, 0, so, axis=-1)), nchw)


# ---- quantization -------------------------------------------------------------------------------


@_conv("QUANTIZE")
def _quantize(cx: OpContext) -> Any:
    cx.need(1, 1)
    x, y = cx.tensor(0), cx.out()
    so, zo = per_tensor(y, "the output")
    (v,), nchw = elementwise(cx, 1)
    lo, hi = int_range(y.dtype) if y.dtype in ("int8", "uint8", "int16") else (None, None)
    if lo is None:
        raise Unsupported(f"QUANTIZE to {y.type_name} is not supported")
    if x.dtype == "float32":  # TfLiteRound(x / scale) + zp, clamped
        q = cx.call("divide", v, np.array(so, np.float32))
        q = cx.call("cast", q, dtype="float64")
        r = cx.call("multiply", cx.call("sign", q), cx.call("floor", cx.call("add", cx.call("abs", q),
                                                                              np.array(0.5))))
        r = cx.call("clip", cx.call("add", r, np.array(float(zo))), a_min=float(lo), a_max=float(hi))
        return Val(cx.call("cast", r, dtype=y.dtype), nchw)
    if x.dtype in ("int8", "uint8", "int16"):  # Requantize: (x - zp) rescaled by in / out
        si, zi = per_tensor(x, "the input")
        v32 = cx.call("cast", v, dtype="int32")
        if zi:
            v32 = cx.call("subtract", v32, np.array(zi, np.int32))
        m, s = multipliers(si, np.array([1.0]), so)
        return Val(cx.call("qnn.requantize", v32, m.reshape(()), s.reshape(()), zero_point=zo, out_dtype=y.dtype,
                           mode="fixed"), nchw)
    raise Unsupported(f"QUANTIZE of {x.type_name} is not supported")


@_conv("DEQUANTIZE")
def _dequantize(cx: OpContext) -> Any:
    cx.need(1, 1)
    x, y = cx.tensor(0), cx.out()
    if x.dtype not in ("int8", "uint8", "int16") or y.dtype != "float32":
        raise Unsupported(f"DEQUANTIZE of {x.type_name} to {y.type_name} is not supported")
    s, z = per_tensor(x, "the input")
    (v,), nchw = elementwise(cx, 1)
    return Val(cx.call("qnn.dequantize", v, np.array(s, np.float32), np.array(z, x.dtype)), nchw)


# ---- shapes -------------------------------------------------------------------------------------


@_conv("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def _reshape(cx: OpContext) -> Any:
    cx.need(1, 2)
    x, y = cx.tensor(0), cx.out()
    n_in = int(np.prod(x.shape, dtype=np.int64))
    n_out = int(np.prod(y.shape, dtype=np.int64))
    if n_in != n_out:
        raise Unsupported(f"cannot reshape {list(x.shape)} to the output's {list(y.shape)}")
    return cx.call("reshape", cx.nhwc(0), newshape=tuple(y.shape))
