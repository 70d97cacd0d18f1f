"""``plait export``: write a model (or one region function of it placed on a composite target) in
another format; today TFLite (``--tflite``, :mod:`plait.frontend.tflite_export`).

    plait export model.onnx --tflite -o model.tflite
    plait export model.tflite --tflite --target "a: c; b: c -mcpu=cortex-m7f" --place "CONV_2D=b" \\
        --region b_0 -o region.tflite
"""

from __future__ import annotations

import argparse

from plait.cli.common import MODEL_HELP, UsageError, signature_flag
from plait.cli.messages import say
from plait.cli.progress import stage
from plait.errors import PlaitError


def export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--tflite", action="store_true",
                   help="write a TFLite flatbuffer (float32 or int8 with its quantization parameters); a model with "
                        "an operator TFLite lacks is refused, naming it")
    p.add_argument("-o", "--output", metavar="FILE", help="the file to write (required)")
    p.add_argument("--target", metavar="TARGET",
                   help="with --region: the composite target the model is placed on and partitioned for")
    p.add_argument("--place", metavar="RULES", help='with --region: placement by hand, as for plait run ("PATTERN=PIECE,...")')
    p.add_argument("--region", metavar="NAME",
                   help="export one region function (<piece>_<k>, as plait explain names the pieces) of the model "
                        "placed on --target, instead of the whole model")
    signature_flag(p)
    p.add_argument("--input-shapes", action="append", metavar="SHAPES",
                   help='fix the shapes of an ONNX model\'s symbolic inputs, e.g. "x:1,3,224,224" (TFLite takes static '
                        "shapes)")


def cmd_export(args: argparse.Namespace) -> int:
    from plait.cli.shapes import load_with_shapes, parse_input_shapes

    if not args.tflite:
        raise UsageError("plait export: choose the format: --tflite (the only one today)")
    if not args.output:
        raise UsageError("-o/--output is required (the .tflite file to write)")
    if (args.target or args.place) and not args.region:
        raise UsageError("--target and --place choose the regions for --region; without --region the whole model "
                         "is exported")
    if args.region and not args.target:
        raise UsageError("--region needs --target (the composite target whose placement makes the regions)")
    shapes = parse_input_shapes(args.input_shapes)
    mod = load_with_shapes(args.model, shapes, args.signature)
    from plait.frontend.tflite_export import export_region, export_tflite
    from plait.pipeline.partitioned import partitioned

    stage("exporting")
    if args.region:
        buf = export_region(partitioned(mod, args.target, args.place), args.region)
    else:
        buf = export_tflite(mod)
    try:
        with open(args.output, "wb") as f:
            f.write(buf)
    except OSError as exc:
        raise PlaitError(f"-o: cannot write '{args.output}': {exc.strerror or exc}") from None
    what = f"region {args.region}" if args.region else "the model"
    say(f"wrote {args.output}: {what} as TFLite ({len(buf):,} bytes)")
    return 0
