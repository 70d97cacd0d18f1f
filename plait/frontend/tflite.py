"""TFLite frontend: ``from_tflite(bytes) -> IRModule`` and ``load_tflite(path) -> IRModule``.

The file is read and checked by :mod:`plait.frontend.tflite_read`. The model is the subgraph of its
first signature (``signature=`` picks another by its key), or subgraph 0 when it has none; the
signature names its inputs and outputs, else the tensors' names do. Inputs become the parameters of
``@main`` with the tensors' dtypes (an int8 model takes int8 arrays), constants become constants, and
the operators are converted in the file's order (which TFLite requires to be an execution order) by
the converters of :mod:`plait.frontend.tflite_ops` and :mod:`plait.frontend.tflite_ops_nn`. Every
call carries ``meta`` ``name`` (the name of the operator's first output tensor) and ``op_type`` (the
builtin operator's name, e.g. ``CONV_2D``), which placement rules and ``explain`` show.

Arithmetic is TFLite's (docs/frontend.md): integer operators are imported with TensorFlow Lite's
fixed-point requantization and TensorFlow Lite Micro's reference kernels (``qnn.fixed_softmax``,
``qnn.avg_pool2d``), so outputs equal TensorFlow Lite Micro's bit for bit. Tensors are NHWC, as in the
file; the operators plait computes channels-first (convolutions, pools) read a transposed value, and
the importer keeps a value channels-first through the elementwise operators that follow, so a
transpose is left only where an operator needs the NHWC order back (a reshape, a model output).

Unsupported operators are collected over the whole subgraph and reported at once, each with its
index and name (:class:`~plait.errors.UnsupportedError`); a damaged file is a
:class:`~plait.errors.FrontendError` naming what and where.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import numpy as np

from plait.errors import FrontendError, PlaitError, UnsupportedError
from plait.frontend import (
    tflite_ops, tflite_ops_hybrid, tflite_ops_index, tflite_ops_matrix, tflite_ops_nn, tflite_ops_qelem,
    tflite_ops_reduce, tflite_ops_shape,
)
from plait.frontend.tflite_context import TO_NHWC, OpContext, Unsupported, Val
from plait.frontend.tflite_read import TModel, TOp, TSubgraph, TTensor, is_tflite, read_model
from plait.ir.types import TensorType
from plait.relay.expr import Constant, Expr, Function, Tuple, Var
from plait.relay.infer import infer_expr, infer_type
from plait.relay.module import IRModule

__all__ = ["from_tflite", "is_tflite", "load_tflite", "converters"]

def load_tflite(path: str | os.PathLike, *, signature: str | None = None) -> IRModule:
    """Read a ``.tflite`` file and import it (see the module's docstring)."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            buf = f.read()
    except OSError as exc:
        raise FrontendError(f"cannot load TFLite model '{p}': {exc.strerror or exc}") from None
    try:
        return from_tflite(buf, signature=signature)
    except UnsupportedError:
        raise
    except FrontendError as exc:
        raise FrontendError(f"cannot load TFLite model '{p}': {exc}") from None


def from_tflite(buf: bytes, *, signature: str | None = None) -> IRModule:
    """Import a TFLite flatbuffer (the bytes of a ``.tflite`` file)."""
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise FrontendError(f"from_tflite takes the bytes of a .tflite file, got {type(buf).__name__}")
    return _Importer(read_model(bytes(buf)), signature).run()


def converters() -> dict[str, Callable[[OpContext], Any]]:
    """Builtin operator name -> converter (the manifest of the converter files)."""
    out: dict[str, Callable[[OpContext], Any]] = {}
    for table in (tflite_ops.CONVERTERS, tflite_ops_nn.CONVERTERS, tflite_ops_shape.CONVERTERS,
                  tflite_ops_index.CONVERTERS, tflite_ops_qelem.CONVERTERS, tflite_ops_reduce.CONVERTERS,
                  tflite_ops_matrix.CONVERTERS):
        for name, fn in table.items():
            if name in out:
                raise AssertionError(f"TFLite operator {name} has two converters")
            out[name] = fn
    return out


class _Importer:
    def __init__(self, model: TModel, signature: str | None):
        self.model = model
        sg, ins, outs = self._pick(model, signature)
        self.sg: TSubgraph = sg
        self.inputs, self.outputs = ins, outs
        self.values: dict[int, Val] = {}
        self.unsupported: list[tuple[str, str, int, str]] = []
        self.poisoned: set[int] = set()  # tensors written by an unsupported operator
        self.hybrid = tflite_ops_hybrid.in_hybrid_model(sg)  # float layers then follow XNNPACK's order

    @staticmethod
    def _pick(model: TModel, signature: str | None) -> tuple[TSubgraph, list, list]:
        sigs = model.signatures
        if signature is not None:
            found = [s for s in sigs if s.key == signature]
            if not found:
                have = ", ".join(f"'{s.key}'" for s in sigs) or "none"
                raise FrontendError(f"the model has no signature '{signature}' (its signatures: {have})")
            sig = found[0]
        elif sigs:
            sig = sigs[0]
        else:
            sg = model.subgraphs[0]
            return (sg, [(sg.tensors[i].name or f"input_{k}", i) for k, i in enumerate(sg.inputs)],
                    [(sg.tensors[i].name or f"output_{k}", i) for k, i in enumerate(sg.outputs)])
        sg = model.subgraphs[sig.subgraph]
        return sg, list(sig.inputs) or [(sg.tensors[i].name, i) for i in sg.inputs], \
            list(sig.outputs) or [(sg.tensors[i].name, i) for i in sg.outputs]

    def value(self, t: TTensor) -> Val:
        v = self.values.get(t.index)
        if v is not None:
            return v
        if t.data is not None:
            v = Val(Constant(np.ascontiguousarray(t.data)))
            self.values[t.index] = v
            return v
        raise Unsupported(f"reads {t.label()}, which no earlier operator writes and which is not an input "
                          f"(operators must be in execution order)")

    def run(self) -> IRModule:
        params = []
        names = []
        seen: set[str] = set()
        for k, (name, i) in enumerate(self.inputs):
            t = self.sg.tensors[i]
            if t.dtype is None:
                raise FrontendError(f"input {k} '{name}' ({t.label()}) has type {t.type_name}, which plait does not read")
            if t.data is not None:
                raise FrontendError(f"input {k} '{name}' ({t.label()}) is a constant")
            if name in seen:
                raise FrontendError(f"two inputs are named '{name}'")
            seen.add(name)
            var = Var(name, TensorType(t.shape, t.dtype))
            params.append(var)
            names.append(name)
            self.values[i] = Val(var)
        written: dict[int, int] = {}
        table = converters()
        for op in self.sg.ops:
            for i in op.outputs:
                if i in written or i in self.values:
                    where = f"operator {written[i]}" if i in written else "an input or a constant"
                    raise FrontendError(f"{op.label()}: writes {self.sg.tensors[i].label()}, which {where} "
                                        f"already wrote")
                written[i] = op.index
            self._convert(op, table)
        outputs = []
        for k, (name, i) in enumerate(self.outputs):
            t = self.sg.tensors[i]
            if i not in self.values and t.data is None:
                if i in self.poisoned:
                    continue  # written by an unsupported operator: reported below
                raise FrontendError(f"output {k} '{name}' ({t.label()}) is not written by any operator")
            try:
                v = self.value(t)
                cx = OpContext(self, TOp(-1, "output", "", 1, (i,), ()))
                outputs.append(cx.nhwc(v))
            except Unsupported as exc:
                raise FrontendError(f"output {k} '{name}': {exc.reason}") from None
        if self.unsupported:
            lines = [f"  {name}: {reason}" for name, _, _, reason in self.unsupported]
            raise UnsupportedError(f"model uses {len(self.unsupported)} unsupported operator(s):\n" + "\n".join(lines),
                                   self.unsupported)
        if not outputs:
            raise FrontendError("the model has no outputs")
        body: Expr = outputs[0] if len(outputs) == 1 else Tuple(tuple(outputs))
        attrs = {"input_names": tuple(names), "output_names": tuple(n for n, _ in self.outputs), "frontend": "tflite"}
        try:
            mod = IRModule({"main": Function(tuple(params), body, infer_expr(body))}, attrs)
            return infer_type(mod)
        except PlaitError as exc:
            raise FrontendError(f"the imported module does not type-check: {exc}") from None

    def _convert(self, op: TOp, table: dict) -> None:
        if any(i in self.poisoned for i in op.inputs):
            self.poisoned.update(op.outputs)  # its producer is reported; this one is not judged
            return
        fn = table.get(op.opcode)
        if fn is None:
            self.poisoned.update(op.outputs)
            reason = (f"custom operator '{op.custom_code}' is not supported" if op.opcode == "CUSTOM"
                      else f"builtin operator {op.opcode} is not supported")
            self.unsupported.append((op.label(), op.opcode, op.index, reason))
            return
        cx = OpContext(self, op)
        try:
            result = fn(cx)
            results = result if isinstance(result, list) else [result]
            if len(results) != len(op.outputs):
                raise Unsupported(f"expected {len(results)} output(s), the file lists {len(op.outputs)}")
            for j, r in enumerate(results):
                self._store(cx, op.outputs[j], r)
        except Unsupported as exc:
            self.poisoned.update(op.outputs)
            self.unsupported.append((op.label(), op.opcode, op.index, exc.reason))

    def _store(self, cx: OpContext, i: int, r: Expr | Val) -> None:
        v = r if isinstance(r, Val) else Val(r)
        t = self.sg.tensors[i]
        got = v.expr.checked_type
        shape = tuple(got.shape[p] for p in TO_NHWC) if v.nchw and isinstance(got, TensorType) else \
            getattr(got, "shape", None)
        dtype = getattr(got, "dtype", None)
        if shape != t.shape or dtype != t.dtype:
            declared = f"{t.type_name.lower()}{list(t.shape)}"
            shown = f"{dtype}{list(shape)}" if shape is not None else str(got)
            raise Unsupported(f"computes {shown} for output {t.label()}, which the file declares {declared}")
        self.values[i] = v


def sniff(path: str) -> bool:
    """Whether the file at ``path`` is a TFLite flatbuffer (by its content, not its name)."""
    try:
        with open(path, "rb") as f:
            return is_tflite(f.read(8))
    except OSError:
        return False
