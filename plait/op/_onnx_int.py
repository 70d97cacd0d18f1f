"""TensorFlow Lite's integer primitives (gemmlowp's ``SaturatingRoundingDoublingHighMul``,
``RoundingDivideByPOT``, a saturating left shift) as standard ONNX operators on int64 tensors, which
ONNX Runtime computes exactly: the ONNX forms of the fixed-point operators (``qnn.requantize`` in fixed
mode, ``qnn.fixed_softmax``) are written with them."""

from __future__ import annotations

from typing import Any

import numpy as np

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


class OnnxInt:
    """gemmlowp's primitives as ONNX nodes on int64 tensors (``ex`` is the exporter's context)."""

    def __init__(self, ex: Any):
        self.ex = ex

    def c(self, v: int) -> str:
        return self.ex.const(np.array(v, np.int64), hint="k")

    def op(self, kind: str, *ins: str, **attrs: Any) -> str:
        return self.ex.node(kind, list(ins), **attrs)

    def i64(self, v: str) -> str:
        return self.op("Cast", v, to=self.ex.elem_type("int64"))

    def where(self, cond: str, a: str, b: str) -> str:
        return self.op("Where", cond, a, b)

    def srdhm(self, a: str, b: str) -> str:
        ab = self.op("Mul", a, b)
        nudge = self.where(self.op("Less", ab, self.c(0)), self.c(1 - (1 << 30)), self.c(1 << 30))
        return self.op("Div", self.op("Add", ab, nudge), self.c(1 << 31))  # ONNX integer Div truncates, as C

    def rdbpot(self, x: str, p: str) -> str:
        """x / p rounded half away from zero, p a power of two: the floor quotient (Mod with fmod=0 is the
        non-negative remainder, ``x & mask``) plus one where the remainder is above the threshold."""
        r = self.op("Mod", x, p, fmod=0)
        q = self.op("Div", self.op("Sub", x, r), p)
        threshold = self.op("Add", self.op("Div", self.op("Sub", p, self.c(1)), self.c(2)),
                            self.i64(self.op("Less", x, self.c(0))))
        return self.op("Add", q, self.i64(self.op("Greater", r, threshold)))

    def pow2(self, e: str) -> str:
        u64 = self.ex.elem_type("uint64")
        one = self.ex.const(np.array(1, np.uint64), hint="one")
        return self.i64(self.op("BitShift", one, self.op("Cast", e, to=u64), direction="LEFT"))

    def sat_shl(self, x: str, e: int) -> str:
        t = (1 << (31 - e)) - 1
        return self.where(self.op("Greater", x, self.c(t)), self.c(I32_MAX),
                          self.where(self.op("Less", x, self.c(-t)), self.c(I32_MIN), self.op("Mul", x, self.c(1 << e))))

    def clamp(self, x: str, lo: int, hi: int) -> str:
        return self.op("Min", self.op("Max", x, self.c(lo)), self.c(hi))

    def multiply_by_quantized_multiplier(self, acc: str, mult: str, shift: str) -> str:
        """TFLite's ``MultiplyByQuantizedMultiplier`` of int64 ``acc`` (int32 values) by int64 ``mult`` and
        ``shift`` (broadcast): the left shift saturated to int32, SRDHM, the rounding right shift."""
        zero = self.c(0)
        left, right = self.op("Max", shift, zero), self.op("Max", self.op("Neg", shift), zero)
        x = self.clamp(self.op("Mul", acc, self.pow2(left)), I32_MIN, I32_MAX)
        return self.rdbpot(self.srdhm(x, mult), self.pow2(right))
