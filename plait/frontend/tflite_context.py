"""What a TFLite converter sees (:class:`OpContext`): one operator, its input tensors and their values
(:class:`Val`, with the layout they are held in), its options; and how it builds calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from plait.errors import AttrError
from plait.frontend.unsupported import Unsupported  # noqa: F401 (converters import it from here)
from plait.frontend.tflite_read import TOp, TTensor
from plait.ir.attrs import Attrs
from plait.ir.op import RelError
from plait.ir.types import TensorType
from plait.relay.expr import Call, Constant, Expr
from plait.relay.infer import infer_expr

TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)


def _quant_meta(imp: Any, op: TOp) -> dict[str, Any]:
    """``tflite_q`` (output 0's ``(scale, zero_point)``) and ``tflite_qin`` (each input's, ``()`` when it is
    absent or not quantized per tensor): the tensor scales a quantized operator's calls keep
    only implicitly, for the TFLite exporter (:mod:`plait.frontend.tflite_export`). Absent on float
    operators."""

    def q(i: int) -> tuple:
        t = imp.sg.tensors[i] if i >= 0 else None
        if t is None or t.quant is None or not t.quant.per_tensor:
            return ()
        return (float(t.quant.scale[0]), int(t.quant.zero_point[0]))

    out = q(op.outputs[0]) if op.outputs else ()
    ins = tuple(q(i) for i in op.inputs)
    if not out and not any(ins):
        return {}
    return {"tflite_q": out, "tflite_qin": ins}




@dataclass
class Val:
    """A tensor's value during import: its expression, and whether it is held channels-first (a 4-D
    NHWC tensor transposed to NCHW)."""

    expr: Expr
    nchw: bool = False


class OpContext:
    """What a converter sees: one operator, its input tensors and values, its options."""

    def __init__(self, imp: Any, op: TOp):
        self.imp, self.op = imp, op
        first = op.outputs[0] if op.outputs else -1
        name = imp.sg.tensors[first].name if first >= 0 else ""
        self.meta = Attrs(name=name or f"{op.opcode}_{op.index}", op_type=op.opcode, **_quant_meta(imp, op))

    # ---- inputs and outputs ---------------------------------------------------------------------
    @property
    def n_inputs(self) -> int:
        return len(self.op.inputs)

    def tensor(self, i: int) -> TTensor | None:
        """Input ``i``'s tensor (None: omitted or absent)."""
        if i >= len(self.op.inputs) or self.op.inputs[i] < 0:
            return None
        return self.imp.sg.tensors[self.op.inputs[i]]

    def out(self, j: int = 0) -> TTensor:
        if j >= len(self.op.outputs):
            raise Unsupported(f"expected at least {j + 1} output(s), got {len(self.op.outputs)}")
        return self.imp.sg.tensors[self.op.outputs[j]]

    def need(self, n: int, most: int | None = None) -> None:
        got = len(self.op.inputs)
        if got < n or (most is not None and got > most):
            want = f"{n}" if most in (None, n) else f"{n} to {most}"
            raise Unsupported(f"expected {want} inputs, got {got}")
        omitted = [k for k in range(n) if self.op.inputs[k] < 0]
        if omitted:
            raise Unsupported(f"input {omitted[0]} is required but omitted (tensor index -1)")

    def const(self, i: int) -> np.ndarray | None:
        """Input ``i``'s values when it is a constant (None otherwise)."""
        t = self.tensor(i)
        if t is None:
            return None
        if t.data is not None:
            return t.data
        v = self.imp.values.get(t.index)
        return v.expr.data if v is not None and isinstance(v.expr, Constant) else None

    def need_const(self, i: int, what: str) -> np.ndarray:
        v = self.const(i)
        if v is None:
            raise Unsupported(f"{what} (input {i}) must be a constant")
        return v

    def val(self, i: int) -> Val:
        t = self.tensor(i)
        if t is None:
            raise Unsupported(f"input {i} is missing")
        return self.imp.value(t)

    def nhwc(self, i_or_val: int | Val) -> Expr:
        """The value in the file's layout."""
        v = self.val(i_or_val) if isinstance(i_or_val, int) else i_or_val
        if not v.nchw:
            return v.expr
        return self.call("transpose", v.expr, axes=TO_NHWC)

    def nchw(self, i_or_val: int | Val) -> Expr:
        """A 4-D value channels-first."""
        v = self.val(i_or_val) if isinstance(i_or_val, int) else i_or_val
        if v.nchw:
            return v.expr
        t = v.expr.checked_type
        if not isinstance(t, TensorType) or t.ndim != 4:
            raise Unsupported(f"expected a 4-D NHWC tensor, got {t}")
        if isinstance(v.expr, Constant):
            return Constant(np.ascontiguousarray(np.transpose(v.expr.data, TO_NCHW)))
        return self.call("transpose", v.expr, axes=TO_NCHW)

    def option(self, name: str, default: Any = None) -> Any:
        return self.op.options.get(name, default)

    # ---- building -------------------------------------------------------------------------------
    def call(self, op_name: str, *args: Expr | np.ndarray, **attrs: Any) -> Expr:
        """``op_name(*args, **attrs)`` carrying this operator's meta, its type inferred now."""
        from plait.op import get_op

        op = get_op(op_name)
        exprs = tuple(a if isinstance(a, Expr) else Constant(np.asarray(a)) for a in args)
        try:
            c = Call(op, exprs, Attrs(attrs), self.meta)
        except AttrError as exc:
            raise Unsupported(str(exc)) from None
        want = op.check_arity(len(exprs))
        if want is not None:
            raise Unsupported(f"operator '{op_name}' expects {want} arguments, got {len(exprs)}")
        for e in exprs:
            if not e.has_type:
                infer_expr(e)
        arg_types = tuple(e.checked_type for e in exprs)
        try:
            c._set_type(op.rel(arg_types, c.attrs))
        except RelError as exc:
            shown = ", ".join(str(a) for a in arg_types)
            raise Unsupported(f"plait operator '{op_name}' rejects ({shown}): {exc}") from None
        return c


Converter = Callable[["OpContext"], Any]


def registrar(table: dict[str, Converter]) -> Callable[..., Callable[[Converter], Converter]]:
    """``conv = registrar(CONVERTERS)``; ``@conv("ADD", "SUB")`` enters a converter in a file's table."""
    def names(*ops: str) -> Callable[[Converter], Converter]:
        def deco(fn: Converter) -> Converter:
            for n in ops:
                table[n] = fn
            return fn
        return deco
    return names

