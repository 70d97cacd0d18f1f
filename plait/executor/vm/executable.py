"""The VM executable: instructions (a tree: ``if`` and ``loop`` hold blocks), registers, constants, the
runtime library. Made by :mod:`plait.executor.vm.codegen`, run by :mod:`plait.executor.vm.machine`, written
and read by :mod:`plait.executor.vm.artifact`. The instruction set is in
:mod:`plait.executor.vm.insn`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from plait.executor.files import BuildRecord
from plait.executor.errors import VMCodegenError  # noqa: F401 - re-exported
from plait.executor.vm.machine import VirtualMachine
from plait.executor.vm.artifact import export_vm, load_vm
from plait.executor.vm.insn import OPS, RUN_OPS, SETUP_OPS, Instruction, walk  # noqa: F401 - re-exported
from plait.relay.module import IRModule

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
    they run: symbolic extents, data-dependent outputs; :mod:`plait.executor.vm.shapes`)."""

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
        (:mod:`plait.executor.vm.artifact`)."""
        return export_vm(self, path)

    @classmethod
    def load(cls, path: str | Path, *, memory_limit: int | str | None = None) -> "VMExecutable":
        """Read a VM artifact written by :meth:`export`, checking every file before any library is loaded."""
        return load_vm(path, memory_limit, cls)

    def module(self) -> Any:
        """A :class:`~plait.executor.vm.machine.VirtualMachine` running this executable."""
        return VirtualMachine(self)

    def __repr__(self) -> str:
        return (f"VMExecutable({sum(1 for _ in walk(self.instructions))} instructions, target={self.target!r}, "
                f"inputs: {', '.join(self.input_names)}; outputs: {', '.join(self.output_names)})")


__all__ = ["Instruction", "OPS", "RUN_OPS", "SETUP_OPS", "VMCodegenError", "VMExecutable", "type_text", "walk"]
