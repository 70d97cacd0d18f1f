"""The ``plait`` command.

    plait show model.onnx                 print the Relay text of an imported model
    plait run model.onnx [--inputs in.npz] [--output out.npz] [--target TARGET] [placement flags]
    plait compile model.onnx --target TARGET [placement flags] -o OUTDIR
                                          build and export graph.json, params.npz and the library
    plait explain model.onnx --target TARGET [placement flags] [--graph out.svg] [--json]
                                          where every call goes, why, and what the alternatives cost
    plait ops                             list the registered operators
    plait targets [--explain TARGET]      list target kinds, tags and hooks; explain a target string

Placement flags (for a composite target): --objective latency|energy|weighted, --weight W, --place RULES.
Build flags (run with --target, compile): --cache-dir DIR (the C compile cache), --max-memory SIZE
(run and compile: the most bytes plait allocates for inputs and buffers; see plait.limits).
Exit codes: 0 success, 1 an error (a PlaitError: bad model, bad input file, build failure; an OSError;
out of memory; a closed output pipe, quietly), 2 a bad command line (argparse's errors, and bad
--target, --objective, --weight, --place, --graph or --max-memory values), 130 interrupted (Ctrl-C).
Every error is one line ``plait: error: ...`` on stderr, shortened when longer than a screen; never
a traceback.

Other tools script against these commands: keep their flags and output stable.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Callable, Sequence

from plait.errors import PlaitError


class UsageError(PlaitError):
    """A flag's value is wrong (exit code 2, like argparse's own errors)."""


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
        except UnicodeDecodeError as exc:
            raise PlaitError(f"cannot read '{path}': not UTF-8 text (byte {exc.start})") from None
        return parse_module(text, source_name=path)
    return _load_model(path)


# ---- plait run --------------------------------------------------------------------------------


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX model file (.onnx) or Relay text file (.relay)")
    p.add_argument("--inputs", help=".npz file of inputs keyed by the model's input names (a .npy file for a "
                                    "model with one input); missing inputs are random with a fixed seed")
    p.add_argument("--output", help="write outputs to this .npz file (exactly this name), keyed by the model's "
                                    "output names")
    p.add_argument("--seed", type=_seed, default=0, help="seed for random inputs, a non-negative integer (default 0)")
    p.add_argument("--target", help='compile for this target (e.g. "c", or a composite target '
                                    '"low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f") and run '
                                    "with the graph executor; without it the model runs in the reference interpreter")
    _placement_flags(p)
    _build_flags(p)


def _seed(text: str) -> int:
    """--seed: what numpy's generator accepts (argparse turns the error into a usage error, exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


@command("run", "run a model (reference interpreter, or compiled with --target) and print or save its outputs",
         _run_args)
def cmd_run(args: argparse.Namespace) -> int:
    import numpy as np

    from plait.relay.input_files import load_inputs
    from plait.relay.interpreter import flatten_value, run
    from plait.relay.io import input_names, make_inputs, output_names

    opts = _placement_options(args) if args.target else _no_placement(args)
    limit = _memory_limit(args)
    if args.output is not None:
        _check_output_file(args.output)
    mod = _load_any(args.model)
    given = load_inputs(args.inputs, input_names(mod), limit) if args.inputs else {}
    inputs = make_inputs(mod, given, seed=args.seed, memory_limit=limit)
    if args.target:
        from plait.executor.graph import GraphModule

        # pieces for other devices (e.g. Cortex-M) are compiled for this host too, to run here
        art = _build(mod, opts, config={"c.host_simulation": True, **_build_config(args, limit)})
        _print_placement(art)
        outs = GraphModule(art, memory_limit=limit)(**inputs)
    else:
        outs = flatten_value(run(mod, inputs))
    names = output_names(mod, len(outs))
    if args.output is not None:
        path = _write_outputs(args.output, names, outs)
        print(f"wrote {len(outs)} output(s) to {path}: {', '.join(shorten(n, 200) for n in names)}")
    else:
        for name, value in zip(names, outs):
            print(f"{shorten(name, 200)}: {value.dtype}{list(value.shape)}")
            print(np.array2string(value, threshold=64))
    return 0


def _check_output_file(path: str) -> None:
    """Fail before the run when ``--output`` cannot be written (no such directory, a directory)."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise PlaitError(f"--output: '{path}' is a directory; give a file name, e.g. {os.path.join(path, 'out.npz')}")
    if not os.path.isdir(parent):
        raise PlaitError(f"--output: cannot write '{path}': the directory '{parent}' does not exist")


def _write_outputs(path: str, names: Sequence[str], values: Sequence) -> str:
    """Write ``values`` keyed by ``names`` as a .npz to exactly ``path`` (numpy would append ".npz";
    ``np.savez(f, **d)`` would also break on an output named "file"). Returns the path written."""
    import zipfile

    import numpy as np
    from numpy.lib import format as npformat

    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise PlaitError(f"--output: the model has two outputs named '{shorten(dup, 200)}'; a .npz needs "
                         "distinct names")
    for name in names:
        size = len(f"{name}.npy".encode("utf-8", "surrogatepass"))
        if size > 0xFFFF:  # a zip entry's name has a 16-bit length
            raise PlaitError(f"--output: output '{shorten(name, 200)}' has a name too long for a .npz entry "
                             f"({size:,} bytes with '.npy'; a zip allows 65,535)")
    try:
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
            for name, value in zip(names, values):
                with z.open(f"{name}.npy", "w", force_zip64=True) as f:
                    npformat.write_array(f, np.asarray(value), allow_pickle=False)
    except OSError as exc:
        raise PlaitError(f"--output: cannot write '{path}': {exc.strerror or exc}") from None
    return path



# ---- placement flags (run, compile, explain) ------------------------------------------------------


def _placement_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--objective", default="latency", metavar="OBJECTIVE",
                   help="what placement minimizes over the pieces of a composite target: latency (default), "
                        "energy, or weighted (weight x us + (1 - weight) x mJ)")
    p.add_argument("--weight", default="0.5", metavar="W",
                   help="the weight of latency in the weighted objective, in [0, 1] (default 0.5)")
    p.add_argument("--place", metavar="RULES",
                   help='placement by hand: "PATTERN=PIECE,..." (PATTERN: a glob over ONNX node names, ONNX op '
                        'types and plait op names; PIECE? only prefers), e.g. "Conv=inference_cpu,/fc/*=low_power_cpu?"')


def _placement_options(args: argparse.Namespace) -> dict:
    """The checked --target, --objective, --weight and --place values; bad ones are UsageErrors (exit 2)."""
    from plait.driver import _load_backends
    from plait.placement.explain import check_objective, check_weight, rules_of
    from plait.target import CompositeTarget

    _load_backends()  # kinds registered by in-tree backends (blas, onnxruntime) must parse
    try:
        ct = CompositeTarget(args.target)
        objective = check_objective(args.objective)
        weight = check_weight(_number(args.weight))
        rules = rules_of(args.place, ct) if args.place is not None else None
    except PlaitError as exc:
        raise UsageError(str(exc)) from None
    return {"target": ct, "objective": objective, "weight": weight, "place": rules}


def _number(text: str):
    try:
        return float(text)
    except ValueError:
        return text


def _build_flags(p: argparse.ArgumentParser) -> None:
    """--cache-dir and --max-memory (run, compile)."""
    from plait.limits import default_limit, format_bytes

    p.add_argument("--cache-dir", metavar="DIR",
                   help="the C compile cache (default $XDG_CACHE_HOME/plait/cc, else ~/.cache/plait/cc); a "
                        "directory that cannot be written falls back to a private temporary one, with a warning")
    p.add_argument("--max-memory", metavar="SIZE",
                   help="the most memory plait allocates for inputs, input files and the graph's buffers, e.g. "
                        f"8GiB or 500MB (default: half of this machine's memory, {format_bytes(default_limit())})")


def _memory_limit(args: argparse.Namespace) -> int:
    """The --max-memory value in bytes (the default limit when not given); a bad size is a UsageError."""
    from plait.limits import resolve

    try:
        return resolve(args.max_memory)
    except PlaitError as exc:
        raise UsageError(f"--max-memory: {exc}") from None


def _build_config(args: argparse.Namespace, limit: int) -> dict:
    """The PassContext config of --cache-dir and --max-memory."""
    from plait.limits import CONFIG_KEY

    config: dict = {CONFIG_KEY: limit}
    if args.cache_dir is not None:
        config["cc.cache_dir"] = args.cache_dir
    return config


def _no_placement(args: argparse.Namespace) -> dict:
    given = [f for f, v in (("--objective", args.objective != "latency"), ("--weight", args.weight != "0.5"),
                            ("--place", args.place is not None), ("--cache-dir", args.cache_dir is not None))
             if v]
    if given:
        why = ("placement chooses among the pieces of a compiled target" if given[0] != "--cache-dir"
               else "only a compiled run builds code")
        raise UsageError(f"{' and '.join(given)} need{'s' if len(given) == 1 else ''} --target: {why}")
    return {}


def _build(mod, opts: dict, config: dict | None = None):
    """plait.build with the placement options."""
    from plait.driver import build
    from plait.placement.explain import quiet_solver_banner

    quiet_solver_banner()  # keep stdout for our output
    return build(mod, target=opts["target"], config=config, place=opts["place"], objective=opts["objective"],
                 weight=opts["weight"])


def _print_placement(art) -> None:
    a = getattr(art, "placement", None)
    if a is not None:  # None for one piece
        from plait.placement.explain import summarize

        print(summarize(a), end="")


# ---- plait compile ----------------------------------------------------------------------------


def _compile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX model file (.onnx) or Relay text file (.relay)")
    p.add_argument("--target", default="c", help='the target, e.g. "c" (default) or a composite target '
                                                 '"low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"')
    _placement_flags(p)
    _build_flags(p)
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR",
                   help="directory to write graph.json, params.npz and the library into")


@command("compile", "compile a model for a target and export it (graph.json, params.npz, library)", _compile_args)
def cmd_compile(args: argparse.Namespace) -> int:
    opts = _placement_options(args)
    limit = _memory_limit(args)
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise PlaitError(f"-o: cannot write into '{args.output}': it exists and is not a directory")
    mod = _load_any(args.model)
    art = _build(mod, opts, config=_build_config(args, limit))
    try:
        out = art.export(args.output)
    except OSError as exc:
        raise PlaitError(f"-o: cannot write into '{args.output}': {exc.strerror or exc}") from None
    _print_placement(art)
    mem = art.memory
    print(f"memory: {mem.get('peak_bytes', 0)} bytes at peak (params {mem.get('param_bytes', 0)}, "
          f"activations {mem.get('activation_bytes', 0)}, workspace {mem.get('workspace_bytes', 0)})")
    files = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
    print(f"wrote {out}: {', '.join(files)}")
    return 0


# ---- plait explain ----------------------------------------------------------------------------


def _explain_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX model file (.onnx) or Relay text file (.relay)")
    p.add_argument("--target", required=True,
                   help='a composite target, e.g. "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"')
    _placement_flags(p)
    p.add_argument("--graph", metavar="FILE",
                   help="also draw the placement: .svg, .png or .pdf (needs graphviz's dot), or .dot")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")


@command("explain", "show where every call of a model would run on a composite target, why, and what the "
                    "alternatives cost", _explain_args)
def cmd_explain(args: argparse.Namespace) -> int:
    import shutil
    from pathlib import Path

    from plait.placement.explain import NO_DOT, explain

    opts = _placement_options(args)
    if args.graph is not None:
        fmt = Path(args.graph).suffix.lower().lstrip(".")
        if fmt not in ("svg", "png", "pdf", "dot", "gv"):
            raise UsageError(f"--graph: cannot draw to '{args.graph}': expected a .svg, .png, .pdf or .dot file")
        if fmt not in ("dot", "gv") and shutil.which("dot") is None:
            raise PlaitError(NO_DOT)
    mod = _load_any(args.model)
    report = explain(mod, opts["target"], opts["objective"], opts["place"], opts["weight"])
    print(report.to_json() if args.json else report.text(), end="\n" if args.json else "")
    if args.graph is not None:
        path = report.render(args.graph)
        print(f"wrote the placement drawing to {path}", file=sys.stderr if args.json else sys.stdout)
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
    from plait.target.plugins import load_in_tree

    load_in_tree()  # the hooks of in-tree kinds (c, llvm) are attached by their backends

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


#: Messages longer than this (about a screen) are shortened in the middle.
MAX_MESSAGE = 2000


def shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` with control characters escaped (a model's names could hold terminal escapes) and, when
    longer than ``limit``, its middle replaced by a note of how much was left out: the start (two
    thirds) and the end are kept, and the result is ``limit`` characters long, the note included."""
    text = "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in text)
    if len(text) <= limit:
        return text
    keep = limit
    for _ in range(3):  # the note's length depends on the count it gives, which depends on what is kept
        keep = max(limit - len(f" ...[{len(text) - keep} characters left out]... "), 2)
    start = keep * 2 // 3
    return f"{text[:start]} ...[{len(text) - keep} characters left out]... {text[len(text) - (keep - start):]}"


def one_line(message: str) -> str:
    """A message of several lines (a list of unsupported nodes, a compiler's first errors) as one line:
    a line ending with ':' is followed by a space, other lines by '; '."""
    lines = [ln.strip() for ln in message.split("\n") if ln.strip()]
    out = lines[0] if lines else ""
    for ln in lines[1:]:
        out += (" " if out.endswith(":") else "; ") + ln
    return out


def _error(message: str) -> None:
    try:
        print(f"plait: error: {shorten(one_line(message), MAX_MESSAGE - len('plait: error: '))}", file=sys.stderr)
    except OSError:  # stderr is gone too: nothing left to tell
        pass


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (e.g. an unusable compile cache) as one line on stderr, not Python's two."""
    try:
        print(f"plait: warning: {shorten(one_line(str(message)), MAX_MESSAGE - len('plait: warning: '))}",
              file=sys.stderr)
    except OSError:
        pass


def _os_message(exc: OSError) -> str:
    what = exc.strerror or str(exc)
    return f"{what}: '{exc.filename}'" if exc.filename is not None else what


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so that the interpreter's final flush does not
    fail again (what the Python docs recommend for SIGPIPE)."""
    if sys.stdout is not sys.__stdout__ or sys.stdout is None:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``plait`` command; returns the exit code (see the module docstring)."""
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            args = build_parser().parse_args(argv)
            _, run_cmd, _ = COMMANDS[args.command]
            code = run_cmd(args)
            sys.stdout.flush()  # a closed pipe shows here, not at exit
            return code
    except UsageError as exc:
        _error(str(exc))
        return 2
    except PlaitError as exc:
        _error(str(exc))
        return 1
    except BrokenPipeError:  # e.g. `plait run ... | head -3`: the reader has gone; nothing to say
        _silence_stdout()
        return 1
    except OSError as exc:
        _error(_os_message(exc))
        return 1
    except MemoryError as exc:
        _error(f"out of memory{': ' + str(exc) if str(exc) else ''}; a smaller --max-memory makes plait refuse "
               "such sizes before allocating")
        return 1
    except KeyboardInterrupt:
        _error("interrupted")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
