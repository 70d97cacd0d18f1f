"""VM executor codegen: a lowered module -> a :class:`VMExecutable` (bytecode, constants, library).

    exe = plait.build(mod, target="c", executor="vm")     # a VMExecutable
    print(exe.text())                                     # the bytecode, one instruction per line
    y, = VirtualMachine(exe)(x=x)                         # plait.executor.vm

This first step runs models with **static shapes** and no control flow. The bytecode is translated
from the Graph executor's serialization of the same lowered ``main``
(:func:`plait.executor.graph_codegen.graph_codegen_full`: region functions read where ``main``
calls them, views, copies between pieces) and its memory plan (:func:`plait.memory.plan.plan_memory`,
the one planner): one source of truth for what a static model computes and where its buffers live.
Symbolic shapes and ``If`` are refused (``the VM executor does not run ... yet``).

Instruction set (registers ``%k`` hold tensors; a register is a graph entry):

========================================  ====================================================
``input %r name: T``                      the input ``name`` (a buffer of its own)
``const %r cK: T``                        constant ``K`` (read-only, shared by every VM)
``alloc_storage sK pool P offset O bytes B``  storage ``K``: bytes ``[O, O+B)`` of pool ``P``
``alloc_tensor %r sK: T``                 a tensor of type ``T`` at the start of storage ``K``
``view %r = %s: T``                       the bytes of ``%s`` under type ``T`` (a reshape)
``call %o... = func(%i...) ws %w...``     a lowered function: inputs, outputs, workspaces
``copy %o = %i src->dst``                 a ``device_copy`` between pieces
``ret %r...``                             the outputs, in order
========================================  ====================================================

``input``, ``const``, ``alloc_storage``, ``alloc_tensor`` and ``view`` are the *setup* section: with
static shapes every allocation is known at compile time, so a VM runs them once when it is created;
``call``, ``copy`` and ``ret`` are the *run* section, executed on every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from plait.errors import PlaitError
from plait.executor.artifact import BuildRecord
from plait.executor.graph_codegen import graph_codegen_full
from plait.relay.expr import Function, If
from plait.relay.module import IRModule
from plait.relay.visitor import post_order

SETUP_OPS = ("input", "const", "alloc_storage", "alloc_tensor", "view")
RUN_OPS = ("call", "copy", "ret")


class VMCodegenError(PlaitError):
    """The module cannot be compiled to VM bytecode (yet)."""


@dataclass(frozen=True)
class Instruction:
    """One VM instruction: ``op`` (one of :data:`SETUP_OPS` / :data:`RUN_OPS`) and its operands.

    ``dst``: registers written (or the storage id of ``alloc_storage``); ``src``: registers read;
    ``ws``: workspace registers of a ``call``; ``func``: the runtime function of a ``call``, the
    input's or constant's name; ``name``: the source node name; ``attrs``: the rest (``pool``,
    ``offset``, ``bytes``, ``storage``, ``piece``, ``src_piece``, ``dst_piece``)."""

    op: str
    dst: tuple[int, ...] = ()
    src: tuple[int, ...] = ()
    ws: tuple[int, ...] = ()
    func: str = ""
    name: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)


def _type(e: dict[str, Any]) -> str:
    return f"{e['dtype']}[{', '.join(str(d) for d in e['shape'])}]"


def _regs(ids: tuple[int, ...]) -> str:
    return ", ".join(f"%{i}" for i in ids)


@dataclass
class VMExecutable(BuildRecord):
    """What ``plait.build(..., executor="vm")`` returns: ``instructions`` (setup, then run),
    ``registers`` (``{"shape", "dtype"}`` per register), ``constants`` (name -> array), ``pools``
    (``{"name", "bytes", "align"}`` each), ``lib`` (the runtime module with the lowered functions),
    ``input_names`` / ``output_names``, ``memory`` (the byte totals of the memory plan),
    ``functions`` (the signature of every function called, as in a Graph artifact's manifest)."""

    instructions: list[Instruction]
    registers: list[dict[str, Any]]
    constants: dict[str, np.ndarray] = field(repr=False)
    pools: list[dict[str, Any]]
    lib: Any = field(repr=False)
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    memory: dict[str, int] = field(default_factory=dict)
    functions: dict[str, Any] = field(default_factory=dict, repr=False)
    target: str = ""
    ir: IRModule | None = field(default=None, repr=False)
    executor = "vm"

    def text(self) -> str:
        """The bytecode, readable: the pools, then one instruction per line with its source node."""
        lines = [f"# vm: {len(self.instructions)} instructions, {len(self.registers)} registers, "
                 f"{len(self.constants)} constants"]
        lines += [f"pool {k} {p['name']} bytes {p['bytes']} align {p['align']}" for k, p in enumerate(self.pools)]
        for ins in self.instructions:
            lines.append(self.line(ins))
        return "\n".join(lines) + "\n"

    def line(self, ins: Instruction) -> str:
        """One instruction as text (``# name`` at the end: the source node, and where it runs)."""
        t = (lambda r: _type(self.registers[r]))
        a = ins.attrs
        if ins.op in ("input", "const"):
            return f"{ins.op} %{ins.dst[0]} {ins.func}: {t(ins.dst[0])}"
        if ins.op == "alloc_storage":
            return f"alloc_storage s{ins.dst[0]} pool {a['pool']} offset {a['offset']} bytes {a['bytes']}"
        if ins.op == "alloc_tensor":
            return f"alloc_tensor %{ins.dst[0]} s{a['storage']}: {t(ins.dst[0])}"
        if ins.op == "view":
            return f"view %{ins.dst[0]} = %{ins.src[0]}: {t(ins.dst[0])}  # {ins.name}"
        if ins.op == "call":
            ws = f" ws {_regs(ins.ws)}" if ins.ws else ""
            where = f" @{a['piece']}" if a.get("piece") else ""
            return f"call {_regs(ins.dst)} = {ins.func}({_regs(ins.src)}){ws}  # {ins.name}{where}"
        if ins.op == "copy":
            return f"copy %{ins.dst[0]} = %{ins.src[0]} {a['src_piece']}->{a['dst_piece']}  # {ins.name}"
        return f"ret {_regs(ins.src)}"

    def __repr__(self) -> str:
        return (f"VMExecutable({len(self.instructions)} instructions, target={self.target!r}, "
                f"inputs: {', '.join(self.input_names)}; outputs: {', '.join(self.output_names)})")


def _refuse_unsupported(mod: IRModule) -> None:
    """A clear error for what this VM does not run yet: symbolic shapes and control flow."""
    if "main" not in mod:
        raise VMCodegenError("the VM executor: the module has no 'main' function")
    from plait.relay.infer import infer_type

    for name, fn in mod.items():
        if not isinstance(fn, Function):
            continue
        for e in post_order(fn.body):
            if isinstance(e, If):
                raise VMCodegenError(f"the VM executor does not run control flow (If) yet: function '{name}'")
    infer_type(mod)
    for p in mod.main.params:
        t = p.checked_type
        if getattr(t, "is_static", True) is False:
            raise VMCodegenError(f"the VM executor does not run symbolic shapes yet: input '{p.name_hint}' "
                                 f"has the shape {t}")


def vm_codegen(mod: IRModule, lib: Any, target: str = "") -> VMExecutable:
    """The ``vm`` executor's codegen (registered in :data:`plait.executor.EXECUTORS`)."""
    _refuse_unsupported(mod)
    graph, params, functions = graph_codegen_full(mod)
    nodes, entries, storage = graph["nodes"], graph["entries"], graph["storage"]
    setup: list[Instruction] = []
    run: list[Instruction] = []
    allocated: set[int] = set()

    def alloc(eid: int) -> None:
        sid = entries[eid]["storage"]
        st = storage[sid]
        if sid not in allocated:
            allocated.add(sid)
            setup.append(Instruction("alloc_storage", (sid,), attrs={"pool": st["pool"], "offset": st["offset"],
                                                                     "bytes": st["bytes"]}))
        setup.append(Instruction("alloc_tensor", (eid,), attrs={"storage": sid}))

    for n in nodes:
        op, outs, ins = n["op"], tuple(n["outputs"]), tuple(n.get("inputs", ()))
        if op in ("input", "param"):
            setup.append(Instruction("input" if op == "input" else "const", outs, func=n["name"]))
        elif op == "view":
            setup.append(Instruction("view", outs, ins, name=n["name"]))
        elif op == "copy":
            alloc(outs[0])
            run.append(Instruction("copy", outs, ins, name=n["name"],
                                   attrs={"src_piece": n["src"], "dst_piece": n["dst"]}))
        else:
            ws = tuple(n.get("workspace", ()))
            for e in (*outs, *ws):
                alloc(e)
            run.append(Instruction("call", outs, ins, ws, func=n["func"], name=n["name"],
                                   attrs={"piece": n["piece"]} if "piece" in n else {}))
    run.append(Instruction("ret", src=tuple(graph["outputs"])))
    registers = [{"shape": list(e["shape"]), "dtype": e["dtype"]} for e in entries]
    pools = [{"name": p["name"], "bytes": int(p["bytes"]), "align": int(p["align"])} for p in graph["pools"]]
    return VMExecutable(setup + run, registers, params, pools, lib,
                        input_names=[nodes[i]["name"] for i in graph["inputs"]],
                        output_names=list(graph["output_names"]), memory=dict(graph["memory"]),
                        functions=functions, target=target, ir=mod)


__all__ = ["Instruction", "RUN_OPS", "SETUP_OPS", "VMCodegenError", "VMExecutable", "vm_codegen"]
