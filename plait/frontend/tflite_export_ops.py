"""TFLite exporter converters of float operators and data movement (see
:mod:`plait.frontend.tflite_export` for the table): convolutions, dense and matmul, pools, softmax,
reductions, elementwise operators, reshapes, transposes, concatenation, casts.

Each converter is ``fn(exporter, call, fused) -> TV``; ``fused`` is a TFLite fused activation code
(1 RELU, 2 RELU_N1_TO_1, 3 RELU6) that ``nn.relu`` / ``clip`` pass to their single-use argument when
that argument's operator takes one (:data:`~plait.frontend.tflite_export_core.FUSABLE`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait.frontend.tflite_export_core import (
    FUSABLE, QUANT_DTYPES, TO_NCHW, TV, Exporter, NoMapping, converter, ttype,
)
from plait.relay.expr import Call, Constant, Expr

NONE, RELU, RELU_N1_TO_1, RELU6 = 0, 1, 2, 3
SAME, VALID = 0, 1


# ---- shared -------------------------------------------------------------------------------------


def padding_code(size: tuple[int, int], k: tuple[int, int], s: tuple[int, int], d: tuple[int, int],
                 pads: tuple[int, ...]) -> int | None:
    """TFLite's padding (SAME or VALID) that equals plait's explicit ``(top, left, bottom, right)``;
    None when neither does."""
    if all(p == 0 for p in pads):
        return VALID
    same = []
    for n, kk, ss, dd in zip(size, k, s, d):
        out = (n + ss - 1) // ss
        total = max((out - 1) * ss + (kk - 1) * dd + 1 - n, 0)
        same.append((total // 2, total - total // 2))
    return SAME if tuple(pads) == (same[0][0], same[1][0], same[0][1], same[1][1]) else None


def is_op(e: Expr, *names: str) -> bool:
    return isinstance(e, Call) and getattr(e.op, "name", None) in names


def hint(c: Call) -> str:
    return str(c.meta.get("name", "")) if c.meta else ""


def window(ex: Exporter, c: Call, x_nhwc: int, k: tuple[int, int], pool: bool = False) -> tuple[int, dict[str, Any]]:
    """The input tensor (PADded when plait's padding is neither SAME nor VALID; not for pools) and the
    options Padding, StrideH/W (and DilationH/WFactor for convolutions)."""
    a = c.attrs
    s, d, p = tuple(a["strides"]), tuple(a["dilation"]), tuple(a["padding"])
    shape = ex.w.tensors[x_nhwc].shape
    code = padding_code((shape[1], shape[2]), k, s, d, p)
    if code is None:
        if pool:
            raise NoMapping(f"padding {list(p)} is neither TFLite's SAME nor VALID")
        padded = (shape[0], shape[1] + p[0] + p[2], shape[2] + p[1] + p[3], shape[3])
        out = ex.tensor(f"{hint(c)}_pad", padded, ex.w.tensors[x_nhwc].dtype)
        ex.alias[out] = x_nhwc
        widths = np.array([[0, 0], [p[0], p[2]], [p[1], p[3]], [0, 0]], np.int32)
        ex.w.op("PAD", [x_nhwc, ex.const("paddings", widths)], [out])
        x_nhwc, code = out, VALID
    opts: dict[str, Any] = {"Padding": code, "StrideH": s[0], "StrideW": s[1]}
    if not pool:
        opts.update(DilationHFactor=d[0], DilationWFactor=d[1])
    elif d != (1, 1):
        raise NoMapping(f"dilation {list(d)} (TFLite pools take 1)")
    return x_nhwc, opts


def conv_weights(c: Call, w: np.ndarray, cin: int) -> tuple[str, np.ndarray, dict[str, Any], int]:
    """TFLite's operator, filter layout, extra options and quantized dimension of an OIHW filter."""
    groups = c.attrs["groups"]
    o = w.shape[0]
    if groups > 1 and groups == cin and w.shape[1] == 1:  # depthwise: [1, KH, KW, C * M]
        return "DEPTHWISE_CONV_2D", np.ascontiguousarray(np.transpose(w, (1, 2, 3, 0))), \
            {"DepthMultiplier": o // cin}, 3
    return "CONV_2D", np.ascontiguousarray(np.transpose(w, (0, 2, 3, 1))), {}, 0


def emit_conv(ex: Exporter, conv: Call, root: Call, bias: np.ndarray | None, fused: int, quant: Any = None) -> TV:
    """One CONV_2D / DEPTHWISE_CONV_2D for ``conv`` (plus its bias; ``root`` is the call whose result
    it computes). ``quant``: ``(weight quant, bias quant, output quant)`` of an int8 convolution."""
    w = conv.args[1]
    if not isinstance(w, Constant):
        raise NoMapping("the filter is not a constant (TFLite's CONV_2D takes a constant filter)")
    if conv.attrs.get("data_layout", "NCHW") != "NCHW":
        raise NoMapping(f"data layout {conv.attrs['data_layout']}")
    x = ex.nhwc(conv.args[0], hint(conv))
    cin = ex.w.tensors[x].shape[3]
    kind, filt, extra, _ = conv_weights(conv, w.data, cin)
    x, opts = window(ex, conv, x, (w.data.shape[2], w.data.shape[3]))
    o = w.data.shape[0]
    wq, bq, oq = quant if quant is not None else (None, None, None)
    wt = ex.const(f"{hint(conv)}_filter", filt, quant=wq)
    if bias is None:
        bias = np.zeros(o, np.int32 if quant is not None else np.float32)
    bt = ex.const(f"{hint(conv)}_bias", bias.reshape(o), quant=bq)
    out = ex.out_tensor(root, nchw=True, quant=oq)
    ex.w.op(kind, [x, wt, bt], [out], FusedActivationFunction=fused, **opts, **extra)
    return TV(out, nchw=True)


def emit_fc(ex: Exporter, dense: Call, root: Call, weight: np.ndarray, bias: np.ndarray | None, fused: int,
            quant: Any = None) -> TV:
    """One FULLY_CONNECTED of ``x [..., K] @ weight[N, K].T`` (+ bias)."""
    x = ex.plain(dense.args[0])
    rank = len(ex.w.tensors[x].shape)
    n = weight.shape[0]
    wq, bq, oq = quant if quant is not None else (None, None, None)
    wt = ex.const(f"{hint(dense)}_weights", np.ascontiguousarray(weight), quant=wq)
    if bias is None:
        bias = np.zeros(n, np.int32 if quant is not None else np.float32)
    bt = ex.const(f"{hint(dense)}_bias", bias.reshape(n), quant=bq)
    out = ex.out_tensor(root, nchw=False, quant=oq)
    ex.w.op("FULLY_CONNECTED", [x, wt, bt], [out], FusedActivationFunction=fused, KeepNumDims=rank != 2)
    return TV(out)


def _bias_of(c: Call, n: int, shapes: tuple[tuple[int, ...], ...]) -> tuple[Call, np.ndarray] | None:
    """``(op call, bias)`` when ``c`` is ``add(op, constant bias of one of shapes)``, either order."""
    for a, b in ((c.args[0], c.args[1]), (c.args[1], c.args[0])):
        if isinstance(b, Constant) and isinstance(a, Call) and tuple(b.data.shape) in shapes:
            return a, b.data.reshape(n)
    return None


# ---- convolution, dense, matmul -----------------------------------------------------------------


@converter("nn.conv2d", fusable=True)
def _conv2d(ex: Exporter, c: Call, fused: int) -> TV:
    return emit_conv(ex, c, c, None, fused)


@converter("nn.dense", fusable=True)
def _dense(ex: Exporter, c: Call, fused: int) -> TV:
    if isinstance(c.args[1], Constant):
        return emit_fc(ex, c, c, c.args[1].data, None, fused)
    if fused:
        raise NoMapping("cannot fuse an activation into BATCH_MATMUL")
    return _batch_matmul(ex, c, adj_y=True)


@converter("nn.matmul", fusable=True)
def _matmul(ex: Exporter, c: Call, fused: int) -> TV:
    a, b = c.args
    if isinstance(b, Constant) and b.data.ndim == 2 and ttype(a).ndim >= 2:
        return emit_fc(ex, c, c, np.ascontiguousarray(b.data.T), None, fused)
    if fused:
        raise NoMapping("cannot fuse an activation into BATCH_MATMUL")
    return _batch_matmul(ex, c, adj_y=False)


def _batch_matmul(ex: Exporter, c: Call, adj_y: bool) -> TV:
    if ttype(c.args[0]).ndim < 2 or ttype(c.args[1]).ndim < 2:
        raise NoMapping("1-D operands (TFLite's BATCH_MATMUL takes matrices)")
    a, b = ex.plain(c.args[0]), ex.plain(c.args[1])
    out = ex.out_tensor(c, nchw=False)
    ex.w.op("BATCH_MATMUL", [a, b], [out], AdjX=False, AdjY=adj_y)
    return TV(out)


# ---- pools, reductions, softmax -------------------------------------------------------------------


@converter("nn.avg_pool2d", "nn.max_pool2d", fusable=True)
def _pool(ex: Exporter, c: Call, fused: int) -> TV:
    a = c.attrs
    if c.op.name == "nn.avg_pool2d" and a["count_include_pad"] and any(a["padding"]):
        raise NoMapping("the padding is counted (count_include_pad; TFLite's AVERAGE_POOL_2D does not count it)")
    return emit_pool(ex, c, fused, "AVERAGE_POOL_2D" if c.op.name == "nn.avg_pool2d" else "MAX_POOL_2D")


def emit_pool(ex: Exporter, c: Call, fused: int, kind: str) -> TV:
    x = ex.nhwc(c.args[0], hint(c))
    k = tuple(c.attrs["pool_size"])
    x, opts = window(ex, c, x, k, pool=True)
    out = ex.out_tensor(c, nchw=True, like=x)
    h, w = ex.w.tensors[x].shape[1:3]
    s = (opts["StrideH"], opts["StrideW"])
    want = [(n + ss - 1) // ss if opts["Padding"] == SAME else (n - kk) // ss + 1 for n, kk, ss in zip((h, w), k, s)]
    if list(ex.w.tensors[out].shape[1:3]) != want:
        raise NoMapping(f"its output size {list(ex.w.tensors[out].shape[1:3])} is not TFLite's {want} (ceil_mode)")
    ex.w.op(kind, [x], [out], FilterHeight=k[0], FilterWidth=k[1], FusedActivationFunction=fused, **opts)
    return TV(out, nchw=True)


@converter("nn.global_avg_pool2d", "nn.global_max_pool2d")
def _global_pool(ex: Exporter, c: Call, fused: int) -> TV:
    x = ex.nhwc(c.args[0], hint(c))
    out = ex.out_tensor(c, nchw=True, like=x)
    h, w = ex.w.tensors[x].shape[1:3]
    kind = "AVERAGE_POOL_2D" if c.op.name == "nn.global_avg_pool2d" else "MAX_POOL_2D"
    ex.w.op(kind, [x], [out], Padding=VALID, StrideH=1, StrideW=1, FilterHeight=h, FilterWidth=w,
            FusedActivationFunction=0)
    return TV(out, nchw=True)


_REDUCE = {"mean": "MEAN", "sum": "SUM", "max": "REDUCE_MAX", "min": "REDUCE_MIN", "prod": "REDUCE_PROD"}


@converter(*_REDUCE)
def _reduce(ex: Exporter, c: Call, fused: int) -> TV:
    rank = ttype(c.args[0]).ndim
    axes = c.attrs["axis"]
    axes = tuple(range(rank)) if axes is None else tuple(a % rank for a in axes)
    keep = bool(c.attrs["keepdims"])
    tv = ex.value(c.args[0])
    if tv.nchw and keep:
        x, axes, nchw = tv.index, tuple(sorted(TO_NCHW[a] for a in axes)), True
    else:
        x, nchw = ex.plain(tv), False
    out = ex.out_tensor(c, nchw=nchw, like=x)
    ex.w.op(_REDUCE[c.op.name], [x, ex.const("axes", np.array(axes, np.int32))], [out], KeepDims=keep)
    return TV(out, nchw)


@converter("nn.softmax", "nn.log_softmax")
def _softmax(ex: Exporter, c: Call, fused: int) -> TV:
    return emit_softmax(ex, c, "SOFTMAX" if c.op.name == "nn.softmax" else "LOG_SOFTMAX", None, {"Beta": 1.0})


def emit_softmax(ex: Exporter, c: Call, kind: str, quant: Any, opts: dict[str, Any]) -> TV:
    rank = ttype(c).ndim
    axis = c.attrs["axis"] % rank
    tv = ex.value(c.args[0])
    if tv.nchw and axis == 1:
        x, nchw = tv.index, True
    elif axis == rank - 1:
        x, nchw = ex.plain(tv), False
    else:
        raise NoMapping(f"along axis {axis} of {rank} (TFLite's {kind} runs along the last)")
    out = ex.out_tensor(c, nchw=nchw, quant=quant)
    ex.w.op(kind, [x], [out], **(opts if kind == "SOFTMAX" else {}))
    return TV(out, nchw)


# ---- elementwise ----------------------------------------------------------------------------------


def operands(ex: Exporter, args: tuple[Expr, ...]) -> tuple[list[int], bool]:
    """TFLite tensors of elementwise operands: all NHWC when every non-constant one is a channels-first
    view (constants transposed), else all in plait's order; and whether they are NHWC."""
    variables = [a for a in args if not isinstance(a, Constant)]
    tvs = {id(a): ex.value(a) for a in variables}
    if variables and all(tvs[id(a)].nchw for a in variables) and \
            all(a.data.ndim <= 4 for a in args if isinstance(a, Constant)):
        return [tvs[id(a)].index if id(a) in tvs else ex.nhwc(a) for a in args], True
    return [ex.plain(tvs[id(a)]) if id(a) in tvs else ex.value(a).index for a in args], False


_BINARY = {"add": "ADD", "subtract": "SUB", "multiply": "MUL", "divide": "DIV", "maximum": "MAXIMUM",
           "minimum": "MINIMUM", "power": "POW"}
_FUSED_BINARY = ("ADD", "SUB", "MUL", "DIV")


@converter("maximum", "minimum", "power")
def _binary_unfused(ex: Exporter, c: Call, fused: int) -> TV:
    return _binary(ex, c, fused)


@converter("add", "subtract", "multiply", "divide", fusable=True)
def _binary(ex: Exporter, c: Call, fused: int) -> TV:
    if c.op.name == "add" and ttype(c).dtype == "float32":
        t = ttype(c)
        if t.ndim == 4:
            found = _bias_of(c, t.shape[1], ((1, t.shape[1], 1, 1), (t.shape[1], 1, 1)))
            if found and is_op(found[0], "nn.conv2d") and ex.single_use(found[0]):
                return emit_conv(ex, found[0], c, found[1].astype(np.float32), fused)
        found = _bias_of(c, t.shape[-1], ((t.shape[-1],), (1, t.shape[-1])))
        if found and is_op(found[0], "nn.dense") and isinstance(found[0].args[1], Constant) and \
                ex.single_use(found[0]):
            return emit_fc(ex, found[0], c, found[0].args[1].data, found[1].astype(np.float32), fused)
    kind = _BINARY[c.op.name]
    if fused and kind not in _FUSED_BINARY:
        raise NoMapping(f"cannot fuse an activation into {kind}")
    if ttype(c).dtype in QUANT_DTYPES:
        raise NoMapping(f"a {ttype(c).dtype} {kind} outside the quantized patterns of the TFLite importer")
    ins, nchw = operands(ex, c.args)
    out = ex.out_tensor(c, nchw=nchw)
    ex.w.op(kind, ins, [out], **({"FusedActivationFunction": fused} if kind in _FUSED_BINARY else {}))
    return TV(out, nchw)


_UNARY = {"sigmoid": "LOGISTIC", "tanh": "TANH", "exp": "EXP", "sqrt": "SQRT", "rsqrt": "RSQRT", "abs": "ABS",
          "negative": "NEG", "log": "LOG", "floor": "FLOOR", "nn.hard_swish": "HARD_SWISH", "nn.elu": "ELU",
          "nn.leaky_relu": "LEAKY_RELU", "nn.gelu": "GELU", "nn.relu": "RELU"}


def unary(ex: Exporter, c: Call, kind: str, **opts: Any) -> TV:
    tv = ex.value(c.args[0])
    out = ex.out_tensor(c, nchw=tv.nchw, like=tv.index)
    ex.w.op(kind, [tv.index], [out], **opts)
    return TV(out, tv.nchw)


def fuse_into(ex: Exporter, c: Call, code: int) -> TV | None:
    """The argument of activation ``c`` computed with ``code`` fused, when it can be."""
    arg = c.args[0]
    if not (isinstance(arg, Call) and getattr(arg.op, "name", None) in FUSABLE and ex.single_use(arg)
            and ttype(arg).dtype == "float32"):
        return None
    if arg.op.name in ("nn.dense", "nn.matmul") and not isinstance(arg.args[1], Constant):
        return None  # BATCH_MATMUL takes no fused activation
    return ex.value(arg, fused=code)


@converter(*_UNARY)
def _unary(ex: Exporter, c: Call, fused: int) -> TV:
    name = c.op.name
    if ttype(c).dtype != "float32":
        raise NoMapping(f"a {ttype(c).dtype} {name} (TFLite's {_UNARY[name]} is exported for float32)")
    if name == "nn.relu":
        got = fuse_into(ex, c, RELU)
        if got is not None:
            return got
    if name == "nn.leaky_relu":
        return unary(ex, c, "LEAKY_RELU", Alpha=float(c.attrs["alpha"]))
    if name == "nn.gelu" and c.attrs.get("approximate", "none") not in ("none", False):
        return unary(ex, c, "GELU", Approximate=True)
    return unary(ex, c, _UNARY[name])


@converter("clip")
def _clip(ex: Exporter, c: Call, fused: int) -> TV:
    lo, hi = c.attrs["a_min"], c.attrs["a_max"]
    dtype = ttype(c).dtype
    if dtype == "float32":
        code = {(0.0, 6.0): RELU6, (-1.0, 1.0): RELU_N1_TO_1, (0.0, None): RELU}.get((lo, hi))
        if code is not None:
            got = fuse_into(ex, c, code)
            if got is not None:
                return got
            return unary(ex, c, {RELU6: "RELU6", RELU_N1_TO_1: "RELU_N1_TO_1", RELU: "RELU"}[code])
    tv = ex.value(c.args[0])
    for bound, kind in ((lo, "MAXIMUM"), (hi, "MINIMUM")):
        if bound is None:
            continue
        out = ex.tensor(f"{hint(c)}_{kind.lower()}", ex.w.tensors[tv.index].shape, dtype)
        ex.alias[out] = tv.index
        ex.w.op(kind, [tv.index, ex.const("bound", np.array(bound, dtype))], [out])
        tv = TV(out, tv.nchw)
    return tv


# ---- data movement ------------------------------------------------------------------------------


@converter("reshape", "squeeze", "expand_dims", "flatten")
def _reshape(ex: Exporter, c: Call, fused: int) -> TV:
    tv = ex.value(c.args[0])
    src = tv.index
    if tv.nchw and int(np.prod(ex.w.tensors[src].shape[1:3])) != 1:
        src = ex.plain(tv)  # [N, 1, 1, C] is [N, C, 1, 1] in memory: no transpose needed for those
    shape = tuple(int(d) for d in ttype(c).shape)
    if ex.w.tensors[src].shape == shape:
        return TV(src)
    out = ex.out_tensor(c, nchw=False, like=src, moves=True)
    ex.w.op("RESHAPE", [src, ex.const("shape", np.array(shape, np.int32))], [out], NewShape=list(shape))
    return TV(out)


@converter("transpose")
def _transpose(ex: Exporter, c: Call, fused: int) -> TV:
    rank = ttype(c).ndim
    axes = c.attrs["axes"]
    axes = tuple(reversed(range(rank))) if axes is None else tuple(a % rank for a in axes)
    tv = ex.value(c.args[0])
    if tv.nchw:
        axes = tuple(TO_NCHW[a] for a in axes)  # the same transpose, applied to the NHWC tensor
    if axes == tuple(range(rank)):
        return TV(tv.index)
    if rank == 4 and axes == TO_NCHW:
        return TV(tv.index, nchw=True)
    out = ex.out_tensor(c, nchw=False, like=tv.index, moves=True)
    ex.w.op("TRANSPOSE", [tv.index, ex.const("perm", np.array(axes, np.int32))], [out])
    return TV(out)


@converter("concatenate")
def _concatenate(ex: Exporter, c: Call, fused: int) -> TV:
    rank = ttype(c).ndim
    axis = c.attrs["axis"] % rank
    ins, nchw = operands(ex, c.args)
    if ttype(c).dtype in QUANT_DTYPES:
        qs = {ex.quant(i) for i in ins}
        if len(qs) != 1 or None in qs:
            raise NoMapping("quantized inputs with different or unknown scales")
    out = ex.out_tensor(c, nchw=nchw, like=ins[0])
    ex.w.op("CONCATENATION", ins, [out], Axis=TO_NCHW[axis] if nchw else axis, FusedActivationFunction=0)
    return TV(out, nchw)
