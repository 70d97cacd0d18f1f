"""The math intrinsics TIR knows: one table, with each one's C99 ``<math.h>`` spelling per dtype.

Every intrinsic takes float arguments of one dtype. ``result`` is ``"same"`` (the argument dtype)
or ``"bool"`` (the classification macros). ``c`` maps a dtype to a C expression template where
``{0}``, ``{1}`` are the arguments. C99 has no half-precision math: float16 intrinsics are computed
with the float32 function (codegen converts the argument to ``float`` and the result back), and
the interpreter does the same. There are deliberately no invented intrinsics (no ``sigmoid``):
everything here is one libm call or a one-line C expression of one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from plait.registry import Registry


@dataclass(frozen=True)
class Intrinsic:
    name: str
    arity: int
    c: Mapping[str, str]  # dtype -> C expression template
    result: str = "same"  # "same" | "bool"

    def result_dtype(self, arg_dtype: str) -> str:
        return "bool" if self.result == "bool" else arg_dtype


def _libm(name: str, arity: int = 1) -> Intrinsic:
    args = ", ".join(f"{{{k}}}" for k in range(arity))
    return Intrinsic(name, arity, {"float32": f"{name}f({args})", "float16": f"{name}f({args})",
                                   "float64": f"{name}({args})"})


def _macro(name: str) -> Intrinsic:
    return Intrinsic(name, 1, {d: f"{name}({{0}})" for d in ("float16", "float32", "float64")}, result="bool")


INTRINSICS: Registry[Intrinsic] = Registry("intrinsic")

for _name in ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "sin", "cos", "tan",
              "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
              "fabs", "floor", "ceil", "trunc", "round", "nearbyint"):
    INTRINSICS.register(_name, _libm(_name))
for _name in ("pow", "fmod", "atan2", "copysign"):
    INTRINSICS.register(_name, _libm(_name, 2))
INTRINSICS.register("fma", _libm("fma", 3))  # a * b + c rounded once
for _name in ("isnan", "isinf", "isfinite"):
    INTRINSICS.register(_name, _macro(_name))
INTRINSICS.register("rsqrt", Intrinsic("rsqrt", 1, {"float32": "(1.0f / sqrtf({0}))", "float16": "(1.0f / sqrtf({0}))",
                                                    "float64": "(1.0 / sqrt({0}))"}))


def get_intrinsic(name: str) -> Intrinsic:
    """The intrinsic called ``name``; raises a RegistryError with suggestions for unknown names."""
    return INTRINSICS.get(name)
