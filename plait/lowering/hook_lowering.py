"""The shared helper of ``relay_to_tir`` hooks: lower the region functions of the piece being lowered.

A ``relay_to_tir`` hook sees the whole IRModule and must replace every region function placed on
its piece (``attrs["piece"] == piece name``, see docs/backends.md and the pipeline contract) by
PrimFuncs. What is common to every backend lives here, so a hook is one line plus what is specific
to it::

    def lower_call(call):            # a typed operator call -> PrimFunc, or None for "default lowering"
        if call.op_name != "nn.dense":
            return None
        ...build the PrimFunc (params: input buffers in argument order, then output buffers)...

    class MyKind(Backend):
        def relay_to_tir(self, mod, target):
            return lower_regions(mod, target, lower_call)

:func:`lower_regions`

1. finds the region functions of the piece named by ``mod.attrs["piece"]`` (set by
   :func:`plait.target.run_relay_to_tir`; without it, a piece named after the target's kind);
2. for each operator call inside them asks the backend's ``lower_call(call)``; ``None`` means "use the
   default lowering for this call" (:func:`plait.lowering.function.lower_function` with the piece's
   target: the op's TE compute and the target's default schedule, the call as its own function);
3. names the PrimFuncs ``<prefix>_<base>`` (``prefix`` defaults to the piece name; ``base`` is the
   PrimFunc's own ``global_symbol`` when the backend set one, else the operator name), C-safe and
   unique across the whole module (``_1``, ``_2``... on a clash);
4. deduplicates: calls with the same operator, attributes and argument types (``meta`` ignored;
   :func:`plait.relay.analysis.structural_equal`) are lowered once, and PrimFuncs that come out
   structurally identical (:func:`plait.tir.structural_equal`, names ignored) are kept once;
5. sets attrs ``global_symbol``, ``target`` (the piece name) and ``num_inputs`` (``tuple_output``
   for a 1-tuple result), checks the PrimFunc's Relay type against the call's and verifies it;
6. rewrites each region function into a Relay function with the same params, type and attrs whose
   body calls the PrimFuncs through ``GlobalVar`` (constants stay arguments).

``lower_region(func) -> PrimFunc | None`` is the per-function variant: the backend gets each whole
region function and may replace it by one PrimFunc (stored under the region's own global name,
which becomes its ``global_symbol``); ``None`` falls back to the per-call path.

Destination passing, as everywhere: PrimFunc params are the input buffers in argument order, then
one output buffer per tensor of the result (tuples flattened). :func:`call_buffers` makes them.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from plait.lowering.cache import strip_meta
from plait.lowering.lower import UniqueNames, single_call_function
from plait.errors import PlaitError
from plait.ir.op import Op
from plait.ir.types import FuncType, TensorType, TupleType, Type, tuple_fields
from plait.relay.analysis import structural_equal, structural_hash
from plait.relay.expr import Call, Expr, Function, GlobalVar
from plait.relay.infer import describe_call, infer_type
from plait.relay.module import IRModule
from plait.relay.passes.fuse_ops import NOT_FUSED
from plait.relay.visitor import ExprMutator
from plait.target.composite import PIECE_ATTR, piece_of
from plait.tir.stmt import Buffer, PrimFunc

_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

LowerCall = Callable[[Call], "PrimFunc | None"]
LowerRegion = Callable[[Function], "PrimFunc | None"]


class HookLoweringError(PlaitError):
    """A backend's lowering of a region function (or of one call in it) failed or returned bad TIR."""


def _piece(mod: IRModule, target: Any) -> Any:
    from plait.target import Piece, Target

    if isinstance(target, Piece):
        return target
    if not isinstance(target, Target):
        raise HookLoweringError(f"lower_regions: expected the hook's target (a Target), got {target!r}")
    return Piece(str(piece_of(mod) or target.kind_name), target)


def region_functions(mod: IRModule, piece_name: str) -> list[str]:
    """Global names of the Relay functions of ``mod`` placed on piece ``piece_name``, sorted."""
    return [g for g, f in mod.items()
            if isinstance(f, Function) and not f.attrs.get("Primitive") and piece_of(f) == piece_name]


def _leaf_types(t: Type, what: str) -> list[TensorType]:
    out = []
    for f in tuple_fields(t):
        if not isinstance(f, TensorType) or not f.is_static:
            raise HookLoweringError(f"{what}: expected tensors (or a tuple of tensors) of static shape, got {t}")
        out.append(f)
    return out


def call_buffers(call: Call) -> tuple[list[Buffer], list[Buffer]]:
    """The PrimFunc parameters of a typed call, destination-passing style: one buffer per argument
    (``p0``, ``p1``, ...) and one per tensor of the result (``out`` or ``out0``, ``out1``, ...)."""
    ins = []
    for k, a in enumerate(call.args):
        (t,) = _leaf_types(a.checked_type, f"{describe_call(call)}: argument {k}")
        ins.append(Buffer(f"p{k}", tuple(t.shape), t.dtype))
    outs_t = _leaf_types(call.checked_type, f"{describe_call(call)}: result")
    names = ["out"] if len(outs_t) == 1 else [f"out{k}" for k in range(len(outs_t))]
    return ins, [Buffer(n, tuple(t.shape), t.dtype) for n, t in zip(names, outs_t)]


class _Lowering(UniqueNames):
    """Names, deduplicates and collects the PrimFuncs of one module."""

    def __init__(self, mod: IRModule, piece: Any, prefix: str, schedule: bool):
        super().__init__(mod)
        self.piece, self.prefix, self.schedule = piece, prefix, schedule
        self.funcs: dict[str, PrimFunc] = {}
        self.by_call: dict[int, list[tuple[Function, str]]] = {}
        self.by_tir: dict[int, list[tuple[PrimFunc, str]]] = {}

    def lower_call(self, call: Call, lower_call: LowerCall | None, region: str) -> str:
        from plait.lowering.cache import lower_cached

        fn = single_call_function(call)
        key = strip_meta(fn)
        h = structural_hash(key)
        for other, name in self.by_call.get(h, []):
            if structural_equal(other, key):
                return name
        where = f"{describe_call(call)} in region function '{region}' (piece '{self.piece.name}')"
        pf = None
        if lower_call is not None:
            pf = _run_lowerer(lower_call, call, where)
        if pf is None:
            assert isinstance(call.op, Op)
            base = f"{self.prefix}_{call.op.name}"
            pf = lower_cached(fn, "default", self.piece.target, self.piece, self.schedule)
        else:
            if not isinstance(pf, PrimFunc):
                raise HookLoweringError(f"lowering {where}: expected a PrimFunc or None, got {type(pf).__name__}")
            own = pf.name
            base = f"{self.prefix}_{own if own else call.op.name}"  # type: ignore[union-attr]
        name = self._add(pf, base, len(call.args), FuncType(tuple(a.checked_type for a in call.args),
                                                              call.checked_type), where)
        self.by_call.setdefault(h, []).append((key, name))
        return name

    def _finish(self, pf: PrimFunc, name: str, num_inputs: int, want: FuncType, where: str) -> PrimFunc:
        from plait import tir

        attrs: dict[str, Any] = {"global_symbol": name, PIECE_ATTR: self.piece.name, "num_inputs": num_inputs}
        if isinstance(want.ret_type, TupleType) and len(want.ret_type.fields) == 1:
            attrs["tuple_output"] = True
        pf = pf.with_attrs(attrs)
        if pf.relay_type is None:
            raise HookLoweringError(f"lowering {where}: the PrimFunc's parameters must be buffers of static shape: "
                                    f"{num_inputs} input(s) in argument order, then the output(s)")
        if pf.relay_type != want:
            raise HookLoweringError(f"lowering {where}: the PrimFunc's type {pf.relay_type} is not the call's "
                                    f"{want} (params: input buffers in argument order, then output buffers)")
        try:
            tir.verify(pf, name)
        except PlaitError as exc:
            raise HookLoweringError(f"lowering {where}: invalid PrimFunc: {exc}") from exc
        return pf

    def _add(self, pf: PrimFunc, base: str, num_inputs: int, want: FuncType, where: str) -> str:
        from plait import tir

        name = self.unique(base)
        pf = self._finish(pf, name, num_inputs, want, where)
        key = pf.with_attrs(global_symbol="_")
        h = tir.structural_hash(key)
        for other, have in self.by_tir.get(h, []):
            if tir.structural_equal(other, key):
                self.used.discard(name)
                return have
        self.by_tir.setdefault(h, []).append((key, name))
        self.funcs[name] = pf
        return name


class _Rewriter(ExprMutator):
    def __init__(self, state: _Lowering, lower_call: LowerCall | None, region: str):
        super().__init__()
        self.state, self.lower_call_fn, self.region = state, lower_call, region

    def rewrite_call(self, pre: Call, post: Expr) -> Expr:
        assert isinstance(post, Call)
        if not isinstance(pre.op, Op) or pre.op.name in NOT_FUSED:
            return post
        name = self.state.lower_call(pre, self.lower_call_fn, self.region)
        return Call(GlobalVar(name), post.args)


def lower_regions(mod: IRModule, target: Any, lower_call: LowerCall | None = None, *, prefix: str | None = None,
                  lower_region: LowerRegion | None = None, schedule: bool = True) -> IRModule:
    """Replace every region function of the piece in ``mod`` by PrimFuncs (module docstring); ``target``:
    the hook's target (or a Piece).

    ``lower_call(call)``: the backend's PrimFunc for one typed operator call, or None for the default
    lowering; ``lower_region(func)``: the backend's PrimFunc for a whole region function, or None for
    the per-call path; ``prefix``: of the PrimFunc names (default: the piece name); ``schedule``: apply
    the target's default schedule to default-lowered calls.
    """
    piece = _piece(mod, target)
    mod = infer_type(mod)
    state = _Lowering(mod, piece, piece.name if prefix is None else prefix, schedule)
    replaced: dict[str, Any] = {}
    for gname in region_functions(mod, piece.name):
        fn = mod[gname]
        assert isinstance(fn, Function)
        where = f"region function '{gname}' (piece '{piece.name}')"
        if lower_region is not None:
            pf = _run_lowerer(lower_region, fn, where)
            if pf is not None:
                if not isinstance(pf, PrimFunc):
                    raise HookLoweringError(f"lowering {where}: expected a PrimFunc or None, got {type(pf).__name__}")
                if not _C_IDENTIFIER.match(gname):
                    raise HookLoweringError(f"lowering {where}: the region's name is not a C identifier; "
                                            "lower it per call instead")
                want = FuncType(tuple(p.checked_type for p in fn.params), fn.body.checked_type)
                replaced[gname] = state._finish(pf, gname, len(fn.params), want, where)
                continue
        body = _Rewriter(state, lower_call, gname).visit(fn.body)
        replaced[gname] = Function(fn.params, body, fn.ret_type, fn.attrs)
    return infer_type(mod.with_functions({**replaced, **state.funcs}))


def _run_lowerer(fn: Callable[[Any], Any], arg: Any, where: str) -> Any:
    """Call a hook's ``lower_call``/``lower_region``; its failure becomes a HookLoweringError naming ``where``."""
    try:
        return fn(arg)
    except PlaitError as exc:
        raise HookLoweringError(f"lowering {where}: {exc}") from exc
    except Exception as exc:
        raise HookLoweringError(f"lowering {where} failed: {type(exc).__name__}: {exc}") from exc


__all__ = ["HookLoweringError", "call_buffers", "lower_regions", "region_functions"]
