"""The ``aot`` executor: plain C with a fixed memory map (``include/``, ``src/``, a Makefile,
``memory.json``, ``metadata.json``); runs on this machine through a host build (``plait run --executor
aot``) or as firmware under QEMU (``--on qemu``), and ``plait compile --firmware`` adds the bare-metal
project (docs/executors.md, docs/embedded.md). Light to import."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Mapping

from plait.errors import UsageError
from plait.executor.base import Capabilities, Executor, Flag, RunOptions


def _int_at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got '{text}'") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


class AotExecutor(Executor):
    name = "aot"
    label = "AOT"
    summary = "plain C with a fixed memory map; run through a host build or as firmware under QEMU (--on qemu)"
    capabilities = Capabilities(runs_in_process=True, exports=True, device=True)
    refusals = {"profiles": ": the AOT entry point runs the whole model in one call"}
    flags = (
        Flag("compile", ("--name",), {"help": "--executor aot: the model's C name (plait_<name>_run; default: the "
                                              "model file's name without its extension; sanitized to a C identifier)"}),
        Flag("compile", ("--align",), {"type": _int_at_least_one, "metavar": "N",
                                       "help": "--executor aot: the alignment in bytes of the pools and of every "
                                               "buffer in them, a power of two (default 16)"}),
        Flag("compile", ("--firmware",), {"action": "store_true",
                                          "help": "--executor aot: add a bare-metal project for the target's QEMU "
                                                  "board (DIR/firmware/: start-up code, linker script, semihosting, "
                                                  "a test main; make -C DIR firmware; see docs/embedded.md)"}),
        Flag("run", ("--on",), {"choices": ("host", "qemu"), "default": "host",
                                "help": "--executor aot: run on this machine (host, default) or as firmware on the "
                                        "target's emulated board (qemu: qemu-system-arm; a Cortex-M target, see "
                                        "docs/embedded.md)"},
             refusal=": the firmware is the AOT executor's C"),
        Flag("run", ("--qemu-timeout",), {"type": float, "default": None, "metavar": "S",
                                          "help": "--on qemu: the time limit of one QEMU run in seconds (default 60)"},
             ),
    )

    def configure(self, args: argparse.Namespace, command: str) -> dict[str, Any]:
        if command == "run":
            timeout = getattr(args, "qemu_timeout", None)
            if timeout is not None and (getattr(args, "on", "host") != "qemu" or not timeout > 0):
                raise UsageError("--qemu-timeout needs --on qemu and a positive number of seconds")
            return {}
        align = getattr(args, "align", None)
        if align is not None and align & (align - 1):
            raise UsageError(f"--align: expected a power of two, got {align}")
        name = args.name if getattr(args, "name", None) is not None else Path(args.model).stem  # plait_<file>_run
        return {k: v for k, v in (("aot.name", name), ("aot.align", align)) if v is not None}

    def plan(self, mod: Any, composite: Any, config: Mapping[str, Any]) -> Any:
        from plait.executor.aot.artifact import aot_plan

        return aot_plan(mod, composite, config)

    def codegen(self, lowered: Any, built: Any, composite: Any, ctx: Any) -> Any:
        from plait.executor.aot.artifact import aot_codegen

        return aot_codegen(lowered.mod, lowered.plan, composite, ctx.config)

    def prepare_export(self, art: Any, args: argparse.Namespace) -> list[str]:
        if not getattr(args, "firmware", False):
            return []
        from plait.executor.aot.firmware import add_firmware

        board = add_firmware(art)
        return [f"firmware for board '{board.name}' ({board.core}, QEMU -M {board.machine}): make -C "
                f"{args.output} firmware"]

    def export_summary(self, art: Any, out: Any) -> list[str]:
        return [art.memory_summary().rstrip("\n"), f"wrote {out}: {', '.join(sorted(art.files))}"]

    def on_device(self, options: RunOptions) -> bool:
        return options.flag("on", "host") == "qemu"

    def runner(self, art: Any, options: RunOptions) -> Any:
        if self.on_device(options):
            from plait.executor.aot.qemu import DEFAULT_TIMEOUT_S, QemuModule

            options.progress("building the firmware")
            module = QemuModule(art, timeout_s=options.flag("qemu_timeout") or DEFAULT_TIMEOUT_S)
            options.progress(f"running on board '{module.board.name}' under QEMU")
            return module
        from plait.executor.aot.module import AotModule

        options.progress("running")
        return AotModule(art)


__all__ = ["AotExecutor"]
