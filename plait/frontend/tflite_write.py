"""Writing TFLite flatbuffers: :class:`TFLiteWriter`, with the builder functions of the ``tflite``
package (schema 3).

    w = TFLiteWriter()
    x = w.tensor("x", (1, 8, 8, 3), "int8", quant=(0.5, -3))
    k = w.const("k", weights, quant=(scales, np.zeros(16, np.int64), 0))   # per channel along dim 0
    y = w.tensor("y", (1, 8, 8, 16), "int8", quant=(0.25, 1))
    w.op("CONV_2D", [x, k, b], [y], Padding=0, StrideW=1, StrideH=1)
    buf = w.finish(inputs=[x], outputs=[y])                                 # the bytes of a .tflite file

Options are given by their schema field names (``Conv2DOptions``'s ``StrideW``, ...); vector fields take
lists of ints. One subgraph, buffer 0 empty as TFLite requires, the signature ``serving_default``
naming the inputs and outputs by their tensors' names (unless ``signature=None``). Writing checks
what the writer can know (tensor indices, option names); whether the model is valid TFLite is for the
reader and the interpreters to say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from plait.errors import PlaitError
from plait.frontend.tflite_read import IDENTIFIER, SCHEMA_VERSION, TYPE_CODES

# builtin operator -> its options table, where the name is not the operator's in CamelCase + "Options"
OPTIONS: dict[str, str] = {
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions", "TRANSPOSE_CONV": "TransposeConvOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions", "AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions",
    "MEAN": "ReducerOptions", "SUM": "ReducerOptions", "REDUCE_MAX": "ReducerOptions", "REDUCE_MIN": "ReducerOptions",
    "REDUCE_PROD": "ReducerOptions", "SOFTMAX": "SoftmaxOptions", "LOG_SOFTMAX": "LogSoftmaxOptions",
    "LEAKY_RELU": "LeakyReluOptions", "HARD_SWISH": "HardSwishOptions", "ADD": "AddOptions", "SUB": "SubOptions",
    "MUL": "MulOptions", "DIV": "DivOptions", "SQUARED_DIFFERENCE": "SquaredDifferenceOptions", "EXP": "ExpOptions",
    "MINIMUM": "MaximumMinimumOptions", "MAXIMUM": "MaximumMinimumOptions", "ABS": "AbsOptions", "NEG": "NegOptions",
    "RESHAPE": "ReshapeOptions", "SQUEEZE": "SqueezeOptions", "EXPAND_DIMS": "ExpandDimsOptions",
    "CONCATENATION": "ConcatenationOptions", "SPLIT": "SplitOptions", "SPLIT_V": "SplitVOptions",
    "PACK": "PackOptions", "UNPACK": "UnpackOptions", "PAD": "PadOptions", "PADV2": "PadV2Options",
    "MIRROR_PAD": "MirrorPadOptions", "TRANSPOSE": "TransposeOptions", "STRIDED_SLICE": "StridedSliceOptions",
    "SLICE": "SliceOptions", "GATHER": "GatherOptions", "RESIZE_NEAREST_NEIGHBOR": "ResizeNearestNeighborOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions", "QUANTIZE": "QuantizeOptions", "DEQUANTIZE": "DequantizeOptions",
    "BATCH_MATMUL": "BatchMatMulOptions", "L2_NORMALIZATION": "L2NormOptions", "ARG_MAX": "ArgMaxOptions",
    "ARG_MIN": "ArgMinOptions", "SHAPE": "ShapeOptions", "FILL": "FillOptions", "ZEROS_LIKE": "ZerosLikeOptions",
    "CAST": "CastOptions", "GELU": "GeluOptions", "POW": "PowOptions",
}


@dataclass
class _Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    data: np.ndarray | None
    quant: tuple[np.ndarray, np.ndarray, int] | None


@dataclass
class _Op:
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any] = field(default_factory=dict)
    custom: str = ""


def _type_code(dtype: str) -> int:
    name = {"float32": "FLOAT32", "float16": "FLOAT16", "int32": "INT32", "uint8": "UINT8", "int64": "INT64",
            "bool": "BOOL", "int16": "INT16", "int8": "INT8", "float64": "FLOAT64", "uint64": "UINT64",
            "uint32": "UINT32", "uint16": "UINT16"}.get(dtype)
    if name is None:
        raise PlaitError(f"TFLite has no tensor type for dtype {dtype}")
    return TYPE_CODES[name]


def _quant(q: Any) -> tuple[np.ndarray, np.ndarray, int] | None:
    if q is None:
        return None
    scale, zp, *rest = q
    s = np.asarray(scale, np.float32).reshape(-1)
    z = np.asarray(zp, np.int64).reshape(-1)
    if z.size == 1 and s.size > 1:
        z = np.full(s.shape, z[0], np.int64)
    return s, z, int(rest[0]) if rest else 0


class TFLiteWriter:
    """A one-subgraph TFLite model, tensor by tensor and operator by operator."""

    def __init__(self, description: str = "plait"):
        self.description = description
        self.tensors: list[_Tensor] = []
        self.ops: list[_Op] = []

    def tensor(self, name: str, shape: Sequence[int], dtype: str = "float32", quant: Any = None) -> int:
        """A variable tensor (an input, an output or an intermediate); returns its index.
        ``quant``: ``(scale, zero_point)`` or ``(scales, zero_points, axis)``."""
        _type_code(dtype)
        self.tensors.append(_Tensor(name, tuple(int(d) for d in shape), dtype, None, _quant(quant)))
        return len(self.tensors) - 1

    def const(self, name: str, value: Any, quant: Any = None, dtype: str | None = None) -> int:
        """A constant tensor holding ``value``; returns its index."""
        arr = np.asarray(value, dtype=dtype) if dtype else np.asarray(value)
        if arr.dtype == np.float64 and dtype is None:
            arr = arr.astype(np.float32)
        _type_code(arr.dtype.name)
        self.tensors.append(_Tensor(name, tuple(arr.shape), arr.dtype.name, np.ascontiguousarray(arr), _quant(quant)))
        return len(self.tensors) - 1

    def op(self, name: str, inputs: Sequence[int], outputs: Sequence[int], custom: str = "", **options: Any) -> int:
        """An operator (a builtin's name, or ``"CUSTOM"`` with ``custom`` its code) with options by field
        name; an input of -1 is an omitted optional one. Returns its index."""
        for i in [*inputs, *outputs]:
            if not -1 <= i < len(self.tensors):
                raise PlaitError(f"TFLite writer: operator {name}: tensor index {i} is out of range")
        self.ops.append(_Op(name, tuple(inputs), tuple(outputs), dict(options), custom))
        return len(self.ops) - 1

    # ---- serialization --------------------------------------------------------------------------
    def finish(self, inputs: Sequence[int], outputs: Sequence[int], signature: str | None = "serving_default") -> bytes:
        import flatbuffers
        import tflite

        b = flatbuffers.Builder(1024)

        def ints(start: Any, values: Sequence[int]) -> int:
            start(b, len(values))
            for v in reversed(values):
                b.PrependInt32(int(v))
            return b.EndVector()

        buffers = [self._buffer(b, tflite, None)]
        tensors = []
        for t in self.tensors:
            bidx = 0
            if t.data is not None:
                buffers.append(self._buffer(b, tflite, t.data))
                bidx = len(buffers) - 1
            tensors.append(self._tensor(b, tflite, t, bidx, ints))
        codes: list[tuple[str, str]] = []
        ops = []
        for o in self.ops:
            key = (o.name, o.custom)
            if key not in codes:
                codes.append(key)
            ops.append(self._operator(b, tflite, o, codes.index(key), ints))
        code_offs = [self._opcode(b, tflite, name, custom) for name, custom in codes]
        name = b.CreateString("main")
        t_vec = self._vector(b, tflite.SubGraphStartTensorsVector, tensors)
        o_vec = self._vector(b, tflite.SubGraphStartOperatorsVector, ops)
        in_vec = ints(tflite.SubGraphStartInputsVector, inputs)
        out_vec = ints(tflite.SubGraphStartOutputsVector, outputs)
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, t_vec)
        tflite.SubGraphAddInputs(b, in_vec)
        tflite.SubGraphAddOutputs(b, out_vec)
        tflite.SubGraphAddOperators(b, o_vec)
        tflite.SubGraphAddName(b, name)
        sub = tflite.SubGraphEnd(b)
        sigs = [self._signature(b, tflite, signature, inputs, outputs)] if signature else []
        desc = b.CreateString(self.description)
        subs = self._vector(b, tflite.ModelStartSubgraphsVector, [sub])
        codes_vec = self._vector(b, tflite.ModelStartOperatorCodesVector, code_offs)
        bufs = self._vector(b, tflite.ModelStartBuffersVector, buffers)
        sig_vec = self._vector(b, tflite.ModelStartSignatureDefsVector, sigs)
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, SCHEMA_VERSION)
        tflite.ModelAddOperatorCodes(b, codes_vec)
        tflite.ModelAddSubgraphs(b, subs)
        tflite.ModelAddDescription(b, desc)
        tflite.ModelAddBuffers(b, bufs)
        tflite.ModelAddSignatureDefs(b, sig_vec)
        b.Finish(tflite.ModelEnd(b), file_identifier=IDENTIFIER)
        return bytes(b.Output())

    @staticmethod
    def _vector(b: Any, start: Any, offsets: Sequence[int]) -> int:
        start(b, len(offsets))
        for off in reversed(offsets):
            b.PrependUOffsetTRelative(off)
        return b.EndVector()

    @staticmethod
    def _buffer(b: Any, tflite: Any, data: np.ndarray | None) -> int:
        vec = None
        if data is not None:
            b.StartVector(1, data.nbytes, 16)  # 16-byte aligned constants, as the TFLite converter writes them
            raw = data.astype(data.dtype.newbyteorder("<"), copy=False).tobytes()
            b.head = b.head - len(raw)
            b.Bytes[b.head:b.head + len(raw)] = raw
            vec = b.EndVector()
        tflite.BufferStart(b)
        if vec is not None:
            tflite.BufferAddData(b, vec)
        return tflite.BufferEnd(b)

    @staticmethod
    def _tensor(b: Any, tflite: Any, t: _Tensor, bidx: int, ints: Any) -> int:
        name = b.CreateString(t.name)
        shape = ints(tflite.TensorStartShapeVector, t.shape)
        q = None
        if t.quant is not None:
            s, z, axis = t.quant
            sv = b.CreateNumpyVector(s.astype("<f4"))
            zv = b.CreateNumpyVector(z.astype("<i8"))
            tflite.QuantizationParametersStart(b)
            tflite.QuantizationParametersAddScale(b, sv)
            tflite.QuantizationParametersAddZeroPoint(b, zv)
            tflite.QuantizationParametersAddQuantizedDimension(b, axis)
            q = tflite.QuantizationParametersEnd(b)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape)
        tflite.TensorAddType(b, _type_code(t.dtype))
        tflite.TensorAddBuffer(b, bidx)
        tflite.TensorAddName(b, name)
        if q is not None:
            tflite.TensorAddQuantization(b, q)
        return tflite.TensorEnd(b)

    @staticmethod
    def _opcode(b: Any, tflite: Any, name: str, custom: str) -> int:
        code = getattr(tflite.BuiltinOperator, name, None)
        if code is None:
            raise PlaitError(f"TFLite writer: unknown builtin operator {name}")
        cc = b.CreateString(custom) if name == "CUSTOM" else None
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
        tflite.OperatorCodeAddBuiltinCode(b, code)
        tflite.OperatorCodeAddVersion(b, 1)
        if cc is not None:
            tflite.OperatorCodeAddCustomCode(b, cc)
        return tflite.OperatorCodeEnd(b)

    @staticmethod
    def _operator(b: Any, tflite: Any, o: _Op, code: int, ints: Any) -> int:
        opts, kind = None, 0
        cls = OPTIONS.get(o.name)
        if o.options and cls is None:
            raise PlaitError(f"TFLite writer: operator {o.name} takes no options, got {sorted(o.options)}")
        if cls is not None:
            vectors = {}
            for k, v in o.options.items():
                if not hasattr(tflite, f"{cls}Add{k}"):
                    raise PlaitError(f"TFLite writer: {cls} has no field {k}")
                if isinstance(v, (list, tuple)):
                    vectors[k] = ints(getattr(tflite, f"{cls}Start{k}Vector"), v)
            getattr(tflite, f"{cls}Start")(b)
            for k, v in o.options.items():
                getattr(tflite, f"{cls}Add{k}")(b, vectors[k] if k in vectors else v)
            opts, kind = getattr(tflite, f"{cls}End")(b), getattr(tflite.BuiltinOptions, cls)
        ins = ints(tflite.OperatorStartInputsVector, o.inputs)
        outs = ints(tflite.OperatorStartOutputsVector, o.outputs)
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, code)
        tflite.OperatorAddInputs(b, ins)
        tflite.OperatorAddOutputs(b, outs)
        if opts is not None:
            tflite.OperatorAddBuiltinOptionsType(b, kind)
            tflite.OperatorAddBuiltinOptions(b, opts)
        return tflite.OperatorEnd(b)

    def _signature(self, b: Any, tflite: Any, key: str, inputs: Sequence[int], outputs: Sequence[int]) -> int:
        def maps(indices: Sequence[int]) -> list[int]:
            out = []
            for i in indices:
                n = b.CreateString(self.tensors[i].name)
                tflite.TensorMapStart(b)
                tflite.TensorMapAddName(b, n)
                tflite.TensorMapAddTensorIndex(b, i)
                out.append(tflite.TensorMapEnd(b))
            return out

        ins = self._vector(b, tflite.SignatureDefStartInputsVector, maps(inputs))
        outs = self._vector(b, tflite.SignatureDefStartOutputsVector, maps(outputs))
        k = b.CreateString(key)
        tflite.SignatureDefStart(b)
        tflite.SignatureDefAddInputs(b, ins)
        tflite.SignatureDefAddOutputs(b, outs)
        tflite.SignatureDefAddSignatureKey(b, k)
        tflite.SignatureDefAddSubgraphIndex(b, 0)
        return tflite.SignatureDefEnd(b)

