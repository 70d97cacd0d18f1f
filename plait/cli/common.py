"""What several commands share: loading a model, the placement and build flags, building."""

from __future__ import annotations

import argparse
from typing import Callable

from plait.errors import PlaitError, UsageError  # UsageError: a flag's value is wrong (exit code 2)


MODEL_HELP = "the model: a TFLite file (.tflite, recognized by its content), an ONNX file (.onnx) or Relay text (.relay)"


def load_model(path: str, shape_overrides: dict | None = None, signature: str | None = None):
    """An ONNX or TFLite model file (TFLite recognized by its content, whatever its name)."""
    from plait.frontend.tflite import load_tflite, sniff

    if sniff(path) or path.lower().endswith(".tflite"):
        if shape_overrides:
            raise UsageError(f"--input-shapes: not supported for a TFLite model ('{path}'): its tensors' shapes are "
                             "static")
        return load_tflite(path, signature=signature)
    if signature is not None:
        raise UsageError(f"--signature: only a TFLite model has signatures ('{path}' is not one)")
    from plait.frontend.onnx import load_onnx

    return load_onnx(path, shape_overrides)


def load_any(path: str, signature: str | None = None):
    from plait.cli.progress import stage

    stage("loading the model")
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
    return load_model(path, signature=signature)


def signature_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--signature", metavar="NAME",
                   help="a TFLite model's signature to compile (default: its first; without signatures, subgraph 0)")


def shape_flags(p: argparse.ArgumentParser) -> None:
    """--input-shapes, --signature and --opt-level (run, compile, explain; parsed by plait.cli.shapes)."""
    signature_flag(p)
    p.add_argument("--input-shapes", action="append", metavar="SHAPES",
                   help='fix the shapes of the model\'s inputs (ONNX models), e.g. "x:1,3,224,224 y:1,10" or '
                        '"x:[1,3,224,224]": entries separated by spaces, dims positive; only symbolic dims may '
                        "differ from the model's (the API's shape_overrides)")
    p.add_argument("--opt-level", metavar="N",
                   help="the opt level of plait's pass pipeline, 0 to 3 (default 2): passes of a higher level are "
                        "skipped (0 skips fold_batch_norm). Not a target option like \"c -opt-level=3\", which "
                        "sets the C compiler's -O level")


# ---- placement flags (run, compile, explain) ------------------------------------------------------


def placement_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--objective", default="latency", metavar="OBJECTIVE",
                   help="what placement minimizes over the pieces of a composite target: latency (default), "
                        "energy, or weighted (weight x us + (1 - weight) x mJ)")
    p.add_argument("--weight", default="0.5", metavar="W",
                   help="the weight of latency in the weighted objective, in [0, 1] (default 0.5)")
    p.add_argument("--place", metavar="RULES",
                   help='placement by hand: "PATTERN=PIECE,..." (PATTERN: a glob over ONNX node names, ONNX op '
                        'types and plait op names; PIECE? only prefers), e.g. "Conv=inference_cpu,/fc/*=low_power_cpu?"')
    p.add_argument("--costs", metavar="FILE",
                   help="a cost database (JSON, e.g. written by plait measure): calls found in it are priced by "
                        "it (source 'measured')")
    p.add_argument("--tuning", metavar="FILE",
                   help="tuning records (JSON, written by plait tune): lowering schedules each tuned function with "
                        "its best knob config, and placement prices it by its measured cost (source 'measured')")


def placement_options(args: argparse.Namespace) -> dict:
    """The checked --target, --objective, --weight and --place values; bad ones are UsageErrors (exit 2)."""
    from plait.placement.explain import check_objective, check_weight, rules_of
    from plait.target import CompositeTarget

    try:
        ct = CompositeTarget(args.target)
        objective = check_objective(args.objective)
        weight = check_weight(number(args.weight))
        rules = rules_of(args.place, ct) if args.place is not None else None
    except PlaitError as exc:
        raise UsageError(str(exc)) from None
    cost_model = None
    files = [f for f in (getattr(args, "costs", None), getattr(args, "tuning", None)) if f is not None]
    if files:
        from plait.placement.cost import CostDatabase, CostModel

        db = CostDatabase()
        for f in files:
            db.merge(CostDatabase.load(f))
        cost_model = CostModel.for_target(ct, db)
    return {"target": ct, "objective": objective, "weight": weight, "place": rules, "cost_model": cost_model}


def number(text: str):
    try:
        return float(text)
    except ValueError:
        return text


def build_flags(p: argparse.ArgumentParser) -> None:
    """--cache-dir and --max-memory (run, compile)."""
    from plait.limits import default_limit, format_bytes

    p.add_argument("--cache-dir", metavar="DIR",
                   help="the C compile cache (default $XDG_CACHE_HOME/plait/cc, else ~/.cache/plait/cc); a "
                        "directory that cannot be written falls back to a private temporary one, with a warning")
    p.add_argument("--max-memory", metavar="SIZE",
                   help="the most memory plait allocates for inputs, input files and the graph's buffers, e.g. "
                        f"8GiB or 500MB (default: half of this machine's memory, {format_bytes(default_limit())})")


def memory_limit(args: argparse.Namespace) -> int:
    """The --max-memory value in bytes (the default limit when not given); a bad size is a UsageError."""
    from plait.limits import resolve

    try:
        return resolve(args.max_memory)
    except PlaitError as exc:
        raise UsageError(f"--max-memory: {exc}") from None


def build_config(args: argparse.Namespace, limit: int) -> dict:
    """The PassContext config of --cache-dir and --max-memory."""
    from plait.limits import CONFIG_KEY

    config: dict = {CONFIG_KEY: limit}
    if args.cache_dir is not None:
        config["cc.cache_dir"] = args.cache_dir
    return config


def no_placement(args: argparse.Namespace) -> dict:
    given = [f for f, v in (("--objective", args.objective != "latency"), ("--weight", args.weight != "0.5"),
                            ("--place", args.place is not None), ("--costs", getattr(args, "costs", None) is not None),
                            ("--tuning", getattr(args, "tuning", None) is not None),
                            ("--cache-dir", args.cache_dir is not None))
             if v]
    if given:
        why = ("placement chooses among the pieces of a compiled target" if given[0] not in ("--cache-dir", "--tuning")
               else "only a compiled run builds code")
        raise UsageError(f"{' and '.join(given)} need{'s' if len(given) == 1 else ''} --target: {why}")
    return {}


def executor_flag(p: argparse.ArgumentParser, command: str) -> None:
    """--executor, and every executor's own flags for ``command`` (run, compile), from the registry."""
    from plait.executor import executors

    all_ = executors()
    p.add_argument("--executor", choices=[e.name for e in all_], default=None,
                   help="; ".join(f"{e.name}: {e.summary}" for e in all_) + " (docs/executors.md; plait executors "
                        "lists them with their capabilities); with run, --executor without --target compiles for "
                        "target c")
    for e in all_:
        for f in e.flags:
            if f.command == command:
                f.add_to(p)


def chosen_executor(args: argparse.Namespace, command: str):
    """The executor ``--executor`` names (the first listed without it); a UsageError for another
    executor's flags given with it, grouped per executor ("--name and --align need --executor aot")."""
    from plait.executor import executors, get_executor

    all_ = executors()
    chosen = get_executor(args.executor) if args.executor else all_[0]
    for e in all_:
        if e is chosen:
            continue
        given = [f for f in e.flags if f.command == command and f.given(args)]
        if given:
            names = " and ".join(f.shown(args) for f in given)
            raise UsageError(f"{names} need{'s' if len(given) == 1 else ''} --executor {e.name}{given[0].refusal}")
    return chosen


def refuse_missing(executor, capability: str, flag: str) -> None:
    """A UsageError when ``executor`` lacks ``capability`` that ``flag`` needs, naming the executors
    that have it ("--profile needs --executor graph: the AOT entry point runs the whole model in one call")."""
    from plait.executor import executors

    if getattr(executor.capabilities, capability):
        return
    have = " or ".join(f"--executor {e.name}" for e in executors() if getattr(e.capabilities, capability))
    raise UsageError(f"{flag} needs {have or 'an executor that can'}{executor.refusals.get(capability, '')}")


def build(mod, opts: dict, config: dict | None = None, opt_level: int = 2, executor: str = "graph"):
    """plait.build with the placement options, the pass pipeline's ``opt_level`` and the executor."""
    from plait.driver import build
    from plait.placement.explain import quiet_solver_banner

    from plait.cli.verbose import build_details

    quiet_solver_banner()  # keep stdout for our output
    with build_details() as instruments:
        return build(mod, target=opts["target"], executor=executor, opt_level=opt_level, config=config,
                     place=opts["place"],
                     objective=opts["objective"], weight=opts["weight"], instruments=instruments,
                     cost_model=opts.get("cost_model"))


def print_placement(art) -> None:
    """The placement summary of a composite target's build (not with -q)."""
    from plait.cli.messages import QUIET, verbosity

    a = getattr(art, "placement", None)
    if a is not None and verbosity() > QUIET:  # None for one piece
        from plait.placement.explain import summarize

        print(summarize(a), end="")


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``low`` (argparse turns the error into a usage error, exit 2)."""
    what = {0: "a non-negative integer", 1: "a positive integer"}.get(low, f"an integer >= {low}")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse
