"""A small TIR interpreter: the oracle for testing schedules and lowering on tiny shapes.

``evaluate(func, *arrays)`` runs a PrimFunc on numpy arrays, writing output buffers in place.
Values are numpy scalars of each node's dtype, so integer wrap-around and float rounding match
the C that plait generates (see :mod:`plait.tir.scalar`). Every buffer access is bounds-checked.
Scratch buffers start filled with NaN (floats) or the byte 0x5A (integers), so reading memory
that was never written shows up. A kernel call (:mod:`plait.tir.kernels`) runs the kernel's numpy
reference; an extern call the Python function passed for it in ``externs``. ``reverse_parallel=True`` runs parallel and vectorized loops
backwards: a schedule that made those iterations depend on each other then gives other results.

Implementation: the function is translated once to Python source (cached per PrimFunc) and
compiled; deep expressions and deep loop nests are split into helper functions, so neither
depth nor Python's nesting limits matter.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Mapping

import numpy as np

from plait.tir import scalar
from plait.ir import status as _status
from plait.tir.errors import TIRCheckError, TIREvalError, TIRError
from plait.tir.expr import (
    Add, AddressOf, And, BinaryOp, BitwiseAnd, BitwiseNot, BitwiseOr, BitwiseXor, BufferLoad, Call, Cast, Div,
    EQ, FloatImm, FloorDiv, FloorMod, GE, GT, IntImm, LE, LT, Let, Max, Min, Mul, NE, Not, Or, PrimExpr, Select,
    ShiftLeft, ShiftRight, Sub, TruncDiv, TruncMod, Var,
)
from plait.tir.functor import free_vars, pre_order, used_buffers
from plait.tir.kernels import run_reference
from plait.tir.stmt import Allocate, AssertStmt, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt

_INFIX = {Add: "+", Sub: "-", Mul: "*", Div: "/", BitwiseAnd: "&", BitwiseOr: "|", BitwiseXor: "^",
          EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">=", And: "and", Or: "or"}
_HELPER = {FloorDiv: "_floordiv", FloorMod: "_floormod", TruncDiv: "_truncdiv", TruncMod: "_truncmod",
           Min: "_min", Max: "_max", ShiftLeft: "_shl", ShiftRight: "_shr"}
_MAX_LEVEL = 40  # expression nesting kept in one Python expression
_MAX_BLOCKS = 12  # statement nesting kept in one Python function


def _ld(arr: np.ndarray, idx: tuple, name: str) -> Any:
    for k, (i, n) in enumerate(zip(idx, arr.shape)):
        if not 0 <= i < n:
            raise TIREvalError(f"load {name}[{', '.join(str(int(x)) for x in idx)}]: index {k} is out of "
                               f"bounds for shape {tuple(arr.shape)}")
    return arr[idx]


def _st(arr: np.ndarray, idx: tuple, value: Any, name: str) -> None:
    for k, (i, n) in enumerate(zip(idx, arr.shape)):
        if not 0 <= i < n:
            raise TIREvalError(f"store {name}[{', '.join(str(int(x)) for x in idx)}]: index {k} is out of "
                               f"bounds for shape {tuple(arr.shape)}")
    arr[idx] = value


def _addr(arr: np.ndarray, idx: tuple, name: str) -> np.ndarray:
    if not arr.flags.c_contiguous:
        raise TIREvalError(f"address_of({name}[...]): the array is not C-contiguous")
    offset = 0
    for i, n in zip(idx, arr.shape):
        offset = offset * n + int(i)
    if not 0 <= offset <= arr.size:
        raise TIREvalError(f"address_of({name}[...]): offset {offset} is out of bounds for size {arr.size}")
    return arr.reshape(-1)[offset:]


def _alloc(shape: tuple, dtype: str) -> np.ndarray:
    shape = tuple(int(d) for d in shape)
    if dtype == "bool":
        return np.ones(shape, bool)
    if np.dtype(dtype).kind == "f":
        return np.full(shape, np.nan, dtype)
    n = int(np.prod(shape, dtype=np.int64))
    return np.frombuffer(b"\x5a" * (n * np.dtype(dtype).itemsize), dtype).reshape(shape).copy()


def _range(lo: Any, extent: Any, reverse: bool) -> list:
    t = type(lo)
    r = range(int(lo), int(lo) + int(extent))
    return [t(k) for k in (reversed(r) if reverse else r)]


def _extern(ext: Mapping[str, Callable[..., Any]], name: str, dtype: str, *args: Any) -> Any:
    fn = ext.get(name)
    if fn is None:
        raise TIREvalError(f"extern function '{name}' has no Python implementation (pass externs={{'{name}': ...}})")
    out = fn(*args)
    return np.int64(0) if dtype in ("void", "handle") else scalar.make_scalar(out, dtype)


def _run_kernel(name: str, dtype: str, *args: Any) -> Any:
    out = run_reference(name, dtype, *args)
    return np.int64(0) if dtype == "void" else scalar.make_scalar(out, dtype)


def _check_failed(status: int) -> None:
    raise TIRCheckError(f"run-time check failed: {_status.MESSAGES.get(status, 'no message')} (status {status})",
                        status)


_RUNTIME: dict[str, Any] = {
    "_check_failed": _check_failed,
    "_ld": _ld, "_st": _st, "_addr": _addr, "_alloc": _alloc, "_range": _range, "_extern": _extern,
    "_run_kernel": _run_kernel,
    "_floordiv": scalar.floordiv, "_floormod": scalar.floormod, "_truncdiv": scalar.truncdiv,
    "_truncmod": scalar.truncmod, "_min": scalar.minimum, "_max": scalar.maximum, "_shl": scalar.shift_left,
    "_shr": scalar.shift_right, "_B": np.bool_, "_cast": scalar.cast,
}


class _Compiler:
    def __init__(self) -> None:
        self.names: dict[Any, str] = {}
        self.globals: dict[str, Any] = dict(_RUNTIME)
        self.consts: dict[tuple, str] = {}
        self.helpers: list[str] = []
        self.memo: dict[PrimExpr, tuple[str, int, frozenset[str]]] = {}
        self.outlined: set[PrimExpr] = set()

    def name(self, obj: Var | Buffer) -> str:
        if obj not in self.names:
            self.names[obj] = f"_{'b' if isinstance(obj, Buffer) else 'v'}{len(self.names)}"
        return self.names[obj]

    def const(self, node: IntImm | FloatImm) -> str:
        key = (node.dtype, repr(node.value))
        if key not in self.consts:
            self.consts[key] = f"_c{len(self.consts)}"
            self.globals[self.consts[key]] = scalar.make_scalar(node.value, node.dtype)
        return self.consts[key]

    def outline(self, code: str, free: frozenset[str], statement: bool = False) -> str:
        args = ", ".join(sorted(free))
        name = f"_h{len(self.helpers)}"
        body = code if statement else f"    return {code}"
        self.helpers.append(f"def {name}({args}):\n{body}\n")
        return f"{name}({args})"

    # -- expressions -------------------------------------------------------------------------------
    def expr(self, root: PrimExpr) -> tuple[str, frozenset[str]]:
        """Python source of ``root`` and the local names it reads. Each node object is translated
        once; a large node used again is outlined into a helper, so code stays linear in size."""
        memo = self.memo
        out: list[tuple[str, int, frozenset[str]]] = []
        stack: list[tuple[PrimExpr, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if not expanded and node in memo:
                code, level, free = memo[node]
                if len(code) > 80 and node not in self.outlined:
                    self.outlined.add(node)
                    memo[node] = code, level, free = self.outline(code, free), 1, free
                out.append((code, level, free))
                continue
            kids = node._children()
            if not expanded:
                stack.append((node, True))
                stack.extend((c, False) for c in reversed(kids))  # type: ignore[misc]
                continue
            args = out[len(out) - len(kids):] if kids else []
            del out[len(out) - len(kids):]
            code, level, free = self.compose(node, args)
            if level > _MAX_LEVEL:
                code, level = self.outline(code, free), 1
            memo[node] = code, level, free
            out.append((code, level, free))
        return out[0][0], out[0][2]

    def compose(self, node: PrimExpr, args: list) -> tuple[str, int, frozenset[str]]:
        codes = [a[0] for a in args]
        level = 1 + max((a[1] for a in args), default=0)
        free = frozenset().union(*(a[2] for a in args)) if args else frozenset()
        if isinstance(node, Var):
            n = self.name(node)
            return n, 0, frozenset({n})
        if isinstance(node, (IntImm, FloatImm)):
            return self.const(node), 0, frozenset()
        if isinstance(node, BinaryOp):
            if type(node) in _INFIX:
                return f"({codes[0]} {_INFIX[type(node)]} {codes[1]})", level, free
            return f"{_HELPER[type(node)]}({codes[0]}, {codes[1]})", level, free
        if isinstance(node, Not):
            return f"_B(not {codes[0]})", level, free
        if isinstance(node, BitwiseNot):
            return f"(~{codes[0]})", level, free
        if isinstance(node, Select):
            return f"({codes[1]} if {codes[0]} else {codes[2]})", level, free
        if isinstance(node, Cast):
            return f"_cast({node.dtype!r}, {codes[0]})", level, free
        if isinstance(node, (BufferLoad, AddressOf)):
            b = self.name(node.buffer)
            idx = "(" + "".join(c + ", " for c in codes) + ")"
            fn = "_ld" if isinstance(node, BufferLoad) else "_addr"
            return f"{fn}({b}, {idx}, {node.buffer.name!r})", level + 1, free | {b}
        if isinstance(node, Call):
            if node.kind == "extern":
                call_args = "".join(", " + c for c in codes)
                return f"_extern(_ext, {node.name!r}, {node.dtype!r}{call_args})", level, free | {"_ext"}
            if node.kind == "kernel":
                return f"_run_kernel({node.name!r}, {node.dtype!r}{''.join(', ' + c for c in codes)})", level, free
            fn = f"_i_{node.name}"
            self.globals[fn] = scalar.intrinsic(node.name)
            return f"{fn}({', '.join(codes)})", level, free
        if isinstance(node, Let):
            v = self.name(node.var)
            return f"(({v} := {codes[0]}), {codes[1]})[1]", level + 1, args[0][2] | (args[1][2] - {v})
        raise TIRError(f"the interpreter cannot evaluate {type(node).__name__}")

    # -- statements --------------------------------------------------------------------------------
    def stmt(self, root: Stmt, ind: int, depth: int) -> list[str]:
        """Python lines for ``root`` at indentation ``ind``; ``depth`` counts enclosing blocks."""
        if depth > _MAX_BLOCKS and isinstance(root, (For, IfThenElse)):
            free = {self.name(v) for v in free_vars(root)} | {"_ext", "_rev"}
            allocated = {s.buffer for s in pre_order(root) if isinstance(s, Allocate)}
            free |= {self.name(b) for b in used_buffers(root) if b not in allocated}
            body = "\n".join(self.stmt(root, 1, 0))
            return ["    " * ind + self.outline(body, frozenset(free), statement=True)]
        pad = "    " * ind
        lines: list[str] = []
        work: list[Stmt] = [root]
        while work:
            s = work.pop()
            if isinstance(s, SeqStmt):
                work.extend(reversed(s.stmts))
            elif isinstance(s, BufferStore):
                idx = "(" + "".join(self.expr(i)[0] + ", " for i in s.indices) + ")"
                lines.append(f"{pad}_st({self.name(s.buffer)}, {idx}, {self.expr(s.value)[0]}, {s.buffer.name!r})")
            elif isinstance(s, Evaluate):
                lines.append(pad + self.expr(s.value)[0])
            elif isinstance(s, AssertStmt):
                lines.append(f"{pad}if not ({self.expr(s.cond)[0]}):")
                lines.append(f"{pad}    _check_failed({s.status})")
            elif isinstance(s, LetStmt):
                lines.append(f"{pad}{self.name(s.var)} = {self.expr(s.value)[0]}")
                work.append(s.body)
            elif isinstance(s, Allocate):
                shape = "(" + "".join(self.expr(d)[0] + ", " for d in s.buffer.shape) + ")"
                lines.append(f"{pad}{self.name(s.buffer)} = _alloc({shape}, {s.buffer.dtype!r})")
                work.append(s.body)
            elif isinstance(s, For):
                rev = "_rev" if s.kind in ("parallel", "vectorized") else "False"
                lines.append(f"{pad}for {self.name(s.loop_var)} in _range({self.expr(s.min)[0]}, "
                             f"{self.expr(s.extent)[0]}, {rev}):")
                lines += self.stmt(s.body, ind + 1, depth + 1)
            elif isinstance(s, IfThenElse):
                lines.append(f"{pad}if {self.expr(s.cond)[0]}:")
                lines += self.stmt(s.then_case, ind + 1, depth + 1)
                if s.else_case is not None:
                    lines.append(f"{pad}else:")
                    lines += self.stmt(s.else_case, ind + 1, depth + 1)
            else:
                raise TIRError(f"the interpreter cannot run {type(s).__name__}")
        return lines

    def build(self, params: list[str], body: list[str], entry: str = "_kernel") -> Callable[..., Any]:
        src = "\n".join(self.helpers) + f"\ndef {entry}(_ext, _rev, {', '.join(params)}):\n" + "\n".join(body) + "\n"
        code = compile(src, "<tir-interpreter>", "exec")
        exec(code, self.globals)  # noqa: S102 - our own generated source
        return self.globals[entry]


_CACHE: "weakref.WeakKeyDictionary[PrimFunc, tuple[Callable[..., Any], list[Any]]]" = weakref.WeakKeyDictionary()


_VERIFIED: "weakref.WeakKeyDictionary[PrimFunc, bool]" = weakref.WeakKeyDictionary()


def _compile(func: PrimFunc) -> tuple[Callable[..., Any], list[Any]]:
    if func not in _CACHE:
        c = _Compiler()
        params = [c.name(p) for p in func.params]
        _CACHE[func] = (c.build(params, c.stmt(func.body, 1, 1)), list(func.params))
    return _CACHE[func]


def _check_args(func: PrimFunc, args: tuple) -> list[Any]:
    name = func.name or "<anonymous>"
    if len(args) != len(func.params):
        raise TIRError(f"PrimFunc '{name}' takes {len(func.params)} argument(s), got {len(args)}")
    env: dict[Var, Any] = {}
    values: list[Any] = []
    for k, (p, a) in enumerate(zip(func.params, args)):
        if isinstance(p, Var):
            env[p] = scalar.make_scalar(a, p.dtype)
    for k, (p, a) in enumerate(zip(func.params, args)):
        where = f"PrimFunc '{name}': argument {k} ('{p.name}')"
        if isinstance(p, Var):
            values.append(env[p])
            continue
        if not isinstance(a, np.ndarray) or a.dtype != np.dtype(p.dtype):
            got = f"{a.dtype} array" if isinstance(a, np.ndarray) else type(a).__name__
            raise TIRError(f"{where}: expected a numpy array of {p.dtype}, got {got}")
        want = tuple(d.value if isinstance(d, IntImm) else int(evaluate_expr(d, env)) for d in p.shape)
        if a.shape != want:
            raise TIRError(f"{where}: expected shape {want}, got {a.shape}")
        values.append(a)
    return values


def evaluate(func: PrimFunc, *args: Any, externs: Mapping[str, Callable[..., Any]] | None = None,
             reverse_parallel: bool = False) -> None:
    """Run ``func`` on ``args`` (numpy arrays for buffer params, numbers for scalar params).

    Output buffers are written in place. ``externs`` maps extern function names to Python
    callables; ``address_of`` arguments arrive as flat numpy views starting at that element.
    """
    from plait.tir.verify import verify

    if func not in _VERIFIED:
        verify(func)
        _VERIFIED[func] = True
    kernel, _ = _compile(func)
    values = _check_args(func, args)
    with np.errstate(all="ignore"):
        try:
            kernel(dict(externs or {}), reverse_parallel, *values)
        except TIRCheckError as exc:
            raise TIRCheckError(f"function '{func.name or 'func'}': {exc}", exc.status) from None


_EXPR_CACHE: "weakref.WeakKeyDictionary[PrimExpr, tuple[Callable[..., Any], list[Any]]]" = weakref.WeakKeyDictionary()


def _compile_expr(expr: PrimExpr) -> tuple[Callable[..., Any], list[Any]]:
    if expr not in _EXPR_CACHE:
        c = _Compiler()
        code, _ = c.expr(expr)
        objs: list[Any] = list(free_vars(expr)) + list(used_buffers(expr))
        params = [c.name(o) for o in objs]
        _EXPR_CACHE[expr] = (c.build(params, [f"    return {code}"], "_expr"), objs)
    return _EXPR_CACHE[expr]


def evaluate_expr(expr: PrimExpr, env: Mapping[Var, Any] | None = None,
                  buffers: Mapping[Buffer, np.ndarray] | None = None,
                  externs: Mapping[str, Callable[..., Any]] | None = None) -> Any:
    """The value (a numpy scalar) of ``expr`` with its free variables and buffers bound."""
    env = env or {}
    buffers = buffers or {}
    fn, objs = _compile_expr(expr)
    values = []
    for o in objs:
        if isinstance(o, Var):
            if o not in env:
                raise TIRError(f"evaluate_expr: no value for variable '{o.name}'")
            values.append(scalar.make_scalar(env[o], o.dtype))
        else:
            if o not in buffers:
                raise TIRError(f"evaluate_expr: no array for buffer '{o.name}'")
            values.append(buffers[o])
    with np.errstate(all="ignore"):
        return fn(dict(externs or {}), False, *values)
