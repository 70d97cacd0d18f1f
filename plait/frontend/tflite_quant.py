"""TFLite's quantized arithmetic as the converters build it: multipliers, activation ranges,
requantization (TensorFlow Lite Micro's reference kernels, ``kernel_util.cc`` and
``quantization_util.cc``).

- Multipliers are computed in double from the float32 scales, as TFLite does
  (``effective_scale = double(in_scale) * double(w_scale) / double(out_scale)``), then
  ``QuantizeMultiplier`` (:func:`plait.op.qnn.fixed_point_multiplier`).
- A fused activation narrows the output range: ``CalculateActivationRangeQuantized``, each bound
  ``zero_point + round(bound / scale)`` (float32 division, rounded half away from zero).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from plait.frontend.tflite_context import Unsupported
from plait.frontend.tflite_read import QParams, TTensor
from plait.op.qnn import fixed_point_multiplier
from plait.tir.dtype import int_range

if TYPE_CHECKING:
    from plait.frontend.tflite_context import OpContext

ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
QUANT_DTYPES = ("int8", "uint8", "int16")


def unsupported(reason: str) -> Exception:
    return Unsupported(reason)


def qparams(t: TTensor, what: str) -> QParams:
    """The tensor's quantization; its zero points must lie in its integer dtype (a damaged file's may not)."""
    if t.quant is None:
        raise unsupported(f"{what} ({t.label()}, {t.type_name}) has no quantization parameters")
    if t.dtype is not None and t.dtype.startswith(("int", "uint")) and t.quant.zero_point.size:
        lo, hi = int_range(t.dtype)
        zp = t.quant.zero_point
        if int(zp.min()) < lo or int(zp.max()) > hi:
            bad = int(zp.min()) if int(zp.min()) < lo else int(zp.max())
            raise unsupported(f"{what} ({t.label()}) has zero point {bad}, outside {t.type_name}")
    return t.quant


def per_tensor(t: TTensor, what: str) -> tuple[float, int]:
    """(scale, zero point) of a per-tensor quantized tensor."""
    q = qparams(t, what)
    if not q.per_tensor:
        raise unsupported(f"{what} ({t.label()}) is quantized per channel; plait reads it per tensor only")
    return float(q.scale[0]), int(q.zero_point[0])


def round_away(v: np.ndarray | float) -> np.ndarray:
    """``TfLiteRound`` / ``std::round``: half away from zero."""
    a = np.asarray(v, np.float64)
    return np.sign(a) * np.floor(np.abs(a) + 0.5)


def activation_range(fused: int, scale: float, zp: int, dtype: str) -> tuple[int, int]:
    """``CalculateActivationRangeQuantized`` of a fused activation (RELU, RELU6, RELU_N1_TO_1)."""
    if dtype not in QUANT_DTYPES:
        raise unsupported(f"a quantized operator's output is {dtype}, expected int8, uint8 or int16")
    lo, hi = int_range(dtype)
    name = ACTIVATIONS.get(fused, f"#{fused}")

    def q(f: float) -> int:
        return zp + int(round_away(np.float32(f) / np.float32(scale)))

    if name == "NONE":
        return lo, hi
    if name == "RELU":
        return max(lo, q(0.0)), hi
    if name == "RELU6":
        return max(lo, q(0.0)), min(hi, q(6.0))
    if name == "RELU_N1_TO_1":
        return max(lo, q(-1.0)), min(hi, q(1.0))
    raise unsupported(f"fused activation {name} is not supported on a quantized operator")


def clamp_attrs(fused: int, scale: float, zp: int, dtype: str) -> dict[str, Any]:
    lo, hi = activation_range(fused, scale, zp, dtype)
    full = int_range(dtype)
    return {"clamp_min": lo if lo != full[0] else None, "clamp_max": hi if hi != full[1] else None}


def multipliers(in_scale: float, w_scale: np.ndarray, out_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """int32 (multiplier, shift) of each ``double(in) * double(w) / double(out)``."""
    eff = np.float64(in_scale) * np.asarray(w_scale, np.float64).reshape(-1) / np.float64(out_scale)
    try:
        return fixed_point_multiplier(eff)
    except ValueError as exc:
        raise unsupported(str(exc)) from None


def requantize(cx: "OpContext", acc: Any, mult: np.ndarray, shift: np.ndarray, zp: int, dtype: str,
               fused: int, out_scale: float, axis: int) -> Any:
    """``qnn.requantize`` in fixed point with a fused activation's clamp."""
    m, s = (mult, shift) if mult.size > 1 else (mult.reshape(()), shift.reshape(()))
    return cx.call("qnn.requantize", acc, m.astype(np.int32), s.astype(np.int32),
                   zero_point=zp, out_dtype=dtype, axis=axis if mult.size > 1 else -1, mode="fixed",
                   **clamp_attrs(fused, out_scale, zp, dtype))


def rescale_int(cx: "OpContext", x: Any, zp: int, left_shift: int, scale: float) -> Any:
    """TFLite's input rescaling of ADD and SUB: ``MultiplyByQuantizedMultiplierSmallerThanOneExp(
    (x - zp) * 2**left_shift)`` as an int32 value."""
    v = cx.call("cast", x, dtype="int32")
    if zp:
        v = cx.call("subtract", v, np.array(zp, np.int32))
    v = cx.call("multiply", v, np.array(1 << left_shift, np.int32))
    m, s = multipliers(1.0, np.array([scale]), 1.0)
    return cx.call("qnn.requantize", v, m.reshape(()), s.reshape(()), zero_point=0, out_dtype="int32", mode="fixed")
