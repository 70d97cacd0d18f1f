"""ONNX converters: matrix products, convolutions, pooling, normalizations, softmax, reductions.

1-D convolutions and pools run as their 2-D versions on a unit height (axis 2).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from plait.frontend.onnx_node import NodeContext, Unsupported, short
from plait.errors import FrontendError
from plait.frontend.onnx_registry import Converter, converters
from plait.relay.expr import Expr


# ---- matrix products --------------------------------------------------------------------------


def matmul(cx: NodeContext) -> object:
    return cx.call("nn.matmul", cx.expr(0), cx.expr(1))


def gemm(cx: NodeContext) -> object:
    if cx.ndim(0) != 2 or cx.ndim(1) != 2:
        raise FrontendError(f"A and B must be matrices, got ranks {cx.ndim(0)} and {cx.ndim(1)}")
    dtype = cx.dtype(0)
    a = cx.expr(0)
    if cx.attr("transA", 0):
        a = cx.call("transpose", a, axes=(1, 0))
    b = cx.expr(1)
    if cx.attr("transB", 0):
        y = cx.call("nn.dense", a, b)
    elif cx.is_const(1):
        y = cx.call("nn.dense", a, cx.call("transpose", b, axes=(1, 0)))  # folds
    else:
        y = cx.call("nn.matmul", a, b)
    alpha, beta = cx.attr("alpha", 1.0), cx.attr("beta", 1.0)
    if alpha != 1.0:
        y = cx.call("multiply", y, cx.constant(alpha, dtype))
    if cx.has(2) and beta != 0.0:
        c = cx.expr(2)
        if beta != 1.0:
            c = cx.call("multiply", c, cx.constant(beta, dtype))
        y = cx.call("add", y, c)
    return y


# ---- convolution and pooling ------------------------------------------------------------------


def _ints_attr(cx: NodeContext, name: str, n: int, default: int, minimum: int | None = None) -> tuple[int, ...]:
    """An ints attribute of ``n`` values (``default`` each when absent), each >= ``minimum``."""
    v = cx.attr(name, None)
    if v is None:
        return (default,) * n
    if len(v) != n:
        raise FrontendError(f"attribute '{name}' has {len(v)} values, expected {n}")
    out = tuple(int(x) for x in v)
    if minimum is not None and any(x < minimum for x in out):
        raise FrontendError(f"attribute '{name}' {short(out)} must have values >= {minimum}")
    return out


def _pads(cx: NodeContext, in_spatial: tuple, kernel: tuple[int, ...], strides: tuple[int, ...],
          dilations: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(begins, ends) of the spatial padding, from ``pads`` or ``auto_pad``."""
    n = len(kernel)
    auto = cx.attr("auto_pad", "NOTSET")
    if auto != "NOTSET" and "pads" in cx.attrs:
        raise FrontendError(f"both auto_pad '{auto}' and pads are given")
    if auto == "NOTSET":
        pads = _ints_attr(cx, "pads", 2 * n, 0, minimum=0)
        return pads[:n], pads[n:]
    if auto == "VALID":
        return (0,) * n, (0,) * n
    _check_auto_pad(auto)
    begins, ends = [], []
    for a, (size, k, s, d) in enumerate(zip(in_spatial, kernel, strides, dilations)):
        if not isinstance(size, int) and s != 1:
            raise Unsupported(f"auto_pad '{auto}' with stride {s} on the symbolic spatial axis {a + 2} ('{size}'): "
                              f"its padding depends on the size modulo the stride; give static spatial dims or "
                              "explicit pads")
        # stride 1: the output keeps the size, the padding is the dilated kernel less 1 whatever the size
        total = (k - 1) * d if not isinstance(size, int) else max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if auto == "SAME_UPPER" else big)
        ends.append(big if auto == "SAME_UPPER" else small)
    return tuple(begins), tuple(ends)


def _check_auto_pad(auto: str) -> None:
    if auto not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
        raise FrontendError(f"auto_pad '{auto}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")


def _spatial_rank(cx: NodeContext, what: str) -> int:
    nsp = cx.ndim(0) - 2
    if nsp < 1:
        raise FrontendError(f"the input has rank {cx.ndim(0)}, expected at least 3 (N, C, spatial axes)")
    if nsp not in (1, 2):
        raise Unsupported(f"{nsp}-D {what} not supported")
    return nsp


def _conv_kernel(cx: NodeContext, nsp: int, transposed: bool) -> tuple[int, ...]:
    """The kernel's spatial shape, after checking the weight against the input, ``group``,
    ``kernel_shape`` and the bias (what makes a Conv or ConvTranspose invalid ONNX)."""
    w = cx.static_shape(1, "weight")
    if len(w) != nsp + 2:
        raise FrontendError(f"the weight has rank {len(w)}, expected {nsp + 2} (as the input)")
    kernel = tuple(w[2:])
    if "kernel_shape" in cx.attrs:
        given = _ints_attr(cx, "kernel_shape", nsp, 0)
        if given != kernel:
            raise FrontendError(f"kernel_shape {short(given)} does not match the weight's spatial shape {short(kernel)}")
    if min(kernel) < 1:
        raise FrontendError(f"the weight's spatial shape {short(kernel)} is empty")
    group = cx.attr("group", 1)
    if group < 1:
        raise FrontendError(f"group is {group}, it must be >= 1")
    c = cx.shape(0)[1]
    if transposed:
        out_ch = w[1] * group
        if isinstance(c, int) and c != w[0]:
            raise FrontendError(f"the input has {c} channels, the weight {w[0]}")
        if w[0] % group:
            raise FrontendError(f"the weight's {w[0]} input channels do not divide into {group} groups")
    else:
        out_ch = w[0]
        if isinstance(c, int) and c != w[1] * group:
            raise FrontendError(f"the input has {c} channels, the weight {w[1]} per group x {group} groups")
        if w[0] % group:
            raise FrontendError(f"the weight's {w[0]} output channels do not divide into {group} groups")
    if cx.has(2) and tuple(cx.shape(2)) != (out_ch,):
        raise FrontendError(f"the bias has shape {short(cx.shape(2))}, expected [{out_ch}]")
    return kernel


def _check_conv_output(cx: NodeContext, kernel: tuple[int, ...], strides: tuple[int, ...],
                       dilations: tuple[int, ...], begins: tuple[int, ...], ends: tuple[int, ...]) -> None:
    for a, (size, k, st, d, b, e) in enumerate(zip(cx.shape(0)[2:], kernel, strides, dilations, begins, ends)):
        if isinstance(size, int) and size + b + e < (k - 1) * d + 1:
            raise FrontendError(f"spatial axis {a + 2} of size {size} (padded {size + b + e}) is smaller than the "
                                f"dilated kernel ({(k - 1) * d + 1})")


def _to_2d(cx: NodeContext, e: Expr, nsp: int) -> Expr:
    return cx.call("expand_dims", e, axes=(2,)) if nsp == 1 else e


def _params_2d(nsp: int, kernel, strides, dilations, begins, ends):
    if nsp == 1:
        return (1,) + kernel, (1,) + strides, (1,) + dilations, (0, begins[0], 0, ends[0])
    return kernel, strides, dilations, tuple(begins) + tuple(ends)


def _bias(cx: NodeContext, y: Expr, index: int, nsp: int) -> Expr:
    if not cx.has(index):
        return y
    b = cx.expr(index)
    return cx.call("add", y, cx.reshape(b, (-1,) + (1,) * nsp))


def conv_window(cx: NodeContext, nsp: int) -> dict[str, Any]:
    """The ``nn.conv2d`` window attributes (strides, dilation, padding, groups; 1-D as 2-D) of a Conv-like
    node with ``nsp`` spatial dims whose inputs 0 and 1 are data and weight, checked."""
    kernel = _conv_kernel(cx, nsp, transposed=False)
    strides = _ints_attr(cx, "strides", nsp, 1, minimum=1)
    dilations = _ints_attr(cx, "dilations", nsp, 1, minimum=1)
    begins, ends = _pads(cx, cx.shape(0)[2:], kernel, strides, dilations)
    _check_conv_output(cx, kernel, strides, dilations, begins, ends)
    _, s, d, p = _params_2d(nsp, kernel, strides, dilations, begins, ends)
    return {"strides": s, "dilation": d, "padding": p, "groups": cx.attr("group", 1)}


def conv(cx: NodeContext) -> object:
    nsp = _spatial_rank(cx, "convolution")
    y = cx.call("nn.conv2d", _to_2d(cx, cx.expr(0), nsp), _to_2d(cx, cx.expr(1), nsp), **conv_window(cx, nsp))
    if nsp == 1:
        y = cx.call("squeeze", y, axes=(2,))
    return _bias(cx, y, 2, nsp)


def conv_transpose(cx: NodeContext) -> object:
    nsp = _spatial_rank(cx, "transposed convolution")
    kernel = _conv_kernel(cx, nsp, transposed=True)
    strides = _ints_attr(cx, "strides", nsp, 1, minimum=1)
    dilations = _ints_attr(cx, "dilations", nsp, 1, minimum=1)
    out_pad = list(_ints_attr(cx, "output_padding", nsp, 0, minimum=0))
    auto = cx.attr("auto_pad", "NOTSET")
    _check_auto_pad(auto)
    if auto != "NOTSET" and "pads" in cx.attrs:
        raise FrontendError(f"both auto_pad '{auto}' and pads are given")
    if "output_shape" in cx.attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        in_sp = cx.shape(0)[2:]  # a symbolic batch or channel dim is fine: only the spatial dims are used
        if "output_shape" in cx.attrs:
            if not all(isinstance(d, int) for d in in_sp):
                cx.static_shape(0, "input with output_shape")
            given = list(cx.attr("output_shape"))
            target = given[-nsp:]
            if len(given) not in (nsp, nsp + 2) or min(target) < 1:
                raise FrontendError(f"output_shape {given} must be {nsp} sizes >= 1 (or the full {nsp + 2}-D shape)")
        else:
            target = [d * s for d, s in zip(in_sp, strides)]
        begins, ends = [], []
        for i in range(nsp):
            if isinstance(in_sp[i], int):
                total = strides[i] * (in_sp[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - target[i]
            else:  # SAME: the output is the size times the stride, so the padding does not depend on the size
                total = out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 - strides[i]
            small, big = total // 2, total - total // 2
            b, e = (small, big) if auto == "SAME_UPPER" else (big, small)
            if e < 0:  # a larger output than the default: extend at the end
                out_pad[i] -= e
                e = 0
            if b < 0:
                raise Unsupported(f"output_shape {target} needs negative padding")
            begins.append(b)
            ends.append(e)
    else:
        begins, ends = _pads(cx, (), kernel, strides, dilations) if auto == "NOTSET" else ((0,) * nsp, (0,) * nsp)
    _, strides2, dil2, padding = _params_2d(nsp, kernel, strides, dilations, tuple(begins), tuple(ends))
    opad = (0, out_pad[0]) if nsp == 1 else tuple(out_pad)
    y = cx.call("nn.conv2d_transpose", _to_2d(cx, cx.expr(0), nsp), _to_2d(cx, cx.expr(1), nsp),
                strides=strides2, padding=padding, dilation=dil2, groups=cx.attr("group", 1),
                output_padding=opad)
    if nsp == 1:
        y = cx.call("squeeze", y, axes=(2,))
    return _bias(cx, y, 2, nsp)


_POOL_ATTRS = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")


def _pool(cx: NodeContext, op: str, **extra: object) -> Expr:
    nsp = len(cx.attr("kernel_shape"))
    kernel = _ints_attr(cx, "kernel_shape", nsp, 0, minimum=1)
    if cx.ndim(0) != nsp + 2:
        raise FrontendError(f"kernel_shape has {nsp} values, the input {cx.ndim(0) - 2} spatial axes")
    if nsp not in (1, 2):
        raise Unsupported(f"{nsp}-D pooling not supported")
    strides = _ints_attr(cx, "strides", nsp, 1, minimum=1)
    dilations = _ints_attr(cx, "dilations", nsp, 1, minimum=1)
    begins, ends = _pads(cx, cx.shape(0)[2:], kernel, strides, dilations)
    if any(p >= k for p, k in zip(begins + ends, kernel + kernel)):
        raise FrontendError(f"pads {short(begins + ends)} must be smaller than kernel_shape {short(kernel)}")
    kernel2, strides2, dil2, padding = _params_2d(nsp, kernel, strides, dilations, begins, ends)
    y = cx.call(op, _to_2d(cx, cx.expr(0), nsp), pool_size=kernel2, strides=strides2, padding=padding,
                dilation=dil2, ceil_mode=bool(cx.attr("ceil_mode", 0)), **extra)
    return cx.call("squeeze", y, axes=(2,)) if nsp == 1 else y


def max_pool(cx: NodeContext) -> object:
    return [_pool(cx, "nn.max_pool2d"), None]  # the Indices output is not supported


def avg_pool(cx: NodeContext) -> object:
    return _pool(cx, "nn.avg_pool2d", count_include_pad=bool(cx.attr("count_include_pad", 0)))


def lp_pool(cx: NodeContext) -> object:
    p = float(cx.attr("p", 2))
    dtype = cx.dtype(0)
    x = cx.call("power", cx.call("abs", cx.expr(0)), cx.constant(p, dtype))
    cx_x = NodeContext(cx.node, [x] + cx.inputs[1:], cx.attrs, cx.version, cx.opset, cx.meta, cx._constant,
                       budget=cx.budget)
    avg = _pool(cx_x, "nn.avg_pool2d", count_include_pad=True)
    total = cx.call("multiply", avg, cx.constant(math.prod(cx.attr("kernel_shape")), dtype))
    return cx.call("power", total, cx.constant(1.0 / p, dtype))


def global_pool(cx: NodeContext) -> object:
    avg = cx.op_type == "GlobalAveragePool"
    if cx.ndim(0) < 3:
        raise FrontendError(f"the input has rank {cx.ndim(0)}, expected at least 3 (N, C, spatial axes)")
    if cx.ndim(0) == 4:
        return cx.call("nn.global_avg_pool2d" if avg else "nn.global_max_pool2d", cx.expr(0))
    axes = tuple(range(2, cx.ndim(0)))
    return cx.call("mean" if avg else "max", cx.expr(0), axis=axes, keepdims=True)


# ---- normalizations ---------------------------------------------------------------------------


def batch_norm(cx: NodeContext) -> object:
    if cx.attr("training_mode", 0) or (cx.version < 7 and not cx.attr("is_test", 0) and len(cx.node.output) > 1):
        raise Unsupported("training mode not supported")
    if cx.version < 9 and not cx.attr("spatial", 1):
        raise Unsupported("spatial=0 not supported")
    y = cx.call("nn.batch_norm", *(cx.expr(i) for i in range(5)), axis=1, epsilon=cx.attr("epsilon", 1e-5))
    return [y]


def instance_norm(cx: NodeContext) -> object:
    return cx.call("nn.instance_norm", cx.expr(0), cx.expr(1), cx.expr(2), epsilon=cx.attr("epsilon", 1e-5))


def layer_norm(cx: NodeContext) -> object:
    scale = cx.expr(1)
    bias = cx.expr(2) if cx.has(2) else cx.full(cx.static_shape(1, "scale"), 0, scale.checked_type.dtype)
    axis = cx.axis(cx.attr("axis", -1), cx.ndim(0))
    y = cx.call("nn.layer_norm", cx.expr(0), scale, bias, axis=axis, epsilon=cx.attr("epsilon", 1e-5))
    return [y]  # Mean and InvStdDev outputs are not supported


def lrn(cx: NodeContext) -> object:
    if cx.attr("size") < 1:
        raise FrontendError(f"size is {cx.attr('size')}, it must be >= 1")
    return cx.call("nn.lrn", cx.expr(0), size=cx.attr("size"), alpha=cx.attr("alpha", 1e-4),
                   beta=cx.attr("beta", 0.75), bias=cx.attr("bias", 1.0))


# ---- softmax family ---------------------------------------------------------------------------


def _restore(cx: NodeContext) -> tuple[int, ...]:
    shape = cx.shape(0)
    syms = [d for d in shape if not isinstance(d, int)]
    if len(syms) > 1:
        raise Unsupported(f"input shape {shape} has more than one symbolic dimension")
    return tuple(d if isinstance(d, int) else -1 for d in shape)


def _legacy_2d(cx: NodeContext) -> tuple[int, bool]:
    """(normalized axis, whether the op must run on the input coerced to 2-D) for opsets < 13."""
    nd = cx.ndim(0)
    axis = cx.axis(cx.attr("axis", 1 if cx.version < 13 else -1), nd)
    return axis, cx.version < 13 and axis != nd - 1


def softmax(cx: NodeContext) -> object:
    op = "nn.softmax" if cx.op_type == "Softmax" else "nn.log_softmax"
    axis, legacy = _legacy_2d(cx)
    if not legacy:
        return cx.call(op, cx.expr(0), axis=axis)
    y = cx.call(op, cx.call("flatten", cx.expr(0), axis=axis), axis=1)
    return cx.reshape(y, _restore(cx))


def hardmax(cx: NodeContext) -> object:
    axis, legacy = _legacy_2d(cx)
    x = cx.call("flatten", cx.expr(0), axis=axis) if legacy else cx.expr(0)
    t = x.checked_type
    a = 1 if legacy else axis
    dim = t.shape[a]
    if not isinstance(dim, int):
        raise Unsupported("the softmax axis must be static")
    cx.check_bytes(dim * 8, f"Hardmax positions ({dim})")
    am = cx.call("argmax", x, axis=a, keepdims=True)
    positions = np.arange(dim, dtype=np.int64).reshape((dim,) + (1,) * (t.ndim - 1 - a))
    y = cx.cast(cx.call("equal", am, cx.constant(positions)), t.dtype)
    return cx.reshape(y, _restore(cx)) if legacy else y


# ---- reductions -------------------------------------------------------------------------------

_REDUCE = {
    "ReduceSum": ("sum", 13), "ReduceMean": ("mean", 18), "ReduceMax": ("max", 18), "ReduceMin": ("min", 18),
    "ReduceProd": ("prod", 18), "ReduceSumSquare": ("sum_square", 18), "ReduceL1": ("l1_norm", 18),
    "ReduceL2": ("l2_norm", 18), "ReduceLogSum": ("log_sum", 18), "ReduceLogSumExp": ("log_sum_exp", 18),
}


def reduce(cx: NodeContext) -> object:
    op, since = _REDUCE[cx.op_type]
    if cx.version < since:
        axes = cx.attr("axes", None)
        axes = tuple(axes) if axes is not None else None
    else:
        axes = cx.ints(1, "axes") if cx.has(1) else None
    if not axes:
        if cx.attr("noop_with_empty_axes", 0):
            return cx.value(0)
        axes = None
    else:  # a repeated axis counts once (as in ONNX Runtime)
        axes = tuple(sorted({cx.axis(a, cx.ndim(0)) for a in axes}))
    keepdims = bool(cx.attr("keepdims", 1))
    if cx.dtype(0) == "bool" and op in ("max", "min"):  # any / all, computed on 0/1
        y = cx.call(op, cx.cast(cx.expr(0), "uint8"), axis=axes, keepdims=keepdims)
        return cx.cast(y, "bool")
    return cx.call(op, cx.expr(0), axis=axes, keepdims=keepdims)


def arg_reduce(cx: NodeContext) -> object:
    axis = cx.axis(cx.attr("axis", 0), cx.ndim(0))
    return cx.call("argmax" if cx.op_type == "ArgMax" else "argmin", cx.expr(0), axis=axis,
                   keepdims=bool(cx.attr("keepdims", 1)), select_last_index=bool(cx.attr("select_last_index", 0)))


def _const_axis(cx: NodeContext) -> int:
    """CumSum/CumProd's axis input: a constant scalar in range."""
    v = cx.const(1, "axis").reshape(-1)
    if v.size != 1:
        raise FrontendError(f"axis must be a scalar, got {v.size} values")
    return cx.axis(int(v[0]), cx.ndim(0))


def cumsum(cx: NodeContext) -> object:
    axis = _const_axis(cx)
    return cx.call("cumsum", cx.expr(0), axis=axis, exclusive=bool(cx.attr("exclusive", 0)),
                   reverse=bool(cx.attr("reverse", 0)))


def cumprod(cx: NodeContext) -> object:
    """A running product over the static axis: one multiply per step, concatenated back."""
    shape = cx.shape(0)
    axis = _const_axis(cx)
    dim = shape[axis]
    if not isinstance(dim, int) or not 0 < dim <= 4096:
        raise Unsupported(f"the axis must be static and at most 4096 long, got {dim}")
    tup = cx.call("split", cx.expr(0), sections=(1,) * dim, axis=axis)
    parts = [cx.get(tup, i) for i in range(dim)]
    if cx.attr("reverse", 0):
        parts = parts[::-1]
    exclusive = bool(cx.attr("exclusive", 0))
    if exclusive:
        one = cx.constant(np.ones(cx.static_shape(0, "input with exclusive=1")[:axis] + (1,) + shape[axis + 1:],
                                  dtype=cx.dtype(0)))
    out, acc = [], None
    for p in parts:
        if exclusive:
            out.append(acc if acc is not None else one)
            acc = p if acc is None else cx.call("multiply", acc, p)
        else:
            acc = p if acc is None else cx.call("multiply", acc, p)
            out.append(acc)
    if cx.attr("reverse", 0):
        out = out[::-1]
    return out[0] if len(out) == 1 else cx.call("concatenate", *out, axis=axis)


CONVERTERS: list[Converter] = [
    *converters(["MatMul"], matmul, ops=("nn.matmul",)),
    *converters(["Gemm"], gemm, attrs=("alpha", "beta", "transA", "transB", "broadcast"),
                ops=("transpose", "nn.dense", "multiply", "add", "nn.matmul")),
    *converters(["Conv"], conv, attrs=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"),
                ops=("nn.conv2d", "squeeze", "add", "reshape", "expand_dims")),
    *converters(["ConvTranspose"], conv_transpose,
                attrs=("auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads",
                       "strides"),
                ops=("nn.conv2d_transpose", "squeeze", "add", "reshape", "expand_dims")),
    *converters(["MaxPool"], max_pool, attrs=_POOL_ATTRS + ("storage_order",),
                ops=("nn.max_pool2d", "squeeze", "expand_dims")),
    *converters(["AveragePool"], avg_pool, attrs=_POOL_ATTRS + ("count_include_pad",),
                ops=("nn.avg_pool2d", "squeeze", "expand_dims")),
    *converters(["LpPool"], lp_pool, attrs=_POOL_ATTRS + ("p",),
                ops=("power", "nn.avg_pool2d", "multiply", "abs", "squeeze", "expand_dims")),
    *converters(["GlobalAveragePool"], global_pool, ops=("nn.global_avg_pool2d", "mean")),
    *converters(["GlobalMaxPool"], global_pool, ops=("nn.global_max_pool2d", "max")),
    *converters(["BatchNormalization"], batch_norm, attrs=("epsilon", "momentum", "training_mode", "spatial",
                                                           "is_test"),
                ops=("nn.batch_norm",)),
    *converters(["InstanceNormalization"], instance_norm, attrs=("epsilon",), ops=("nn.instance_norm",)),
    *converters(["LayerNormalization"], layer_norm, attrs=("axis", "epsilon", "stash_type"),
                ops=("nn.layer_norm", "broadcast_to")),
    *converters(["LRN"], lrn, attrs=("alpha", "beta", "bias", "size"), ops=("nn.lrn",)),
    *converters(["Softmax"], softmax, attrs=("axis",), ops=("nn.softmax", "flatten", "reshape")),
    *converters(["LogSoftmax"], softmax, attrs=("axis",), ops=("nn.log_softmax", "flatten", "reshape")),
    *converters(["Hardmax"], hardmax, attrs=("axis",), ops=("argmax", "flatten", "equal", "cast", "reshape")),
    *converters(_REDUCE, reduce, attrs=("axes", "keepdims", "noop_with_empty_axes"), ops=lambda t: (_REDUCE[t][0],)),
    *converters(["ArgMax"], arg_reduce, attrs=("axis", "keepdims", "select_last_index"), ops=("argmax",)),
    *converters(["ArgMin"], arg_reduce, attrs=("axis", "keepdims", "select_last_index"), ops=("argmin",)),
    *converters(["CumSum"], cumsum, attrs=("exclusive", "reverse"), ops=("cumsum",)),
    *converters(["CumProd"], cumprod, attrs=("exclusive", "reverse"), ops=("split", "concatenate", "multiply")),
]
