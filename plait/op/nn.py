"""Neural-network operators (ONNX semantics, NCHW / OIHW): convolutions, matmul and dense, pooling,
and normalizations.

Spatial attributes follow one convention: ``padding`` is (top, left, bottom, right), ``strides``
and ``dilation`` are (h, w). float16 inputs are computed in float32 and rounded once, as ONNX
Runtime does. Symbolic dims flow through where the output dim is a copy (batch, channels); a
spatial dim computed from a symbol is ``"?"`` unless the window leaves it unchanged.

References are vectorized: convolutions and pools loop over the (small) kernel window only and
hand the channel contraction to one batched ``matmul``.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from plait.op._common import (
    ANY_DIM, Attrs, AttrSpec, Cost, Dim, OpPattern, RelError, TensorType, Type, as_tensor,
    broadcast_shapes, defop, dim_mul, norm_axis, numel, same_dtype, tensor_bytes,
)
from plait.op.tensor import compute_dtype, require_dtype

# ---- shared helpers ---------------------------------------------------------------------------


def _ints(attrs: Attrs, name: str, n: int, what: str, meaning: str, lo: int) -> tuple[int, ...]:
    """Attribute ``name`` as exactly ``n`` ints, each >= ``lo``; raises RelError naming ``what``."""
    v = attrs[name]
    if len(v) != n:
        raise RelError(f"{what}: {name}: expected {n} values ({meaning}), got {v}")
    if any(x < lo for x in v):
        raise RelError(f"{what}: {name}: expected values >= {lo}, got {v}")
    return tuple(v)


def _window(attrs: Attrs, what: str) -> tuple[tuple[int, int], tuple[int, int, int, int], tuple[int, int]]:
    """(strides, padding, dilation) of a 2-D windowed op, validated."""
    strides = _ints(attrs, "strides", 2, what, "h, w", 1)
    padding = _ints(attrs, "padding", 4, what, "top, left, bottom, right", 0)
    dilation = _ints(attrs, "dilation", 2, what, "h, w", 1)
    return strides, padding, dilation  # type: ignore[return-value]


def _rank(t: TensorType, n: int, what: str, layout: str) -> TensorType:
    if t.ndim != n:
        raise RelError(f"{what}: expected a {n}-D tensor {layout}, got {t}")
    return t


def _float_tensors(args: tuple[Type, ...], what: str, names: tuple[str, ...]) -> list[TensorType]:
    ts = [as_tensor(a, f"{what}: {n}") for a, n in zip(args, names)]
    same_dtype(ts, f"{what}: {', '.join(names)}")
    require_dtype(ts[0], "float", f"{what}: {names[0]}")
    return ts


def window_out(size: Dim, k: int, s: int, d: int, p0: int, p1: int, ceil_mode: bool = False,
               what: str = "", axis: str = "") -> Dim:
    """Output length of a sliding window (ONNX Conv / Pool). With ``ceil_mode`` a last window that
    would start beyond the input and left padding is dropped (as ONNX Runtime does)."""
    ext = d * (k - 1) + 1
    if isinstance(size, str):
        return size if ext - p0 - p1 == 1 and s == 1 else ANY_DIM
    span = size + p0 + p1 - ext
    if span < 0:
        raise RelError(f"{what}: {axis}: expected padded input size >= window size {ext}, "
                       f"got {size + p0 + p1} (input {size}, padding {p0} + {p1})")
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p0:
        out -= 1
    return out


def _fdtype(x: np.ndarray) -> np.dtype:
    return compute_dtype(x.dtype) if x.dtype.kind == "f" else x.dtype


def _taps(xp: np.ndarray, kh: int, kw: int, s: tuple[int, int], d: tuple[int, int], oh: int, ow: int):
    """Yield (i, j, view) for every kernel tap: the strided [..., oh, ow] view of ``xp`` it reads."""
    for i in range(kh):
        for j in range(kw):
            h0, w0 = i * d[0], j * d[1]
            yield i, j, xp[..., h0:h0 + s[0] * (oh - 1) + 1:s[0], w0:w0 + s[1] * (ow - 1) + 1:s[1]]


_WINDOW_ATTRS = (
    AttrSpec("strides", "ints", (1, 1), "window step (h, w)"),
    AttrSpec("padding", "ints", (0, 0, 0, 0), "implicit padding (top, left, bottom, right)"),
    AttrSpec("dilation", "ints", (1, 1), "spacing between kernel taps (h, w)"),
)

# ---- conv2d -------------------------------------------------------------------------------------


def _conv2d_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x, w = _float_tensors(args, "conv2d", ("data", "weight"))
    _rank(x, 4, "conv2d: data", "[N, C, H, W]")
    _rank(w, 4, "conv2d: weight", "[O, C/groups, KH, KW]")
    s, p, d = _window(attrs, "conv2d")
    g = attrs["groups"]
    if g < 1:
        raise RelError(f"conv2d: groups: expected a value >= 1, got {g}")
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if isinstance(c, int) and c % g:
        raise RelError(f"conv2d: input channels: expected a multiple of groups {g}, got {c}")
    if isinstance(o, int) and o % g:
        raise RelError(f"conv2d: output channels (weight dim 0): expected a multiple of groups {g}, got {o}")
    if isinstance(c, int) and isinstance(cg, int) and cg != c // g:
        raise RelError(f"conv2d: weight channels: expected {c // g} (input channels {c} / groups {g}), got {cg}")
    if not (isinstance(kh, int) and isinstance(kw, int)):
        raise RelError(f"conv2d: weight: expected a static kernel size, got {w}")
    oh = window_out(h, kh, s[0], d[0], p[0], p[2], what="conv2d", axis="height")
    ow = window_out(wd, kw, s[1], d[1], p[1], p[3], what="conv2d", axis="width")
    return TensorType((n, o, oh, ow), x.dtype)


def _conv2d_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, w = (np.asarray(a) for a in args)
    ct = _fdtype(x)
    s, p, d, g = attrs["strides"], attrs["padding"], attrs["dilation"], attrs["groups"]
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = window_out(h, kh, s[0], d[0], p[0], p[2])
    ow = window_out(wd, kw, s[1], d[1], p[1], p[3])
    xp = np.pad(x.astype(ct, copy=False), ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    xp = xp.reshape(n, g, cg, *xp.shape[2:])
    cols = np.empty((n, g, cg, kh, kw, oh, ow), ct)
    for i, j, view in _taps(xp, kh, kw, s, d, oh, ow):
        cols[:, :, :, i, j] = view
    wg = w.astype(ct, copy=False).reshape(g, o // g, cg * kh * kw)
    out = np.matmul(wg, cols.reshape(n, g, cg * kh * kw, oh * ow))  # [n, g, o/g, oh*ow]
    return out.reshape(n, o, oh, ow).astype(x.dtype, copy=False)


def _conv2d_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    x, w = args
    assert isinstance(w, TensorType)
    per_out = numel(w) / max(_static(w.shape[0]), 1)  # (C/groups) * KH * KW
    return Cost(flops=2.0 * numel(out) * per_out, bytes_read=tensor_bytes(x) + tensor_bytes(w),
                bytes_written=tensor_bytes(out))


def _static(d: Dim) -> int:
    return d if isinstance(d, int) else 1


defop("nn.conv2d", rel=_conv2d_rel, ref=_conv2d_ref, cost=_conv2d_cost, pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
      num_inputs=2, attrs=_WINDOW_ATTRS + (
          AttrSpec("groups", "int", 1, "number of channel groups (C for depthwise)"),
      ), doc="2-D convolution, data [N, C, H, W] * weight [O, C/groups, KH, KW] (ONNX Conv); bias is an add")

# ---- conv2d_transpose ---------------------------------------------------------------------------


def _tconv_params(attrs: Attrs) -> tuple:
    s, p, d = _window(attrs, "conv2d_transpose")
    op = _ints(attrs, "output_padding", 2, "conv2d_transpose", "h, w", 0)
    if op[0] >= s[0] or op[1] >= s[1]:
        raise RelError(f"conv2d_transpose: output_padding: expected values below the strides {s}, got {op}")
    return s, p, d, op


def _tconv_out(size: Dim, k: int, s: int, d: int, p0: int, p1: int, op: int, axis: str) -> Dim:
    if isinstance(size, str):
        return size if s == 1 and d * (k - 1) + op - p0 - p1 == 0 else ANY_DIM
    out = s * (size - 1) + op + d * (k - 1) + 1 - p0 - p1
    if out < 1:
        raise RelError(f"conv2d_transpose: {axis}: expected a positive output size, got {out} "
                       f"(input {size}, padding {p0} + {p1})")
    return out


def _tconv_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x, w = _float_tensors(args, "conv2d_transpose", ("data", "weight"))
    _rank(x, 4, "conv2d_transpose: data", "[N, C, H, W]")
    _rank(w, 4, "conv2d_transpose: weight", "[C, O/groups, KH, KW]")
    s, p, d, op = _tconv_params(attrs)
    g = attrs["groups"]
    if g < 1:
        raise RelError(f"conv2d_transpose: groups: expected a value >= 1, got {g}")
    n, c, h, wd = x.shape
    wc, og, kh, kw = w.shape
    if isinstance(c, int) and c % g:
        raise RelError(f"conv2d_transpose: input channels: expected a multiple of groups {g}, got {c}")
    if isinstance(c, int) and isinstance(wc, int) and wc != c:
        raise RelError(f"conv2d_transpose: weight dim 0: expected {c} (input channels), got {wc}")
    if not (isinstance(kh, int) and isinstance(kw, int)):
        raise RelError(f"conv2d_transpose: weight: expected a static kernel size, got {w}")
    oh = _tconv_out(h, kh, s[0], d[0], p[0], p[2], op[0], "height")
    ow = _tconv_out(wd, kw, s[1], d[1], p[1], p[3], op[1], "width")
    return TensorType((n, og if g == 1 else dim_mul(og, g), oh, ow), x.dtype)


def _tconv_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, w = (np.asarray(a) for a in args)
    ct = _fdtype(x)
    s, p, d, op = _tconv_params(attrs)
    g = attrs["groups"]
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    oh = _tconv_out(h, kh, s[0], d[0], p[0], p[2], op[0], "height")
    ow = _tconv_out(wd, kw, s[1], d[1], p[1], p[3], op[1], "width")
    cg = c // g
    # every input pixel contributes x * w[c, o, i, j] at (h*s + i*d, w*s + j*d) of the unpadded output
    wg = w.astype(ct, copy=False).reshape(g, cg, og * kh * kw).transpose(0, 2, 1)  # [g, og*kh*kw, cg]
    cols = np.matmul(wg, x.astype(ct, copy=False).reshape(n, g, cg, h * wd))  # [n, g, og*kh*kw, h*w]
    cols = cols.reshape(n, g, og, kh, kw, h, wd)
    full_h = max(s[0] * (h - 1) + d[0] * (kh - 1) + 1, p[0] + oh)
    full_w = max(s[1] * (wd - 1) + d[1] * (kw - 1) + 1, p[1] + ow)
    full = np.zeros((n, g, og, full_h, full_w), ct)
    for i in range(kh):
        for j in range(kw):
            h0, w0 = i * d[0], j * d[1]
            full[..., h0:h0 + s[0] * (h - 1) + 1:s[0], w0:w0 + s[1] * (wd - 1) + 1:s[1]] += cols[:, :, :, i, j]
    out = full[..., p[0]:p[0] + oh, p[1]:p[1] + ow]
    return np.ascontiguousarray(out.reshape(n, g * og, oh, ow)).astype(x.dtype, copy=False)


def _tconv_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    x, w = args
    assert isinstance(x, TensorType)
    # every input element meets (O/groups) * KH * KW weights
    per_in = numel(w) / max(_static(x.shape[1]), 1)
    return Cost(flops=2.0 * numel(x) * per_in, bytes_read=tensor_bytes(x) + tensor_bytes(w),
                bytes_written=tensor_bytes(out))


defop("nn.conv2d_transpose", rel=_tconv_rel, ref=_tconv_ref, cost=_tconv_cost,
      pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=2, attrs=_WINDOW_ATTRS + (
          AttrSpec("groups", "int", 1, "number of channel groups"),
          AttrSpec("output_padding", "ints", (0, 0), "extra rows/columns added at the bottom/right (h, w)"),
      ), doc="transposed 2-D convolution, weight [C, O/groups, KH, KW] (ONNX ConvTranspose)")

# ---- matmul, dense -----------------------------------------------------------------------------


def _numeric_pair(args: tuple[Type, ...], what: str, names: tuple[str, str]) -> tuple[TensorType, TensorType]:
    a, b = (as_tensor(t, f"{what}: {nm}") for t, nm in zip(args, names))
    same_dtype((a, b), f"{what}: {names[0]} and {names[1]}")
    require_dtype(a, "numeric", f"{what}: {names[0]}")
    return a, b


def _same_dim(x: Dim, y: Dim, what: str) -> None:
    if isinstance(x, int) and isinstance(y, int) and x != y:
        raise RelError(f"{what}: expected {x}, got {y}")


def _matmul_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    a, b = _numeric_pair(args, "matmul", ("a", "b"))
    for t, nm in ((a, "a"), (b, "b")):
        if t.ndim == 0:
            raise RelError(f"matmul: {nm}: expected a tensor of rank >= 1, got {t}")
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    _same_dim(ka, kb, f"matmul: {'length' if b.ndim == 1 else 'rows'} of b (columns of a)")
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    rows = (a.shape[-2],) if a.ndim >= 2 else ()
    cols = (b.shape[-1],) if b.ndim >= 2 else ()
    return TensorType(batch + rows + cols, a.dtype)


def _matmul_ref(args: list, attrs: Attrs) -> np.ndarray:
    a, b = (np.asarray(v) for v in args)
    ct = _fdtype(a)
    return np.asarray(np.matmul(a.astype(ct, copy=False), b.astype(ct, copy=False))).astype(a.dtype, copy=False)


def _contract_cost(k_of: Callable[[TensorType, TensorType], Dim]) -> Callable[[tuple[Type, ...], Type, Attrs], Cost]:
    def cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
        a, b = args
        assert isinstance(a, TensorType) and isinstance(b, TensorType)
        k = _static(k_of(a, b))
        return Cost(flops=2.0 * numel(out) * k, bytes_read=tensor_bytes(a) + tensor_bytes(b),
                    bytes_written=tensor_bytes(out))

    return cost


defop("nn.matmul", rel=_matmul_rel, ref=_matmul_ref, cost=_contract_cost(lambda a, b: a.shape[-1]),
      pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=2,
      doc="matrix product with numpy matmul semantics (1-D promotion, broadcast batch dims; ONNX MatMul)")


def _dense_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x, w = _numeric_pair(args, "dense", ("data", "weight"))
    if x.ndim == 0:
        raise RelError(f"dense: data: expected a tensor of rank >= 1, got {x}")
    _rank(w, 2, "dense: weight", "[units, K]")
    _same_dim(x.shape[-1], w.shape[1], "dense: weight dim 1 (data dim -1)")
    return TensorType(x.shape[:-1] + (w.shape[0],), x.dtype)


def _dense_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, w = (np.asarray(v) for v in args)
    ct = _fdtype(x)
    return np.asarray(np.matmul(x.astype(ct, copy=False), w.astype(ct, copy=False).T)).astype(x.dtype, copy=False)


defop("nn.dense", rel=_dense_rel, ref=_dense_ref, cost=_contract_cost(lambda x, w: x.shape[-1]),
      pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=2,
      doc="data [..., K] @ weight[N, K].T -> [..., N] (ONNX Gemm with transB=1); bias is an add")

# ---- pooling ----------------------------------------------------------------------------------


def _pool_rel(kind: str) -> Callable[[tuple[Type, ...], Attrs], Type]:
    what = "max_pool2d" if kind == "max" else "avg_pool2d"

    def rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
        x = _rank(as_tensor(args[0], f"{what}: data"), 4, f"{what}: data", "[N, C, H, W]")
        require_dtype(x, "numeric" if kind == "max" else "float", f"{what}: data")
        k = _ints(attrs, "pool_size", 2, what, "h, w", 1)
        s, p, d = _window(attrs, what)
        n, c, h, w = x.shape
        oh = window_out(h, k[0], s[0], d[0], p[0], p[2], attrs["ceil_mode"], what, "height")
        ow = window_out(w, k[1], s[1], d[1], p[1], p[3], attrs["ceil_mode"], what, "width")
        return TensorType((n, c, oh, ow), x.dtype)

    return rel


def _lowest(dtype: np.dtype) -> object:
    return np.finfo(dtype).min if dtype.kind == "f" else np.iinfo(dtype).min


def _pool_ref(kind: str) -> Callable[[list, Attrs], np.ndarray]:
    def ref(args: list, attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        k, s, p, d = attrs["pool_size"], attrs["strides"], attrs["padding"], attrs["dilation"]
        n, c, h, w = x.shape
        oh = window_out(h, k[0], s[0], d[0], p[0], p[2], attrs["ceil_mode"])
        ow = window_out(w, k[1], s[1], d[1], p[1], p[3], attrs["ceil_mode"])
        # ceil_mode windows may reach past the bottom/right padding: pad further (never counted)
        xh = max((oh - 1) * s[0] + d[0] * (k[0] - 1) + 1 - (h + p[0] + p[2]), 0)
        xw = max((ow - 1) * s[1] + d[1] * (k[1] - 1) + 1 - (w + p[1] + p[3]), 0)
        pads = ((0, 0), (0, 0), (p[0], p[2] + xh), (p[1], p[3] + xw))
        if kind == "max":
            # padding never wins; a window of padding only gives the dtype's lowest value (as ORT)
            xp = np.pad(x, pads, constant_values=_lowest(x.dtype))
            out = np.full((n, c, oh, ow), _lowest(x.dtype), x.dtype)
            for _, _, view in _taps(xp, k[0], k[1], s, d, oh, ow):
                np.maximum(out, view, out=out)
            return out
        ct = _fdtype(x)
        xp = np.pad(x.astype(ct, copy=False), pads)
        total = np.zeros((n, c, oh, ow), ct)
        for _, _, view in _taps(xp, k[0], k[1], s, d, oh, ow):
            total += view
        # the divisor: taps on the input (or, with count_include_pad, on the explicit padding)
        valid = np.pad(np.ones((h, w), ct), ((p[0], p[2]), (p[1], p[3])),
                       constant_values=1 if attrs["count_include_pad"] else 0)
        valid = np.pad(valid, ((0, xh), (0, xw)))
        count = np.zeros((oh, ow), ct)
        for _, _, view in _taps(valid, k[0], k[1], s, d, oh, ow):
            count += view
        with np.errstate(divide="ignore", invalid="ignore"):
            return (total / count).astype(x.dtype, copy=False)

    return ref


def _pool_cost(extra: float) -> Callable[[tuple[Type, ...], Type, Attrs], Cost]:
    def cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
        taps = math.prod(attrs["pool_size"])
        return Cost(flops=(taps + extra) * numel(out), bytes_read=tensor_bytes(args[0]),
                    bytes_written=tensor_bytes(out))

    return cost


_POOL_ATTRS = (AttrSpec("pool_size", "ints", doc="window size (h, w)"),) + _WINDOW_ATTRS + (
    AttrSpec("ceil_mode", "bool", False, "round the output size up (a last window must start inside the "
                                          "input or its top/left padding)"),
)
defop("nn.max_pool2d", rel=_pool_rel("max"), ref=_pool_ref("max"), cost=_pool_cost(0.0),
      pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=1, attrs=_POOL_ATTRS,
      doc="2-D max pooling over [N, C, H, W]; padding never wins (ONNX MaxPool)")
defop("nn.avg_pool2d", rel=_pool_rel("avg"), ref=_pool_ref("avg"), cost=_pool_cost(1.0),
      pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=1, attrs=_POOL_ATTRS + (
          AttrSpec("count_include_pad", "bool", False, "divide by the window size including explicit padding"),
      ), doc="2-D average pooling over [N, C, H, W] (ONNX AveragePool)")


def _global_pool_rel(kind: str) -> Callable[[tuple[Type, ...], Attrs], Type]:
    what = f"global_{kind}_pool2d"

    def rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
        x = as_tensor(args[0], f"{what}: data")
        if x.ndim < 3:
            raise RelError(f"{what}: data: expected a tensor [N, C, spatial...] of rank >= 3, got {x}")
        require_dtype(x, "numeric" if kind == "max" else "float", f"{what}: data")
        return TensorType(x.shape[:2] + (1,) * (x.ndim - 2), x.dtype)

    return rel


def _global_pool_ref(kind: str) -> Callable[[list, Attrs], np.ndarray]:
    def ref(args: list, attrs: Attrs) -> np.ndarray:
        x = np.asarray(args[0])
        axes = tuple(range(2, x.ndim))
        if kind == "max":
            return np.max(x, axis=axes, keepdims=True)
        return np.mean(x, axis=axes, keepdims=True, dtype=_fdtype(x)).astype(x.dtype, copy=False)

    return ref


def _global_pool_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    return Cost(flops=numel(args[0]), bytes_read=tensor_bytes(args[0]), bytes_written=tensor_bytes(out))


for _kind in ("avg", "max"):
    defop(f"nn.global_{_kind}_pool2d", rel=_global_pool_rel(_kind), ref=_global_pool_ref(_kind),
          cost=_global_pool_cost, pattern=OpPattern.OUT_ELEMWISE_FUSABLE, num_inputs=1,
          doc=f"{_kind} over all spatial dims -> [N, C, 1, 1] (ONNX Global{_kind.capitalize()}Pool)")

# ---- normalizations -----------------------------------------------------------------------------

_EPS = AttrSpec("epsilon", "float", 1e-5, "added to the variance before the square root")


def _param_shape(t: TensorType, want: tuple[Dim, ...], what: str) -> None:
    ok = t.ndim == len(want) and all(isinstance(a, str) or isinstance(b, str) or a == b
                                     for a, b in zip(t.shape, want))
    if not ok:
        raise RelError(f"{what}: expected shape {want}, got {tuple(t.shape)}")


def _bn_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    names = ("data", "gamma", "beta", "mean", "var")
    x, *params = _float_tensors(args, "batch_norm", names)
    c = x.shape[norm_axis(attrs["axis"], x.ndim, "batch_norm: axis")]
    for t, nm in zip(params, names[1:]):
        _param_shape(t, (c,), f"batch_norm: {nm}")
    return x


def _bn_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, gamma, beta, mean, var = (np.asarray(a) for a in args)
    ct = _fdtype(x)
    axis = norm_axis(attrs["axis"], x.ndim)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    g, b, m, v = (a.astype(ct, copy=False).reshape(shape) for a in (gamma, beta, mean, var))
    y = (x.astype(ct, copy=False) - m) / np.sqrt(v + ct.type(attrs["epsilon"])) * g + b
    return y.astype(x.dtype, copy=False)


def _norm_cost(flops_per_element: float) -> Callable[[tuple[Type, ...], Type, Attrs], Cost]:
    def cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
        return Cost(flops=flops_per_element * numel(out), bytes_read=sum(tensor_bytes(a) for a in args),
                    bytes_written=tensor_bytes(out))

    return cost


defop("nn.batch_norm", rel=_bn_rel, ref=_bn_ref, cost=_norm_cost(2.0), pattern=OpPattern.OPAQUE,
      num_inputs=5, attrs=(AttrSpec("axis", "int", 1, "the channel axis"), _EPS),
      doc="inference batch normalization with given statistics (ONNX BatchNormalization); one output")


def _moments_norm(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) over ``axes``; float16 is computed in float32 (returned as such)."""
    ct = _fdtype(x)
    xc = x.astype(ct, copy=False)
    mean = xc.mean(axis=axes, keepdims=True)
    diff = xc - mean
    var = (diff * diff).mean(axis=axes, keepdims=True)
    return diff / np.sqrt(var + ct.type(eps))


def _ln_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x, *params = _float_tensors(args, "layer_norm", ("data", "gamma", "beta")[:len(args)])
    if x.ndim == 0:
        raise RelError(f"layer_norm: data: expected a tensor of rank >= 1, got {x}")
    axis = norm_axis(attrs["axis"], x.ndim, "layer_norm: axis")
    norm = x.shape[axis:]
    for t, nm in zip(params, ("gamma", "beta")):
        # unidirectional broadcast: every trailing dim of the parameter is 1 or the data's dim
        fits = t.ndim <= len(norm) and all(isinstance(p, str) or isinstance(d, str) or p in (1, d)
                                           for p, d in zip(reversed(t.shape), reversed(norm)))
        if not fits:
            raise RelError(f"layer_norm: {nm}: expected a shape that broadcasts to the normalized shape "
                           f"{tuple(norm)}, got {tuple(t.shape)}")
    return x


def _ln_ref(args: list, attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    axis = norm_axis(attrs["axis"], x.ndim)
    y = _moments_norm(x, tuple(range(axis, x.ndim)), attrs["epsilon"])
    for i, p in enumerate(args[1:]):
        p = np.asarray(p).astype(y.dtype, copy=False)
        y = y * p if i == 0 else y + p
    return y.astype(x.dtype, copy=False)


defop("nn.layer_norm", rel=_ln_rel, ref=_ln_ref, cost=_norm_cost(8.0), pattern=OpPattern.OPAQUE,
      num_inputs=(2, 3), attrs=(AttrSpec("axis", "int", -1, "first normalized axis: normalize over [axis, ndim)"),
                                _EPS),
      doc="layer normalization; gamma (and optional beta) broadcast to the normalized axes "
          "(ONNX LayerNormalization, computed in float32 for float16)")


def _in_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x, gamma, beta = _float_tensors(args, "instance_norm", ("data", "gamma", "beta"))
    if x.ndim < 3:
        raise RelError(f"instance_norm: data: expected a tensor [N, C, spatial...] of rank >= 3, got {x}")
    for t, nm in ((gamma, "gamma"), (beta, "beta")):
        _param_shape(t, (x.shape[1],), f"instance_norm: {nm}")
    return x


def _in_ref(args: list, attrs: Attrs) -> np.ndarray:
    x, gamma, beta = (np.asarray(a) for a in args)
    y = _moments_norm(x, tuple(range(2, x.ndim)), attrs["epsilon"])
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = y * gamma.astype(y.dtype).reshape(shape) + beta.astype(y.dtype).reshape(shape)
    return y.astype(x.dtype, copy=False)


defop("nn.instance_norm", rel=_in_rel, ref=_in_ref, cost=_norm_cost(8.0), pattern=OpPattern.OPAQUE,
      num_inputs=3, attrs=(_EPS,),
      doc="instance normalization over the spatial dims of [N, C, ...] (ONNX InstanceNormalization)")


def _lrn_rel(args: tuple[Type, ...], attrs: Attrs) -> Type:
    x = require_dtype(as_tensor(args[0], "lrn: data"), "float", "lrn: data")
    if x.ndim < 3:
        raise RelError(f"lrn: data: expected a tensor [N, C, spatial...] of rank >= 3, got {x}")
    if attrs["size"] < 1:
        raise RelError(f"lrn: size: expected a value >= 1, got {attrs['size']}")
    return x


def _lrn_ref(args: list, attrs: Attrs) -> np.ndarray:
    x = np.asarray(args[0])
    ct = _fdtype(x)
    size = attrs["size"]
    lo, hi = (size - 1) // 2, size // 2  # channels c - lo .. c + hi
    sq = np.square(x.astype(ct, copy=False))
    sqp = np.pad(sq, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
    c = x.shape[1]
    acc = np.zeros_like(sq)
    for i in range(size):
        acc += sqp[:, i:i + c]
    scale = ct.type(attrs["bias"]) + ct.type(attrs["alpha"] / size) * acc
    return (x.astype(ct, copy=False) / scale ** ct.type(attrs["beta"])).astype(x.dtype, copy=False)


def _lrn_cost(args: tuple[Type, ...], out: Type, attrs: Attrs) -> Cost:
    return Cost(flops=(2.0 * attrs["size"] + 4.0) * numel(out), bytes_read=tensor_bytes(args[0]),
                bytes_written=tensor_bytes(out))


defop("nn.lrn", rel=_lrn_rel, ref=_lrn_ref, cost=_lrn_cost, pattern=OpPattern.OPAQUE, num_inputs=1, attrs=(
    AttrSpec("size", "int", doc="number of channels summed over (c - (size-1)//2 .. c + size//2)"),
    AttrSpec("alpha", "float", 1e-4, "scale of the sum of squares (divided by size)"),
    AttrSpec("beta", "float", 0.75, "exponent"),
    AttrSpec("bias", "float", 1.0, "added to the scaled sum of squares"),
), doc="local response normalization across channels (ONNX LRN)")
