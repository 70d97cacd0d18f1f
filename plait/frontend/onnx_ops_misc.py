"""ONNX converters: Einsum (onto transpose/reshape/matmul), quantization, LpNormalization, If."""

from __future__ import annotations

import math
import re
import string

import numpy as np

from plait.frontend.onnx_node import NodeContext, Unsupported, plait_dtype, value_type
from plait.errors import FrontendError
from plait.frontend.onnx_registry import Converter, converters
from plait.ir.types import DTYPES, TupleType
from plait.relay.expr import Expr, If, Tuple

# ---- Einsum -----------------------------------------------------------------------------------


def _parse_einsum(eq: str, ranks: list[int]) -> tuple[list[str], str]:
    """Operand subscripts and output subscripts, ellipses replaced by upper-case letters."""
    lhs, arrow, rhs = eq.replace(" ", "").partition("->")
    if not re.fullmatch(r"[A-Za-z.,]*", lhs + rhs):
        raise FrontendError(f"equation '{eq}': subscripts must be letters (and '...')")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Unsupported(f"equation '{eq}' has {len(terms)} operands, the node {len(ranks)}")
    n_ell = max((r - (len(t) - 3) for t, r in zip(terms, ranks) if "..." in t), default=0)
    ell = string.ascii_uppercase[:n_ell]
    out_terms = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            k = r - (len(t) - 3)
            t = t.replace("...", ell[n_ell - k:])
        if len(t) != r:
            raise Unsupported(f"equation '{eq}': operand '{t}' does not match rank {r}")
        if len(set(t)) != len(t):
            raise Unsupported(f"equation '{eq}': repeated subscripts (diagonals) not supported")
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        letters = "".join(out_terms)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    return out_terms, out


def _sum_out(cx: NodeContext, x: Expr, sub: str, keep: set[str]) -> tuple[Expr, str]:
    drop = [i for i, c in enumerate(sub) if c not in keep]
    if not drop:
        return x, sub
    y = cx.call("sum", x, axis=tuple(drop), keepdims=False)
    return y, "".join(c for c in sub if c in keep)


def _permute(cx: NodeContext, x: Expr, sub: str, order: str) -> Expr:
    if sub == order:
        return x
    return cx.call("transpose", x, axes=tuple(sub.index(c) for c in order))


def _contract(cx: NodeContext, a: Expr, sa: str, b: Expr, sb: str, keep: set[str]) -> tuple[Expr, str]:
    """a (subscripts sa) times b (sb), summing the shared letters not in ``keep``."""
    a, sa = _sum_out(cx, a, sa, keep | set(sb))
    b, sb = _sum_out(cx, b, sb, keep | set(sa))
    batch = "".join(c for c in sa if c in sb and c in keep)
    contract = "".join(c for c in sa if c in sb and c not in keep)
    a_only = "".join(c for c in sa if c not in sb)
    b_only = "".join(c for c in sb if c not in sa)
    dims = {}
    for x, s in ((a, sa), (b, sb)):
        for c, d in zip(s, value_type(x).shape):
            if not isinstance(d, int):
                raise Unsupported("needs static shapes")
            if dims.setdefault(c, d) != d:
                raise Unsupported(f"subscript '{c}' has sizes {dims[c]} and {d} (broadcasting not supported)")
    size = lambda s: math.prod(dims[c] for c in s)  # noqa: E731
    a3 = cx.reshape(_permute(cx, a, sa, batch + a_only + contract), (size(batch), size(a_only), size(contract)))
    b3 = cx.reshape(_permute(cx, b, sb, batch + contract + b_only), (size(batch), size(contract), size(b_only)))
    y = cx.call("nn.matmul", a3, b3)
    out = batch + a_only + b_only
    return cx.reshape(y, tuple(dims[c] for c in out)), out


def einsum(cx: NodeContext) -> object:
    eq = cx.attr("equation")
    n = len(cx.inputs)
    terms, out = _parse_einsum(eq, [cx.ndim(i) for i in range(n)])
    x, sx = cx.expr(0), terms[0]
    for i in range(1, n):
        later = set(out).union(*terms[i + 1:])
        x, sx = _contract(cx, x, sx, cx.expr(i), terms[i], later)
    x, sx = _sum_out(cx, x, sx, set(out))
    return _permute(cx, x, sx, out)


# ---- quantization -----------------------------------------------------------------------------


def _per_axis(cx: NodeContext, v: Expr, ndim: int, axis: int) -> Expr:
    """A 1-D per-axis scale/zero point reshaped to broadcast along ``axis`` of a rank-``ndim`` tensor."""
    shape = value_type(v).shape
    if len(shape) != 1 or ndim <= 1:
        return v
    axis = cx.axis(axis, ndim)
    return cx.reshape(v, (-1,) + (1,) * (ndim - 1 - axis))


def _check_block(cx: NodeContext) -> None:
    if cx.attr("block_size", 0):
        raise Unsupported("blocked quantization (block_size) not supported")


def dequantize(cx: NodeContext, x: Expr, scale: Expr, zp: Expr | None, axis: int, out_dtype: str) -> Expr:
    nd = value_type(x).ndim
    xf = cx.cast(x, "float32")
    if zp is not None:
        xf = cx.call("subtract", xf, _per_axis(cx, cx.cast(zp, "float32"), nd, axis))
    y = cx.call("multiply", xf, _per_axis(cx, cx.cast(scale, "float32"), nd, axis))
    return cx.cast(y, out_dtype)


def quantize(cx: NodeContext, x: Expr, scale: Expr, zp: Expr | None, axis: int, out_dtype: str) -> Expr:
    nd = value_type(x).ndim
    q = cx.call("round", cx.call("divide", cx.cast(x, "float32"), _per_axis(cx, cx.cast(scale, "float32"), nd, axis)))
    if zp is not None:
        q = cx.call("add", q, _per_axis(cx, cx.cast(zp, "float32"), nd, axis))
    info = np.iinfo(DTYPES[out_dtype])
    return cx.cast(cx.call("clip", q, a_min=float(info.min), a_max=float(info.max)), out_dtype)


def dequantize_linear(cx: NodeContext) -> object:
    _check_block(cx)
    out = plait_dtype(cx.attr("output_dtype")) if cx.attr("output_dtype", 0) else cx.dtype(1)
    zp = cx.expr(2) if cx.has(2) else None
    return dequantize(cx, cx.expr(0), cx.expr(1), zp, cx.attr("axis", 1), out)


def quantize_linear(cx: NodeContext) -> object:
    _check_block(cx)
    if cx.has(2):
        out = cx.dtype(2)
    else:
        out = plait_dtype(cx.attr("output_dtype")) if cx.attr("output_dtype", 0) else "uint8"
    if out not in ("int8", "uint8", "int16", "uint16", "int32", "uint32"):
        raise Unsupported(f"quantizing to {out} not supported")
    zp = cx.expr(2) if cx.has(2) else None
    return quantize(cx, cx.expr(0), cx.expr(1), zp, cx.attr("axis", 1), out)


def qlinear_matmul(cx: NodeContext) -> object:
    a = dequantize(cx, cx.expr(0), cx.expr(1), cx.expr(2), 0, "float32")
    b = dequantize(cx, cx.expr(3), cx.expr(4), cx.expr(5), -1, "float32")
    y = cx.call("nn.matmul", a, b)
    return quantize(cx, y, cx.expr(6), cx.expr(7), 1, cx.dtype(7))


def matmul_integer(cx: NodeContext) -> object:
    a, b = cx.cast(cx.expr(0), "int32"), cx.cast(cx.expr(1), "int32")
    if cx.has(2):
        a = cx.call("subtract", a, _per_axis(cx, cx.cast(cx.expr(2), "int32"), cx.ndim(0), -2))
    if cx.has(3):
        b = cx.call("subtract", b, cx.cast(cx.expr(3), "int32"))
    return cx.call("nn.matmul", a, b)


def _conv_like(cx: NodeContext, x: Expr, w: Expr, bias: Expr | None) -> Expr:
    """Run the Conv converter on other operands (same attributes)."""
    from plait.frontend.onnx_ops_nn import conv

    inner = NodeContext(cx.node, [x, w, bias], cx.attrs, cx.version, cx.opset, cx.meta, cx._constant,
                        budget=cx.budget)
    return conv(inner)


def conv_integer(cx: NodeContext) -> object:
    # exact in float64: products of 8-bit values summed far below 2**53
    x, w = cx.cast(cx.expr(0), "float64"), cx.cast(cx.expr(1), "float64")
    if cx.has(2):
        x = cx.call("subtract", x, cx.cast(cx.expr(2), "float64"))
    if cx.has(3):
        w = cx.call("subtract", w, _per_axis(cx, cx.cast(cx.expr(3), "float64"), cx.ndim(1), 0))
    return cx.cast(_conv_like(cx, x, w, None), "int32")


def qlinear_conv(cx: NodeContext) -> object:
    x = dequantize(cx, cx.expr(0), cx.expr(1), cx.expr(2), 1, "float32")
    w = dequantize(cx, cx.expr(3), cx.expr(4), cx.expr(5), 0, "float32")
    bias = None
    if cx.has(8):
        bias = cx.call("multiply", cx.cast(cx.expr(8), "float32"),
                       cx.call("multiply", cx.cast(cx.expr(1), "float32"), cx.cast(cx.expr(4), "float32")))
    y = _conv_like(cx, x, w, bias)
    return quantize(cx, y, cx.expr(6), cx.expr(7), 1, cx.dtype(7))


# ---- LpNormalization --------------------------------------------------------------------------


def lp_normalization(cx: NodeContext) -> object:
    p = cx.attr("p", 2)
    if p not in (1, 2):
        raise FrontendError(f"p is {p}, it must be 1 or 2")
    x = cx.expr(0)
    axis = cx.axis(cx.attr("axis", -1), cx.ndim(0))
    norm = cx.call("l1_norm" if p == 1 else "l2_norm", x, axis=(axis,), keepdims=True)
    zero = cx.constant(0, cx.dtype(0))
    # a zero norm means a zero vector: 0 / 1 keeps it zero instead of NaN
    safe = cx.call("where", cx.call("equal", norm, zero), cx.constant(1, cx.dtype(0)), norm)
    return cx.call("divide", x, safe)


# ---- If ---------------------------------------------------------------------------------------


def if_(cx: NodeContext) -> object:
    if cx.is_const(0):
        taken = cx.attr("then_branch") if bool(cx.const(0, "cond").reshape(-1)[0]) else cx.attr("else_branch")
        return cx.subgraph(taken)
    then_vals = [cx.as_expr(v) for v in cx.subgraph(cx.attr("then_branch"))]
    else_vals = [cx.as_expr(v) for v in cx.subgraph(cx.attr("else_branch"))]
    types_t = [value_type(v) for v in then_vals]
    types_e = [value_type(v) for v in else_vals]
    if types_t != types_e:
        raise Unsupported(f"branches produce different types: ({', '.join(map(str, types_t))}) and "
                          f"({', '.join(map(str, types_e))})")
    cond = cx.expr(0)
    ct = value_type(cond)
    if ct.dtype != "bool" or not ct.is_static or ct.size != 1:
        raise Unsupported(f"condition must be a single bool, got {ct}")
    if len(then_vals) == 1:
        e = If(cond, then_vals[0], else_vals[0])
        e._set_type(types_t[0])
        return e
    tt, te = Tuple(tuple(then_vals)), Tuple(tuple(else_vals))
    for t in (tt, te):
        t._set_type(TupleType(tuple(types_t)))
    e = If(cond, tt, te)
    e._set_type(TupleType(tuple(types_t)))
    return [cx.get(e, i) for i in range(len(then_vals))]


CONVERTERS: list[Converter] = [
    *converters(["Einsum"], einsum, attrs=("equation",), ops=("sum", "transpose", "nn.matmul", "reshape")),
    *converters(["DequantizeLinear"], dequantize_linear, attrs=("axis", "block_size", "output_dtype"),
                ops=("multiply", "subtract", "cast", "reshape")),
    *converters(["QuantizeLinear"], quantize_linear,
                attrs=("axis", "block_size", "output_dtype", "saturate", "precision"),
                ops=("round", "divide", "add", "clip", "cast", "reshape")),
    *converters(["QLinearMatMul"], qlinear_matmul,
                ops=("nn.matmul", "multiply", "subtract", "cast", "reshape", "round", "divide", "add", "clip")),
    *converters(["MatMulInteger"], matmul_integer, ops=("nn.matmul", "subtract", "cast", "reshape")),
    *converters(["ConvInteger"], conv_integer,
                attrs=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"),
                ops=("subtract", "cast", "reshape")),
    *converters(["QLinearConv"], qlinear_conv,
                attrs=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"),
                ops=("multiply", "subtract", "cast", "reshape", "round", "divide", "add", "clip")),
    *converters(["LpNormalization"], lp_normalization, attrs=("axis", "p"),
                ops=("where", "divide", "l1_norm", "l2_norm", "equal")),
    *converters(["If"], if_, attrs=("then_branch", "else_branch"), ops=()),
]
