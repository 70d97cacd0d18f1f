"""``plait compile``: build a model for a target and export the artifact."""

from __future__ import annotations

import argparse
import os

from plait.cli.common import MODEL_HELP, UsageError, build, build_config, build_flags, chosen_executor, \
    executor_flag, memory_limit, placement_flags, placement_options, print_placement, shape_flags
from plait.cli.shapes import check_static, load_with_shapes, parse_input_shapes, parse_opt_level
from plait.cli.messages import say
from plait.cli.progress import stage
from plait.errors import PlaitError


def compile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--target", default="c", help='the target, e.g. "c" (default) or a composite target '
                                                 '"low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"')
    shape_flags(p)
    placement_flags(p)
    build_flags(p)
    executor_flag(p, "compile")
    p.add_argument("-o", "--output", metavar="OUTDIR",
                   help="directory to write into: graph.json (vm.json for the VM executor), params.npz and the "
                        "library, or the C directory (aot executor); needed unless --print")


def cmd_compile(args: argparse.Namespace) -> int:
    opts = placement_options(args)
    shapes, opt_level = parse_input_shapes(args.input_shapes), parse_opt_level(args.opt_level)
    limit = memory_limit(args)
    executor = chosen_executor(args, "compile")
    if not executor.capabilities.exports:
        from plait.executor import executors

        takes = ", ".join(e.name for e in executors() if e.capabilities.exports)
        raise UsageError(f"the {executor.title} executor's artifacts cannot be exported; plait compile takes "
                         f"--executor {takes}")
    if args.output is None and executor.needs_output(args):
        raise UsageError("-o/--output is required (the directory to write the artifact into)")
    if args.output is not None and os.path.exists(args.output) and not os.path.isdir(args.output):
        raise PlaitError(f"-o: cannot write into '{args.output}': it exists and is not a directory")
    config = {**build_config(args, limit), **executor.configure(args, "compile")}
    mod = load_with_shapes(args.model, shapes, args.signature)
    check_static(mod, args.model, executor=executor.name)
    art = build(mod, opts, config=config, opt_level=opt_level, executor=executor.name)
    for line in executor.prepare_export(art, args):
        say(line)
    if args.output is None:
        return 0
    stage("exporting")
    try:
        out = art.export(args.output)
    except OSError as exc:
        raise PlaitError(f"-o: cannot write into '{args.output}': {exc.strerror or exc}") from None
    print_placement(art)
    for line in executor.export_summary(art, out):
        say(line)
    return 0
