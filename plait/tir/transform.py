"""TIR passes over IRModules (see :mod:`plait.ir.transform` for the pass machinery).

:class:`PrimFuncPass` is the base for passes that rewrite each PrimFunc of a module on its own;
:class:`VerifyTIR` is a pass instrument that runs :func:`plait.tir.verify` after every pass
(``PassContext(instruments=[VerifyTIR()])``), naming the pass that broke the module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from plait.ir.transform import Pass, PassContext
from plait.tir.errors import TIRVerifyError
from plait.tir.simplify import simplify
from plait.tir.stmt import PrimFunc
from plait.tir.verify import verify


@dataclass(frozen=True)
class PrimFuncPass(Pass):
    """Apply :meth:`transform_function` to every PrimFunc of the module (Relay functions are kept); each
    call sees the module as the pass got it, and the results replace the functions at once."""

    name: ClassVar[str] = "tir.prim_func_pass"

    def transform_function(self, func: PrimFunc, name: str, mod: Any, ctx: PassContext) -> PrimFunc:
        raise NotImplementedError

    def run(self, mod: Any, ctx: PassContext) -> Any:
        changed = {}
        for name, fn in mod.items():
            if isinstance(fn, PrimFunc):
                new = self.transform_function(fn, name, mod, ctx)
                if new is not fn:
                    changed[name] = new
        return mod.with_functions(changed) if changed else mod


@dataclass(frozen=True)
class Simplify(PrimFuncPass):
    """:func:`plait.tir.simplify` on every PrimFunc."""

    name: ClassVar[str] = "tir.simplify"

    def transform_function(self, func: PrimFunc, name: str, mod: Any, ctx: PassContext) -> PrimFunc:
        return simplify(func)


@dataclass
class VerifyTIR:
    """Pass instrument: verify every PrimFunc of the module after each pass."""

    def after(self, p: Pass, mod: Any) -> None:
        if isinstance(mod, PrimFunc) or hasattr(mod, "items"):
            try:
                verify(mod)
            except TIRVerifyError as exc:
                raise TIRVerifyError(f"after pass '{p.name}': {exc}", exc.problems) from None
