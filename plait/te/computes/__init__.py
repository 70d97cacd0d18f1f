"""TE computes of the standard operators (placeholder: only `add` and `nn.relu` so far;
the computes engineer owns this package and replaces this file)."""

from __future__ import annotations

from plait import tir
from plait.te.registry import register_compute
from plait.te.tensor import compute


def _bcast_index(t, out_ndim, idx):
    off = out_ndim - t.ndim
    return tuple(0 if t.shape[k] == 1 else idx[off + k] for k in range(t.ndim))


@register_compute("add")
def _add(inputs, attrs, out_type):
    a, b = inputs
    shape = out_type.shape
    return compute(shape, lambda *i: a[_bcast_index(a, len(shape), i)] + b[_bcast_index(b, len(shape), i)],
                   name="T_add")


@register_compute("nn.relu")
def _relu(inputs, attrs, out_type):
    (x,) = inputs
    return compute(x.shape, lambda *i: tir.max(x[i], tir.const(0, x.dtype)), name="T_relu")
