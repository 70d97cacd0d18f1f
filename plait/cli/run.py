"""``plait run``: run a model in the reference interpreter, or compiled with --target, and print or
save its outputs."""

from __future__ import annotations

import argparse
import os

from plait.cli.common import (
    MODEL_HELP,
    UsageError, build, build_config, build_flags, chosen_executor, executor_flag, int_at_least, memory_limit,
    no_placement, placement_flags, placement_options, print_placement, refuse_missing, shape_flags,
)
from plait.cli.outputs import check_output_file, print_outputs
from plait.cli.progress import stage
from plait.cli.shapes import check_static, load_with_shapes, parse_input_shapes, parse_opt_level
from plait.cli.timing import check_timing_flags, run_timed, timing_args
from plait.executor.base import RunOptions


def run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=MODEL_HELP + ", or a directory written by plait compile -o (an exported artifact)")
    p.add_argument("--inputs", help=".npz file of inputs keyed by the model's input names (a .npy file for a "
                                    "model with one input); missing inputs are made by --fill")
    p.add_argument("--fill", choices=("random", "zeros", "ones"), default="random",
                   help="what the inputs not in --inputs hold: random (default; seeded by --seed), zeros or ones")
    p.add_argument("--output", help="write outputs to this .npz file (exactly this name), keyed by the model's "
                                    "output names")
    p.add_argument("--seed", type=int_at_least(0), default=0, help="seed for random inputs, a non-negative integer (default 0)")
    p.add_argument("--target", help='compile for this target (e.g. "c", or a composite target '
                                    '"low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f") and run '
                                    "with the graph executor; without it the model runs in the reference interpreter")
    shape_flags(p)
    placement_flags(p)
    build_flags(p)
    executor_flag(p, "run")
    timing_args(p)


def cmd_run(args: argparse.Namespace) -> int:
    from plait.relay.input_files import load_inputs
    from plait.relay.interpreter import flatten_value, run
    from plait.relay.io import input_names, make_inputs, output_names

    if os.path.isdir(args.model):
        from plait.cli.artifact_run import run_artifact

        return run_artifact(args)
    from plait.cli.notes import note_inputs, note_simulation

    if args.executor is not None and not args.target:
        args.target = "c"  # an executor runs compiled code
    executor = chosen_executor(args, "run")
    executor.configure(args, "run")
    if args.profile and args.target:
        refuse_missing(executor, "profiles", "--profile")
    opts = placement_options(args) if args.target else no_placement(args)
    shapes, opt_level = parse_input_shapes(args.input_shapes), parse_opt_level(args.opt_level)
    if args.opt_level is not None and not args.target:
        raise UsageError("--opt-level needs --target: the reference interpreter runs no passes")
    check_timing_flags(args, compiled=bool(args.target))
    limit = memory_limit(args)
    if args.output is not None:
        check_output_file(args.output)
    mod = load_with_shapes(args.model, shapes, args.signature)
    if args.target:
        check_static(mod, args.model, executor=executor.name)
    given = load_inputs(args.inputs, input_names(mod), limit) if args.inputs else {}
    if not args.target:
        check_static(mod, args.model, missing=[n for n in input_names(mod) if n not in given])
    inputs = make_inputs(mod, given, seed=args.seed, memory_limit=limit, fill=args.fill)
    if args.target:
        # pieces for other devices (e.g. Cortex-M) are compiled for this host too, to run here
        art = build(mod, opts, config={"c.host_simulation": True, **build_config(args, limit)}, opt_level=opt_level,
                    executor=executor.name)
        options = RunOptions(memory_limit=limit, args=args, progress=stage)
        if not executor.on_device(options):
            note_simulation(art, opts["target"])
        print_placement(art)
        gm = executor.runner(art, options)
        note_inputs(input_names(mod), given, args.fill, args.seed)
        run_model = lambda: gm(**inputs)  # noqa: E731
    else:
        note_inputs(input_names(mod), given, args.fill, args.seed)
        stage("running in the reference interpreter")
        gm, run_model = None, lambda: flatten_value(run(mod, inputs))  # noqa: E731
    outs, report_timing = run_timed(args, run_model, gm)  # once; more with --repeat/--profile/--json
    return print_outputs(args, output_names(mod, len(outs)), outs, report_timing)
