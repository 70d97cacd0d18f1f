"""ONNX RNN, GRU and LSTM, unrolled over a static sequence length into dense/elementwise calls.

The input projection of every time step is one ``nn.dense`` over the whole sequence; each step
then adds the recurrent projection, applies the gates, and the outputs are stacked back.
``sequence_lens`` is supported when it is a constant equal to the sequence length everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait.frontend.onnx_ops_loop import MAX_UNROLL, stack
from plait.frontend.onnx_node import NodeContext, Unsupported, short
from plait.errors import FrontendError
from plait.frontend.onnx_registry import Converter, converters
from plait.relay.expr import Expr

_RNN_ATTRS = ("activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout")

# activation -> (plait op, names of its alpha/beta attributes, ONNX defaults)
_ACTIVATIONS: dict[str, tuple[str, tuple[str, ...], tuple[float, ...]]] = {
    "Relu": ("nn.relu", (), ()), "Tanh": ("tanh", (), ()), "Sigmoid": ("sigmoid", (), ()),
    "Softsign": ("nn.softsign", (), ()), "Softplus": ("nn.softplus", (), ()),
    "LeakyRelu": ("nn.leaky_relu", ("alpha",), (0.01,)), "ThresholdedRelu": ("nn.thresholded_relu", ("alpha",), (1.0,)),
    "Elu": ("nn.elu", ("alpha",), (1.0,)), "HardSigmoid": ("nn.hard_sigmoid", ("alpha", "beta"), (0.2, 0.5)),
    "Affine": ("affine", ("alpha", "beta"), (1.0, 0.0)), "ScaledTanh": ("scaled_tanh", ("alpha", "beta"), (1.0, 1.0)),
}
_NAMES = {k.lower(): k for k in _ACTIVATIONS}


class _Acts:
    """The activation functions of every gate and direction, with their alpha/beta parameters."""

    def __init__(self, cx: NodeContext, defaults: list[str], n_dirs: int):
        names = list(cx.attr("activations", defaults * n_dirs))
        if len(names) != len(defaults) * n_dirs:
            raise FrontendError(f"expected {len(defaults) * n_dirs} activations, got {len(names)}")
        alphas, betas = list(cx.attr("activation_alpha", [])), list(cx.attr("activation_beta", []))
        self.funcs: list[tuple[str, dict[str, float]]] = []
        for name in names:
            key = _NAMES.get(name.lower())
            if key is None:
                raise Unsupported(f"activation '{name}' not supported")
            op, params, dflt = _ACTIVATIONS[key]
            values: dict[str, float] = {}
            for p, d in zip(params, dflt):
                src = alphas if p == "alpha" else betas
                values[p] = float(src.pop(0)) if src else d
            self.funcs.append((op, values))
        self.per_dir = len(defaults)

    def apply(self, cx: NodeContext, direction: int, gate: int, x: Expr) -> Expr:
        op, p = self.funcs[direction * self.per_dir + gate]
        dtype = x.checked_type.dtype  # type: ignore[union-attr]
        if op == "affine":
            return cx.call("add", cx.call("multiply", x, cx.constant(p["alpha"], dtype)), cx.constant(p["beta"], dtype))
        if op == "scaled_tanh":
            inner = cx.call("tanh", cx.call("multiply", x, cx.constant(p["beta"], dtype)))
            return cx.call("multiply", inner, cx.constant(p["alpha"], dtype))
        return cx.call(op, x, **p)


class _Recurrence:
    """Shared setup: layout, directions, weights per direction, initial states, outputs."""

    def __init__(self, cx: NodeContext, gates: int):
        self.cx = cx
        direction = cx.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise FrontendError(f"direction '{direction}' is not forward, reverse or bidirectional")
        self.dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        self.layout = cx.attr("layout", 0)
        if self.layout not in (0, 1) or cx.ndim(0) != 3:
            raise FrontendError(f"layout {self.layout} and an input of rank {cx.ndim(0)}: expected layout 0 or 1 "
                                "and rank 3")
        x = cx.expr(0)
        if self.layout:
            x = cx.call("transpose", x, axes=(1, 0, 2))
        self.x = x
        seq, batch, _ = x.checked_type.shape  # type: ignore[union-attr]
        if not isinstance(seq, int):
            raise Unsupported("the sequence length must be static")
        if not 0 < seq <= MAX_UNROLL:
            raise Unsupported(f"a sequence of {seq} steps cannot be unrolled (1 to {MAX_UNROLL})")
        self.seq, self.batch = seq, batch
        if cx.attr("hidden_size", 1) < 1:
            raise FrontendError(f"hidden_size is {cx.attr('hidden_size')}, it must be >= 1")
        self.hidden = cx.attr("hidden_size", None) or cx.static_shape(2, "R")[-1]
        self.gates = gates
        n_dirs = len(self.dirs)
        w, r = cx.shape(1), cx.shape(2)
        static = all(isinstance(d, int) for d in tuple(w) + tuple(r))
        if len(w) != 3 or (static and (tuple(w[:2]) != (n_dirs, gates * self.hidden)
                                       or tuple(r) != (n_dirs, gates * self.hidden, self.hidden))):
            raise FrontendError(f"W {short(w)} and R {short(r)} do not match {n_dirs} direction(s), {gates} gate(s) and "
                                f"hidden_size {self.hidden}")
        self.dtype = cx.dtype(0)
        if cx.has(4):
            lens = cx.const(4, "sequence_lens")
            if np.any(lens != seq):
                raise Unsupported("sequence_lens shorter than the sequence not supported")
        self.clip = cx.attr("clip", None)
        if self.clip is not None and not self.clip > 0:
            raise FrontendError(f"clip is {self.clip}, it must be > 0")

    def weight(self, index: int, d: int) -> Expr:
        return self.cx.call("take", self.cx.expr(index), self.cx.constant(d, "int64"), axis=0)

    def bias(self, d: int) -> Expr | None:
        """Wb + Rb of direction d, or None."""
        if not self.cx.has(3):
            return None
        b = self.weight(3, d)
        n = self.gates * self.hidden
        wb = self.cx.call("strided_slice", b, begin=(0,), end=(n,))
        rb = self.cx.call("strided_slice", b, begin=(n,), end=(2 * n,))
        return self.cx.call("add", wb, rb)

    def initial(self, index: int, d: int) -> Expr:
        cx = self.cx
        if not cx.has(index):
            if not isinstance(self.batch, int):
                raise Unsupported("a symbolic batch size needs an initial state")
            return cx.as_expr(cx.full((self.batch, self.hidden), 0, cx.dtype(0)))
        h = cx.expr(index)
        if self.layout:
            h = cx.call("transpose", h, axes=(1, 0, 2))
        return cx.call("take", h, cx.constant(d, "int64"), axis=0)

    def steps(self, d: int) -> list[int]:
        return list(range(self.seq))[::-1] if self.dirs[d] == "reverse" else list(range(self.seq))

    def projected(self, d: int) -> Expr:
        """X W^T (+ biases) for every step at once: [seq, batch, gates * hidden]."""
        xw = self.cx.call("nn.dense", self.x, self.weight(1, d))
        b = self.bias(d)
        return self.cx.call("add", xw, b) if b is not None else xw

    def gate_inputs(self, xw: Expr, t: int, h: Expr, r: Expr) -> list[Expr]:
        """The pre-activations of every gate at step t (before gate-specific terms)."""
        cx = self.cx
        pre = cx.call("add", cx.call("take", xw, cx.constant(t, "int64"), axis=0), cx.call("nn.dense", h, r))
        return self.split(pre)

    def split(self, e: Expr) -> list[Expr]:
        tup = self.cx.call("split", e, sections=(self.hidden,) * self.gates, axis=1)
        return [self.cx.get(tup, i) for i in range(self.gates)]

    def clipped(self, e: Expr) -> Expr:
        return self.cx.call("clip", e, a_min=-self.clip, a_max=self.clip) if self.clip is not None else e

    def outputs(self, ys: list[list[Expr]], finals: list[list[Expr]]) -> list[Any]:
        """Y [seq, dirs, batch, hidden] and each final state [dirs, batch, hidden], in the node's layout."""
        cx = self.cx
        per_dir = [stack(cx, y, 0) for y in ys]  # [seq, batch, hidden] each
        y = stack(cx, per_dir, 1)
        if self.layout:
            y = cx.call("transpose", y, axes=(2, 0, 1, 3))
        out: list[Any] = [y]
        for states in finals:
            s = stack(cx, states, 0)
            out.append(cx.call("transpose", s, axes=(1, 0, 2)) if self.layout else s)
        return out

    def one(self) -> Expr:
        return self.cx.constant(1, self.dtype)


def rnn(cx: NodeContext) -> object:
    rc = _Recurrence(cx, 1)
    acts = _Acts(cx, ["Tanh"], len(rc.dirs))
    ys, finals = [], []
    for d in range(len(rc.dirs)):
        xw, r, h = rc.projected(d), rc.weight(2, d), rc.initial(5, d)
        by_t: dict[int, Expr] = {}
        for t in rc.steps(d):
            (pre,) = rc.gate_inputs(xw, t, h, r)
            h = acts.apply(cx, d, 0, rc.clipped(pre))
            by_t[t] = h
        ys.append([by_t[t] for t in range(rc.seq)])
        finals.append(h)
    return rc.outputs(ys, [finals])


def gru(cx: NodeContext) -> object:
    rc = _Recurrence(cx, 3)
    acts = _Acts(cx, ["Sigmoid", "Tanh"], len(rc.dirs))
    lbr = cx.attr("linear_before_reset", 0)
    n = rc.hidden
    ys, finals = [], []
    for d in range(len(rc.dirs)):
        xw = cx.call("nn.dense", rc.x, rc.weight(1, d))  # biases are per gate here
        r_all = rc.weight(2, d)
        rz_r = cx.call("strided_slice", r_all, begin=(0,), end=(2 * n,))
        r_h = cx.call("strided_slice", r_all, begin=(2 * n,), end=(3 * n,))
        if cx.has(3):
            b = rc.weight(3, d)
            wb = rc.split(cx.reshape(cx.call("strided_slice", b, begin=(0,), end=(3 * n,)), (1, 3 * n)))
            rb = rc.split(cx.reshape(cx.call("strided_slice", b, begin=(3 * n,), end=(6 * n,)), (1, 3 * n)))
        else:
            wb = rb = None
        h = rc.initial(5, d)
        by_t: dict[int, Expr] = {}
        for t in rc.steps(d):
            xz, xr, xh = rc.split(cx.call("take", xw, cx.constant(t, "int64"), axis=0))
            hz_hr = cx.call("nn.dense", h, rz_r)
            tup = cx.call("split", hz_hr, sections=(n, n), axis=1)
            hz, hr = cx.get(tup, 0), cx.get(tup, 1)
            pre_z, pre_r = cx.call("add", xz, hz), cx.call("add", xr, hr)
            if wb is not None:
                pre_z = cx.call("add", pre_z, cx.call("add", wb[0], rb[0]))
                pre_r = cx.call("add", pre_r, cx.call("add", wb[1], rb[1]))
            z = acts.apply(cx, d, 0, rc.clipped(pre_z))
            r = acts.apply(cx, d, 0, rc.clipped(pre_r))
            if lbr:
                hh = cx.call("nn.dense", h, r_h)
                if rb is not None:
                    hh = cx.call("add", hh, rb[2])
                pre_h = cx.call("add", xh, cx.call("multiply", r, hh))
            else:
                pre_h = cx.call("add", xh, cx.call("nn.dense", cx.call("multiply", r, h), r_h))
                if rb is not None:
                    pre_h = cx.call("add", pre_h, rb[2])
            if wb is not None:
                pre_h = cx.call("add", pre_h, wb[2])
            hcand = acts.apply(cx, d, 1, rc.clipped(pre_h))
            h = cx.call("add", cx.call("multiply", cx.call("subtract", rc.one(), z), hcand), cx.call("multiply", z, h))
            by_t[t] = h
        ys.append([by_t[t] for t in range(rc.seq)])
        finals.append(h)
    return rc.outputs(ys, [finals])


def lstm(cx: NodeContext) -> object:
    if cx.attr("input_forget", 0):
        raise Unsupported("input_forget=1 not supported")
    rc = _Recurrence(cx, 4)
    acts = _Acts(cx, ["Sigmoid", "Tanh", "Tanh"], len(rc.dirs))
    ys, finals_h, finals_c = [], [], []
    for d in range(len(rc.dirs)):
        xw, r = rc.projected(d), rc.weight(2, d)
        h, c = rc.initial(5, d), rc.initial(6, d)
        peep = None
        if cx.has(7):
            p = rc.weight(7, d)
            peep = [cx.call("strided_slice", p, begin=(k * rc.hidden,), end=((k + 1) * rc.hidden,)) for k in range(3)]
        by_t: dict[int, Expr] = {}
        for t in rc.steps(d):
            pi, po, pf, pc = rc.gate_inputs(xw, t, h, r)
            if peep is not None:
                pi = cx.call("add", pi, cx.call("multiply", peep[0], c))
                pf = cx.call("add", pf, cx.call("multiply", peep[2], c))
            i = acts.apply(cx, d, 0, rc.clipped(pi))
            f = acts.apply(cx, d, 0, rc.clipped(pf))
            g = acts.apply(cx, d, 1, rc.clipped(pc))
            c = cx.call("add", cx.call("multiply", f, c), cx.call("multiply", i, g))
            if peep is not None:
                po = cx.call("add", po, cx.call("multiply", peep[1], c))
            o = acts.apply(cx, d, 0, rc.clipped(po))
            h = cx.call("multiply", o, acts.apply(cx, d, 2, c))
            by_t[t] = h
        ys.append([by_t[t] for t in range(rc.seq)])
        finals_h.append(h)
        finals_c.append(c)
    return rc.outputs(ys, [finals_h, finals_c])


CONVERTERS: list[Converter] = [
    *converters(["RNN"], rnn, attrs=_RNN_ATTRS, ops=()),
    *converters(["GRU"], gru, attrs=_RNN_ATTRS + ("linear_before_reset",),
                ops=("nn.dense", "strided_slice", "split", "add", "take", "multiply", "subtract", "reshape")),
    *converters(["LSTM"], lstm, attrs=_RNN_ATTRS + ("input_forget",), ops=("add", "multiply", "strided_slice")),
]
