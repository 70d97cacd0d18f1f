"""IRModule: a set of named global functions. ``main`` is the entry point by convention."""

from __future__ import annotations

from typing import Any, Callable, Iterator, Mapping

from plait.errors import PlaitError
from plait.ir.base import BaseFunc
from plait.relay.expr import Expr, Function, GlobalVar

# str(module) prints with the text printer (plait.relay.text_print.print_module), which imports this
# module: plait/relay/__init__.py binds it (bind_printer), as it binds the expressions' printer.
_printer: Callable[..., str] | None = None


def bind_printer(print_module: Callable[..., str]) -> None:
    """Make ``str(module)`` print with ``print_module`` (plait/relay/__init__.py calls this)."""
    global _printer
    _printer = print_module


class IRModule(Mapping[str, BaseFunc]):
    """An immutable map from global name to a function: a Relay :class:`Function` or a TIR ``PrimFunc``.

    Functional updates (:meth:`with_function`, :meth:`without`) return a new module. Iteration is
    in sorted name order so that everything derived from a module is deterministic.
    ``attrs`` carry module-level information (e.g. the source model's input and output names).
    """

    def __init__(self, functions: Mapping[str, BaseFunc] | None = None, attrs: Mapping | None = None):
        from plait.ir.attrs import Attrs

        funcs: dict[str, BaseFunc] = {}
        for name, fn in (functions or {}).items():
            key = name.name if isinstance(name, GlobalVar) else str(name)
            if not isinstance(fn, BaseFunc):
                raise PlaitError(f"IRModule: global '{key}' must be a function, got {type(fn).__name__}")
            funcs[key] = fn
        self._functions = dict(sorted(funcs.items()))
        self.attrs = attrs if isinstance(attrs, Attrs) else Attrs(attrs or {})

    @classmethod
    def from_expr(cls, expr: Expr, attrs: Mapping | None = None) -> "IRModule":
        if not isinstance(expr, Function):
            from plait.relay.visitor import free_vars

            expr = Function(tuple(free_vars(expr)), expr)
        return cls({"main": expr}, attrs)

    def __getitem__(self, name: str | GlobalVar) -> BaseFunc:
        key = name.name if isinstance(name, GlobalVar) else name
        try:
            return self._functions[key]
        except KeyError:
            from plait.registry import Registry

            reg: Registry[BaseFunc] = Registry("global function")
            for k, v in self._functions.items():
                reg.register(k, v)
            return reg.get(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def __contains__(self, name: object) -> bool:
        key = name.name if isinstance(name, GlobalVar) else name
        return key in self._functions

    def get_global_var(self, name: str) -> GlobalVar:
        if name not in self._functions:
            self[name]  # raises with "did you mean"
        return GlobalVar(name)

    @classmethod
    def _trusted(cls, funcs: dict[str, BaseFunc], attrs: Any) -> "IRModule":
        """A module of already checked, sorted ``funcs`` (taken, not copied)."""
        mod = cls.__new__(cls)
        mod._functions, mod.attrs = funcs, attrs
        return mod

    def with_function(self, name: str, fn: BaseFunc) -> "IRModule":
        return self.with_functions({name: fn})

    def with_functions(self, functions: Mapping[str, BaseFunc]) -> "IRModule":
        """The module with every function of ``functions`` added or replaced, in one copy: use it
        rather than :meth:`with_function` in a loop (each call copies the module)."""
        funcs = dict(self._functions)
        added = False
        for name, fn in functions.items():
            key = name.name if isinstance(name, GlobalVar) else str(name)
            if not isinstance(fn, BaseFunc):
                raise PlaitError(f"IRModule: global '{key}' must be a function, got {type(fn).__name__}")
            added = added or key not in funcs
            funcs[key] = fn
        return IRModule._trusted(dict(sorted(funcs.items())) if added else funcs, self.attrs)

    def without(self, name: str) -> "IRModule":
        funcs = dict(self._functions)
        funcs.pop(name, None)
        return IRModule._trusted(funcs, self.attrs)

    def with_attrs(self, **attrs) -> "IRModule":
        return IRModule(self._functions, self.attrs.with_(**attrs))

    @property
    def main(self) -> Function:
        fn = self["main"]
        assert isinstance(fn, Function)
        return fn

    def relay_functions(self) -> dict[str, Function]:
        return {k: v for k, v in self._functions.items() if isinstance(v, Function)}

    def __str__(self) -> str:
        return _printer(self, metadata=False)  # plait.relay.text_print.print_module (see bind_printer)

    def __repr__(self) -> str:
        return f"IRModule({', '.join('@' + k for k in self._functions)})"
