"""Rearranging spatial blocks into channels and back on NCHW tensors (ONNX semantics): depth_to_space,
space_to_depth (modes DCR and CRD). Both are pure moves: the TE compute reads the input element each
output position takes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plait.ir.attrs import Attrs
from plait.op._common import ANY_DIM, AttrSpec, Family, OnnxMap, OpPattern, RelError, TensorType
from plait.op._compute import make, out_tensor_type, shape_checks, shape_of, tir
from plait.op.transform import move_cost, one_tensor
from plait.tir.expr import PrimExpr

defop = Family()


# ---- relations and references ------------------------------------------------------------------


def _block_attrs():
    return [
        AttrSpec("block_size", "int", doc="side of the spatial block"),
        AttrSpec("mode", "str", "DCR", "channel order: DCR (depth-column-row, ONNX default) or CRD",
                 choices=("DCR", "CRD")),
    ]


def _scaled(d, factor: int, divide: bool):
    if not isinstance(d, int):
        return ANY_DIM
    return d // factor if divide else d * factor


def _d2s_rel(args, attrs):
    x = one_tensor(args, "depth_to_space")
    b = attrs["block_size"]
    if x.ndim != 4:
        raise RelError(f"depth_to_space: data: expected a 4-D NCHW tensor, got {x}")
    if b < 1:
        raise RelError(f"depth_to_space: expected block_size >= 1, got {b}")
    c = x.shape[1]
    if isinstance(c, int) and c % (b * b):
        raise RelError(f"depth_to_space: expected channels divisible by block_size^2 = {b * b}, got {c}")
    return TensorType((x.shape[0], _scaled(c, b * b, True), _scaled(x.shape[2], b, False),
                       _scaled(x.shape[3], b, False)), x.dtype)


def _d2s_ref(args, attrs):
    (x,) = args
    b = attrs["block_size"]
    n, c, h, w = x.shape
    if attrs["mode"] == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(y.reshape(n, c // (b * b), h * b, w * b))


defop("depth_to_space", rel=_d2s_rel, ref=_d2s_ref, cost=move_cost, pattern=OpPattern.INJECTIVE,
      attrs=_block_attrs(), doc="ONNX DepthToSpace: (N, C, H, W) -> (N, C/b^2, H*b, W*b)")


def _s2d_rel(args, attrs):
    x = one_tensor(args, "space_to_depth")
    b = attrs["block_size"]
    if x.ndim != 4:
        raise RelError(f"space_to_depth: data: expected a 4-D NCHW tensor, got {x}")
    if b < 1:
        raise RelError(f"space_to_depth: expected block_size >= 1, got {b}")
    for axis in (2, 3):
        d = x.shape[axis]
        if isinstance(d, int) and d % b:
            raise RelError(f"space_to_depth: expected axis {axis} divisible by block_size {b}, got {d}")
    return TensorType((x.shape[0], _scaled(x.shape[1], b * b, False), _scaled(x.shape[2], b, True),
                       _scaled(x.shape[3], b, True)), x.dtype)


def _s2d_ref(args, attrs):
    (x,) = args
    b = attrs["block_size"]
    n, c, h, w = x.shape
    y = x.reshape(n, c, h // b, b, w // b, b)
    y = y.transpose(0, 3, 5, 1, 2, 4) if attrs["mode"] == "DCR" else y.transpose(0, 1, 3, 5, 2, 4)
    return np.ascontiguousarray(y.reshape(n, c * b * b, h // b, w // b))


defop("space_to_depth", rel=_s2d_rel, ref=_s2d_ref, cost=move_cost, pattern=OpPattern.INJECTIVE,
      attrs=_block_attrs(), doc="ONNX SpaceToDepth (mode DCR; CRD is the inverse of depth_to_space CRD): "
                                "(N, C, H, W) -> (N, C*b^2, H/b, W/b)")


# ---- TE computes ----------------------------------------------------------------------------------


def _block_channel(co: PrimExpr, b1: PrimExpr, b2: PrimExpr, b: int, depth: int, dcr: bool) -> PrimExpr:
    """The channel holding block offset (b1, b2) of channel ``co`` (``depth`` channels per offset)."""
    return (b1 * b + b2) * depth + co if dcr else co * (b * b) + b1 * b + b2


@defop.compute("depth_to_space")
def _depth_to_space(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    n, c, h, w = shape_of(x, "depth_to_space")
    b = attrs["block_size"]
    shape, _ = out_tensor_type(out_type, "depth_to_space", like=(n, c // (b * b), h * b, w * b))
    dcr = attrs["mode"] == "DCR"

    def body(n: PrimExpr, co: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        if b == 1:
            return x[n, co, y, z]
        return x[n, _block_channel(co, y % b, z % b, b, c // (b * b), dcr), y // b, z // b]

    return make("depth_to_space", shape, body)


@defop.compute("space_to_depth")
def _space_to_depth(inputs: list, attrs: Attrs, out_type: Any) -> Any:
    (x,) = inputs
    n, c, h, w = shape_of(x, "space_to_depth")
    b = attrs["block_size"]
    shape, _ = out_tensor_type(out_type, "space_to_depth", like=(n, c * b * b, h // b, w // b))
    dcr = attrs["mode"] == "DCR"

    def body(n: PrimExpr, co: PrimExpr, y: PrimExpr, z: PrimExpr) -> PrimExpr:
        if b == 1:
            return x[n, co, y, z]
        # co = _block_channel(ci, b1, b2): invert it
        if dcr:
            ci, blk = co % c, co // c
        else:
            ci, blk = co // (b * b), co % (b * b)
        b1, b2 = blk // b, blk % b
        return x[n, ci, y * b + b1, z * b + b2]

    # a symbolic H or W must be a multiple of the block (the relation checks static ones)
    checks = shape_checks("space_to_depth", [tir.eq(d % b, 0) for d in (h, w) if not isinstance(d, int) and b > 1])
    return make("space_to_depth", shape, body, checks=checks)


# ---- ONNX -----------------------------------------------------------------------------------------


def _space_to_depth_onnx(ex: Any) -> str:
    if ex.attrs["mode"] != "DCR":
        raise ex.fail(f"space_to_depth mode '{ex.attrs['mode']}' (ONNX SpaceToDepth is DCR only)")
    return ex.node("SpaceToDepth", ex.ins, blocksize=ex.attrs["block_size"])


# imported by the frontend's converters (the transpose/reshape forms of DepthToSpace and SpaceToDepth)
defop.onnx("depth_to_space", OnnxMap("DepthToSpace", attrs={"blocksize": "block_size", "mode": "mode"},
                                     convert=False))
defop.onnx("space_to_depth", OnnxMap("SpaceToDepth", convert=False, export=_space_to_depth_onnx))
