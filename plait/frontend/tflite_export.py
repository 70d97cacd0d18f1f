"""Export a Relay function to TFLite: ``export_tflite(mod_or_function) -> bytes`` (a ``.tflite`` file),
and ``export_region(partitioned_mod, region)`` for one region function of a placed module.

    buf = export_tflite(mod)                       # float32 or int8, one subgraph, NHWC
    regions = partitioned(mod, "a: c; b: c -mcpu=cortex-m7f", place="CONV_2D=b")  # plait.pipeline.partitioned
    buf = export_region(regions, "b_0")            # one region function of a placed module

A module first goes through plait's import passes (``infer_type``, ``qdq_to_integer``,
``fold_constant``, ``fold_batch_norm``: what placement sees), so an ONNX model's batch norms are
folded; a bare function is exported as it is. Its parameters become the model's inputs (in order,
named after the parameters, or the module's ``input_names``), its result (a tensor or a tuple of
tensors) the outputs. The file is written with :class:`~plait.frontend.tflite_write.TFLiteWriter`
(the ``tflite`` package's builder functions), signature ``serving_default``.

Operator mapping (the converters of :mod:`~plait.frontend.tflite_export_ops` and
:mod:`~plait.frontend.tflite_export_quant`):

=========================================================  ===========================================
plait                                                      TFLite
=========================================================  ===========================================
nn.conv2d (+ add bias) (+ relu / clip)                     CONV_2D (OHWI), DEPTHWISE_CONV_2D ([1, KH, KW,
                                                           O]; groups = C), fused activation; PAD first
                                                           when the padding is neither SAME nor VALID
nn.dense, nn.matmul with a constant matrix (+ bias, act)   FULLY_CONNECTED; else BATCH_MATMUL
nn.avg_pool2d, nn.max_pool2d                               AVERAGE_POOL_2D, MAX_POOL_2D (SAME / VALID)
nn.global_avg_pool2d / global_max_pool2d, mean, sum, ...   AVERAGE_POOL_2D / MAX_POOL_2D over the plane,
                                                           MEAN, SUM, REDUCE_MAX, REDUCE_MIN, REDUCE_PROD
nn.softmax, nn.log_softmax (last axis or channels)         SOFTMAX, LOG_SOFTMAX
add subtract multiply divide maximum minimum power         ADD SUB MUL DIV MAXIMUM MINIMUM POW
nn.relu, clip(0, 6), clip(-1, 1), other clip               fused, else RELU RELU6 RELU_N1_TO_1; MAXIMUM
                                                           and MINIMUM with constants
sigmoid tanh exp sqrt rsqrt abs negative log floor         LOGISTIC TANH EXP SQRT RSQRT ABS NEG LOG FLOOR
nn.leaky_relu nn.hard_swish nn.elu nn.gelu cast            LEAKY_RELU HARD_SWISH ELU GELU CAST
reshape squeeze expand_dims flatten; transpose; concat     RESHAPE; TRANSPOSE; CONCATENATION
qnn.conv2d + add + qnn.requantize(fixed)                   int8 CONV_2D / DEPTHWISE_CONV_2D, per-channel
qnn.dense + add + qnn.requantize(fixed)                    int8 FULLY_CONNECTED
int8 ADD / SUB / MUL of the TFLite importer                ADD SUB MUL (int8)
qnn.fixed_softmax, qnn.avg_pool2d, nn.max_pool2d on int8   SOFTMAX, AVERAGE_POOL_2D, MAX_POOL_2D (int8)
qnn.quantize / the importer's QUANTIZE, qnn.dequantize     QUANTIZE, DEQUANTIZE
=========================================================  ===========================================

Layout: TFLite is NHWC; plait computes convolutions and pools channels-first. The exporter keeps a
channels-first value as a view of an NHWC tensor (the TFLite importer's transposes vanish) and writes a
TRANSPOSE only where plait's order is needed (a reshape of a spatial value, a result) or where a
channels-first value from ONNX meets a spatial operator. Quantized models: TFLite keeps tensor scales,
plait's integer operators keep multipliers; the scales come from call meta ``tflite_q`` /
``tflite_qin`` (recorded by the TFLite importer) and the weights' per-channel scales are recovered
from the fixed-point multipliers (the float32 scale whose multiplier is the one in the model, so that
reading the file back gives the same multipliers and the same bits). A call without a mapping is
refused: :class:`TFLiteExportError` ``cannot export to TFLite: operator OP (call 'NAME') has no
TFLite mapping``. ``qnn.quantize`` rounds ties to even, TFLite's QUANTIZE away from zero.
"""

from __future__ import annotations

from plait.frontend import tflite_export_ops, tflite_export_quant  # noqa: F401 - they fill CONVERTERS
from plait.frontend.tflite_export_core import CONVERTERS, Exporter, TFLiteExportError
from plait.relay.expr import Function
from plait.relay.module import IRModule

__all__ = ["TFLiteExportError", "export_region", "export_tflite", "mapped_operators"]


def _prepared(mod: IRModule) -> IRModule:
    """``mod`` through plait's import passes (``plait.pipeline.import_passes``: what placement sees)."""
    from plait.ir.transform import PassContext
    from plait.relay.infer import InferType
    from plait.relay.passes import FoldBatchNorm, FoldConstant, QDQToInteger

    ctx = PassContext()
    for p in (InferType(), QDQToInteger(), FoldConstant(), FoldBatchNorm()):
        mod = ctx.run(p, mod)
    return mod


def export_tflite(mod_or_function: IRModule | Function, *, description: str = "plait",
                  prepare: bool = True, channels_last: bool = False) -> bytes:
    """The bytes of a ``.tflite`` file computing ``@main`` of a module (after the import passes unless
    ``prepare=False``), or a typed function (a region function, as it is). ``channels_last``: the
    function's 4-D parameters and results are channels-first (as a region function's are) and the file
    takes and gives them NHWC, without a TRANSPOSE at the boundary (what an NPU compiler wants)."""
    if isinstance(mod_or_function, IRModule):
        mod = _prepared(mod_or_function) if prepare else mod_or_function
        fn = mod["main"]
        names = (mod.attrs.get("input_names"), mod.attrs.get("output_names")) if mod.attrs else (None, None)
    elif isinstance(mod_or_function, Function):
        fn, names = mod_or_function, (None, None)
        if not fn.body.has_type:
            from plait.relay.infer import infer_expr

            infer_expr(fn)
    else:
        raise TFLiteExportError(f"export_tflite takes an IRModule or a Function, got {type(mod_or_function).__name__}")
    if len(fn.params) != len(names[0] or fn.params):
        names = (None, names[1])
    return Exporter(fn, description).run(*names, channels_last=channels_last)


def export_region(mod: IRModule, region: str, channels_last: bool = False) -> bytes:
    """One region function (``<piece>_<k>``) of a partitioned module as a TFLite file; ``mod`` is what
    :func:`plait.pipeline.partitioned.partitioned` returns (or ``Partitioned.mod`` of the pipeline). Its
    parameters and results are the values entering and leaving the region, in plait's layout
    (channels-first for 4-D values), or NHWC with ``channels_last``."""
    regions = [k for k, f in mod.items() if isinstance(f, Function) and f.attrs and f.attrs.get("region")]
    if region not in regions:
        raise TFLiteExportError(f"the module has no region function '{region}' (its regions: "
                                f"{', '.join(regions) or 'none'})")
    return export_tflite(mod[region], description=f"plait region {region}", channels_last=channels_last)


def mapped_operators() -> list[str]:
    """The plait operators the exporter maps (some only in the forms of the table above)."""
    return sorted(CONVERTERS)
