"""The build driver: ``plait.build(mod, target, executor)`` -> an executor artifact.

    art = plait.build(mod, target="c", executor="graph")
    y, = plait.executor.GraphModule(art)(x=x)

The pipeline goes forward through typed stages (frozen dataclasses), each step a pass run by one
:class:`~plait.ir.transform.PassContext` (so its instruments, e.g. ``Timing`` or ``PrintAfter``, see
every step):

    IRModule --import_stage--> Imported      infer_type, qdq_to_integer, fold_constant, fold_batch_norm
                                              (plait.placement.stages; plait explain runs the same)
      --Price-->       Priced       every call (or fusion group) priced on the pieces that may run it
      --Place-->       Placed       + the Assignment: every operator call -> a piece (None for one piece)
      --Partition-->   Partitioned  device_copy between memories; same-piece regions outlined into
                                    functions ``<piece>_<k>`` (attrs target/region/global_symbol)
      --Lower-->       Lowered      per piece, in composite order: <kind>.relay_to_runtime (external
                                    module; the region becomes an external PrimFunc declaration), else
                                    <kind>.relay_to_tir (checked, PrimFuncs verified), else fuse_ops +
                                    lower_to_tir; + the external modules per piece
         lift_workspaces, check_memory_fit   (IRModule -> IRModule on Lowered.mod; the region
                                    functions stay: executors read them where main calls them)
      --CodegenPieces--> Built      per piece: its PrimFuncs -> a runtime module (the kind's
                                    tir_to_runtime hook, else its default_codegen kind's); the host
                                    piece's module imports the others
      --<executor>_executor_codegen--> artifact (plait.executor.EXECUTORS)

One :class:`~plait.lowering.cache.LoweringCache` is active for the whole build: the placement cost
model and default lowering (and the default part of ``relay_to_tir`` hooks) share it, so no function
is lowered twice. Every pass keeps the module typed and type inference is incremental (only the nodes
a pass made are typed). Hooks are called only through plait.target.hooks; nothing here branches on a
kind's name.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Mapping, Sequence

from plait.errors import PlaitError
from plait.ir.transform import Pass, PassContext, Timing
from plait.placement.stages import BuildStage, Imported, Place, Placed
from plait.target.errors import HookError
from plait.relay.module import IRModule


class BuildError(PlaitError):
    """``plait.build`` was called wrongly or a stage of the pipeline is missing for the target."""


# ---- the stages as passes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Partitioned(BuildStage):
    """Region functions ``<piece>_<k>`` (called from ``main``, which copies between memories) and the
    Assignment they came from."""

    assignment: Any


@dataclass(frozen=True)
class Lowered(BuildStage):
    """Every region lowered: ``main`` calls the region functions (and copies between them); each region
    calls PrimFuncs or is one (an external declaration for a region compiled by a ``relay_to_runtime``
    hook, whose runtime modules are in ``external``, by piece name)."""

    assignment: Any
    external: Mapping[str, tuple] = field(default_factory=dict)


@dataclass(frozen=True)
class Built:
    """The host runtime module ``lib`` (importing the others), every piece's module (``modules``) and
    the compile checks of pieces on other devices when simulating on the host (``cross``)."""

    lowered: Lowered
    lib: Any
    modules: Mapping[str, Any]
    cross: Mapping[str, Any]

    def __str__(self) -> str:
        return str(self.lowered.mod)


@dataclass(frozen=True)
class Partition(Pass):
    """Placed -> Partitioned: ``device_copy`` insertion and outlining of same-piece regions
    (:mod:`plait.placement.partition`)."""

    composite: Any = None
    name: ClassVar[str] = "partition"

    def run(self, placed: Placed, ctx: PassContext) -> Partitioned:
        from plait.placement.partition import partition

        a = placed.assignment
        if a is None:
            return Partitioned(partition(placed.mod, {}, self.composite), None)
        return Partitioned(partition(placed.mod, a.pieces(), self.composite, getattr(a, "regions", ()),
                                     getattr(a, "fused", None)), a)


def _new_prim_funcs(before: IRModule, after: IRModule) -> list[str]:
    from plait.tir.stmt import PrimFunc

    return [k for k, f in after.items() if isinstance(f, PrimFunc) and (k not in before or before[k] is not f)]


def _tag(mod: IRModule, names: list[str], piece: Any) -> IRModule:
    tagged = {}
    for k in names:
        f = mod[k]
        attrs = {"piece": piece.name}
        if "global_symbol" not in f.attrs:
            attrs["global_symbol"] = k
        tagged[k] = f.with_attrs(**attrs)
    return mod.with_functions(tagged)


@dataclass(frozen=True)
class Lower(Pass):
    """Partitioned -> Lowered. Per piece, in composite order: its kind's ``relay_to_runtime`` hook, else
    its ``relay_to_tir`` hook, else default lowering (FuseOps + LowerToTIR) of the piece's region
    functions."""

    composite: Any = None
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
    attrs = {"global_symbol": name, "external": 1, "piece": piece.name, "target": str(piece.target),
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


@dataclass(frozen=True)
class CheckMemoryFit(Pass):
    """Each piece's share of the liveness memory plan (:func:`plait.memory.plan.piece_bytes`)
    against its memories (:func:`plait.placement.fit.check_fit`); a piece simulated on the host is
    checked against its own facts. Raises a ``FitError``; returns the module unchanged."""

    composite: Any = None
    name: ClassVar[str] = "check_memory_fit"

    def run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        from plait.executor.graph_codegen import graph_codegen
        from plait.memory.plan import piece_bytes
        from plait.placement.fit import check_fit, piece_memory

        mems = [piece_memory(p.target) for p in self.composite.pieces]
        if all(m.ram_bytes is None and m.weights_bytes is None for m in mems):
            return mod
        if has_run_time_shapes(mod):  # no static plan: the VM sizes buffers at run time
            return mod
        graph, _ = graph_codegen(mod)
        check_fit(self.composite, piece_bytes(graph))
        return mod


@dataclass(frozen=True)
class Codegen(Pass):
    """Lowered IRModule -> runtime module, through the target kind."""

    piece: Any = None
    name: ClassVar[str] = "codegen"

    def run(self, mod: IRModule, ctx: PassContext) -> Any:
        from plait.target import run_tir_to_runtime

        kind = self.piece.target.kind
        if kind.hooks.get("tir_to_runtime") is None and not kind.backend.default_codegen:
            raise BuildError(f"target kind '{kind.name}' (piece '{self.piece.name}') cannot generate code: "
                             "it has no 'tir_to_runtime' hook and no default code generation")
        return run_tir_to_runtime(self.piece, mod, ctx)


def piece_module(mod: IRModule, piece: Any) -> IRModule:
    """The PrimFuncs of ``mod`` that ``piece`` compiles (not external declarations)."""
    from plait.tir.stmt import PrimFunc

    funcs = {k: f for k, f in mod.items() if isinstance(f, PrimFunc) and f.attrs.get("piece") == piece.name
             and not f.attrs.get("external")}
    return IRModule(funcs, mod.attrs)


@dataclass(frozen=True)
class CodegenPieces(Pass):
    """Lowered -> Built: code generation per piece; ``modules`` (runnable), ``cross`` (compile checks of
    pieces on another device when simulating on the host: a module's ``cross_module``, which its backend
    sets); ``lib`` the host module, importing the rest."""

    composite: Any = None
    name: ClassVar[str] = "codegen_pieces"

    def run(self, lowered: Lowered, ctx: PassContext) -> Built:
        from plait.runtime.module import PyModule

        mod = lowered.mod
        modules: dict[str, Any] = {}
        cross: dict[str, Any] = {}
        external = lowered.external
        for piece in self.composite.pieces:
            sub = piece_module(mod, piece)
            ext = external.get(piece.name, [])
            if not len(sub) and not ext:
                continue
            m = None
            if len(sub):
                m = ctx.run(Codegen(piece), sub)
                if getattr(m, "cross_module", None) is not None:
                    cross[piece.name] = m.cross_module
            if ext:
                if m is None:
                    m = ext[0] if len(ext) == 1 else PyModule({})
                for e in ext:
                    if e is not m:
                        m.import_module(e)
            modules[piece.name] = m
        host_name = self.composite.host.name if self.composite._host is not None else None
        host = modules.get(host_name) if host_name else None
        if host is None:
            host = next(iter(modules.values())) if len(modules) == 1 else PyModule({})
        for name, m in modules.items():
            if m is not host:
                host.import_module(m)
        return Built(lowered, host, modules, cross)


@dataclass(frozen=True)
class ExecutorCodegen(Pass):
    """(lowered IRModule, runtime module) -> the executor's artifact."""

    executor: str = "graph"
    lib: Any = None
    target: str = ""

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.executor}_executor_codegen"

    def run(self, mod: IRModule, ctx: PassContext) -> Any:
        from plait.executor import get_executor

        return get_executor(self.executor).codegen(mod, self.lib, self.target, ctx.config)


def partition_stage(placed: Placed, composite: Any, ctx: PassContext) -> Partitioned:
    """Placed -> Partitioned (the ``partition`` pass)."""
    return ctx.run(Partition(composite), placed)


def lower_stage(part: Partitioned, composite: Any, ctx: PassContext, check_fit: bool = True) -> Lowered:
    """Partitioned -> Lowered: the ``lower`` pass (each region function now calls PrimFuncs, or is one;
    the regions stay until code generation), then scratch memory lifted into workspace arguments
    (lift_workspaces) and, with ``check_fit``, each piece's share of the memory plan checked against its
    memories (check_memory_fit; plait explain reports the plan instead)."""
    from plait.memory.workspace import LiftWorkspaces

    lowered = ctx.run(Lower(composite), part)
    mod = lowered.mod
    for p in (LiftWorkspaces(), CheckMemoryFit(composite)) if check_fit else (LiftWorkspaces(),):
        mod = ctx.run(p, mod)
    return replace(lowered, mod=mod)


def lowered_module(mod: IRModule, composite: Any, ctx: PassContext, *, rules: tuple = (),
                   objective: str = "latency", weight: float = 0.5, cost_model: Any = None) -> Lowered:
    """The stages of :func:`build` from an IRModule up to Lowered (code generation not run)."""
    from plait.placement.stages import import_stage, place_stage

    imported = import_stage(mod, ctx)
    placed = place_stage(imported, composite, ctx, tuple(rules), objective, weight, cost_model)
    return lower_stage(partition_stage(placed, composite, ctx), composite, ctx)


# ---- build -----------------------------------------------------------------------------------------


def _composite(target: Any) -> Any:
    from plait.target import CompositeTarget, Piece

    if isinstance(target, Piece):
        return CompositeTarget({"pieces": {target.name: target.target}})
    return CompositeTarget(target)


def _rules(place: Any, ct: Any) -> tuple:
    from plait.placement import parse_place

    if place is None:
        return ()
    if isinstance(place, str):
        return parse_place(place, ct)
    return tuple(place)


def build(mod: IRModule, target: Any = "c", executor: str = "graph", opt_level: int = 2,
          config: Mapping[str, Any] | None = None, instruments: Sequence[Any] = (),
          ctx: PassContext | None = None, *, place: Any = None, objective: str = "latency",
          weight: float = 0.5, cost_model: Any = None) -> Any:
    """Compile ``mod`` for ``target`` and return the executor's artifact (a ``GraphArtifact``).

    ``target``: a Target, a target string, or a composite target (``"a: c; b: blas"``): every call is
    placed on a piece by cost (``objective``: latency, energy or weighted, with ``weight``), or by the
    ``place`` rules (``"Conv=b,/head/*=a,*=b?"``, see docs/placement.md) and ``on_target``
    annotations. ``config`` goes to the PassContext (e.g. ``{"cc.cache_dir": ...,
    "c.host_simulation": True}``); ``instruments`` are added to it. The artifact has ``timings``
    (stage, seconds), ``placement`` (the Assignment; None for one piece), ``piece_modules`` and
    ``cross_modules`` (compile checks of pieces on other devices when simulating on the host).
    ``cost_model``: a :class:`~plait.placement.cost.CostModel`; its database's tuning records (``plait
    tune``) give lowering each workload's knob config (:mod:`plait.lowering.tuning`).
    """
    from plait.executor import get_executor
    from plait.lowering.cache import LoweringCache
    from plait.placement.cost import applying_tuning, objective_value

    if not isinstance(mod, IRModule):
        raise BuildError(f"plait.build expects an IRModule, got {type(mod).__name__}; import a model "
                         "with plait.from_onnx(...) or use plait.driver.build_onnx")
    if "main" not in mod:
        raise BuildError("plait.build: the module has no 'main' function")
    get_executor(executor)  # unknown names fail before any work
    _check_static_inputs(mod, executor)
    ct = _composite(target)
    rules = _rules(place, ct)
    objective_value(0.0, 0.0, objective, weight)  # unknown objective / bad weight fail early
    timing = Timing()
    if ctx is None:
        ctx = PassContext(opt_level=opt_level, config=dict(config or {}), instruments=[*instruments, timing])
    else:
        ctx.instruments = [*ctx.instruments, *instruments, timing]
    start = time.perf_counter()
    try:
        # per build: placement's pricing and lowering share the cache; a tuning file's configs are applied
        with LoweringCache().active(), applying_tuning(cost_model):
            lowered = lowered_module(mod, ct, ctx, rules=rules, objective=objective, weight=weight,
                                     cost_model=cost_model)
            built = ctx.run(CodegenPieces(ct), lowered)
        art = ctx.run(ExecutorCodegen(executor, built.lib, str(ct)), lowered.mod)
    finally:
        ctx.instruments = [i for i in ctx.instruments if i is not timing]
    if hasattr(art, "timings"):
        art.timings = [*timing.times, ("total", time.perf_counter() - start)]
    for value, attr in ((lowered.assignment, "placement"), (built.modules, "piece_modules"),
                        (built.cross, "cross_modules")):
        try:
            setattr(art, attr, value)
        except AttributeError:
            pass
    return art


def _check_static_inputs(mod: IRModule, executor: str) -> None:
    """For an executor that needs static shapes: a LowerError naming the first input with a symbolic dim,
    the shape_overrides that fix it, and the executor that takes it as it is (the VM)."""
    from plait.executor import executors, get_executor
    from plait.lowering.lower import LowerError
    from plait.relay.io import symbolic_dim_error

    if get_executor(executor).capabilities.symbolic_shapes:
        return
    takes = " or ".join(f"executor='{e.name}'" for e in executors() if e.capabilities.symbolic_shapes)
    msg = symbolic_dim_error(mod, lambda ex: f"import the model with shape_overrides={ex!r} "
                                             f"(plait.load_onnx or plait.from_onnx), or build with {takes}",
                             need=f"the {executor} executor needs static shapes")
    if msg is not None:
        raise LowerError(msg)


def build_onnx(model: Any, target: Any = "c", executor: str = "graph", **kwargs: Any) -> Any:
    """``build`` for an ONNX model (an ``onnx.ModelProto`` or a path to a .onnx file)."""
    from plait.frontend.onnx import from_onnx, load_onnx

    mod = load_onnx(str(model)) if not hasattr(model, "graph") else from_onnx(model)
    return build(mod, target, executor, **kwargs)


__all__ = ["BuildError", "Built", "CheckMemoryFit", "Codegen", "CodegenPieces", "ExecutorCodegen", "Imported",
           "Lower", "Lowered", "Partition", "Partitioned", "Place", "Placed", "build", "build_onnx",
           "check_hook_result", "default_lowering", "external_declaration", "lower_stage", "lowered_module",
           "partition_stage", "piece_module"]
