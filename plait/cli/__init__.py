"""The ``plait`` command.

    plait show model.onnx                 print the Relay text of an imported model
    plait run model.onnx [--inputs in.npz] [--output out.npz] [--target TARGET] [placement flags]
    plait compile model.onnx --target TARGET [placement flags] -o OUTDIR
                                          build and export graph.json, params.npz and the library
    plait export model.onnx --tflite -o model.tflite [--target T --place RULES --region NAME]
                                          write the model (or one region function) as a TFLite file
    plait explain model.onnx --target TARGET [placement flags] [--graph out.svg] [--json]
                                          where every call goes, why, and what the alternatives cost
    plait measure model.onnx --target T -o costs.json
                                          per-call instruction counts under QEMU, as a cost database
    plait tune model.onnx --target T -o tuning.json [--trials N] [--seed S] [--jobs N] [--ray ADDRESS]
               [--measure wall|analytic]  search every function's schedule knobs; tuning records
    plait ops                             list the registered operators
    plait targets [--explain TARGET]      list target kinds, tags and hooks; explain a target string
    plait executors                       list the executors with their capabilities and flags

Global flags (before or after the command): --version, -v/--verbose (stage times, compile-cache hits),
-q/--quiet (results and errors only); see docs/cli.md, "Version, verbosity and progress".
Placement flags (for a composite target): --objective latency|energy|weighted, --weight W, --place RULES,
--costs FILE (a cost database), --tuning FILE (tuning records of plait tune: schedules and measured costs).
Model flags (run, compile, explain): --input-shapes "x:1,3,224,224 y:1,10" (fix symbolic dims), --opt-level N
(the pass pipeline's; run needs --target for it).
Build flags (run with --target, compile): --cache-dir DIR (the C compile cache), --max-memory SIZE
(run and compile: the most bytes plait allocates for inputs and buffers; see plait.limits).
Exit codes: 0 success, 1 an error (a PlaitError: bad model, bad input file, build failure; an OSError;
out of memory; a closed output pipe, quietly), 2 a bad command line (argparse's errors, and bad
--target, --objective, --weight, --place, --graph, --max-memory, --input-shapes syntax or --opt-level
values), 130 interrupted (Ctrl-C).
Every error is one line ``plait: error: ...`` on stderr, shortened when longer than a screen; never
a traceback.

Other tools script against these commands: keep their flags and output stable.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Callable, Sequence

from plait.cli import compile as _compile
from plait.cli import explain as _explain
from plait.cli import export as _export
from plait.cli import info as _info
from plait.cli import measure as _measure
from plait.cli import progress
from plait.cli import run as _run
from plait.cli import tune as _tune
from plait.cli.common import UsageError
from plait.cli.messages import (
    MAX_MESSAGE, NORMAL, error, one_line, os_message, set_verbosity, shorten, show_warning, silence_stdout,
)
from plait.cli.verbosity_flags import verbosity_of
from plait.errors import PlaitError

# Each subcommand: name -> (add_arguments(parser), run(args) -> exit code, one-line help); the order is
# the order of `plait --help`. A command is a module of this package with its two functions.
COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int], str]] = {
    "show": (_info.show_args, _info.cmd_show, "print the Relay text of a model"),
    "run": (_run.run_args, _run.cmd_run,
            "run a model (reference interpreter, or compiled with --target) and print or save its outputs"),
    "compile": (_compile.compile_args, _compile.cmd_compile,
                "compile a model for a target and export it (graph.json, params.npz, library; with "
                "--executor aot: plain C, and --firmware for a board)"),
    "export": (_export.export_args, _export.cmd_export,
               "write a model, or one region function of it placed on a composite target, as a TFLite file "
               "(--tflite)"),
    "explain": (_explain.explain_args, _explain.cmd_explain,
                "show where every call of a model would run on a composite target, why, and what the "
                "alternatives cost"),
    "measure": (_measure.measure_args, _measure.cmd_measure,
                "count every call's instructions under QEMU on a Cortex-M board and write a cost database"),
    "tune": (_tune.tune_args, _tune.cmd_tune,
             "search every function's schedule knobs by measuring candidates and write tuning records"),
    "ops": (_info.ops_args, _info.cmd_ops, "list the registered operators"),
    "targets": (_info.targets_args, _info.cmd_targets,
                "list target kinds (options, hooks), tags and hooks; or explain a target string"),
    "executors": (_info.executors_args, _info.cmd_executors,
                  "list the executors (graph, aot, vm and any plugin's) with their capabilities and flags"),
}


# ---- entry point ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from plait.cli.verbosity_flags import add_global_flags, version_line

    parser = argparse.ArgumentParser(prog="plait", description="plait: a deep-learning compiler")
    parser.add_argument("--version", action="version", version=version_line())
    add_global_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (add_args, _, help_text) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        add_args(cmd)
        add_global_flags(cmd, top=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``plait`` command; returns the exit code (see the module docstring)."""
    try:
        with warnings.catch_warnings():
            warnings.showwarning = show_warning
            set_verbosity(NORMAL)  # main may run several times in one process (tests)
            args = build_parser().parse_args(argv)
            set_verbosity(verbosity_of(args))
            _, run_cmd, _ = COMMANDS[args.command]
            with progress.display(args.command):
                code = run_cmd(args)
            sys.stdout.flush()  # a closed pipe shows here, not at exit
            return code
    except UsageError as exc:
        error(str(exc))
        return 2
    except PlaitError as exc:
        error(str(exc))
        return 1
    except BrokenPipeError:  # e.g. `plait run ... | head -3`: the reader has gone; nothing to say
        silence_stdout()
        return 1
    except OSError as exc:
        error(os_message(exc))
        return 1
    except MemoryError as exc:
        error(f"out of memory{': ' + str(exc) if str(exc) else ''}; a smaller --max-memory makes plait refuse "
               "such sizes before allocating")
        return 1
    except KeyboardInterrupt:
        error("interrupted")
        return 130


__all__ = ["COMMANDS", "MAX_MESSAGE", "UsageError", "build_parser", "main", "one_line", "shorten"]
