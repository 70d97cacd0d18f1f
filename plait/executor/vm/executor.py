"""The ``vm`` executor: bytecode interpreted in Python (control flow, run-time allocation, symbolic
shapes); exported as ``vm.json`` + the library; ``plait compile --executor vm --print`` prints the
bytecode (docs/executors.md, "The VM executor"). Light to import."""

from __future__ import annotations

import argparse
from typing import Any, Mapping

from plait.executor.base import Capabilities, Executor, Flag, RunOptions


class VMExecutor(Executor):
    name = "vm"
    label = "VM"
    summary = "bytecode with control flow (If, Loop) and symbolic shapes, run in process"
    capabilities = Capabilities(symbolic_shapes=True, control_flow=True, runs_in_process=True, exports=True)
    marker = "vm.json"
    flags = (Flag("compile", ("--print",), {"action": "store_true", "dest": "print_code",
                                            "help": "--executor vm: print the bytecode (with -o, export it too)"},
                  refusal=" (it prints the VM's bytecode)"),)

    def plan(self, mod: Any, composite: Any, config: Mapping[str, Any]) -> Any:
        from plait.executor.vm.codegen import vm_plan

        return vm_plan(mod)

    def codegen(self, lowered: Any, built: Any, composite: Any, ctx: Any) -> Any:
        from plait.executor.vm.codegen import vm_emit

        return vm_emit(lowered.mod, lowered.plan, built.lib, str(composite))

    def needs_output(self, args: argparse.Namespace) -> bool:
        return not getattr(args, "print_code", False)

    def prepare_export(self, art: Any, args: argparse.Namespace) -> list[str]:
        if getattr(args, "print_code", False):
            print(art.text(), end="")
        return []

    def load(self, path: str, memory_limit: int | None = None) -> Any:
        from plait.executor.vm.executable import VMExecutable

        return VMExecutable.load(path, memory_limit=memory_limit)

    def runner(self, art: Any, options: RunOptions) -> Any:
        from plait.executor.vm.machine import VirtualMachine

        options.progress("running")
        return VirtualMachine(art, memory_limit=options.memory_limit)

    def input_types(self, art: Any) -> dict[str, Any]:
        from plait.ir.types import TensorType

        regs = {i.func: art.registers[i.dst[0]] for i in art.instructions if i.op == "input"}
        return {n: TensorType(tuple(regs[n]["shape"]), regs[n]["dtype"]) for n in art.input_names}


__all__ = ["VMExecutor"]
