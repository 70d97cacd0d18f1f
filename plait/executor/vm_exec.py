"""The VM executable: instructions (a tree: ``if`` and ``loop`` hold blocks), registers, constants, the
runtime library. Made by :mod:`plait.executor.vm_codegen`, run by :mod:`plait.executor.vm`, written
and read by :mod:`plait.executor.vm_artifact`.

Instruction set (registers ``%k`` hold tensors; ``T`` is a register's type):

==================================================  ====================================================
``input %r name: T``                                 the input ``name`` (a buffer of its own; a symbolic
                                                     shape: the array given, bound at run time)
``const %r cK: T``                                   constant ``K`` (read-only, shared by every run)
``alloc_storage sK pool P offset O bytes B``         storage ``K``: bytes ``[O, O+B)`` of pool ``P``
``alloc_tensor %r sK: T``                            a tensor of type ``T`` at the start of storage ``K``
``view %r = %s: T``                                  the bytes of ``%s`` under type ``T`` (a reshape)
``alloc_tensor_dyn %r: T``                           a tensor from the per-run arena (at run time)
``call %o... = func(%i...) ws %w...``                a lowered function: inputs, outputs, workspaces
``copy %o = %i src->dst``                            a ``device_copy`` between pieces
``if %c { ... } else { ... } -> %o...``              run one block; its ``yield`` gives ``%o...``
``loop %o... = trip %t cond %c init %s... scan K``   ONNX ``Loop`` semantics (:class:`plait.relay.Loop`):
``  body(%i, %c', %s'...) { ... }``                  the block runs with the iteration, the condition and
                                                     the state in its parameter registers and yields
                                                     ``(cond, *state, *scan elements)``
``yield %r...``                                      a block's values (the last instruction of a block)
``ret %r...``                                        the outputs, in order
==================================================  ====================================================

Top-level registers whose type is static are planned by the one memory planner
(:func:`plait.memory.plan.plan_memory`): ``input``, ``const``, ``alloc_storage``, ``alloc_tensor`` and
the ``view`` of a planned register are the *setup* section, run once when a VM is created. Registers
inside a block (an ``if`` branch, a loop body) and registers with a symbolic shape are *dynamic*: made
at run time (``alloc_tensor_dyn``, from an arena reset at every run and, inside a loop, after each
iteration). An ``if`` or ``loop`` copies its block's results into its output registers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from plait.errors import PlaitError
from plait.executor.artifact import BuildRecord
from plait.relay.module import IRModule

SETUP_OPS = ("input", "const", "alloc_storage", "alloc_tensor", "view")
RUN_OPS = ("alloc_tensor_dyn", "call", "copy", "view", "if", "loop", "yield", "ret")
OPS = tuple(dict.fromkeys((*SETUP_OPS, *RUN_OPS)))


class VMCodegenError(PlaitError):
    """The module cannot be compiled to VM bytecode (yet)."""


@dataclass(frozen=True)
class Instruction:
    """One VM instruction: ``op`` (one of :data:`OPS`) and its operands.

    ``dst``: registers written (or the storage id of ``alloc_storage``); ``src``: registers read (an
    ``if``: its condition; a ``loop``: its trip count and condition registers, ``-1`` when absent, then
    its initial state); ``ws``: workspace registers of a ``call``, the parameter registers of a
    ``loop`` body; ``func``: the runtime function of a ``call``, the input's or constant's name;
    ``name``: the source node name; ``attrs``: the rest (``pool``, ``offset``, ``bytes``, ``storage``,
    ``piece``, ``src_piece``, ``dst_piece``, ``num_scan``); ``blocks``: the blocks of an ``if`` (two) or
    a ``loop`` (one), each a tuple of instructions ending with ``yield``."""

    op: str
    dst: tuple[int, ...] = ()
    src: tuple[int, ...] = ()
    ws: tuple[int, ...] = ()
    func: str = ""
    name: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    blocks: tuple[tuple["Instruction", ...], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The instruction as a JSON object (fields at their defaults left out)."""
        out: dict[str, Any] = {"op": self.op}
        for k in ("dst", "src", "ws"):
            if getattr(self, k):
                out[k] = list(getattr(self, k))
        for k in ("func", "name"):
            if getattr(self, k):
                out[k] = getattr(self, k)
        if self.attrs:
            out["attrs"] = dict(self.attrs)
        if self.blocks:
            out["blocks"] = [[i.to_json() for i in b] for b in self.blocks]
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Instruction":
        """The inverse of :meth:`to_json` (the structure is checked by the loader)."""
        return cls(d["op"], tuple(d.get("dst", ())), tuple(d.get("src", ())), tuple(d.get("ws", ())),
                   d.get("func", ""), d.get("name", ""), dict(d.get("attrs", {})),
                   tuple(tuple(cls.from_json(i) for i in b) for b in d.get("blocks", ())))


def walk(code: tuple[Instruction, ...] | list[Instruction]) -> Iterator[Instruction]:
    """Every instruction of ``code``, blocks included (an ``if`` before its blocks' instructions)."""
    stack = list(reversed(code))
    while stack:
        ins = stack.pop()
        yield ins
        for b in reversed(ins.blocks):
            stack.extend(reversed(b))


def type_text(reg: dict[str, Any]) -> str:
    """A register's type: ``float32[1, 8]``."""
    return f"{reg['dtype']}[{', '.join(str(d) for d in reg['shape'])}]"


def _regs(ids: tuple[int, ...] | list[int]) -> str:
    return ", ".join(f"%{i}" if i >= 0 else "-" for i in ids)


@dataclass
class VMExecutable(BuildRecord):
    """What ``plait.build(..., executor="vm")`` returns: ``instructions`` (setup, then run; ``if`` and
    ``loop`` hold blocks), ``registers`` (``{"shape", "dtype"}`` per register, ``"dyn": True`` for one made
    at run time), ``constants`` (name -> array), ``pools`` (``{"name", "bytes", "align"}`` each), ``lib``
    (the runtime module with the lowered functions), ``input_names`` / ``output_names``, ``memory``
    (the byte totals of the memory plan), ``functions`` (the signature of every function called, as in
    a Graph artifact's manifest), ``shaped`` (the PrimFuncs whose calls evaluate their shape functions when
    they run: symbolic extents, data-dependent outputs; :mod:`plait.executor.vm_shapes`)."""

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
    shaped: dict[str, Any] = field(default_factory=dict, repr=False)
    executor = "vm"

    def text(self) -> str:
        """The bytecode, readable: the pools, then one instruction per line (blocks indented) with its
        source node."""
        lines = [f"# vm: {sum(1 for _ in walk(self.instructions))} instructions, {len(self.registers)} "
                 f"registers, {len(self.constants)} constants"]
        lines += [f"pool {k} {p['name']} bytes {p['bytes']} align {p['align']}" for k, p in enumerate(self.pools)]
        self._lines(self.instructions, "", lines)
        return "\n".join(lines) + "\n"

    def _lines(self, code: tuple[Instruction, ...] | list[Instruction], ind: str, out: list[str]) -> None:
        for ins in code:
            if ins.op == "if":
                out.append(f"{ind}if %{ins.src[0]} {{  # {ins.name}")
                self._lines(ins.blocks[0], ind + "  ", out)
                out.append(f"{ind}}} else {{")
                self._lines(ins.blocks[1], ind + "  ", out)
                out.append(f"{ind}}} -> {_regs(ins.dst)}")
            elif ins.op == "loop":
                out.append(f"{ind}{self.line(ins)} {{")
                self._lines(ins.blocks[0], ind + "  ", out)
                out.append(f"{ind}}}")
            else:
                out.append(ind + self.line(ins))

    def line(self, ins: Instruction) -> str:
        """One instruction as text (``# name`` at the end: the source node, and where it runs); the
        head of an ``if`` or ``loop``."""
        t = (lambda r: type_text(self.registers[r]))
        a = ins.attrs
        if ins.op in ("input", "const"):
            return f"{ins.op} %{ins.dst[0]} {ins.func}: {t(ins.dst[0])}"
        if ins.op == "alloc_storage":
            return f"alloc_storage s{ins.dst[0]} pool {a['pool']} offset {a['offset']} bytes {a['bytes']}"
        if ins.op == "alloc_tensor":
            return f"alloc_tensor %{ins.dst[0]} s{a['storage']}: {t(ins.dst[0])}"
        if ins.op == "alloc_tensor_dyn":
            return f"alloc_tensor_dyn %{ins.dst[0]}: {t(ins.dst[0])}"
        if ins.op == "view":
            return f"view %{ins.dst[0]} = %{ins.src[0]}: {t(ins.dst[0])}  # {ins.name}"
        if ins.op == "call":
            ws = f" ws {_regs(ins.ws)}" if ins.ws else ""
            where = f" @{a['piece']}" if a.get("piece") else ""
            return f"call {_regs(ins.dst)} = {ins.func}({_regs(ins.src)}){ws}  # {ins.name}{where}"
        if ins.op == "copy":
            return f"copy %{ins.dst[0]} = %{ins.src[0]} {a['src_piece']}->{a['dst_piece']}  # {ins.name}"
        if ins.op == "if":
            return f"if %{ins.src[0]} -> {_regs(ins.dst)}  # {ins.name}"
        if ins.op == "loop":
            return (f"loop {_regs(ins.dst)} = trip {_regs(ins.src[:1])} cond {_regs(ins.src[1:2])} init "
                    f"({_regs(ins.src[2:])}) scan {a['num_scan']} body({_regs(ins.ws)})")
        if ins.op == "yield":
            return f"yield {_regs(ins.src)}"
        return f"ret {_regs(ins.src)}"

    def export(self, path: str | Path) -> Path:
        """Write ``vm.json``, ``params.npz``, the library and ``manifest.json`` into the directory ``path``
        (:mod:`plait.executor.vm_artifact`)."""
        from plait.executor.vm_artifact import export_vm

        return export_vm(self, path)

    @classmethod
    def load(cls, path: str | Path, *, memory_limit: int | str | None = None) -> "VMExecutable":
        """Read a VM artifact written by :meth:`export`, checking every file before any library is loaded."""
        from plait.executor.vm_artifact import load_vm

        return load_vm(path, memory_limit)

    def module(self) -> Any:
        """A :class:`~plait.executor.vm.VirtualMachine` running this executable."""
        from plait.executor.vm import VirtualMachine

        return VirtualMachine(self)

    def __repr__(self) -> str:
        return (f"VMExecutable({sum(1 for _ in walk(self.instructions))} instructions, target={self.target!r}, "
                f"inputs: {', '.join(self.input_names)}; outputs: {', '.join(self.output_names)})")


__all__ = ["Instruction", "OPS", "RUN_OPS", "SETUP_OPS", "VMCodegenError", "VMExecutable", "type_text", "walk"]
