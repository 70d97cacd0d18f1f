"""VM executor codegen: the lowered Relay ``main`` -> a :class:`~plait.executor.vm.executable.VMExecutable`.

    exe = plait.build(mod, target="c", executor="vm")     # a VMExecutable
    print(exe.text())                                     # the bytecode (instruction set: vm_exec)
    y, = VirtualMachine(exe)(x=x)                         # plait.executor.vm.machine

The compiler walks ``main`` as the Graph executor's codegen does (it extends its builder,
:class:`plait.executor.graph_codegen._Builder`: ``Var``, ``Constant``, calls of lowered functions
through ``GlobalVar``, region functions read where ``main`` calls them, ``Tuple`` / ``TupleGetItem`` /
``Let``, views, ``device_copy``) and adds control flow: an ``If`` becomes an ``if`` with two blocks, a
``Loop`` a ``loop`` with its body's block (the body is a function lowered like any other: its calls
are PrimFunc calls). Every value is a register.

The top level is planned by :func:`plait.memory.plan.plan_memory` (the one planner): an ``if`` or
``loop`` is a node reading its condition, initial state and every outer register its blocks read, and
writing its outputs. Registers made inside a block, and registers with a symbolic shape, are dynamic:
allocated at run time (``alloc_tensor_dyn``; shapes from :mod:`plait.executor.vm.shapes`).
"""

from __future__ import annotations

from typing import Any

from plait.executor.graph_codegen import GraphCodegenError, Value, _Builder, _flatten
from plait.executor.vm.executable import Instruction, VMCodegenError, VMExecutable
from plait.executor.vm.shapes import needs_run_time_shapes, output_shapes
from plait.ir.types import TensorType, Type
from plait.memory.plan import plan_memory
from plait.pipeline.stages import ProgramPlan
from plait.relay.expr import Expr, Function, If, Loop
from plait.relay.module import IRModule


class _VMBuilder(_Builder):
    """The Graph builder, plus ``if`` / ``loop`` nodes holding blocks (lists of nodes) and dynamic entries."""

    def __init__(self, mod: IRModule):
        super().__init__(mod)
        self.dyn: set[int] = set()  # entries made at run time
        self.shaped: dict[str, Any] = {}  # symbol -> PrimFunc with run-time shapes
        self.depth = 0  # > 0 inside a block

    def entry(self, t: Type, what: str) -> int:
        if not isinstance(t, TensorType):
            raise VMCodegenError(f"the VM executor: {what} has type {t}; expected a tensor")
        self.entries.append({"shape": list(t.shape), "dtype": t.dtype})
        eid = len(self.entries) - 1
        if self.depth or not t.is_static:
            self.dyn.add(eid)
        return eid

    def enters(self, e: Expr) -> bool:
        return not isinstance(e, (Function, If, Loop))

    def describe(self, symbol: str, fn: Any, node: dict[str, Any]) -> None:
        """A function with run-time shapes (:func:`~plait.executor.vm.shapes.needs_run_time_shapes`) is
        kept whole (``shaped``): its calls evaluate its shape functions when they run."""
        if needs_run_time_shapes(fn):
            self.shaped[symbol] = fn
            self._fn_of[symbol] = fn
            return
        super().describe(symbol, fn, node)

    def other(self, e: Expr, values: dict[int, Value], region: str | None) -> Value:
        if isinstance(e, If):
            self.serialize(e.cond, values, region)
            outs = self.entries_of_type(e.checked_type, "the result of an if")
            start = len(self.entries)
            blocks, yields = [], []
            for branch in (e.true_branch, e.false_branch):
                block, v = self.block(branch, dict(values), region)
                blocks.append(block)
                yields.append(_flatten(v))
            cond = values[id(e.cond)]
            self.add_node({"op": "if", "name": "if", "inputs": [cond, *self.free(blocks, yields, start)],
                           "blocks": blocks, "yields": yields, "cond": cond}, outs)
            return outs
        if isinstance(e, Loop):
            return self.loop(e, values, region)
        raise VMCodegenError(f"the VM executor: unsupported {type(e).__name__} in main")

    def loop(self, e: Loop, values: dict[int, Value], region: str | None) -> Value:
        operands: list[int] = []
        for x in (e.trip_count, e.cond):
            if x is not None:
                self.serialize(x, values, region)
            operands.append(_flatten(values[id(x)])[0] if x is not None else -1)
        for x in e.init:
            self.serialize(x, values, region)
            v = values[id(x)]
            if isinstance(v, tuple):
                raise VMCodegenError("the VM executor: a loop's state must be tensors, not tuples")
            operands.append(v)
        outs = self.entries_of_type(e.checked_type, "the result of a loop")
        start = len(self.entries)
        self.depth += 1
        inner = dict(values)
        params = [self.entry(p.checked_type, f"loop parameter %{p.name_hint}") for p in e.body.params]
        self.depth -= 1
        inner.update({id(p): r for p, r in zip(e.body.params, params)})
        block, v = self.block(e.body.body, inner, region)
        ys = _flatten(v)
        self.add_node({"op": "loop", "name": "loop", "inputs": [x for x in operands if x >= 0]
                       + self.free([block], [ys], start), "blocks": [block], "yields": [ys],
                       "operands": operands, "params": params, "num_scan": e.num_scan}, outs)
        return outs

    def block(self, body: Expr, values: dict[int, Value], region: str | None) -> tuple[list[dict[str, Any]], Value]:
        """The nodes computing ``body`` in a block of their own (their entries are dynamic), and its value."""
        saved = self.nodes
        self.nodes = []
        self.depth += 1
        try:
            self.serialize(body, values, region)
            return self.nodes, values[id(body)]
        finally:
            self.nodes = saved
            self.depth -= 1

    @staticmethod
    def free(blocks: list[list[dict[str, Any]]], yields: list[list[int]], start: int) -> list[int]:
        """The entries made before ``start`` (outside) that ``blocks`` read, nested blocks included."""
        seen: dict[int, None] = {}
        stack = [(b, y) for b, y in zip(blocks, yields)]
        while stack:
            nodes, ys = stack.pop()
            for n in nodes:
                for i in n.get("inputs", ()):
                    if i < start:
                        seen.setdefault(i)
            for i in ys:
                if i < start:
                    seen.setdefault(i)
        return sorted(seen)


class _Emitter:
    """Nodes -> instructions: the top level with the memory plan, blocks with run-time allocation."""

    def __init__(self, b: _VMBuilder, graph: dict[str, Any]):
        self.b, self.graph = b, graph
        self.setup: list[Instruction] = []
        self.allocated: set[int] = set()

    def alloc(self, eid: int) -> None:
        entries, storage = self.graph["entries"], self.graph["storage"]
        sid = entries[eid]["storage"]
        st = storage[sid]
        if sid not in self.allocated:
            self.allocated.add(sid)
            self.setup.append(Instruction("alloc_storage", (sid,), attrs={"pool": st["pool"], "offset": st["offset"],
                                                                          "bytes": st["bytes"]}))
        self.setup.append(Instruction("alloc_tensor", (eid,), attrs={"storage": sid}))

    def make(self, eids: tuple[int, ...], top: bool, out: list[Instruction] | None) -> None:
        """Allocate the registers ``eids``: planned (setup) at the top level, else at run time (not at all
        when ``out`` is None: an ``if`` or ``loop`` gives its dynamic outputs its blocks' values)."""
        for e in eids:
            if top and e not in self.b.dyn:
                self.alloc(e)
            elif out is not None:
                out.append(Instruction("alloc_tensor_dyn", (e,)))

    def nodes(self, nodes: list[dict[str, Any]], top: bool) -> list[Instruction]:
        run: list[Instruction] = []
        dyn = self.b.dyn
        for n in nodes:
            op, outs, ins = n["op"], tuple(n["outputs"]), tuple(n.get("inputs", ()))
            if op == "input":
                self.setup.append(Instruction("input", outs, func=n["name"]))
            elif op == "param":
                dyn.discard(outs[0])  # constants are hoisted: set up once
                self.setup.append(Instruction("const", outs, func=n["name"]))
            elif op == "view":
                if ins[0] in dyn or outs[0] in dyn:  # its shape: vm_shapes.view_shape when it runs
                    dyn.add(outs[0])
                    run.append(Instruction("view", outs, ins, name=n["name"]))
                else:
                    self.setup.append(Instruction("view", outs, ins, name=n["name"]))
            elif op == "copy":
                self.make(outs, top, run)
                run.append(Instruction("copy", outs, ins, name=n["name"],
                                       attrs={"src_piece": n["src"], "dst_piece": n["dst"]}))
            elif op == "call":
                fn = self.b._fn_of[n["func"]]
                ws = tuple(n.get("workspace", ()))
                if n["func"] in self.b.shaped:  # the call allocates its outputs when it runs
                    dyn.update(outs)
                    self.make(ws, top, run)
                    run.append(Instruction("call", outs, ins, ws, func=n["func"], name=n["name"],
                                           attrs={"shapes": "run time", **({"piece": n["piece"]} if "piece" in n
                                                                             else {})}))
                    continue
                if any(e in dyn for e in outs) or not top:
                    output_shapes(fn)  # static results (else a clear error)
                self.make((*outs, *ws), top, run)
                run.append(Instruction("call", outs, ins, ws, func=n["func"], name=n["name"],
                                       attrs={"piece": n["piece"]} if "piece" in n else {}))
            elif op == "if":
                self.make(outs, top, None)
                blocks = tuple(tuple(self.nodes(bl, False) + [Instruction("yield", src=tuple(y))])
                               for bl, y in zip(n["blocks"], n["yields"]))
                run.append(Instruction("if", outs, (n["cond"],), name=n["name"], blocks=blocks))
            else:  # loop
                self.make(outs, top, None)
                body = tuple(self.nodes(n["blocks"][0], False) + [Instruction("yield", src=tuple(n["yields"][0]))])
                run.append(Instruction("loop", outs, tuple(n["operands"]), tuple(n["params"]), name=n["name"],
                                       attrs={"num_scan": n["num_scan"]}, blocks=(body,)))
        return run


def _plan(b: _VMBuilder, outputs: list[int], output_names: list[str]) -> dict[str, Any]:
    """The top level as a graph for the memory planner: an ``if`` / ``loop`` is a node reading what its
    blocks read and writing its outputs; dynamic entries take no bytes (they are made at run time)."""
    nodes = [{**n, "op": "call"} if n["op"] in ("if", "loop") else n for n in b.nodes]
    nodes = [{k: v for k, v in n.items() if k not in ("blocks", "yields")} for n in nodes]
    entries = [{"shape": [0] if i in b.dyn else list(e["shape"]), "dtype": e["dtype"]} for i, e in enumerate(b.entries)]
    graph: dict[str, Any] = {"nodes": nodes, "entries": entries, "outputs": outputs, "output_names": output_names}
    plan_memory(graph)
    return graph


def vm_plan(mod: IRModule) -> ProgramPlan:
    """The VM's memory plan of a lowered ``mod``: its program's top level planned (:func:`_plan`; registers
    sized at run time take no bytes); ``state`` the program builder :func:`vm_emit` continues from."""
    from plait.relay.infer import infer_type

    if "main" not in mod:
        raise VMCodegenError("the VM executor: the module has no 'main' function")
    infer_type(mod)
    b = _VMBuilder(mod)
    values: dict[int, Value] = {}
    seen: set[str] = set()
    for p in mod.main.params:
        if p.name_hint in seen:
            raise VMCodegenError(f"the VM executor: main has two parameters named '{p.name_hint}'")
        seen.add(p.name_hint)
        values[id(p)] = v = b.entry(p.checked_type, f"input '{p.name_hint}'")
        b.add_node({"op": "input", "name": p.name_hint}, v)
    try:
        b.serialize(mod.main.body, values, region=None)
    except GraphCodegenError as exc:
        raise VMCodegenError(str(exc).replace("graph executor", "the VM executor", 1)) from None
    outputs = _flatten(values[id(mod.main.body)])
    names = mod.attrs.get("output_names")
    output_names = list(names) if names and len(names) == len(outputs) else [f"output_{i}" for i in range(len(outputs))]
    return ProgramPlan(_plan(b, outputs, output_names), dict(b.params), dict(b.functions), b)


def vm_emit(mod: IRModule, plan: ProgramPlan, lib: Any, target: str = "") -> VMExecutable:
    """The VM executable of ``mod`` from its plan (:func:`vm_plan`)."""
    b, graph = plan.state, plan.graph
    outputs, output_names = graph["outputs"], graph["output_names"]
    em = _Emitter(b, graph)
    run = em.nodes(b.nodes, True)
    run.append(Instruction("ret", src=tuple(outputs)))
    registers = [{"shape": list(e["shape"]), "dtype": e["dtype"], **({"dyn": True} if i in b.dyn else {})}
                 for i, e in enumerate(b.entries)]
    pools = [{"name": p["name"], "bytes": int(p["bytes"]), "align": int(p["align"])} for p in graph["pools"]]
    return VMExecutable(em.setup + run, registers, dict(b.params), pools, lib,
                        input_names=[n["name"] for n in b.nodes if n["op"] == "input"],
                        output_names=output_names, memory=dict(graph["memory"]),
                        functions=dict(b.functions), target=target, ir=mod, shaped=dict(b.shaped))


def vm_codegen(mod: IRModule, lib: Any, target: str = "") -> VMExecutable:
    """The VM executable of a lowered ``mod`` whose PrimFuncs ``lib`` implements, planned here
    (:func:`vm_plan` then :func:`vm_emit`, what a build does in two steps)."""
    return vm_emit(mod, vm_plan(mod), lib, target)


__all__ = ["vm_codegen", "vm_emit", "vm_plan"]
