"""``plait compile``: build a model for a target and export the artifact."""

from __future__ import annotations

import argparse
import os

from plait.cli.common import build, build_config, build_flags, memory_limit, placement_flags, placement_options, \
    print_placement, shape_flags
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
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR",
                   help="directory to write graph.json, params.npz and the library into")


def cmd_compile(args: argparse.Namespace) -> int:
    opts = placement_options(args)
    shapes, opt_level = parse_input_shapes(args.input_shapes), parse_opt_level(args.opt_level)
    limit = memory_limit(args)
    if os.path.exists(args.output) and not os.path.isdir(args.output):
        raise PlaitError(f"-o: cannot write into '{args.output}': it exists and is not a directory")
    mod = load_with_shapes(args.model, shapes)
    check_static(mod, args.model)
    art = build(mod, opts, config=build_config(args, limit), opt_level=opt_level)
    stage("exporting")
    try:
        out = art.export(args.output)
    except OSError as exc:
        raise PlaitError(f"-o: cannot write into '{args.output}': {exc.strerror or exc}") from None
    print_placement(art)
    mem = art.memory
    say(f"memory: {mem.get('peak_bytes', 0)} bytes at peak (params {mem.get('param_bytes', 0)}, "
        f"pools {mem.get('activation_bytes', 0)}, lower bound {mem.get('lower_bound_bytes', 0)})")
    files = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file())
    say(f"wrote {out}: {', '.join(files)}")
    return 0
