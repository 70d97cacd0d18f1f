"""A module placed on a composite target and partitioned, without lowering it: the region functions
``<piece>_<k>`` that :func:`plait.frontend.tflite_export.export_region` writes as TFLite files (and
``plait export --region`` as TFLite or ONNX files).

    part = partitioned(mod, "a: c; b: c -mcpu=cortex-m7f", place="CONV_2D=b")
    regions_of(part, "b")                        # ['b_0', 'b_1', ...]  (plait.placement.partition)
    region_function(part, "b_0")                 # the Function, or a PlaitError naming the regions
"""

from __future__ import annotations

from typing import Any

from plait.errors import PlaitError
from plait.relay.expr import Function
from plait.relay.module import IRModule


def partitioned(mod: IRModule, target: Any, place: str | None = None, objective: str = "latency",
                weight: float = 0.5) -> IRModule:
    """``mod`` through the import, price, place and partition steps of the build pipeline for
    ``target`` (a composite target string or object); ``place``: placement rules as ``--place`` takes
    them."""
    from plait.ir.transform import PassContext
    from plait.pipeline import Options, Placement, run
    from plait.target import CompositeTarget

    ct = CompositeTarget(target)
    rules: tuple = ()
    if place:
        from plait.placement.rules import parse_place

        rules = parse_place(place, ct)
    return run(Options(ct, None, Placement(rules, objective, weight)), mod, PassContext(), stop="partition").mod


def region_function(mod: IRModule, region: str, error: type[PlaitError] = PlaitError) -> Function:
    """Region function ``region`` of a partitioned module; ``error`` (naming the regions there are) when
    it has none of that name."""
    regions = [k for k, f in mod.items() if isinstance(f, Function) and f.attrs and f.attrs.get("region")]
    if region not in regions:
        raise error(f"the module has no region function '{region}' (its regions: {', '.join(regions) or 'none'})")
    return mod[region]
