"""Default lowering of one Primitive Relay function to a scheduled TIR PrimFunc (docs/lowering.md, 3):
:func:`lower_function`.

1. a ``te.placeholder`` per parameter; the TE compute of each call of the body
   (``op.compute``), its stages annotated with the operator and its pattern;
   constants of one element become constant stages; tuples and tuple items are followed;
2. ``te.create_prim_func(placeholders + outputs)`` (outputs: the leaves of the result);
3. the target's default schedule, ``plait.schedule.default_schedule(func, target)`` (under the knob
   config of the function's tuning record, if a tuning file is applied: :mod:`plait.lowering.tuning`),
   then ``tir.simplify`` and ``tir.verify``;
4. the PrimFunc gets attrs ``global_symbol`` (the name asked for), ``target`` (the canonical target
   string) and ``num_inputs``.

The build reaches it through the lowering cache (:func:`plait.lowering.cache.lower_cached`); the pass
that lowers a module's calls with it is :class:`plait.lowering.lower.LowerToTIR`.
"""

from __future__ import annotations

from typing import Any

from plait.errors import PlaitError
from plait.ir.op import Op
from plait.ir.types import ANY_DIM, FuncType, TensorType, TupleType, Type, tuple_fields
from plait.op._compute import compute_facts
from plait.relay.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem
from plait.relay.infer import describe_call
from plait.relay.passes.fuse_ops import fusion_pattern
from plait.relay.visitor import post_order
from plait.tir.expr import Var as TirVar
from plait.tir.expr import const as tir_const
from plait.tir.simplify import simplify
from plait.tir.stmt import PrimFunc
from plait.tir.verify import verify
from plait.target.composite import PIECE_ATTR


class LowerError(PlaitError):
    """A Primitive function could not be lowered to TIR (missing compute, unsupported type...)."""


def _where(target: Any, piece: Any) -> str:
    if piece is not None:
        return f"piece '{piece.name}' (target '{target}')"
    return f"target '{target}'"


def _tensor(t: Type, what: str) -> TensorType:
    if not isinstance(t, TensorType):
        raise LowerError(f"{what}: expected a tensor type, got {t}")
    return t


def _leaves(t: Type, what: str) -> list[TensorType]:
    out = []
    for f in tuple_fields(t):
        if isinstance(f, TupleType):
            raise LowerError(f"{what}: nested tuple results are not supported, got {t}")
        out.append(_tensor(f, what))
    return out


def param_shape(t: TensorType, k: int) -> tuple[Any, ...]:
    """The placeholder shape of parameter ``k`` of type ``t``: static dims as ints, a symbolic dim as its
    name (the size variable ``te.size_var(name)``), an unknown dim ``"?"`` (dim ``j``) as the fresh size
    variable ``p<k>_d<j>``."""
    from plait.te import size_var

    return tuple(d if isinstance(d, int) else size_var(f"p{k}_d{j}" if d == ANY_DIM else d)
                 for j, d in enumerate(t.shape))


def _dim_fits(got: Any, want: Any) -> bool:
    """Does a compute's result dim (int or int64 expression) fit the type's dim (int, name or "?")?"""
    if isinstance(want, int):
        return isinstance(got, int) and got == want
    if want == ANY_DIM:
        return not isinstance(got, int) or got >= 0
    return isinstance(got, TirVar) and got.name == want


def _type_fits(got: Type | None, want: Type) -> bool:
    if isinstance(got, TensorType) and isinstance(want, TensorType):
        return got.dtype == want.dtype and got.ndim == want.ndim and all(
            g == w or w == ANY_DIM for g, w in zip(got.shape, want.shape))
    if isinstance(got, TupleType) and isinstance(want, TupleType):
        return len(got.fields) == len(want.fields) and all(map(_type_fits, got.fields, want.fields))
    if isinstance(got, FuncType) and isinstance(want, FuncType):
        return _type_fits(TupleType((*got.arg_types, got.ret_type)), TupleType((*want.arg_types, want.ret_type)))
    return False


def _constant_stage(c: Constant) -> Any:
    from plait import te

    value = c.data.reshape(-1)[0]
    dtype = str(c.data.dtype)
    return te.compute(c.data.shape, lambda *i: tir_const(value.item() if dtype != "bool" else bool(value), dtype),
                      name="T_const")


def _schedule(func: PrimFunc, target: Any) -> PrimFunc:
    from plait.lowering.tuning import schedule  # the default schedule, under a tuning record's config if any

    return schedule(func, target)


def lower_function(fn: Function, name: str, target: Any, piece: Any = None, schedule: bool = True) -> PrimFunc:
    """The PrimFunc of the Primitive function ``fn`` (typed), with ``global_symbol`` ``name``, for ``target``
    (a Target, a target string or a Piece; ``piece``, if given, is the Piece it belongs to). Its ``piece``
    attribute names that piece (:data:`plait.target.composite.PIECE_ATTR`), or, without one, the piece a
    composite of ``target`` alone would have (its kind's name)."""
    from plait import te

    target, of = resolve_target(target, "lower_function")
    piece = piece or of
    where = _where(target, piece)
    body = fn.body
    if isinstance(body, Call) and isinstance(body.op, Op) and body.op.prim_func is not None:
        return _own_prim_func(fn, body, name, piece_name_for(target, piece), where)
    inputs = []
    values: dict[Expr, Any] = {}
    for k, p in enumerate(fn.params):
        t = _tensor(p.checked_type, f"lowering '{name}' for {where}: parameter {k} ('{p.name_hint}')")
        ph = te.placeholder(param_shape(t, k), t.dtype, f"p{k}")
        inputs.append(ph)
        values[p] = ph
    with compute_facts(**_facts(target)):
        for node in post_order(fn.body):
            if node in values:
                continue
            if isinstance(node, Constant):
                if node.data.size != 1:
                    raise LowerError(f"lowering '{name}' for {where}: a constant of shape {node.data.shape} inside a "
                                     "Primitive function (pass it as an argument)")
                values[node] = _constant_stage(node)
            elif isinstance(node, Tuple):
                values[node] = tuple(values[f] for f in node.fields)
            elif isinstance(node, TupleGetItem):
                values[node] = values[node.tuple_value][node.index]
            elif isinstance(node, Call) and isinstance(node.op, Op):
                values[node] = _lower_call(node, [values[a] for a in node.args], where)
            else:
                raise LowerError(f"lowering '{name}' for {where}: unsupported {type(node).__name__} in a Primitive "
                                 f"function: {node!r}")
    out = values[fn.body]
    outs = list(out) if isinstance(out, tuple) else [out]
    _leaves(fn.body.checked_type, f"lowering '{name}' for {where}")
    try:
        func = te.create_prim_func(inputs + outs, name, num_inputs=len(inputs))
    except PlaitError as exc:
        raise LowerError(f"lowering '{name}' for {where}: {exc}") from exc
    if schedule:
        func = _schedule(func, target)
    func = simplify(func)
    attrs: dict[str, Any] = {"global_symbol": name, PIECE_ATTR: piece_name_for(target, piece),
                             "num_inputs": len(inputs)}
    if isinstance(fn.body.checked_type, TupleType) and len(outs) == 1:
        attrs["tuple_output"] = True  # a 1-tuple result, not a bare tensor
    func = func.with_attrs(attrs)
    verify(func, name)
    want = FuncType(tuple(p.checked_type for p in fn.params), fn.body.checked_type)
    if not _type_fits(func.relay_type, want):  # pragma: no cover - create_prim_func keeps the placeholders' shapes
        raise LowerError(f"lowering '{name}' for {where}: the PrimFunc's type {func.relay_type} is not {want}")
    return func


def _facts(target: Any) -> dict[str, Any]:
    """What the computes may know of ``target`` (:func:`plait.op._compute.compute_fact`): its vector width,
    paired 16-bit multiply-accumulates and whether it fuses float32 multiply-adds in hardware (``fma``: an
    FPU on a microcontroller, FPv4-SP and later; a host with 256-bit vectors or wider, x86-64-v3's FMA3;
    elsewhere ``fmaf`` would be a libm call), whether its PrimFuncs are compiled as C (``compiled_as_c``:
    gcc's vectorizer, which forms dot products from dot loops; not LLVM's) and, then, whether that C has
    AVX512-VNNI (``vnni``: :func:`_vnni`). None for a target without a
    schedule rule set: the computes' defaults."""
    from plait.schedule import machine_for

    try:
        m = machine_for(target)
    except PlaitError:
        return {}
    fma = m.fpu != "none" and (m.rules == "microcontroller" or m.simd_bits >= 256)
    backend = getattr(getattr(target, "kind", None), "backend", None)
    as_c = backend is None or type(backend).generates_c()
    return {"simd_bits": m.simd_bits, "narrow_macs": m.narrow_macs, "fma": fma, "compiled_as_c": as_c,
            "vnni": as_c and m.rules != "microcontroller" and _vnni(target)}


def target_facts(target: Any) -> dict[str, Any]:
    """The compute facts of ``target`` (:func:`_facts`), for passes that choose what to rewrite by
    the forms the computes will take (the ``c`` kind's channels-last legalization)."""
    return _facts(target)


def _vnni(target: Any) -> bool:
    """Whether C compiled for ``target`` has AVX512-VNNI: its ``-int8-dot`` option when the kind has
    one and it is set, else this machine's CPU (host C is built with ``-march=native``)."""
    from plait.target.host import cpu_has

    chosen = str(getattr(target, "options", {}).get("int8-dot", "") or "")
    return chosen == "vnni" if chosen else cpu_has("avx512_vnni")


def piece_name_for(target: Any, piece: Any = None) -> str:
    """The piece a function lowered for ``target`` (a Target, a target string or a Piece; on ``piece``, if
    given) is placed on: the piece's name, else the name a composite of that target alone gives its piece."""
    target, of = resolve_target(target, "lower_function")
    piece = piece or of
    return piece.name if piece is not None else target.kind_name


def _own_prim_func(fn: Function, call: Call, name: str, piece: str, where: str) -> PrimFunc:
    """The PrimFunc an operator writes itself (:attr:`Op.prim_func`: a data-dependent output shape), for a
    Primitive function that is exactly one call of it (the operator is opaque: FuseOps groups it alone)."""
    if list(call.args) != list(fn.params):
        raise LowerError(f"cannot lower {describe_call(call)} for {where}: operator '{call.op.name}' writes its "
                         "own TIR and must be the only call of its function, on the function's parameters")
    try:
        func = call.op.prim_func(tuple(a.checked_type for a in call.args), call.attrs, name)
    except PlaitError as exc:
        raise LowerError(f"cannot lower {describe_call(call)} for {where}: {exc}") from exc
    func = func.with_attrs({"global_symbol": name, PIECE_ATTR: piece, "num_inputs": len(fn.params)})
    verify(func, name)
    return func


def _lower_call(call: Call, args: list[Any], where: str) -> Any:
    from plait import te

    op = call.op
    assert isinstance(op, Op)
    compute = op.compute
    if compute is None:
        raise LowerError(f"cannot lower {describe_call(call)} for {where}: operator '{op.name}' has no TE "
                         "compute")
    for k, a in enumerate(args):
        if not isinstance(a, te.Tensor):
            raise LowerError(f"cannot lower {describe_call(call)} for {where}: argument {k} is a tuple")
    try:
        res = compute(args, call.attrs, call.checked_type)
    except PlaitError as exc:
        raise LowerError(f"cannot lower {describe_call(call)} for {where}: {exc}") from exc
    except Exception as exc:  # a bug in a compute: say which call and operator
        raise LowerError(f"cannot lower {describe_call(call)} for {where}: the compute of '{op.name}' failed: "
                         f"{type(exc).__name__}: {exc}") from exc
    outs = list(res) if isinstance(res, (list, tuple)) else [res]
    want = _leaves(call.checked_type, f"cannot lower {describe_call(call)} for {where}")
    got = [(tuple(t.shape), t.dtype) for t in outs if isinstance(t, te.Tensor)]
    if len(got) != len(want) or not all(
            g[1] == w.dtype and len(g[0]) == w.ndim and all(map(_dim_fits, g[0], w.shape))
            for g, w in zip(got, want)):
        raise LowerError(f"cannot lower {describe_call(call)} for {where}: the compute of '{op.name}' returned "
                         f"{got}, expected {[(tuple(w.shape), w.dtype) for w in want]}")
    te.annotate(outs, args, op.name, fusion_pattern(call).name.lower())
    return tuple(outs) if isinstance(call.checked_type, TupleType) else outs[0]


def resolve_target(target: Any, who: str) -> tuple[Any, Any]:
    """``(Target, Piece or None)`` of ``target``: a Target, a target string or a Piece of a composite target.
    ``who`` (the function that needs it) is named when there is none."""
    from plait.target import Piece, Target

    if target is None:
        raise LowerError(f"{who}: no target given (pass a Target, a target string or a Piece)")
    if isinstance(target, Piece):
        return target.target, target
    if isinstance(target, Target):
        return target, None
    return Target(target), None


__all__ = ["LowerError", "lower_function", "param_shape", "piece_name_for", "resolve_target", "target_facts"]
