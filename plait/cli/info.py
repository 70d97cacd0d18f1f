"""``plait show``, ``plait ops``, ``plait targets``: what a model, the operators and the targets are."""

from __future__ import annotations

import argparse

from plait.cli.common import load_any


def show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX model file (.onnx) or Relay text file (.relay)")
    p.add_argument("--metadata", action="store_true",
                   help="append the metadata section (large constants, base64) so that the text "
                        "parses back into the same module; by default they are shown by reference only")


def cmd_show(args: argparse.Namespace) -> int:
    from plait.relay.text import print_module

    mod = load_any(args.model)
    print(print_module(mod, metadata=args.metadata), end="")
    return 0


def ops_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="show one operator in detail")


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


def targets_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--explain", metavar="TARGET",
                   help='show how a target string is understood: pieces, kinds, resolved options, '
                        'hooks and tag facts (e.g. "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f")')


def cmd_targets(args: argparse.Namespace) -> int:
    from plait.target.describe import describe_registry, explain
    from plait.target.plugins import load_in_tree

    load_in_tree()  # the hooks of in-tree kinds (c, llvm) are attached by their backends

    print(explain(args.explain) if args.explain is not None else describe_registry(), end="")
    return 0
