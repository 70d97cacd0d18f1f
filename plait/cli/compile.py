"""``plait compile``: build a model for a target and export the artifact."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from plait.cli.common import UsageError, build, build_config, build_flags, executor_flag, int_at_least, \
    memory_limit, placement_flags, placement_options, print_placement, shape_flags
from plait.cli.shapes import check_static, load_with_shapes, parse_input_shapes, parse_opt_level
from plait.cli.messages import say
from plait.cli.progress import stage
from plait.errors import PlaitError


def compile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="ONNX model file (.onnx) or Relay text file (.relay)")
    p.add_argument("--target", default="c", help='the target, e.g. "c" (default) or a composite target '
                                                 '"low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"')
    shape_flags(p)
    placement_flags(p)
    build_flags(p)
    executor_flag(p)
    p.add_argument("--name", help="--executor aot: the model's C name (plait_<name>_run; default: the model "
                                  "file's name without its extension; sanitized to a C identifier)")
    p.add_argument("--align", type=int_at_least(1), metavar="N",
                   help="--executor aot: the alignment in bytes of the pools and of every buffer in them, a power "
                        "of two (default 16)")
    p.add_argument("--firmware", action="store_true",
                   help="--executor aot: add a bare-metal project for the target's QEMU board (DIR/firmware/: "
                        "start-up code, linker script, semihosting, a test main; make -C DIR firmware; see "
                        "docs/embedded.md)")
    p.add_argument("--print", action="store_true", dest="print_code",
                   help="--executor vm: print the bytecode (with -o, export it too)")
    p.add_argument("-o", "--output", metavar="OUTDIR",
                   help="directory to write into: graph.json (vm.json for the VM executor), params.npz and the "
                        "library, or the C directory (aot executor); needed unless --print")


def cmd_compile(args: argparse.Namespace) -> int:
    opts = placement_options(args)
    shapes, opt_level = parse_input_shapes(args.input_shapes), parse_opt_level(args.opt_level)
    limit = memory_limit(args)
    executor = args.executor or "graph"
    if args.print_code and executor != "vm":
        raise UsageError("--print needs --executor vm (it prints the VM's bytecode)")
    if args.output is None and not args.print_code:
        raise UsageError("-o/--output is required (the directory to write the artifact into)")
    if args.output is not None and os.path.exists(args.output) and not os.path.isdir(args.output):
        raise PlaitError(f"-o: cannot write into '{args.output}': it exists and is not a directory")
    config = build_config(args, limit)
    if executor == "aot":
        if args.align is not None and args.align & (args.align - 1):
            raise UsageError(f"--align: expected a power of two, got {args.align}")
        name = args.name if args.name is not None else Path(args.model).stem  # plait_<file name>_run
        config.update({k: v for k, v in (("aot.name", name), ("aot.align", args.align)) if v is not None})
    else:
        given = [f for f, v in (("--name", args.name), ("--align", args.align), ("--firmware", args.firmware or None))
                 if v is not None]
        if given:
            raise UsageError(f"{' and '.join(given)} need{'s' if len(given) == 1 else ''} --executor aot")
    mod = load_with_shapes(args.model, shapes)
    check_static(mod, args.model, executor=executor)
    art = build(mod, opts, config=config, opt_level=opt_level, executor=executor)
    if args.print_code:
        print(art.text(), end="")
        if args.output is None:
            return 0
    if args.firmware:
        from plait.executor.firmware import add_firmware

        board = add_firmware(art)
        say(f"firmware for board '{board.name}' ({board.core}, QEMU -M {board.machine}): make -C "
            f"{args.output} firmware")
    stage("exporting")
    try:
        out = art.export(args.output)
    except OSError as exc:
        raise PlaitError(f"-o: cannot write into '{args.output}': {exc.strerror or exc}") from None
    print_placement(art)
    if executor == "aot":
        say(art.memory_summary().rstrip("\n"))
        say(f"wrote {out}: {', '.join(sorted(art.files))}")
        return 0
    mem = art.memory
    say(f"memory: {mem.get('peak_bytes', 0)} bytes at peak (params {mem.get('param_bytes', 0)}, "
        f"pools {mem.get('activation_bytes', 0)}, lower bound {mem.get('lower_bound_bytes', 0)})")
    files = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
    say(f"wrote {out}: {', '.join(files)}")
    return 0
