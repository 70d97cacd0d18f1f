"""Graph-level passes over Relay modules: operator fusion (:class:`FuseOps`) and canonicalizations
(:class:`FoldConstant`, :class:`FoldBatchNorm`), :class:`QDQToInteger` (quantized patterns onto
integer operators) and :class:`ChannelsLast` (int8 convolutions channels-last)."""

from plait.relay.passes.channels_last import ChannelsLast
from plait.relay.passes.fold_batch_norm import FoldBatchNorm
from plait.relay.passes.fold_constant import FoldConstant
from plait.relay.passes.qdq import FixedPointRequantize, FloatRequantize, QDQToInteger
from plait.relay.passes.fuse_ops import FUSION_PATTERN_OVERRIDES, FuseOps, find_groups, fuse_function, fusion_pattern

__all__ = ["FUSION_PATTERN_OVERRIDES", "ChannelsLast", "FixedPointRequantize", "FloatRequantize", "FoldBatchNorm", "FoldConstant", "FuseOps", "QDQToInteger", "find_groups", "fuse_function",
           "fusion_pattern"]
