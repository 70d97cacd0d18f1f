"""The partition and lower steps: ``Placed -> Partitioned -> Lowered``.

Partitioning (:mod:`plait.placement.partition`) inserts ``device_copy`` between memories and outlines
same-piece regions into functions ``<piece>_<k>``. Lowering goes per piece, in composite order: its
kind's ``relay_to_runtime`` hook (an external module; the region becomes an external PrimFunc
declaration), else its ``relay_to_tir`` hook (checked: :func:`check_hook_result`), else default lowering
(:func:`default_lowering`: the kind's legalization, FuseOps, LowerToTIR). Hooks are called only through
:mod:`plait.target.hooks`; nothing here branches on a kind's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from plait.errors import PlaitError
from plait.ir.transform import Pass, PassContext
from plait.pipeline.stages import BuildError, Lowered, Partitioned, Placed
from plait.pipeline.step import StagePass
from plait.relay.module import IRModule
from plait.target.composite import PIECE_ATTR
from plait.target.errors import HookError

if TYPE_CHECKING:
    from plait.target import CompositeTarget


@dataclass(frozen=True)
class Partition(StagePass):
    """Placed -> Partitioned: ``device_copy`` insertion and outlining of same-piece regions
    (:mod:`plait.placement.partition`)."""

    composite: CompositeTarget | None = None
    name: ClassVar[str] = "partition"

    def run(self, placed: Placed, ctx: PassContext) -> Partitioned:
        from plait.placement.partition import partition

        a = placed.assignment
        if a is None:
            return Partitioned(partition(placed.mod, {}, self.composite), None)
        return Partitioned(partition(placed.mod, a.pieces(), self.composite, getattr(a, "regions", ()),
                                     getattr(a, "fusion", None) or getattr(a, "fused", None)), a)


def _new_prim_funcs(before: IRModule, after: IRModule) -> list[str]:
    from plait.tir.stmt import PrimFunc

    return [k for k, f in after.items() if isinstance(f, PrimFunc) and (k not in before or before[k] is not f)]


def _tag(mod: IRModule, names: list[str], piece: Any) -> IRModule:
    tagged = {}
    for k in names:
        f = mod[k]
        attrs = {PIECE_ATTR: piece.name}
        if "global_symbol" not in f.attrs:
            attrs["global_symbol"] = k
        tagged[k] = f.with_attrs(**attrs)
    return mod.with_functions(tagged)


@dataclass(frozen=True)
class Lower(StagePass):
    """Partitioned -> Lowered. Per piece, in composite order: its kind's ``relay_to_runtime`` hook, else
    its ``relay_to_tir`` hook, else default lowering (FuseOps + LowerToTIR) of the piece's region
    functions."""

    composite: CompositeTarget | None = None
    name: ClassVar[str] = "lower"

    def run(self, part: Partitioned, ctx: PassContext) -> Lowered:
        from plait.placement.partition import regions_of

        external: dict[str, list] = {}
        mod = part.mod
        for piece in self.composite.pieces:
            names = regions_of(mod, piece.name)
            if not names:
                continue
            hooks = piece.target.kind.hooks
            if hooks.get("relay_to_runtime") is not None:
                mod = self._external(mod, piece, names, external.setdefault(piece.name, []))
            elif hooks.get("relay_to_tir") is not None:
                mod = self._hook(mod, piece, names, ctx)
            else:
                mod = self._default(mod, piece, names, ctx)
        return Lowered(mod, part.assignment, {k: tuple(v) for k, v in external.items()})

    def _default(self, mod: IRModule, piece: Any, names: list[str], ctx: PassContext) -> IRModule:
        from plait.tir.stmt import PrimFunc

        wanted = set(names)
        sub = IRModule({k: f for k, f in mod.items() if k in wanted or isinstance(f, PrimFunc)}, mod.attrs)
        reserved = [k for k in mod if k not in sub]
        for p in default_lowering(piece, reserved):
            sub = ctx.run(p, sub)
        new = _new_prim_funcs(mod, sub)
        mod = mod.with_functions({k: sub[k] for k in [*names, *new]})
        return _tag(mod, new, piece)

    def _hook(self, mod: IRModule, piece: Any, names: list[str], ctx: PassContext) -> IRModule:
        from plait.target import run_relay_to_tir

        try:
            out = run_relay_to_tir(piece, mod, ctx)
        except HookError as exc:
            raise _name_functions(exc, names) from exc.__cause__
        check_hook_result(piece, "relay_to_tir", mod, out, names)
        new = _new_prim_funcs(mod, out)
        return _tag(out, new, piece)

    def _external(self, mod: IRModule, piece: Any, names: list[str], out: list) -> IRModule:
        from plait.target import HookError, run_relay_to_runtime

        for k in names:
            fn = mod[k]
            try:
                rt = run_relay_to_runtime(piece, fn)
            except HookError as exc:
                raise _name_functions(exc, [k]) from exc.__cause__
            where = f"hook 'relay_to_runtime' of target kind '{piece.target.kind_name}' on piece '{piece.name}'"
            if not hasattr(rt, "get_function") or not hasattr(rt, "function_names"):
                raise HookError(f"{where} returned {type(rt).__name__} for function '{k}'; expected a runtime Module")
            if k not in rt.function_names():
                raise HookError(f"{where}: the module it returned for function '{k}' has no function '{k}' "
                                f"(it has: {', '.join(rt.function_names()) or 'none'})")
            out.append(rt)
            mod = mod.with_function(k, external_declaration(fn, k, piece))
        return mod


def _name_functions(exc: Exception, names: list[str]) -> Exception:
    """A hook's failure message, saying which function(s) it was lowering."""
    from plait.target import HookError

    msg = str(exc)
    which = ", ".join(f"'{n}'" for n in names)
    plural = "s" if len(names) > 1 else ""
    if " failed: " in msg:
        return HookError(msg.replace(" failed: ", f" failed on function{plural} {which}: ", 1))
    return HookError(f"{msg} (lowering function{plural} {which})")


def external_declaration(fn: Any, name: str, piece: Any) -> Any:
    """A PrimFunc without a body standing for ``fn`` implemented by an external runtime module:
    buffers for its (flattened) inputs then outputs."""
    from plait.ir.types import TensorType, TupleType
    from plait.tir.expr import const
    from plait.tir.stmt import Buffer, Evaluate, PrimFunc

    def leaves(t: Any, what: str) -> list[TensorType]:
        if isinstance(t, TensorType) and t.is_static:
            return [t]
        if isinstance(t, TupleType) and what == "result" and all(isinstance(f, TensorType) for f in t.fields):
            return [f for f in t.fields if f.is_static] if all(f.is_static for f in t.fields) else []
        return []

    ins = [leaves(p.checked_type, "param") for p in fn.params]
    outs = leaves(fn.body.checked_type, "result")
    if any(not x for x in ins) or not outs:
        raise BuildError(f"function '{name}' on piece '{piece.name}' has tuple-valued or symbolic parameters or "
                         "result; an external runtime (relay_to_runtime) takes static tensors only")
    params = [Buffer(f"in{i}", t.shape, t.dtype) for i, (t,) in enumerate(ins)]
    params += [Buffer(f"out{i}", t.shape, t.dtype) for i, t in enumerate(outs)]
    attrs = {"global_symbol": name, "external": 1, PIECE_ATTR: piece.name,
             "num_inputs": len(ins)}
    if isinstance(fn.body.checked_type, TupleType) and len(outs) == 1:
        attrs["tuple_output"] = 1
    return PrimFunc(tuple(params), Evaluate(const(0, "int32")), attrs)


def check_hook_result(piece: Any, hook: str, before: IRModule, after: IRModule, names: list[str]) -> None:
    """A relay_to_tir hook must lower every region function of its piece to PrimFuncs that verify."""
    from plait.ir.op import Op
    from plait.relay.expr import Call, Function
    from plait.relay.visitor import post_order
    from plait.target import HookError
    from plait.tir.stmt import PrimFunc
    from plait.tir.verify import verify

    where = f"hook '{hook}' of target kind '{piece.target.kind_name}' on piece '{piece.name}'"
    if "main" not in after:
        raise HookError(f"{where} returned a module without 'main'")
    for k in names:
        if k not in after:
            raise HookError(f"{where} removed function '{k}' instead of lowering it")
        f = after[k]
        if isinstance(f, Function):
            left = [n for n in post_order(f.body) if isinstance(n, Call) and isinstance(n.op, Op)
                    and n.op.name != "device_copy"]
            if left:
                raise HookError(f"{where} left function '{k}' with operator calls "
                                f"({', '.join(sorted({c.op_name for c in left}))}); it must call PrimFuncs")
        elif not isinstance(f, PrimFunc):
            raise HookError(f"{where} turned function '{k}' into a {type(f).__name__}; expected a PrimFunc or a "
                            "Relay function calling PrimFuncs")
    for k in _new_prim_funcs(before, after):
        try:
            verify(after[k])
        except PlaitError as exc:
            raise HookError(f"{where} produced an invalid PrimFunc '{k}': {exc}") from None


def default_lowering(piece: Any, reserved: Sequence[str] = ()) -> list[Pass]:
    """Fusion and lowering to TIR for ``piece`` (given to LowerToTIR explicitly): what every kind without a
    ``relay_to_tir`` hook runs, after the passes its kind legalizes with (``Backend.legalize``: the ``c``
    kind's fixed-point requantization, docs/quantization.md)."""
    from plait.lowering.lower import LowerToTIR
    from plait.relay.passes import FuseOps

    return [*piece.target.kind.backend.legalize(piece.target), FuseOps(), LowerToTIR(piece, reserved=tuple(reserved))]


def has_control_flow(mod: IRModule) -> bool:
    """Does a Relay function of ``mod`` hold an ``If`` or a ``Loop``?"""
    from plait.relay.expr import Function, If, Loop
    from plait.relay.visitor import post_order

    return any(isinstance(e, (If, Loop)) for f in mod.values() if isinstance(f, Function) for e in post_order(f.body))


def has_run_time_shapes(mod: IRModule) -> bool:
    """Is a value of ``mod``'s (typed) ``main`` sized only when it runs: control flow, or a type with a
    symbolic or unknown dim (a symbolic input, a data-dependent result such as ``nonzero``'s)?"""
    from plait.ir.types import tensor_leaves
    from plait.relay.visitor import post_order

    if has_control_flow(mod):
        return True
    main = mod.main
    nodes = [*main.params, *post_order(main.body)]
    return any(not t.is_static for e in nodes if e.has_type for t in (tensor_leaves(e.checked_type) or ()))


__all__ = ["Lower", "Partition", "check_hook_result", "default_lowering", "external_declaration", "has_control_flow",
           "has_run_time_shapes"]
