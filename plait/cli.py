"""The ``plait`` command.

    plait show model.onnx                 print the Relay text of an imported model
    plait run model.onnx [--inputs in.npz] [--output out.npz] [--target TARGET]
    plait ops                             list the registered operators
    plait targets [--explain TARGET]      list target kinds, tags and hooks; explain a target string

Other tools script against these commands: keep their flags and output stable.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from plait.errors import PlaitError

# Each subcommand: name -> (add_arguments(parser), run(args) -> exit code, one-line help)
COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int], str]] = {}


def command(name: str, help: str, add_arguments: Callable[[argparse.ArgumentParser], None]):
    """Register a subcommand: ``add_arguments(parser)`` declares its flags; the function runs it."""

    def deco(fn):
        COMMANDS[name] = (add_arguments, fn, help)
        return fn

    return deco


def _load_model(path: str):
    from plait.frontend.onnx import load_onnx

    return load_onnx(path)


# ---- plait show -------------------------------------------------------------------------------


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX model file (.onnx) or Relay text file (.relay)")
    p.add_argument("--metadata", action="store_true",
                   help="append the metadata section (large constants, base64) so that the text "
                        "parses back into the same module; by default they are shown by reference only")


@command("show", "print the Relay text of a model", _show_args)
def cmd_show(args: argparse.Namespace) -> int:
    from plait.relay.text import print_module

    mod = _load_any(args.model)
    print(print_module(mod, metadata=args.metadata), end="")
    return 0



def _load_any(path: str):
    if path.endswith(".relay"):
        from plait.relay.text import parse_module

        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            raise PlaitError(f"cannot read '{path}': {exc.strerror}") from None
        return parse_module(text, source_name=path)
    return _load_model(path)


# ---- plait run --------------------------------------------------------------------------------


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX model file (.onnx) or Relay text file (.relay)")
    p.add_argument("--inputs", help=".npz file of inputs keyed by the model's input names; "
                                    "missing inputs are random with a fixed seed")
    p.add_argument("--output", help="write outputs to this .npz, keyed by the model's output names")
    p.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    p.add_argument("--target", help='compile for this target (e.g. "c") and run with the graph executor; '
                                    "without it the model runs in the reference interpreter")


@command("run", "run a model (reference interpreter, or compiled with --target) and print or save its outputs",
         _run_args)
def cmd_run(args: argparse.Namespace) -> int:
    import numpy as np

    from plait.relay.interpreter import flatten_value, run
    from plait.relay.io import make_inputs, output_names

    mod = _load_any(args.model)
    given = {}
    if args.inputs:
        try:
            with np.load(args.inputs) as data:
                given = {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:
            raise PlaitError(f"cannot read inputs '{args.inputs}': {exc}") from None
    inputs = make_inputs(mod, given, seed=args.seed)
    if args.target:
        from plait.driver import build
        from plait.executor.graph import GraphModule

        outs = GraphModule(build(mod, target=args.target))(**inputs)
    else:
        outs = flatten_value(run(mod, inputs))
    names = output_names(mod, len(outs))
    result = dict(zip(names, outs))
    if args.output:
        np.savez(args.output, **result)
        print(f"wrote {len(result)} output(s) to {args.output}: {', '.join(names)}")
    else:
        for name, value in result.items():
            print(f"{name}: {value.dtype}{list(value.shape)}")
            print(np.array2string(value, threshold=64))
    return 0



# ---- plait ops --------------------------------------------------------------------------------


def _ops_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="show one operator in detail")


@command("ops", "list the registered operators", _ops_args)
def cmd_ops(args: argparse.Namespace) -> int:
    from plait.ir.op import OPS, REQUIRED, get_op, list_ops

    if args.name:
        op = get_op(args.name)
        print(f"{op.name}  [{op.pattern.name.lower()}]  inputs: {op.num_inputs}")
        if op.doc:
            print(f"  {op.doc}")
        for a in op.attrs:
            default = "required" if a.default is REQUIRED else repr(a.default)
            print(f"  {a.name}: {a.kind}{'?' if a.optional else ''} = {default}  {a.doc}")
        return 0
    for name in list_ops():
        op = OPS.get(name)
        print(f"{name:28s} {op.pattern.name.lower():22s} {op.doc}")
    return 0



# ---- plait targets ----------------------------------------------------------------------------


def _targets_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--explain", metavar="TARGET",
                   help='show how a target string is understood: pieces, kinds, resolved options, '
                        'hooks and tag facts (e.g. "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f")')


@command("targets", "list target kinds (options, hooks), tags and hooks; or explain a target string", _targets_args)
def cmd_targets(args: argparse.Namespace) -> int:
    from plait.target.describe import describe_registry, explain

    print(explain(args.explain) if args.explain is not None else describe_registry(), end="")
    return 0



# ---- entry point ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="plait", description="plait: a deep-learning compiler")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, (add_args, _, help_text) in COMMANDS.items():
        add_args(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _, run_cmd, _ = COMMANDS[args.command]
    try:
        return run_cmd(args)
    except PlaitError as exc:
        print(f"plait: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
