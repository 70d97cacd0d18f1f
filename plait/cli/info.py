"""``plait show``, ``plait ops``, ``plait targets``: what a model, the operators and the targets are."""

from __future__ import annotations

import argparse

from plait.cli.common import MODEL_HELP, load_any, signature_flag


def show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=MODEL_HELP)
    signature_flag(p)
    p.add_argument("--metadata", action="store_true",
                   help="append the metadata section (large constants, base64) so that the text "
                        "parses back into the same module; by default they are shown by reference only")


def cmd_show(args: argparse.Namespace) -> int:
    from plait.relay.text import print_module

    mod = load_any(args.model, args.signature)
    print(print_module(mod, metadata=args.metadata), end="")
    return 0


def ops_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", help="show one operator in detail: a plait operator (nn.conv2d), an ONNX "
                                           "operator (Conv: what it imports to, then that operator) or a TFLite "
                                           "builtin (CONV_2D: the dtypes and arithmetic it is read with)")
    p.add_argument("--tflite", action="store_true", help="list the TFLite builtin operators plait reads")


def cmd_ops(args: argparse.Namespace) -> int:
    from plait.op import OPS, list_ops

    if args.tflite and not args.name:
        for name, doc in sorted(_tflite_ops().items()):
            print(f"{name:28s} {doc}")
        return 0
    if args.name:
        name = args.name
        if name in _tflite_ops():
            print(f"TFLite {name}: {_tflite_ops()[name]}")
            return 0
        if name not in list_ops():
            name = _onnx_name(name)
        _print_op(name)
        return 0
    for name in list_ops():
        op = OPS.get(name)
        print(f"{name:28s} {op.pattern.name.lower():22s} {op.doc}")
    return 0


def _tflite_ops() -> dict[str, str]:
    """TFLite builtin -> the first paragraph of its converter's docstring."""
    from plait.frontend.tflite import converters

    out = {}
    for name, fn in converters().items():
        doc = (fn.__doc__ or "").strip().split("\n\n")[0]
        out[name] = " ".join(doc.split()) or f"read by {fn.__module__}"
    return out


def _onnx_name(name: str) -> str:
    """For an ONNX operator ``name``: print what it imports to and return the main plait operator; for
    an unknown name, a PlaitError with the closest plait and ONNX names."""
    import difflib

    from plait.cli.onnx_names import imports_to, onnx_op_types
    from plait.errors import RegistryError
    from plait.op import list_ops

    if name not in onnx_op_types():
        close = difflib.get_close_matches(name, [*list_ops(), *onnx_op_types()], n=3, cutoff=0.6)
        hint = ("; did you mean " + " or ".join(f"'{c}'" for c in close) + "?" if close
                else ": neither a plait nor an ONNX operator name")
        raise RegistryError(f"unknown operator '{name}'{hint}")
    ops = imports_to(name)
    if not ops:
        print(f"ONNX {name} imports to no plait operator of its own (a constant, an input passed on, or IR "
              "structure)")
        return ""
    more = " (the first; the others for some attributes, types or shapes)" if len(ops) > 1 else ""
    print(f"ONNX {name} imports to: {', '.join(ops)}{more}\n")
    return ops[0]


def _print_op(name: str) -> None:
    from plait.ir.op import REQUIRED
    from plait.op import get_op

    if not name:
        return
    op = get_op(name)
    print(f"{op.name}  [{op.pattern.name.lower()}]  inputs: {op.num_inputs}")
    if op.doc:
        print(f"  {op.doc}")
    for a in op.attrs:
        default = "required" if a.default is REQUIRED else repr(a.default)
        print(f"  {a.name}: {a.kind}{'?' if a.optional else ''} = {default}  {a.doc}")


def targets_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--explain", metavar="TARGET",
                   help='show how a target string is understood: pieces, kinds, resolved options, '
                        'hooks and tag facts (e.g. "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f")')


def cmd_targets(args: argparse.Namespace) -> int:
    from plait.target.describe import describe_registry, explain
    from plait.target.plugins import load_in_tree

    load_in_tree()  # every in-tree kind, so that their tags are listed

    print(explain(args.explain) if args.explain is not None else describe_registry(), end="")
    return 0


def executors_args(p: argparse.ArgumentParser) -> None:
    pass


def cmd_executors(args: argparse.Namespace) -> int:
    """Every registered executor: its summary, capabilities and own flags (plait.executor.EXECUTORS)."""
    from plait.executor import executors

    for e in executors():
        print(e.describe())
    return 0
