"""The machinery of the TFLite exporter (:mod:`plait.frontend.tflite_export`): :class:`Exporter` walks a
Relay function from its results, converting each value on demand into a TFLite tensor (:class:`TV`)
through the converters of :data:`CONVERTERS` (filled by :mod:`plait.frontend.tflite_export_ops` and
:mod:`plait.frontend.tflite_export_quant`), and writes them with
:class:`~plait.frontend.tflite_write.TFLiteWriter`.

Layout: TFLite is channels-last. A 4-D Relay value that plait holds channels-first (the result of a
convolution or a pool, or the importer's ``transpose(x, axes=(0, 3, 1, 2))``) is a *view* of an NHWC
TFLite tensor (``TV.nchw``): the Relay value is ``transpose(tensor, (0, 3, 1, 2))``. Spatial operators
and the elementwise operators between them work on the NHWC tensor directly; a TRANSPOSE is written
only where a Relay value is needed in plait's order (a reshape, a dense, a result) or where a
channels-first value coming from ONNX meets a spatial operator.

Quantization: an int8 tensor's ``(scale, zero_point)`` comes from the call that computes it (call meta
``tflite_q``, recorded by the TFLite importer, or the explicit arguments of ``qnn.quantize``), from the
operator's input (``tflite_qin``: a model input's), or from the tensor it aliases (a reshape or a
pool keeps its input's).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from plait.errors import FrontendError
from plait.frontend.tflite_write import TFLiteWriter
from plait.ir.types import TensorType
from plait.relay.expr import Call, Constant, Expr, Function, Tuple, Var

TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)
QUANT_DTYPES = ("int8", "uint8", "int16")


class TFLiteExportError(FrontendError):
    """A Relay function cannot be written as TFLite (an operator or a form without a mapping)."""


class NoMapping(Exception):
    """Raised by a converter: this call has no TFLite mapping (the message is the reason)."""


@dataclass(frozen=True)
class TV:
    """A Relay value as a TFLite tensor: its index, and whether the Relay value is the channels-first
    view ``transpose(tensor, (0, 3, 1, 2))`` of the (NHWC) tensor."""

    index: int
    nchw: bool = False


Converter = Callable[["Exporter", Call, int], TV]
CONVERTERS: dict[str, Converter] = {}
PATTERN_PARTS = ("qnn.conv2d", "qnn.dense", "sign")  # converted only inside a pattern (a requantize's, QUANTIZE's)
FUSABLE: set[str] = set()  # plait operators whose converter takes a fused activation (code != 0)


def converter(*names: str, fusable: bool = False) -> Callable[[Converter], Converter]:
    """Register ``fn(exporter, call, fused_activation) -> TV`` for the plait operators ``names``."""

    def deco(fn: Converter) -> Converter:
        for n in names:
            if n in CONVERTERS:
                raise AssertionError(f"plait operator {n} has two TFLite converters")
            CONVERTERS[n] = fn
            if fusable:
                FUSABLE.add(n)
        return fn
    return deco


def ttype(e: Expr) -> TensorType:
    t = e.checked_type
    if not isinstance(t, TensorType):
        raise NoMapping(f"a value of type {t} (TFLite takes tensors)")
    if any(not isinstance(d, (int, np.integer)) for d in t.shape):
        raise NoMapping(f"a value of type {t} has symbolic dimensions (TFLite takes static shapes)")
    return t


def call_label(c: Call) -> str:
    name = c.meta.get("name") if c.meta else None
    op = getattr(c.op, "name", str(c.op))
    return f"'{name}'" if name else f"of {op}"


class Exporter:
    """One Relay function -> one TFLite subgraph (see the module's docstring)."""

    def __init__(self, fn: Function, description: str = "plait"):
        self.fn = fn
        self.w = TFLiteWriter(description)
        self.memo: dict[int, TV] = {}
        self.keep: list[Expr] = []  # the memo is keyed by id(): keep the nodes alive
        self.views: dict[tuple[int, bool], int] = {}  # (tensor, to nhwc?) -> its transposed tensor
        self.alias: dict[int, int] = {}  # tensor -> the tensor whose quantization it shares
        self.used: set[str] = set()
        self.uses: dict[int, int] = {}
        from plait.relay.visitor import post_order

        for e in post_order(fn.body):
            for a in (e.args if isinstance(e, Call) else e.fields if isinstance(e, Tuple) else ()):
                self.uses[id(a)] = self.uses.get(id(a), 0) + 1

    # ---- names and tensors --------------------------------------------------------------------
    def name(self, hint: str) -> str:
        base = hint or "t"
        n, k = base, 1
        while n in self.used:
            n, k = f"{base}_{k}", k + 1
        self.used.add(n)
        return n

    def tensor(self, hint: str, shape: Any, dtype: str, quant: Any = None) -> int:
        return self.w.tensor(self.name(hint), tuple(int(d) for d in shape), dtype, quant=quant)

    def const(self, hint: str, value: np.ndarray, quant: Any = None) -> int:
        arr = np.ascontiguousarray(value)
        return self.w.const(self.name(hint), arr, quant=quant, dtype=arr.dtype.name)

    def out_tensor(self, c: Call, nchw: bool, quant: Any = None, like: int | None = None,
                   moves: bool = False) -> int:
        """The output tensor of call ``c`` (NHWC when ``nchw``: its Relay type is the view's). ``moves``:
        ``c`` only moves the data of ``like`` (a RESHAPE, a TRANSPOSE), so the output has its quantization
        whatever the call's meta records (the importer's transposes carry their consumer's meta)."""
        t = ttype(c)
        shape = tuple(t.shape[p] for p in TO_NHWC) if nchw else t.shape
        hint = str(c.meta.get("name", "")) if c.meta else ""
        i = self.tensor(hint or getattr(c.op, "name", "t").replace(".", "_"), shape, t.dtype)
        if t.dtype in QUANT_DTYPES:
            recorded = c.meta.get("tflite_q") if c.meta else None
            qin = c.meta.get("tflite_qin") if c.meta else None
            if like is not None and self.quant(like) is None and qin and qin[0] and \
                    self.w.tensors[like].dtype in QUANT_DTYPES:
                self.set_quant(like, qin[0])  # e.g. a model input read first by a RESHAPE
            if quant is not None:
                self.set_quant(i, quant)
            elif moves and like is not None:
                self.alias[i] = like
            elif recorded:
                self.set_quant(i, recorded)
            elif like is not None:
                self.alias[i] = like
        return i

    # ---- quantization -------------------------------------------------------------------------
    def root(self, i: int) -> int:
        while i in self.alias:
            i = self.alias[i]
        return i

    def quant(self, i: int) -> tuple[float, int] | None:
        """A per-tensor quantized tensor's ``(scale, zero_point)`` (None: not known yet)."""
        q = self.w.tensors[self.root(i)].quant
        if q is None:
            return None
        s, z, _ = q
        return (float(s[0]), int(z[0])) if s.size == 1 else None

    def set_quant(self, i: int, q: Any) -> None:
        from plait.frontend.tflite_write import _quant

        self.w.tensors[self.root(i)].quant = _quant(q)

    def in_quant(self, i: int, c: Call, k: int, what: str = "") -> tuple[float, int]:
        """The quantization of tensor ``i``, input ``k`` of the TFLite operator of call ``c``: the tensor's,
        else the one the call's meta records (``tflite_qin``), which the tensor then takes."""
        q = self.quant(i)
        if q is not None:
            return q
        qin = c.meta.get("tflite_qin") if c.meta else None
        if qin and k < len(qin) and qin[k]:
            self.set_quant(i, qin[k])
            return float(qin[k][0]), int(qin[k][1])
        raise NoMapping(f"{what or f'input {k}'} is {self.w.tensors[i].dtype} without known quantization "
                        f"parameters (a model imported from TFLite records them in call meta 'tflite_qin')")

    @staticmethod
    def out_quant(c: Call, zp: int | None = None) -> tuple[float, int]:
        """The output quantization call ``c`` records (meta ``tflite_q``)."""
        q = c.meta.get("tflite_q") if c.meta else None
        if not q:
            raise NoMapping("its int8 output's scale is not known (a model imported from TFLite records it in "
                            "call meta 'tflite_q')")
        if zp is not None and int(q[1]) != zp:
            raise NoMapping(f"its output zero point {zp} differs from the recorded {q[1]}")
        return float(q[0]), int(q[1])

    # ---- values -------------------------------------------------------------------------------
    def value(self, e: Expr, fused: int = 0) -> TV:
        """The TFLite tensor of Relay value ``e`` (converted now if it was not)."""
        tv = self.memo.get(id(e))
        if tv is not None and not fused:
            return tv
        if isinstance(e, Constant):
            tv = TV(self.const("const", e.data))
        elif isinstance(e, Var):
            raise TFLiteExportError(f"'{e.name_hint}' is not a parameter of the exported function")
        elif isinstance(e, Call):
            if isinstance(e.op, Function) or not hasattr(e.op, "name") or not hasattr(e.op, "pattern"):
                raise TFLiteExportError(f"call {call_label(e)} calls a function: export one region function at a "
                                        "time (export_region), or a module before partitioning")
            fn = CONVERTERS.get(e.op.name)
            if fn is None:
                raise TFLiteExportError(f"cannot export to TFLite: operator {e.op.name} (call {call_label(e)}) has "
                                        f"no TFLite mapping")
            try:
                tv = fn(self, e, fused)
            except NoMapping as exc:
                raise TFLiteExportError(f"cannot export to TFLite: operator {e.op.name} (call {call_label(e)}): "
                                        f"{exc}") from None
        else:
            raise TFLiteExportError(f"cannot export a {type(e).__name__} to TFLite (only operator calls, constants "
                                    "and a tuple of results)")
        self.memo[id(e)] = tv
        self.keep.append(e)
        return tv

    def single_use(self, e: Expr) -> bool:
        return self.uses.get(id(e), 0) == 1 and id(e) not in self.memo

    def plain(self, e: Expr | TV, hint: str = "") -> int:
        """A tensor holding the Relay value in plait's order (a TRANSPOSE for a channels-first view)."""
        tv = e if isinstance(e, TV) else self.value(e)
        return self.transposed(tv.index, TO_NCHW, hint) if tv.nchw else tv.index

    def nhwc(self, e: Expr, hint: str = "") -> int:
        """The NHWC tensor of a 4-D channels-first Relay value (a TRANSPOSE when it is not a view)."""
        if isinstance(e, Constant):
            data = e.data
            if data.ndim > 4:
                raise NoMapping(f"a constant of rank {data.ndim} next to a channels-first value")
            data = data.reshape((1,) * (4 - data.ndim) + data.shape)
            return self.const("const", np.ascontiguousarray(np.transpose(data, TO_NHWC)))
        tv = self.value(e)
        if tv.nchw:
            return tv.index
        if len(self.w.tensors[tv.index].shape) != 4:
            raise NoMapping(f"expected a 4-D value, got {list(self.w.tensors[tv.index].shape)}")
        return self.transposed(tv.index, TO_NHWC, hint)

    def transposed(self, i: int, perm: tuple[int, ...], hint: str = "") -> int:
        key = (i, perm == TO_NHWC)
        if key in self.views:
            return self.views[key]
        src = self.w.tensors[i]
        shape = tuple(src.shape[p] for p in perm)
        out = self.tensor(f"{hint or src.name}_{'nhwc' if perm == TO_NHWC else 'nchw'}", shape, src.dtype)
        if src.dtype in QUANT_DTYPES:
            self.alias[out] = i
        self.w.op("TRANSPOSE", [i, self.const("perm", np.array(perm, np.int32))], [out])
        self.views[key] = out
        return out

    # ---- the function -------------------------------------------------------------------------
    @staticmethod
    def check_mapped(body: Expr) -> None:
        """Refuse a function with operators without a converter, naming the first in execution order."""
        from plait.relay.visitor import post_order

        missing = [e for e in post_order(body) if isinstance(e, Call) and hasattr(e.op, "pattern")
                   and e.op.name not in CONVERTERS and e.op.name not in PATTERN_PARTS]
        if missing:
            first = missing[0]
            more = sorted({e.op.name for e in missing[1:]} - {first.op.name})
            also = f" (also unmapped: {', '.join(more)})" if more else ""
            raise TFLiteExportError(f"cannot export to TFLite: operator {first.op.name} (call {call_label(first)}) "
                                    f"has no TFLite mapping{also}")

    def run(self, input_names: Any = None, output_names: Any = None, channels_last: bool = False) -> bytes:
        """Write the function; ``channels_last``: its 4-D parameters and results (channels-first in plait)
        are NHWC tensors in the file."""
        try:
            return self._run(input_names, output_names, channels_last)
        except NoMapping as exc:  # a parameter's or a result's type
            raise TFLiteExportError(f"cannot export to TFLite: {exc}") from None

    def _run(self, input_names: Any, output_names: Any, channels_last: bool) -> bytes:
        ins = []
        for k, p in enumerate(self.fn.params):
            t = ttype(p)
            name = input_names[k] if input_names and k < len(input_names) else p.name_hint
            last = channels_last and t.ndim == 4
            i = self.tensor(str(name), tuple(t.shape[j] for j in TO_NHWC) if last else t.shape, t.dtype)
            self.memo[id(p)] = TV(i, nchw=last)
            self.keep.append(p)
            ins.append(i)
        body = self.fn.body
        self.check_mapped(body)
        results = list(body.fields) if isinstance(body, Tuple) else [body]
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 20000))
        try:
            outs = [self.nhwc(r) if channels_last and ttype(r).ndim == 4 else self.plain(r) for r in results]
        finally:
            sys.setrecursionlimit(old)
        if len(set(outs)) != len(outs) or set(outs) & set(ins):
            raise TFLiteExportError("a result of the function is one of its parameters or another result; "
                                    "TFLite outputs must be distinct computed tensors")
        for k, i in enumerate(outs):
            if output_names and k < len(output_names):
                self.used.discard(self.w.tensors[i].name)
                self.w.tensors[i].name = self.name(str(output_names[k]))
        for t_index, t in enumerate(self.w.tensors):
            if t.dtype in QUANT_DTYPES and t.data is None and self.quant(t_index) is None:
                raise TFLiteExportError(f"tensor '{t.name}' is {t.dtype} without known quantization parameters")
            if t_index in self.alias:
                t.quant = self.w.tensors[self.root(t_index)].quant
        return self.w.finish(ins, outs)
