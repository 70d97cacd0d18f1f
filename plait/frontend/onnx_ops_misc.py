"""ONNX converters: Einsum (onto transpose/reshape/matmul), LpNormalization, If (the quantization
converters are in :mod:`plait.frontend.onnx_ops_quant`)."""

from __future__ import annotations

import math
import re
import string

from plait.frontend.onnx_node import NodeContext, Unsupported, value_type
from plait.errors import FrontendError
from plait.frontend.onnx_registry import Converter, converters
from plait.ir.types import TupleType
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
    *converters(["LpNormalization"], lp_normalization, attrs=("axis", "p"),
                ops=("where", "divide", "l1_norm", "l2_norm", "equal")),
    *converters(["If"], if_, attrs=("then_branch", "else_branch"), ops=()),
]
