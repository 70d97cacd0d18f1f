"""``plait export``: write a model (or one region function of it placed on a composite target) in
another format: TFLite (``--tflite``, :mod:`plait.frontend.tflite_export`) or ONNX (``--onnx``,
:mod:`plait.frontend.onnx_export`); without either flag, the ``-o`` file's suffix chooses.

    plait export model.onnx -o model.tflite
    plait export model.tflite -o model.onnx        # an int8 model in integer ONNX operators, TFLite's bits
    plait export model.tflite --target "a: c; b: c -mcpu=cortex-m7f" --place "CONV_2D=b" \\
        --region b_0 -o region.tflite
"""

from __future__ import annotations

import argparse
from pathlib import Path

from plait.cli.common import MODEL_HELP, UsageError, signature_flag
from plait.cli.messages import say
from plait.cli.progress import stage
from plait.errors import PlaitError

FORMATS = {".tflite": "tflite", ".onnx": "onnx"}


def export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=MODEL_HELP)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--tflite", action="store_const", const="tflite", dest="format",
                     help="write a TFLite flatbuffer (float32 or int8 with its quantization parameters); a model with "
                          "an operator TFLite lacks is refused, naming it (the default for an -o ending in .tflite)")
    fmt.add_argument("--onnx", action="store_const", const="onnx", dest="format",
                     help="write an ONNX model (opset 20; TFLite's integer arithmetic as standard integer operators) "
                          "(the default for an -o ending in .onnx)")
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

    if not args.output:
        raise UsageError("-o/--output is required (the .tflite or .onnx file to write)")
    fmt = args.format or FORMATS.get(Path(args.output).suffix.lower())
    if fmt is None:
        raise UsageError(f"plait export: choose the format of '{args.output}': --tflite or --onnx (or an -o file "
                         "ending in .tflite or .onnx)")
    if (args.target or args.place) and not args.region:
        raise UsageError("--target and --place choose the regions for --region; without --region the whole model "
                         "is exported")
    if args.region and not args.target:
        raise UsageError("--region needs --target (the composite target whose placement makes the regions)")
    shapes = parse_input_shapes(args.input_shapes)
    mod = load_with_shapes(args.model, shapes, args.signature)
    from plait.pipeline.partitioned import partitioned

    stage("exporting")
    part = partitioned(mod, args.target, args.place) if args.region else None
    buf = _tflite(mod, part, args.region) if fmt == "tflite" else _onnx(mod, part, args.region)
    try:
        with open(args.output, "wb") as f:
            f.write(buf)
    except OSError as exc:
        raise PlaitError(f"-o: cannot write '{args.output}': {exc.strerror or exc}") from None
    what = f"region {args.region}" if args.region else "the model"
    say(f"wrote {args.output}: {what} as {'TFLite' if fmt == 'tflite' else 'ONNX'} ({len(buf):,} bytes)")
    return 0


def _tflite(mod, part, region: str | None) -> bytes:
    from plait.frontend.tflite_export import export_region, export_tflite

    return export_region(part, region) if region else export_tflite(mod)


def _onnx(mod, part, region: str | None) -> bytes:
    from plait.frontend.onnx_export import ExportError, to_onnx
    from plait.pipeline.partitioned import region_function

    if region:
        fn, names = region_function(part, region, ExportError), None
    else:
        fn, names = mod["main"], (mod.attrs.get("output_names") if mod.attrs else None)
    return to_onnx(fn, name=region or "plait", output_names=names).SerializeToString()
