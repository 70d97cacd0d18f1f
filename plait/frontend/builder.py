"""Write a model in Python:

    b = Builder("mlp")
    x = b.input("x", (1, 256))
    h = b.nn.relu(b.nn.dense(x, b.const(w1), name="fc1") + b.const(b1))
    mod = b.finish(h)

Operators are reached by attribute access (``b.add``, ``b.nn.conv2d``, ``b.image.resize2d``);
``+ - * / @`` and unary ``-`` on values build ``add``/``subtract``/``multiply``/``divide``/
``nn.matmul``/``negative`` (Python numbers and arrays become constants of the value's dtype).
Every call is type-checked as it is built, so a mistake is reported where it is made. ``name=``
sets the call's meta name (default ``<op>_<k>``).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np

from plait.errors import PlaitError, TypeInferenceError
from plait.ir.attrs import Attrs
from plait.ir.op import RelError
from plait.op import OPS, get_op
from plait.ir.types import DTYPES, TensorType, TupleType, Type
from plait.relay.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var
from plait.relay.infer import infer_expr, infer_type
from plait.relay.module import IRModule

__all__ = ["Builder", "Value"]


class Value:
    """A tensor being built: wraps a typed Relay expression."""

    __array_priority__ = 1000  # numpy scalars/arrays on the left defer to our operators

    def __init__(self, builder: "Builder", expr: Expr):
        self.builder = builder
        self.expr = expr

    @property
    def type(self) -> Type:
        return self.expr.checked_type

    @property
    def shape(self) -> tuple:
        t = self.type
        if not isinstance(t, TensorType):
            raise PlaitError(f"value of type {t} has no shape")
        return t.shape

    @property
    def dtype(self) -> str:
        t = self.type
        if not isinstance(t, TensorType):
            raise PlaitError(f"value of type {t} has no dtype")
        return t.dtype

    def _other(self, other: Any) -> "Value":
        if isinstance(other, Value):
            return other
        return self.builder.const(np.asarray(other, dtype=DTYPES[self.dtype]))

    def __add__(self, o: Any) -> "Value":
        return self.builder.call("add", self, self._other(o))

    def __radd__(self, o: Any) -> "Value":
        return self.builder.call("add", self._other(o), self)

    def __sub__(self, o: Any) -> "Value":
        return self.builder.call("subtract", self, self._other(o))

    def __rsub__(self, o: Any) -> "Value":
        return self.builder.call("subtract", self._other(o), self)

    def __mul__(self, o: Any) -> "Value":
        return self.builder.call("multiply", self, self._other(o))

    def __rmul__(self, o: Any) -> "Value":
        return self.builder.call("multiply", self._other(o), self)

    def __truediv__(self, o: Any) -> "Value":
        return self.builder.call("divide", self, self._other(o))

    def __rtruediv__(self, o: Any) -> "Value":
        return self.builder.call("divide", self._other(o), self)

    def __matmul__(self, o: Any) -> "Value":
        return self.builder.call("nn.matmul", self, self._other(o))

    def __rmatmul__(self, o: Any) -> "Value":
        return self.builder.call("nn.matmul", self._other(o), self)

    def __neg__(self) -> "Value":
        return self.builder.call("negative", self)

    def __repr__(self) -> str:
        return f"Value({self.type})"


class _Namespace:
    """``b.nn`` -> operators named ``nn.*``."""

    def __init__(self, builder: "Builder", prefix: str):
        self._builder = builder
        self._prefix = prefix

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._builder._resolve(f"{self._prefix}.{name}")


class Builder:
    """Builds one function, ``@main``, of a new IRModule."""

    def __init__(self, name: str = "main"):
        self.name = name
        self._params: list[Var] = []
        self._counts: dict[str, int] = {}
        self._finished = False

    # ---- values -------------------------------------------------------------------------
    def input(self, name: str, shape: Iterable[Any], dtype: str = "float32") -> Value:
        """A parameter of ``@main``; dims are ints or names (symbolic)."""
        if any(p.name_hint == name for p in self._params):
            raise PlaitError(f"builder '{self.name}': input '{name}' is already defined")
        var = Var(name, TensorType(tuple(shape), dtype))
        self._params.append(var)
        return Value(self, var)

    def const(self, value: Any, dtype: str | None = None) -> Value:
        arr = np.asarray(value, dtype=DTYPES[dtype] if dtype else None)
        if arr.dtype == np.float64 and dtype is None and not isinstance(value, np.ndarray):
            arr = arr.astype(np.float32)  # Python floats default to float32, as everywhere in plait
        return Value(self, Constant(arr))

    def call(self, op: str, *args: Any, name: str | None = None, **attrs: Any) -> Any:
        """``op(*args, **attrs)``; a tuple-valued result comes back as a tuple of values."""
        the_op = get_op(op)
        exprs = tuple(self._expr(a) for a in args)
        if name is None:
            short = op.split(".")[-1]
            k = self._counts.get(short, 0)
            self._counts[short] = k + 1
            name = f"{short}_{k}"
        call = Call(the_op, exprs, Attrs(attrs), Attrs(name=name))
        want = the_op.check_arity(len(exprs))
        if want is not None:
            raise TypeInferenceError(f"builder '{self.name}': call '{name}' (operator '{op}'): "
                                     f"expected {want} arguments, got {len(exprs)}")
        arg_types = tuple(e.checked_type for e in exprs)
        try:
            t = the_op.rel(arg_types, call.attrs)
        except RelError as exc:
            shown = ", ".join(str(a) for a in arg_types)
            raise TypeInferenceError(f"type mismatch in builder '{self.name}': call '{name}' (operator '{op}') "
                                     f"with argument types ({shown}): {exc}") from None
        call._set_type(t)
        if isinstance(t, TupleType):
            items = []
            for i, ft in enumerate(t.fields):
                item = TupleGetItem(call, i)
                item._set_type(ft)
                items.append(Value(self, item))
            return tuple(items)
        return Value(self, call)

    def _expr(self, a: Any) -> Expr:
        if isinstance(a, Value):
            if a.builder is not self:
                raise PlaitError(f"builder '{self.name}': a value of another builder was used")
            return a.expr
        if isinstance(a, Expr):
            infer_expr(a)
            return a
        if isinstance(a, (tuple, list)):
            raise PlaitError(f"builder '{self.name}': pass tensors as separate arguments, not a {type(a).__name__}")
        return self.const(a).expr

    # ---- operators by attribute -----------------------------------------------------------
    def _resolve(self, op: str) -> Callable[..., Any]:
        get_op(op)  # unknown names raise here, with "did you mean"

        def apply(*args: Any, name: str | None = None, **attrs: Any) -> Any:
            return self.call(op, *args, name=name, **attrs)

        apply.__name__ = op
        apply.__doc__ = get_op(op).doc
        return apply

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        get_op("add")  # load the standard operators
        if any(op.startswith(name + ".") for op in OPS):
            return _Namespace(self, name)
        return self._resolve(name)

    # ---- result ---------------------------------------------------------------------------
    def finish(self, *outputs: Value, output_names: Sequence[str] | None = None) -> IRModule:
        """The module whose ``@main`` takes every input (in order) and returns ``outputs``."""
        if not outputs:
            raise PlaitError(f"builder '{self.name}': finish() needs at least one output")
        exprs = [self._expr(o) for o in outputs]
        body = exprs[0] if len(exprs) == 1 else Tuple(tuple(exprs))
        names = tuple(output_names) if output_names else tuple(f"output_{i}" for i in range(len(exprs)))
        if len(names) != len(exprs):
            raise PlaitError(f"builder '{self.name}': {len(names)} output names for {len(exprs)} outputs")
        fn = Function(tuple(self._params), body, infer_expr(body))
        attrs = {"name": self.name, "input_names": tuple(p.name_hint for p in self._params), "output_names": names}
        return infer_type(IRModule({"main": fn}, attrs))
