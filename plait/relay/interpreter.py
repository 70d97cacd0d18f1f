"""The reference interpreter: executes any well-typed IRModule with numpy.

It is the oracle every later stage is tested against. Evaluation is iterative within a
function (long chains are fine); ``If`` evaluates only the branch taken; calls to global
functions and closures recurse once per call (not per node).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from plait.errors import InterpreterError, PlaitError
from plait.ir.op import Op
from plait.ir.types import DTYPES, TensorType, TupleType, Type
from plait.relay.expr import Call, Constant, Expr, Function, GlobalVar, If, Let, Loop, Tuple, TupleGetItem, Var
from plait.relay.infer import describe_call, infer_type
from plait.relay.module import IRModule
from plait.relay.visitor import post_order

Value = Any  # np.ndarray | tuple[Value, ...] | Closure


@dataclass(frozen=True, eq=False)
class Closure:
    fn: Function
    env: dict


class Interpreter:
    def __init__(self, mod: IRModule, check: bool = True):
        self.mod = infer_type(mod)
        self.check = check

    def call_function(self, fn: Function, args: Sequence[Value], env: dict | None = None) -> Value:
        frame = dict(env or {})
        frame.update(zip(fn.params, args))
        return self.eval(fn.body, frame)

    def eval(self, root: Expr, env: dict) -> Value:
        memo: dict[Expr, Value] = {}
        let_values: dict[Var, Expr] = {}

        def enter(n: Expr) -> bool:
            if isinstance(n, Let):
                let_values[n.var] = n.value
            return not isinstance(n, (If, Function))

        for node in post_order(root, enter):
            if isinstance(node, Var):
                if node in env:
                    memo[node] = env[node]
                elif node in let_values:
                    env[node] = memo[node] = memo[let_values[node]]
                else:
                    raise InterpreterError(f"unbound variable %{node.name_hint}")
            elif isinstance(node, Constant):
                memo[node] = node.data
            elif isinstance(node, GlobalVar):
                memo[node] = Closure(self.mod[node.name], {})
            elif isinstance(node, Tuple):
                memo[node] = tuple(memo[f] for f in node.fields)
            elif isinstance(node, TupleGetItem):
                memo[node] = memo[node.tuple_value][node.index]
            elif isinstance(node, Let):
                memo[node] = memo[node.body]
            elif isinstance(node, Function):
                memo[node] = Closure(node, dict(env))
            elif isinstance(node, If):
                cond = self.eval(node.cond, env)
                memo[node] = self.eval(node.true_branch if bool(np.asarray(cond).reshape(-1)[0]) else node.false_branch, env)
            elif isinstance(node, Loop):
                memo[node] = self.eval_loop(node, memo)
            elif isinstance(node, Call):
                memo[node] = self.eval_call(node, [memo[a] for a in node.args], memo)
            else:  # pragma: no cover
                raise InterpreterError(f"cannot evaluate {node!r}")
        return memo[root]

    def eval_loop(self, lp: Loop, memo: dict) -> Value:
        """ONNX ``Loop`` semantics (see :class:`~plait.relay.expr.Loop`)."""
        body: Closure = memo[lp.body]
        trip = None if lp.trip_count is None else int(np.asarray(memo[lp.trip_count]).reshape(-1)[0])
        cond = True if lp.cond is None else bool(np.asarray(memo[lp.cond]).reshape(-1)[0])
        state = [memo[x] for x in lp.init]
        n = len(state)
        scans: list[list[np.ndarray]] = [[] for _ in range(lp.num_scan)]
        i = 0
        while cond and (trip is None or i < trip):
            out = self.call_function(body.fn, [np.array(i, np.int64), np.array(cond), *state], body.env)
            if lp.cond is not None:
                cond = bool(np.asarray(out[0]).reshape(-1)[0])
            state = list(out[1:1 + n])
            for k in range(lp.num_scan):
                scans[k].append(np.asarray(out[1 + n + k]))
            i += 1
        elem_types = lp.checked_type.fields[n:]  # type: ignore[attr-defined]
        stacked = [np.stack(s) if s else np.zeros((0, *t.shape[1:]), DTYPES[t.dtype]) for s, t in zip(scans, elem_types)]
        return (*state, *stacked)

    def eval_call(self, call: Call, args: list[Value], memo: dict) -> Value:
        if isinstance(call.op, Op):
            try:
                out = call.op.ref(args, call.attrs)
            except PlaitError:
                raise
            except Exception as exc:
                raise InterpreterError(f"{describe_call(call)} failed: {type(exc).__name__}: {exc}") from exc
            if self.check and call.has_type:
                _check_value(out, call.checked_type, call)
            return out
        callee = memo[call.op]
        if not isinstance(callee, Closure):
            raise InterpreterError(f"{describe_call(call)}: callee is not a function")
        return self.call_function(callee.fn, args, callee.env)


def _check_value(v: Value, t: Type, call: Call) -> None:
    if isinstance(t, TensorType):
        if not isinstance(v, np.ndarray) and not isinstance(v, np.generic):
            raise InterpreterError(f"{describe_call(call)}: reference returned {type(v).__name__}, expected {t}")
        v = np.asarray(v)
        shape_ok = len(v.shape) == len(t.shape) and all(
            isinstance(d, str) or d == s for d, s in zip(t.shape, v.shape))
        if v.dtype != DTYPES[t.dtype] or not shape_ok:
            raise InterpreterError(
                f"{describe_call(call)}: reference returned {v.dtype}{list(v.shape)}, expected {t}")
    elif isinstance(t, TupleType):
        if not isinstance(v, tuple) or len(v) != len(t.fields):
            raise InterpreterError(f"{describe_call(call)}: reference returned {type(v).__name__}, expected {t}")
        for vi, ti in zip(v, t.fields):
            _check_value(vi, ti, call)


def _coerce_inputs(fn: Function, inputs: Mapping[str, Any] | Sequence[Any]) -> list[np.ndarray]:
    params = fn.params
    if isinstance(inputs, Mapping):
        names = [p.name_hint for p in params]
        unknown = sorted(set(inputs) - set(names))
        if unknown:
            raise PlaitError(f"unknown input '{unknown[0]}' (inputs are: {', '.join(names)})")
        missing = [n for n in names if n not in inputs]
        if missing:
            raise PlaitError(f"missing input '{missing[0]}' (inputs are: {', '.join(names)})")
        values = [inputs[n] for n in names]
    else:
        values = list(inputs)
        if len(values) != len(params):
            raise PlaitError(f"expected {len(params)} inputs, got {len(values)}")
    out = []
    for p, v in zip(params, values):
        t = p.checked_type
        a = np.asarray(v)
        if isinstance(t, TensorType):
            if a.dtype != DTYPES[t.dtype] and a.dtype.newbyteorder("=") == DTYPES[t.dtype]:
                a = a.astype(DTYPES[t.dtype])  # the same values in the other byte order (a big-endian file)
            if a.dtype != DTYPES[t.dtype]:
                raise PlaitError(f"input '{p.name_hint}': expected dtype {t.dtype}, got {a.dtype}")
            if len(a.shape) != t.ndim or any(isinstance(d, int) and d != s for d, s in zip(t.shape, a.shape)):
                raise PlaitError(f"input '{p.name_hint}': expected shape {t.shape}, got {a.shape}")
        out.append(a)
    return out


def run(mod: IRModule, inputs: Mapping[str, Any] | Sequence[Any] = (), func: str = "main", check: bool = True) -> Value:
    """Run ``mod[func]`` on ``inputs`` (by parameter name, or positionally) with numpy.

    Returns the function's value: an array, or a (nested) tuple of arrays.
    """
    interp = Interpreter(mod, check=check)
    fn = interp.mod[func]
    return interp.call_function(fn, _coerce_inputs(fn, inputs))


def flatten_value(v: Value) -> list[np.ndarray]:
    """Outputs in order: a tuple value becomes its leaves, an array a list of one."""
    if isinstance(v, tuple):
        return [x for f in v for x in flatten_value(f)]
    return [np.asarray(v)]
