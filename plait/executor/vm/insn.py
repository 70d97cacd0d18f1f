"""The VM's instruction set: :class:`Instruction`, the op names (:data:`OPS`) and :func:`walk`. The
executable (:mod:`plait.executor.vm.executable`), its files (:mod:`plait.executor.vm.artifact`) and the VM
(:mod:`plait.executor.vm.machine`) all read it; it imports none of them.

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
from typing import Any, Iterator

SETUP_OPS = ("input", "const", "alloc_storage", "alloc_tensor", "view")
RUN_OPS = ("alloc_tensor_dyn", "call", "copy", "view", "if", "loop", "yield", "ret")
OPS = tuple(dict.fromkeys((*SETUP_OPS, *RUN_OPS)))


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


__all__ = ["OPS", "RUN_OPS", "SETUP_OPS", "Instruction", "walk"]
