"""TFLite converters of quantized elementwise operators and reductions (to be filled).

:data:`QUANT` holds the quantized forms of operators whose float form :mod:`plait.frontend.tflite_ops`
converts (it calls :func:`convert` for a quantized input); :data:`CONVERTERS` the operators converted
here in every dtype."""

from __future__ import annotations

from typing import Any, Callable

from plait.frontend.tflite_context import OpContext, Unsupported

CONVERTERS: dict[str, Callable[[OpContext], Any]] = {}
QUANT: dict[str, Callable[[OpContext], Any]] = {}


def convert(cx: OpContext) -> Any:
    """The quantized form of ``cx``'s operator."""
    fn = QUANT.get(cx.op.opcode)
    if fn is None:
        t = cx.tensor(0)
        raise Unsupported(f"{cx.op.opcode} of {t.type_name if t else 'this input'} is not supported yet")
    return fn(cx)
